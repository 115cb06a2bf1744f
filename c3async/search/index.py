"""Keeping the index current: only the bytes appended since the last pass are indexed.

Every transcript of every project (Claude Code's ``projects/*/`` folders: sessions, their
sub-agents' files, legacy ``agent-*.jsonl``) is compared with what the index last saw: an
unchanged file costs one ``lstat``; a grown one is read from where indexing stopped; one that
shrank, was replaced (another inode) or rewritten (the bytes before the offset differ) loses its
passages and is read again from 0; a deleted one loses its passages. Nothing to do takes no lock
and writes nothing.

Writing is one process at a time, under ``index.lock``: a process that finds it held does not
wait; its search answers from what is indexed and says an update is under way (``Status``). A
big pass (a first build) forks a worker per shard, as the cold catalog scan does, and reports
progress (bytes read of bytes to read) to its caller and to ``progress.json`` for other
processes (the Hub shows it). Each shard commits every ``COMMIT_BYTES`` read, so what was
indexed is searchable during a build and survives an interrupted one; a full disk or a locked
database stops that shard's pass with what it had (the next pass goes on from there), and says
so (``store.failure``): only a damaged file is put aside and rebuilt.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec

from ..catalog.listing import transcript_files
from ..ground import clock, safefs
from ..ground.errors import DECODE_ERRORS, C3Error, DamagedIndex, UnsafeState
from ..ground.locking import try_locked
from . import store
from .passages import TOOL, FileRead, Job, Passage, read_files

__all__ = (
    "Status",
    "Update",
    "lock_path",
    "progress_status",
    "rebuild",
    "scan_files",
    "size",
    "stop_background",
    "update",
)

log = logging.getLogger("c3async.search")

PROCESS_MIN_BYTES = 64 * 1024 * 1024  # new bytes before worker processes pay for themselves
COMMIT_BYTES = 64 * 1024 * 1024
HANDOFF_FILES = 64
PROGRESS_EVERY_S = 0.25

Progress = Callable[[int, int], None]


class Seen(msgspec.Struct):
    """A transcript as the walk found it."""

    path: str
    folder: str
    session: str | None
    sidechain: bool
    ino: int
    size: int
    mtime_ns: int


COMPACTION = "agent-acompact"  # Claude Code's compaction runs as a sub-agent of this name


def _indexed(path: str) -> bool:
    """Is this transcript conversation? A compaction sub-agent's file is Claude Code's own
    prompt and the summary it wrote (the summary still marks the compaction in the session's
    transcript): searched, it would match every compacted session."""
    return not os.path.basename(path).startswith(COMPACTION)


def scan_files() -> dict[str, Seen]:
    """Every transcript under the projects folder of every Claude Code root, one ``lstat`` each."""
    from ..stores.claude_dirs import roots

    tops = [r.projects for r in roots()]
    out: dict[str, Seen] = {}
    folders: list[os.DirEntry[str]] = []
    for top in tops:
        try:
            with os.scandir(top) as it:
                folders += [e for e in it if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
    for f in folders:
        for path, session, st in transcript_files(f.path):
            if not _indexed(path):
                continue
            sidechain = session is None or os.path.dirname(path) != f.path
            out[path] = Seen(
                path, f.name, session, sidechain, st.st_ino, st.st_size, clock.file_ns(st.st_mtime_ns, path)
            )
    _archived(tops, out)
    return out


def _archived(tops: list[Path], out: dict[str, Seen]) -> None:
    """Kept transcripts Claude Code deleted: indexed from the archive (one that is still in
    its folder is indexed there, never twice)."""
    from ..stores.archive import usable as archive_usable

    base = archive_usable()
    if base is None:
        return
    try:
        with os.scandir(base) as it:
            folders = [e for e in it if e.is_dir(follow_symlinks=False)]
    except OSError:
        return
    for f in folders:
        for path, session, st in transcript_files(f.path):
            if not _indexed(path):
                continue
            rel = os.path.relpath(path, f.path)
            if any(os.path.join(top, f.name, rel) in out for top in tops):
                continue
            sidechain = session is None or os.path.dirname(path) != f.path
            out[path] = Seen(
                path, f.name, session, sidechain, st.st_ino, st.st_size, clock.file_ns(st.st_mtime_ns, path)
            )


class Update(msgspec.Struct):
    """What one pass did."""

    files: int = 0  # transcripts known after the pass
    read: int = 0  # files read (new bytes)
    dropped: int = 0  # files whose passages were dropped (deleted, replaced)
    bytes_read: int = 0
    passages: int = 0
    skipped_lines: int = 0
    seconds: float = 0.0
    workers: int = 0
    busy: bool = False  # another process holds the lock: nothing was done here
    pending_bytes: int = 0  # bytes left to index (busy, or stopped by an error)
    errors: list[str] = msgspec.field(default_factory=list)


class _Plan(msgspec.Struct):
    jobs: dict[int, list[tuple[Job, Seen]]]
    gone: dict[int, list[int]]  # file ids to drop, per shard
    new_bytes: int


def lock_path() -> Path:
    return store.index_dir() / "index"


def _progress_path() -> Path:
    return store.index_dir() / "progress.json"


def _plan(seen: dict[str, Seen], known: list[dict[str, store.FileRow]]) -> _Plan:
    jobs: dict[int, list[tuple[Job, Seen]]] = {}
    gone: dict[int, list[int]] = {}
    new_bytes = 0
    for k, rows in enumerate(known):
        for path, row in rows.items():
            if path not in seen or store.shard_of(path) != k:
                gone.setdefault(k, []).append(row.id)
    for path, s in seen.items():
        k = store.shard_of(path)
        known_row = known[k].get(path)
        if known_row is not None and known_row.ino == s.ino and known_row.size == s.size:
            if known_row.mtime_ns == s.mtime_ns:
                continue  # unchanged
            known_row = None  # the same size but written since: rewritten in place (appends grow it)
        if known_row is not None and known_row.ino == s.ino and s.size >= known_row.offset:
            o = known_row.offset
            new = s.size - max(o, known_row.searched)  # an unterminated giant line: from where it was left
            job = Job(path, s.session, s.sidechain, o, known_row.ino, known_row.tail, new, known_row.searched)
        else:
            job = Job(path, s.session, s.sidechain, 0, 0, b"", s.size)
        new_bytes += job.new
        jobs.setdefault(k, []).append((job, s))
    return _Plan(jobs, gone, new_bytes)


def _add_rebuilds(
    plan: _Plan, seen: dict[str, Seen], known: list[dict[str, store.FileRow]], counts: list[tuple[int, int]]
) -> None:
    """Count the bytes of a shard that this pass will likely empty and index again (its dead
    passages past the threshold ``_write_shard`` uses), so a door that must answer now starts
    that work in the background instead of doing it in its thread."""
    for k, (dead, live) in enumerate(counts):
        rows = known[k]
        dropped = len(plan.gone.get(k, ())) + sum(
            1 for j, _ in plan.jobs.get(k, ()) if j.offset == 0 and j.path in rows
        )
        if not rows or dead + live * dropped // len(rows) <= max(10_000, live // 3):
            continue
        queued = {j.path for j, _ in plan.jobs.get(k, ())}
        plan.new_bytes += sum(s.size for p, s in seen.items() if p in rows and p not in queued)


def _known(create: bool, counts: list[tuple[int, int]] | None = None) -> list[dict[str, store.FileRow]]:
    """Every shard's files; a shard that is damaged or foreign is removed (we hold the lock when
    ``create``) and counts as empty, so its transcripts are indexed again. ``counts``: filled
    with each shard's (dead, live) passages."""
    out: list[dict[str, store.FileRow]] = []
    for k in range(store.SHARDS):
        try:
            conn = store.connect(k, create=create)
        except DamagedIndex as exc:
            if not create:
                raise
            log.warning("%s; rebuilding it", exc)
            store.remove(k)
            conn = store.connect(k, create=True)
        if conn is None:
            out.append({})
            continue
        try:
            out.append(store.files(conn))
            if counts is not None:
                dead = conn.execute("SELECT value FROM meta WHERE key='dead'").fetchone()[0]
                counts.append((int(dead), conn.execute("SELECT count(*) FROM passages").fetchone()[0]))
        except sqlite3.DatabaseError as exc:
            conn.close()
            why = store.failure(store.shard_path(k), exc)
            if not create or not isinstance(why, DamagedIndex):
                raise why from None
            log.warning("%s; rebuilding it", why)
            store.remove(k)
            out.append({})
            store.connect(k, create=True)
        else:
            conn.close()
    return out


