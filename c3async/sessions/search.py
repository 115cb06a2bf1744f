"""Full-text search as the three doors ask it: bring the index up to date, query it, and give
each session found its project, age and resume command.

A door with threads of its own (the MCP server, the Hub) cannot fork workers and must answer
promptly: when more than ``INLINE_BYTES`` wait to be indexed (a first build), it starts
``c3async index`` in the background and answers from what is indexed, saying how far the
build has got. The CLI builds in the foreground, with progress on a terminal.
"""

from __future__ import annotations

import os
import re
import shlex
import time
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

import msgspec

from ..catalog import moves
from ..catalog.locate import config_home, folders_under, locate
from ..ground import memo
from ..ground.errors import BadArgument
from ..ground.project import Project
from ..search import index
from ..search.find import Filters, Hit, find
from ..search.passages import KINDS
from ..search.query import parse
from ..stores import archive, claude_dirs
from .resume import ago, resume_command

__all__ = ("INLINE_BYTES", "IndexState", "Result", "SearchResult", "parse_when", "search")

INLINE_BYTES = 32 * 1024 * 1024  # more than this to index: a threaded door builds in the background
WAIT_S = 2.0  # for another process's update to end before answering from what is indexed
MAX_LIMIT = 200


class Result(Hit, kw_only=True):
    project: str  # the project the session belongs to (its repository's main checkout)
    age: str
    resume: str


class IndexState(msgspec.Struct):
    files: int  # transcripts known
    updating: bool = False  # another process is indexing now
    done_bytes: int = 0
    total_bytes: int = 0
    pending_bytes: int = 0  # not yet searchable
    indexed_now: int = 0  # files this call indexed
    seconds: float = 0.0


class SearchResult(msgspec.Struct):
    query: str
    results: list[Result]
    total: int  # sessions that matched (results holds the first ``limit``)
    index: IndexState
    problems: list[str] = msgspec.field(default_factory=list)
    seconds: float = 0.0


_AGO = re.compile(r"(\d+)\s*([mhdw])")
_UNIT = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_LAST = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()  # the last time a date can name


def parse_when(value: str | None, what: str) -> int | None:
    """``7d``, ``12h``, ``30m``, ``2w`` ago, or a date ``2026-11-01`` (UTC), in epoch seconds, from
    1970 to the year 9999; anything else is a BadArgument naming ``what``."""
    if value is None or value == "":
        return None
    v = value.strip()
    m = _AGO.fullmatch(v)
    if m:
        digits = m.group(1)  # more than 12 would be before 1970 anyway (and int() refuses 4,300)
        when = int(time.time()) - int(digits) * _UNIT[m.group(2)] if len(digits) <= 12 else -1
    else:
        try:
            dt = datetime.fromisoformat(v)
        except ValueError:
            raise BadArgument(
                f"{what}: give a time ago (7d, 12h, 30m, 2w) or a date (2026-11-01), not {v[:40]!r}"
            ) from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        try:
            when = int(dt.timestamp())
        except (OverflowError, OSError, ValueError):  # a date at the very edge of what datetime holds
            when = -1
    if not 0 <= when <= _LAST:
        raise BadArgument(f"{what}: {v[:40]!r} is out of range (give a time after 1970 and before the year 10000)")
    return when


def _roles(role: str | None) -> tuple[int, ...]:
    if not role:
        return ()
    if role not in KINDS:
        raise BadArgument(f"role: one of {', '.join(KINDS)}, not {role[:40]!r}")
    return (KINDS.index(role),)


@cache
def _project_of(cwd: str) -> Project:
    from ..ground.paths import canonical
    from ..ground.project import resolve

    try:
        return resolve(canonical(cwd))
    except (OSError, ValueError):
        return Project(cwd)


memo.on_forget(_project_of.cache_clear)  # a folder's project changes as git is set up in it


def _folders(projects: list[Project]) -> frozenset[str]:
    from .view import extra_cwds

    names = set()
    for project in projects:
        dirs = locate(project.root, extra_cwds(project), claude_dirs.roots())
        for folder, _cwd in dirs.folders:
            names.add(folder.name)
        kept = archive.usable()
        for folder, _cwd in (
            folders_under(kept, dirs.cwds) if kept is not None else ()
        ):  # Claude Code removed the folder
            names.add(folder.name)
    return frozenset(names)


