"""``c3_status``: small read-only reports. ``sessions`` is the token and cost budget per host
session (``.c3/session_stats.jsonl``), not the catalog; ``live`` is who is running now.

The reports are printed by the CLI and returned as MCP tool text: every cell that comes from a
file (ids, titles, model names, IDE names) is made inert (:func:`c3async.term.inert_line`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import BadArgument
from .term import inert_line

if TYPE_CHECKING:
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


def live_lines(project: str) -> list[str]:
    """One line per live host session: its MCP processes and IDEs, or the log it was read from."""
    from .live.reader import live_sessions

    lines = []
    for e in sorted(live_sessions(project).values(), key=lambda e: str(e.host_session_id)):
        ides = ", ".join(inert_line(str(ide)) for ide in sorted(set(e.ides), key=str))
        how = f"MCP×{e.mcp_count} ({ides}) pids {inert_line(str(e.pids))}" if e.mcp_count else "from the activity log"
        lines.append(f"{inert_line(str(e.host_session_id or '(unknown host session)'))}  {how}")
    return lines


def live_view(project: str) -> str:
    return "\n".join(live_lines(project)) or "no live sessions in this project"


def run(project: str, view: str) -> str:
    view = (view or "").strip().lower()
    if view == "sessions":
        return sessions_view(project)
    if view == "live":
        return live_view(project)
    raise BadArgument(f"unknown view {view!r}: use one of {', '.join(VIEWS)}")
