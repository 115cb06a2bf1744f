"""Usage over time, in buckets: the timelines' rows (``timeline``) summed by day, week, month,
5-hour window, model, project or session, and priced with the table of the moment.

Days, weeks and months are the local time zone's (as ccusage's reports are: the process's
``TZ``, else the system's); a quarter hour, a timeline's row, always lies within one day. A
week is Monday to Monday (``calendar``) except where Claude Code reported the weekly window:
there it is the 7 days ending at the reported reset (``reported``). A 5-hour window is the
reported one where c3async recorded it (``limits``), else ccusage's rule (``ccusage``): a window
starts at the hour of the first response after the last window, lasts 5 hours, and a gap of
more than 5 hours between two responses starts the next. A window of a rule stops where a
reported one begins. A quarter hour holding responses on both sides of a boundary that is not
on the quarter hour (a reported reset, a response at the very end of a ccusage window) counts
where its first response fell.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable
from datetime import datetime

import msgspec

from . import BY, limits
from .prices import PriceTable
from .timeline import SLOT_S, Slot
from .totals import NO_TOKENS, ModelTokens, price_models

__all__ = ("BY", "TIMED", "Bucketed", "UsageRow", "bucket", "current", "period_at")

TIMED = ("day", "week", "month", "window")
WINDOW_S = limits.LENGTH_S[limits.FIVE_HOUR]
WEEK_S = limits.LENGTH_S[limits.SEVEN_DAY]


class UsageRow(msgspec.Struct):
    """One bucket's usage (``c3async usage --json``): ``bucket`` names it (a day ``2026-11-01``, a
    month ``2026-11``, the day a week or the time a window starts, a model, a project, a session
    id); a bucket of time has its ``start`` and ``end`` (local ISO 8601; by session: its first
    and last response in the period, as transcripts write times) and, for weeks and
    windows, the ``rule`` that drew it (``reported``, ``ccusage``, ``calendar``). Tokens, cost and
    ``unpriced_models`` as in ``stats --json``; ``responses``: the API responses counted (a
    response written as several lines counts once); ``sessions``: how many had usage in it."""

    by: str
    bucket: str
    input: int
    output: int
    cache_write_5m: int
    cache_write_1h: int
    cache_read: int
    cost_usd: float
    unpriced_models: list[str]
    responses: int
    sessions: int
    cost_by_model: dict[str, float]
    tokens_by_model: dict[str, int]
    start: str | None = None
    end: str | None = None
    rule: str | None = None
    project: str | None = None  # by session (or split per project): its project


class Bucketed(msgspec.Struct):
    """The rows, and what a reader is owed: responses with no usable time (in no bucket of
    time), sessions placed whole at their last response, the windows' rules used."""

    rows: list[UsageRow]
    undated: int = 0
    whole_sessions: int = 0


