"""What moved, for the Hub's event stream: one watcher per Hub process, however many pages
are open.

Four times a second the watcher reads Claude Code's registry of running processes (who runs,
busy, idle or waiting) and ``prices.json``'s stat once, and stats each registered project's
marks and activity log; once a second it asks each project for its whole position
(``sessions.watch``): a stat of each file folded into its rows (token totals too: new ones from
an accountant, the Hub's own or a server's), of its live folder and transcript folders, and of
its hot transcripts; every ``catalog.watch.FULL_S`` a full pass over its transcripts. No
transcript is read. When a project's position moves, its version goes up and every stream
waiting on it (all projects, or that one) sends a ``change`` event.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

from ..ground import safefs
from ..live.running import read_registry
from ..sessions.watch import ProjectWatch, position
from ..usage.prices import prices_signature

__all__ = ("POLL_S", "ChangeFeed", "position")

POLL_S = 0.25
WHOLE_EVERY = 4  # polls: the marks, activity and registry at each, the rest (a stat pass) once a second


class ChangeFeed:
    """Versions per project, bumped by one polling task (``run``); streams ``wait`` on them."""

    def __init__(self, projects: Callable[[], list[str]]) -> None:
        self.projects = projects
        self.positions: dict[str, tuple] = {}
        self.versions: dict[str, int] = {}
        self.watches: dict[str, ProjectWatch] = {}
        self._projects: list[str] | None = None  # the registered projects, as the last whole poll read them
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

    def poll(self, full: bool | None = None, quick: bool = False) -> list[str]:
        """One pass over every registered project: the projects whose position moved.
        ``full``: as ``TranscriptWatch.poll`` (None: a full pass when one is due); ``quick``:
        the marks, the activity log and Claude Code's registry alone (``ProjectWatch.position``)."""
        moved = []
        self.polls += 1
        registry = read_registry()  # once a poll, for every project
        prices = prices_signature() or ()
        if not quick or self._projects is None:
            self._projects = self.projects()
            for gone in self.watches.keys() - set(self._projects):
                del self.watches[gone]
        for project in self._projects:
            try:
                watch = self.watches.get(project)
                if watch is None:
                    watch = self.watches[project] = ProjectWatch(project)
                now = watch.position(registry, prices, full, quick=quick)
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
            moved = await anyio.to_thread.run_sync(self.poll, None, self.polls % WHOLE_EVERY != 0)
            if moved:
                for project in moved:
                    self.versions[project] = self.versions.get(project, 0) + 1
                event, self._changed = self._changed, anyio.Event()
                event.set()
            self.primed.set()
            await anyio.sleep(POLL_S)
