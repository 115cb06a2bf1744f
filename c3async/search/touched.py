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


def _sane_edit(row: tuple, where: object) -> tuple | None:
    """An edits row (path, file, count, tools, first_ts, last_ts) as we write it (the index is a
    file: read as untrusted), its times in range (``clock.event``: None when not one); None
    when a value is of the wrong kind."""
    path, fid, count, tools, first_ts, last_ts = row
    if not isinstance(path, str) or not all(isinstance(v, int) for v in (fid, count, tools)):
        return None
    if not 0 < count <= MAX_COUNT or not 0 < tools < 1 << len(EDIT_NAMES):
        return None
    first, last = (clock.event(t, "an edit's time in the index", where) for t in (first_ts, last_ts))
    return path, fid, count, tools, None if first is None else int(first), None if last is None else int(last)


def _sane_file(row: tuple | None) -> tuple | None:
    """A files row (session, sidechain, folder, then strings or None), or None when it names no
    session or a value is of the wrong kind."""
    if row is None or not isinstance(row[0], str) or not isinstance(row[1], int) or not isinstance(row[2], str):
        return None
    return row if all(v is None or isinstance(v, str) for v in row[3:]) else None


def _later(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _earlier(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


# The edit rows alone (a few short values each), newest first; each transcript's own row is
# read once (_FILE), not joined onto every row: a folder of 200,000 changed files would
# otherwise hold its session's titles 200,000 times.
_EDITS = (
    "SELECT path, file, count, tools, first_ts, last_ts FROM edits"
    " WHERE path = ? OR (path > ? AND path < ?) ORDER BY last_ts DESC LIMIT ?"
)
_FILE = (
    "SELECT session, sidechain, folder, path, cwd, custom_title, ai_title, first_prompt, last_branch"
    " FROM files WHERE id = ?"
)


def touched(paths: list[str], folders: frozenset[str] | None = None) -> Touched:
    """The sessions that changed any of ``paths`` (absolute, normalised; a folder means what is
    under it), newest change first. ``folders``: only sessions of these Claude Code folders."""
    out = Touched([])
    by_session: dict[str, Touching] = {}
    bits_of: dict[str, int] = {}  # the tools of each session's changes
    paths_of: dict[str, dict[str, list]] = {}  # per session, per path: [count, tool bits, last_ts]
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
        where = store.shard_path(k)
        files: dict[int, tuple | None] = {}
        bad = 0
        try:
            for asked in paths:
                under = asked.rstrip(os.sep) + os.sep  # "/" itself: every path
                # the keys under the folder sort between "<folder>/" and "<folder>0" ("0" follows "/")
                read = 0
                for row in conn.execute(_EDITS, (asked, under, under[:-1] + chr(ord(os.sep) + 1), MAX_ROWS)):
                    read += 1
                    edit = _sane_edit(row, where)
                    if edit is None:
                        bad += 1
                        continue
                    path, fid, count, tools, first_ts, last_ts = edit
                    if fid not in files:
                        files[fid] = _sane_file(conn.execute(_FILE, (fid,)).fetchone())
                    meta = files[fid]
                    if meta is None:
                        continue
                    session, sidechain, folder, tpath, cwd, ct, at, fp, branch = meta
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
                    bits_of[session] = bits_of.get(session, 0) | tools
                    held.first_ts, held.last_ts = _earlier(held.first_ts, first_ts), _later(held.last_ts, last_ts)
                    mine = paths_of.setdefault(session, {})
                    was = mine.get(path)
                    if was is None:
                        mine[path] = [count, tools, last_ts]
                    else:
                        was[0] += count
                        was[1] |= tools
                        was[2] = _later(was[2], last_ts)
                out.cut = out.cut or read >= MAX_ROWS
        except sqlite3.Error as exc:
            why = store.failure(where, exc)
            out.problems.append(str(why))
            if isinstance(why, DamagedIndex):
                out.damaged.append(k)
            continue
        finally:
            conn.close()
        if bad:
            out.problems.append(f"{where}: {bad:,} edit rows of the wrong kind, skipped")
    for session, held in by_session.items():
        held.tools = _tools(bits_of[session])
        mine = paths_of[session]
        newest = sorted(mine.items(), key=lambda kv: (-(kv[1][2] or 0), kv[0]))[:MAX_PATHS]
        held.files = [Changed(path, count, _tools(bits), last) for path, (count, bits, last) in newest]
        held.more_files = max(0, len(mine) - MAX_PATHS)
    out.sessions = sorted(by_session.values(), key=lambda t: (-(t.last_ts or 0), t.id))
    return out
