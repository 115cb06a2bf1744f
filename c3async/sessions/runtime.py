"""The background work of a door that stays up, the MCP server and the Hub: one runtime, one set
of intervals, started by both over their projects (the server's one, the Hub's every listed one).

Jobs, each supervised (a failure is logged, said once if it is ours, and the job starts again after
a growing pause):

- ``watch``: one watcher (``Feed``) for every project, however many readers wait on it, polling
  in a thread of its own (the event loop wakes only when a project moved). Four times a second it
  reads Claude Code's registry and ``prices.json``'s stat once and stats each
  project's marks and activity log; once a second each project's whole position
  (``sessions.watch``: the files folded into rows, the live folder, the transcript folders and
  hot transcripts; every ``catalog.watch.FULL_S`` a full pass). No transcript is read. A project
  whose position moves gets a new version; readers waiting on it wake (the Hub's event stream,
  the server's resource list), and its marks and activity folds are brought up to date in memory.
- ``warm``: after the door's first answer (the server waits for ``initialize``), each project's
  catalog read once, so the first listing is a cache hit.
- ``account``: every ``ACCOUNT_S``, the token totals of each project whose inputs moved
  (``usage.account.account_if_changed``), then the runway the status line shows
  (``usage_report.refresh_runway``, when a rate limit was ever recorded; the Hub's also holds it
  for its Usage page); and every ``KEEP_S``, the keep pass (a listing:
  ``sessions.keep`` preserves what the policy covers before Claude Code's cleanup). The first
  pass waits for the warm scan: the first listing matters more.
- ``index`` (the Hub's): the search index brought up to date at start (a first build runs as a
  process of its own), stopped with the runtime.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from ..ground import safefs
from ..ground.errors import C3Error
from ..ground.project import Project

if TYPE_CHECKING:
    from .watch import ProjectWatch

__all__ = ("ACCOUNT_S", "KEEP_S", "POLL_S", "Feed", "Runtime", "supervised")

log = logging.getLogger("c3async.runtime")

POLL_S = 0.25  # the marks, the activity log and the registry: a mark reaches its row within this
WHOLE_EVERY = 4  # polls between two looks at a project's whole position (a new session: ~1 s)
PROJECTS_S = 10.0  # the projects listed again at least this often (else when their signature moves)
ACCOUNT_S = 60.0  # token totals brought up to date (each pass reads only bytes appended since)
KEEP_S = 3600.0  # the keep pass: a kept session nears the cut-off as time passes, not as files move
WARM_WAITS_S = 30.0  # the first accounting waits for the warm scan, at most this long
BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0)


async def supervised(name: str, job: Callable[[], Awaitable[None]]) -> None:
    """Run ``job``; when it fails, log it and start it again after a growing pause."""
    failures = 0
    while True:
        try:
            await job()
            return
        except Exception as exc:
            pause = BACKOFF_S[min(failures, len(BACKOFF_S) - 1)]
            failures += 1
            if isinstance(exc, C3Error):  # a refused or corrupt file: its message says it all, once
                safefs.warn_once(exc)
            else:
                log.exception("background task %s failed; restarting in %.0f s", name, pause)
            await anyio.sleep(pause)


class Feed:
    """Versions per project, bumped by one polling task (``run``); readers ``wait`` on them."""

    def __init__(self, projects: Callable[[], list[Project]]) -> None:
        self.projects = projects
        self.positions: dict[Project, tuple] = {}
        self.versions: dict[Project, int] = {}
        self.watches: dict[Project, ProjectWatch] = {}
        self._projects: list[Project] | None = None  # the projects, as last listed...
        self._projects_at: tuple[float, tuple] = (0.0, ())  # ...when, and at what signature
        self.polls = 0
        self.primed = anyio.Event()  # set after the first poll: the baseline a reader starts from
        self._changed = anyio.Event()

    def version(self, project: Project | None) -> int:
        """One project's version, or the sum over all (any change moves it)."""
        if project is not None:
            return self.versions.get(project, 0)
        return sum(self.versions.values())

    async def wait(self, project: Project | None, seen: int) -> int:
        """Return the version once it differs from ``seen`` (wait for the next poll if not)."""
        while self.version(project) == seen:
            await self._changed.wait()
        return self.version(project)

    def poll(self, full: bool | None = None, quick: bool = False) -> list[Project]:
        """One pass over every project: the projects whose position moved. ``full``: as
        ``TranscriptWatch.poll`` (None: a full pass when one is due); ``quick``: the marks, the
        activity log and Claude Code's registry alone (``ProjectWatch.position``)."""
        # Imported by the first poll, in its worker thread: a door's start (the server's
        # ``initialize``) does not wait for them.
        from ..catalog.watch import Tops
        from ..live.running import read_registry
        from ..stores.claude_dirs import roots
        from ..usage.prices import prices_signature
        from .projects import projects_signature
        from .watch import ProjectWatch

        moved = []
        self.polls += 1
        registry = read_registry(recheck=not quick)  # once a poll, for every project
        prices = prices_signature() or ()
        tops = None if quick else Tops.now(roots())  # once for every project's transcripts
        if not quick or self._projects is None:
            # Listing the projects reads a file per project: only when what they come from moved.
            sig, (at, before) = projects_signature(), self._projects_at
            if self._projects is None or sig != before or time.monotonic() - at >= PROJECTS_S:
                self._projects, self._projects_at = self.projects(), (time.monotonic(), sig)
            for gone in self.watches.keys() - set(self._projects):
                del self.watches[gone]
        for project in self._projects:
            try:
                watch = self.watches.get(project)
                if watch is None:
                    watch = self.watches[project] = ProjectWatch(project)
                now = watch.position(registry, prices, full, quick=quick, tops=tops)
            except Exception as exc:
                safefs.warn_once(exc)
                continue
            if self.positions.get(project) != now:
                if self.primed.is_set():  # a project listed since the baseline counts too
                    moved.append(project)
                self.positions[project] = now
        for project in moved:
            _fold(project)
        return moved

    async def run(self) -> None:
        """Poll in a thread of its own until cancelled; the event loop wakes only when a
        project moved (an idle door's loop then sleeps: each wake-up costs, on a busy or
        virtual machine more than the poll itself)."""
        stop = threading.Event()

        def polls() -> None:
            while not stop.is_set():
                moved = self.poll(None, self.polls % WHOLE_EVERY != 0)
                if moved or not self.primed.is_set():
                    try:
                        anyio.from_thread.run_sync(self._moved, moved)
                    except RuntimeError:  # the event loop is gone: the door is stopping
                        return
                stop.wait(POLL_S)

        try:
            await anyio.to_thread.run_sync(polls, abandon_on_cancel=True)
        finally:
            stop.set()  # an abandoned thread ends after the poll under way

    def _moved(self, moved: list[Project]) -> None:
        """In the event loop: the moved projects' versions bumped, their readers woken."""
        if moved:
            for project in moved:
                self.versions[project] = self.versions.get(project, 0) + 1
            event, self._changed = self._changed, anyio.Event()
            event.set()
        self.primed.set()


