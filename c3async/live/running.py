"""Claude Code's own registry of running processes: ``$CLAUDE_CONFIG_DIR/sessions/<pid>.json``.

Every running claude (interactive or ``-p``) keeps one file with its ``sessionId``, ``cwd``,
``procStart`` (its start time in clock ticks: field 22 of ``/proc/<pid>/stat``) and ``status``
(``busy``, ``idle``, ``waiting``, with ``statusUpdatedAt`` in ms). A clean exit removes it; a
SIGKILLed claude leaves it behind, and its pid may be reused. So a file counts only while a
process with its pid runs with the same start time; the rest are ignored, never deleted (they
are Claude Code's files).

The files are untrusted input: only regular files named ``<pid>.json`` are read, never through a
link, at most ``MAX_BYTES`` each, from a ``sessions`` folder that is itself no link.
"""

from __future__ import annotations

import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from ..ground import clock, safefs
from ..ground.errors import DECODE_ERRORS

__all__ = (
    "STATES",
    "Registered",
    "Running",
    "Snapshot",
    "proc_start_ticks",
    "read_registry",
    "running",
    "start_matches",
)

STATES = ("busy", "idle", "waiting")
MAX_BYTES = 64 * 1024  # a registry file is ~1 KB; anything far bigger is not one
MAX_FILES = 4096  # running processes worth looking at; a folder stuffed with more is cut here
SETTLE_S = 2.0  # a file or folder written this recently may be written again in the same clock tick
# A reader that polls (the Hub, four times a second) keeps, per folder, what its last full read
# found (``_Held``): a file found ended or no registry file stays so until it is written again (a
# process once gone never comes back; a claude that reuses its pid writes its own file), so it is
# not read again while its stat holds; the folder is listed again only when its own stat moves.
# Each read stats the files of running processes and a slice of the settled ones (a RECHECK_PARTS-th,
# in turn): every settled file is stat'ed again over RECHECK_PARTS reads (15 s at four reads a
# second), at an even cost per read. Thousands of files that killed claudes left behind cost a
# slice of stats per read, and no read pays for all of them at once.
RECHECK_PARTS = 60
_held: dict[str, _Held] = {}
_NAME = re.compile(r"([1-9][0-9]{0,9})\.json")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class Registered(msgspec.Struct):
    """A registry file as written (only the fields read; any may be missing or odd)."""

    pid: int | None = None
    sessionId: str | None = None
    cwd: str | None = None
    # Any: a value of the wrong type spoils that field only (``start_matches``, ``registry_time``)
    procStart: Any = None
    startedAt: Any = None
    status: str | None = None
    statusUpdatedAt: Any = None
    waitingFor: str | None = None
    name: str | None = None
    kind: str | None = None


@dataclass(frozen=True, slots=True)
class Running:
    """A claude process that runs now, and the session it holds."""

    session_id: str
    pid: int
    cwd: str | None
    state: str | None  # busy, idle or waiting (None: not said, or not one of those)
    state_since: float | None  # epoch seconds
    waiting_for: str | None
    name: str | None
    kind: str | None  # interactive, print, bg...


def proc_start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat: the process start time in clock ticks (Linux)."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
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


def _clean(text: str | None, limit: int = 200) -> str | None:
    if not isinstance(text, str) or not text:
        return None
    return "".join(ch for ch in text[:limit] if ch.isprintable()) or None


