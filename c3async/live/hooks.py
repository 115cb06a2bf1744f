"""Claude Code hooks: ``c3async hook`` turns a hook's JSON (stdin) into activity rows, and
``c3async install-hooks`` adds it to Claude Code's settings.

A hook must never block or fail Claude Code: it reads at most a bounded amount of input, does
one append, and exits 0 whatever happens (problems go to ``$C3_HOME/hook-errors.log``).

/clear fires SessionEnd(reason=clear) for the old session and, ~100 ms later, SessionStart
(source=clear) for the new one, from the same claude process (CLAUDE_PID). Nothing in either
transcript names the other, so the pair is recorded here as a fact: the new session_start row
carries ``predecessor``.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from .. import activity
from ..jsondoc import write_atomic
from ..paths import c3_home

__all__ = ("CLEAR_LINK_S", "handle", "install", "main")

CLEAR_LINK_S = 5.0  # SessionStart(clear) follows SessionEnd(clear) within this
MAX_INPUT = 1 << 20
TAIL_BYTES = 256 * 1024  # how much of the activity log the /clear link looks back through
EVENTS = ("SessionStart", "SessionEnd")


def _project(payload: dict[str, Any]) -> str | None:
    return os.environ.get("CLAUDE_PROJECT_DIR") or payload.get("cwd") or None


def _claude_pid() -> int | None:
    try:
        return int(os.environ["CLAUDE_PID"])
    except (KeyError, ValueError):
        return None


def _predecessor(project: str, claude_pid: int | None, now: float) -> str | None:
    """The session that a /clear just ended in the same claude process, from the log's tail."""
    path = activity.activity_path(project)
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - TAIL_BYTES))
            lines = f.read().split(b"\n")
    except OSError:
        return None
    for raw in reversed(lines):
        try:
            row = json.loads(raw)
        except ValueError:
            continue  # the cut first line, or a torn one
        ts = row.get("ts") if isinstance(row, dict) else None
        if not isinstance(ts, (int, float)):
            continue
        if now - ts > CLEAR_LINK_S:
            return None  # past the link window: no /clear just ended here
        if row.get("kind") == "session_end" and row.get("reason") == "clear":
            if claude_pid is None or row.get("claude_pid") in (None, claude_pid):
                return row.get("session_id")
    return None


def handle(payload: dict[str, Any]) -> dict[str, Any] | None:
    """Append the activity row for one hook event; returns it (None when there is nothing to do)."""
    event = payload.get("hook_event_name")
    session_id = payload.get("session_id")
    project = _project(payload)
    if not project or not isinstance(session_id, str) or not session_id:
        return None
    pid = _claude_pid()
    if event == "SessionStart":
        source = payload.get("source")
        predecessor = _predecessor(project, pid, time.time()) if source == "clear" else None
        return activity.record(project, "session_start", session_id=session_id, source=source,
                               claude_pid=pid, predecessor=predecessor,
                               transcript_path=payload.get("transcript_path"))
    if event == "SessionEnd":
        return activity.record(project, "session_end", session_id=session_id,
                               reason=payload.get("reason"), claude_pid=pid)
    return activity.record(project, "hook", session_id=session_id, event=event, claude_pid=pid)


def main() -> int:
    """``c3async hook``: always exits 0, so Claude Code is never blocked by us."""
    try:
        data = sys.stdin.buffer.read(MAX_INPUT)
        payload = json.loads(data) if data.strip() else {}
        if isinstance(payload, dict):
            handle(payload)
    except Exception as exc:  # bad input, a full disk: note it, never fail the hook
        try:
            log = c3_home() / "hook-errors.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            with open(log, "a", encoding="utf-8") as f:
                f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {type(exc).__name__}: {exc}\n")
        except OSError:
            pass
    return 0


def hook_command() -> str:
    return f"{shlex.quote(sys.executable)} -m c3async hook"


def settings_path(project: str | None, user: bool) -> Path:
    """``--user``: Claude Code's own settings; a project: its personal, git-ignored
    ``.claude/settings.local.json`` (the command names this machine's Python)."""
    if user:
        from ..catalog.locate import config_home

        return config_home() / "settings.json"
    return Path(project or os.getcwd()).resolve() / ".claude" / "settings.local.json"


def install(path: Path, command: str | None = None) -> list[str]:
    """Add our SessionStart and SessionEnd hooks to the settings file at ``path``, keeping
    everything else. Idempotent. Returns the events it added (empty when all were there).
    A settings file that is not valid JSON is left untouched: ValueError names it."""
    command = command or hook_command()
    path.parent.mkdir(parents=True, exist_ok=True)
    # No lock: Claude Code writes this file without one; the atomic replace keeps readers safe.
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    try:
        settings = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}); fix it and run install-hooks again") from None
    if not isinstance(settings, dict):
        raise ValueError(f"{path} does not hold a JSON object; fix it and run install-hooks again")
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ValueError(f"{path}: 'hooks' is not an object; fix it and run install-hooks again")
    added = []
    for event in EVENTS:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise ValueError(f"{path}: hooks.{event} is not a list; fix it and run install-hooks again")
        present = any(
            isinstance(h, dict) and "c3async" in str(h.get("command", "")) and "hook" in str(h.get("command", ""))
            for g in groups if isinstance(g, dict) for h in g.get("hooks", []) or []
        )
        if not present:
            groups.append({"hooks": [{"type": "command", "command": command, "timeout": 10}]})
            added.append(event)
    if added:
        if text:
            write_atomic(path.with_name(path.name + ".bak"), text.encode("utf-8"))
        write_atomic(path, (json.dumps(settings, indent=2) + "\n").encode("utf-8"))
    return added