def _utc(seconds: float) -> str:
    """As transcripts write times: ``2026-11-01T10:00:00.000Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int(seconds * 1000) % 1000:03d}Z"


def _local(seconds: float) -> str:
    return datetime.fromtimestamp(seconds).astimezone().isoformat(timespec="seconds")


class _Sum:
    __slots__ = ("first", "last", "models", "sessions")

    def __init__(self) -> None:
        self.models: dict[str, list] = {}
        self.sessions: set[str] = set()
        self.first = float("inf")
        self.last = 0.0

    def add(self, s: Slot) -> None:
        # unrolled: a report over 10,000 sessions adds some 50,000 rows
        m = self.models.get(s.model)
        if m is None:
            m = self.models[s.model] = [[0] * 5, [0] * 5, 0, 0.0, 0, [0] * 5]
        t, k = s.tokens, m[0]
        k[0] += t[0]
        k[1] += t[1]
        k[2] += t[2]
        k[3] += t[3]
        k[4] += t[4]
        if s.above_200k != NO_TOKENS:
            m[1] = [a + b for a, b in zip(m[1], s.above_200k)]
        if s.recorded:
            m[3] += s.recorded_usd
            m[4] += s.recorded
            m[5] = [a + b for a, b in zip(m[5], s.recorded_tokens)]
        m[2] += s.responses
        self.sessions.add(s.session)
        if s.slot >= 0:
            if s.first < self.first:
                self.first = s.first
            if s.last > self.last:
                self.last = s.last

    def row(self, by: str, name: str, table: PriceTable) -> UsageRow:
        models = {model: ModelTokens(tuple(m[0]), tuple(m[1]), m[2], m[3], m[4]) for model, m in self.models.items()}
        cost = price_models(models, table)
        i, o, w5, w1, r = (sum(m[0][k] + m[5][k] for m in self.models.values()) for k in range(5))
        return UsageRow(
            by,
            name,
            input=i,
            output=o,
            cache_write_5m=w5,
            cache_write_1h=w1,
            cache_read=r,
            cost_usd=cost.usd,
            unpriced_models=cost.unpriced,
            responses=sum(m[2] + m[4] for m in self.models.values()),
            sessions=len(self.sessions),
            cost_by_model=cost.by_model,
            tokens_by_model={model: sum(m[0]) + sum(m[5]) for model, m in self.models.items()},
        )


def bucket(
    timelines: Iterable[tuple[str, Iterable[Slot]]],
    by: str,
    table: PriceTable,
    *,
    since: float | None = None,
    samples: list[limits.Sample] | None = None,
    per_project: bool = False,
) -> Bucketed:
    """The usage of every (project, rows) of ``timelines`` by ``by`` (one of ``BY``), from
    ``since`` (epoch seconds: the quarter hours whose last response is at or after it) or all of
    it; ``samples``: the recorded rate-limit samples (``limits.samples()``) for weeks and windows.
    ``per_project``: each bucket split into a row per project (its ``project`` set), the buckets
    drawn over every project's rows as without it (a chart stacked by project)."""
    sums: dict[tuple, _Sum] = {}
    undated = 0
    whole: set[str] = set()
    rows: list[tuple[str, Slot]] = []
    for project, slots in timelines:
        for s in slots:
            if s.slot < 0:
                if since is None and by not in TIMED:
                    rows.append((project, s))
                else:
                    undated += s.responses + s.recorded
                continue
            if since is not None and s.last < since:
                continue
            rows.append((project, s))
    for _, s in rows:
        if s.whole:
            whole.add(s.session)
    keys = _keys(rows, by, samples or [])
    if per_project:
        keys = [(*key, project) for (project, _), key in zip(rows, keys)]
    for (_, s), key in zip(rows, keys):
        acc = sums.get(key)
        if acc is None:
            acc = sums[key] = _Sum()
        acc.add(s)
    out = []
    for key, acc in sums.items():
        row = acc.row(by, key[0], table)
        if by in TIMED:
            _dated(row, key)
        elif by == "session":
            row.project = key[1]
            if acc.last:
                row.start, row.end = _utc(acc.first), _utc(acc.last)
        if per_project:
            row.project = key[-1]
        out.append(row)
    if by in TIMED:
        out.sort(key=lambda r: r.start or "")
    else:
        out.sort(key=lambda r: (-r.cost_usd, -sum(r.tokens_by_model.values()), r.bucket))
    return Bucketed(out, undated, len(whole))


def _dated(row: UsageRow, key: tuple) -> UsageRow:
    row.start, row.end = _local(key[1]), _local(key[2])
    row.rule = key[3]
    return row


def current(
    timelines: Iterable[tuple[str, Iterable[Slot]]],
    by: str,
    table: PriceTable,
    samples: list[limits.Sample],
    now: float,
) -> UsageRow | None:
    """The 5-hour window (``by`` 'window') or week holding ``now``, as ``bucket`` draws it over
    all of ``timelines``, summed from its own rows alone (``period_at``); None when no row falls
    in one that holds ``now``."""
    rows = [(p, s) for p, slots in timelines for s in slots if s.slot >= 0]
    key = period_at(rows, by, samples, now)
    if key is None:
        return None
    acc = _Sum()
    for _, s in rows:
        if key[1] <= s.first < key[2]:  # windows and weeks do not overlap: a row is in the one its first is
            acc.add(s)
    return _dated(acc.row(by, key[0], table), key)


def _keys(rows: list[tuple[str, Slot]], by: str, samples: list[limits.Sample]) -> list[tuple]:
    """Each row's bucket, in the rows' order: (name, ...) and, for time, (name, start, end, rule)."""
    if by == "model":
        return [(s.model,) for _, s in rows]
    if by == "project":
        return [(project,) for project, _ in rows]
    if by == "session":
        return [(s.session, project) for project, s in rows]
    if by in ("day", "month"):
        fmt = "%Y-%m-%d" if by == "day" else "%Y-%m"
        named: dict[int, tuple] = {}
        out = []
        for _, s in rows:
            key = named.get(s.slot)
            if key is None:
                at = s.slot * SLOT_S
                t = time.localtime(at)
                first = _midnight(t, first_of_month=by == "month")
                end = _midnight(t, 1) if by == "day" else _next_month(first)
                key = named[s.slot] = (time.strftime(fmt, t), first, end, None)
            out.append(key)
        return out
    name = limits.FIVE_HOUR if by == "window" else limits.SEVEN_DAY
    return _periods(rows, limits.windows(name, samples), by)


