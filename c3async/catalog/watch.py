"""What moved among a project's transcripts, for a watcher that asks every second (the Hub's
change feed, the MCP server's resource list) without a stat per transcript each time.

A transcript that grows changes its own mtime, not its folder's; a file created, renamed or
deleted changes its folder's. So a pass (``poll``) stats each folder and scans again only the
folders whose stat moved, and stats the hot files alone: those modified in the last ``HOT_S``
and those of sessions the caller says are running (Claude Code's registry names them, so a
session resumed after weeks is hot from its first line). Every ``FULL_S`` a full pass scans
every folder, which catches a cold transcript that grew while nothing held it.

A folder modified within ``SLACK_S`` of a scan is scanned again at the next pass: a file
created in the same tick of the file system's clock as the scan leaves the folder's mtime
where the scan saw it. Where the folders are (``locate``) is asked again only when what it
reads moves: the projects folder's stat at any pass (a folder made for a new cwd), the
project's ``.git`` and its repository's list of worktrees at a full pass. A projects folder
with a million entries then costs a scan when it changes, not at every pass.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from ..ground.paths import git_common_dir
from ..ground.safefs import stamp
from .listing import Candidate, folder_candidates, newest_first
from .locate import ClaudeRoot, claude_roots, locate

__all__ = ("FULL_S", "HOT_S", "SLACK_S", "Tops", "TranscriptWatch")

HOT_S = 600.0  # a transcript modified this recently is stat'ed at every pass
FULL_S = 30.0  # a full pass (every folder scanned) at least this often
SLACK_S = 2.0  # a folder modified this close to its scan is scanned again


@dataclass(frozen=True, slots=True)
class Tops:
    """The Claude Code roots and the stat of each one's projects folder, taken once for a pass
    over many projects (each project's watch compares them with what its ``locate`` read)."""

    roots: tuple[ClaudeRoot, ...]
    folders: tuple[Path, ...]
    sigs: tuple

    @classmethod
    def now(cls, roots: tuple[ClaudeRoot, ...]) -> Tops:
        folders = tuple(r.projects for r in roots)
        return cls(roots, folders, tuple(stamp(top, follow=True) for top in folders))


@dataclass(slots=True)
class _Folder:
    path: Path
    sig: tuple | None = None  # its stat when last scanned
    files: list[Candidate] = field(default_factory=list)  # its session files then, newest first
    by_id: dict[str, Candidate] = field(default_factory=dict)


class TranscriptWatch:
    """One project's session files, kept current by ``poll``: ``files`` holds (session id,
    path, size, mtime_ns), newest first, as ``listing.candidates`` would list them now."""

    def __init__(self, project: str, roots: Callable[[], tuple[ClaudeRoot, ...]] = claude_roots) -> None:
        self.project = project
        self.roots = roots  # the Claude Code roots, asked again whenever ``locate`` runs
        self.files: tuple[tuple[str, str, int, int], ...] = ()
        self.ids: frozenset[str] = frozenset()
        self.scans = 0  # folders scanned so far (a full pass scans them all)
        self.stats = 0  # hot files stat'ed so far
        self._folders: list[_Folder] = []
        self._tops: tuple[Path, ...] = ()  # the roots' projects folders, and their stats when ``locate`` last ran
        self._tops_sig: tuple = ()
        self._git: tuple[str, ...] = ()  # what ``locate`` read of git (.git, the worktrees)...
        self._git_at: tuple = ()  # ...and their stats then
        self._located = False
        self._full_at = -FULL_S  # time.monotonic() of the last full pass

    def _git_sigs(self) -> tuple:
        return tuple(stamp(path) for path in self._git)

    def _locate(self, tops: Tops) -> None:
        self._tops, self._tops_sig = tops.folders, tops.sigs  # taken before: a change meanwhile locates again
        dirs = locate(self.project, roots=tops.roots)
        self.project = dirs.project
        common = git_common_dir(dirs.project)
        self._git = (os.path.join(dirs.project, ".git"), *([os.path.join(common, "worktrees")] if common else []))
        self._git_at = self._git_sigs()
        held = {f.path: f for f in self._folders}
        self._folders = [held.get(folder) or _Folder(folder) for folder, _ in dirs.folders]
        self._located = True

    def poll(
        self,
        full: bool | None = None,
        running: Collection[str] = (),
        now: float | None = None,
        tops: Tops | None = None,
    ) -> bool:
        """Bring ``files`` up to date; True when it changed. ``full``: True for a full pass,
        False for none, None for one when ``FULL_S`` has passed since the last; ``running``:
        the session ids whose transcripts may grow now, whatever their age; ``tops``: the
        Claude Code roots as the caller just took them (a watcher of many projects takes them once)."""
        mono = time.monotonic()
        if full is None:
            full = mono - self._full_at >= FULL_S
        if full:
            self._full_at = mono
        folders = self._folders
        tops = Tops.now(self.roots()) if tops is None else tops
        if (
            not self._located
            or tops.sigs != self._tops_sig
            or tops.folders != self._tops
            or (full and self._git_sigs() != self._git_at)
        ):
            self._locate(tops)
        now = time.time() if now is None else now
        hot_after = int((now - HOT_S) * 1e9)
        unsettled = int((now - SLACK_S) * 1e9)
        moved = folders is not self._folders and [f.path for f in folders] != [f.path for f in self._folders]
        for folder in self._folders:
            sig = stamp(folder.path, follow=True)
            if full or sig is None or sig != folder.sig or sig[2] >= unsettled:
                moved |= self._scan(folder, sig)
                continue
            grew = self._restat(folder, hot_after, running)
            if grew is None:  # a hot file gone or replaced: the folder changed under its stat
                grew = self._scan(folder, sig)
            moved |= grew
        return self._merge() if moved else False

    def _scan(self, folder: _Folder, sig: tuple | None) -> bool:
        """Scan a folder; True when its session files differ from the last scan's."""
        self.scans += 1
        folder.sig = sig
        before = [(c.path, c.size, c.mtime_ns, c.ino) for c in folder.files]
        folder.files = sorted(folder_candidates(folder.path), key=_newest)
        folder.by_id = {c.session_id: c for c in folder.files}
        return [(c.path, c.size, c.mtime_ns, c.ino) for c in folder.files] != before

    def _restat(self, folder: _Folder, hot_after: int, running: Collection[str]) -> bool | None:
        """Stat the hot files of a folder as its last scan saw them, taking their new size and
        mtime; True when one moved, None when one is no longer the same regular file there."""
        hot = []
        for c in folder.files:  # newest first: the hot ones lead
            if c.mtime_ns < hot_after:
                break
            hot.append(c)
        for sid in running:
            held = folder.by_id.get(sid)
            if held is not None and held.mtime_ns < hot_after:
                hot.append(held)
        grew = False
        for c in hot:
            self.stats += 1
            try:
                st = os.lstat(c.path)
            except OSError:
                return None
            if not stat.S_ISREG(st.st_mode) or (c.ino and st.st_ino != c.ino):  # 0: scandir had no inode
                return None
            if st.st_size != c.size or st.st_mtime_ns != c.mtime_ns:
                c.size, c.mtime_ns = st.st_size, st.st_mtime_ns
                grew = True
        if grew:
            folder.files.sort(key=_newest)
        return grew

    def _merge(self) -> bool:
        """``files`` from every folder's session files; True when it changed."""
        merged = newest_first(c for folder in self._folders for c in folder.files)
        files = tuple((c.session_id, c.path, c.size, c.mtime_ns) for c in merged)
        if files == self.files:
            return False
        self.files = files
        self.ids = frozenset(f[0] for f in files)
        return True


def _newest(c: Candidate) -> tuple[int, str]:
    return (-c.mtime_ns, c.session_id)
