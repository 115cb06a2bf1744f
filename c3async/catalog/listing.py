"""Stage 2: the session files of a project's transcript folders, newest first.

Only ``<uuid>.jsonl`` files directly in a folder are sessions: never ``agent-*.jsonl`` (legacy
sub-agents), ``<uuid>/subagents/...``, or any other name. One stat per file, from ``scandir``.

Only regular files count: a FIFO, a directory or a socket named like a session is left out, and
so is a symlink (Claude Code never writes one there, and one that points outside the folder
would have us read, and show in the Hub, any file the user can read). An entry that cannot be
examined (it vanished, EACCES) costs that entry only.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..ground import clock

__all__ = (
    "Candidate",
    "candidates",
    "depth_in_folder",
    "folder_candidates",
    "is_session_id",
    "newest_first",
    "transcript_files",
)

MAX_DEPTH = 16  # sub-agent folders nest a level or two; deeper is not Claude Code's

# Always fullmatch: ``$`` would also match before a final newline.
_SESSION_FILE = re.compile(r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\.jsonl")
_SESSION_ID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def is_session_id(value: str) -> bool:
    """Is ``value`` exactly a session id (a UUID; nothing before or after it, not even a newline)?"""
    return isinstance(value, str) and _SESSION_ID.fullmatch(value) is not None


@dataclass(slots=True)
class Candidate:
    session_id: str
    path: str
    size: int
    mtime_ns: int
    folder: Path
    ino: int = 0  # the file's identity (0 where scandir does not give it, as on Windows)
    dev: int = 0


def candidates(folders: list[Path]) -> list[Candidate]:
    """Session files of ``folders``, one per session id (the newest mtime wins, as after a
    worktree move), sorted by mtime then session id, newest first, as the SDK sorts."""
    return newest_first(c for folder in folders for c in folder_candidates(folder))


def folder_candidates(folder: Path) -> list[Candidate]:
    """The session files directly in one folder, in the order ``scandir`` gives them."""
    try:
        with os.scandir(folder) as it:
            entries = list(it)
    except OSError:
        return []
    found = []
    for entry in entries:
        m = _SESSION_FILE.fullmatch(entry.name)
        if m is None:
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue  # a symlink, a FIFO, a directory...
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue  # vanished between listing and stat
        found.append(
            Candidate(
                m.group(1).lower(),
                entry.path,
                st.st_size,
                clock.file_ns(st.st_mtime_ns, entry.path),
                folder,
                st.st_ino,
                st.st_dev,
            )
        )
    return found


def newest_first(found: Iterable[Candidate]) -> list[Candidate]:
    """One candidate per session id (the first of the newest mtime), sorted by mtime then
    session id, newest first."""
    by_id: dict[str, Candidate] = {}
    for c in found:
        old = by_id.get(c.session_id)
        if old is None or c.mtime_ns > old.mtime_ns:
            by_id[c.session_id] = c
    return sorted(by_id.values(), key=lambda c: (c.mtime_ns, c.session_id), reverse=True)


def _entries(folder: str | os.PathLike[str]) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as it:
            return list(it)
    except OSError:
        return []


def transcript_files(folder: str | os.PathLike[str]) -> Iterator[tuple[str, str | None, os.stat_result]]:
    """Every transcript of a folder with its ``lstat``: (path, the session it belongs to, stat).
    Sessions' ``<uuid>.jsonl``, their sub-agents' files under ``<uuid>/subagents/`` (the session:
    the folder's uuid) and legacy ``agent-*.jsonl`` files beside them (None: the session is in
    their lines). Regular files only, found without following a symlinked folder."""
    for e in _entries(folder):
        try:
            if e.is_file(follow_symlinks=False):  # never a symlink, a FIFO, a socket...
                if not e.name.endswith(".jsonl"):
                    continue
                if is_session_id(e.name[:-6]):
                    yield e.path, e.name[:-6].lower(), e.stat(follow_symlinks=False)
                elif e.name.startswith("agent-"):
                    yield e.path, None, e.stat(follow_symlinks=False)
            elif e.is_dir(follow_symlinks=False) and is_session_id(e.name):
                for path, st in sorted(subagent_files(os.path.join(e.path, "subagents"))):
                    yield path, e.name.lower(), st
        except OSError:
            continue  # vanished, or cannot be examined: this entry only


def depth_in_folder(path: str) -> int:
    """How many of ``path``'s last components lie below its project folder: 1 for a session's
    ``<uuid>.jsonl`` or a legacy ``agent-*.jsonl``, more for ``<uuid>/subagents/...``. A reader
    opens those without following a link (``safefs.open_regular(depth=...)``)."""
    parts = path.split(os.sep)
    for i in range(len(parts) - 2, 0, -1):
        if parts[i] == "subagents" and is_session_id(parts[i - 1]):
            return len(parts) - (i - 1)
    return 1


def subagent_files(folder: str) -> Iterator[tuple[str, os.stat_result]]:
    """Every ``*.jsonl`` regular file under ``folder`` (not a workflow's ``journal.jsonl``)."""
    for path, st in regular_files(folder):
        name = os.path.basename(path)
        if name.endswith(".jsonl") and name != "journal.jsonl":
            yield path, st


def regular_files(folder: str, depth: int = 0) -> Iterator[tuple[str, os.stat_result]]:
    """Every regular file under ``folder`` with its ``lstat``, walking real folders only: a
    symlinked folder is not followed (no loop, and nothing outside ``folder`` is read), nor is
    ``folder`` itself when it is a link; at most ``MAX_DEPTH`` deep."""
    if depth == 0:
        try:
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                return
        except OSError:
            return
    for e in _entries(folder):
        try:
            if e.is_file(follow_symlinks=False):
                yield e.path, e.stat(follow_symlinks=False)
            elif e.is_dir(follow_symlinks=False) and depth < MAX_DEPTH:
                yield from regular_files(e.path, depth + 1)
        except OSError:
            continue
