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
total.

Only regular files are read, each opened without following a symlink and without blocking (a
FIFO named ``x.jsonl`` under ``subagents/`` must not hang ``c3async stats`` or a server's
shutdown); the sub-agent walk never follows a symlinked folder (no loops, nothing outside the
session's folder), and an entry that cannot be examined costs that entry only.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from ..catalog import cache as catalog_cache
from ..catalog.forks import ancestors, fork_parents
from ..catalog.listing import transcript_files
from ..catalog.locate import locate
from ..catalog.scan import cache_path as catalog_cache_path
from ..ground import jsonl, safefs, workers
from ..ground.errors import DECODE_ERRORS
from ..ground.jsondoc import write_atomic
from ..ground.stateroot import project_state
from .prices import PriceTable, load_prices
from .reader import FileScan, Hit, Job, Tokens, better, cost, read_files, read_files_packed, unpack
from .totals import SessionTotals, latest, latest_totals, stats_path

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

__all__ = ("Result", "SessionTotals", "account", "cost", "latest_totals", "session_titles", "stats_path")

STATE_VERSION = 2  # 2: a copy a fork shares with its parent counts toward the parent
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
    cost: float | None  # None: unpriced model
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


@dataclass
class Result:
    totals: dict[str, SessionTotals]
    files: int
    files_read: int
    bytes_read: int
    changed: list[str]
    seconds: float
    workers: int = 0  # worker processes that read (0: this process did)
    bytes_decoded: int = 0  # bytes of the lines holding usage, the only ones decoded
    lines_skipped: int = 0  # lines holding the marker that did not decode (torn, hostile)


def _state_path(project: str) -> Path:
    return project_state(project) / "cache" / "usage.json"


def _files(project: str) -> Iterator[tuple[Path, str | None]]:
    """(transcript, the session it counts toward; None: read it from its lines)."""
    for folder, _cwd in locate(project).folders:
        for path, session, _st in transcript_files(folder):
            yield Path(path), session


def session_titles(project: str) -> dict[str, str]:
    """Session titles from the catalog's cache (no transcript is read for them)."""
    out = {}
    for path, rec in catalog_cache.load(catalog_cache_path(project)).items():
        title, _ = rec.title()
        if title:
            out[Path(path).stem.lower()] = title
    return out


def _totals(state: _State, titles: dict[str, str], now: float) -> dict[str, SessionTotals]:
    totals: dict[str, SessionTotals] = {}
    entries = list(state.seen.values()) + [e for fs in state.files.values() for e in fs.loose]
    for e in entries:
        t = totals.get(e.session)
        if t is None:
            t = totals[e.session] = SessionTotals(session_id=e.session, ts=now, title=titles.get(e.session))
        t.input += e.tokens[0]
        t.output += e.tokens[1]
        t.cache_write_5m += e.tokens[2]
        t.cache_write_1h += e.tokens[3]
        t.cache_read += e.tokens[4]
        t.responses += 1
        t.tokens_by_model[e.model] = t.tokens_by_model.get(e.model, 0) + sum(e.tokens)
        if e.cost is None:
            if e.model not in t.unknown_models:
                t.unknown_models.append(e.model)
        else:
            t.cost_usd += e.cost
            t.cost_by_model[e.model] = t.cost_by_model.get(e.model, 0.0) + e.cost
        if e.ts:
            t.first_ts = e.ts if t.first_ts is None or e.ts < t.first_ts else t.first_ts
            t.last_ts = e.ts if t.last_ts is None or e.ts > t.last_ts else t.last_ts
    for t in totals.values():
        t.cost_usd = round(t.cost_usd, 6)
        t.cost_by_model = {m: round(c, 6) for m, c in t.cost_by_model.items()}
    return totals


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


def account(project: str, *, write: bool = True, processes: bool = True) -> Result:
    """Bring the project's usage up to date; append a stats row for each session that changed.

    A big pass reads in worker processes when ``processes`` allows it (the CLI); a process
    that runs threads of its own (the MCP server) passes False, and a call made while any other
    thread runs never forks anyway."""
    started = time.perf_counter()
    prices = load_prices()
    state_file = _state_path(project)
    state = _load_state(state_file)
    present: set[str] = set()
    todo: list[tuple[_FileState, Job]] = []
    dirty = not state.files
    for path, session in _files(project):
        key = str(path)
        present.add(key)
        fs = state.files.get(key)
        if fs is None:
            fs = state.files[key] = _FileState(session=session)
            dirty = True
        new = _new_bytes(key, fs)
        if new:
            todo.append((fs, Job(key, fs.session, fs.offset, fs.ino, new, fs.searched)))
    scans, workers = _read([job for _, job in todo], prices, processes)
    done = [(fs, job, scan) for (fs, job), scan in zip(todo, scans) if scan is not None]
    # A file replaced or shrunk since (another inode, or smaller than where we stopped) is read
    # again from 0: first drop what it contributed, all such files in one sweep.
    replaced = {job.path for fs, job, scan in done if scan.start == 0 and fs.offset}
    if replaced:
        for gone in [k for k, e in state.seen.items() if e.file in replaced]:
            del state.seen[gone]
    seen = state.seen
    # A fork copies its parent's lines, responses included: a copy counts once (the key), and
    # where the copies are equal, toward the session where it was said (the fork's ancestor).
    parents = fork_parents(
        (Path(path).stem.lower(), rec) for path, rec in catalog_cache.load(catalog_cache_path(project)).items()
    )
    descendants: dict[str, set[str]] = {}
    for fork in parents:
        for up in ancestors(parents, fork):
            descendants.setdefault(up, set()).add(fork)

    def forks_of(session: str) -> set[str]:
        return descendants.get(session, set())

    files_read = read_bytes = decoded = skipped = 0
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
    # A transcript deleted since (Claude Code's 30-day cleanup) keeps its place in the state:
    # what it spent was spent.
    totals = _totals(state, session_titles(project), time.time())
    changed = []
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
                write_atomic(state_file, msgspec.json.encode(state), fsync=False)
            except OSError:
                pass  # the state is a cache: the next run reads from 0
    return Result(
        totals,
        len(present),
        files_read,
        read_bytes,
        changed,
        time.perf_counter() - started,
        workers=workers,
        bytes_decoded=decoded,
        lines_skipped=skipped,
    )


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


def _read(jobs: list[Job], prices: PriceTable, processes: bool) -> tuple[list[FileScan | None], int]:
    """Read every job: in this process, or, for a big pass, in
    worker processes. Finding markers and decoding hold the GIL, so threads would keep to one
    core. Returns the scans in job order and the number of worker processes used (0: none)."""
    if not (processes and len(jobs) > 1 and sum(job.new for job in jobs) >= PROCESS_MIN_BYTES):
        return [scan for _, scan in read_files(list(enumerate(jobs)), prices)], 0
    with workers.pool(WORKERS) as (pool, n):  # killed, not waited for, on Ctrl-C
        if pool is None:
            return [scan for _, scan in read_files(list(enumerate(jobs)), prices)], 0
        return _read_in(pool, jobs, prices), n


def _read_in(pool: ProcessPoolExecutor, jobs: list[Job], prices: PriceTable) -> list[FileScan | None]:
    """The jobs read by the pool's workers, in hand-offs (see ``_handoffs``), in job order."""
    out: list[FileScan | None] = [None] * len(jobs)
    handoffs = _handoffs(jobs)
    futures = [pool.submit(read_files_packed, h, prices) for h in handoffs]
    broken = False
    for handoff, fut in zip(handoffs, futures):
        if not broken:
            try:
                results = unpack(fut.result())
            except Exception as exc:  # a broken pool (a worker killed, no memory): read here
                log.warning("worker processes failed (%s); reading in this process", exc)
                broken = True
        if broken:
            results = read_files(handoff, prices)
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
