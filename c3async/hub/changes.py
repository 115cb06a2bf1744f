"""What moved, for the Hub's event stream: one watcher per Hub process, however many pages
are open.

Four times a second the watcher asks each registered project for its position: Claude Code's
registry of running processes (who runs, busy, idle or waiting), the marks, activity and
token-totals folds (which read only the bytes appended since, and keep their state
in memory for the listings too; the totals move when an accountant, the Hub's own or a
server's, writes new ones), ``prices.json`` (a new price re-prices every row), the heartbeat
names and times, and, once a second, the catalog's stat pass (each session file's size and
mtime; no transcript is read). When a project's position moves, its version goes up and every stream waiting on it (all projects, or that one) sends a ``change`` event.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

import anyio

from ..catalog.listing import candidates
from ..catalog.locate import locate
from ..ground import safefs
from ..ground.stateroot import project_state
from ..live.running import Snapshot, read_registry
from ..stores import activity, marks
from ..usage import totals as usage_totals
from ..usage.prices import prices_signature

__all__ = ("POLL_S", "ChangeFeed", "position")

log = logging.getLogger("c3async.hub")

POLL_S = 0.25  # marks, the activity log, token totals and heartbeats: a tail check each
FILES_EVERY = 4  # polls between two stat passes over the transcripts (the costly part: one stat a file)


def position(
    project: str, files: tuple | None = None, registry: Snapshot | None = None, prices: tuple | None = None
) -> tuple:
    """Everything whose change should refresh the project's rows, cheaply. ``files``: the
    transcripts' part as last taken (None: take it now, a stat per transcript); ``registry``:
    Claude Code's registry of running processes as read for this poll (None: read it now);
    ``prices``: ``prices.json``'s signature, as taken for this poll (None: take it now)."""
    book = marks.MarkBook(project).refresh()
    facts = activity.log_fold(project)
    facts.refresh()
    stats = usage_totals.stats_fold(project)  # new totals from an accountant (the Hub's own, a server's)
    stats.refresh()
    live = project_state(project) / "live"
    try:
        with safefs.open_dir(live) as dfd:
            beats = tuple(
                sorted(
                    (e.name, e.stat(follow_symlinks=False).st_mtime_ns)
                    for e in os.scandir(dfd if dfd is not None else live)
                )
            )
    except OSError:
        beats = ()
    if files is None:
        files = transcripts(project)
    if registry is None:
        registry = read_registry()
    ids = {f[0] for f in files}  # the running claudes of this project's sessions, and their states
    running = tuple(
        sorted(
            (r.session_id, r.pid, r.state or "", r.state_since or 0.0) for r in registry.running if r.session_id in ids
        )
    )
    return (
        running,
        tuple(sorted(registry.ended & ids)),
        book.fold.tail.ident,
        book.fold.tail.offset,
        facts.tail.ident,
        facts.tail.offset,
        stats.tail.ident,
        stats.tail.offset,
        beats,
        files,
        (prices_signature() or ()) if prices is None else prices,
    )


def transcripts(project: str) -> tuple:
    # The path too: a kept transcript Claude Code deleted is then read from the archive, a hard
    # link with the same size and mtime; only its path says the row changed (it is archived).
    return tuple(
        (c.session_id, c.path, c.size, c.mtime_ns) for c in candidates([f for f, _ in locate(project).folders])
    )


class ChangeFeed:
    """Versions per project, bumped by one polling task (``run``); streams ``wait`` on them."""

    def __init__(self, projects: Callable[[], list[str]]) -> None:
        self.projects = projects
        self.positions: dict[str, tuple] = {}
        self.versions: dict[str, int] = {}
        self.files: dict[str, tuple] = {}  # each project's transcripts, as the last stat pass saw them
        self.polls = 0
        self.primed = anyio.Event()  # set after the first poll: the baseline a stream starts from
        self._changed = anyio.Event()

    def version(self, project: str | None) -> int:
        """One project's version, or the sum over all (any change moves it)."""
        if project is not None:
            return self.versions.get(project, 0)
        return sum(self.versions.values())

    async def wait(self, project: str | None, seen: int) -> int:
        """Return the version once it differs from ``seen`` (wait for the next poll if not)."""
        while self.version(project) == seen:
            await self._changed.wait()
        return self.version(project)

    def _poll(self) -> list[str]:
        moved = []
        self.polls += 1
        registry = read_registry()  # once a poll, for every project
        prices = prices_signature() or ()
        for project in self.projects():
            try:
                if self.polls % FILES_EVERY == 1 or project not in self.files:
                    self.files[project] = transcripts(project)
                now = position(project, self.files[project], registry, prices)
            except Exception as exc:
                safefs.warn_once(exc)
                continue
            if self.positions.get(project) != now:
                if self.primed.is_set():  # a project registered since the baseline counts too
                    moved.append(project)
                self.positions[project] = now
        return moved

    async def run(self) -> None:
        while True:
            moved = await anyio.to_thread.run_sync(self._poll)
            if moved:
                for project in moved:
                    self.versions[project] = self.versions.get(project, 0) + 1
                event, self._changed = self._changed, anyio.Event()
                event.set()
            self.primed.set()
            await anyio.sleep(POLL_S)
