"""What the accountant last wrote: each host session's newest row of ``.c3/session_stats.jsonl``.

Rows hold running totals, so a session's newest row (by time, not by place: rows folded in from
a worktree's old state can follow newer ones) is its total. The file grows by a row for every
session whose totals changed at every run (a live session: one a minute), so it is folded as the
marks and the activity log are (``folds.LogFold``): a long-running process (the server, the Hub)
keeps the fold in memory and reads only the rows appended since; a new process starts from the
checkpoint ``.c3/cache/session_stats.fold``. A listing reads it without importing the
accountant (its reader and price tables), and never runs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import msgspec

from ..ground import jsonl
from ..ground.folds import LogFold, fold_for
from ..ground.stateroot import project_state

__all__ = ("SessionTotals", "latest", "latest_totals", "stats_fold", "stats_path")

FOLD_VERSION = 1  # bump when SessionTotals or _apply change meaning: checkpoints are then refolded


class SessionTotals(msgspec.Struct, kw_only=True):
    session_id: str
    ts: float = 0.0  # when this row was written
    title: str | None = None
    input: int = 0
    output: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    cache_read: int = 0
    cost_usd: float = 0.0
    cost_by_model: dict[str, float] = msgspec.field(default_factory=dict)
    tokens_by_model: dict[str, int] = msgspec.field(default_factory=dict)
    unknown_models: list[str] = msgspec.field(default_factory=list)
    responses: int = 0
    first_ts: str | None = None
    last_ts: str | None = None


class Latest(msgspec.Struct):
    """The fold's state: each session's newest row."""

    sessions: dict[str, SessionTotals] = msgspec.field(default_factory=dict)


def stats_path(project: str) -> Path:
    return project_state(project) / "session_stats.jsonl"


def _apply(old: Latest, batch: jsonl.Batch[SessionTotals]) -> Latest:
    """A new state (readers in other threads keep the old one)."""
    latest = dict(old.sessions)
    for row in batch.records:
        held = latest.get(row.session_id)
        if held is None or row.ts >= held.ts:
            latest[row.session_id] = row
    return Latest(latest)


def stats_fold(project: str) -> LogFold[SessionTotals, Latest]:
    path = stats_path(project)
    checkpoint = project_state(project) / "cache" / "session_stats.fold"
    return fold_for(
        ("session_stats", str(path)),
        lambda: LogFold("session_stats", FOLD_VERSION, path, checkpoint, SessionTotals, Latest, Latest, _apply),
    )


def latest(project: str) -> Mapping[str, SessionTotals]:
    """Each session's newest row, as of now, shared with other readers: do not change it."""
    return stats_fold(project).refresh().sessions


def latest_totals(project: str) -> dict[str, SessionTotals]:
    """Each session's newest row, as copies the caller may change."""
    return {sid: msgspec.structs.replace(row) for sid, row in latest(project).items()}
