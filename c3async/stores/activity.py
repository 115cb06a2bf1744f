"""The project's activity log, ``.c3/activity.jsonl``: one row ``{ts, kind, ...}`` per event
(session_start, session_end, session_mark, tool calls, hook events), from every process."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import msgspec

from ..ground import clock, jsonl
from ..ground.errors import clip
from ..ground.folds import LogFold, fold_for
from ..ground.project import Project

MAX_LOGGED = 4096  # characters of one string field of a row (a path fits)
OPEN_KEPT_S = 7 * 86400  # a started session with no activity for this long is dropped from the fold

__all__ = ("ActivityRow", "Facts", "activity_path", "facts", "log_fold", "read_rows", "record", "record_once")


def activity_path(project: Project) -> Path:
    return project.state / "activity.jsonl"


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


def record(project: Project, kind: str, **fields: Any) -> dict[str, Any]:
    """Append one activity row; fields that are None are left out."""
    row: dict[str, Any] = {"ts": round(time.time(), 3), "kind": kind}
    # Strings are bounded (a log is a record of what happened, not a store of what was said).
    row.update((k, clip(v, MAX_LOGGED) if isinstance(v, str) else v) for k, v in fields.items() if v is not None)
    jsonl.append(activity_path(project), row)
    return row


SAME_EVENT_BYTES = 64 * 1024  # how far back ``record_once`` looks for the same event


def record_once(
    project: Project, kind: str, within: float, same: tuple[str, ...], **fields: Any
) -> dict[str, Any] | None:
    """``record``, unless a row of the same ``kind`` whose ``same`` fields are equal was written
    in the last ``within`` seconds (None then). Checked and appended under the log's lock, so two
    writers of one event (the plugin's hook and a hook installed by hand) leave one row."""
    row: dict[str, Any] = {"ts": round(time.time(), 3), "kind": kind}
    row.update((k, clip(v, MAX_LOGGED) if isinstance(v, str) else v) for k, v in fields.items() if v is not None)
    line = jsonl.encode_line(row)
    path = activity_path(project)
    with jsonl.appending(path) as log:
        start = max(0, log.size - SAME_EVENT_BYTES)
        for raw in reversed(os.pread(log.fd, log.size - start, start).split(b"\n")[1 if start else 0 :]):
            try:
                old = msgspec.json.decode(raw)
            except (msgspec.DecodeError, RecursionError):
                continue  # a cut first line, a torn or hostile one
            ts = clock.event(old.get("ts"), "an activity row's ts", path) if isinstance(old, dict) else None
            if ts is None:
                continue
            if abs(row["ts"] - ts) > within:
                continue  # not break: a writer that waited on the lock may have left an older row later
            if old.get("kind") == kind and all(old.get(k) == row.get(k) for k in same):
                return None
        log.write(line)
    return row


def read_rows(project: Project) -> jsonl.Batch[ActivityRow]:
    return jsonl.read_all(activity_path(project), ActivityRow)


class Facts(msgspec.Struct):
    """What readers need of the whole log, folded: the liveness fallback's open sessions, the
    /clear facts the hooks recorded, and the folders sessions ran in. Small whatever the log's
    length: it grows with sessions, not with rows."""

    open: dict[str, float] = msgspec.field(default_factory=dict)  # hook-started, not ended: last activity
    # hook-started sessions whose hook named its claude: (that claude's pid, when the hook ran)
    holders: dict[str, tuple[int, float]] = msgspec.field(default_factory=dict)
    cleared: dict[str, None] = msgspec.field(default_factory=dict)  # ended by /clear (hook)
    pairs: list[tuple[str, str]] = msgspec.field(default_factory=list)  # (predecessor, session) of a /clear
    # folders hook-started sessions ran in: absolute paths only, the MAX_CWDS most recent, newest last
    cwds: dict[str, None] = msgspec.field(default_factory=dict)
    newest: float = 0.0


FOLD_VERSION = 4  # bump when Facts or _apply change meaning: checkpoints are then refolded
MAX_CWDS = 1000  # folders kept in the fold, the most recently seen (a shipped log can name 200,000)


def _apply(old: Facts, rows: list[ActivityRow], path: Path | None = None) -> Facts:
    """Only hooks' ``session_start``/``session_end`` open and close a session (a lifecycle
    start says nothing of when the host session ends); any row naming an open session moves its
    last activity. A session started and never ended (killed) leaves the fold after a week.
    A row whose time is out of range (``ground.clock``) is skipped: from the future, it would
    keep a session open for ever and close every other one.
    A new state is built (readers in other threads keep the old one)."""
    facts = Facts(dict(old.open), dict(old.holders), dict(old.cleared), list(old.pairs), dict(old.cwds), old.newest)
    opened, holders = facts.open, facts.holders
    high = clock.latest()
    for row in rows:
        if not clock.EARLIEST < row.ts <= high:
            clock.event(row.ts, "an activity row's ts", path or "activity.jsonl")
            continue
        facts.newest = max(facts.newest, row.ts)
        sid = row.session_id
        if not sid:
            continue
        if row.kind == "session_start":
            opened[sid] = max(opened.get(sid, row.ts), row.ts)
            if isinstance(row.claude_pid, int) and 0 < row.claude_pid < 1 << 31:
                holders[sid] = (row.claude_pid, row.ts)
            else:
                holders.pop(sid, None)  # started again by a claude that did not say which
            if row.predecessor:
                facts.pairs.append((row.predecessor, sid))
            cwd = row.cwd
            if cwd and (cwd.startswith("/") or cwd[1:3] in (":\\", ":/")):  # absolute (POSIX or Windows)
                facts.cwds.pop(cwd, None)  # seen again: the newest last
                facts.cwds[cwd] = None
                if len(facts.cwds) > MAX_CWDS:
                    del facts.cwds[next(iter(facts.cwds))]
        elif row.kind == "session_end":
            opened.pop(sid, None)
            holders.pop(sid, None)
            if row.reason == "clear":
                facts.cleared[sid] = None
        elif sid in opened:
            opened[sid] = max(opened[sid], row.ts)
    for sid in [s for s, last in opened.items() if facts.newest - last > OPEN_KEPT_S]:
        del opened[sid]
        holders.pop(sid, None)
    return facts


def log_fold(project: Project) -> LogFold[ActivityRow, Facts]:
    path = activity_path(project)
    checkpoint = project.state / "cache" / "activity.fold"
    return fold_for(
        ("activity", str(path)),
        lambda: LogFold(
            "activity",
            FOLD_VERSION,
            path,
            checkpoint,
            ActivityRow,
            Facts,
            Facts,
            lambda facts, batch: _apply(facts, batch.records, path),
        ),
    )


def facts(project: Project) -> Facts:
    """The activity log's facts as of now: read from the checkpoint, or from memory in a long
    running process, plus only the rows appended since."""
    return log_fold(project).refresh()
