"""The incremental token and cost accountant.

Every transcript of the project (sessions, and sub-agent files, which count toward their parent
session) is read from the byte offset where the last run stopped: transcripts are append-only,
so a run costs only new bytes (an unchanged file costs one ``lstat``); a file that shrank or was
replaced is read again from 0. ``reader`` reads a file in bounded pieces and decodes only the
lines holding ``"usage":{``, with a narrow type, a piece's lines in one call.

A big pass (a first accounting: ``PROCESS_MIN_BYTES`` of new bytes or more) uses the other
cores, as the cold catalog scan does: finding markers and decoding hold the GIL, so threads
would keep to one core, while worker processes forked from the only thread of this process
do not. Files go out in hand-offs of about ``HANDOFF_BYTES``, the biggest first; each worker
answers with what it found (MessagePack), and the answers are merged here in listing order, so
the result never depends on which worker finished first. A pool that breaks (a worker killed,
no memory) costs one warning and the rest is read here; a process with threads of its own
(the MCP server) never forks.

One API response is written as several lines (one per content block) with the same
``message.id`` and ``requestId`` and the same usage: it counts once. Among copies the best is
kept, as ccusage keeps it (a main-chain copy over a sidechain replay, then the higher token
total, which drops a streaming partial); lines with no ``message.id`` are never merged.
Results go to ``.c3/session_stats.jsonl``: one row of running totals per host session whose
totals changed (all of a run's rows in one locked append); the last row of a session is its
total. A row keeps each model's tokens per kind, not a cost: reports price them with the table
of the moment (``totals.cost_of``), so the accountant needs no price table at all.

``account_projects`` accounts several projects in one pass (``c3async usage --all``): every
project's new bytes are read together, so a first accounting of many small projects forks one
pool for all of them and keeps every core busy, where a pass a project would fork a pool for
each (or none: each under ``PROCESS_MIN_BYTES``).

Only regular files are read, each opened without following a symlink and without blocking (a
FIFO named ``x.jsonl`` under ``subagents/`` must not hang ``c3async usage`` or a server's
shutdown); the sub-agent walk never follows a symlinked folder (no loops, nothing outside the
session's folder), and an entry that cannot be examined costs that entry only.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

import msgspec

from ..catalog import cache as catalog_cache
from ..catalog.forks import ancestors, fork_parents
from ..catalog.listing import folder_candidates, transcript_files
from ..catalog.locate import folders_under, locate
from ..catalog.scan import cache_path as catalog_cache_path
from ..ground import clock, jsonl, memo, safefs, workers
from ..ground.errors import DECODE_ERRORS, C3Error
from ..ground.jsondoc import write_atomic
from ..ground.paths import warn_once
from ..ground.project import Project
from ..stores import archive, claude_dirs
from . import timeline
from .prices import TIER_TOKENS, current_prices
from .reader import (
    MAX_REFUSALS,
    MAX_TOKENS,
    FileScan,
    Hit,
    Job,
    Refusal,
    ResponseUSD,
    Tokens,
    better,
    read_files,
    read_files_packed,
    unpack,
)
from .totals import NO_TOKENS, Kinds, ModelTokens, SessionTotals, latest, latest_totals, priced, stats_path

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

__all__ = (
    "Result",
    "SessionTotals",
    "account",
    "account_if_changed",
    "account_projects",
    "deleted",
    "latest_totals",
    "session_titles",
    "stats_path",
)

# 2: a copy a fork shares with its parent counts toward the parent; 3: an entry's cost is only
# what its line recorded (the rest is priced by each report), and rows keep tokens per model;
# 4: usage-limit refusals are kept (a transcript read before is read again once for them)
STATE_VERSION = 4
WORKERS = 4  # at most this many worker processes for a big first pass
PROCESS_MIN_BYTES = 64 * 1024 * 1024  # new bytes to read before worker processes pay for themselves
HANDOFF_BYTES = 16 * 1024 * 1024  # about this many new bytes per hand-off to a worker...
HANDOFF_FILES = 32  # ...and at most this many files

log = logging.getLogger("c3async.usage")


class _Entry(msgspec.Struct, array_like=True):
    """One counted API response (the kept copy of a deduplicated one)."""

    file: str
    session: str
    model: str
    tokens: Tokens
    cost: ResponseUSD | None  # what the line recorded (``costUSD``); None: priced when reported
    sidechain: bool
    ts: str | None


class _FileState(msgspec.Struct):
    offset: int = 0
    ino: int = 0
    searched: int = 0  # an unterminated line over MAX_LINE at ``offset`` was followed this far
    session: str | None = None
    loose: list[_Entry] = msgspec.field(default_factory=list)  # responses with no message.id


class _State(msgspec.Struct):
    version: int = STATE_VERSION
    files: dict[str, _FileState] = msgspec.field(default_factory=dict)
    seen: dict[str, _Entry] = msgspec.field(default_factory=dict)  # "msg_id:request_id" -> kept copy
    refusals: list[Refusal] = msgspec.field(default_factory=list)  # the newest MAX_REFUSALS, oldest first


_NO_PROJECT = Project("")


@dataclass
class Result:
    """One project's pass. ``totals``: each session's row as written (tokens, no cost: see
    ``priced``)."""

    totals: dict[str, SessionTotals]
    files: int
    files_read: int
    bytes_read: int
    changed: list[str]
    seconds: float
    workers: int = 0  # worker processes that read (0: this process did)
    bytes_decoded: int = 0  # bytes of the lines holding usage, the only ones decoded
    lines_skipped: int = 0  # lines holding the marker that did not decode (torn, hostile)
    project: Project = _NO_PROJECT  # set by every pass
    settled: bool = False  # nothing moved since the last pass: not read (``only_changed``)
    timeline: timeline.Timeline | None = None  # the usage over time the pass wrote (or found)

    def priced(self) -> dict[str, SessionTotals]:
        """``totals`` with their costs, from the price table as it is now (PricesError for a
        ``prices.json`` that is not one)."""
        table = current_prices()
        return {sid: priced(t, table) for sid, t in self.totals.items()}


def _state_path(project: Project) -> Path:
    return project.state / "cache" / "usage.json"


def _files(project: Project) -> Iterator[tuple[str, str | None, os.stat_result]]:
    """(transcript, the session it counts toward (None: read it from its lines), its lstat)."""
    for folder, _cwd in locate(project.root, roots=claude_dirs.roots()).folders:
        yield from transcript_files(folder)


def deleted(project: Project, sessions: Iterable[str]) -> set[str]:
    """Of ``sessions``, those whose transcript is in none of the project's transcript folders
    and not in the archive of kept sessions: Claude Code deleted it, and nothing kept it. A
    listing of the folders, no file read."""
    dirs = locate(project.root)
    folders = [folder for folder, _cwd in dirs.folders]
    kept = archive.usable()
    if kept is not None:
        folders += [folder for folder, _cwd in folders_under(kept, dirs.cwds)]
    present = {c.session_id for folder in folders for c in folder_candidates(folder)}
    return {sid for sid in sessions if sid not in present}


def session_titles(project: Project) -> dict[str, str]:
    """Session titles from the catalog's cache (no transcript is read for them)."""
    return _titles(catalog_cache.load(catalog_cache_path(project)))


