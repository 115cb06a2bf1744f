"""The catalog pipeline for one or many projects: locate, list, read (cached), keep.

Reads run in worker threads, bounded by one ``anyio.CapacityLimiter`` shared across projects.
A file that vanishes or cannot be read mid-scan is left out of that listing (and not cached);
nothing one file does can stop the rest of the listing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..ground import workers
from ..ground.project import Project
from ..ground.safefs import NotRegularFile
from . import cache
from .listing import Candidate, candidates
from .locate import ClaudeRoot, ProjectDirs, folders_under, locate, same_path
from .read import Transcript, read_transcript

__all__ = (
    "NEWEST",
    "Progress",
    "ProjectScan",
    "Session",
    "scan_project",
    "scan_projects",
    "scan_projects_sync",
    "skip_reason",
)

log = logging.getLogger("c3async.catalog")

NEWEST = 200  # transcripts listed per project, as the spec says
READERS = 8  # reads (or chunks of reads) in flight at once: overlap I/O, bound memory
WORKERS = 4  # at most this many worker processes for a big cold scan
PROCESS_MIN = 100  # files to read before worker processes pay for themselves
CHUNK = 16  # files a worker process reads per hand-off
MAX_OTHER_CWDS = 8  # other directories' cwds kept per folder (see ``ProjectScan.other_cwds``)

Progress = Callable[[int, int], None]  # (transcripts done, transcripts to do)


@dataclass(slots=True)
class Session:
    """A catalog row before the joins: a session file and what was read from it."""

    candidate: Candidate
    record: Transcript
    project: str  # the root, as every listing prints it

    @property
    def session_id(self) -> str:
        return self.candidate.session_id


@dataclass(slots=True, repr=False)  # asyncio reprs a task's result: keep that cheap
class ProjectScan:
    project: Project
    dirs: ProjectDirs
    sessions: list[Session] = field(default_factory=list)
    examined: int = 0
    found: int = 0  # transcripts found for the project (the newest ``limit`` of them are read)
    # every one of them, newest first (``examined``: how many of the first were read); the keep
    # pass looks at the older ones' mtimes (Claude Code's cleanup goes by them), never reads them
    candidates: list[Candidate] = field(default_factory=list)
    read: int = 0  # files actually opened (cache misses)
    bytes_read: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    cache_path: Path | None = None
    # sessions of another directory met in this project's folders (two paths sharing a slug):
    # folder -> their cwds, so a listing of every project lists theirs too (``discover.learn``)
    other_cwds: dict[Path, set[str]] = field(default_factory=dict)


def cache_path(project: Project) -> Path:
    """``<state root>/.c3/cache/session_catalog.json``; ``Project.state`` moves it under
    ``$C3_HOME`` with the rest of the state when the root cannot be written."""
    return project.state / "cache" / "session_catalog.json"


def _read_one(cand: Candidate, cached: Transcript | None) -> Transcript | None:
    try:
        return read_transcript(cand.path, cand.size, cand.mtime_ns, cached)
    except FileNotFoundError:
        return None  # deleted since it was listed
    except NotRegularFile as exc:  # replaced by a FIFO, a folder or a symlink since it was listed
        log.info("not reading %s: %s", cand.path, exc.strerror)
        return None
    except OSError as exc:
        log.warning("cannot read %s: %s", cand.path, exc)
        return None
    except Exception:  # a bug in extraction must cost one row, not the listing
        log.exception("failed to read %s", cand.path)
        return None


class _Counter:
    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.done = 0
        self.total = 0

    def add(self, n: int) -> None:
        self.total += n
        if self.progress:
            self.progress(self.done, self.total)

    def tick(self, n: int = 1) -> None:
        self.done += n
        if self.progress:
            self.progress(self.done, self.total)


class _Scanner:
    """One project's listing as a state machine with no I/O of its own beyond stat and cache:
    ``misses()`` says which files must be read, ``feed()`` takes what was read. The drivers
    below do the reading: in worker threads under one limiter (async), or not at all when
    everything is cached, so a cached listing never starts an event loop."""

    def __init__(
        self,
        project: Project,
        limit: int,
        counter: _Counter,
        extra_cwds: tuple[str, ...] = (),
        fallback_root: Path | None = None,
        roots: tuple[ClaudeRoot, ...] | None = None,
    ) -> None:
        self.dirs = locate(project.root, extra_cwds, roots)
        self.limit = limit
        self.counter = counter
        self.cache_file = cache_path(project)
        self.result = ProjectScan(project, dirs=self.dirs, cache_path=self.cache_file)
        self.cands = candidates([folder for folder, _ in self.dirs.folders])
        if fallback_root is not None:  # sessions found only there (deleted from the projects folder)
            held = {c.session_id for c in self.cands}
            more = [
                c
                for c in candidates([f for f, _ in folders_under(fallback_root, self.dirs.cwds)])
                if c.session_id not in held
            ]
            if more:
                self.cands = sorted([*self.cands, *more], key=lambda c: (c.mtime_ns, c.session_id), reverse=True)
        self.result.found = len(self.cands)
        self.result.candidates = self.cands
        self.old = cache.load(self.cache_file) if self.cands else {}
        self.new: dict[str, Transcript] = {}
        self.start = 0
        self.batch: list[Candidate] = []

    def misses(self) -> list[tuple[Candidate, Transcript | None]] | None:
        """The next batch's files to read (maybe none); None when the listing is complete.

        The newest ``limit`` of this project's sessions: files skipped as sidechain,
        metadata-only or another directory's (slugs collide) make room for older ones."""
        result = self.result
        if len(result.sessions) >= self.limit or self.start >= len(self.cands):
            if self.new != self.old:
                cache.save(self.cache_file, self.new)
            return None
        self.batch = self.cands[self.start : self.start + self.limit - len(result.sessions)]
        self.start += len(self.batch)
        self.counter.add(len(self.batch))
        todo = []
        for cand in self.batch:
            prev = self.old.get(cand.path)
            if prev is not None and _unchanged(prev, cand):
                self.new[cand.path] = prev  # unchanged: the stat was the whole cost
            else:
                todo.append((cand, prev))  # the read re-checks the identity before reusing prev
        self.counter.tick(len(self.batch) - len(todo))
        return todo

    def feed(self, read: dict[str, Transcript]) -> None:
        """Take what was read (for every project in the scan) of this scanner's batch."""
        result = self.result
        for cand in self.batch:
            result.examined += 1
            rec = read.get(cand.path)
            if rec is not None:
                result.read += 1
                result.bytes_read += rec.bytes_read
                self.new[cand.path] = rec
            else:
                rec = self.new.get(cand.path)
            reason = skip_reason(rec, self.dirs.cwds)
            if reason is None:
                assert rec is not None  # skip_reason() calls a missing record unreadable
                result.sessions.append(Session(cand, rec, self.dirs.project))
            else:
                result.skipped[reason] = result.skipped.get(reason, 0) + 1
                if reason == "other-cwd" and rec is not None and rec.cwd:
                    met = result.other_cwds.setdefault(cand.folder, set())
                    if len(met) < MAX_OTHER_CWDS:
                        met.add(rec.cwd)


