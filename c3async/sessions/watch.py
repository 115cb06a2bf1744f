"""What moved in a project, cheaply: the position a watcher compares from one poll to the next
(the Hub's change feed, the MCP server's resource list and archive).

A position holds what a project's rows are made of: its transcripts (``catalog.watch``: the
folders, the hot files, a full pass now and then), the stat (inode, size, mtime) of each file
folded into rows (the marks, the activity log, the token totals, ``pm.json``, the project's
``config.json``), the heartbeats' names and whether each is fresh (the live folder is listed
only when its own stat moved), the claudes running its sessions (Claude Code's registry, read
once a poll by the caller) and ``prices.json``. Nothing is read or folded here: a moved position
tells the caller to list again, and the listing reads.

Idle, a poll costs a stat per file above and per transcript folder, and one per hot transcript:
a Hub over 50 projects stats a few hundred files a poll, not every transcript.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..catalog.watch import SLACK_S, Tops, TranscriptWatch
from ..ground import safefs
from ..ground.project import Project
from ..ground.safefs import stamp
from ..live.heartbeat import ttl
from ..live.running import Snapshot, read_registry
from ..stores import claude_dirs
from ..usage.prices import prices_signature

__all__ = ("ProjectWatch", "position")

# The files folded into a project's rows, under its state folder; a quick poll stats the first
# QUICK alone (a mark appends its activity row too: one move, not two).
QUICK = 2
WATCHED = ("session_marks.jsonl", "activity.jsonl", "session_stats.jsonl", "pm/pm.json", "config.json")


class ProjectWatch:
    """One project's position, kept current by ``position`` (a poll)."""

    def __init__(self, project: Project) -> None:
        self.transcripts = TranscriptWatch(project.root, claude_dirs.roots)
        state = project.state
        self.logs = tuple(str(state / name) for name in WATCHED)
        self.live = str(state / "live")
        self._live_sig: tuple | bool | None = False  # the live folder's stat when last listed
        self._beats: tuple[tuple[str, int], ...] = ()  # each heartbeat's name and mtime, as listed
        self._rest: tuple | None = None  # what a quick poll takes from the last whole one

    def position(
        self,
        registry: Snapshot,
        prices: tuple,
        full: bool | None = None,
        *,
        quick: bool = False,
        tops: Tops | None = None,
    ) -> tuple:
        """The position now. ``registry``: Claude Code's registry as read for this poll;
        ``prices``: ``prices.json``'s signature then; ``full``: as ``TranscriptWatch.poll``;
        ``tops``: the Claude Code roots as taken for this poll;
        ``quick``: the marks, the activity log and the registry alone, the rest as the last poll
        found it (a watcher that wants a mark in a quarter of a second, a new session within a
        second)."""
        watch = self.transcripts
        if not quick or self._rest is None:
            watch.poll(full, {r.session_id for r in registry.running}, tops=tops)
            self._rest = (tuple(stamp(path) for path in self.logs[QUICK:]), self._heartbeats(full is True), watch.files)
        ids = watch.ids
        return (
            tuple(
                sorted(
                    (r.session_id, r.pid, r.state or "", r.state_since or 0.0)
                    for r in registry.running
                    if r.session_id in ids
                )
            ),
            tuple(sorted(registry.ended & ids)),
            tuple(stamp(path) for path in self.logs[:QUICK]),
            *self._rest,
            prices,
        )

    def poll(self, full: bool | None = None) -> tuple:
        """The position now, with the registry and ``prices.json`` read for this project alone."""
        return self.position(read_registry(), prices_signature() or (), full)

    def _heartbeats(self, full: bool) -> tuple:
        """Each heartbeat's name and whether it was written within the TTL: a live server's
        beat moves nothing, one that starts, stops or goes stale does. The folder is listed
        again only when its stat moved (a beat is written aside and renamed in) or was close to
        the last listing; freshness is judged from the mtimes listed, at every poll."""
        sig = stamp(self.live)
        if full or sig != self._live_sig or (sig is not None and sig[2] >= time.time_ns() - int(SLACK_S * 1e9)):
            self._live_sig = sig
            self._beats = _beats(Path(self.live)) if sig is not None else ()
        fresh_after = time.time_ns() - int(ttl() * 1e9)
        return tuple((name, mtime_ns > fresh_after) for name, mtime_ns in self._beats)


def _beats(live: Path) -> tuple[tuple[str, int], ...]:
    try:
        with safefs.open_dir(live) as dfd, os.scandir(dfd if dfd is not None else live) as it:
            # closed even when a heartbeat vanishes between the listing and its stat
            return tuple(sorted((e.name, e.stat(follow_symlinks=False).st_mtime_ns) for e in it))
    except OSError:
        return ()


def position(project: Project) -> tuple:
    """A project's position taken afresh: every folder scanned, every file stat'ed."""
    return ProjectWatch(project).poll(full=True)
