"""Which sessions were live, remembered past their processes: ``$C3_HOME/was_live.json``, so that
``c3async reopen`` can start again what a reboot (or a killed claude) took away.

Who records it, without a running Hub: the hooks (``SessionStart`` remembers the session with its
claude process; ``SessionEnd`` forgets it only when the person ended it: ``/exit``, ``/clear``,
``/logout``; a SIGTERM, which is how a reboot ends claude, says ``other`` and is kept) and every
MCP server on each heartbeat (where no hook is installed; the beat also moves ``seen``, the last
time the session was known live). One entry per session and per claude process: a process's new
session (after ``/clear``) replaces its old one. Sessions of ``-p`` and the SDK are no windows and
are not remembered.

The file is private (0600 under ``$C3_HOME``), changed only under its lock and replaced
atomically (``jsondoc.update``), at most ``MAX_BYTES`` (a bigger file is refused, never read
whole) and ``MAX_ENTRIES`` sessions, each seen within ``FORGET_AFTER_S``. Each entry read is
range-checked; a bad one is dropped, the rest stand.
"""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path
from typing import Any

import msgspec

from ..ground import clock, jsondoc
from ..ground.errors import C3Error
from ..ground.home import c3_home
from .registry_file import Registered

__all__ = (
    "END_REASONS",
    "FORGET_AFTER_S",
    "MAX_BYTES",
    "MAX_ENTRIES",
    "Remembered",
    "boot_time",
    "forget",
    "path",
    "process_start",
    "remember",
    "remembered",
    "served",
    "windowless",
)

log = logging.getLogger("c3async.live")

MAX_ENTRIES = 100  # windows open at once, with room: the least recently seen go first
MAX_BYTES = 256 * 1024  # 100 entries take ~40 KB
FORGET_AFTER_S = 30 * 86400  # Claude Code's own default cleanup of transcripts
END_REASONS = ("prompt_input_exit", "clear", "logout")  # SessionEnd reasons a person chose
MAX_PATH = 4096
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_MAX_PID = 2**31 - 1


class Remembered(msgspec.Struct, kw_only=True):
    """One session known live: ``pid`` and ``started`` name its claude process (create time,
    epoch seconds), ``boot`` the machine's boot time then; ``since`` when first and ``seen`` when
    last known live; ``config_dir``: the ``CLAUDE_CONFIG_DIR`` it ran with, when set."""

    id: str
    cwd: str
    seen: float
    since: float
    pid: int | None = None
    started: float | None = None
    boot: float | None = None
    config_dir: str | None = None
    by: str = "hook"  # or "server"; "registry" for what ``left_behind`` found (never stored)


class _Doc(msgspec.Struct):
    version: int = 1
    sessions: list[Any] = msgspec.field(default_factory=list)


def path() -> Path:
    return c3_home() / "was_live.json"


def boot_time() -> float | None:
    """When this machine booted (epoch seconds), or None where psutil cannot say."""
    try:
        import psutil

        return float(psutil.boot_time())
    except Exception:
        return None


def process_start(pid: int | None) -> float | None:
    """When the process ``pid`` started (epoch seconds), or None when it is gone or hidden."""
    if pid is None:
        return None
    try:
        import psutil

        return float(psutil.Process(pid).create_time())
    except Exception:
        return None


def windowless() -> bool:
    """Whether the claude that runs this hook or server is ``-p`` or the SDK (no window to open
    again): Claude Code says so in ``CLAUDE_CODE_ENTRYPOINT`` (``sdk-cli``, ``sdk-ts``...)."""
    return os.environ.get("CLAUDE_CODE_ENTRYPOINT", "").startswith("sdk")


def _folder(value: object) -> str | None:
    if not isinstance(value, str) or not value or len(value) > MAX_PATH or "\0" in value:
        return None
    return value if os.path.isabs(value) else None


def _checked(raw: object, where: Path) -> Remembered | None:
    """An entry as read, when every field is what we write: else None (dropped)."""
    if not isinstance(raw, dict):
        return None
    try:
        entry = msgspec.convert(raw, Remembered)
    except msgspec.ValidationError:
        return None
    if not _UUID.fullmatch(entry.id) or _folder(entry.cwd) is None or entry.by not in ("hook", "server"):
        return None
    if entry.config_dir is not None and _folder(entry.config_dir) is None:
        return None
    if entry.pid is not None and not 0 < entry.pid <= _MAX_PID:
        return None
    seen = clock.event(entry.seen, "a was-live entry's time", where)
    since = clock.event(entry.since, "a was-live entry's time", where)
    if seen is None or since is None:
        return None
    started = clock.event(entry.started, "a was-live process start", where) if entry.started is not None else None
    boot = clock.event(entry.boot, "a was-live boot time", where) if entry.boot is not None else None
    return msgspec.structs.replace(entry, started=started, boot=boot, since=min(since, seen))