def update(
    *, progress: Progress | None = None, processes: bool = True, inline_max: int | None = None, wait: float = 0.0
) -> Update:
    """Bring the index up to date (see the module's docstring). ``inline_max``: with more new
    bytes than this, start ``c3async index`` in the background instead and return at once
    (``busy``), for a process that has threads and must answer now. ``wait``: seconds to wait
    for another updater (a small update of its own soon done) before answering without."""
    started = time.perf_counter()
    store.check_fts5()
    _clear_asides()
    seen = scan_files()
    result = Update(files=len(seen))
    stamp = _stamp(seen)
    if stamp == _last_stamp():  # nothing changed since the last pass: no database opened
        result.seconds = time.perf_counter() - started
        return result
    try:
        counts: list[tuple[int, int]] = []
        known = _known(create=False, counts=counts)
        plan = _plan(seen, known)
        _add_rebuilds(plan, seen, known, counts)
    except DamagedIndex:
        plan = None  # repaired below, under the lock
    if plan is not None and not plan.jobs and not plan.gone:
        _save_stamp(stamp)
        result.seconds = time.perf_counter() - started
        return result
    if inline_max is not None and (plan is None or plan.new_bytes > inline_max):
        result.busy = True
        result.pending_bytes = plan.new_bytes if plan is not None else 0
        if not progress_status().updating:
            _spawn()
        return result
    with _lock_within(wait) as got:
        if not got:
            result.busy = True
            result.pending_bytes = plan.new_bytes if plan is not None else 0
            return result
        plan = _plan(seen, _known(create=True))  # again: the last holder may have done it
        _run(plan, result, progress, processes)
        if not result.errors and not result.pending_bytes:
            _save_stamp(stamp)
    result.seconds = time.perf_counter() - started
    return result


