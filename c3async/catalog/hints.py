"""Stage 7: hints, grey chips that suggest a look. Heuristics only: they never hide a row, and a
live session gets none.

- ``idle Nd``: no activity (the last timestamped line) for N days, N from config (default 7).
- ``ended by /clear``: the activity log saw a ``session_end`` with reason ``clear``; else the next
  session in the same folder began with ``/clear`` within a few seconds of this one's end.
- ``branch gone``: the session's branch is no longer in the repository.
- ``short``: fewer than 3 real prompts.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from .rows import Row

__all__ = ("CLEAR_GAP_S", "HintContext", "SHORT_TURNS", "add_hints", "epoch")

CLEAR_GAP_S = 10.0  # /clear writes the new file ~100 ms after the old one's last write
SHORT_TURNS = 3


def epoch(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass(slots=True)
class HintContext:
    now: float
    idle_days: int = 7
    branches: set[str] | None = None  # None: not a git checkout, so no branch hints
    cleared: set[str] = field(default_factory=set)  # host ids with a session_end(reason=clear)


def _last_seen(row: Row) -> float:
    # The last line's own timestamp: the file's mtime also moves when Claude Code only re-appends
    # metadata (exit, resume, /clear), which is not activity.
    return epoch(row.last_activity) or epoch(row.mtime) or 0.0


def _cleared_by_heuristic(rows: list[Row]) -> set[str]:
    """Ids of sessions followed, in the same folder, by one that began with /clear right after."""
    by_folder: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_folder[os.path.dirname(row.path)].append(row)
    found: set[str] = set()
    for group in by_folder.values():
        for new in group:
            if not new.began_with_clear:
                continue
            began = epoch(new.created_at)
            if began is None:
                continue
            best, best_gap = None, CLEAR_GAP_S
            for old in group:
                if old is new:
                    continue
                ends = [t for t in (epoch(old.last_activity), epoch(old.mtime)) if t is not None]
                gap = min((abs(began - t) for t in ends), default=None)
                started = epoch(old.created_at)
                if gap is not None and gap <= best_gap and (started is None or started < began):
                    best, best_gap = old, gap
            if best is not None:
                found.add(best.id)
    return found


def add_hints(rows: list[Row], ctx: HintContext) -> None:
    """Fill ``row.hints`` for the rows of one project."""
    cleared = ctx.cleared | _cleared_by_heuristic(rows)
    for row in rows:
        if row.live:
            row.hints = []
            continue
        hints: list[str] = []
        idle_days = int((ctx.now - _last_seen(row)) // 86400)
        if idle_days >= ctx.idle_days:
            hints.append(f"idle {idle_days}d")
        if row.id in cleared:
            hints.append("ended by /clear")
        if (
            ctx.branches is not None
            and row.branch
            and row.branch != "HEAD"
            and row.branch not in ctx.branches
        ):
            hints.append("branch gone")
        if row.user_turns < SHORT_TURNS and row.user_turns_exact:
            hints.append("short")
        row.hints = hints
