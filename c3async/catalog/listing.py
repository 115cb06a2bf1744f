"""Stage 2: the session files of a project's transcript folders, newest first.

Only ``<uuid>.jsonl`` files directly in a folder are sessions: never ``agent-*.jsonl`` (legacy
sub-agents), ``<uuid>/subagents/...``, or any other name. One stat per file, from ``scandir``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ("Candidate", "candidates", "is_session_id")

_SESSION_FILE = re.compile(
    r"^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\.jsonl$"
)
_SESSION_ID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def is_session_id(value: str) -> bool:
    return bool(_SESSION_ID.match(value))


@dataclass(slots=True)
class Candidate:
    session_id: str
    path: str
    size: int
    mtime_ns: int
    folder: Path


def candidates(folders: list[Path]) -> list[Candidate]:
    """Session files of ``folders``, one per session id (the newest mtime wins, as after a
    worktree move), sorted by mtime then session id, newest first, as the SDK sorts."""
    by_id: dict[str, Candidate] = {}
    for folder in folders:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            m = _SESSION_FILE.match(entry.name)
            if m is None:
                continue
            try:
                if not entry.is_file():
                    continue
                st = entry.stat()
            except OSError:
                continue  # vanished between listing and stat
            sid = m.group(1).lower()
            old = by_id.get(sid)
            if old is None or st.st_mtime_ns > old.mtime_ns:
                by_id[sid] = Candidate(sid, entry.path, st.st_size, st.st_mtime_ns, folder)
    return sorted(by_id.values(), key=lambda c: (c.mtime_ns, c.session_id), reverse=True)
