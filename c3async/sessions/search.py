"""Full-text search as the three doors ask it: bring the index up to date, query it, and give
each session found its project, age and resume command.

A door with threads of its own (the MCP server, the Hub) cannot fork workers and must answer
promptly: when more than ``INLINE_BYTES`` wait to be indexed (a first build), it starts
``c3async index`` in the background and answers from what is indexed, saying how far the
build has got. The CLI builds in the foreground, with progress on a terminal.
"""

from __future__ import annotations

import logging
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
from ..ground.errors import BadArgument, check_text, clip
from ..ground.project import Project
from ..search import index
from ..search.find import Filters, Hit, Known, find
from ..search.passages import KINDS, MAX_PATH
from ..search.query import parse
from ..search.touched import MAX_ROWS, Touching
from ..stores import archive, claude_dirs
from .query import wanted_tag
from .resume import ago, resume_command

__all__ = (
    "INLINE_BYTES",
    "FileSession",
    "FilesResult",
    "IndexState",
    "Result",
    "SearchResult",
    "files",
    "parse_when",
    "search",
)

log = logging.getLogger("c3async.search")

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


def _known(projects: list[Project] | None) -> dict[str, Known]:
    """The notes and tags of the sessions of these projects (None: of every registered one: a
    project is registered when a session of it is marked) from their marks' folds."""
    from ..ground.errors import C3Error
    from ..stores import registry
    from ..stores.marks import MarkBook

    out: dict[str, Known] = {}
    for project in projects if projects is not None else [Project(e.path) for e in registry.entries()]:
        try:
            book = MarkBook(project).refresh()
            notes = book.get_many(book.note_ids())
        except (OSError, C3Error) as exc:  # one project's marks unreadable: the search goes on
            log.debug("the marks of %s are left out of the search: %s", project, exc)
            continue
        for sid, state in notes.items():
            if state.note is not None:
                note = "\n".join(t for t in (state.note.summary, state.note.next_steps) if t)
                out.setdefault(sid, Known()).note = note
        for sid, tags in book.tagged().items():
            out.setdefault(sid, Known()).tags = tags
    return out


def _config_dir(path: str | None) -> str | None:
    """The Claude Code root of a hit's transcript, when it is not the default one."""
    projects = next((p for p in Path(path).parents if p.name == "projects"), None) if path else None
    if projects is None or projects.parent == config_home():
        return None
    return str(projects.parent)


def _fork_parents(cwds: dict[str, str | None]) -> dict[str, str]:
    """{fork: parent} of the given sessions' projects, from the catalog's records of them (no
    transcript is read)."""
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
    tag: str | None = None,
) -> SearchResult:
    """Sessions whose titles, name, tags, note or conversation match ``text`` (``projects``:
    None for every project), tagged ``tag`` when given. ``background``: a door that must not
    build a big index itself (see the module's docstring)."""
    started = time.perf_counter()
    query = parse(text)  # a bad query costs no index work
    if not 1 <= limit <= MAX_LIMIT:
        raise BadArgument(f"limit: 1 to {MAX_LIMIT}, not {limit}")
    wanted = wanted_tag(tag)
    known = _known(projects)
    filters = Filters(
        roles=_roles(role),
        tools=tools,
        since=parse_when(since, "since"),
        until=parse_when(until, "until"),
        branch=branch or None,
        folders=_folders(projects) if projects is not None else None,
        sessions=frozenset(sid for sid, k in known.items() if wanted in k.tags) if wanted is not None else None,
    )
    done, state = _bring_up(progress, background)
    found = find(query, filters, limit, snippets=snippets, forks=_fork_parents, known=known)
    if found.damaged and not done.busy:  # a damaged or foreign database: rebuilt, then asked again
        done = _rebuild_damaged(progress, background, state)
        found = find(query, filters, limit, snippets=snippets, forks=_fork_parents, known=known)
    now = time.time()
    places = _Places()
    results = []
    for hit in found.hits:
        project, resume = places.of(hit.id, hit.folder, hit.path, hit.cwd, hit.branch)
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


def _bring_up(progress: index.Progress | None, background: bool) -> tuple[index.Update, IndexState]:
    """The index brought up to date (or as far as a door may: see the module's docstring)."""
    # Another process updating: wait a moment for it (a small update is soon done), not longer.
    done = index.update(progress=progress, inline_max=INLINE_BYTES if background else None, wait=WAIT_S)
    state = IndexState(
        files=done.files, pending_bytes=done.pending_bytes, indexed_now=done.read, seconds=round(done.seconds, 3)
    )
    if done.busy:  # another process holds the index (or was just started to build it)
        status = index.progress_status()
        state.updating = True
        state.done_bytes, state.total_bytes = status.done, status.total
    return done, state


def _rebuild_damaged(progress: index.Progress | None, background: bool, state: IndexState) -> index.Update:
    index.forget_stamp()
    done = index.update(progress=progress, inline_max=INLINE_BYTES if background else None)
    state.pending_bytes, state.indexed_now = done.pending_bytes, state.indexed_now + done.read
    return done


