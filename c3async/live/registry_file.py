"""One file of Claude Code's registry of running processes, ``$CLAUDE_CONFIG_DIR/sessions/<pid>.json``,
read and judged with the standard library alone: the status line reads the registry in every
window after each response, and pays for ``json`` and ``os``, no more. ``running`` reads the
folder (and keeps what it found, for a reader that polls) with these same functions.

A file is untrusted input: read only when it is a regular file named ``<pid>.json``, never
through a link, at most ``MAX_BYTES``, from a folder that is itself no link. A field of the wrong
type makes the file unreadable (as a typed decoder would); a time is read only when in range
(``ground.clock``); the text shown is cut and has no control character.
"""

from __future__ import annotations

import json
import os
import re
import stat
from contextlib import contextmanager

from ..ground import clock, peek

TYPE_CHECKING = False  # typing itself costs the status line 2 ms
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

__all__ = (
    "MAX_BYTES",
    "MAX_FILES",
    "STATES",
    "Registered",
    "clean",
    "decode",
    "holds",
    "listed",
    "proc_start_ticks",
    "read",
    "registry_time",
    "start_matches",
)

STATES = ("busy", "idle", "waiting")
MAX_BYTES = 64 * 1024  # a registry file is ~1 KB; anything far bigger is not one
MAX_FILES = 4096  # running processes worth looking at; a folder stuffed with more is cut here
NAME = re.compile(r"([1-9][0-9]{0,9})\.json")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# The fields read, and the type each must have when present (None: any value; the reader of
# that field checks it, so an odd value spoils that field only).
_FIELDS: dict[str, type | None] = {
    "pid": int,
    "sessionId": str,
    "cwd": str,
    "procStart": None,
    "startedAt": None,
    "status": str,
    "statusUpdatedAt": None,
    "waitingFor": str,
    "name": str,
    "kind": str,
}


class Registered:
    """A registry file as written (only the fields read; any may be missing)."""

    __slots__ = tuple(_FIELDS)

    pid: int | None
    sessionId: str | None  # Claude Code's names
    cwd: str | None
    procStart: Any
    startedAt: Any
    status: str | None
    statusUpdatedAt: Any
    waitingFor: str | None
    name: str | None
    kind: str | None

    def __init__(self, **fields: Any) -> None:
        for key in _FIELDS:
            setattr(self, key, fields.get(key))

    @property
    def session_id(self) -> str | None:
        """The session it names, when that is a session id."""
        sid = self.sessionId
        return sid if sid and UUID.fullmatch(sid) else None

    @property
    def state(self) -> str | None:
        """busy, idle or waiting (None: not said, or not one of those)."""
        return self.status if self.status in STATES else None

    @property
    def folder(self) -> str | None:
        """Its cwd, when that is an absolute path."""
        cwd = self.cwd
        return cwd if cwd is not None and os.path.isabs(cwd) and "\0" not in cwd else None

    def since(self, where: object) -> float | None:
        """When its state was set (epoch seconds), when it has one and the time is in range."""
        return registry_time(self.statusUpdatedAt, where) if self.state else None


def decode(data: bytes) -> Registered | None:
    """A registry file's bytes as read, or None when they are not one."""
    try:
        found = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(found, dict):
        return None
    for key, kind in _FIELDS.items():
        value = found.get(key)
        if value is not None and kind is not None and (type(value) is bool or not isinstance(value, kind)):
            return None
    return Registered(**found)


def proc_start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat: the process start time in clock ticks (Linux)."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        data = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        return int(data[data.rindex(b")") + 2 :].split()[19])
    except (ValueError, IndexError):
        return None


def registry_time(value: Any, where: object) -> float | None:
    """A time of a registry file (milliseconds since 1970, as Claude Code writes them; seconds
    in older files) as epoch seconds, when it is one in range (``ground.clock``; else None,
    said once)."""
    ms = isinstance(value, int | float) and not isinstance(value, bool) and value > 1e11
    return clock.event(value, "a registry time", where, scale=0.001 if ms else 1.0)


def start_matches(reg: Registered, pid: int, where: object = "") -> bool:
    """Whether the process now running as ``pid`` is the one that wrote ``reg`` (not a process
    that reused its pid): the start ticks where /proc has them, else psutil's start time.
    ``where``: the file, named if its start time is out of range."""
    ticks = proc_start_ticks(pid)
    if ticks is not None and reg.procStart is not None:
        if not isinstance(reg.procStart, int | str) or isinstance(reg.procStart, bool):
            return False
        try:
            return int(reg.procStart) == ticks
        except ValueError:  # not digits, or more of them than int() takes
            return False
    started = registry_time(reg.startedAt, where or f"the registry file of {pid}")
    if started is not None:  # no /proc: compare wall-clock start times, to the second
        try:
            import psutil

            created = psutil.Process(pid).create_time()
        except Exception:  # gone, or not ours to inspect
            return False
        return abs(created - started) < 2.0
    return False


def holds(reg: Registered, pid: int, where: object = "") -> bool:
    """Whether the process running as ``pid`` (the file's name) wrote ``reg`` and runs still."""
    return (reg.pid is None or reg.pid == pid) and start_matches(reg, pid, where)


def clean(text: str | None, limit: int = 200) -> str | None:
    """A name as shown: cut at ``limit`` characters, with no control character."""
    if not isinstance(text, str) or not text:
        return None
    return "".join(ch for ch in text[:limit] if ch.isprintable()) or None


def read(dfd: int | None, folder: str, name: str) -> Registered | None:
    """One registry file, or None unless it is a readable regular file of sane size (opened
    without following a link, without blocking on a FIFO)."""
    try:
        fd = peek.open_below(folder, name) if dfd is None else peek.open_at(dfd, name)
    except OSError:
        return None
    try:
        if os.fstat(fd).st_size > MAX_BYTES:
            return None
        data = peek.pread_all(fd, 0, MAX_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    return decode(data)


@contextmanager
def listed(
    folder: str, known: Callable[[os.stat_result], list[str] | None] | None = None
) -> Iterator[tuple[int | None, os.stat_result, list[str]] | None]:
    """The folder's descriptor (None without ``dir_fd`` support: ``read`` then goes by name), its
    stat and the names of its registry files (sorted, at most ``MAX_FILES``), while the caller
    reads them; None when it is missing, a link or no folder. ``known(stat)``: the names a
    poller kept for the folder at this stat (not listed again), or None."""
    dfd: int | None = None
    try:
        if os.open in os.supports_dir_fd:  # the folder itself opened without following a link
            dfd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0))
            st = os.fstat(dfd)
        else:
            st = os.lstat(folder)
            if not stat.S_ISDIR(st.st_mode):
                raise NotADirectoryError(folder)
        names = known(st) if known is not None else None
        if names is None:
            names = sorted(n for n in os.listdir(dfd if dfd is not None else folder) if NAME.fullmatch(n))
    except OSError:  # missing, a link, or not a folder
        if dfd is not None:
            os.close(dfd)
        yield None
        return
    try:
        yield dfd, st, names[:MAX_FILES]
    finally:
        if dfd is not None:
            os.close(dfd)
