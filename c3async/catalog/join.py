"""The catalog as every front end sees it (CLI, MCP tools, Hub): rows joined with marks and
hints, filtered, searched and sorted. One function, so the three never disagree."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from .. import activity, config, records
from ..errors import C3Error
from ..live.reader import live_sessions
from ..marks import MarkBook
from ..pm import store as pm_store
from .gitrefs import branches
from .hints import HintContext, add_hints
from .rows import Row, to_row
from .scan import NEWEST, ProjectScan, Progress, scan_projects, scan_projects_sync

__all__ = ("FILTERS", "filter_rows", "join_scan", "list_rows", "list_rows_sync", "row_for")

log = logging.getLogger("c3async.catalog")

FILTERS = ("all", "likely", "stale", "live")


def _cleared_ids(rows: list[activity.ActivityRow]) -> set[str]:
    return {r.session_id for r in rows if r.kind == "session_end" and r.reason == "clear" and r.session_id}


def join_scan(scan: ProjectScan, book: MarkBook | None = None, now: float | None = None) -> list[Row]:
    """Rows of one project with their marks and hints."""
    project = scan.dirs.project
    rows = [to_row(s) for s in scan.sessions]
    if not rows:
        return rows
    book = (book or MarkBook(project)).refresh()
    events = activity.read_rows(project).records  # read once: liveness and /clear hints use it
    live = live_sessions(project, rows=events)
    for row in rows:
        state = book.get(row.id)
        if state is not None:
            row.stale, row.note = state.stale, state.note
            row.marked = True
        info = live.get(row.id)
        if info is not None and info.live:
            row.live, row.mcp_count = True, info.mcp_count
    _join_links(project, rows)
    cfg = config.load(project)
    add_hints(rows, scan.sessions, HintContext(
        now=time.time() if now is None else now,
        idle_days=cfg.idle_days,
        branches=branches(project),
        cleared=_cleared_ids(events),
    ))
    return rows


def _join_links(project: str, rows: list[Row]) -> None:
    """Tasks and decisions linked to each session (pm.json), and its last snapshot (C3 records)."""
    by_id = {row.id: row for row in rows}
    try:
        pm = pm_store.load(project)
    except C3Error as exc:  # a corrupt pm.json costs the links, not the listing
        log.warning("%s", exc)
        pm = None
    if pm is not None:
        for task in pm.tasks:
            for sid in task.sessions:
                row = by_id.get(sid)
                if row is not None:
                    row.links.tasks.append({"id": task.id, "title": task.title, "status": task.status})
        for d in pm.decisions[-500:]:
            row = by_id.get(d.session) if d.session else None
            if row is not None:
                row.links.decisions.append({"id": d.id, "text": d.text, "ts": d.ts})
    for rec in records.load_all(project):
        for snap in rec.snapshots:
            row = by_id.get(snap.host_session_id) if snap.host_session_id else None
            if row is not None and (row.links.snapshot is None or snap.ts >= row.links.snapshot["ts"]):
                row.links.snapshot = {"summary": snap.summary, "ts": snap.ts}


def filter_rows(rows: Iterable[Row], which: str = "all", search: str | None = None) -> list[Row]:
    """``likely``: unmarked rows with at least one hint; ``stale``: marked stale; ``live``."""
    if which == "likely":
        rows = [r for r in rows if not r.marked and r.hints]
    elif which == "stale":
        rows = [r for r in rows if r.stale is not None]
    elif which == "live":
        rows = [r for r in rows if r.live]
    else:
        rows = list(rows)
    if search:
        needle = search.casefold()
        rows = [r for r in rows if needle in _haystack(r)]
    return rows


def _haystack(row: Row) -> str:
    parts = [row.id, row.title, row.first_prompt or "", row.last_prompt or "", row.branch or ""]
    if row.note is not None:
        parts += [row.note.summary or "", row.note.next_steps or ""]
    if row.stale is not None:
        parts.append(row.stale.reason or "")
    return "\n".join(parts).casefold()


def _finish(scans: list[ProjectScan], which: str, search: str | None) -> list[Row]:
    rows = [row for scan in scans for row in join_scan(scan)]
    rows = filter_rows(rows, which, search)
    rows.sort(key=lambda r: (r.mtime_ns, r.id), reverse=True)
    return rows


async def list_rows(
    projects: list[str], *, which: str = "all", search: str | None = None,
    limit: int = NEWEST, progress: Progress | None = None,
) -> tuple[list[ProjectScan], list[Row]]:
    scans = await scan_projects(projects, limit=limit, progress=progress)
    return scans, _finish(scans, which, search)


def list_rows_sync(
    projects: list[str], *, which: str = "all", search: str | None = None,
    limit: int = NEWEST, progress: Progress | None = None, processes: bool = True,
) -> tuple[list[ProjectScan], list[Row]]:
    """For a command-line process: starts an event loop only if some transcript must be read."""
    scans = scan_projects_sync(projects, limit=limit, progress=progress, processes=processes)
    return scans, _finish(scans, which, search)


def row_for(project: str, session_id: str) -> Row | None:
    """One session's row, joined, whether or not it is among the newest listed."""
    from .listing import candidates
    from .locate import locate
    from .resolve import session_record
    from .scan import Session

    dirs = locate(project)
    cand = next((c for c in candidates([f for f, _ in dirs.folders]) if c.session_id == session_id), None)
    rec = session_record(cand, dirs.cwds) if cand is not None else None
    if rec is None:
        return None
    rows = join_scan(ProjectScan(dirs=dirs, sessions=[Session(cand, rec, dirs.project)]))
    return rows[0] if rows else None