class _Places:
    """Where a session found in the index is now: its project and the command that resumes it."""

    def __init__(self) -> None:
        self.archive_base = os.fspath(archive.root()) + os.sep

    def of(self, sid: str, folder: str, path: str | None, cwd: str | None, branch: str | None) -> tuple[str, str]:
        cwd = (moves.renamed(cwd) or cwd) if cwd else ""  # a folder a person moved: where it is now
        project = _project_of(cwd).root if cwd else folder
        gone = bool(cwd) and not os.path.isdir(cwd)
        archived = path is not None and path.startswith(self.archive_base)
        if archived and cwd:  # Claude Code deleted it: c3async puts it back first
            return project, f"cd {shlex.quote(cwd)} && c3async resume {sid}"
        if cwd:
            return project, resume_command(cwd, sid, branch, gone=gone, config_dir=_config_dir(path))
        return project, f"claude --resume {sid}"


class FileSession(Touching, kw_only=True):
    project: str
    age: str
    resume: str
    forked_from: str | None = None  # a fork carries its parent's calls up to the fork: told apart


class FilesResult(msgspec.Struct):
    asked: str  # as typed
    paths: list[str]  # what it names, absolute (and its real path when a link leads there)
    kind: str  # file, folder, or gone (no longer on disk, but sessions changed it)
    sessions: list[FileSession]
    total: int  # sessions that changed it (``sessions`` holds the first ``limit``)
    index: IndexState
    problems: list[str] = msgspec.field(default_factory=list)
    seconds: float = 0.0


MAX_FILES_LIMIT = 500


def _named(path: str, bases: list[str]) -> list[str]:
    """The absolute paths ``path`` may name: itself, or joined to each base (the first that
    exists on disk first); each normalised, and its real path too when a link leads elsewhere."""
    if "\x00" in path or not path.strip():
        raise BadArgument("give a file or a folder (a path, relative to the project or absolute)")
    expanded = os.path.expanduser(path)
    if not os.path.isabs(expanded) and not bases:
        raise BadArgument(f"{clip(path, 200)!r} is relative: give an absolute path, or the project it is in")
    tried = [expanded] if os.path.isabs(expanded) else [os.path.join(b, expanded) for b in bases]
    tried = list(dict.fromkeys(os.path.normpath(p) for p in tried))
    tried.sort(key=lambda p: not os.path.lexists(p))  # stable: the bases' order among equals
    out: dict[str, None] = {}
    for p in tried:
        out[p] = None
        try:
            out[os.path.realpath(p)] = None
        except (OSError, ValueError):
            pass
    return list(out)


def files(
    path: str,
    *,
    bases: list[str],
    limit: int = 50,
    progress: index.Progress | None = None,
    background: bool = False,
) -> FilesResult:
    """The sessions that created, edited or wrote ``path`` (a file, or anything under a folder),
    newest change first, from every project (the path is the scope). A relative path is taken
    in each of ``bases`` (the folder the command runs in, then the project's root). A path that
    is not on disk and that no session changed is a NotFound naming where it looked."""
    from ..ground.errors import NotFound
    from ..search.touched import touched

    started = time.perf_counter()
    if not 1 <= limit <= MAX_FILES_LIMIT:
        raise BadArgument(f"limit: 1 to {MAX_FILES_LIMIT}, not {limit}")
    check_text(path, "the path", MAX_PATH)
    paths = _named(path, bases)
    done, state = _bring_up(progress, background)
    found = touched(paths)
    if found.damaged and not done.busy:
        done = _rebuild_damaged(progress, background, state)
        found = touched(paths)
    on_disk = next((p for p in paths if os.path.lexists(p)), None)
    if on_disk is None and not found.sessions and not state.updating:
        raise NotFound(
            f"no such file or folder: {clip(path, 200)!r} (looked at {', '.join(clip(p, 200) for p in paths[:3])}), "
            "and no session changed it"
        )
    kind = "gone" if on_disk is None else "folder" if os.path.isdir(on_disk) else "file"
    chosen = found.sessions
    now = time.time()
    places = _Places()
    parents = _fork_parents({t.id: t.cwd for t in chosen[:limit]})
    out = []
    for t in chosen[:limit]:
        project, resume = places.of(t.id, t.folder, t.path, t.cwd, t.branch)
        out.append(
            FileSession(
                **{f: getattr(t, f) for f in t.__struct_fields__},
                project=project,
                age=ago(t.last_ts, now),
                resume=resume,
                forked_from=parents.get(t.id),
            )
        )
    problems = found.problems + done.errors
    if found.cut:
        problems.append(f"more than {MAX_ROWS:,} changes under {clip(path, 200)!r}: the oldest are left out")
    return FilesResult(path, paths, kind, out, len(chosen), state, problems, round(time.perf_counter() - started, 4))
