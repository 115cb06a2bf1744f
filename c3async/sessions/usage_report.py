"""Usage over time as the doors show it: ``c3async usage`` (and its alias ``stats``) and
``c3_status(view='usage')``, the current 5-hour and weekly windows with each project's and
session's share, for an agent to look at before a long job.

Every figure comes from the accountant's files (``usage.timeline``, ``usage.totals``), brought
up to date first where nothing stops it (a project where nothing moved costs a stat per
transcript). Every cell that comes from a file (ids, titles, model names, paths) is made inert.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from ..ground.errors import BadArgument, C3Error
from ..ground.project import Project
from ..ground.term import inert_line
from ..usage import limits
from ..usage.account import Result, account_projects, deleted
from ..usage.buckets import TIMED, Bucketed, UsageRow, bucket
from ..usage.prices import UNPRICED, PriceTable, unpriced_note
from ..usage.timeline import Slot, Timeline
from ..usage.timeline import load as load_timeline
from ..usage.totals import StatsRow, latest, stats_rows

if TYPE_CHECKING:
    from ..usage.burn import WindowBurn
    from ..usage.reader import Refusal
    from ..usage.runway import Runway

__all__ = (
    "BurnReport",
    "burn_json",
    "burn_report",
    "burn_table",
    "refresh_runway",
    "since_of",
    "usage_page",
    "usage_rows",
    "usage_table",
    "usage_view",
)


def since_of(text: str | None, now: float | None = None, what: str = "--since") -> float | None:
    """``--since``: ``today`` or a date (from its local midnight), or a time ago (``5h``, ``7d``,
    ``30d``, ``2w``); None: all of it. A refusal names it ``what``."""
    if text is None or not text.strip():
        return None
    value = text.strip().lower()
    now = time.time() if now is None else now
    if value == "today":
        t = time.localtime(now)
        return time.mktime((t.tm_year, t.tm_mon, t.tm_mday, 0, 0, 0, 0, 0, -1))
    try:
        day = datetime.fromisoformat(value)
    except ValueError:
        day = None
    if day is not None and day.tzinfo is None:
        try:
            return day.timestamp()  # local, as the days of the report are
        except (OverflowError, OSError, ValueError):
            raise BadArgument(f"{what}: {text[:40]!r} is out of range") from None
    from .search import parse_when  # a time ago: as `search --since` reads one

    return float(parse_when(text, what) or 0)


def _slots(r: Result) -> Iterable[Slot]:
    line = r.timeline or load_timeline(r.project)
    return line.slots if line is not None else ()


def usage_rows(
    projects: list[Project],
    by: str,
    table: PriceTable,
    *,
    since: float | None = None,
    on_error: Callable[[Project, Exception], None] | None = None,
    processes: bool = True,
) -> Bucketed | list[StatsRow]:
    """The projects' usage brought up to date and summed ``by``. By session: a stats row per
    session (what `stats` shows): for all time the stats log's totals, a session Claude Code
    deleted among them; from ``since``, the period's part of each."""
    results = account_projects(projects, only_changed=True, processes=processes, on_error=on_error)
    if by != "session" or since is None:
        if by == "session":
            rows: list[StatsRow] = []
            for r in results:  # the ledger's rows too: a session Claude Code deleted is still counted
                totals = {**latest(r.project), **r.totals}
                rows += stats_rows(r.project, totals, table, deleted(r.project, totals))
            rows.sort(key=lambda r: r.last_ts or "", reverse=True)
            return rows
        refused = (f for r in results if (line := r.timeline) is not None for f in line.refusals)
        return bucket(
            [(r.project.root, _slots(r)) for r in results], by, table, since=since, samples=limits.samples(refused)
        )
    found = bucket([(r.project.root, _slots(r)) for r in results], by, table, since=since)
    titles: dict[str, str] = {}
    as_of: dict[str, float] = {}
    for r in results:
        line = r.timeline or load_timeline(r.project)
        if line is not None:
            titles.update(line.titles)
            as_of[r.project.root] = line.written
    gone = {
        sid
        for r in results
        for sid in deleted(r.project, {u.bucket for u in found.rows if u.project == r.project.root})
    }
    out = [_stats_row(u, titles.get(u.bucket), as_of.get(u.project or "", 0.0), u.bucket in gone) for u in found.rows]
    out.sort(key=lambda r: r.last_ts or "", reverse=True)
    return out