def _clear_asides() -> None:
    """Copies of damaged shards that earlier runs put aside go (whoever takes the lock first)."""
    if store.asides():
        with try_locked(lock_path()) as got:
            if got:
                store.clear_asides()


@contextmanager
def _lock_within(wait: float) -> Iterator[bool]:
    deadline = time.monotonic() + wait
    while True:
        with try_locked(lock_path()) as got:
            if got or time.monotonic() >= deadline:
                yield got
                return
        time.sleep(0.05)


def _stamp(seen: dict[str, Seen]) -> str:
    """What every transcript looked like (path, inode, size, mtime), in a few bytes."""
    import zlib

    crc = 0
    for path in sorted(seen):
        s = seen[path]
        crc = zlib.crc32(f"{path}\0{s.ino}\0{s.size}\0{s.mtime_ns}\n".encode("utf-8", "surrogateescape"), crc)
    return f"{store.SCHEMA_VERSION}:{len(seen)}:{crc:08x}"


def _stamp_path() -> Path:
    return store.index_dir() / "stamp"


def _last_stamp() -> str | None:
    try:
        return safefs.read_bytes(_stamp_path(), limit=256).decode("ascii", "replace")
    except (OSError, UnsafeState):
        return None


def _save_stamp(stamp: str) -> None:
    try:
        safefs.write_atomic(_stamp_path(), stamp.encode(), fsync=False, mode=0o600)
    except OSError:
        pass  # a cache: the next search compares with the databases instead


def forget_stamp() -> None:
    """Make the next ``update`` look at the databases (one was found damaged)."""
    try:
        safefs.unlink(_stamp_path())
    except OSError:
        pass


def rebuild(*, progress: Progress | None = None) -> Update:
    """Drop the index and build it again (waits for the lock: this was asked for)."""
    from ..ground.locking import locked

    with locked(lock_path()):
        forget_stamp()
        store.clear_asides()
        for k in range(store.SHARDS):
            store.remove(k, aside=False)
    return update(progress=progress)


def size() -> int:
    """Bytes the index takes on disk (its databases and their WAL files)."""
    total = 0
    for k in range(store.SHARDS):
        for suffix in ("", "-wal"):
            try:
                total += os.lstat(f"{store.shard_path(k)}{suffix}").st_size
            except OSError:
                pass
    return total


