"""One query over session rows, for every door: which rows a filter and words select, how they
are ordered, which are forks under a root, and why a row looks stale. The CLI's ``sessions``,
the MCP tool's ``list`` and the Hub's table all ask here, so the three never disagree.

- A filter: ``all``; ``likely`` (unmarked rows with at least one hint: worth a look); ``stale``;
  ``live``; ``waiting`` (live, and Claude Code waits for the user); ``expiring`` (Claude Code's
  cleanup deletes it within the week, unkept).
- Words: every word must be in the row's text (title, id, branch, prompts, note, stale reason,
  tags), casefolded: "retry budget" finds a row that says "budget for the retry".
- A tag: only the rows tagged with it (``wanted_tag``: as typed -> as stored).
- Orders: ``activity`` (the last activity, the default), ``created``, ``size``, ``tokens``,
  ``cost``, ``title``, ``evidence`` (how strongly the hints say "not worth resuming": the
  ``likely`` filter's own order); ties go by the file's mtime, as every listing orders.
- Forks: a fork's root is the first session of its tree; a listing may leave out a fork whose
  root it lists (the root says ``+N forks``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..ground.clock import parse_iso

if TYPE_CHECKING:  # (a door's parser takes FILTERS and SORTS from here without the rows' imports)
    from .rows import Row

__all__ = (
    "EVIDENCE",
    "FILTERS",
    "PAGE",
    "SORTS",
    "Entry",
    "Query",
    "Selection",
    "entries",
    "evidence",
    "filters_of",
    "haystack",
    "matches",
    "select",
    "sort_key",
    "wanted_tag",
    "words",
)

FILTERS = ("all", "likely", "stale", "live", "waiting", "expiring")
SORTS = ("activity", "created", "size", "tokens", "cost", "title", "evidence")
# The strength of each kind of evidence that a session is not worth resuming, strongest first.
EVIDENCE = (
    ("ended by /clear", 50),
    ("branch gone", 40),
    ("worktree gone", 40),
    ("newer on branch", 30),
    ("short", 20),
    ("idle", 10),
)
PAGE = 100


def filters_of(row: Row) -> frozenset[str]:
    """Every filter the row passes (``all`` always)."""
    out = {"all"}
    if not row.marked and row.hints:
        out.add("likely")
    if row.stale is not None:
        out.add("stale")
    if row.live:
        out.add("live")
    if row.state == "waiting":
        out.add("waiting")
    if row.expires_in_days is not None:
        out.add("expiring")
    return frozenset(out)


def haystack(row: Row) -> str:
    """What words are looked for in, casefolded: id, title, prompts, branch, note, stale reason."""
    parts = [row.id, row.title, row.first_prompt or "", row.last_prompt or "", row.branch or ""]
    if row.note is not None:
        parts += [row.note.summary or "", row.note.next_steps or ""]
    if row.stale is not None:
        parts.append(row.stale.reason or "")
    parts += row.tags
    return "\n".join(parts).casefold()


def words(text: str | None) -> list[str]:
    """What a person typed, as the words every row must hold."""
    return (text or "").casefold().split()


def wanted_tag(tag: str | None) -> str | None:
    """A tag filter as typed -> the tag as stored (None: no filter); BadArgument if it is no tag."""
    if not tag:
        return None
    from ..stores.marks import clean_tags

    return clean_tags([tag])[0]


def matches(hay: str, wanted: list[str]) -> bool:
    return all(w in hay for w in wanted)


def evidence(row: Row, newer_on_branch: bool) -> tuple[list[str], int]:
    """Why the row looks stale (its hints, and a newer session on its branch), and how strongly."""
    why = list(row.hints)
    if newer_on_branch and row.branch:
        why.append(f"newer on branch {row.branch}")
    score = 0
    for text in why:
        score += next((points for kind, points in EVIDENCE if text.startswith(kind)), 0)
    return why, score


@dataclass(frozen=True, slots=True)
class Query:
    """What a listing asks for. ``sort`` "" means the filter's own order (last activity; for
    "likely", the evidence); ``order`` "desc" or "asc"; ``q`` the words."""

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
    tag: str | None = None  # only the rows with this tag (as stored: ``wanted_tag``)


@dataclass(slots=True)
class Entry:
    """A row as a query sees it, worked out once: what it passes, where its words are, its
    times and evidence, its fork tree's root and how many forks it heads."""

    row: Row
    hay: str
    filters: frozenset[str]
    activity: float
    created: float
    score: int  # the strength of the likely-stale evidence
    why: list[str]  # the evidence, for a row the likely filter passes
    mtime_ns: int
    root: str | None = None  # of its fork tree, when it is a fork
    fork_count: int = 0  # the forks under it, when it is a root (forks of forks too)
    view: Any = None  # what a door keeps with it (the Hub: the row as the page wants it)


