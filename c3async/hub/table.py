"""The Hub's listing: every registered project's rows, held in memory and queried in one request.

Each project's rows are built with the sessions view (``list_rows_sync``) when its version in
the change feed moves (or on first use), and kept slim: the fields the list shows, never a
prompt. A query filters (all, likely, stale, live, expiring; words; a project; a branch),
sorts (last activity, created, size, tokens, cost, title; "likely" by the strength of its
evidence), counts per filter and per project in the same pass, and returns one page from an
offset cursor: the page never loops over projects, and a listing of 10,000 rows costs a pass
over 10,000 small dicts, not 50 listings.

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
from ..ground.clock import parse_iso
from ..sessions import keep
from ..sessions.rows import Row
from ..sessions.view import FILTERS, haystack, list_rows_sync

__all__ = ("FILTERS", "MAX_PAGE", "SORTS", "Diff", "Query", "Table", "slim")

SORTS = ("activity", "created", "size", "tokens", "cost", "title", "evidence")
PAGE = 100
MAX_PAGE = 500
MAX_DEPTH = 5000  # sessions of one project listed at most, on request
# The strength of each kind of evidence that a session is not worth resuming, strongest first.
EVIDENCE = (
    ("ended by /clear", 50),
    ("branch gone", 40),
    ("worktree gone", 40),
    ("newer on branch", 30),
    ("short", 20),
    ("idle", 10),
)


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


@dataclass(slots=True)
class Entry:
    row: dict[str, Any]
    hay: str  # what words are looked for in (casefolded): title, id, branch, prompts, note, stale reason
    filters: frozenset[str]
    activity: float
    created: float
    score: int  # the strength of the likely-stale evidence
    mtime_ns: int  # ties of the times above go by the file's mtime, as every other listing orders
    root: str | None = None  # of its fork tree, when it is a fork (``Query.forks_of`` lists them)


def _evidence(row: Row, newer_on_branch: bool) -> tuple[list[str], int]:
    why = list(row.hints)
    if newer_on_branch and row.branch:
        why.append(f"newer on branch {row.branch}")
    score = 0
    for text in why:
        score += next((points for kind, points in EVIDENCE if text.startswith(kind)), 0)
    return why, score


def _entries(rows: list[Row]) -> list[Entry]:
    newest_on: dict[str, str] = {}
    for r in rows:  # newest first: the first row of a branch is its newest session
        if r.branch and r.branch != "HEAD":
            newest_on.setdefault(r.branch, r.id)
    parent = {r.id: r.forked_from for r in rows if r.forked_from}
    out = []
    for r in rows:
        root = None
        at = parent.get(r.id)
        while at is not None and at != root:  # ``forked_from`` holds no loop (``catalog.forks``)
            root, at = at, parent.get(at)
        filters = {"all"}
        if not r.marked and r.hints:
            filters.add("likely")
        if r.stale is not None:
            filters.add("stale")
        if r.live:
            filters.add("live")
        if r.state == "waiting":
            filters.add("waiting")
        if r.expires_in_days is not None:
            filters.add("expiring")
        s = slim(r)
        newer = bool(r.branch) and newest_on.get(r.branch or "") not in (None, r.id)
        why, score = _evidence(r, newer and "likely" in filters)
        s["why"] = why if "likely" in filters else []
        s["root"] = root
        act = parse_iso(r.last_activity or r.mtime) or r.mtime_ns / 1e9
        out.append(
            Entry(s, haystack(r), frozenset(filters), act, parse_iso(r.created_at) or act, score, r.mtime_ns, root)
        )
    under: dict[str, int] = {}
    for e in out:
        if e.root is not None:
            under[e.root] = under.get(e.root, 0) + 1
    for e in out:
        e.row["fork_count"] = under.get(e.row["id"], 0)  # every fork of its tree, forks of forks too
    return out


def _sort_key(sort: str) -> Callable[[Entry], Any]:
    if sort == "created":
        return lambda e: (e.created, e.mtime_ns)
    if sort == "size":
        return lambda e: (e.row["size"], e.mtime_ns)
    if sort == "tokens":
        return lambda e: ((e.row["tokens"] or {}).get("total", -1), e.mtime_ns)
    if sort == "cost":
        return lambda e: (e.row["cost_usd"] if e.row["cost_usd"] is not None else -1.0, e.mtime_ns)
    if sort == "title":
        return lambda e: (e.row["title"].casefold(), e.mtime_ns)
    if sort == "evidence":
        return lambda e: (e.score, e.activity, e.mtime_ns)
    return lambda e: (e.activity, e.mtime_ns)


class Query(msgspec.Struct, frozen=True):
    """What a page asks for. ``sort`` "" means the filter's own order (last activity; for
    "likely", the evidence); ``order`` "desc" or "asc"."""

    filter: str = "all"
    q: str = ""
    project: str | None = None
    branch: str | None = None
    sort: str = ""
    order: str = "desc"
    cursor: int = 0
    limit: int = PAGE
    forks_of: str | None = None  # the forks under this root, whatever the filter (a root's "+N forks")
    grouped: bool = True  # a fork whose root is listed too is left out (it is under the root's "+N forks")


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

    def __init__(self, projects: Callable[[], list[str]], version: Callable[[str], int]) -> None:
        self.projects = projects
        self.version = version
        self.built: dict[str, _Built] = {}
        self.depths: dict[str, int] = {}
        self.lock = threading.Lock()
        self.diffs: dict[str, tuple[int, Diff]] = {}

    def _build(self, project: str) -> _Built | None:
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
        fresh.by_id = {e.row["id"]: e for e in fresh.entries}
        with self.lock:
            old = self.built.get(project)
            self.built[project] = fresh
            if old is not None:
                changed = [
                    e.row for sid, e in fresh.by_id.items() if sid not in old.by_id or old.by_id[sid].row != e.row
                ]
                removed = [sid for sid in old.by_id if sid not in fresh.by_id]
                self.diffs[project] = (want, Diff(project, changed, removed))
        return fresh

    def refresh(self, projects: Iterable[str] | None = None) -> None:
        for p in self.projects() if projects is None else projects:
            self._build(p)

    def diff(self, project: str) -> Diff | None:
        """What the last rebuild of ``project`` changed (rebuilding it first if its version moved)."""
        self._build(project)
        with self.lock:
            got = self.diffs.get(project)
        return got[1] if got is not None and got[0] == self.version(project) else None

    def deepen(self, project: str, depth: int) -> None:
        self.depths[project] = max(self.depths.get(project, NEWEST), min(depth, MAX_DEPTH))

    def query(self, q: Query) -> dict[str, Any]:
        started = time.perf_counter()
        projects = self.projects()
        built = {p: b for p in projects if (b := self._build(p)) is not None}
        words = q.q.casefold().split()
        counts = dict.fromkeys(FILTERS, 0)
        per_project = dict.fromkeys(built, 0)
        waiting = dict.fromkeys(built, 0)  # whatever the filter and search: the rail and the page title show it
        hits: list[Entry] = []
        for p, b in built.items():
            for e in b.entries:
                if "waiting" in e.filters:
                    waiting[p] += 1
                if words and not all(w in e.hay for w in words):
                    continue
                if q.branch and e.row["branch"] != q.branch:
                    continue
                if q.filter in e.filters:
                    per_project[p] += 1
                if q.project is not None and p != q.project:
                    continue
                for f in e.filters:
                    counts[f] += 1
                if q.filter in e.filters:
                    hits.append(e)
        matched = len(hits)  # the count says every session that matched, those under a root's "+N forks" too
        if q.forks_of is not None:
            hits = [e for b in built.values() for e in b.entries if e.root == q.forks_of]
            matched = len(hits)
        elif q.grouped:
            shown = {e.row["id"] for e in hits}
            hits = [e for e in hits if e.root is None or e.root not in shown]
        sort = q.sort or ("evidence" if q.filter == "likely" else "activity")
        hits.sort(key=_sort_key(sort), reverse=q.order != "asc")
        page = hits[q.cursor : q.cursor + q.limit]
        nxt = q.cursor + q.limit if q.cursor + q.limit < len(hits) else None
        listed = {p: len(b.entries) for p, b in built.items()}
        near = keep.total(b.survey for p, b in built.items() if q.project in (None, p))
        return {
            "rows": [e.row for e in page],
            "total": matched,
            "cursor": q.cursor,
            "next": nxt,
            "sort": sort,
            "order": "asc" if q.order == "asc" else "desc",
            "counts": counts,
            "waiting": sum(waiting.values()),
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
                    "path": p,
                    "count": per_project[p],
                    "listed": listed[p],
                    "waiting": waiting[p],
                    "depth": built[p].depth,
                    "more": listed[p] >= built[p].depth,
                }
                for p in built
            ],
            "version": sum(self.version(p) for p in projects),
            "took_ms": round((time.perf_counter() - started) * 1e3, 1),
        }