def _run(plan: _Plan, result: Update, progress: Progress | None, processes: bool) -> None:
    shards = sorted(set(plan.jobs) | set(plan.gone), key=lambda k: -sum(j.new for j, _ in plan.jobs.get(k, [])))
    from contextlib import ExitStack

    tracker = _Tracker(plan.new_bytes, progress)
    pool, n = (None, 0)
    with ExitStack() as stack:  # the pool (if any) is killed on Ctrl-C: SQLite rolls its shards back
        stack.callback(tracker.close)
        if processes and plan.new_bytes >= PROCESS_MIN_BYTES and len(shards) > 1:
            from ..ground import workers

            _SHARED.reset(store.SHARDS)  # before the fork: the workers must inherit it
            pool, n = stack.enter_context(workers.pool(min(len(shards), store.SHARDS)))
        if pool is None:
            for k in shards:
                _merge(result, _update_shard(k, plan.jobs.get(k, []), plan.gone.get(k, []), tracker.local))
        else:
            result.workers = n
            futures = [pool.submit(_update_shard_packed, k, plan.jobs.get(k, []), plan.gone.get(k, [])) for k in shards]
            pending = set(futures)
            from concurrent.futures import FIRST_COMPLETED, wait

            while pending:
                _, pending = wait(pending, timeout=PROGRESS_EVERY_S, return_when=FIRST_COMPLETED)
                tracker.shared(_SHARED.total())
            for k, f in zip(shards, futures, strict=True):
                try:
                    _merge(result, _unpack(f.result()))
                except Exception as exc:  # a worker died: that shard is done here
                    log.warning("an index worker failed (%s); indexing shard %d here", exc, k)
                    _merge(result, _update_shard(k, plan.jobs.get(k, []), plan.gone.get(k, []), tracker.local))


def _merge(result: Update, part: _ShardResult) -> None:
    result.read += part.read
    result.dropped += part.dropped
    result.bytes_read += part.bytes_read
    result.passages += part.passages
    result.skipped_lines += part.skipped
    result.pending_bytes += part.pending
    said = {_gist(e) for e in result.errors}
    result.errors += [e for e in part.errors if _gist(e) not in said]  # a full disk: said once, not per shard


def _gist(error: str) -> str:
    """An error without the free space it reports (which differs a little from shard to shard)."""
    return error.removeprefix("indexing stopped: ").partition(" is full")[0]


class _ShardResult(msgspec.Struct):
    read: int = 0
    dropped: int = 0
    bytes_read: int = 0
    passages: int = 0
    skipped: int = 0
    pending: int = 0
    errors: list[str] = msgspec.field(default_factory=list)


class _Shared:
    """Bytes read so far by each worker, in shared memory made before the workers fork."""

    def __init__(self) -> None:
        self.array = None

    def reset(self, n: int) -> None:
        import multiprocessing

        self.array = multiprocessing.get_context("fork").RawArray("q", n)

    def add(self, k: int, n: int) -> None:
        if self.array is not None:
            self.array[k] += n

    def total(self) -> int:
        return sum(self.array) if self.array is not None else 0


_SHARED = _Shared()


class _Tracker:
    """Progress to the caller and, for other processes, to ``progress.json``."""

    def __init__(self, total: int, progress: Progress | None) -> None:
        self.total, self.progress, self.done, self.last = total, progress, 0, 0.0
        self.started = time.time()
        self.written = False

    def local(self, k: int, n: int) -> None:
        self.done += n
        self._report(self.done)

    def shared(self, done: int) -> None:
        self._report(done)

    def _report(self, done: int) -> None:
        if self.progress is not None:
            self.progress(done, self.total)
        now = time.monotonic()
        if self.total >= PROCESS_MIN_BYTES and now - self.last >= PROGRESS_EVERY_S:
            self.last = now
            doc = {"pid": os.getpid(), "started": self.started, "done": done, "total": self.total}
            try:
                safefs.write_atomic(_progress_path(), msgspec.json.encode(doc), fsync=False, mode=0o600)
                self.written = True
            except OSError:
                pass

    def close(self) -> None:
        if self.written:
            try:
                safefs.unlink(_progress_path())
            except OSError:
                pass


