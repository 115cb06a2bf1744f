"""Who is live: heartbeat files first, then Claude Code's registry of running processes
(``running``: a session held by a claude process that runs now, with its busy/idle/waiting
state), and the activity log only where neither knows a session.

A file whose ``ts`` is within the TTL is live; liveness is never decided by the pid (pids are
reused, and there is no cheap portable "is this pid alive"). Age is judged on the monotonic
clock when writer and reader share a boot, else on the wall clock; a ``ts`` far in the future is
a bad clock or a bad file and never reads live. Dead files are pruned, safely when two readers
prune at once: a file is renamed aside, re-read, and put back if it turned out fresh.
"""

from __future__ import annotations

import os
import re
import stat
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from ..ground import safefs
from ..ground.errors import DECODE_ERRORS, UnsafeState
from ..ground.project import Project, resolve
from ..stores import activity
from .heartbeat import Heartbeat, boot_id, live_dir, ttl
from .running import Running, Snapshot, read_registry

__all__ = ("ACTIVITY_WINDOW_S", "FUTURE_SLACK_S", "LiveSession", "heartbeats", "is_fresh", "live_sessions")

ACTIVITY_WINDOW_S = 20 * 60  # the fallback: activity this recent, with no session_end, reads live
FUTURE_SLACK_S = 5.0  # a ts this far ahead is still believed (clock granularity)

_decode = msgspec.json.Decoder(Heartbeat).decode
# The only names a reader ever removes: heartbeats (``<uuid>.json``), the temp files of their
# atomic writes, and its own prune names. A file that .c3/live holds under any other name is
# not ours to delete, even if it looks dead.
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
HEARTBEAT_NAME = re.compile(_UUID + r"\.json")
_OWN_SIDE_NAME = re.compile(
    r"\.(?:" + _UUID + r"\.json\.[0-9a-f]{16}\.tmp|prune\.\d+\.[0-9a-f]{32}\." + _UUID + r"\.json)"
)


@dataclass(slots=True)
class LiveSession:
    host_session_id: str | None
    live: bool
    mcp_count: int = 0
    source: str = "heartbeat"  # or "registry", "activity"
    ides: list[str] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    c3_sessions: list[str] = field(default_factory=list)
    last_seen: float = 0.0
    state: str | None = None  # busy, idle or waiting: from the registry only (None: not known)
    state_since: float | None = None  # epoch seconds
    waiting_for: str | None = None
    cwd: str | None = None  # where its claude runs (from the registry)
    claude_pids: list[int] = field(default_factory=list)  # the claude processes holding it (registry)


def age(hb: Heartbeat, now: float | None = None) -> float:
    if hb.mono is not None and hb.boot_id and hb.boot_id == boot_id():
        return time.monotonic() - hb.mono
    return (time.time() if now is None else now) - hb.ts


def is_fresh(hb: Heartbeat, limit: float | None = None, now: float | None = None) -> bool:
    a = age(hb, now)
    return -FUTURE_SLACK_S <= a <= (ttl() if limit is None else limit)


def _read(path: Path) -> Heartbeat | None:
    try:
        return _decode(safefs.read_bytes(path, limit=64 * 1024))
    except (OSError, *DECODE_ERRORS):
        return None


def _prune(path: Path, limit: float) -> None:
    """Remove a dead heartbeat without ever removing a fresh one: move it aside (atomic), look
    again, and link it back (which fails rather than overwrite a newer file) if it is fresh."""
    aside = path.with_name(f".prune.{os.getpid()}.{uuid.uuid4().hex}.{path.name}")
    try:
        safefs.rename(path, aside)
    except OSError:
        return  # gone already (another reader pruned it) or not ours to move
    try:
        hb = _read(aside)
        if hb is not None and is_fresh(hb, limit):
            try:
                safefs.link(aside, path)
            except OSError:
                pass  # a newer file took its place meanwhile
    finally:
        try:
            safefs.unlink(aside)
        except OSError:
            pass


def heartbeats(project: Project, *, prune: bool = True) -> list[Heartbeat]:
    """The fresh heartbeats of a project's MCP processes; dead files are pruned on the way."""
    folder = live_dir(project)
    try:
        all_names = safefs.listdir(folder)
    except UnsafeState as exc:
        safefs.warn_once(exc)  # a linked .c3 or .c3/live: never read, never pruned
        return []
    except OSError:
        return []
    names = [n for n in all_names if n.endswith(".json") and not n.startswith(".")]
    limit = ttl()
    if prune:  # temp and side files left by a process killed mid-write or mid-prune
        for name in all_names:
            if _OWN_SIDE_NAME.fullmatch(name) and _older_than(folder / name, limit):
                try:
                    safefs.unlink(folder / name)
                except OSError:
                    pass
    fresh: list[Heartbeat] = []
    for name in names:
        path = folder / name
        hb = _read(path)
        if hb is not None and is_fresh(hb, limit):
            fresh.append(hb)
        elif prune and HEARTBEAT_NAME.fullmatch(name) and (hb is not None or _older_than(path, limit)):
            _prune(path, limit)
    return fresh


