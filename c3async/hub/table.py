"""The Hub's listing: every project's rows, held in memory and queried in one request.

Each project's rows are built with the sessions view (``list_rows_sync``) when its version in
the runtime's watcher moves (or on first use), made into the query's entries once
(``sessions.query``: what each passes, its words, its evidence, its fork tree), and kept with
the slim form the page shows (never a prompt). A request runs the one query every door runs
(filter, words, project, branch, order, a root's forks) over every project's entries at once,
and returns one page from an offset cursor: a listing of 10,000 rows costs a pass over 10,000
entries, not 50 listings.

A rebuild of a project also says which of its rows changed (``Diff``): the event stream sends
those rows, so a page updates them in place.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..catalog.scan import NEWEST
from ..ground.project import Project
from ..sessions import keep
from ..sessions.query import Entry, Query, entries, select
from ..sessions.rows import Row
from ..sessions.view import list_rows_sync

__all__ = ("MAX_PAGE", "Diff", "Table", "slim")

MAX_PAGE = 500
MAX_DEPTH = 5000  # sessions of one project listed at most, on request
MAX_RAIL_TAGS = 100  # tags the rail offers


def slim(row: Row) -> dict[str, Any]:
    """The fields a listing row carries (``links`` as counts; no prompts, no paths to files; the
    chain's neighbours, not the whole chain; the title cut as the row cuts it)."""
    links = row.links
    return {
        "id": row.id,
        "title": row.title,
        "title_truncated": row.title_truncated,
        "project": row.project,
        "branch": row.branch,
        "cwd": row.cwd,
        "created_at": row.created_at,
        "last_activity": row.last_activity or row.mtime,
        "size": row.size,
        "live": row.live,
        "mcp_count": row.mcp_count,
        "state": row.state,
        "state_since": row.state_since,
        "hints": row.hints,
        "stale": None if row.stale is None else {"reason": row.stale.reason, "successor": row.stale.successor},
        "note": None if row.note is None else {"summary": row.note.summary},
        "tags": row.tags,
        "links": {"tasks": len(links.tasks), "decisions": len(links.decisions), "snapshot": links.snapshot is not None},
        "tokens": None if row.tokens is None else msgspec.to_builtins(row.tokens),
        "cost_usd": row.cost_usd,
        "unpriced_models": row.unpriced_models,
        "resume": row.resume,
        "kept": row.kept,
        "kept_by": row.kept_by,
        "archived": row.archived,
        "expires_in_days": row.expires_in_days,
        "cwd_gone": row.cwd_gone,
        "forked_from": row.forked_from,
        "forks": row.forks,
        "chain_prev": row.chain_prev,
        "chain_next": row.chain_next,
        "root": None,  # the first session of its fork tree (None: it is no fork), set by ``_entries``
        "fork_count": 0,  # the forks under it, when it is a root (set by ``_entries``)
        "why": [],
    }


def _entries(rows: list[Row]) -> list[Entry]:
    """The query's entries, each with the slim row the page shows (its fork tree and evidence in)."""
    out = entries(rows)
    for e in out:
        view = slim(e.row)
        view.update(root=e.root, fork_count=e.fork_count, why=e.why)
        e.view = view
    return out


class Diff(msgspec.Struct):
    """What a rebuild of a project changed: rows changed or new (whole), ids gone."""

    project: str
    changed: list[dict[str, Any]]
    removed: list[str]


@dataclass
class _Built:
    version: int
    depth: int
    entries: list[Entry]
    by_id: dict[str, Entry] = field(default_factory=dict)
    survey: keep.Survey | None = None  # the sessions near Claude Code's cleanup (the keep pass's)


class Table:
    """The rows of every registered project, rebuilt per project when ``version(project)``
    moves. Thread-safe: queries and rebuilds run in worker threads."""

    def __init__(self, projects: Callable[[], list[Project]], version: Callable[[Project], int]) -> None:
        self.projects = projects
        self.version = version
        self.built: dict[Project, _Built] = {}
        self.depths: dict[Project, int] = {}
        self.lock = threading.Lock()
        self.diffs: dict[Project, tuple[int, Diff]] = {}

    def _build(self, project: Project) -> _Built | None:
        """The project's rows as of its current version (rebuilt if that moved); None when it
        cannot be listed (said once on stderr by the view)."""
        want = self.version(project)
        depth = self.depths.get(project, NEWEST)
        with self.lock:
            have = self.built.get(project)
            if have is not None and have.version == want and have.depth == depth:
                return have
        try:
            rows = list_rows_sync([project], processes=False, limit=depth)[1]
        except Exception as exc:  # one project's trouble is not the others'
            from ..ground import safefs

            safefs.warn_once(exc)
            return have
        fresh = _Built(want, depth, _entries(rows), survey=keep.surveyed(project) if rows else None)
        fresh.by_id = {e.row.id: e for e in fresh.entries}
        with self.lock:
            old = self.built.get(project)
            self.built[project] = fresh
            if old is not None:
                changed = [
                    e.view for sid, e in fresh.by_id.items() if sid not in old.by_id or old.by_id[sid].view != e.view
                ]
                removed = [sid for sid in old.by_id if sid not in fresh.by_id]
                self.diffs[project] = (want, Diff(project.root, changed, removed))
        return fresh

    def refresh(self, projects: Iterable[Project] | None = None) -> None:
        for p in self.projects() if projects is None else projects:
            self._build(p)

    def diff(self, project: Project) -> Diff | None:
        """What the last rebuild of ``project`` changed (rebuilding it first if its version moved)."""
        self._build(project)
        with self.lock:
            got = self.diffs.get(project)
        return got[1] if got is not None and got[0] == self.version(project) else None

    def deepen(self, project: Project, depth: int) -> None:
        self.depths[project] = max(self.depths.get(project, NEWEST), min(depth, MAX_DEPTH))

    def query(self, q: Query) -> dict[str, Any]:
        started = time.perf_counter()
        projects = self.projects()
        built = {p: b for p in projects if (b := self._build(p)) is not None}
        chosen = select((e for b in built.values() for e in b.entries), q)
        page = chosen.hits[q.cursor : q.cursor + q.limit]
        nxt = q.cursor + q.limit if q.cursor + q.limit < len(chosen.hits) else None
        listed = {p: len(b.entries) for p, b in built.items()}
        near = keep.total(b.survey for p, b in built.items() if q.project in (None, p.root))
        return {
            "rows": [e.view for e in page],
            "total": chosen.matched,
            "cursor": q.cursor,
            "next": nxt,
            "sort": chosen.sort,
            "order": "asc" if q.order == "asc" else "desc",
            "counts": chosen.counts,
            "waiting": sum(chosen.waiting.values()),
            # the rail's tag row: the most used first (a person's words: a few dozen at most)
            "tags": sorted(chosen.tags.items(), key=lambda t: (-t[1], t[0]))[:MAX_RAIL_TAGS],
            # the banner's figures: sessions Claude Code deletes within the week, those kept, those
            # a person unkept, and the others (``unkept``), the first of them in ``soonest`` days
            "expiring": {
                "sessions": near.expiring,
                "kept": near.kept,
                "waived": near.waived,
                "unkept": len(near.unkept),
                "soonest": near.unkept[0].expires_in_days if near.unkept else None,
                "days": keep.WARN_DAYS,
            },
            "projects": [
                {
                    "path": p.root,
                    "count": chosen.by_project.get(p.root, 0),
                    "listed": listed[p],
                    "waiting": chosen.waiting.get(p.root, 0),
                    "depth": built[p].depth,
                    "more": listed[p] >= built[p].depth,
                }
                for p in built
            ],
            "version": sum(self.version(p) for p in projects),
            "took_ms": round((time.perf_counter() - started) * 1e3, 1),
        }
