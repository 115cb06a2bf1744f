"""Claude Code hooks: ``c3async hook`` turns a hook's JSON (stdin) into activity rows, and
``c3async install-hooks`` adds it to Claude Code's settings.

A hook must never block or fail Claude Code: it reads at most a bounded amount of input, does
one append, and exits 0 whatever happens (problems go to ``$C3_HOME/hook-errors.log``).

/clear fires SessionEnd(reason=clear) for the old session and, ~100 ms later, SessionStart
(source=clear) for the new one, from the same claude process (CLAUDE_PID). Nothing in either
transcript names the other, so the pair is recorded here as a fact: the new session_start row
carries ``predecessor``.

A row's time is when the hook ran, or, for an event the plugin's launcher saved while it built its
environment and replays now, when it fired (``C3_HOOK_EVENT_TIME``, epoch seconds: taken when it is
an event time in range (``ground.clock``) and not later than now).
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from ..catalog.listing import is_session_id
from ..ground import clock, safefs
from ..ground.errors import DECODE_ERRORS, BadArgument, Damaged, Refused, UnsafeState
from ..ground.home import c3_home
from ..ground.project import Project, resolve
from ..stores import activity
from . import waslive

__all__ = ("CLEAR_LINK_S", "handle", "install", "main")

CLEAR_LINK_S = 5.0  # SessionStart(clear) follows SessionEnd(clear) within this
# The same event from two hooks (the plugin's, and one `install-hooks` wrote) within this: one row.
SAME_EVENT_S = 10.0
MAX_INPUT = 1 << 20
MAX_SETTINGS = 16 << 20  # Claude Code's settings files are small
TAIL_BYTES = 256 * 1024  # how much of the activity log the /clear link looks back through
EVENTS = ("SessionStart", "SessionEnd")


MAX_FIELD = 4096  # a path or a name longer than this is not Claude Code's
EVENT_TIME = "C3_HOOK_EVENT_TIME"  # set by the plugin's launcher on an event it replays


def _text(payload: dict[str, Any], key: str, limit: int = MAX_FIELD) -> str | None:
    """A string field of the hook input, or None when it is missing or not a sane string (so a
    hostile payload can never put a nested structure, a NUL or a huge value into the log)."""
    value = payload.get(key)
    if not isinstance(value, str) or not value or len(value) > limit or "\x00" in value:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a "\ud800" escape
        return None
    return value


def _project(payload: dict[str, Any]) -> str | None:
    return os.environ.get("CLAUDE_PROJECT_DIR") or _text(payload, "cwd")


def _claude_pid() -> int | None:
    try:
        return int(os.environ["CLAUDE_PID"])
    except (KeyError, ValueError):
        return None


def _event_time() -> float:
    """When the event fired: now, or the time a replayed event carries when it is one."""
    now = time.time()
    raw = os.environ.get(EVENT_TIME)
    if raw:
        try:
            value: float | None = float(raw[:64])
        except ValueError:
            value = None
        fired = clock.event(value, f"{EVENT_TIME}={raw[:64]!r}", "the hook's environment", key=EVENT_TIME)
        if fired is not None and fired <= now:
            return fired
    return now


def _predecessor(project: Project, claude_pid: int | None, now: float) -> str | None:
    """The session that a /clear just ended in the same claude process, from the log's tail."""
    path = activity.activity_path(project)
    try:
        fd = safefs.open_file(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        lines = os.pread(fd, TAIL_BYTES, max(0, size - TAIL_BYTES)).split(b"\n")
    finally:
        os.close(fd)
    for raw in reversed(lines):
        try:
            row = json.loads(raw)
        except DECODE_ERRORS:
            continue  # the cut first line, a torn one, or a hostile one
        ts = clock.event(row.get("ts"), "an activity row's ts", path) if isinstance(row, dict) else None
        if ts is None:
            continue
        if now - ts > CLEAR_LINK_S:
            return None  # past the link window: no /clear just ended here
        same_process = claude_pid is None or row.get("claude_pid") in (None, claude_pid)
        if row.get("kind") == "session_end" and row.get("reason") == "clear" and same_process:
            return row.get("session_id")
    return None


def handle(payload: dict[str, Any]) -> dict[str, Any] | None:
    """Append the activity row for one hook event; returns it (None when there is nothing to do)."""
    event = _text(payload, "hook_event_name", 64)
    session_id = _text(payload, "session_id", 64)
    project = _project(payload)
    if not project or session_id is None or not is_session_id(session_id):
        return None
    if not os.path.isdir(project):  # moved or deleted since (a replayed event): nowhere to record it
        _note_error(f"{event or 'a hook'} of session {session_id}: its folder {project} no longer exists; not recorded")
        return None
    session_id = session_id.lower()
    here = resolve(project)  # the hook's door: its folder's project, once
    pid = _claude_pid()
    fired = _event_time()
    ts = round(fired, 3)  # the row's own time (it replaces the store's "now")
    if event == "SessionStart":
        source = _text(payload, "source", 64)
        predecessor = _predecessor(here, pid, fired) if source == "clear" else None
        row = activity.record_once(
            here,
            "session_start",
            SAME_EVENT_S,
            ("session_id", "source", "claude_pid"),
            ts=ts,
            session_id=session_id,
            source=source,
            claude_pid=pid,
            predecessor=predecessor,
            cwd=_text(payload, "cwd"),
            transcript_path=_text(payload, "transcript_path"),
        )
        if not waslive.windowless():  # remembered for `reopen` after a reboot
            cwd = _text(payload, "cwd") or project
            waslive.remember(
                session_id, cwd, pid=pid, by="hook", config_dir=os.environ.get("CLAUDE_CONFIG_DIR"), now=fired
            )
        return row
    if event == "SessionEnd":
        reason = _text(payload, "reason", 64)
        if reason in waslive.END_REASONS:  # the person ended it; a SIGTERM (a reboot) says "other"
            waslive.forget(session_id)
        return activity.record_once(
            here,
            "session_end",
            SAME_EVENT_S,
            ("session_id", "reason", "claude_pid"),
            ts=ts,
            session_id=session_id,
            reason=reason,
            claude_pid=pid,
        )
    if event is None:
        return None
    return activity.record(here, "hook", ts=ts, session_id=session_id, event=event, claude_pid=pid)


STARTS = ("startup", "resume")  # a SessionStart that is a start of claude (not /clear, not compact)


def main(on_start: Callable[[str], None] | None = None) -> int:
    """``c3async hook``: always exits 0, so Claude Code is never blocked by us. ``on_start``:
    called with the project when claude itself starts (SessionStart from a start or a resume),
    once the event is recorded: Claude Code's cleanup of old transcripts follows within seconds."""
    payload: Any = None
    try:
        data = sys.stdin.buffer.read(MAX_INPUT + 1)
        if len(data) > MAX_INPUT:
            raise ValueError(f"hook input over {MAX_INPUT} bytes, ignored")
        payload = json.loads(data) if data.strip() else {}
        if isinstance(payload, dict):
            handle(payload)
    except RecursionError:  # JSON nested past the recursion limit
        _note_error("ValueError: hook input nested too deeply, ignored")
    except Exception as exc:  # bad input, a full disk: note it, never fail the hook
        _note_error(f"{type(exc).__name__}: {exc}")
    if on_start is None or not isinstance(payload, dict) or _text(payload, "hook_event_name", 64) != "SessionStart":
        return 0
    source, project = _text(payload, "source", 64), _project(payload)
    if project and source in (*STARTS, None) and os.path.isdir(project):
        # What it warns of goes where a hook's problems go, not to Claude Code's screen.
        root = logging.getLogger()
        handlers, root.handlers = root.handlers, [_Noted(logging.WARNING)]
        try:
            on_start(project)
        except Exception as exc:
            _note_error(f"keeping sessions before Claude Code's cleanup: {type(exc).__name__}: {exc}")
        finally:
            root.handlers = handlers
    return 0


class _Noted(logging.Handler):
    """Log records into ``hook-errors.log``."""

    def emit(self, record: logging.LogRecord) -> None:
        _note_error(record.getMessage())


def _note_error(text: str) -> None:
    line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(text.split())[:500]}\n"
    try:
        fd = safefs.append_fd(c3_home() / "hook-errors.log")
        try:
            os.write(fd, line.encode("utf-8", "backslashreplace"))
        finally:
            os.close(fd)
    except OSError:
        pass


