"""A disk is finite: the room a filesystem has, the error a full one is reported as, and the
temp files a write killed halfway leaves behind.

- ``DiskFull`` (``ground.errors``): ENOSPC and EDQUOT (and SQLite's "database or disk is full")
  are one message wherever they happen, "the disk holding X is full: N bytes free; free space
  and run again". It is a C3Error (the doors print it) and an OSError with errno ENOSPC (code
  that tolerates a failed write, a cache's, tolerates it as before).
- ``room``: what a copy may take from a filesystem: its free space less a reserve left for
  everything else, 5% of the filesystem and at most 1 GiB (``reserve``). The reserve is
  headroom for what keeps writing after the check (Claude Code's own transcripts, the user's
  builds): a GiB is hours of that, and 5% keeps a small disk (a VM's, a tmpfs) usable.
- ``clear_stale_temps``: the temp names c3async writes beside a file (``.<name>.<16 hex>.tmp``)
  that are older than ``STALE_TEMP_S`` are removed by the next write of that file. A writer's
  temp file lives from its creation to its rename, a fraction of a second for a document, and a
  long copy touches its file with every chunk: an hour without a write is a writer that was
  killed. Only regular files of this account, never through a link.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager

from .errors import DiskFull

__all__ = (
    "STALE_TEMP_S",
    "clear_stale_temps",
    "free_bytes",
    "full",
    "is_full",
    "reported",
    "reserve",
    "said",
)

FULL_ERRNOS = frozenset(e for e in (errno.ENOSPC, getattr(errno, "EDQUOT", None)) if e is not None)
SQLITE_FULL = 13  # a primary result code; sqlite3 exceptions carry it in ``sqlite_errorcode``
RESERVE_SHARE = 0.05
RESERVE_MAX = 1 << 30
STALE_TEMP_S = 3600.0
_TEMP_TAIL = re.compile(r"[0-9a-f]{16}\.tmp")


def free_bytes(path: str | os.PathLike[str]) -> int | None:
    """Bytes an unprivileged writer may still put on the filesystem holding ``path`` (None: it
    cannot be asked)."""
    try:
        st = os.statvfs(path)
    except (OSError, AttributeError):  # AttributeError: no statvfs (Windows)
        return None
    return st.f_bavail * st.f_frsize


def reserve(path: str | os.PathLike[str]) -> int:
    """Bytes of the filesystem holding ``path`` that a copy leaves free (see the docstring)."""
    try:
        st = os.statvfs(path)
    except (OSError, AttributeError):
        return RESERVE_MAX
    return min(RESERVE_MAX, int(st.f_blocks * st.f_frsize * RESERVE_SHARE))


def is_full(exc: BaseException) -> bool:
    """Did ``exc`` come of a full disk or an exhausted quota?"""
    if isinstance(exc, OSError) and exc.errno in FULL_ERRNOS:
        return True
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF == SQLITE_FULL


def full(where: str | os.PathLike[str] | None) -> DiskFull:
    """The DiskFull of the filesystem holding ``where`` (the folder written to)."""
    return DiskFull(where, free_bytes(where) if where is not None else None)


def said(exc: BaseException) -> BaseException:
    """What a door says for ``exc``: a full disk that no writer named (``os.write`` gives no
    file name) as a DiskFull, anything else as it is."""
    if not is_full(exc) or isinstance(exc, DiskFull):
        return exc
    name = getattr(exc, "filename", None)
    return full(os.path.dirname(name) if isinstance(name, str) and os.path.isabs(name) else None)


@contextmanager
def reported(where: str | os.PathLike[str]) -> Iterator[None]:
    """Writes to the folder ``where``: a full disk raised inside is a DiskFull naming it."""
    try:
        yield
    except OSError as exc:
        if is_full(exc) and not isinstance(exc, DiskFull):
            raise full(where) from exc
        raise


def clear_stale_temps(folder: int | str | os.PathLike[str], name: str) -> int:
    """Remove the temp files of ``name`` (``.<name>.<16 hex>.tmp``) in ``folder`` (a descriptor
    of it, or its path) that killed writers left at least ``STALE_TEMP_S`` ago; a younger one
    may be a live writer's and stays. Returns how many were removed; never raises."""
    dir_fd, base = (folder, "") if isinstance(folder, int) else (None, os.fspath(folder))
    prefix = f".{name}."
    try:
        names = os.listdir(base if dir_fd is None else dir_fd)
    except OSError:
        return 0
    removed = 0
    now = time.time()
    for n in names:
        if not n.startswith(prefix) or not _TEMP_TAIL.fullmatch(n, len(prefix)):
            continue
        path = os.path.join(base, n)
        try:
            st = os.lstat(path, dir_fd=dir_fd)
            mine = not hasattr(os, "geteuid") or st.st_uid == os.geteuid()
            if stat.S_ISREG(st.st_mode) and mine and now - st.st_mtime >= STALE_TEMP_S:
                os.unlink(path, dir_fd=dir_fd)
                removed += 1
        except OSError:
            continue
    return removed
