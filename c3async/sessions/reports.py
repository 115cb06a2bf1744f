"""``c3_status``'s views, small read-only reports (``c3async usage --by session`` and ``live``
print them too). ``sessions`` is the token and cost usage per host session
(``.c3/session_stats.jsonl``), not the catalog; ``live`` is who is running now; ``usage`` the
current 5-hour and weekly windows (``usage_report``).

The reports are printed by the CLI and returned as MCP tool text: every cell that comes from a
file (ids, titles, model names, IDE names) is made inert (:func:`c3async.ground.term.inert_line`)."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from ..ground.errors import BadArgument
from ..ground.project import Project
from ..ground.term import inert_line
from ..usage.prices import UNPRICED, unpriced_note

if TYPE_CHECKING:
    from ..usage.totals import StatsRow
    from .board import LiveRow

__all__ = ("VIEWS", "format_table", "run")

VIEWS = ("sessions", "live", "usage")


def sessions_view(project: Project) -> str:
    from ..usage.account import deleted, session_titles  # not for a `live` view
    from ..usage.prices import current_prices
    from ..usage.totals import latest, stats_path, stats_rows

    expiring = _expiring_line(project)
    found = latest(project)
    if not found:
        return "\n".join(
            [
                f"no stats yet: {stats_path(project)} is missing or empty (the server writes it as "
                "it accounts for transcripts; `c3async usage` computes it on demand)",
                *([expiring] if expiring else []),
            ]
        )
    rows = stats_rows(project, found, current_prices(), deleted(project, found))
    titles = None
    for row in rows:
        if not row.title:  # accounted before the catalog knew the session: ask it now
            titles = titles if titles is not None else session_titles(project)
            row.title = titles.get(row.id)
    return format_table(rows) + (f"\n\n{expiring}" if expiring else "")


def _expiring_line(project: Project) -> str | None:
    """The sessions Claude Code deletes within a week, and how many of them are kept (counted,
    nothing preserved: a report only reads)."""
    from .act import survey
    from .keep import WARN_DAYS, warning

    found = survey(project, preserve=False)
    if not found.expiring:
        return None
    line = warning(found) or (
        f"{found.expiring:,} session{'s' if found.expiring != 1 else ''} expire within {WARN_DAYS} days "
        f"({found.kept:,} kept: the archive holds them)"
    )
    return inert_line(line)


def format_table(rows: list[StatsRow], *, show_project: bool = False) -> str:
    """Tokens and cost per session (the most recent first, as given), a total row, and, when
    some usage has no price, a footnote naming those models and how to price them. A cost
    followed by ``+`` leaves out the usage of models with no price, as everywhere else."""
    proj_w = min(20, max([len(_project_name(r.project)) for r in rows] + [7])) if show_project else 0
    project_head = f"{'PROJECT':{proj_w}}  " if show_project else ""
    lines = [f"{'ID':8}  {project_head}{'INPUT':>8} {'OUTPUT':>8} {'CACHE-W':>9} {'CACHE-R':>11} {'COST':>10}   TITLE"]
    total = [0, 0, 0, 0]
    cost = 0.0
    unpriced: dict[str, int] = {}  # model -> its tokens
    for r in rows:
        cw = r.cache_write_5m + r.cache_write_1h
        project = f"{_clip(_project_name(r.project), proj_w):{proj_w}}  " if show_project else ""
        title = ("[deleted] " if r.deleted else "") + inert_line(r.title or "")
        lines.append(
            f"{inert_line(r.id[:8]):8}  {project}{r.input:>8} {r.output:>8} {cw:>9} {r.cache_read:>11} "
            f"{_cost(r.cost_usd, bool(r.unpriced_models))}  {title}".rstrip()
        )
        for i, n in enumerate((r.input, r.output, cw, r.cache_read)):
            total[i] += n
        cost += r.cost_usd
        for m in r.unpriced_models:
            unpriced[m] = unpriced.get(m, 0) + r.tokens_by_model.get(m, 0)
    pad = " " * (proj_w + 2) if show_project else ""
    lines.append(
        f"total     {pad}{total[0]:>8} {total[1]:>8} {total[2]:>9} {total[3]:>11} {_cost(cost, bool(unpriced))}"
    )
    if unpriced:
        lines.append(unpriced_note(unpriced))
    gone = sum(1 for r in rows if r.deleted)
    if gone:
        lines.append(
            f"[deleted]: {gone:,} session{'s' if gone != 1 else ''} whose transcript Claude Code deleted "
            "(not kept); what it spent stays counted, in the total too"
        )
    return "\n".join(lines)


def _cost(usd: float, unpriced: bool) -> str:
    return f"{usd:>10.2f}{UNPRICED if unpriced else ' '}"


def _project_name(project: str) -> str:
    return inert_line(os.path.basename(project.rstrip("/")) or project)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "\u2026"


def live_table(rows: list[LiveRow], *, show_project: bool = False, now: float | None = None) -> str:
    """The live board as text: waiting first with how long, the state, id, project, title, and
    how it is known (MCP servers and IDEs, or the registry or activity log)."""
    from .rows import age

    now = time.time() if now is None else now
    lines = []
    for r in rows:
        since = age(r.state_since, now) if r.state_since else ""
        state = f"{r.state or 'live'} {since}".strip()
        title = inert_line(r.title) if r.title else "(no transcript yet)"
        parts = [f"{state:<12}", inert_line(r.id)]
        if show_project:
            parts.append(inert_line(os.path.basename(r.project) or r.project))
        parts.append(title)
        how = (
            f"MCP×{r.mcp_count} ({', '.join(inert_line(i) for i in r.ides)})" if r.mcp_count else f"from the {r.source}"
        )
        if r.waiting_for:
            how += f"; waiting for: {inert_line(r.waiting_for)}"
        if r.tokens_per_h is not None and r.usd_per_h is not None:
            share = f", {100 * r.window_share:.0f}% of the 5h window" if r.window_share is not None else ""
            how += f"; now {r.tokens_per_h:,.0f} tok/h ${r.usd_per_h:.2f}/h{share}"
        lines.append("  ".join(parts) + f"  [{how}]")
    return "\n".join(lines)


def live_view(project: Project) -> str:
    """This project's live sessions, then those waiting for the user in other projects."""
    from .board import board

    rows = board(project, everywhere=True)
    here = [r for r in rows if r.project == project.root]
    waiting = [r for r in rows if r.project != project.root and r.state == "waiting"]
    text = live_table(here) if here else "no live sessions in this project"
    if waiting:
        text += "\n\nwaiting for you in other projects:\n" + live_table(waiting, show_project=True)
    return text


def run(project: Project, view: str) -> str:
    view = (view or "").strip().lower()
    if view == "sessions":
        return sessions_view(project)
    if view == "live":
        return live_view(project)
    if view == "usage":
        from .usage_report import usage_view

        return usage_view(project)
    raise BadArgument(f"unknown view {view!r}: use one of {', '.join(VIEWS)}")