def entries(rows: list[Row]) -> list[Entry]:
    """The rows (newest first, as listings give them) as entries."""
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
        filters = filters_of(r)
        newer = bool(r.branch) and newest_on.get(r.branch or "") not in (None, r.id)
        why, score = evidence(r, newer and "likely" in filters)
        act = parse_iso(r.last_activity or r.mtime) or r.mtime_ns / 1e9
        created = parse_iso(r.created_at) or act
        out.append(
            Entry(r, haystack(r), filters, act, created, score, why if "likely" in filters else [], r.mtime_ns, root)
        )
    under: dict[str, int] = {}
    for e in out:
        if e.root is not None:
            under[e.root] = under.get(e.root, 0) + 1
    for e in out:
        e.fork_count = under.get(e.row.id, 0)
    return out


def sort_key(sort: str) -> Callable[[Entry], Any]:
    if sort == "created":
        return lambda e: (e.created, e.mtime_ns)
    if sort == "size":
        return lambda e: (e.row.size, e.mtime_ns)
    if sort == "tokens":
        return lambda e: (e.row.tokens.total if e.row.tokens is not None else -1, e.mtime_ns)
    if sort == "cost":
        return lambda e: (e.row.cost_usd if e.row.cost_usd is not None else -1.0, e.mtime_ns)
    if sort == "title":
        return lambda e: (e.row.title.casefold(), e.mtime_ns)
    if sort == "evidence":
        return lambda e: (e.score, e.activity, e.mtime_ns)
    return lambda e: (e.activity, e.mtime_ns)


@dataclass(slots=True)
class Selection:
    """What a query selected, in order, before paging. ``matched`` counts every match (forks
    left under their root's "+N forks" too); ``counts`` each filter's matches for the words (in
    the query's project); ``by_project`` the filter's matches of each project for the words,
    whatever the query's project; ``waiting`` each project's waiting sessions, whatever the
    filter and words (a page's title and rail show them); ``tags`` the sessions of each tag in
    the query's project, whatever the filter and words (the rail's tag row)."""

    hits: list[Entry]
    matched: int
    counts: dict[str, int]
    sort: str
    by_project: dict[str, int]
    waiting: dict[str, int]
    tags: dict[str, int]


def select(found: Iterable[Entry], q: Query) -> Selection:
    """The entries ``q`` selects (its filter, words, project and branch; or a root's forks),
    sorted. ``found`` is every entry the query may see."""
    wanted = words(q.q)
    counts = dict.fromkeys(FILTERS, 0)
    by_project: dict[str, int] = {}
    waiting: dict[str, int] = {}
    tags: dict[str, int] = {}
    pool = list(found)
    hits = []
    for e in pool:
        project = e.row.project
        if "waiting" in e.filters:
            waiting[project] = waiting.get(project, 0) + 1
        if q.project is None or project == q.project:
            for t in e.row.tags:
                tags[t] = tags.get(t, 0) + 1
        if (wanted and not matches(e.hay, wanted)) or (q.branch and e.row.branch != q.branch):
            continue
        if q.tag is not None and q.tag not in e.row.tags:
            continue
        if q.filter in e.filters:
            by_project[project] = by_project.get(project, 0) + 1
        if q.project is not None and project != q.project:
            continue
        for f in e.filters:
            counts[f] += 1
        if q.filter in e.filters:
            hits.append(e)
    matched = len(hits)
    if q.forks_of is not None:
        hits = [e for e in pool if e.root == q.forks_of]
        matched = len(hits)
    elif q.grouped:
        shown = {e.row.id for e in hits}
        hits = [e for e in hits if e.root is None or e.root not in shown]
    sort = q.sort or ("evidence" if q.filter == "likely" else "activity")
    hits.sort(key=sort_key(sort), reverse=q.order != "asc")
    return Selection(hits, matched, counts, sort, by_project, waiting, tags)
