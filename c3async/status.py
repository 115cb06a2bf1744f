"""``c3_status``: small read-only reports. ``sessions`` is the token and cost budget per host
session (``.c3/session_stats.jsonl``), not the catalog; ``live`` is who is running now."""

from __future__ import annotations

from typing import Any

import msgspec

from . import jsonl
from .errors import BadArgument
from .live.reader import live_sessions
from .paths import project_state

__all__ = ("VIEWS", "run")

VIEWS = ("sessions", "live")


class StatsRow(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    ts: float = 0.0
    session_id: str
    title: str | None = None
    input: int = 0
    output: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    cache_read: int = 0
    cost_usd: float = 0.0
    unknown_models: list[str] = msgspec.field(default_factory=list)


def sessions_view(project: str) -> str:
    path = project_state(project) / "session_stats.jsonl"
    batch = jsonl.read_all(path, StatsRow)
    if not batch.records:
        return (f"no stats yet: {path} is missing or empty (the server writes it as it accounts "
                "for transcripts; `c3async stats` computes it on demand)")
    latest: dict[str, StatsRow] = {}
    for row in batch.records:  # each row holds running totals: the last one per session wins
        latest[row.session_id] = row
    lines = ["session   input  output  cache-w  cache-r    cost  title"]
    total: dict[str, Any] = {"input": 0, "output": 0, "cw": 0, "cr": 0, "cost": 0.0}
    for r in sorted(latest.values(), key=lambda r: r.ts, reverse=True):
        cw = r.cache_write_5m + r.cache_write_1h
        lines.append(f"{r.session_id[:8]}  {r.input:>6} {r.output:>7} {cw:>8} {r.cache_read:>8} "
                     f"{r.cost_usd:>7.2f}  {r.title or ''}" + (f"  (unpriced: {', '.join(r.unknown_models)})" if r.unknown_models else ""))
        total["input"] += r.input
        total["output"] += r.output
        total["cw"] += cw
        total["cr"] += r.cache_read
        total["cost"] += r.cost_usd
    lines.append(f"total     {total['input']:>6} {total['output']:>7} {total['cw']:>8} {total['cr']:>8} {total['cost']:>7.2f}")
    return "\n".join(lines)


def live_view(project: str) -> str:
    live = live_sessions(project)
    if not live:
        return "no live sessions in this project"
    lines = []
    for e in sorted(live.values(), key=lambda e: str(e.host_session_id)):
        how = f"MCP×{e.mcp_count} ({', '.join(sorted(set(e.ides)))})" if e.mcp_count else "from the activity log"
        lines.append(f"{e.host_session_id or '(unknown host session)'}  {how}")
    return "\n".join(lines)


def run(project: str, view: str) -> str:
    view = (view or "").strip().lower()
    if view == "sessions":
        return sessions_view(project)
    if view == "live":
        return live_view(project)
    raise BadArgument(f"unknown view {view!r}: use one of {', '.join(VIEWS)}")