_spawned: list[Any] = []  # subprocess.Popen
STOP_WAIT_S = 0.3  # for a background indexer to end on SIGTERM before it is killed


def _spawn() -> None:
    """``c3async index`` as a process of its own (it may fork workers; this process may not),
    detached from our stdio: an MCP server's stdout is its protocol. ``-P``: the folder this
    process runs in (a cloned repository, for a server) is never on its path."""
    import subprocess
    import sys

    _spawned[:] = [p for p in _spawned if p.poll() is None]  # reap the ones that finished
    if _spawned:
        return
    try:
        _spawned.append(
            subprocess.Popen(
                [sys.executable, "-P", "-m", "c3async", "index", "--quiet"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        )
    except OSError as exc:
        log.warning("cannot start the background indexer: %s", exc)


def stop_background() -> None:
    """End the ``c3async index`` this process started, if it still runs (the Hub or the server
    is stopping: nothing of theirs is left running). It stops within a second, its shards
    rolled back to what it committed; the next update goes on from there."""
    import signal
    import subprocess

    for proc in _spawned:
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
                proc.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()  # its shards roll back to what it committed
                proc.wait()
            except OSError:
                pass
    _spawned.clear()


class Status(msgspec.Struct):
    """What a reader can say about the index while someone else updates it."""

    updating: bool
    done: int = 0
    total: int = 0


def progress_status() -> Status:
    """Is a big update (a first build) under way in a live process, and how far has it got?
    Read from ``progress.json`` alone: polling it never takes the index lock from an updater."""
    try:
        doc = msgspec.json.decode(safefs.read_bytes(_progress_path(), limit=4096))
        pid, done, total = int(doc["pid"]), int(doc["done"]), int(doc["total"])
    except (OSError, *DECODE_ERRORS, KeyError, TypeError, ValueError):
        return Status(False)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return Status(False)  # left by a process that died
    except OSError:
        pass  # alive, another account's
    return Status(True, done, total)


def _update_shard_packed(k: int, jobs: list[tuple[Job, Seen]], gone: list[int]) -> bytes:
    return msgspec.msgpack.encode(_update_shard(k, jobs, gone, _SHARED.add))


def _unpack(data: bytes) -> _ShardResult:
    return msgspec.msgpack.decode(data, type=_ShardResult)


def _update_shard(
    k: int, jobs: list[tuple[Job, Seen]], gone: list[int], report: Callable[[int, int], None]
) -> _ShardResult:
    out = _ShardResult()
    try:
        conn = store.connect(k, create=True)
        assert conn is not None
    except (C3Error, OSError) as exc:
        out.errors.append(str(exc))
        out.pending = sum(j.new for j, _ in jobs)
        return out
    try:
        _write_shard(conn, jobs, gone, report, out)
    except sqlite3.Error as exc:  # a full disk, a lock held too long: keep what was committed
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # closing rolls back too
        out.errors.append(f"indexing stopped: {store.failure(store.shard_path(k), exc, 'written')}")
    finally:
        conn.close()
    return out


def _write_shard(
    conn: sqlite3.Connection,
    jobs: list[tuple[Job, Seen]],
    gone: list[int],
    report: Callable[[int, int], None],
    out: _ShardResult,
) -> None:
    k = store.shard_of(jobs[0][0].path) if jobs else -1
    conn.execute("BEGIN IMMEDIATE")
    dead = _drop(conn, gone)
    out.dropped += len(gone)
    live = conn.execute("SELECT count(*) FROM passages").fetchone()[0]
    dead_before = conn.execute("SELECT value FROM meta WHERE key='dead'").fetchone()[0]
    known = store.files(conn)
    replaced = [known[j.path].id for j, _ in jobs if j.offset == 0 and j.path in known and known[j.path].offset]
    dead += _drop(conn, replaced, keep_file=True)
    if dead_before + dead > max(10_000, live // 3):
        # Too many dead index entries: empty the shard and index every file again from 0.
        conn.execute("INSERT INTO fts(fts) VALUES('delete-all')")
        conn.execute("DELETE FROM passages")
        conn.execute("DELETE FROM edits")
        conn.execute("DELETE FROM blobs")
        conn.execute("UPDATE files SET offset=0, size=-1, mtime_ns=0, ino=0, tail=x'', searched=0")
        dead, dead_before = 0, 0
        known = store.files(conn)
        jobs = [(Job(j.path, j.session, j.sidechain, 0, 0, b"", s.size), s) for j, s in jobs]
        have = {j.path for j, _ in jobs}
        for row in known.values():  # the unchanged files, read again too
            if row.path not in have:
                s = _seen_of(conn, row)
                jobs.append((Job(row.path, row.session, s.sidechain, 0, 0, b"", s.size), s))
    conn.execute("UPDATE meta SET value=? WHERE key='dead'", (dead_before + dead,))
    blobs = _Blobs(conn)
    since_commit = 0
    for i in range(0, len(jobs), HANDOFF_FILES):
        batch = jobs[i : i + HANDOFF_FILES]
        for (job, seen), (_, found) in zip(batch, read_files([(n, j) for n, (j, _) in enumerate(batch)]), strict=True):
            if found is None:
                out.pending += job.new
                continue
            _store(conn, known, job, seen, found, blobs)
            out.read += 1
            out.bytes_read += found.bytes_read
            out.passages += len(found.passages)
            out.skipped += found.skipped
            since_commit += found.bytes_read
            report(k, found.bytes_read)
        if since_commit >= COMMIT_BYTES:
            conn.execute("COMMIT")
            conn.execute("BEGIN IMMEDIATE")
            since_commit = 0
    conn.execute("COMMIT")


def _seen_of(conn: sqlite3.Connection, row: store.FileRow) -> Seen:
    folder, sidechain = conn.execute("SELECT folder, sidechain FROM files WHERE id=?", (row.id,)).fetchone()
    try:
        st = os.lstat(row.path)
        mtime_ns = clock.file_ns(st.st_mtime_ns, row.path)  # SQLite's INTEGER holds 64 bits
        return Seen(row.path, folder, row.session, bool(sidechain), st.st_ino, st.st_size, mtime_ns)
    except OSError:
        return Seen(row.path, folder, row.session, bool(sidechain), 0, 0, 0)


def _drop(conn: sqlite3.Connection, ids: list[int], keep_file: bool = False) -> int:
    """Drop these files' passages (their index entries become dead); returns how many."""
    dead = 0
    for fid in ids:
        dead += conn.execute("DELETE FROM passages WHERE file=?", (fid,)).rowcount
        conn.execute("DELETE FROM edits WHERE file=?", (fid,))
        if not keep_file:
            conn.execute("DELETE FROM files WHERE id=?", (fid,))
    return dead


def _store(
    conn: sqlite3.Connection, known: dict[str, store.FileRow], job: Job, seen: Seen, found: FileRead, blobs: _Blobs
) -> None:
    row = known.get(job.path)
    if row is not None and found.start == 0 and row.offset:  # rewritten in place: read again from 0
        dead = conn.execute("DELETE FROM passages WHERE file=?", (row.id,)).rowcount
        conn.execute("DELETE FROM edits WHERE file=?", (row.id,))
        conn.execute("UPDATE meta SET value=value+? WHERE key='dead'", (dead,))
    session = job.session or found.session
    if row is None:
        fid: int = (
            conn.execute(
                "INSERT INTO files(path, folder, session, sidechain, ino, size, mtime_ns, offset, tail, skipped, cwd,"
                " custom_title, ai_title, first_prompt, last_ts, last_branch, searched, agent_name)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    job.path,
                    seen.folder,
                    session,
                    int(job.sidechain),
                    found.ino,
                    seen.size,
                    seen.mtime_ns,
                    found.offset,
                    found.check,
                    found.skipped,
                    found.cwd,
                    found.custom_title,
                    found.ai_title,
                    found.first_prompt,
                    found.last_ts,
                    found.last_branch,
                    found.searched,
                    found.agent_name,
                ),
            ).lastrowid
            or 0
        )
        known[job.path] = store.FileRow(
            fid, job.path, session, found.ino, seen.size, seen.mtime_ns, found.offset, found.check, found.searched
        )
    else:
        fid = row.id
        fresh = found.start == 0
        conn.execute(
            "UPDATE files SET session=?, ino=?, size=?, mtime_ns=?, offset=?, tail=?, searched=?,"
            " skipped=CASE WHEN ? THEN ? ELSE skipped+? END,"
            " cwd=CASE WHEN ? THEN ? ELSE coalesce(cwd, ?) END,"
            " custom_title=coalesce(?, CASE WHEN ? THEN NULL ELSE custom_title END),"
            " ai_title=coalesce(?, CASE WHEN ? THEN NULL ELSE ai_title END),"
            " agent_name=coalesce(?, CASE WHEN ? THEN NULL ELSE agent_name END),"
            " first_prompt=CASE WHEN ? THEN ? ELSE coalesce(first_prompt, ?) END,"
            " last_ts=coalesce(?, CASE WHEN ? THEN NULL ELSE last_ts END),"
            " last_branch=coalesce(?, CASE WHEN ? THEN NULL ELSE last_branch END) WHERE id=?",
            (
                session,
                found.ino,
                seen.size,
                seen.mtime_ns,
                found.offset,
                found.check,
                found.searched,
                fresh,
                found.skipped,
                found.skipped,
                fresh,
                found.cwd,
                found.cwd,
                found.custom_title,
                fresh,
                found.ai_title,
                fresh,
                found.agent_name,
                fresh,
                fresh,
                found.first_prompt,
                found.first_prompt,
                found.last_ts,
                fresh,
                found.last_branch,
                fresh,
                fid,
            ),
        )
        row.ino, row.size, row.mtime_ns = found.ino, seen.size, seen.mtime_ns
        row.offset, row.tail, row.searched = found.offset, found.check, found.searched
    if found.edits:  # added to what earlier passes found in this file
        conn.executemany(
            "INSERT INTO edits(file, path, count, tools, first_ts, last_ts) VALUES (?,?,?,?,?,?)"
            " ON CONFLICT(path, file) DO UPDATE SET count=count+excluded.count, tools=tools|excluded.tools,"
            " first_ts=coalesce(min(first_ts, excluded.first_ts), first_ts, excluded.first_ts),"
            " last_ts=coalesce(max(last_ts, excluded.last_ts), last_ts, excluded.last_ts)",
            [(fid, e.path, e.count, e.tools, e.first_ts, e.last_ts) for e in found.edits],
        )
    if found.passages:
        conn.executemany(
            "INSERT INTO passages(file, blob, offset, length, kind, sidechain, ts, branch) VALUES (?,?,?,?,?,?,?,?)",
            [(fid, blobs.id(p), p.offset, p.length, p.kind, int(p.sidechain), p.ts, p.branch) for p in found.passages],
        )
        blobs.flush()


class _Blobs:
    """Distinct texts: the FTS row of each (its rowid), indexed the first time it is seen."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.known: dict[bytes, int] = {}
        self.next = (conn.execute("SELECT max(id) FROM blobs").fetchone()[0] or 0) + 1
        self.next = max(self.next, (conn.execute("SELECT max(rowid) FROM fts").fetchone()[0] or 0) + 1)
        self.new_rows: list[tuple[int, bytes]] = []
        self.new_text: list[tuple[int, str | None, str | None]] = []

    def id(self, p: Passage) -> int:
        import hashlib  # here: a search that writes nothing never loads OpenSSL

        text = p.text
        key = hashlib.blake2b(
            text.encode("utf-8", "surrogatepass"), digest_size=16, person=_PERSON[p.kind == TOOL]
        ).digest()
        bid = self.known.get(key)
        if bid is None:
            row = self.conn.execute("SELECT id FROM blobs WHERE hash=?", (key,)).fetchone()
            if row is not None:
                bid = row[0]
            else:
                bid = self.next
                self.next += 1
                self.new_rows.append((bid, key))
                self.new_text.append((bid, None, text) if p.kind == TOOL else (bid, text, None))
            self.known[key] = bid
        return bid

    def flush(self) -> None:
        if self.new_rows:
            self.conn.executemany("INSERT INTO blobs VALUES (?,?)", self.new_rows)
            self.conn.executemany("INSERT INTO fts(rowid, talk, tool) VALUES (?,?,?)", self.new_text)
            self.new_rows, self.new_text = [], []


_PERSON = (b"talk", b"tool")  # the same text said, and printed by a tool, are two index rows
