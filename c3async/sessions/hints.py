"""Stage 7: hints, grey chips that suggest a look. Heuristics only: they never hide a row, and a
live session gets none.

- ``idle Nd``: no activity (the last timestamped line) for N days, N from config (default 7).
- ``ended by /clear``: the activity log saw a ``session_end`` with reason ``clear``; else the next
  session in the same folder began with ``/clear`` within a few seconds of this one's end.
- ``branch gone``: the session's branch is no longer in the repository.
- ``short``: fewer than 3 real prompts.
- ``worktree gone``: the folder the session ran in (a git worktree) was removed.
- ``git metadata unreadable``: the repository's files could not be read whole (a loop, a bound
  reached: ``catalog.gitrefs``), so no branch is judged gone; the reason is logged once.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field

from ..catalog.gitrefs import Branches
from ..catalog.scan import Session
from ..ground.paths import warn_once
from .rows import Row

__all__ = ("CLEAR_GAP_S", "GIT_UNREADABLE", "SHORT_TURNS", "HintContext", "add_hints", "clear_pairs")

CLEAR_GAP_S = 10.0  # /clear writes the new file ~100 ms after the old one's last write
SHORT_TURNS = 3
GIT_UNREADABLE = "git metadata unreadable"


@dataclass(slots=True)
class HintContext:
    now: float
    idle_days: int = 7
    branches: Branches | None = None  # None: not a git checkout, so no branch hints
    cleared: set[str] = field(default_factory=set)  # host ids ended by a /clear (hooks or timing)


@dataclass(slots=True)
class _Times:
    """A row's times as epoch seconds (parsed when its transcript was read)."""

    row: Row
    folder: str
    created: float | None
    last: float | None  # the last timestamped line
    mtime: float


def _times(row: Row, session: Session) -> _Times:
    cand, rec = session.candidate, session.record
    return _Times(row, str(cand.folder), rec.created_ts, rec.last_ts, cand.mtime_ns / 1e9)


def clear_pairs(rows: list[Row], sessions: list[Session]) -> dict[str, str]:
    """{old id: new id} for sessions followed, in the same folder, by one that began with /clear
    right after (within CLEAR_GAP_S of the old file's last line or last write). ``sessions`` in
    the order of ``rows``."""
    times = [_times(row, session) for row, session in zip(rows, sessions, strict=True)]
    ends: dict[str, list[tuple[float, _Times]]] = defaultdict(list)
    for t in times:
        for end in {t.last, t.mtime} - {None}:
            ends[t.folder].append((end, t))  # type: ignore[arg-type]
    for group in ends.values():
        group.sort(key=lambda pair: pair[0])
    found: dict[str, str] = {}
    for new in times:
        began = new.created if new.row.began_with_clear else None
        if began is None:
            continue
        group = ends[new.folder]
        i = bisect.bisect_left(group, began - CLEAR_GAP_S, key=lambda pair: pair[0])
        best, best_gap = None, CLEAR_GAP_S
        while i < len(group) and group[i][0] <= began + CLEAR_GAP_S:
            end, old = group[i]
            i += 1
            if old is new:
                continue
            if abs(began - end) <= best_gap and (old.created is None or old.created < began):
                best, best_gap = old, abs(began - end)
        if best is not None:
            found[best.row.id] = new.row.id
    return found


def add_hints(rows: list[Row], sessions: list[Session], ctx: HintContext) -> None:
    """Fill ``row.hints`` for the rows of one project (``sessions`` in the same order)."""
    times = [_times(row, session) for row, session in zip(rows, sessions, strict=True)]
    cleared = ctx.cleared
    refs = ctx.branches
    if refs is not None and refs.unreadable is not None:
        warn_once(f"{refs.unreadable}: sessions there say '{GIT_UNREADABLE}', and no branch is judged gone")
    for t in times:
        row = t.row
        if row.live:
            row.hints = []
            continue
        hints: list[str] = []
        # The last line's own timestamp: the file's mtime also moves when Claude Code only
        # re-appends metadata (exit, resume, /clear), which is not activity.
        idle_days = int((ctx.now - (t.last or t.mtime)) // 86400)
        if idle_days >= ctx.idle_days:
            hints.append(f"idle {idle_days}d")
        if row.id in cleared:
            hints.append("ended by /clear")
        if refs is not None and refs.unreadable is not None:
            hints.append(GIT_UNREADABLE)
        elif refs is not None and row.branch and row.branch != "HEAD" and row.branch not in refs.names:
            hints.append("branch gone")
        if row.user_turns < SHORT_TURNS and row.user_turns_exact:
            hints.append("short")
        if row.cwd_gone:
            hints.append("worktree gone")
        row.hints = hints
