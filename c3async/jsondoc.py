"""Shared JSON documents: atomic replace, and locked read-modify-write.

A document is never written in place (a reader would see half of it): write a temp file in the
same folder, fsync, ``os.replace``. A document that does not parse is never overwritten:
``update`` raises ``CorruptDocument`` naming the file and its backup, and the file stays as it
was.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import msgspec

from .errors import C3Error
from .locking import locked

__all__ = ("CorruptDocument", "backup_path", "read", "update", "write_atomic")

T = TypeVar("T")
R = TypeVar("R")


class CorruptDocument(C3Error):
    """Raised when a shared JSON document exists but does not parse; it is left untouched."""

    def __init__(self, path: Path, detail: str) -> None:
        self.path = path
        backup = backup_path(path)
        where = f"the last good copy is {backup}" if backup.exists() else "there is no backup yet"
        super().__init__(
            f"{path} does not parse ({detail}); it was left untouched and nothing was changed. "
            f"Repair it, or replace it with a good copy ({where}), then try again."
        )


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + ".bak")


def write_atomic(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` so that readers see the old or the new file, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        _replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if fsync and sys.platform != "win32":
        try:
            dir_fd = os.open(path.parent, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(dir_fd)
        except OSError:
            pass
        finally:
            os.close(dir_fd)


def _replace(src: str, dst: Path) -> None:
    # On Windows a reader holding the file open makes os.replace fail for a moment: retry ~1 s.
    for attempt in range(50):
        try:
            os.replace(src, dst)
            return
        except PermissionError:
            if sys.platform != "win32" or attempt == 49:
                raise
            time.sleep(0.02)


def read(path: Path, type_: type[T], default: Callable[[], T]) -> T:
    """Decode ``path`` as ``type_``; ``default()`` when it does not exist. Raises CorruptDocument."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return default()
    try:
        return msgspec.json.decode(data, type=type_)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CorruptDocument(path, str(exc)) from None


def update(
    path: Path, type_: type[T], default: Callable[[], T], change: Callable[[T], R], *, backup: bool = False,
) -> R:
    """Lock ``<path>.lock``, read, let ``change`` modify the document in place, write a temp
    file, fsync, replace. Returns what ``change`` returns; if it raises, nothing is written.
    When the document comes out unchanged (the same encoded bytes), nothing is written either.
    ``backup``: keep the file being replaced as ``<path>.bak``, the last good copy."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path):
        try:
            old: bytes | None = path.read_bytes()
        except FileNotFoundError:
            old = None
        try:
            doc = default() if old is None else msgspec.json.decode(old, type=type_)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise CorruptDocument(path, str(exc)) from None
        before = msgspec.json.encode(doc)
        result = change(doc)
        after = msgspec.json.encode(doc)
        if after != before or old is None:
            if backup and old is not None:
                write_atomic(backup_path(path), old, fsync=False)
            write_atomic(path, msgspec.json.format(after, indent=1) + b"\n")
        return result
