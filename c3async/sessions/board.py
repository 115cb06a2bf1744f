"""The live board: every live session of one project or of all of them, waiting first.

A session is live by the facts of ``live.reader`` (a heartbeat, Claude Code's registry of
running processes, the activity log). With ``everywhere``, the projects are the registered ones
and those where a running claude was started, registered or not: a user who runs Claude Code in
a project c3async has never seen still sees that session here. Titles and branches come from
the project's listing, read only for projects that have a live session.
"""

from __future__ import annotations

import time

import msgspec

from ..ground.project import Project, resolve
from ..live.reader import LiveSession, live_sessions
from ..live.running import read_registry
from .projects import listed_projects
from .rows import iso
from .view import list_rows_sync

__all__ = ("LiveRow", "board")

_ORDER = {"waiting": 0, "busy": 1, "idle": 2}


class LiveRow(msgspec.Struct):
    """One live session, as every door shows it (the field names of a listing row)."""

    id: str
    project: str
    title: str | None
    branch: str | None
    cwd: str | None
    state: str | None  # busy, idle or waiting (None: not known: no registry entry)
    state_since: str | None  # ISO 8601
    waiting_for: str | None
    source: str  # the first fact that says it is live: heartbeat, registry or activity
    mcp_count: int
    ides: list[str]
    pids: list[int]  # c3async's MCP servers serving it (heartbeats)
    c3_sessions: list[str]  # those servers' own ids
    claude_pids: list[int]  # the claude processes holding it (registry)
    last_seen: float  # epoch seconds: the newest heartbeat or activity (now, for the registry)
    resume: str | None
    # its burn now (``board(burn=True)``): tokens and USD per hour over the last 15 minutes, and
    # its share (0-1) of the current 5-hour window's cost (None: not asked, or no usage in one)
    tokens_per_h: float | None = None
    usd_per_h: float | None = None
    window_share: float | None = None


def board(project: Project, *, everywhere: bool = False, burn: bool = False) -> list[LiveRow]:
    """The live sessions, waiting first (the longest waiting first), then busy, idle, unknown;
    with ``burn``, each one's burn in the current 5-hour window (its project's usage brought
    up to date first)."""
    snapshot = read_registry()
    projects = [project]
    if everywhere:
        projects = list(dict.fromkeys([project, *listed_projects()]))
        for run in snapshot.running:
            if run.cwd is not None:
                try:
                    root = resolve(run.cwd)
                except (OSError, ValueError):
                    continue
                if root not in projects:
                    projects.append(root)
    found: dict[Project, dict[str, LiveSession]] = {}
    seen: set[str] = set()  # a session once, in the first project that has it
    for p in projects:
        here = {sid: e for sid, e in live_sessions(p, registry=snapshot).items() if sid and e.live and sid not in seen}
        seen.update(here)
        if here:
            found[p] = here
    rows = {}
    if found:
        _, listed = list_rows_sync(list(found), which="live")
        rows = {r.id: r for r in listed}
    out = []
    for p, here in found.items():
        for sid, e in here.items():
            row = rows.get(sid)
            out.append(
                LiveRow(
                    id=sid,
                    project=p.root,
                    title=row.title if row else None,
                    branch=row.branch if row else None,
                    cwd=e.cwd or (row.cwd if row else None),
                    state=e.state,
                    state_since=iso(int(e.state_since * 1e9)) if e.state_since else None,
                    waiting_for=e.waiting_for,
                    source=e.source,
                    mcp_count=e.mcp_count,
                    ides=sorted({str(i) for i in e.ides}),
                    pids=e.pids,
                    c3_sessions=e.c3_sessions,
                    claude_pids=e.claude_pids,
                    last_seen=e.last_seen,
                    resume=row.resume if row else None,
                )
            )
    if burn and out:
        _burn(out)
    now = iso(time.time_ns())
    out.sort(key=lambda r: (_ORDER.get(r.state or "", 3), r.state_since or now, r.project, r.id))
    return out


def _burn(rows: list[LiveRow]) -> None:
    from ..usage.limits import FIVE_HOUR
    from .usage_report import burn_report

    report = burn_report(list(dict.fromkeys(Project(r.project) for r in rows)), live={r.id for r in rows})
    window = next(w for w in report.windows if w.name == FIVE_HOUR)
    found = {s.key: s for s in window.sessions}
    for r in rows:
        s = found.get(r.id)
        r.tokens_per_h, r.usd_per_h = (s.tokens_per_h, s.usd_per_h) if s else (0.0, 0.0)
        r.window_share = s.share if s else None