def _stats_row(u: UsageRow, title: str | None, as_of: float, gone: bool) -> StatsRow:
    return StatsRow(
        u.bucket,
        u.project or "",
        title,
        u.input,
        u.output,
        u.cache_write_5m,
        u.cache_write_1h,
        u.cache_read,
        u.cost_usd,
        u.unpriced_models,
        u.responses,
        u.start,
        u.end,
        u.cost_by_model,
        u.tokens_by_model,
        as_of,
        gone,
    )


_HEADS = {"day": "DAY", "week": "WEEK", "month": "MONTH", "window": "WINDOW", "model": "MODEL", "project": "PROJECT"}
_RULES = {
    "reported": "reported: as Claude Code reported the window (its reset, recorded by `c3async statusline`)",
    "ccusage": "ccusage: no reset recorded; ccusage's rule (from the hour of the first response, 5 hours, "
    "a gap over 5 hours starts the next)",
    "calendar": "calendar: no weekly reset recorded; Monday to Monday, local time",
}


def usage_table(found: Bucketed, by: str) -> str:
    """The buckets as a table: tokens of each kind, cost (``+``: plus the usage of models with
    no price, named below), responses and sessions, a total row, and what a reader is owed."""
    if by == "project":
        names = [inert_line(os.path.basename(r.bucket.rstrip("/")) or r.bucket) for r in found.rows]
    else:
        names = [inert_line(r.bucket) for r in found.rows]
    ruled = by in ("week", "window")
    cells = [
        [
            name,
            *([r.rule or ""] if ruled else []),
            f"{r.input:,}",
            f"{r.output:,}",
            f"{r.cache_write_5m + r.cache_write_1h:,}",
            f"{r.cache_read:,}",
            f"{r.cost_usd:.2f}{UNPRICED if r.unpriced_models else ' '}",
            f"{r.responses:,}",
            f"{r.sessions:,}",
        ]
        for name, r in zip(names, found.rows)
    ]
    rows = found.rows
    unpriced: dict[str, int] = {}
    for r in rows:
        for m in r.unpriced_models:
            unpriced[m] = unpriced.get(m, 0) + r.tokens_by_model.get(m, 0)
    cells.append(
        [
            "total",
            *([""] if ruled else []),
            f"{sum(r.input for r in rows):,}",
            f"{sum(r.output for r in rows):,}",
            f"{sum(r.cache_write_5m + r.cache_write_1h for r in rows):,}",
            f"{sum(r.cache_read for r in rows):,}",
            f"{sum(r.cost_usd for r in rows):.2f}{UNPRICED if unpriced else ' '}",
            f"{sum(r.responses for r in rows):,}",
            "",
        ]
    )
    head = [_HEADS[by], *(["RULE"] if ruled else []), "INPUT", "OUTPUT", "CACHE-W", "CACHE-R", "COST", "RESPONSES"]
    head.append("SESSIONS")
    widths = [max(len(c[i]) for c in [head, *cells]) for i in range(len(head))]
    text = 2 if ruled else 1  # the columns of text, left-aligned
    lines = [
        "  ".join(c.ljust(w) if i < text else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip()
        for row in [head, *cells]
    ]
    if unpriced:
        lines.append(unpriced_note(unpriced))
    for rule in sorted({r.rule for r in rows if r.rule}):
        lines.append(_RULES[rule])
    if by in TIMED and rows:
        lines.append(f"days, weeks and months in local time ({time.strftime('%Z')})")
    if found.undated:
        lines.append(f"{found.undated:,} responses with no usable time are in no {by}")
    if found.whole_sessions:
        lines.append(
            f"{found.whole_sessions:,} session(s) whose responses are no longer held (Claude Code deleted the "
            "transcript) counted whole at their last response"
        )
    return "\n".join(lines)


# ------------------------------------------------------------------------- c3_status(view='usage')


def usage_view(project: Project, now: float | None = None) -> str:
    """The current 5-hour and weekly windows: their totals, and each project's and session's
    share of them (this project accounted now; the others as their last pass left them)."""
    from ..usage.prices import current_prices
    from .projects import other_projects

    now = time.time() if now is None else now
    table = current_prices()
    here = account_projects([project], only_changed=True, processes=False)
    others = other_projects(project)
    lines_of: list[tuple[str, Iterable[Slot]]] = [(r.project.root, _slots(r)) for r in here]
    titles: dict[str, str] = {}
    for r in here:
        line = r.timeline or load_timeline(r.project)
        titles.update(line.titles if line else {})
    for other in others:
        line = load_timeline(other)
        if line is not None:
            lines_of.append((other.root, line.slots))
            titles.update(line.titles)
    report = burn_report([project], now, account=False)
    samples = limits.samples(f for _, f in report.refusals)
    out = []
    for by, name in (("window", "5-hour window"), ("week", "weekly window")):
        current = _current(lines_of, by, table, samples, now)
        out += _window_lines(name, current, project, titles, table, samples, now)
        out.append("")
    out.append("runway (when the window reaches 100% at the pace of the last 15 minutes):")
    out += ["  " + runway_line(report.runways.get(w.name), w.name, now) for w in report.windows]
    out.append("")
    out += refusal_lines(report.refusals)
    out.append("")
    out.append("(shares: of the window's cost; other projects as their last accounting left them)")
    return "\n".join(out).rstrip()


def _current(
    timelines: list[tuple[str, Iterable[Slot]]], by: str, table: PriceTable, samples: list, now: float
) -> tuple[UsageRow | None, list[tuple[str, Slot]]]:
    """The window of ``by`` holding ``now`` (None: no usage in one), and its rows."""
    rows = [(p, s) for p, slots in timelines for s in slots]
    found = bucket([(p, [s]) for p, s in rows], by, table, samples=samples)
    for u in found.rows:
        if u.start and u.end and _epoch(u.start) <= now < _epoch(u.end):
            start, end = _epoch(u.start), _epoch(u.end)
            return u, [(p, s) for p, s in rows if s.slot >= 0 and start <= s.first < end]
    return None, []


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def _window_lines(
    name: str,
    current: tuple[UsageRow | None, list[tuple[str, Slot]]],
    project: Project,
    titles: dict[str, str],
    table: PriceTable,
    samples: list,
    now: float,
) -> list[str]:
    window, rows = current
    key = limits.FIVE_HOUR if name.startswith("5") else limits.SEVEN_DAY
    said = [w for w in limits.windows(key, samples) if w.start <= now < w.end]
    reported = f"; Claude Code reported {said[-1].used:g}% used at {_hm(said[-1].seen)}" if said else ""
    if window is None:
        return [f"{name}: no usage counted in the current one{reported}"]
    how = _RULES[window.rule or "calendar"].split(":", 1)[0]
    head = (
        f"{name} {_hm(_epoch(window.start or ''))} to {_hm(_epoch(window.end or ''))} ({how}){reported}: "
        f"{_figures(window)}"
    )
    lines = [head]
    total = window.cost_usd
    for by, label in (("project", "by project"), ("session", "by session")):
        parts = bucket([(p, [s]) for p, s in rows], by, table).rows
        lines.append(f"  {label}:")
        for u in parts[:8]:
            share = f"{100 * u.cost_usd / total:.0f}%" if total else "-"
            if by == "project":
                who = inert_line(os.path.basename(u.bucket.rstrip("/")) or u.bucket)
                who += " (this project)" if u.bucket == project.root else ""
            else:
                title = titles.get(u.bucket)
                where = os.path.basename((u.project or "").rstrip("/"))
                who = f"{inert_line(u.bucket[:8])} {inert_line(where)}" + (
                    f" {inert_line(title[:60])!s}" if title else ""
                )
            lines.append(f"    {share:>4}  {_figures(u)}  {who}")
        if len(parts) > 8:
            lines.append(f"    ... and {len(parts) - 8} more")
    unpriced = {m: window.tokens_by_model.get(m, 0) for m in window.unpriced_models}
    if unpriced:
        lines.append("  " + unpriced_note(unpriced))
    return lines


def _figures(u: UsageRow) -> str:
    tokens = u.input + u.output + u.cache_write_5m + u.cache_write_1h + u.cache_read
    cost = f"${u.cost_usd:.2f}{UNPRICED if u.unpriced_models else ''}"
    return f"{cost}, {tokens:,} tokens ({u.output:,} output), {u.responses:,} responses"


def _hm(seconds: float) -> str:
    return time.strftime("%a %d %b %H:%M", time.localtime(seconds))


# ------------------------------------------------------------------------ burn, runway, refusals


class BurnReport(NamedTuple):
    """The current windows (``burn.WindowBurn``, 5-hour then weekly), the runways of those Claude
    Code reports now, the usage-limit refusals the transcripts recorded (newest first, each with
    its project), the session titles known, and when."""

    windows: list[WindowBurn]
    runways: dict[str, Runway]
    refusals: list[tuple[str, Refusal]]
    titles: dict[str, str]
    now: float


def burn_report(
    projects: list[Project],
    now: float | None = None,
    *,
    account: bool = True,
    live: set[str] | None = None,
    processes: bool = True,
    loaded: dict[str, Timeline] | None = None,
    rules: bool = True,
    others: bool = True,
) -> BurnReport:
    """Every listed project's part of the current windows (the window is the account's):
    ``projects`` brought up to date first when ``account`` (the others as their last pass left
    them, or as ``loaded`` holds them); ``live``: the live sessions' ids (None: Claude Code's
    registry of running ones); ``rules``: as ``burn.burn``'s; ``others``: the other listed
    projects counted too (False: ``projects`` are all of them). The runways are kept for the
    status line (``runway.save``)."""
    from ..usage import burn, runway
    from ..usage.prices import current_prices
    from .projects import other_projects

    now = time.time() if now is None else now
    table = current_prices()
    lines: dict[str, Iterable[Slot]] = {}
    titles: dict[str, str] = {}
    refusals: list[tuple[str, Refusal]] = []
    if account:
        for r in account_projects(projects, only_changed=True, processes=processes, on_error=_ignored):
            line = r.timeline or load_timeline(r.project)
            if line is not None:
                lines[r.project.root] = line.slots
                titles.update(line.titles)
                refusals += [(r.project.root, f) for f in line.refusals]
    for other in dict.fromkeys([*projects, *(other_projects() if others else ())]):
        if other.root in lines:
            continue
        line = loaded[other.root] if loaded and other.root in loaded else load_timeline(other)
        if line is not None:
            lines[other.root] = line.slots
            titles.update(line.titles)
            refusals += [(other.root, f) for f in line.refusals]
    if live is None:
        live = _running()
    samples = limits.samples(f for _, f in refusals)
    timelines = list(lines.items())
    windows = burn.burn(timelines, samples, table, now, live, rules)
    runways = {}
    if any(w.rule == "reported" for w in windows):  # only a window Claude Code reports has one
        # what the calibration and the runways ask of it: from the first sample, or the pace's start
        spend = burn.Spend.of(timelines, table, since=min([s.t for s in samples] + [now - burn.PACE_S]))
        for w in windows:
            found = runway.runway(w, runway.calibrate(samples, w.name, spend), spend, now)
            if found is not None:
                runways[w.name] = found
    if samples:  # nothing recorded: nothing for the status line to keep
        runway.save(list(runways.values()), now)
    refusals.sort(key=lambda pr: -pr[1].t)
    return BurnReport(windows, runways, refusals, titles, now)


def _ignored(project: Project, exc: Exception) -> None:
    """A project that cannot be accounted now is shown as its last pass left it."""


def _running() -> set[str]:
    from ..live.running import read_registry

    return {r.session_id for r in read_registry().running}


def refresh_runway(projects: list[Project]) -> None:
    """The runways worked out again for the status line (a door that stays up, after its
    accounting: the projects are as it left them). Nothing when no rate limit was recorded."""
    from ..usage.ratelimits import log_path

    if os.path.isfile(log_path()):
        burn_report(projects, account=False, live=set())


_WINDOW_NAMES = {limits.FIVE_HOUR: "5-hour window", limits.SEVEN_DAY: "weekly window"}
_RULE_SAID = {
    "reported": "as Claude Code reported it",
    "ccusage": "ccusage's rule: no reset recorded",
    "rolling": "the 7 days to now: no weekly reset recorded",
}


def _rate(tokens_h: float, usd_h: float) -> str:
    return f"{tokens_h:,.0f} tok/h ${usd_h:.2f}/h"


def runway_line(r: Runway | None, name: str, now: float) -> str:
    """What the runway of one window is, or why there is none."""
    label = _WINDOW_NAMES.get(name, name)
    if r is None:
        return f"{label}: no percent reported now (Claude Code does not report this window, or stopped): no runway"
    rests = f"calibrated on {r.fit.samples} sample(s), {r.fit.intervals} interval(s)"
    if r.fit.per_usd is None:
        return f"{label}: {r.used:g}% used; no runway: {r.reason} ({rests})"
    head = f"{label}: ~{r.used:g}% used, {r.fit.per_usd:.3g} points per USD ({rests}, fit {r.fit.fit:.2f})"
    if r.hits_at is None:
        return f"{head}; {r.reason}"
    from .resume import ago

    return f"{head}; 100% at {_hm(r.hits_at)} (in ~{ago(now, r.hits_at)}) at this pace, before the reset {_hm(r.resets_at)}"


def refusal_lines(found: list[tuple[str, Refusal]], limit: int = 8) -> list[str]:
    """The usage-limit refusals recorded, newest first, or that there is none."""
    if not found:
        return ["no usage-limit refusal recorded in the transcripts"]
    out = ["usage-limit refusals recorded in transcripts (newest first):"]
    for project, r in found[:limit]:
        window = _WINDOW_NAMES.get(r.window or "", inert_line(r.window or "a window not named"))
        reset = f", resets {_hm(r.resets_at)}" if r.resets_at else ", reset not said"
        where = inert_line(os.path.basename(project.rstrip("/")) or project)
        out.append(f"  {_hm(r.t)}  {window}{reset}  {inert_line(r.session[:8])} {where}")
    if len(found) > limit:
        out.append(f"  ... and {len(found) - limit} more")
    return out


def burn_table(report: BurnReport, limit: int = 12) -> str:
    """``usage --burn``: each current window, its runway, the sessions and projects in it (live
    first) with their share and rate now, and the refusals recorded."""
    out: list[str] = []
    for w in report.windows:
        label = _WINDOW_NAMES.get(w.name, w.name)
        if w.start is None or w.end is None:
            out.append(f"{label}: no usage in a current one ({_RULE_SAID[w.rule]})")
        else:
            used = f", {w.used:g}% used at {_hm(w.seen or 0)}" if w.used is not None else ""
            out.append(
                f"{label} {_hm(w.start)} to {_hm(w.end)} ({_RULE_SAID[w.rule]}{used}): "
                f"${w.cost_usd:.2f}, {w.tokens:,} tokens; now {_rate(w.tokens_per_h, w.usd_per_h)}"
            )
        out.append("  " + runway_line(report.runways.get(w.name), w.name, report.now))
        for label2, rows in (("by session", w.sessions), ("by project", w.projects)):
            if not rows:
                continue
            out.append(f"  {label2}:")
            for s in rows[:limit]:
                share = f"{100 * s.share:.0f}%" if s.share is not None else "-"
                cost = f"${s.cost_usd:.2f}{UNPRICED if s.unpriced else ''}"
                if label2 == "by session":
                    title = report.titles.get(s.key)
                    where = os.path.basename(s.project.rstrip("/"))
                    who = f"{inert_line(s.key[:8])} {inert_line(where)}" + (
                        f" {inert_line(title[:50])}" if title else ""
                    )
                else:
                    who = inert_line(os.path.basename(s.key.rstrip("/")) or s.key)
                mark = "live " if s.live else "     "
                out.append(
                    f"    {mark}{share:>4}  {cost:>9}  {s.tokens:>13,} tok  now {_rate(s.tokens_per_h, s.usd_per_h)}  {who}"
                )
            if len(rows) > limit:
                out.append(f"    ... and {len(rows) - limit} more")
        out.append("")
    out += refusal_lines(report.refusals)
    out.append(f"(rates: the last {burn_pace_minutes()} minutes, per hour; shares: of the window's cost)")
    return "\n".join(out)


def burn_pace_minutes() -> int:
    from ..usage.burn import PACE_S

    return int(PACE_S // 60)


def burn_json(report: BurnReport) -> dict:
    """The report as JSON-ready values (``usage --burn --json``, the Hub's Usage page): times
    in epoch seconds, shares 0-1, absent values null."""
    import msgspec

    windows = []
    for w in report.windows:
        row = msgspec.to_builtins(w)
        r = report.runways.get(w.name)
        row["runway"] = (
            None
            if r is None
            else {
                "used_now": r.used,
                "pct_per_hour": r.pct_per_hour,
                "hits_at": r.hits_at,
                "pct_per_usd": r.fit.per_usd,
                "samples": r.fit.samples,
                "intervals": r.fit.intervals,
                "fit": r.fit.fit,
                "reason": r.reason,
            }
        )
        row["samples"] = r.fit.samples if r is not None else 0
        for s in row["sessions"]:
            s["title"] = report.titles.get(s["key"])
        windows.append(row)
    refusals = [
        {"project": p, "session": r.session, "t": r.t, "window": r.window, "resets_at": r.resets_at}
        for p, r in report.refusals
    ]
    return {"now": report.now, "pace_s": burn_pace_minutes() * 60, "windows": windows, "refusals": refusals}


def usage_page(
    projects: list[Project],
    now: float | None = None,
    loaded: dict[str, Timeline] | None = None,
    live: set[str] | None = None,
) -> dict:
    """The Hub's Usage page's part of the burn: the current windows Claude Code reports, with
    their used percent, reset, runway and the samples it rests on, and each project's and
    session's burn in them; the refusals (``burn_json``). A window by its rule is left empty
    (the page draws its own: ``usage_charts``). The timelines as the accounting last left them
    (or as ``loaded`` holds them): nothing is read from a transcript. ``projects``: every listed
    one; ``live``: the live sessions' ids, when the caller has them."""
    if live is None:
        live = _live(projects)
    return burn_json(burn_report(projects, now, account=False, live=live, loaded=loaded, rules=False, others=False))


def _live(projects: list[Project]) -> set[str]:
    """The sessions live now: Claude Code's running ones, and those c3async's servers serve."""
    from ..live.reader import live_sessions
    from ..live.running import read_registry

    snapshot = read_registry()
    found = {r.session_id for r in snapshot.running}
    for p in projects:
        try:
            found |= {sid for sid, e in live_sessions(p, registry=snapshot).items() if sid and e.live}
        except (OSError, C3Error):
            continue
    return found