def _older_than(path: Path, limit: float) -> bool:
    """An unreadable file is pruned only once it has not changed for a TTL (it may be a write
    we caught half-way on a filesystem without atomic rename)."""
    try:
        st = safefs.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and time.time() - st.st_mtime > limit


def live_sessions(
    project: Project,
    *,
    now: float | None = None,
    prune: bool = True,
    facts: activity.Facts | None = None,
    registry: Snapshot | None = None,
    ids: set[str] | None = None,
) -> dict[str | None, LiveSession]:
    """Per host session: live or not, how many MCP processes serve it, and its state where the
    registry has it. ``facts``: the activity log's fold, ``registry``: the registry as read,
    when the caller has them already; ``ids``: the project's sessions (a running claude holding
    one of them counts here whatever folder it was started in)."""
    now = time.time() if now is None else now
    out: dict[str | None, LiveSession] = {}
    windows: dict[str | None, set[object]] = {}
    for hb in heartbeats(project, prune=prune):
        entry = out.get(hb.host_session_id)
        if entry is None:
            entry = out[hb.host_session_id] = LiveSession(hb.host_session_id, True)
        # MCP count: the claude processes served (one window with two c3async servers is one)
        served = windows.setdefault(hb.host_session_id, set())
        window = ("claude", hb.host_pid) if hb.host_pid else ("server", hb.session_id)
        if window not in served:
            served.add(window)
            entry.mcp_count += 1
        entry.ides.append(hb.ide)
        entry.pids.append(hb.pid)
        entry.c3_sessions.append(hb.session_id)
        entry.last_seen = max(entry.last_seen, hb.ts)
    snapshot = read_registry() if registry is None else registry
    for run in snapshot.running:
        if run.session_id not in out and not (ids is not None and run.session_id in ids) and not _belongs(run, project):
            continue
        entry = out.get(run.session_id)
        if entry is None:
            entry = out[run.session_id] = LiveSession(run.session_id, True, 0, "registry", last_seen=now)
        entry.claude_pids.append(run.pid)
        entry.cwd = entry.cwd or run.cwd
        if run.state is not None and (entry.state_since is None or (run.state_since or 0) >= entry.state_since):
            entry.state, entry.state_since, entry.waiting_for = run.state, run.state_since, run.waiting_for
    if facts is None:
        facts = activity.facts(project)
    for sid, seen in facts.open.items():
        # The old inference, for host sessions no heartbeat or running process knows: a hook's
        # session_start with no session_end since, and activity within ACTIVITY_WINDOW_S (not
        # when the registry shows its claude was killed, nor when the claude the hook named is
        # gone). The fold covers the whole log (a session_start may sit far from the end of a
        # busy log) at the cost of its tail.
        if sid in out or sid in snapshot.ended or now - seen > ACTIVITY_WINDOW_S:
            continue
        holder = facts.holders.get(sid)
        if holder is not None and not _still_runs(*holder):
            continue
        out[sid] = LiveSession(sid, True, 0, "activity", last_seen=seen)
    return out


HOOK_SLACK_S = 2.0  # a process's start time and a hook's wall-clock time, compared


def _still_runs(pid: int, hooked_at: float) -> bool:
    """Whether the claude a hook named (``pid``, at ``hooked_at``) still runs: a process with
    that pid that started before the hook ran (a pid reused since started later) and is no
    zombie. Where the process table cannot say (another account's process), it is believed."""
    import psutil

    try:
        proc = psutil.Process(pid)
        return proc.create_time() <= hooked_at + HOOK_SLACK_S and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except (psutil.Error, OSError, OverflowError, ValueError):
        return True


def _belongs(run: Running, project: Project) -> bool:
    """Whether a running claude's folder is in ``project`` (the project its folder resolves to,
    as the CLI resolves a folder: a worktree to its main checkout, a nested repository to itself)."""
    if run.cwd is None:
        return False
    if run.cwd == project.root:
        return True
    try:
        return resolve(run.cwd) == project
    except (OSError, ValueError):
        return False