def _entries(doc: _Doc, now: float) -> list[Remembered]:
    where = path()
    out: dict[str, Remembered] = {}
    for raw in doc.sessions[: MAX_ENTRIES * 4]:
        entry = _checked(raw, where)
        if entry is not None and now - entry.seen <= FORGET_AFTER_S:
            held = out.get(entry.id)
            if held is None or held.seen < entry.seen:
                out[entry.id] = entry
    return sorted(out.values(), key=lambda e: e.seen, reverse=True)[:MAX_ENTRIES]


def remembered(now: float | None = None) -> list[Remembered]:
    """The sessions known live, the most recently seen first. Raises CorruptDocument for a file
    that does not parse or is over ``MAX_BYTES`` (left as it is)."""
    now = time.time() if now is None else now
    return _entries(jsondoc.read(path(), _Doc, _Doc, limit=MAX_BYTES), now)


def _update(change: Any) -> None:
    def apply(doc: _Doc) -> None:
        now = time.time()
        kept = change(_entries(doc, now))
        doc.sessions = [msgspec.to_builtins(e) for e in kept[:MAX_ENTRIES]]

    jsondoc.update(path(), _Doc, _Doc, apply, limit=MAX_BYTES)


def remember(
    session_id: str,
    cwd: str,
    *,
    pid: int | None,
    by: str,
    config_dir: str | None = None,
    now: float | None = None,
) -> None:
    """Note ``session_id`` live now in ``cwd``, held by the claude process ``pid``: it replaces
    what that process held before (its session before a ``/clear``). Raises CorruptDocument (a
    damaged file is kept) and OSError."""
    sid = session_id.lower()
    if not _UUID.fullmatch(sid) or _folder(cwd) is None:
        return
    now = time.time() if now is None else now
    started = process_start(pid)
    config_dir = _folder(config_dir)

    def change(entries: list[Remembered]) -> list[Remembered]:
        held = next((e for e in entries if e.id == sid), None)
        same_process = [e for e in entries if pid is not None and e.pid == pid and e.started == started]
        first = min([now] + ([held.since] if held and held.pid == pid else []))
        entry = Remembered(
            id=sid,
            cwd=cwd,
            seen=now,
            since=first,
            pid=pid,
            started=started,
            boot=boot_time(),
            config_dir=config_dir,
            by=by,
        )
        return [entry] + [e for e in entries if e.id != sid and e not in same_process]

    _update(change)


def forget(session_id: str) -> None:
    """The person ended ``session_id`` (``END_REASONS``): not to be opened again."""
    sid = session_id.lower()
    _update(lambda entries: [e for e in entries if e.id != sid])


def served(host_session_id: str | None, claude_pid: int | None, registered: Registered | None, project: str) -> None:
    """An MCP server's beat: remember the session it serves, when its claude process is known
    (its registry file matched: never a phantom of ``claude mcp list``) and is a window
    (``kind`` interactive, or not said). A failure is logged, never raised: the beat goes on."""
    if host_session_id is None or claude_pid is None or registered is None:
        return
    if registered.kind not in (None, "interactive"):
        return
    try:
        remember(
            host_session_id,
            registered.folder or project,
            pid=claude_pid,
            by="server",
            config_dir=os.environ.get("CLAUDE_CONFIG_DIR"),
        )
    except (OSError, C3Error) as exc:
        log.warning("could not note %s as live in %s: %s", host_session_id, path(), exc)


LEFT_WINDOW_S = 2 * 86400  # a registry file a killed claude left counts this long (unless --since says)


def left_behind(since: float | None = None, now: float | None = None) -> list[Remembered]:
    """Sessions whose claude was killed (SIGKILL, a power cut): Claude Code's registry files whose
    process is gone, of windows (``kind`` interactive or not said), last written since ``since``
    (default: within ``LEFT_WINDOW_S``). Read as untrusted input, never deleted (Claude Code's)."""
    from ..stores.claude_dirs import roots
    from .registry_file import holds, listed, read, registry_time

    now = time.time() if now is None else now
    since = now - LEFT_WINDOW_S if since is None else since
    default_root = os.path.normpath(os.environ.get("CLAUDE_CONFIG_DIR") or os.path.expanduser("~/.claude"))
    out: dict[str, Remembered] = {}
    for root in roots():
        folder = str(root.sessions)
        with listed(folder) as found:
            if found is None:
                continue
            dfd, _, names = found
            for name in names:
                reg = read(dfd, folder, name)
                pid = int(name[:-5])
                if reg is None or reg.session_id is None or reg.folder is None or reg.kind not in (None, "interactive"):
                    continue
                if holds(reg, pid, name):
                    continue  # it runs
                where = os.path.join(folder, name)
                times = [registry_time(getattr(reg, k), where) for k in ("statusUpdatedAt", "startedAt")]
                seen = max((t for t in times if t is not None), default=None)
                if seen is None or seen < since or (reg.session_id in out and out[reg.session_id].seen >= seen):
                    continue
                config_dir = os.path.dirname(folder)
                out[reg.session_id] = Remembered(
                    id=reg.session_id,
                    cwd=reg.folder,
                    seen=seen,
                    since=seen,
                    pid=pid,
                    config_dir=None if os.path.normpath(config_dir) == default_root else config_dir,
                    by="registry",
                )
    return list(out.values())
