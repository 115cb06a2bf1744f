"""The Hub's Usage page as one JSON-ready dict: tokens and cost per day or per 5-hour window,
stacked by project; the current 5-hour and weekly windows (used %, reset, rule, runway); the
live sessions' burn.

The figures are the timelines as the accountant last wrote them (``usage.timeline``): a page
reads no transcript and accounts nothing, so it paints at once; the doors that stay up bring
the timelines up to date in the background (``runtime``'s ``account`` job), and ``as_of`` says
when the oldest was written. Each window's runway, and the refusals, are the burn's
(``usage_report.usage_page``).

Projects beyond the ``TOP`` largest of the period are stacked as one "other projects" part (a
chart of fifty colours says nothing). Names and titles come from files: the page sets them as
text, never as markup.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from ..ground.errors import C3Error
from ..ground.project import Project
from ..live.reader import live_sessions
from ..live.running import read_registry
from ..usage import limits, ratelimits
from ..usage.buckets import WINDOW_S, UsageRow, bucket, current
from ..usage.prices import PriceTable, prices_signature
from ..usage.timeline import SLOT_S, Slot, Timeline
from ..usage.timeline import load as load_timeline
from ..usage.timeline import path as timeline_path
from . import usage_report
from .view import report_prices

__all__ = ("BY", "SINCE", "TOP", "usage_charts")

BY = ("day", "window")  # the page's two charts
SINCE = {"day": "30d", "window": "7d"}  # each chart's period when none is asked for
TOP = 9  # projects drawn in colours of their own; the rest are one part
BURN_S = 900.0  # a live session's pace: its usage of the last quarter hour, per hour
# The runways and refusals are held while the files they rest on hold, this long at most (the
# pace moves with time); the Hub works them out again after each accounting pass (``refresh``).
BURN_HOLD_S = 90.0
WINDOWS = ((limits.FIVE_HOUR, "5-hour", "window"), (limits.SEVEN_DAY, "weekly", "week"))
_STATES = {"waiting": 0, "busy": 1, "idle": 2}  # the burn's order, as the live board's


def usage_charts(projects: list[Project], by: str, since: str | None, now: float | None = None) -> dict[str, Any]:
    """The page's data for the chart ``by`` (``day`` or ``window``) from ``since`` (as ``c3async
    usage --since`` reads it; None: ``SINCE[by]``), cut at the quarter hour."""
    now = time.time() if now is None else now
    start = usage_report.since_of(since or SINCE[by], now, what="since")
    start = None if start is None else start - start % SLOT_S
    inputs = _inputs(projects)
    rests = inputs if by == "window" else (inputs[0], None, inputs[2])  # days: not on the samples
    out = dict(_held(("chart", by, start, rests), lambda: _chart(projects, by, start, inputs)))
    out["now"] = _local(now)
    out.update(_current(projects, inputs, _live(projects, now), now))
    page = _burn_part(projects, inputs, now)
    runways = {w["name"]: w for w in page["windows"]}
    for w in out["windows"]:
        found = runways.get(w["window"])
        if found is not None and found["runway"] is not None:
            w["runway"] = found["runway"]  # its samples: those the fit rests on
    out["refusals"] = page["refusals"]
    return out


def refresh(projects: list[Project]) -> None:
    """The page's first asks worked out where what they rest on moved, and held, so that a
    visit is a lookup; the runways worked out again and kept for the status line too (as
    ``usage_report.refresh_runway`` does, when a rate limit was ever recorded). The Hub's chore
    at its start and after each accounting pass."""
    now = time.time()
    if os.path.isfile(ratelimits.log_path()):
        _burn_part(projects, _inputs(projects), now, again=True)
    for by in BY:
        usage_charts(projects, by, None, now)


def _burn_part(projects: list[Project], inputs: tuple, now: float, again: bool = False) -> dict[str, Any]:
    """The runways and refusals (``usage_report.usage_page``: the burn's), held for the same
    ``inputs`` up to ``BURN_HOLD_S``; ``again``: worked out afresh. They do not depend on which
    sessions are live (that is ``_current``'s)."""
    global _burned
    with _lock:
        if not again and _burned is not None and _burned[0] == inputs and abs(now - _burned[1]) < BURN_HOLD_S:
            return _burned[2]
        loaded = dict(_loaded(projects, inputs))  # decoded once, while their files hold
        part = usage_report.usage_page(projects, now, loaded, live=set())
        _burned = (inputs, now, part)
        return part


def _live(projects: list[Project], now: float) -> dict[str, tuple[str, str | None]]:
    """The sessions live now, each with its project and state (waiting, busy, idle), as
    c3async's servers and Claude Code's registry say (read once for every project). A project
    whose heartbeats cannot be read has none."""
    registry = read_registry()
    live: dict[str, tuple[str, str | None]] = {}
    for p in projects:
        try:
            found = live_sessions(p, registry=registry, now=now)
        except (OSError, C3Error):
            continue
        for sid, e in found.items():
            if sid and e.live and sid not in live:
                live[sid] = (p.root, e.state)
    return live


# What the page is made of, as of the files it reads: each project's timeline, the rate-limit
# log and prices.json. A few answers are held by it (the page asks twice, and again every
# minute): a timeline that moved, a sample recorded or a price changed makes a new key.
_HOLD = 8
_answers: dict[tuple, Any] = {}
_burned: tuple[tuple, float, dict[str, Any]] | None = None  # the runways and refusals: for what, when
_timelines: dict[Project, tuple[tuple | None, Timeline | None]] = {}
_lock = threading.Lock()


def _stat(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _inputs(projects: list[Project]) -> tuple:
    return (
        tuple((p, _stat(timeline_path(p))) for p in projects),
        _stat(ratelimits.log_path()),
        prices_signature(),
    )


def _held(key: tuple, make: Callable[[], Any], fresh: Callable[[Any], bool] | None = None) -> Any:
    """The answer held for ``key`` (and ``fresh``, when given), else ``make()``'s, held; the
    least lately used goes first (one maker at a time: the page's two requests do the shared
    work once)."""
    with _lock:
        found = _answers.pop(key, None)
        if found is None or (fresh is not None and not fresh(found)):
            found = make()
        _answers[key] = found  # the newest last
        while len(_answers) > _HOLD:
            del _answers[next(iter(_answers))]
        return found


def _loaded(projects: list[Project], inputs: tuple) -> list[tuple[str, Timeline]]:
    """Each project's timeline, decoded again only when its file moved (``inputs``' stat)."""
    out = []
    for p, stat in inputs[0]:
        held = _timelines.get(p)
        if held is None or held[0] != stat:
            held = _timelines[p] = (stat, load_timeline(p))
        if held[1] is not None:
            out.append((p.root, held[1]))
    for gone in set(_timelines) - set(projects):
        del _timelines[gone]
    return out


def _chart(projects: list[Project], by: str, start: float | None, inputs: tuple) -> dict[str, Any]:
    found = _loaded(projects, inputs)
    table = report_prices()
    samples = limits.samples(f for _, t in found for f in t.refusals) if by == "window" else None
    parts = bucket([(p, t.slots) for p, t in found], by, table, since=start, samples=samples, per_project=True)
    top = _top(parts.rows)
    return {
        "by": by,
        "since": _local(start) if start is not None else None,
        "as_of": _local(min(t.written for _, t in found)) if found else None,
        "projects": [{"project": p, "name": _name(p), **_figures(rows)} for p, rows in top.items()],
        "buckets": _stacked(parts.rows, top),
        "undated": parts.undated,
        "unpriced_models": sorted({m for r in parts.rows for m in r.unpriced_models}),
    }


def _name(project: str | None) -> str:
    return os.path.basename(project.rstrip("/")) or project if project else "other projects"


def _tokens(r: UsageRow) -> int:
    return r.input + r.output + r.cache_write_5m + r.cache_write_1h + r.cache_read


def _figures(rows: Iterable[UsageRow]) -> dict[str, Any]:
    """Rows' sums, as every part of the page carries them."""
    rows = list(rows)
    return {
        "tokens": sum(_tokens(r) for r in rows),
        "input": sum(r.input for r in rows),
        "output": sum(r.output for r in rows),
        "cache_write": sum(r.cache_write_5m + r.cache_write_1h for r in rows),
        "cache_read": sum(r.cache_read for r in rows),
        "cost_usd": round(sum(r.cost_usd for r in rows), 6),
        "responses": sum(r.responses for r in rows),
        "unpriced": any(r.unpriced_models for r in rows),
    }


def _top(rows: list[UsageRow]) -> dict[str | None, list[UsageRow]]:
    """Each project's rows, the largest of the period first (by cost, then tokens); past ``TOP``,
    the rest under None (one "other projects" part)."""
    of: dict[str | None, list[UsageRow]] = {}
    for r in rows:
        of.setdefault(r.project, []).append(r)
    ranked = sorted(of, key=lambda p: (-sum(r.cost_usd for r in of[p]), -sum(_tokens(r) for r in of[p]), p or ""))
    if len(ranked) <= TOP + 1:  # one more project is drawn as itself, not as "1 other"
        return {p: of[p] for p in ranked}
    out = {p: of[p] for p in ranked[:TOP]}
    out[None] = [r for p in ranked[TOP:] for r in of[p]]
    return out


def _stacked(rows: list[UsageRow], top: dict[str | None, list[UsageRow]]) -> list[dict[str, Any]]:
    """A bar per bucket of time, oldest first: its total and a part per project (in the legend's
    order; the projects past ``TOP`` summed as the part of None)."""
    shown = {p for p in top if p is not None}
    order = {p: i for i, p in enumerate(top)}
    bars: dict[str, dict[str, Any]] = {}
    split: dict[str, dict[str | None, list[UsageRow]]] = {}
    for r in rows:  # bucket() gives them oldest first
        if r.bucket not in bars:
            bars[r.bucket] = {"bucket": r.bucket, "start": r.start, "end": r.end, "rule": r.rule}
            split[r.bucket] = {}
        split[r.bucket].setdefault(r.project if r.project in shown else None, []).append(r)
    for name, bar in bars.items():
        parts = sorted(split[name].items(), key=lambda kv: order[kv[0]])
        bar.update(_figures(r for _, rs in parts for r in rs))
        bar["parts"] = [{"project": p, **_figures(rs)} for p, rs in parts]
    return list(bars.values())


def _local(seconds: float) -> str:
    return datetime.fromtimestamp(seconds).astimezone().isoformat(timespec="seconds")


# ------------------------------------------------- the windows and the live sessions' burn


class _Drawn(NamedTuple):
    """The current windows as the timelines and samples draw them at ``now`` (as ``c3async usage
    --by window`` and ``--by week`` draw the ones holding it), and each session's rows."""

    found: list[tuple[str, Timeline]]
    samples: list[limits.Sample]
    table: PriceTable
    here: dict[str, UsageRow | None]  # by 'window' and 'week': the one holding now (None: no usage in one)
    sessions: dict[str, list[tuple[str, Slot]]]  # each session's rows (the burn's)

    def holds(self, now: float) -> bool:
        """Whether the windows drawn still hold ``now`` (one that ended draws them again; none
        holding: only a new row, a moved timeline, starts one)."""
        return all(u is None or _epoch(u.start or "") <= now < _epoch(u.end or "") for u in self.here.values())


def _draw(projects: list[Project], inputs: tuple, now: float) -> _Drawn:
    found = _loaded(projects, inputs)
    table = report_prices()
    samples = limits.samples(f for _, t in found for f in t.refusals)
    here = {by: current([(p, t.slots) for p, t in found], by, table, samples, now) for _, _, by in WINDOWS}
    sessions: dict[str, list[tuple[str, Slot]]] = {}
    for p, s in ((p, s) for p, t in found for s in t.slots if s.slot >= 0):
        sessions.setdefault(s.session, []).append((p, s))
    return _Drawn(found, samples, table, here, sessions)


def _current(
    projects: list[Project], inputs: tuple, live: dict[str, tuple[str, str | None]], now: float
) -> dict[str, Any]:
    """The current 5-hour and weekly windows and the live sessions' burn: a window's used % and
    reset where Claude Code reported one holding ``now``, else the rule's window with its used %
    unknown (never 0); the runway is filled in from the burn's calibration (``usage_charts``)."""
    d = _held(("drawn", inputs), lambda: _draw(projects, inputs, now), fresh=lambda d: d.holds(now))
    windows = []
    five_hour: UsageRow | None = None
    for key, name, by in WINDOWS:
        reported = [w for w in limits.windows(key, d.samples) if w.start <= now < w.end]
        w = reported[-1] if reported else None
        here = d.here[by]
        if key == limits.FIVE_HOUR:
            five_hour = here
        windows.append(
            {
                "window": key,
                "name": name,
                "start": _local(w.start) if w else here.start if here else None,
                "resets_at": _local(w.end) if w else here.end if here else None,
                "rule": "reported" if w else here.rule if here else None,
                "used": w.used if w else None,
                "seen": _local(w.seen) if w else None,
                "samples": sum(1 for s in d.samples if w and s.window == key and w.start <= s.t < w.end),
                "runway": None,
                **_figures([here] if here else []),
            }
        )
    return {"windows": windows, "live": _burn(d, live, five_hour, now)}


def _by_project(rows: Iterable[tuple[str, Slot]]) -> list[tuple[str, list[Slot]]]:
    of: dict[str, list[Slot]] = {}
    for p, s in rows:
        of.setdefault(p, []).append(s)
    return list(of.items())


def _burn(
    d: _Drawn, live_now: dict[str, tuple[str, str | None]], window: UsageRow | None, now: float
) -> list[dict[str, Any]]:
    """Each live session's tokens and cost per hour now (its last ``BURN_S``, per hour) and in
    the current 5-hour window, with its share of the window's cost; waiting ones first, then
    busy, idle, unknown. The sessions of the projects with a timeline (``live_now``: ``_live``'s)."""
    accounted = {p for p, _ in d.found}
    live = {sid: found for sid, found in live_now.items() if found[0] in accounted}
    if not live:
        return []
    start, end = (_epoch(window.start or ""), _epoch(window.end or "")) if window else (now - WINDOW_S, now)
    mine = [r for sid in live for r in d.sessions.get(sid, ())]
    pace = _sessions(((p, s) for p, s in mine if s.last >= now - BURN_S), d.table)
    spent = _sessions(((p, s) for p, s in mine if start <= s.first < end), d.table)
    total = window.cost_usd if window else 0.0
    titles = {sid: title for _, t in d.found for sid, title in t.titles.items() if sid in live}
    per_hour = 3600.0 / BURN_S
    out = []
    for sid, (project, state) in sorted(live.items(), key=lambda kv: (_STATES.get(kv[1][1] or "", 3), kv[0])):
        now_u, win_u = pace.get(sid), spent.get(sid)
        out.append(
            {
                "id": sid,
                "project": project,
                "name": _name(project),
                "title": titles.get(sid),
                "state": state,
                "tokens_per_hour": round(_tokens(now_u) * per_hour) if now_u else 0,
                "cost_per_hour": round(now_u.cost_usd * per_hour, 6) if now_u else 0.0,
                "window_tokens": _tokens(win_u) if win_u else 0,
                "window_cost": round(win_u.cost_usd, 6) if win_u else 0.0,
                "share": round(win_u.cost_usd / total, 4) if win_u and total else None,
            }
        )
    return out


def _sessions(rows: Iterable[tuple[str, Slot]], table: PriceTable) -> dict[str, UsageRow]:
    return {u.bucket: u for u in bucket(_by_project(rows), "session", table).rows}


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()
