"""Live burn: who spends the current 5-hour and weekly windows, and how fast now.

Pure functions over the timelines' rows (``timeline.Slot``, a quarter hour of one session's use
of one model) and the recorded rate-limit samples (``limits``): for each window, each session's
and each project's tokens and cost inside it, its share of the window's cost, and its rate now
(the last ``PACE_S`` seconds, per hour), live sessions first (liveness is the caller's: this
floor does not know the sessions view).

A window is the one Claude Code reported where ``c3async statusline`` recorded it (``reported``,
with the percent it said), else ccusage's rule for the 5-hour one (``ccusage``) and the 7 days
ending now for the week (``rolling``); a window Claude Code does not report now (a plan without
a 5-hour window, a reset passed with no sample since) has no percent: absent, never 0 %.

A quarter hour's responses are spread evenly between its first and last (``Spend``): what fell
in the last 15 minutes, or between two samples, is that share of the row. The rows a window
holds are those whose first response falls in it, as ``buckets`` counts them.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable

import msgspec

from . import limits
from .buckets import period_at
from .prices import PriceTable
from .timeline import SLOT_S, Slot

__all__ = ("PACE_S", "Share", "Spend", "WindowBurn", "burn", "slot_usd")

PACE_S = 900.0  # "now": the last quarter hour
ROLLING = "rolling"
NAMES = (limits.FIVE_HOUR, limits.SEVEN_DAY)
HORIZON_S = max(limits.LENGTH_S.values()) + SLOT_S  # how far back a current window can start


class Share(msgspec.Struct):
    """One session's (``key`` its id) or project's (``key`` its path) part of a window."""

    key: str
    project: str
    live: bool
    tokens: int
    cost_usd: float
    share: float | None  # of the window's cost, 0-1 (None: the window cost nothing priced)
    tokens_per_h: float  # now: the last PACE_S seconds, per hour
    usd_per_h: float
    unpriced: bool = False  # it used a model with no price: its cost leaves that out


class WindowBurn(msgspec.Struct):
    """One current window: ``start`` to ``end`` (None: no usage in a current one by the rule),
    drawn by ``rule``; ``used``: the percent Claude Code last reported (at ``seen``), None when
    it does not report this window now."""

    name: str
    rule: str
    start: float | None
    end: float | None
    used: float | None
    seen: float | None
    tokens: int
    cost_usd: float
    tokens_per_h: float
    usd_per_h: float
    sessions: list[Share]
    projects: list[Share]


def slot_usd(s: Slot, table: PriceTable) -> float | None:
    """The row's cost with the table of the moment; None when its model has no price (its
    recorded costs, if any, aside)."""
    if not s.responses:
        return s.recorded_usd
    price = table.find(s.model)
    if price is None:
        return None
    return s.recorded_usd + price.usd(s.tokens, s.above_200k)


class Spend:
    """Cost spent up to any time, each row's cost spread evenly over its first to last response
    (a row is a quarter hour: its span is under ``SLOT_S``): ``at(t)`` costs a bisection and the
    rows still running at ``t``."""

    def __init__(self, rows: Iterable[tuple[float, float, float]]) -> None:
        self.spans = sorted((last, first, usd) for first, last, usd in rows if usd > 0)
        self.lasts = [last for last, _, _ in self.spans]
        self.before = [0.0]  # the cost of the rows before each, in order of their last response
        for _, _, usd in self.spans:
            self.before.append(self.before[-1] + usd)

    @classmethod
    def of(
        cls, timelines: Iterable[tuple[str, Iterable[Slot]]], table: PriceTable, since: float | None = None
    ) -> Spend:
        """The rows' spend; only the rows whose last response is at or after ``since`` when
        given (what ``between`` is asked from ``since`` on: a row wholly before it counts the
        same at both ends)."""
        low = float("-inf") if since is None else since
        return cls(
            (s.first, s.last, slot_usd(s, table) or 0.0)
            for _, slots in timelines
            for s in slots
            if s.slot >= 0 and not s.whole and s.last >= low
        )

    def at(self, t: float) -> float:
        i = bisect.bisect_right(self.lasts, t)
        total = self.before[i]
        for last, first, usd in self.spans[i:]:
            if last >= t + SLOT_S:
                break
            if first < t:
                total += usd * (t - first) / (last - first)
        return total

    def between(self, a: float, b: float) -> float:
        return max(0.0, self.at(b) - self.at(a))


def _part(s: Slot, a: float, b: float) -> float:
    """The share of the row's responses in [a, b], spread evenly over its first to last (a
    session's whole usage placed at its last response is in no rate)."""
    if s.whole:
        return 0.0
    if s.last <= s.first:
        return 1.0 if a <= s.first <= b else 0.0
    return max(0.0, min(b, s.last) - max(a, s.first)) / (s.last - s.first)