def _unchanged(prev: Transcript, cand: Candidate) -> bool:
    """The cached record is of this very file, unchanged: same size and mtime, and the same
    device and inode (a file replaced at the same path is another file; where the listing has
    no inode, as on Windows, the read compares it instead)."""
    if prev.size != cand.size or prev.mtime_ns != cand.mtime_ns:
        return False
    return not cand.ino or (prev.ino == cand.ino and prev.dev == cand.dev)


def skip_reason(rec: Transcript | None, cwds: tuple[str, ...]) -> str | None:
    """Why a transcript is not a session row of the project whose cwds these are (None: it is):
    unreadable, sidechain, metadata-only, empty, or another directory's (slugs collide)."""
    if rec is None:
        return "unreadable"
    if rec.skip:
        return rec.skip
    if rec.cwd and not any(same_path(rec.cwd, cwd) for cwd in cwds):
        return "other-cwd"
    return None


async def _read_async(todo, limiter, counter: _Counter, pool=None) -> dict[str, Transcript]:
    """Read ``todo`` in worker threads bounded by ``limiter``; with a process ``pool``, each
    thread hands a chunk of files to a worker process instead (see ``scan_projects_sync``)."""
    import anyio

    out: dict[str, Transcript] = {}

    # Abandoned on cancellation (Ctrl-C): a read in flight finishes, or fails when its worker
    # process is killed, in a thread nobody waits for.
    async def one(cand: Candidate, prev: Transcript | None) -> None:
        rec = await anyio.to_thread.run_sync(_read_one, cand, prev, limiter=limiter, abandon_on_cancel=True)
        if rec is not None:
            out[cand.path] = rec
        counter.tick()

    broken: list[Exception] = []

    def in_worker(items):
        if not broken:
            try:
                return pool.submit(_read_chunk, items).result()
            except Exception as exc:  # a broken pool (a worker killed, no memory): read here
                if not broken:
                    log.warning("worker processes failed (%s); reading in this process", exc)
                broken.append(exc)
        return _read_chunk(items)

    async def chunk(items) -> None:
        results = await anyio.to_thread.run_sync(in_worker, items, limiter=limiter, abandon_on_cancel=True)
        out.update((path, rec) for path, rec in results if rec is not None)
        counter.tick(len(items))

    async with anyio.create_task_group() as tg:
        if pool is None:
            for cand, prev in todo:
                tg.start_soon(one, cand, prev)
        else:
            for i in range(0, len(todo), CHUNK):
                tg.start_soon(chunk, todo[i : i + CHUNK])
    return out