def _read(dfd: int | None, folder: Path, name: str) -> Registered | None:
    """One registry file, or None unless it is a readable regular file of sane size (opened
    without following a link, without blocking on a FIFO)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        if dfd is not None:
            fd = os.open(name, flags, dir_fd=dfd)
        else:
            if not stat.S_ISREG(os.lstat(folder / name).st_mode):
                return None
            fd = os.open(folder / name, flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
            return None
        data = safefs.pread_all(fd, 0, MAX_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        return msgspec.json.decode(data, type=Registered)
    except DECODE_ERRORS:
        return None


@dataclass(frozen=True, slots=True)
class Snapshot:
    running: list[Running]  # one per claude process that runs now
    ended: frozenset[str]  # sessions whose file outlived its process (SIGKILLed) and that no process holds now


def running(folder: Path | None = None) -> list[Running]:
    """The sessions held by claude processes that run now, one per process."""
    return read_registry(folder).running


def read_registry(folder: Path | None = None) -> Snapshot:
    """What the registries say now (``folder``'s, else those of every Claude Code root): who
    runs, and who was left behind by a killed process."""
    if folder is None:
        from ..stores.claude_dirs import roots

        snaps = [_read_folder(r.sessions) for r in roots()]
        if len(snaps) == 1:
            return snaps[0]
        running = [r for snap in snaps for r in snap.running]
        held = {r.session_id for r in running}
        return Snapshot(running, frozenset(s for snap in snaps for s in snap.ended) - held)
    return _read_folder(folder)


def _read_folder(folder: Path) -> Snapshot:
    dfd: int | None = None
    try:
        if os.open in os.supports_dir_fd:  # the folder itself opened without following a link
            dfd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0))
            st = os.fstat(dfd)
        else:
            st = os.lstat(folder)
            if not stat.S_ISDIR(st.st_mode):
                return Snapshot([], frozenset())
    except OSError:
        return Snapshot([], frozenset())  # missing, a link, or not a folder
    try:
        return _collect(dfd, folder, (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns))
    except OSError:
        return Snapshot([], frozenset())
    finally:
        if dfd is not None:
            os.close(dfd)


@dataclass(slots=True)
class _Held:
    """What a read kept of a registry folder for the next (see ``RECHECK_PARTS``)."""

    sig: tuple  # the folder's stat when listed
    names: list[str]  # the registry files' names then
    settled: dict[str, tuple]  # name -> (the file's stat, the session it names if ended, else None)
    left: frozenset[str]  # the sessions the settled files name
    active: list[str]  # the other names: files of running processes, or written too recently to judge
    turn: int = 0  # the slice of ``names`` the next read stats again


def _collect(dfd: int | None, folder: Path, sig: tuple) -> Snapshot:
    key = str(folder)
    held = _held.get(key)
    settle_ns = time.time_ns() - int(SETTLE_S * 1e9)
    if held is not None and held.sig == sig and sig[2] < settle_ns:
        # The folder as listed before: its active files, and a slice of the settled ones, again.
        part = -(-len(held.names) // RECHECK_PARTS)
        start = held.turn * part
        held.turn = (held.turn + 1) % RECHECK_PARTS
        again = [n for n in held.names[start : start + part] if n in held.settled]
        out, left, settled = _judge(dfd, folder, [*held.active, *again], held.settled, settle_ns)
        if all(settled.get(n) is held.settled[n] for n in again):  # the settled files as they were
            ended = held.left | left if left else held.left
            return Snapshot(out, ended - {r.session_id for r in out} if out else ended)
        names = held.names  # a settled file was written again: the folder judged anew
    else:
        listed = os.listdir(dfd if dfd is not None else folder)
        names = sorted(n for n in listed if _NAME.fullmatch(n))[:MAX_FILES]
    out, left, settled = _judge(dfd, folder, names, held.settled if held is not None else {}, settle_ns)
    _held[key] = _Held(
        sig,
        names,
        settled,
        frozenset(v[1] for v in settled.values() if v[1]),
        [n for n in names if n not in settled],
    )
    return Snapshot(out, frozenset(left - {r.session_id for r in out}))


def _judge(
    dfd: int | None, folder: Path, names: list[str], before: dict[str, tuple], settle_ns: int
) -> tuple[list[Running], set[str], dict[str, tuple]]:
    """The running processes and the ended sessions these files say, and the files settled: found
    ended or no registry file, and not written since ``settle_ns`` (kept in ``before`` as long as
    their stat holds, so they are not read again)."""
    out: list[Running] = []
    left: set[str] = set()
    settled: dict[str, tuple] = {}
    for name in names:
        pid = int(name[:-5])
        sig = _stat(dfd, folder, name)
        held = before.get(name)
        if held is not None and held[0] == sig:  # found ended (or no registry file), not written since
            settled[name] = held
            if held[1]:
                left.add(held[1])
            continue
        keep = sig is not None and sig[2] < settle_ns  # no verdict is kept on a file being written
        reg = _read(dfd, folder, name)
        if reg is None or not reg.sessionId or not _UUID.fullmatch(reg.sessionId):
            if keep:
                settled[name] = (sig, None)
            continue
        if (reg.pid is not None and reg.pid != pid) or not start_matches(reg, pid, folder / name):
            left.add(reg.sessionId)  # its process is gone, or another one has its pid
            if keep:
                settled[name] = (sig, reg.sessionId)
            continue
        state = reg.status if reg.status in STATES else None
        since = registry_time(reg.statusUpdatedAt, folder / name) if state else None
        cwd = reg.cwd if isinstance(reg.cwd, str) and os.path.isabs(reg.cwd) and "\0" not in reg.cwd else None
        out.append(
            Running(
                session_id=reg.sessionId,
                pid=pid,
                cwd=cwd,
                state=state,
                state_since=since,
                waiting_for=_clean(reg.waitingFor) if state == "waiting" else None,
                name=_clean(reg.name),
                kind=_clean(reg.kind, 20),
            )
        )
    return out, left, settled


def _stat(dfd: int | None, folder: Path, name: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False) if dfd is not None else os.lstat(folder / name)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