def period_at(rows: list[tuple[str, Slot]], by: str, samples: list[limits.Sample], now: float) -> tuple | None:
    """The 5-hour window (``by`` 'window') or week holding ``now`` as ``bucket`` draws them from
    ``rows`` (the reported one, else the rule's): (label, start, end, rule); None when no row
    falls in one that holds ``now`` (no usage in it yet)."""
    dated = [r for r in rows if r[1].slot >= 0]
    said = [w for w in limits.windows(limits.FIVE_HOUR if by == "window" else limits.SEVEN_DAY, samples)
            if w.start <= now < w.end]  # fmt: skip
    if said:  # reported: no rule to follow back
        w = said[-1]
        found = any(w.start <= s.first < w.end for _, s in dated)
        return (_label(w.start, by), w.start, w.end, "reported") if found else None
    # a week holding now began in the last 7 days (a calendar one: an hour more across a DST change)
    week_start = now - WEEK_S - 2 * 3600
    dated = _chain(dated, now) if by == "window" else [r for r in dated if r[1].first >= week_start]
    for key in set(_keys(dated, by, samples)):
        if key[1] <= now < key[2]:
            return key
    return None


def _chain(rows: list[tuple[str, Slot]], now: float) -> list[tuple[str, Slot]]:
    """The rows ccusage's 5-hour rule needs to place ``now``, oldest first: from the last row
    up to ``now`` that came ``WINDOW_S`` or more after every row before it (a block always
    starts there: the blocks before it end before it), every row after."""
    order = sorted(rows, key=lambda r: r[1].first)
    start, reach = 0, float("-inf")
    for i, (_, s) in enumerate(order):
        if s.first <= now and s.first - reach >= WINDOW_S:
            start = i
        reach = max(reach, s.last)
    return order[start:]


def _midnight(t: time.struct_time, days: int = 0, *, first_of_month: bool = False) -> float:
    """Local midnight of ``t``'s day (or of its month's first), ``days`` later (mktime carries
    a day past the month's end, and a day of 23 or 25 hours)."""
    day = 1 if first_of_month else t.tm_mday
    return time.mktime((t.tm_year, t.tm_mon, day + days, 0, 0, 0, 0, 0, -1))


def _next_month(first: float) -> float:
    t = time.localtime(first)
    year, month = (t.tm_year + 1, 1) if t.tm_mon == 12 else (t.tm_year, t.tm_mon + 1)
    return time.mktime((year, month, 1, 0, 0, 0, 0, 0, -1))


def _periods(rows: list[tuple[str, Slot]], reported: list[limits.Window], by: str) -> list[tuple]:
    """Each row's window (``by`` 'window') or week: the reported one it falls in, else the
    rule's (see the module's docstring)."""
    starts = [w.start for w in reported]
    order = sorted(range(len(rows)), key=lambda i: rows[i][1].first)
    out: list[tuple] = [()] * len(rows)
    block: list[float] | None = None  # ccusage's: [start, end, last response]
    labels: dict[float, str] = {}  # a window's label, once per window (not per row)
    for i in order:
        s = rows[i][1]
        at = s.first
        j = bisect.bisect_right(starts, at) - 1
        if j >= 0 and at < reported[j].end:
            w = reported[j]
            out[i] = (
                labels.get(w.start) or labels.setdefault(w.start, _label(w.start, by)),
                w.start,
                w.end,
                "reported",
            )
            continue
        before = reported[j].end if j >= 0 else float("-inf")  # the reported window before, and after
        after = reported[j + 1].start if j + 1 < len(reported) else float("inf")
        if by == "window":
            if block is None or at >= block[1] or at - block[0] > WINDOW_S or at - block[2] > WINDOW_S:
                start = at - at % 3600
                block = [start, min(start + WINDOW_S, after), s.last]
            else:
                block[2] = max(block[2], s.last)
            start, end, rule = max(block[0], before), block[1], "ccusage"
        else:
            t = time.localtime(at)
            monday, sunday_night = _midnight(t, -t.tm_wday), _midnight(t, 7 - t.tm_wday)
            start, end, rule = max(monday, before), min(sunday_night, after), "calendar"
        out[i] = (labels.get(start) or labels.setdefault(start, _label(start, by)), start, end, rule)
    return out


def _label(start: float, by: str) -> str:
    return time.strftime("%Y-%m-%d %H:%M" if by == "window" else "%Y-%m-%d", time.localtime(start))