def _read_chunk(items) -> list[tuple[str, Transcript | None]]:
    return [(cand.path, _read_one(cand, prev)) for cand, prev in items]


def _steps(scanners: list[_Scanner]):
    """Drive scanners batch by batch: yields the files to read, receives what was read."""
    active = scanners
    while active:
        plans = [(sc, sc.misses()) for sc in active]
        active = [sc for sc, todo in plans if todo is not None]
        todo = [item for _, t in plans if t for item in t]
        read = (yield todo) if todo else {}
        for sc in active:
            sc.feed(read)


async def scan_projects(
    projects: list[Project],
    *,
    limit: int = NEWEST,
    progress: Progress | None = None,
    limiter=None,
    extra_cwds: dict[Project, tuple[str, ...]] | None = None,
    fallback_root: Path | None = None,
    roots: tuple[ClaudeRoot, ...] | None = None,
) -> list[ProjectScan]:
    """List several projects' sessions (each with its worktrees', and ``extra_cwds[project]``:
    folders git no longer lists), newest first, reading every file that needs it in worker
    threads bounded by one ``anyio.CapacityLimiter``. ``fallback_root``: a second tree laid out
    like the projects folder, whose sessions count where the projects folder has none of that id.
    ``roots``: the Claude Code roots to look in (None: ``locate.claude_roots()``)."""
    import anyio

    limiter = limiter or anyio.CapacityLimiter(READERS)
    counter = _Counter(progress)
    scanners = [_Scanner(p, limit, counter, (extra_cwds or {}).get(p, ()), fallback_root, roots) for p in projects]
    steps = _steps(scanners)
    try:
        todo = next(steps)
        while True:
            todo = steps.send(await _read_async(todo, limiter, counter))
    except StopIteration:
        pass
    return [sc.result for sc in scanners]


async def scan_project(project: Project, **kwargs) -> ProjectScan:
    return (await scan_projects([project], **kwargs))[0]


def scan_projects_sync(
    projects: list[Project],
    *,
    limit: int = NEWEST,
    progress: Progress | None = None,
    processes: bool = True,
    extra_cwds: dict[Project, tuple[str, ...]] | None = None,
    fallback_root: Path | None = None,
    roots: tuple[ClaudeRoot, ...] | None = None,
) -> list[ProjectScan]:
    """The same, for a command-line process: when every file is cached, no event loop (and no
    anyio or asyncio import) is needed at all. A big cold scan also uses the other cores:
    finding markers in bytes holds the GIL, so threads alone keep to one core (measured: 8
    threads were no faster than 1), while forked worker processes do not. A long-running
    process with threads of its own (the MCP server) passes ``processes=False``."""
    from contextlib import ExitStack

    counter = _Counter(progress)
    scanners = [_Scanner(p, limit, counter, (extra_cwds or {}).get(p, ()), fallback_root, roots) for p in projects]
    steps = _steps(scanners)
    pool = None
    asked = False
    with ExitStack() as stack:  # the pool (if any) is killed, not waited for, on Ctrl-C
        try:
            todo = next(steps)
            import anyio

            limiter = anyio.CapacityLimiter(READERS)
            while True:
                if processes and not asked and len(todo) >= PROCESS_MIN:
                    # forked now, from this thread, before any reader thread exists (see workers)
                    pool, asked = stack.enter_context(workers.pool(WORKERS))[0], True
                todo = steps.send(anyio.run(_read_async, todo, limiter, counter, pool))
        except StopIteration:
            pass
    return [sc.result for sc in scanners]
