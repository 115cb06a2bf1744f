"""The catalog pipeline for one or many projects: locate, list, read (cached), keep.

Reads run in worker threads, bounded by one ``anyio.CapacityLimiter`` shared across projects.
A file that vanishes or cannot be read mid-scan is left out of that listing (and not cached);
nothing one file does can stop the rest of the listing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from ..paths import c3_home, project_state
from . import cache
from .listing import Candidate, candidates
from .locate import ProjectDirs, locate, same_path, slug
from .read import Transcript, read_transcript

__all__ = ("NEWEST", "ProjectScan", "Progress", "Session", "scan_project", "scan_projects")

log = logging.getLogger("c3async.catalog")

NEWEST = 200  # transcripts listed per project, as the spec says
READERS = 8  # reads in flight at once: enough to overlap I/O, few enough to bound memory

Progress = Callable[[int, int], None]  # (transcripts done, transcripts to do)


@dataclass(slots=True)
class Session:
    """A catalog row before the joins: a session file and what was read from it."""

    candidate: Candidate
    record: Transcript
    project: str

    @property
    def session_id(self) -> str:
        return self.candidate.session_id


@dataclass(slots=True)
class ProjectScan:
    dirs: ProjectDirs
    sessions: list[Session] = field(default_factory=list)
    examined: int = 0
    read: int = 0  # files actually opened (cache misses)
    bytes_read: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    cache_path: Path | None = None


def cache_path(project: str) -> Path:
    """``<project>/.c3/cache/session_catalog.json``, or under ``$C3_HOME`` when the project
    folder cannot be written (a read-only checkout, or a path from another machine)."""
    if os.path.isdir(project) and os.access(project, os.W_OK):
        return project_state(project) / "cache" / "session_catalog.json"
    return c3_home() / "cache" / slug(project)[:120] / "session_catalog.json"


def _read_one(cand: Candidate, cached: Transcript | None) -> Transcript | None:
    try:
        return read_transcript(cand.path, cand.size, cand.mtime_ns, cached)
    except FileNotFoundError:
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

    def tick(self) -> None:
        self.done += 1
        if self.progress:
            self.progress(self.done, self.total)


async def _scan(project: str, limit: int, limiter: anyio.CapacityLimiter, counter: _Counter) -> ProjectScan:
    dirs = locate(project)
    result = ProjectScan(dirs=dirs, cache_path=cache_path(dirs.project))
    cands = candidates([folder for folder, _ in dirs.folders])
    old = cache.load(result.cache_path) if cands else {}
    new: dict[str, Transcript] = {}
    counter.add(min(len(cands), limit))

    async def read(cand: Candidate) -> None:
        prev = old.get(cand.path)
        if prev is not None and prev.size == cand.size and prev.mtime_ns == cand.mtime_ns:
            new[cand.path] = prev
        else:
            rec = await anyio.to_thread.run_sync(_read_one, cand, prev, limiter=limiter)
            if rec is not None:
                new[cand.path] = rec
                result.read += 1
                result.bytes_read += rec.bytes_read
        counter.tick()

    # The newest `limit` of this project's sessions: files skipped as sidechain, metadata-only or
    # another directory's (slugs collide) make room for older ones.
    start = 0
    while len(result.sessions) < limit and start < len(cands):
        batch = cands[start : start + limit - len(result.sessions)]
        if start:
            counter.add(len(batch))
        start += len(batch)
        async with anyio.create_task_group() as tg:
            for cand in batch:
                tg.start_soon(read, cand)
        for cand in batch:
            result.examined += 1
            rec = new.get(cand.path)
            reason = _skip_reason(rec, dirs)
            if reason is None:
                result.sessions.append(Session(cand, rec, dirs.project))
            else:
                result.skipped[reason] = result.skipped.get(reason, 0) + 1
    if new != old:
        cache.save(result.cache_path, new)
    return result


def _skip_reason(rec: Transcript | None, dirs: ProjectDirs) -> str | None:
    if rec is None:
        return "unreadable"
    if rec.skip:
        return rec.skip
    if rec.cwd and not any(same_path(rec.cwd, cwd) for cwd in dirs.cwds):
        return "other-cwd"
    return None


async def scan_project(
    project: str, *, limit: int = NEWEST, progress: Progress | None = None,
    limiter: anyio.CapacityLimiter | None = None,
) -> ProjectScan:
    """List one project's sessions (and its worktrees'), newest first."""
    limiter = limiter or anyio.CapacityLimiter(READERS)
    return await _scan(project, limit, limiter, _Counter(progress))


async def scan_projects(
    projects: list[str], *, limit: int = NEWEST, progress: Progress | None = None
) -> list[ProjectScan]:
    """Several projects at once, sharing one reader limit and one progress count."""
    limiter = anyio.CapacityLimiter(READERS)
    counter = _Counter(progress)
    results: list[ProjectScan | None] = [None] * len(projects)

    async def one(i: int, project: str) -> None:
        results[i] = await _scan(project, limit, limiter, counter)

    async with anyio.create_task_group() as tg:
        for i, project in enumerate(projects):
            tg.start_soon(one, i, project)
    return [r for r in results if r is not None]