def _fold(project: Project) -> None:
    """A moved project's marks and activity folds, brought up to date in memory: the next
    listing reads nothing of them."""
    from ..stores import activity
    from ..stores.marks import MarkBook

    try:
        MarkBook(project).refresh()
        activity.log_fold(project).refresh()
    except (OSError, C3Error) as exc:
        safefs.warn_once(exc)


@dataclass
class Runtime:
    """The jobs above over ``projects``. ``after``: set once the door has answered its first
    request (the server's ``initialize``); the warm scan waits for it (at most ``ANSWER_WAITS_S``).
    ``index``: keep the search index current too (the Hub). ``release``: called after a job
    that read a lot (the server hands memory back to the OS). ``runway``: works out the runways
    after each accounting pass (default ``usage_report.refresh_runway``)."""

    projects: Callable[[], list[Project]]
    after: anyio.Event | None = None
    index: bool = False
    release: Callable[[bool], None] | None = None
    runway: Callable[[list[Project]], None] | None = None
    ANSWER_WAITS_S = 5.0

    def __post_init__(self) -> None:
        self.feed = Feed(self.projects)
        self.warmed = anyio.Event()
        self.kept_at: dict[Project, tuple[float, int]] = {}  # each project's last keep pass: when, at what version

    async def run(self) -> None:
        """Every job, until cancelled (start it in the door's task group)."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(supervised, "watch", self.feed.run)
            tg.start_soon(supervised, "warm", self._warm)
            tg.start_soon(supervised, "account", self._account)
            if self.index:
                tg.start_soon(_index)

    def stop(self) -> None:
        """What outlives a cancelled task: a first index build this process started."""
        from ..search.index import stop_background

        stop_background()

    async def _warm(self) -> None:
        if self.after is not None:
            with anyio.move_on_after(self.ANSWER_WAITS_S):
                await self.after.wait()
        try:
            await anyio.to_thread.run_sync(_scan_catalog, self.projects(), abandon_on_cancel=True)
        finally:
            self.warmed.set()
        if self.release is not None:
            await anyio.to_thread.run_sync(self.release, True)

    async def _account(self) -> None:
        with anyio.move_on_after(WARM_WAITS_S):
            await self.warmed.wait()
        while True:
            worked = False
            for project in await anyio.to_thread.run_sync(self.projects):
                worked |= await anyio.to_thread.run_sync(self.account_once, project, abandon_on_cancel=True)
            await anyio.to_thread.run_sync(_runway, self.projects(), self.runway, abandon_on_cancel=True)
            if worked and self.release is not None:
                await anyio.to_thread.run_sync(self.release, False)
            await anyio.sleep(ACCOUNT_S)

    def account_once(self, project: Project) -> bool:
        """One project's token totals, and its keep pass when the project moved since the last
        one, or ``KEEP_S`` passed; True when either did work."""
        from ..usage.account import account_if_changed  # loaded by the first run

        worked = False
        try:
            worked = account_if_changed(project, processes=False) is not None  # threads here: never fork
        except Exception as exc:  # a refused .c3 (a link, a FIFO), a read-only checkout...
            safefs.warn_once(RuntimeError(f"tokens and cost of {project} not brought up to date: {exc}"))
        last = self.kept_at.get(project)
        version = self.feed.version(project)
        if last is None or last[1] != version or time.monotonic() - last[0] >= KEEP_S:
            keep_pass(project)
            self.kept_at[project] = (time.monotonic(), version)
            worked = True
        return worked


def _runway(projects: list[Project], chore: Callable[[list[Project]], None] | None) -> None:
    """The runway the status line shows, worked out again from the accounting just done (the
    pace of the last quarter hour moves even when nothing is written): by ``chore`` when the
    door has one (the Hub's holds it for its Usage page too)."""
    from .usage_report import refresh_runway

    try:
        (chore or refresh_runway)(projects)
    except Exception as exc:  # a background chore: logged, never fatal
        log.warning("could not work out the runway: %s", exc)


def _scan_catalog(projects: list[Project]) -> None:
    from ..catalog.scan import scan_projects_sync

    # All of it in this worker thread (the stat pass and the cache too, not only the reads):
    # the event loop stays free for the protocol. No worker processes: this process has threads.
    scan_projects_sync(projects, processes=False)  # the result is not kept: the cache file is the point


def keep_pass(project: Project) -> None:
    """A listing brings the archive of kept sessions up to date (a copy on another device gets
    its new bytes), so a session kept long ago is current when Claude Code deletes it; and it
    preserves the kept sessions older than its rows that near the cut-off (``sessions.keep``)."""
    from .view import list_rows_sync

    try:
        list_rows_sync([project], processes=False)
    except Exception as exc:  # a background chore: logged, never fatal
        log.warning("could not refresh the archive of kept sessions of %s: %s", project, exc)


async def _index() -> None:
    """At start: index what is new, in a process of its own when it is a first build (abandoned
    when the runtime stops: an update in this process ends with it, SQLite rolls back)."""
    await anyio.to_thread.run_sync(_index_once, abandon_on_cancel=True)


def _index_once() -> None:
    from ..search.index import update
    from .search import INLINE_BYTES

    try:
        update(inline_max=INLINE_BYTES)
    except (C3Error, OSError) as exc:
        log.warning("search index: %s", exc)
