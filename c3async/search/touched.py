"""Which sessions changed a file, or anything under a folder: answered from the index's
``edits`` (per transcript and path, the count of its edit and write calls, their tools and
times), newest first.

A path is matched exactly, and as a folder by its prefix with a separator (``/a/b`` holds
``/a/b/c`` but not ``/a/bc``): a range of the key, so a query reads only the rows it returns.
A sub-agent's edits count toward the session that ran it. Each shard is asked in turn; one that
cannot be read is said in ``problems`` and the others answer.
"""

from __future__ import annotations

import os
import sqlite3

import msgspec

from ..ground import clock
from ..ground.errors import DamagedIndex, IndexUnavailable
from . import store
from .passages import EDIT_NAMES

__all__ = ("MAX_PATHS", "Changed", "Touched", "Touching", "touched")

MAX_PATHS = 20  # paths listed per session (the counts cover them all)
MAX_ROWS = 200_000  # edit rows read per query at most (a folder as wide as / on a huge index)
MAX_COUNT = 1 << 40  # edit calls of one transcript to one path: far past any real one


class Changed(msgspec.Struct):
    """One path a session changed."""

    path: str
    count: int
    tools: list[str]
    last_ts: int | None


class Touching(msgspec.Struct):
    """One session that changed the path (or something under the folder)."""

    id: str
    folder: str  # Claude Code's project folder
    path: str | None  # its transcript (None: only its sub-agents' files are known)
    cwd: str | None
    title: str | None
    title_source: str | None
    branch: str | None
    first_ts: int | None  # its first and last change of these paths
    last_ts: int | None
    count: int  # edit and write calls, sub-agents' too
    tools: list[str]
    by_subagent: bool  # some of them a sub-agent's
    files: list[Changed]  # the paths, most recently changed first (at most MAX_PATHS)
    more_files: int = 0


class Touched(msgspec.Struct):
    sessions: list[Touching]
    problems: list[str] = msgspec.field(default_factory=list)
    damaged: list[int] = msgspec.field(default_factory=list)
    cut: bool = False  # more than MAX_ROWS rows matched: the oldest are left out


def _tools(bits: int) -> list[str]:
    return [name for i, name in enumerate(EDIT_NAMES) if bits & (1 << i)]


def _sane(row: tuple, where: object) -> tuple | None:
    """An edits row as we write it (the index is a file: read as untrusted), its times in
    range (``clock.event``, None when not one); None when a value is of the wrong kind."""
    path, count, tools, first_ts, last_ts, session, sidechain, folder = row[:8]
    if not (isinstance(path, str) and isinstance(session, str) and isinstance(folder, str)):
        return None
    if not all(isinstance(v, int) for v in (count, tools, sidechain)) or not 0 < count <= MAX_COUNT:
        return None
    if not 0 < tools < 1 << len(EDIT_NAMES) or not all(v is None or isinstance(v, str) for v in row[8:]):
        return None
    first, last = (clock.event(t, "an edit's time in the index", where) for t in (first_ts, last_ts))
    return (*row[:3], None if first is None else int(first), None if last is None else int(last), *row[5:])


def _later(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _earlier(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


_ROWS = (
    "SELECT e.path, e.count, e.tools, e.first_ts, e.last_ts, f.session, f.sidechain, f.folder, f.path, f.cwd,"
    " f.custom_title, f.ai_title, f.first_prompt, f.last_branch"
    " FROM edits AS e JOIN files AS f ON f.id = e.file"
    " WHERE (e.path = ? OR (e.path > ? AND e.path < ?)) AND f.session IS NOT NULL"
    " ORDER BY e.last_ts DESC LIMIT ?"
)


def touched(paths: list[str], folders: frozenset[str] | None = None) -> Touched:
    """The sessions that changed any of ``paths`` (absolute, normalised; a folder means what is
    under it), newest change first. ``folders``: only sessions of these Claude Code folders."""
    out = Touched([])
    by_session: dict[str, Touching] = {}
    paths_of: dict[str, dict[str, Changed]] = {}
    for k in range(store.SHARDS):
        try:
            conn = store.connect(k, create=False)
        except DamagedIndex as exc:
            out.problems.append(str(exc))
            out.damaged.append(k)
            continue
        except IndexUnavailable as exc:
            out.problems.append(str(exc))
            continue
        if conn is None:
            continue
        try:
            rows = []
            for path in paths:
                under = path.rstrip(os.sep) + os.sep  # "/" itself: every path
                # the keys under the folder sort between "<folder>/" and "<folder>0" ("0" follows "/")
                rows += conn.execute(_ROWS, (path, under, under[:-1] + chr(ord(os.sep) + 1), MAX_ROWS)).fetchall()
        except sqlite3.Error as exc:
            why = store.failure(store.shard_path(k), exc)
            out.problems.append(str(why))
            if isinstance(why, DamagedIndex):
                out.damaged.append(k)
            continue
        finally:
            conn.close()
        out.cut = out.cut or len(rows) >= MAX_ROWS
        sane = [r for r in (_sane(r, store.shard_path(k)) for r in rows) if r is not None]
        if len(sane) < len(rows):
            out.problems.append(
                f"{store.shard_path(k)}: {len(rows) - len(sane):,} edit rows of the wrong kind, skipped"
            )
        for path, count, tools, first_ts, last_ts, session, sidechain, folder, tpath, cwd, ct, at, fp, branch in sane:
            if folders is not None and folder not in folders:
                continue
            held = by_session.get(session)
            if held is None:
                held = by_session[session] = Touching(
                    session, folder, None, cwd, None, None, None, None, None, 0, [], False, []
                )
            if not sidechain:  # the session's own transcript names it
                held.folder, held.path, held.cwd, held.branch = folder, tpath, cwd, branch
                held.title, held.title_source = next(
                    ((t, s) for t, s in ((ct, "custom"), (at, "ai"), (fp, "prompt")) if t), (None, None)
                )
            elif held.cwd is None:
                held.cwd = cwd
            held.by_subagent = held.by_subagent or bool(sidechain)
            held.count += count
            held.tools = sorted(set(held.tools) | set(_tools(tools)), key=EDIT_NAMES.index)
            held.first_ts, held.last_ts = _earlier(held.first_ts, first_ts), _later(held.last_ts, last_ts)
            mine = paths_of.setdefault(session, {})
            was = mine.get(path)
            if was is None:
                mine[path] = Changed(path, count, _tools(tools), last_ts)
            else:
                was.count += count
                was.tools = sorted(set(was.tools) | set(_tools(tools)), key=EDIT_NAMES.index)
                was.last_ts = _later(was.last_ts, last_ts)
    for session, held in by_session.items():
        changed = sorted(paths_of[session].values(), key=lambda c: (-(c.last_ts or 0), c.path))
        held.files, held.more_files = changed[:MAX_PATHS], max(0, len(changed) - MAX_PATHS)
    out.sessions = sorted(by_session.values(), key=lambda t: (-(t.last_ts or 0), t.id))
    return out
