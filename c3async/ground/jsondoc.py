"""Shared JSON documents: atomic replace, and locked read-modify-write.

A document is never written in place (a reader would see half of it): write a temp file in the
same folder, fsync, ``os.replace``. A document that does not parse is never overwritten:
``update`` raises ``CorruptDocument`` naming the file and its backup, and the file stays as it
was.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from . import safefs
from .errors import DECODE_ERRORS, CorruptDocument, NewerDocument
from .locking import locked

__all__ = ("backup_path", "read", "update", "write_atomic")

T = TypeVar("T")
R = TypeVar("R")


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + ".bak")


def write_atomic(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` so that readers see the old or the new file, never a mix."""
    safefs.write_atomic(path, data, fsync=fsync)


def read(path: Path, type_: type[T], default: Callable[[], T], *, limit: int | None = None) -> T:
    """Decode ``path`` as ``type_``; ``default()`` when it does not exist. Raises CorruptDocument
    (and UnsafeState for a link or a special file), also for a file over ``limit`` bytes. Fields
    this version does not know are ignored here and kept by ``update``."""
    try:
        data = _read_bytes(path, limit)
    except FileNotFoundError:
        return default()
    try:
        return msgspec.json.decode(data, type=type_)
    except DECODE_ERRORS as exc:
        raise CorruptDocument(path, _why(exc), backup_path(path)) from None


def _read_bytes(path: Path, limit: int | None) -> bytes:
    """The document's bytes; CorruptDocument when there are more than ``limit`` (a document that
    size is not one of ours, and is never read whole)."""
    data = safefs.read_bytes(path, None if limit is None else limit + 1)
    if limit is not None and len(data) > limit:
        raise CorruptDocument(path, f"larger than {limit:,} bytes", backup_path(path))
    return data


def _why(exc: BaseException) -> str:
    return "nested too deeply" if isinstance(exc, RecursionError) else str(exc)


def update(
    path: Path,
    type_: type[T],
    default: Callable[[], T],
    change: Callable[[T], R],
    *,
    backup: bool = False,
    limit: int | None = None,
) -> R:
    """Lock ``<path>.lock``, read, let ``change`` modify the document in place, write a temp
    file, fsync, replace. Returns what ``change`` returns; if it raises, nothing is written.
    When the document comes out unchanged (the same encoded bytes), nothing is written either.
    ``backup``: keep the file being replaced as ``<path>.bak``, the last good copy. ``limit``: a
    file over this many bytes is refused as CorruptDocument (never read whole).

    Forward compatible: fields (at any depth) that ``type_`` does not know are carried over from
    the file as they were, and a document whose ``version`` is newer than ``default()``'s is
    refused with NewerDocument rather than rewritten by a version that would lose its data."""
    safefs.ensure_dir(path.parent)
    with locked(path):
        try:
            old: bytes | None = _read_bytes(path, limit)
        except FileNotFoundError:
            old = None
        fresh = default()
        raw: Any = None
        try:
            if old is None:
                doc = fresh
            else:
                raw = msgspec.json.decode(old)
                doc = msgspec.convert(raw, type=type_)
        except DECODE_ERRORS as exc:
            raise CorruptDocument(path, _why(exc), backup_path(path)) from None
        known = getattr(fresh, "version", None)
        found = raw.get("version") if isinstance(raw, dict) else None
        if isinstance(known, int) and isinstance(found, int) and found > known:
            raise NewerDocument(path, found, known)
        before = msgspec.json.encode(doc)
        result = change(doc)
        after = msgspec.json.encode(doc)
        if after != before or old is None:
            if raw is not None:
                after = msgspec.json.encode(keep_unknown(raw, msgspec.to_builtins(doc)))
            if backup and old is not None:
                safefs.write_atomic(backup_path(path), old, fsync=False)
            safefs.write_atomic(path, msgspec.json.format(after, indent=1) + b"\n")
        return result


def keep_unknown(old: Any, new: Any) -> Any:
    """``new`` with every key of ``old`` that ``new`` lacks put back, at any depth. Lists of
    objects are matched by ``id`` when their items have one, else by position."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key, value in old.items():
            if key not in new:
                new[key] = value
            else:
                new[key] = keep_unknown(value, new[key])
        return new
    if isinstance(old, list) and isinstance(new, list):
        if all(isinstance(o, dict) and "id" in o for o in old) and all(isinstance(n, dict) for n in new):
            by_id = {o["id"]: o for o in old if isinstance(o["id"], (str, int))}
            return [keep_unknown(by_id[n["id"]], n) if n.get("id") in by_id else n for n in new]
        return [keep_unknown(o, n) for o, n in zip(old, new)] + new[len(old) :]
    return new