def hook_command() -> str:
    """``-P``: a hook runs in the project's folder (a cloned repository), never on its path."""
    return f"{shlex.quote(sys.executable)} -P -m c3async hook"


class SettingsFile(NamedTuple):
    """Where the hooks go: ``path``, every folder below ``trusted`` opened without following a
    link (a cloned repository can ship ``.claude`` as a link to anywhere)."""

    trusted: Path
    path: Path
    make_trusted: bool = False  # Claude Code's config home, before Claude Code first ran


def settings_path(project: str | None, user: bool) -> SettingsFile:
    """``--user``: Claude Code's own settings (its config home is the user's choice: trusted as
    it is); a project: its personal, git-ignored ``.claude/settings.local.json`` (the command
    names this machine's Python), below the project folder, which must exist."""
    if user:
        from ..catalog.locate import config_home

        home = config_home()
        return SettingsFile(home, home / "settings.json", make_trusted=True)
    folder = Path(os.path.abspath(project or os.getcwd()))
    return SettingsFile(folder, folder / ".claude" / "settings.local.json")


def _snippet(command: str) -> str:
    hook = {"hooks": [{"type": "command", "command": command, "timeout": 10}]}
    return json.dumps({"hooks": {event: [hook] for event in EVENTS}})


def _ours(hook: Any) -> bool:
    """A hook entry install wrote: ``<any python> -m c3async hook`` (or the console script's
    ``<path>/c3async hook``). Matched on the parsed command, so a person's own hook that merely
    mentions c3async (``notify 'c3async hook fired'``) is never taken for ours."""
    command = hook.get("command") if isinstance(hook, dict) else None
    if not isinstance(command, str) or len(command) > 4096:
        return False
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    if argv[-1:] != ["hook"]:
        return False
    return argv[-3:-1] == ["-m", "c3async"] or (len(argv) == 2 and os.path.basename(argv[0]) == "c3async")