def burn(
    timelines: Iterable[tuple[str, Iterable[Slot]]],
    samples: list[limits.Sample],
    table: PriceTable,
    now: float,
    live: set[str] | frozenset[str] = frozenset(),
    rules: bool = True,
) -> list[WindowBurn]:
    """The current 5-hour and weekly windows with each session's and project's part (live ones
    first, then by cost) and the rate now. ``rules`` False: a window Claude Code does not report
    now is left empty, its rule's window not drawn (for a caller that needs only the runways,
    which only a reported window has)."""
    said = {name: [w for w in limits.windows(name, samples) if w.start <= now < w.end] for name in NAMES}
    if rules:
        rows = [(p, s) for p, slots in timelines for s in slots if s.slot >= 0]
        # No current window starts before the week's reach: the rows priced and summed are those
        # after it (ccusage's 5-hour rule reads further back: ``period_at`` takes what it needs).
        recent = [(p, s) for p, s in rows if s.last >= now - HORIZON_S]
    else:  # only the reported windows are drawn: the rows from the first one's start (none: none)
        rows = []
        low = min((w[-1].start for w in said.values() if w), default=math.inf)
        recent = [(p, s) for p, slots in timelines for s in slots if s.slot >= 0 and s.last >= low]
    costs = {id(s): slot_usd(s, table) for _, s in recent}
    return [_window(name, said[name], rows, recent, costs, samples, now, live, rules) for name in NAMES]


def _window(
    name: str,
    said: list[limits.Window],
    rows: list[tuple[str, Slot]],
    recent: list[tuple[str, Slot]],
    costs: dict[int, float | None],
    samples: list[limits.Sample],
    now: float,
    live: set[str] | frozenset[str],
    rules: bool = True,
) -> WindowBurn:
    used: float | None = None
    seen: float | None = None
    start: float | None
    end: float | None
    if said:
        start, end, rule = said[-1].start, said[-1].end, "reported"
        used, seen = said[-1].used, said[-1].seen
    elif not rules:
        start, end, rule = None, None, "ccusage" if name == limits.FIVE_HOUR else ROLLING
    elif name == limits.FIVE_HOUR:
        found = period_at(rows, "window", samples, now)
        start, end, rule = (found[1], found[2], found[3]) if found else (None, None, "ccusage")
    else:
        start, end, rule = now - limits.LENGTH_S[name], now, ROLLING
    inside = [] if start is None or end is None else [(p, s) for p, s in recent if start <= s.first < end]
    sessions: dict[str, list] = {}
    projects: dict[str, list] = {}
    for p, s in inside:
        usd = costs[id(s)]
        tokens = sum(s.all_tokens())
        part = _part(s, now - PACE_S, now)
        for acc in (
            sessions.setdefault(s.session, [p, 0, 0.0, 0.0, 0.0, False]),
            projects.setdefault(p, [p, 0, 0.0, 0.0, 0.0, False]),
        ):
            acc[1] += tokens
            acc[2] += usd or 0.0
            acc[3] += tokens * part
            acc[4] += (usd or 0.0) * part
            acc[5] |= usd is None
    total = sum(acc[2] for acc in projects.values())
    per_h = 3600.0 / PACE_S

    def shares(found: dict[str, list], is_live: set[str] | frozenset[str]) -> list[Share]:
        out = [
            Share(
                key,
                acc[0],
                key in is_live,
                acc[1],
                round(acc[2], 6),
                acc[2] / total if total > 0 else None,
                acc[3] * per_h,
                round(acc[4] * per_h, 6),
                acc[5],
            )
            for key, acc in found.items()
        ]
        out.sort(key=lambda x: (not x.live, -x.cost_usd, -x.tokens, x.key))
        return out

    live_projects = {p for p, s in inside if s.session in live}
    return WindowBurn(
        name,
        rule,
        start,
        end,
        used,
        seen,
        sum(acc[1] for acc in projects.values()),
        round(total, 6),
        sum(acc[3] for acc in projects.values()) * per_h,
        round(sum(acc[4] for acc in projects.values()) * per_h, 6),
        shares(sessions, live),
        shares(projects, live_projects),
    )