def _config_dir(path: str | None) -> str | None:
    """The Claude Code root of a hit's transcript, when it is not the default one."""
    projects = next((p for p in Path(path).parents if p.name == "projects"), None) if path else None
    if projects is None or projects.parent == config_home():
        return None
    return str(projects.parent)


def _fork_parents(cwds: dict[str, str | None]) -> dict[str, str]:
    """{fork: parent} among sessions that matched with the same passages, from the catalog's
    records of their projects (no transcript is read)."""
    from ..catalog import cache as catalog_cache
    from ..catalog.forks import fork_parents
    from ..catalog.scan import cache_path

    parents: dict[str, str] = {}
    for project in {_project_of(cwd) for cwd in cwds.values() if cwd}:
        records = catalog_cache.load(cache_path(project))
        parents.update(fork_parents((Path(path).stem.lower(), rec) for path, rec in records.items()))
    return parents


def search(
    text: str,
    *,
    projects: list[Project] | None = None,
    role: str | None = None,
    since: str | None = None,
    until: str | None = None,
    branch: str | None = None,
    tools: bool = False,
    limit: int = 20,
    progress: index.Progress | None = None,
    background: bool = False,
    snippets: bool = True,
) -> SearchResult:
    """Sessions whose conversation matches ``text`` (``projects``: None for every project).
    ``background``: a door that must not build a big index itself (see the module's docstring)."""
    started = time.perf_counter()
    query = parse(text)  # a bad query costs no index work
    if not 1 <= limit <= MAX_LIMIT:
        raise BadArgument(f"limit: 1 to {MAX_LIMIT}, not {limit}")
    filters = Filters(
        roles=_roles(role),
        tools=tools,
        since=parse_when(since, "since"),
        until=parse_when(until, "until"),
        branch=branch or None,
        folders=_folders(projects) if projects is not None else None,
    )
    # Another process updating: wait a moment for it (a small update is soon done), not longer.
    done = index.update(progress=progress, inline_max=INLINE_BYTES if background else None, wait=WAIT_S)
    state = IndexState(
        files=done.files, pending_bytes=done.pending_bytes, indexed_now=done.read, seconds=round(done.seconds, 3)
    )
    if done.busy:  # another process holds the index (or was just started to build it)
        status = index.progress_status()
        state.updating = True
        state.done_bytes, state.total_bytes = status.done, status.total
    found = find(query, filters, limit, snippets=snippets, forks=_fork_parents)
    if found.damaged and not done.busy:  # a damaged or foreign database: rebuilt, then asked again
        index.forget_stamp()
        done = index.update(progress=progress, inline_max=INLINE_BYTES if background else None)
        state.pending_bytes, state.indexed_now = done.pending_bytes, state.indexed_now + done.read
        found = find(query, filters, limit, snippets=snippets, forks=_fork_parents)
    now = time.time()
    archive_base = os.fspath(archive.root()) + os.sep
    results = []
    for hit in found.hits:
        cwd = (moves.renamed(hit.cwd) or hit.cwd) if hit.cwd else ""  # a folder a person moved: where it is now
        project = _project_of(cwd).root if cwd else hit.folder
        gone = bool(cwd) and not os.path.isdir(cwd)
        archived = hit.path is not None and hit.path.startswith(archive_base)
        if archived and cwd:  # Claude Code deleted it: c3async puts it back first
            resume = f"cd {shlex.quote(cwd)} && c3async resume {hit.id}"
        elif cwd:
            resume = resume_command(cwd, hit.id, hit.branch, gone=gone, config_dir=_config_dir(hit.path))
        else:
            resume = f"claude --resume {hit.id}"
        results.append(
            Result(
                **{f: getattr(hit, f) for f in hit.__struct_fields__},
                project=project,
                age=ago(hit.last_ts, now),
                resume=resume,
            )
        )
    problems = found.problems + done.errors
    return SearchResult(text, results, found.total, state, problems, round(time.perf_counter() - started, 4))