def _keep_folder_off_path(hook: dict[str, Any]) -> bool:
    """An entry of ours from before ``-P`` (``python -m c3async hook`` put the project's folder
    first on its path: a cloned repository's ``c3async/`` or ``msgspec.py`` ran as the user):
    ``-P`` added, True; False when it has it (or ``-I``) or is the console script's."""
    argv = shlex.split(hook["command"])
    if argv[-3:-1] != ["-m", "c3async"] or {"-P", "-I"} & set(argv[1:-3]):
        return False
    hook["command"] = shlex.join([argv[0], "-P", *argv[1:]])
    return True


def read_settings(target: SettingsFile, snippet: str, again: str) -> tuple[bytes, dict[str, Any]]:
    """The settings file's bytes and its object (empty where there is no file). A file that is
    not valid JSON is Damaged, one reached through a link Refused: each says what to do instead
    (``snippet``: what to add by hand; ``again``: the command to run once it is fixed)."""
    path = target.path
    if target.make_trusted:
        target.trusted.mkdir(parents=True, exist_ok=True)
    elif not target.trusted.is_dir():  # a project folder is never created
        raise BadArgument(f"{target.trusted} is not a directory")
    try:
        data = safefs.read_bytes(path, limit=MAX_SETTINGS + 1, trusted=target.trusted)
    except FileNotFoundError:
        data = b""
    except UnsafeState as exc:
        raise Refused(
            f"{exc.path} is {exc.what}: c3async never writes through one. "
            f"Change the file it leads to yourself; add: {snippet}"
        ) from None
    if len(data) > MAX_SETTINGS:
        raise Damaged(f"{path} is larger than {MAX_SETTINGS >> 20} MiB: not a settings file; fix it first")
    text = data.decode("utf-8", "replace")
    try:
        settings = json.loads(text) if text.strip() else {}
    except (*DECODE_ERRORS,) as exc:
        raise Damaged(f"{path} is not valid JSON ({exc}); fix it and run {again} again") from None
    if not isinstance(settings, dict):
        raise Damaged(f"{path} does not hold a JSON object; fix it and run {again} again")
    return data, settings


def _load(target: SettingsFile, command: str) -> tuple[bytes, dict[str, Any], dict[str, Any]]:
    """The settings file's bytes, its object and its ``hooks`` object (made empty where absent)."""
    data, settings = read_settings(target, _snippet(command), "install-hooks")
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, dict):
        raise Damaged(f"{target.path}: 'hooks' is not an object; fix it and run install-hooks again")
    return data, settings, hooks


BACKUP_SUFFIX = ".c3async.bak"  # ours alone: a person's own settings.json.bak is never touched


def backup_path(target: SettingsFile) -> Path:
    return target.path.with_name(target.path.name + BACKUP_SUFFIX)


def write_settings(target: SettingsFile, data: bytes, encoded: bytes, snippet: str) -> None:
    """Write the settings file's new bytes (the previous file, ``data``, kept as
    ``<name>.c3async.bak``, private), never through a link, keeping the file's own mode
    (settings can hold an API key in ``env``)."""
    try:
        mode = stat.S_IMODE(os.lstat(target.path).st_mode) if data else 0o600
    except OSError:
        mode = 0o600
    try:
        if data:
            safefs.write_atomic(backup_path(target), data, mode=0o600, trusted=target.trusted)
        safefs.write_atomic(target.path, encoded, mode=mode, trusted=target.trusted)
    except UnsafeState as exc:  # a folder on the way (.claude) is a link
        raise Refused(
            f"{exc.path} is {exc.what}: c3async never writes through one. Add it yourself: {snippet}"
        ) from None


