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
import time
from dataclasses import dataclass
from pathlib import Path

from ..ground import memo
from .registry_file import (
    MAX_BYTES,
    MAX_FILES,
    STATES,
    Registered,
    clean,
    holds,
    listed,
    proc_start_ticks,
    read,
    start_matches,
)

__all__ = (
    "MAX_BYTES",
    "MAX_FILES",
    "STATES",
    "Registered",
    "Running",
    "Snapshot",
    "proc_start_ticks",
    "read_registry",
    "running",
    "start_matches",
)

SETTLE_S = 2.0  # a file or folder written this recently may be written again in the same clock tick
# A reader that polls (the Hub, four times a second) keeps, per folder, what its last full read
# found (``_Held``): a file found ended or no registry file stays so until it is written again (a
# process once gone never comes back; a claude that reuses its pid writes its own file), so it is
# not read again while its stat holds; the folder is listed again only when its own stat moves.
# Each read stats the files of running processes and, unless told not to (``recheck``), a slice of
# the settled ones (a RECHECK_PARTS-th, in turn): every settled file is stat'ed again over
# RECHECK_PARTS such reads (a minute at the Hub's whole polls, one a second), at an even cost per read.
# Thousands of files that killed claudes left behind cost a slice of stats a second, and no read
# pays for all of them at once.
RECHECK_PARTS = 60
_held: dict[str, _Held] = memo.kept({})


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


@dataclass(frozen=True, slots=True)
class Snapshot:
    running: list[Running]  # one per claude process that runs now
    ended: frozenset[str]  # sessions whose file outlived its process (SIGKILLed) and that no process holds now


def running(folder: Path | None = None) -> list[Running]:
    """The sessions held by claude processes that run now, one per process."""
    return read_registry(folder).running


def read_registry(folder: Path | None = None, *, recheck: bool = True) -> Snapshot:
    """What the registries say now (``folder``'s, else those of every Claude Code root): who
    runs, and who was left behind by a killed process. ``recheck=False``: a poll between two
    that check the settled files (the running ones are read each time)."""
    if folder is None:
        from ..stores.claude_dirs import roots

        snaps = [_read_folder(r.sessions, recheck) for r in roots()]
        if len(snaps) == 1:
            return snaps[0]
        running = [r for snap in snaps for r in snap.running]
        held = {r.session_id for r in running}
        return Snapshot(running, frozenset(s for snap in snaps for s in snap.ended) - held)
    return _read_folder(folder, recheck)


def _read_folder(folder: Path, recheck: bool) -> Snapshot:
    def known(st: os.stat_result) -> list[str] | None:
        """The names the last read listed, while the folder's stat holds and is settled."""
        held = _held.get(str(folder))
        settled = st.st_mtime_ns < time.time_ns() - int(SETTLE_S * 1e9)
        same = held is not None and held.sig == (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
        return held.names if same and settled and held is not None else None

    with listed(str(folder), known) as found:
        if found is None:
            return Snapshot([], frozenset())
        dfd, st, names = found
        try:
            return _collect(dfd, folder, (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns), names, recheck)
        except OSError:
            return Snapshot([], frozenset())


@dataclass(slots=True)
class _Held:
    """What a read kept of a registry folder for the next (see ``RECHECK_PARTS``)."""

    sig: tuple  # the folder's stat when listed
    names: list[str]  # the registry files' names then
    settled: dict[str, tuple]  # name -> (the file's stat, the session it names if ended, else None)
    left: frozenset[str]  # the sessions the settled files name
    active: list[str]  # the other names: files of running processes, or written too recently to judge
    turn: int = 0  # the slice of ``names`` the next read stats again


def _collect(dfd: int | None, folder: Path, sig: tuple, listed: list[str], recheck: bool) -> Snapshot:
    key = str(folder)
    held = _held.get(key)
    settle_ns = time.time_ns() - int(SETTLE_S * 1e9)
    if held is not None and held.sig == sig and sig[2] < settle_ns:
        # The folder as listed before: its active files, and a slice of the settled ones, again.
        again: list[str] = []
        if recheck:
            part = -(-len(held.names) // RECHECK_PARTS)
            start = held.turn * part
            held.turn = (held.turn + 1) % RECHECK_PARTS
            again = [n for n in held.names[start : start + part] if n in held.settled]
        out, left, settled = _judge(dfd, folder, [*held.active, *again], held.settled, settle_ns)
        if all(settled.get(n) is held.settled[n] for n in again):  # the settled files as they were
            ended = held.left if left <= held.left else held.left | left  # no set of thousands built a poll
            return Snapshot(out, ended - {r.session_id for r in out} if out else ended)
        names = held.names  # a settled file was written again: the folder judged anew
    else:
        names = listed
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
        reg = read(dfd, str(folder), name)
        sid = reg.session_id if reg is not None else None
        if reg is None or sid is None:
            if keep:
                settled[name] = (sig, None)
            continue
        if not holds(reg, pid, folder / name):
            left.add(sid)  # its process is gone, or another one has its pid
            if keep:
                settled[name] = (sig, sid)
            continue
        state = reg.state
        out.append(
            Running(
                session_id=sid,
                pid=pid,
                cwd=reg.folder,
                state=state,
                state_since=reg.since(folder / name),
                waiting_for=clean(reg.waitingFor) if state == "waiting" else None,
                name=clean(reg.name),
                kind=clean(reg.kind, 20),
            )
        )
    return out, left, settled


def _stat(dfd: int | None, folder: Path, name: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False) if dfd is not None else os.lstat(folder / name)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