def _titles(catalog: dict) -> dict[str, str]:
    out = {}
    for path, rec in catalog.items():
        title, _ = rec.title()
        if title:
            out[Path(path).stem.lower()] = title
    return out


def _totals(state: _State, titles: dict[str, str], now: float) -> tuple[dict[str, SessionTotals], list[timeline.Slot]]:
    """Each session's totals, and the same usage per quarter hour (``timeline``), from every
    counted response. Summed per (session, model, quarter hour) first, in one tight loop (a warm
    pass with nothing new still sums every response of the project): the 5 kinds of the
    responses priced later, their responses, and those that recorded a cost (a recorded cost);
    a response above the long-context tier adds its part above it; the first and last times."""
    sums: dict[tuple[str, str, int], list] = {}
    spans: dict[str, list] = {}  # session -> [first ts, last ts]
    tier = TIER_TOKENS
    slot_s = timeline.SLOT_S
    parse = clock.parse_iso
    # a line's time counts when in range (``ground.clock``): compared as text here, every pass
    earliest, last = clock.iso_window()
    for entries in (state.seen.values(), *(fs.loose for fs in state.files.values())):
        for e in entries:
            ts = e.ts
            if ts and not earliest < ts <= last:
                clock.event_iso(ts, "a transcript's timestamp", e.file)  # says so, once
                ts = None
            at = parse(ts) if ts else None
            if at is not None and at <= 0:  # in range as text, not as a time: no time
                at = None
            key = (e.session, e.model, -1 if at is None else int(at // slot_s))
            m = sums.get(key)
            if m is None:
                m = sums[key] = [0, 0, 0, 0, 0, 0, None, None, at or 0.0, at or 0.0]
            elif at is not None:
                if at < m[8]:
                    m[8] = at
                if at > m[9]:
                    m[9] = at
            i, o, w5, w1, r = tok = e.tokens
            if e.cost is None:
                m[0] += i
                m[1] += o
                m[2] += w5
                m[3] += w1
                m[4] += r
                m[5] += 1
                if i > tier or o > tier or w5 > tier or w1 > tier or r > tier:  # long sessions: often
                    above = m[6] = m[6] or [0, 0, 0, 0, 0]
                    above[0] += i - tier if i > tier else 0
                    above[1] += o - tier if o > tier else 0
                    above[2] += w5 - tier if w5 > tier else 0
                    above[3] += w1 - tier if w1 > tier else 0
                    above[4] += r - tier if r > tier else 0
            else:  # a recorded cost (rare): its own tokens and USD
                rec = m[7] = m[7] or [0, 0, 0, 0, 0, 0.0, 0]
                for k in range(5):
                    rec[k] += tok[k]
                rec[5] += e.cost
                rec[6] += 1
            if ts:
                span = spans.get(e.session)
                if span is None:
                    spans[e.session] = [ts, ts]
                elif ts < span[0]:
                    span[0] = ts
                elif ts > span[1]:
                    span[1] = ts
    totals: dict[str, SessionTotals] = {}
    models: dict[tuple[str, str], list] = {}  # (session, model) -> the sums over its quarter hours
    slots = []
    for (session, model, slot), m in sums.items():
        rec = m[7] or (0, 0, 0, 0, 0, 0.0, 0)
        above = tuple(m[6]) if m[6] else NO_TOKENS
        slots.append(
            timeline.Slot(slot, session, model, tuple(m[0:5]), above, m[5], rec[5], rec[6], tuple(rec[0:5]), m[8], m[9])
        )
        s = models.get((session, model))
        if s is None:
            models[(session, model)] = [*m[0:6], list(above), list(rec)]
        else:
            for k in range(6):
                s[k] += m[k]
            for k in range(5):
                s[6][k] += above[k]
            for k in range(7):
                s[7][k] += rec[k]
    for (session, model), m in models.items():
        t = totals.get(session)
        if t is None:
            span = spans.get(session) or [None, None]
            t = totals[session] = SessionTotals(
                session_id=session, ts=now, title=titles.get(session), first_ts=span[0], last_ts=span[1]
            )
        rec = m[7]
        t.input += m[0] + rec[0]
        t.output += m[1] + rec[1]
        t.cache_write_5m += m[2] + rec[2]
        t.cache_write_1h += m[3] + rec[3]
        t.cache_read += m[4] + rec[4]
        t.responses += m[5] + rec[6]
        t.tokens_by_model[model] = sum(m[0:5]) + sum(rec[0:5])
        above = tuple(m[6]) if any(m[6]) else NO_TOKENS
        t.models[model] = ModelTokens((m[0], m[1], m[2], m[3], m[4]), above, m[5], rec[5], rec[6])
    return totals, slots


def _load_state(path: Path) -> _State:
    try:
        state = msgspec.json.decode(safefs.read_bytes(path), type=_State)  # never a link or a FIFO
    except (OSError, *DECODE_ERRORS):
        return _State()
    return state if state.version == STATE_VERSION else _State()


def _same(old: SessionTotals, new: SessionTotals) -> bool:
    """Nothing worth a new row: the same totals, and no title learnt since."""
    if new.title and new.title != old.title:
        return False
    return msgspec.structs.replace(old, ts=0.0, title=None) == msgspec.structs.replace(new, ts=0.0, title=None)


@dataclass
class _Pass:
    """One project's part of a pass: its state, and the files with new bytes to read."""

    project: Project
    state_file: Path
    state: _State
    present: int = 0
    dirty: bool = False
    todo: list[tuple[_FileState, Job]] = field(default_factory=list)
    inputs: tuple = ()  # what ``_stamp`` is made of, as the listing found it


def account(project: Project, *, write: bool = True, processes: bool = True) -> Result:
    """Bring the project's usage up to date; append a stats row for each session that changed.

    A big pass reads in worker processes when ``processes`` allows it (the CLI); a process
    that runs threads of its own (the MCP server) passes False, and a call made while any other
    thread runs never forks anyway."""
    return account_projects([project], write=write, processes=processes)[0]


# project -> the stamp of what its last pass (or check) in this process found settled
_settled: dict[Project, str] = memo.kept({})


def _stamp(project: Project, inputs: tuple) -> str:
    """What a pass read (``inputs``: every transcript's identity, size and time, and the
    catalog's cache, as they were before it) and the state and stats files as they are now, in
    a few bytes: the same stamp, nothing new to count (``timeline.Timeline.stamp``)."""
    outputs = (safefs.stamp(_state_path(project)), safefs.stamp(stats_path(project)))
    data = msgspec.msgpack.encode((STATE_VERSION, timeline.VERSION, inputs, outputs))
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def account_if_changed(project: Project, *, processes: bool = True) -> Result | None:
    """``account``, unless nothing it reads has moved since the last pass over ``project`` (None
    then): no transcript grew or appeared, and the catalog's cache, the usage state and the
    stats log are as that pass left them. A stat per transcript, where a pass reads its state
    (a mebibyte for 200 sessions) and sums every response counted: for the runs a Hub and a
    server make every minute, mostly over an unchanged world."""
    (result,) = account_projects([project], processes=processes, only_changed=True)
    return None if result.settled else result


def account_projects(
    projects: list[Project],
    *,
    write: bool = True,
    processes: bool = True,
    only_changed: bool = False,
    on_error: Callable[[Project, Exception], None] | None = None,
) -> list[Result]:
    """``account`` for several projects, their new bytes read in one pass (see the module's
    docstring). ``on_error``: told of a project that cannot be accounted (its state refused, a
    read-only checkout), which is then left out of the results; without it, that raises.
    ``only_changed``: a project with nothing new since its last pass (``account_if_changed``)
    is not read: its result is ``settled``, with no ``totals`` (``totals.latest`` has them) and
    the ``timeline`` that pass wrote."""
    started = time.perf_counter()
    passes: list[_Pass] = []
    settled: dict[Project, Result] = {}
    for project in projects:
        try:
            planned = _plan(project, only_changed)
        except (OSError, C3Error) as exc:
            if on_error is None:
                raise
            on_error(project, exc)
            continue
        if isinstance(planned, Result):
            settled[project] = planned
        else:
            passes.append(planned)
    jobs = [job for p in passes for _, job in p.todo]
    scans, n = _read(jobs, processes)
    done: dict[Project, Result] = {}
    at = 0
    for p in passes:
        mine = scans[at : at + len(p.todo)]
        at += len(p.todo)
        try:
            done[p.project] = _finish(p, mine, n, write, started)
        except (OSError, C3Error) as exc:
            if on_error is None:
                raise
            on_error(p.project, exc)
    return [r for project in projects if (r := settled.get(project) or done.get(project)) is not None]


def _plan(project: Project, only_changed: bool = False) -> _Pass | Result:
    """The project's state, and what each of its files has to read since; with
    ``only_changed``, a settled Result instead when nothing moved since the last pass."""
    listing = list(_files(project))
    inputs = (
        tuple((path, st.st_ino, st.st_size, st.st_mtime_ns) for path, _session, st in listing),
        safefs.stamp(catalog_cache_path(project)),
    )
    if only_changed:
        stamp = _stamp(project, inputs)
        held = None if _settled.get(project) == stamp else timeline.load(project)
        if _settled.get(project) == stamp or (held is not None and held.stamp == stamp):
            _settled[project] = stamp
            return Result({}, len(listing), 0, 0, [], 0.0, project=project, settled=True, timeline=held)
    state_file = _state_path(project)
    p = _Pass(project, state_file, _load_state(state_file), inputs=inputs)
    files = p.state.files
    p.dirty = not files
    for key, session, _st in listing:
        p.present += 1
        fs = files.get(key)
        if fs is None:
            fs = files[key] = _FileState(session=session)
            p.dirty = True
        new = _new_bytes(key, fs)
        if new:
            p.todo.append((fs, Job(key, fs.session, fs.offset, fs.ino, new, fs.searched)))
    return p


def _finish(p: _Pass, scans: list[FileScan | None], workers: int, write: bool, started: float) -> Result:
    """Merge what was read into the project's state, and write its changed rows and state."""
    project, state, dirty = p.project, p.state, p.dirty
    done = [(fs, job, scan) for (fs, job), scan in zip(p.todo, scans) if scan is not None]
    # A file replaced or shrunk since (another inode, or smaller than where we stopped) is read
    # again from 0: first drop what it contributed, all such files in one sweep.
    replaced = {job.path for fs, job, scan in done if scan.start == 0 and fs.offset}
    if replaced:
        for gone in [k for k, e in state.seen.items() if e.file in replaced]:
            del state.seen[gone]
    seen = state.seen
    catalog = catalog_cache.load(catalog_cache_path(project))
    # A fork copies its parent's lines, responses included: a copy counts once (the key), and
    # where the copies are equal, toward the session where it was said (the fork's ancestor).
    parents = fork_parents((Path(path).stem.lower(), rec) for path, rec in catalog.items())
    descendants: dict[str, set[str]] = {}
    for fork in parents:
        for up in ancestors(parents, fork):
            descendants.setdefault(up, set()).add(fork)

    def forks_of(session: str) -> set[str]:
        return descendants.get(session, set())

    files_read = read_bytes = decoded = skipped = 0
    bad = next(((job.path, scan.out_of_range) for _, job, scan in done if scan.out_of_range), None)
    if bad is not None:
        warn_once(
            f"{bad[0]}: the usage of {bad[1]} response(s) is not counted: token counts that are negative, "
            f"not whole numbers or above {MAX_TOKENS:,}, or a cost out of range (files like it too)",
            key="usage:out_of_range",
        )
    for fs, job, scan in done:  # in listing order, so which copy a tie keeps never varies
        if job.path in replaced:
            fs.loose.clear()
        dirty = dirty or scan.offset != fs.offset or scan.ino != fs.ino or scan.searched != fs.searched
        fs.offset, fs.ino, fs.searched = scan.offset, scan.ino, scan.searched
        if scan.bytes_read:
            files_read += 1
            read_bytes += scan.bytes_read
        decoded += scan.decoded
        skipped += scan.skipped
        for hit in scan.best:
            key = hit.key or ""  # every hit of ``best`` has its key
            old = seen.get(key)
            if old is None or better(hit, old) or (not better(old, hit) and old.session in forks_of(hit.session)):
                seen[key] = _entry(job.path, hit)
        fs.loose.extend(_entry(job.path, hit) for hit in scan.loose)
        if scan.refusals:
            state.refusals = _newest(state.refusals, scan.refusals)
            dirty = True
    # A transcript deleted since (Claude Code's 30-day cleanup) keeps its place in the state:
    # what it spent was spent.
    titles = _titles(catalog)
    totals, slots = _totals(state, titles, time.time())
    changed = []
    line = None
    if write:
        before = latest(project)  # read only
        rows = []
        for sid, t in sorted(totals.items(), key=lambda kv: kv[1].last_ts or ""):
            if sid not in before or not _same(before[sid], t):
                rows.append(t)
                changed.append(sid)
        _append_rows(stats_path(project), rows)
        if dirty:
            try:
                write_atomic(p.state_file, msgspec.json.encode(state), fsync=False)
            except OSError:
                pass  # the state is a cache: the next run reads from 0
        # what the stats log holds of sessions the state no longer does: counted still
        slots += [s for sid, t in before.items() if sid not in totals for s in _whole(t)]
        titles.update((sid, t.title) for sid, t in before.items() if t.title and sid not in titles)
        stamp = _stamp(project, p.inputs)
        line = timeline.Timeline(
            stamp=stamp, written=time.time(), slots=slots, titles=titles, refusals=list(state.refusals)
        )
        timeline.save(project, line)
        _settled[project] = stamp
    return Result(
        totals,
        p.present,
        files_read,
        read_bytes,
        changed,
        time.perf_counter() - started,
        workers=workers if p.todo else 0,
        bytes_decoded=decoded,
        lines_skipped=skipped,
        project=project,
        timeline=line,
    )


def _newest(kept: list[Refusal], found: list[Refusal]) -> list[Refusal]:
    """The newest ``MAX_REFUSALS`` of both, each once (a file read again finds its own again)."""
    merged = {(r.session, r.t): r for r in [*kept, *found]}
    return sorted(merged.values(), key=lambda r: r.t)[-MAX_REFUSALS:]


def _whole(t: SessionTotals) -> list[timeline.Slot]:
    """A session's total from the stats log as timeline rows at its last response, a row per
    model (``whole``). The log keeps the tokens of responses that recorded their own cost only
    in the session's sums: they go to a model that recorded one."""
    when = t.last_ts or t.first_ts
    at = clock.parse_iso(when) if when else None
    at = at if at is not None and at > 0 else 0.0
    slot = int(at // timeline.SLOT_S) if at else -1
    sums = (t.input, t.output, t.cache_write_5m, t.cache_write_1h, t.cache_read)
    if not t.models:  # a row written before tokens were kept per model: its stored cost
        model = next(iter(t.tokens_by_model), "unknown")
        return [
            timeline.Slot(
                slot, t.session_id, model, NO_TOKENS, NO_TOKENS, 0, t.cost_usd, t.responses or 1, sums, at, at, True
            )
        ]
    counted = [sum(m.tokens[k] for m in t.models.values()) for k in range(5)]
    rest = cast(Kinds, tuple(max(0, n - c) for n, c in zip(sums, counted)))
    holder = next((name for name, m in t.models.items() if m.recorded), None)
    return [
        timeline.Slot(
            slot,
            t.session_id,
            name,
            m.tokens,
            m.above_200k,
            m.responses,
            m.recorded_usd,
            m.recorded,
            rest if name == holder else NO_TOKENS,
            at,
            at,
            True,
        )
        for name, m in t.models.items()
    ]


def _append_rows(path: Path, rows: list[SessionTotals]) -> None:
    """Append ``rows``, a line each, under one lock and in one ``write()`` (a first pass over a
    thousand sessions appends a thousand rows), by ``jsonl.append``'s rules: a torn last line
    left by a killed writer gets its newline first, and a write that fails part-way is cut back
    off. Raises OSError or UnsafeState as ``jsonl.append`` does."""
    if not rows:
        return
    data = b"".join(jsonl.encode_line(row) for row in rows)
    with jsonl.appending(path) as log:
        log.write(data)


def _entry(path: str, hit: Hit) -> _Entry:
    return _Entry(path, hit.session, hit.model, hit.tokens, hit.cost, hit.sidechain, hit.ts)


def _new_bytes(path: str, fs: _FileState) -> int:
    """About how many bytes a pass must read from ``path`` (0: none, it is unchanged or not a
    regular file now). One ``lstat``; the read itself checks again on the open descriptor."""
    try:
        st = os.lstat(path)
    except OSError:
        return 0
    if not stat.S_ISREG(st.st_mode):
        return 0
    if st.st_ino != fs.ino or st.st_size < fs.offset:
        return st.st_size or (1 if fs.offset else 0)  # replaced: read it all (an empty one too)
    return st.st_size - max(fs.offset, fs.searched)  # an unterminated giant line: from where it was left


def _read(jobs: list[Job], processes: bool) -> tuple[list[FileScan | None], int]:
    """Read every job: in this process, or, for a big pass, in
    worker processes. Finding markers and decoding hold the GIL, so threads would keep to one
    core. Returns the scans in job order and the number of worker processes used (0: none)."""
    if not (processes and len(jobs) > 1 and sum(job.new for job in jobs) >= PROCESS_MIN_BYTES):
        return [scan for _, scan in read_files(list(enumerate(jobs)))], 0
    with workers.pool(WORKERS) as (pool, n):  # killed, not waited for, on Ctrl-C
        if pool is None:
            return [scan for _, scan in read_files(list(enumerate(jobs)))], 0
        return _read_in(pool, jobs), n


def _read_in(pool: ProcessPoolExecutor, jobs: list[Job]) -> list[FileScan | None]:
    """The jobs read by the pool's workers, in hand-offs (see ``_handoffs``), in job order."""
    out: list[FileScan | None] = [None] * len(jobs)
    handoffs = _handoffs(jobs)
    futures = [pool.submit(read_files_packed, h) for h in handoffs]
    broken = False
    for handoff, fut in zip(handoffs, futures):
        if not broken:
            try:
                results = unpack(fut.result())
            except Exception as exc:  # a broken pool (a worker killed, no memory): read here
                log.warning("worker processes failed (%s); reading in this process", exc)
                broken = True
        if broken:
            results = read_files(handoff)
        for i, scan in results:
            out[i] = scan
    return out


def _handoffs(jobs: list[Job]) -> list[list[tuple[int, Job]]]:
    """Jobs packed into hand-offs, the biggest files first (so no worker is left with a 60 MiB
    transcript at the end while the others idle), each about ``HANDOFF_BYTES``."""
    order = sorted(range(len(jobs)), key=lambda i: -jobs[i].new)
    out: list[list[tuple[int, Job]]] = []
    cur: list[tuple[int, Job]] = []
    size = 0
    for i in order:
        job = jobs[i]
        n = job.new
        if cur and (size + n > HANDOFF_BYTES or len(cur) >= HANDOFF_FILES):
            out.append(cur)
            cur, size = [], 0
        cur.append((i, job))
        size += n
    if cur:
        out.append(cur)
    return out


def can_fork_workers() -> int:
    return workers.can_fork(WORKERS)
