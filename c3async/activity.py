"""The project's activity log, ``.c3/activity.jsonl``: one row ``{ts, kind, ...}`` per event
(session_start, session_end, session_mark, tool calls, hook events), from every process."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import msgspec

from . import jsonl
from .errors import clip
from .paths import project_state

MAX_LOGGED = 4096  # characters of one string field of a row (a path fits)

__all__ = ("ActivityRow", "activity_path", "read_rows", "record")


def activity_path(project: str) -> Path:
    return project_state(project) / "activity.jsonl"


class ActivityRow(msgspec.Struct, kw_only=True):
    """The fields readers fold on; rows carry more, which this view skips."""

    ts: float
    kind: str
    session_id: str | None = None  # the host (Claude Code) session
    c3_session_id: str | None = None
    reason: str | None = None
    source: str | None = None
    claude_pid: int | None = None
    predecessor: str | None = None  # session_start after a /clear: the session it ended
    target: str | None = None  # session_mark: the session marked
    event: str | None = None  # hook: the hook event name
    cwd: str | None = None  # session_start: the folder the session runs in (a worktree, maybe)


def record(project: str, kind: str, **fields: Any) -> dict[str, Any]:
    """Append one activity row; fields that are None are left out."""
    row: dict[str, Any] = {"ts": round(time.time(), 3), "kind": kind}
    # Strings are bounded (a log is a record of what happened, not a store of what was said).
    row.update((k, clip(v, MAX_LOGGED) if isinstance(v, str) else v) for k, v in fields.items() if v is not None)
    jsonl.append(activity_path(project), row)
    return row


def read_rows(project: str) -> jsonl.Batch[ActivityRow]:
    return jsonl.read_all(activity_path(project), ActivityRow)
