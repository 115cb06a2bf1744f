"""``c3_status``: small read-only reports. ``sessions`` is the token and cost budget per host
session (``.c3/session_stats.jsonl``), not the catalog; ``live`` is who is running now.

The reports are printed by the CLI and returned as MCP tool text: every cell that comes from a
file (ids, titles, model names, IDE names) is made inert (:func:`c3async.ground.term.inert_line`)."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from .ground.errors import BadArgument
from .ground.term import inert_line

if TYPE_CHECKING:
    from .sessions.board import LiveRow
    from .usage.account import SessionTotals

__all__ = ("VIEWS", "run")

VIEWS = ("sessions", "live")


def sessions_view(project: str) -> str:
    from .usage.account import latest_totals, session_titles, stats_path  # not for a `live` view

    latest = latest_totals(project)
    if not latest:
        return (
            f"no stats yet: {stats_path(project)} is missing or empty (the server writes it as "
            "it accounts for transcripts; `c3async stats` computes it on demand)"
        )
    titles = None
    for row in latest.values():
        if not row.title:  # accounted before the catalog knew the session: ask it now
            titles = titles if titles is not None else session_titles(project)
            row.title = titles.get(row.session_id)
    return format_table(list(latest.values()))


def format_table(rows: list[SessionTotals]) -> str:
    lines = ["session      input   output   cache-w     cache-r      cost  title"]
    total: dict[str, Any] = {"input": 0, "output": 0, "cw": 0, "cr": 0, "cost": 0.0}
    for r in sorted(rows, key=lambda r: r.last_ts or "", reverse=True):
        cw = r.cache_write_5m + r.cache_write_1h
        unpriced = ", ".join(inert_line(m) for m in r.unknown_models)
        lines.append(
            f"{inert_line(r.session_id[:8])}  {r.input:>8} {r.output:>8} {cw:>9} {r.cache_read:>11} "
            f"{r.cost_usd:>9.2f}  {inert_line(r.title or '')}"
            + (f"  (unpriced: {unpriced})" if r.unknown_models else "")
        )
        total["input"] += r.input
        total["output"] += r.output
        total["cw"] += cw
        total["cr"] += r.cache_read
        total["cost"] += r.cost_usd
    lines.append(
        f"total     {total['input']:>8} {total['output']:>8} {total['cw']:>9} {total['cr']:>11} {total['cost']:>9.2f}"
    )
    return "\n".join(lines)


def live_table(rows: list[LiveRow], *, show_project: bool = False, now: float | None = None) -> str:
    """The live board as text: waiting first with how long, the state, id, project, title, and
    how it is known (MCP servers and IDEs, or the registry or activity log)."""
    from .sessions.rows import age

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
        lines.append("  ".join(parts) + f"  [{how}]")
    return "\n".join(lines)


def live_view(project: str) -> str:
    """This project's live sessions, then those waiting for the user in other projects."""
    from .sessions.board import board

    rows = board(project, everywhere=True)
    here = [r for r in rows if r.project == project]
    waiting = [r for r in rows if r.project != project and r.state == "waiting"]
    text = live_table(here) if here else "no live sessions in this project"
    if waiting:
        text += "\n\nwaiting for you in other projects:\n" + live_table(waiting, show_project=True)
    return text


def run(project: str, view: str) -> str:
    view = (view or "").strip().lower()
    if view == "sessions":
        return sessions_view(project)
    if view == "live":
        return live_view(project)
    raise BadArgument(f"unknown view {view!r}: use one of {', '.join(VIEWS)}")
