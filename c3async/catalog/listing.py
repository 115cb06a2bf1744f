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
from dataclasses import dataclass
from pathlib import Path

__all__ = ("Candidate", "candidates", "is_session_id")

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
    by_id: dict[str, Candidate] = {}
    for folder in folders:
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:
            continue
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
            sid = m.group(1).lower()
            old = by_id.get(sid)
            if old is None or st.st_mtime_ns > old.mtime_ns:
                by_id[sid] = Candidate(sid, entry.path, st.st_size, st.st_mtime_ns, folder, st.st_ino, st.st_dev)
    return sorted(by_id.values(), key=lambda c: (c.mtime_ns, c.session_id), reverse=True)