def encode_settings(settings: dict[str, Any]) -> bytes:
    return (json.dumps(settings, indent=2) + "\n").encode("utf-8")


def _save(target: SettingsFile, data: bytes, settings: dict[str, Any], command: str) -> None:
    write_settings(target, data, encode_settings(settings), _snippet(command))


def install(target: SettingsFile, command: str | None = None) -> list[str]:
    """Add our SessionStart and SessionEnd hooks to the settings file, keeping everything else.
    Idempotent. Returns the events it added or brought up to date (empty when all were there as
    they are now: one of ours written without ``-P`` gets it). A settings file that
    is not valid JSON is left untouched, and one that is a link (or any folder on the way below
    the trusted one) is never written through: Refused names it and shows what to add."""
    command = command or hook_command()
    # No lock: Claude Code writes this file without one; the atomic replace keeps readers safe.
    data, settings, hooks = _load(target, command)
    added = []
    for event in EVENTS:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise Damaged(f"{target.path}: hooks.{event} is not a list; fix it and run install-hooks again")
        mine = [h for g in groups if isinstance(g, dict) for h in g.get("hooks", []) or [] if _ours(h)]
        if not mine:
            groups.append({"hooks": [{"type": "command", "command": command, "timeout": 10}]})
            added.append(event)
        elif any([_keep_folder_off_path(h) for h in mine]):  # a list: every one of them
            added.append(event)
    if added:
        settings["hooks"] = hooks
        _save(target, data, settings, command)
    return added


def uninstall(target: SettingsFile) -> list[str]:
    """Take out what ``install`` added: our hook entries, the groups and event lists that held
    only them, and ``hooks`` if nothing else is left; every other hook and setting stays.
    Returns the events it took ours out of (empty: there were none, and nothing is written)."""
    if not target.path.parent.is_dir():
        return []  # no .claude (or config) folder: nothing to undo, and nothing is created
    data, settings, hooks = _load(target, hook_command())
    removed = []
    for event in EVENTS:
        groups = hooks.get(event)
        if not isinstance(groups, list):
            continue
        kept = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if isinstance(inner, list) and any(_ours(h) for h in inner):
                rest = [h for h in inner if not _ours(h)]
                if rest:
                    kept.append({**group, "hooks": rest})
                continue
            kept.append(group)
        if len(kept) != len(groups) or kept != groups:
            removed.append(event)
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
    if removed:
        if hooks:
            settings["hooks"] = hooks
        else:
            settings.pop("hooks", None)
        if settings:
            _save(target, data, settings, hook_command())
        else:
            remove_empty(target, _only_ours(backup_path(target), target.trusted))
    return removed


def remove_empty(target: SettingsFile, backup_too: bool) -> None:
    """What we wrote was all the file held: remove it (an empty settings file means nothing), our
    backup too when ``backup_too`` (when it holds nothing but ours either: else it is the only
    copy of something a person wrote, and it stays), and a project's ``.claude`` folder if
    nothing else is in it, so an install then a removal leaves the project as it was."""
    try:
        doomed = [target.path]
        if backup_too:
            doomed.insert(0, backup_path(target))
        for path in doomed:
            try:
                safefs.unlink(path, trusted=target.trusted)
            except FileNotFoundError:
                pass
        if not target.make_trusted:
            with safefs.open_dir(target.trusted, trusted=target.trusted) as dfd:
                if dfd is None:
                    os.rmdir(target.path.parent)
                else:
                    os.rmdir(target.path.parent.name, dir_fd=dfd)
    except OSError:  # a folder that holds more, or one that became a link: left as it is
        pass


def _only_ours(path: Path, trusted: Path) -> bool:
    """Whether the settings file at ``path`` holds nothing once our hooks are taken out (empty,
    ``{}``, or our hooks alone)."""
    try:
        data = safefs.read_bytes(path, limit=MAX_SETTINGS + 1, trusted=trusted)
        settings = json.loads(data.decode("utf-8", "replace")) if data.strip() else {}
    except (OSError, *DECODE_ERRORS):
        return False
    if not isinstance(settings, dict) or set(settings) - {"hooks"}:
        return False
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, dict):
        return False
    for groups in hooks.values():
        if not isinstance(groups, list):
            return False
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list) or not all(_ours(h) for h in inner) or set(group) - {"hooks"}:
                return False
    return True
