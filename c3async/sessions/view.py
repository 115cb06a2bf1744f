"""The sessions view: catalog records joined with marks, liveness, C3 records, tasks, hints, the
chain and token totals (what the accountant last wrote); filtered, searched and sorted. The one place the CLI, the MCP tools and the Hub ask,
so the three never disagree.

A project here is a state root (a repository's main checkout stands for all its worktrees): its
transcripts are found for every checkout, including worktrees since removed (their folders are
named by C3 records and hook rows), and each session is one row with its own cwd.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path

import msgspec

from ..catalog import moves
from ..catalog.forks import fork_parents
from ..catalog.gitrefs import branches
from ..catalog.locate import config_home
from ..catalog.scan import (
    NEWEST,
    Progress,
    ProjectScan,
    scan_projects,
    scan_projects_sync,
)
from ..ground import safefs
from ..ground.errors import C3Error, PricesError
from ..ground.project import Project, resolve
from ..live.reader import live_sessions
from ..stores import activity, archive, checkouts, claude_dirs, config, records, registry
from ..stores.marks import MarkBook
from ..tasks import store as task_store
from ..usage import totals as usage_totals
from ..usage.prices import PriceTable, current_prices
from . import chain, keep
from .hints import HintContext, add_hints, clear_pairs
from .query import filters_of, haystack, matches, wanted_tag, words
from .rows import (
    Chain,
    DecisionLink,
    Places,
    Row,
    RowTokens,
    SnapshotLink,
    TaskLink,
    iso,
    resume_command,
    to_row,
)

__all__ = (
    "ProjectUsage",
    "extra_cwds",
    "filter_rows",
    "join_scan",
    "list_rows",
    "list_rows_sync",
    "project_usage",
    "remember_roots",
    "report_prices",
    "row_for",
    "whole_chain",
)

log = logging.getLogger("c3async.sessions")


MAX_EXTRA_CWDS = 256  # folders beyond git's list that one project's listing looks in


def _usable_cwd(cwd: object) -> bool:
    """An absolute, normalised path (no ``..``, no doubled or trailing slash) of sane length."""
    return (
        isinstance(cwd, str)
        and 0 < len(cwd) <= activity.MAX_LOGGED
        and "\x00" not in cwd
        and os.path.isabs(cwd)
        and os.path.normpath(cwd) == cwd
    )


def extra_cwds(project: Project, facts: activity.Facts | None = None) -> tuple[str, ...]:
    """Folders sessions of this project ran in that git no longer lists (a removed worktree),
    whose transcripts are still Claude Code's: the worktrees c3async saw git list for it
    (``checkouts``), and the cwds C3 records and hook rows name inside the project's own
    checkouts. A cwd from a log counts only if it is absolute and inside the root, a worktree git
    lists now, or one c3async saw it list (what a shipped ``.c3`` names, ``..`` or another
    project's folder, is never looked in); at most MAX_EXTRA_CWDS, the most recent first."""
    from ..catalog.locate import worktrees

    root = project.root
    live = [w for w in worktrees(root) if w != root]
    known = checkouts.remembered(root)
    if any(w not in known for w in live):
        checkouts.remember(root, live)
    kept = [w for w in known if w not in live and (not os.path.isdir(w) or resolve(w) == project)]
    bases = (root, *live, *kept)
    out: dict[str, None] = dict.fromkeys(kept)
    logged = [rec.cwd for rec in reversed(records.load_all(project)) if rec.cwd]
    logged += list(reversed((facts or activity.facts(project)).cwds))  # newest last in the fold
    for cwd in logged:
        if len(out) >= MAX_EXTRA_CWDS:
            break
        if cwd not in out and _usable_cwd(cwd) and any(cwd == b or cwd.startswith(b + os.sep) for b in bases):
            out[cwd] = None
    return tuple(out)


def join_scan(
    scan: ProjectScan,
    book: MarkBook | None = None,
    now: float | None = None,
    facts: activity.Facts | None = None,
) -> list[Row]:
    """Rows of one project with their marks, liveness, links, hints and chain. ``facts``: the
    activity log's fold, when the caller has it already."""
    project = scan.project
    places = Places()
    rows = [to_row(s, places) for s in scan.sessions]
    if not rows:
        return rows
    book = (book or MarkBook(project)).refresh()
    if facts is None:  # folded once: liveness, /clear pairs, chain
        facts = activity.facts(project)
    live = live_sessions(project, facts=facts, ids={row.id for row in rows})
    states = book.get_many([row.id for row in rows])
    keeps: dict[str, bool] = {}
    tagged = book.tagged()
    for row in rows:
        row.tags = tagged.get(row.id, row.tags)
        state = states.get(row.id)
        if state is not None:
            row.stale, row.note = state.stale, state.note
            row.marked = True
            if state.keep is not None:
                keeps[row.id] = state.keep.keep
        info = live.get(row.id)
        if info is not None and info.live:
            row.live, row.mcp_count, row.state = True, info.mcp_count, info.state
            row.state_since = iso(int(info.state_since * 1e9)) if info.state_since else None
    _follow_moves(rows)
    _mark_gone(project, rows)
    _join_links(project, rows)
    _join_usage(project, rows)
    timed = clear_pairs(rows, scan.sessions)
    hooked = facts.pairs
    cleared = set(facts.cleared)
    cfg = config.load(project)
    add_hints(
        rows,
        scan.sessions,
        HintContext(
            now=time.time() if now is None else now,
            idle_days=cfg.idle_days,
            branches=branches(project.root),
            cleared=cleared | set(timed),
        ),
    )
    keep.apply(project, rows, keeps, now, book=book, scan=scan)
    marked = [(r.id, r.stale.successor) for r in rows if r.stale is not None and r.stale.successor]
    handoffs = [(src, s.session_id) for s in scan.sessions if (src := s.record.handoff_from)]
    parents = fork_parents((s.session_id, s.record) for s in scan.sessions)
    by_id = {r.id: r for r in rows}
    for fork, parent in list(parents.items()):
        if fork not in by_id or parent not in by_id:
            del parents[fork]
            continue
        by_id[fork].forked_from = parent
        by_id[parent].forks.append(fork)
    after, before = chain.build([*marked, *hooked, *timed.items(), *handoffs, *((p, f) for f, p in parents.items())])
    for row in rows:  # its neighbours only: the whole chain is a detail's (``chain.around``)
        row.chain_prev = before.get(row.id, [])
        row.chain_next = after.get(row.id, [])
    return rows


def whole_chain(project: Project, rows: list[Row], sid: str) -> Chain:
    """Every session before and after ``sid``, nearest first: over the rows' neighbours and the
    links that reach past the listed rows (the /clear pairs the hooks recorded, every stale
    mark's successor), so a detail has the whole chain however long it is."""
    book = MarkBook(project).refresh()
    marked = [
        (i, st.stale.successor) for i, st in book.get_many(book.stale_ids()).items() if st.stale and st.stale.successor
    ]
    listed = [(r.id, nxt) for r in rows for nxt in r.chain_next]
    after, before = chain.build([*listed, *activity.facts(project).pairs, *marked])
    return Chain(chain.walk(before, sid), chain.walk(after, sid))


def _follow_moves(rows: list[Row]) -> None:
    """Rows of sessions whose folder a person moved (``projects --move``): shown, and resumed,
    in the folder it moved to. One lookup per distinct folder."""
    if not moves.load():
        return
    moved: dict[str, str | None] = {}
    for row in rows:
        if row.cwd not in moved:
            moved[row.cwd] = moves.renamed(row.cwd)
        new = moved[row.cwd]
        if new is not None:
            row.cwd = new
            row.resume = resume_command(new, row.id, config_dir=_elsewhere(row.root))


def _mark_gone(project: Project, rows: list[Row]) -> None:
    """Rows whose folder no longer exists (a removed worktree): flagged, and resumed by a
    command that recreates the worktree first. One stat per distinct folder."""
    gone: dict[str, bool] = {}
    for row in rows:
        if row.cwd == project.root:
            continue
        if row.cwd not in gone:
            gone[row.cwd] = not os.path.isdir(row.cwd)
        if gone[row.cwd]:
            row.cwd_gone = True
            row.resume = resume_command(row.cwd, row.id, row.branch, gone=True, config_dir=_elsewhere(row.root))


def _elsewhere(root: str | None) -> str | None:
    """A row's Claude Code root when it is not the default one (claude must be told of it)."""
    return root if root is not None and Path(root) != config_home() else None


def _session_of(ref: str, by_id: dict[str, Row], ids: list[str]) -> Row | None:
    """The row a stored session ref names: a full id, or (as earlier versions stored what was
    typed) a unique prefix of one."""
    row = by_id.get(ref)
    if row is not None or len(ref) >= 36 or len(ref) < 4:
        return row
    found = [i for i in ids if i.startswith(ref)]
    return by_id[found[0]] if len(found) == 1 else None


def _join_links(project: Project, rows: list[Row]) -> None:
    """Tasks and decisions linked to each session (pm.json), and its last snapshot (C3 records)."""
    by_id = {row.id: row for row in rows}
    ids = sorted(by_id)
    try:
        task_file = task_store.load(project)
    except C3Error as exc:  # a corrupt pm.json costs the links, not the listing
        log.warning("%s", exc)
        task_file = None
    if task_file is not None:
        for task in task_file.tasks:
            linked: set[str] = set()
            for ref in task.sessions:
                row = _session_of(ref, by_id, ids)
                if row is not None and row.id not in linked:
                    linked.add(row.id)
                    row.links.tasks.append(TaskLink(task.id, task.title, task.status))
        for d in task_file.decisions[-500:]:
            row = _session_of(d.session, by_id, ids) if d.session else None
            if row is not None:
                row.links.decisions.append(DecisionLink(d.id, d.text, d.ts))
    for rec in records.load_all(project):
        for snap in rec.snapshots:
            row = by_id.get(snap.host_session_id) if snap.host_session_id else None
            if row is not None and (row.links.snapshot is None or snap.ts >= row.links.snapshot.ts):
                row.links.snapshot = SnapshotLink(snap.summary, snap.ts)


def _join_usage(project: Project, rows: list[Row]) -> None:
    """Tokens as the accountant last wrote them (never run here: a listing shows what it
    found), priced with the table of the moment. The stats log is folded, so a warm listing
    reads only rows appended since."""
    try:
        latest = usage_totals.latest(project)
    except OSError as exc:  # no permission...: the listing goes on without the figures
        log.warning("could not read %s: %s", usage_totals.stats_path(project), exc)
        return
    if not latest:
        return
    table = report_prices()
    for row in rows:
        t = latest.get(row.id)
        if t is not None:
            cache_write = t.cache_write_5m + t.cache_write_1h
            total = t.input + t.output + cache_write + t.cache_read
            row.tokens = RowTokens(t.input, t.output, cache_write, t.cache_read, total, t.ts)
            cost = usage_totals.cost_of(t, table)
            row.cost_usd, row.unpriced_models = cost.usd, list(cost.unpriced)


def report_prices() -> PriceTable:
    """The price table for a listing: a ``prices.json`` that is not one is said (once) and
    prices nothing, so every model shows as unpriced rather than at a price nobody set."""
    try:
        return current_prices()
    except PricesError as exc:
        safefs.warn_once(exc)
        return PriceTable({})


class ProjectUsage(msgspec.Struct):
    """A project's tokens and cost: the sum over every session the accountant has counted (those
    whose transcripts are gone or older than the listing's newest too). ``tokens`` and
    ``cost_usd`` are None until the accountant has written anything; ``unpriced_models`` as a
    row's."""

    sessions: int = 0
    tokens: RowTokens | None = None
    cost_usd: float | None = None
    unpriced_models: list[str] = msgspec.field(default_factory=list)


def project_usage(project: Project) -> ProjectUsage:
    try:
        latest = usage_totals.latest(project)
    except OSError as exc:
        log.warning("could not read %s: %s", usage_totals.stats_path(project), exc)
        return ProjectUsage()
    if not latest:
        return ProjectUsage()
    table = report_prices()
    inp = out = cw = cr = 0
    cost = 0.0
    as_of = 0.0
    unpriced: dict[str, None] = {}
    for t in latest.values():
        inp += t.input
        out += t.output
        cw += t.cache_write_5m + t.cache_write_1h
        cr += t.cache_read
        c = usage_totals.cost_of(t, table)
        cost += c.usd
        as_of = max(as_of, t.ts)
        unpriced.update(dict.fromkeys(c.unpriced))
    tokens = RowTokens(inp, out, cw, cr, inp + out + cw + cr, as_of)
    return ProjectUsage(len(latest), tokens, round(cost, 6), list(unpriced))


def filter_rows(
    rows: Iterable[Row], which: str = "all", search: str | None = None, tag: str | None = None
) -> list[Row]:
    """The rows a filter passes whose text holds every word of ``search`` (``sessions.query``:
    the one query every door runs), tagged ``tag`` when given, in their order."""
    wanted = words(search)
    tag = wanted_tag(tag)
    return [
        r
        for r in rows
        if which in filters_of(r) and (not wanted or matches(haystack(r), wanted)) and (tag is None or tag in r.tags)
    ]


def _finish(
    scans: list[ProjectScan],
    which: str,
    search: str | None,
    logs: dict[Project, activity.Facts],
    tag: str | None = None,
) -> list[Row]:
    rows: list[Row] = []
    seen: set[str] = set()
    several = len(scans) > 1
    for scan in scans:
        try:
            joined = join_scan(scan, facts=logs.get(scan.project))
        except Exception as exc:
            if not several:
                raise
            _left_out(scan.project, exc)
            continue
        for row in joined:
            if row.id not in seen:  # each session once, whatever projects were asked for
                seen.add(row.id)
                rows.append(row)
    rows = filter_rows(rows, which, search, tag)
    rows.sort(key=lambda r: (r.mtime_ns, r.id), reverse=True)
    return rows


def _left_out(project: Project, exc: Exception) -> None:
    """One project of several that could not be listed: said once; the others are listed."""
    log.debug("listing %s failed", project, exc_info=exc)
    safefs.warn_once(f"{project} is left out of this listing: {exc}")


def _logs(projects: list[Project]) -> dict[Project, activity.Facts]:
    """Each project's activity facts, folded once per listing (the scan and the join use them).
    Of several projects, one whose state cannot be read is left out (said once)."""
    out: dict[Project, activity.Facts] = {}
    for p in projects:
        try:
            out[p] = activity.facts(p)
        except Exception as exc:
            if len(projects) == 1:
                raise
            _left_out(p, exc)
    return out


def _extras(logs: dict[Project, activity.Facts]) -> dict[Project, tuple[str, ...]]:
    out: dict[Project, tuple[str, ...]] = {}
    for p, facts in logs.items():
        try:
            out[p] = extra_cwds(p, facts)
        except Exception as exc:
            if len(logs) == 1:
                raise
            _left_out(p, exc)
    return out


async def list_rows(
    projects: list[Project],
    *,
    which: str = "all",
    search: str | None = None,
    limit: int = NEWEST,
    progress: Progress | None = None,
    tag: str | None = None,
) -> tuple[list[ProjectScan], list[Row]]:
    wanted_tag(tag)  # a bad tag costs no scan
    logs = _logs(projects)
    extras = _extras(logs)
    scans = await scan_projects(
        list(extras),
        limit=limit,
        progress=progress,
        extra_cwds=extras,
        fallback_root=archive.usable(),
        roots=claude_dirs.roots(),
    )
    remember_roots(scans)
    return scans, _finish(scans, which, search, logs, tag)


def list_rows_sync(
    projects: list[Project],
    *,
    which: str = "all",
    search: str | None = None,
    limit: int = NEWEST,
    progress: Progress | None = None,
    processes: bool = True,
    tag: str | None = None,
) -> tuple[list[ProjectScan], list[Row]]:
    """For a command-line process: starts an event loop only if some transcript must be read."""
    wanted_tag(tag)
    logs = _logs(projects)
    extras = _extras(logs)
    scans = scan_projects_sync(
        list(extras),
        limit=limit,
        progress=progress,
        processes=processes,
        extra_cwds=extras,
        fallback_root=archive.usable(),
        roots=claude_dirs.roots(),
    )
    remember_roots(scans)
    return scans, _finish(scans, which, search, logs, tag)


def remember_roots(scans: list[ProjectScan]) -> None:
    """A registered project remembers the Claude Code roots other than the default that hold
    its sessions: a listing run without the variable that named one still looks there."""
    default = config_home()
    for scan in scans:
        held = {str(folder.parent.parent) for folder, _cwd in scan.dirs.folders}
        held.discard(str(default))
        if held:
            try:
                registry.remember_roots(scan.project, sorted(held))
            except Exception as exc:  # remembering is a help, never a failure of the listing
                log.debug("roots of %s not remembered: %s", scan.dirs.project, exc)


def row_for(project: Project, session_id: str) -> Row | None:
    """One session's row, joined, whether or not it is among the newest listed."""
    from ..catalog.listing import candidates
    from ..catalog.locate import folders_under, locate
    from ..catalog.resolve import session_record
    from ..catalog.scan import Session

    dirs = locate(project.root, extra_cwds(project), claude_dirs.roots())
    cand = next((c for c in candidates([f for f, _ in dirs.folders]) if c.session_id == session_id), None)
    if cand is None:  # deleted by Claude Code, kept in the archive
        usable = archive.usable()
        kept = folders_under(usable, dirs.cwds) if usable is not None else []
        cand = next((c for c in candidates([f for f, _ in kept]) if c.session_id == session_id), None)
    rec = session_record(cand, dirs.cwds) if cand is not None else None
    if cand is None or rec is None:
        return None
    rows = join_scan(ProjectScan(project, dirs=dirs, sessions=[Session(cand, rec, dirs.project)]))
    return rows[0] if rows else None
