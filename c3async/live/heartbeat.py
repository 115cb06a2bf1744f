"""The heartbeat file, ``.c3/live/<c3_session_id>.json``, and the loop that keeps it fresh.

``{session_id, host_session_id, ide, pid, ts}`` as the spec says, plus what lets a reader judge
age without trusting the wall clock: the boot id and a monotonic reading (same boot: compare
monotonic clocks, which no clock step moves). Only its own MCP process writes a file; it is
replaced atomically every interval and deleted first thing on a clean shutdown.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from ..ground import clock, safefs
from ..ground.jsondoc import write_atomic
from ..ground.project import Project

__all__ = (
    "HEARTBEAT_INTERVAL_S",
    "HEARTBEAT_TTL_S",
    "Heartbeat",
    "HeartbeatWriter",
    "boot_id",
    "interval",
    "live_dir",
    "ttl",
)

log = logging.getLogger("c3async.live")

HEARTBEAT_INTERVAL_S = 60.0
HEARTBEAT_TTL_S = 180.0  # three missed beats


def _env_seconds(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


def interval() -> float:
    return _env_seconds("C3_HEARTBEAT_INTERVAL_S", HEARTBEAT_INTERVAL_S)


def ttl() -> float:
    return _env_seconds("C3_HEARTBEAT_TTL_S", HEARTBEAT_TTL_S)


_BOOT_ID: str | None = None


def boot_id() -> str | None:
    """This boot's id (Linux), so monotonic readings are compared only within one boot."""
    global _BOOT_ID
    if _BOOT_ID is None:
        try:
            _BOOT_ID = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        except OSError:
            _BOOT_ID = ""
    return _BOOT_ID or None


class Heartbeat(msgspec.Struct, kw_only=True):
    session_id: str  # the C3 session (this MCP process)
    host_session_id: str | None  # the Claude Code session it serves now
    ide: str
    pid: int
    ts: float  # wall-clock epoch seconds
    project: str | None = None  # the root: a heartbeat is a JSON file
    started: float | None = None
    boot_id: str | None = None
    mono: float | None = None
    # the claude process it runs under: two servers of one window (the plugin's and one added by
    # hand) are one MCP connection of that window, not two (``reader`` counts processes)
    host_pid: int | None = None

    def __post_init__(self) -> None:
        # A ts out of range (``ground.clock``): the file is judged by that ts alone, so it is
        # never fresh (however fresh its monotonic reading) and is pruned.
        if clock.event(self.ts, "a heartbeat's ts", "a file of .c3/live") is None:
            self.mono = None


def live_dir(project: Project) -> Path:
    return project.state / "live"


class HeartbeatWriter:
    """Writes one process's heartbeat. ``host`` is asked for the current host session on every
    beat, so a /clear (which changes it under a running server) shows within one interval."""

    def __init__(
        self,
        project: Project,
        session_id: str,
        ide: str,
        host: Callable[[], str | None],
        host_pid: Callable[[], int | None] | None = None,
        served: Callable[[Heartbeat], None] | None = None,
    ) -> None:
        self.project = project
        self.served = served  # told of each beat written: who remembers what was live
        self.host_pid = host_pid
        self.session_id = session_id
        self.ide = ide
        self.host = host
        self.path = live_dir(project) / f"{session_id}.json"
        self.started = time.time()
        self.stopped = False

    def beat(self) -> Heartbeat:
        hb = Heartbeat(
            session_id=self.session_id,
            host_session_id=self.host(),
            ide=self.ide,
            pid=os.getpid(),
            ts=time.time(),
            project=self.project.root,
            started=self.started,
            boot_id=boot_id(),
            mono=time.monotonic(),
            host_pid=self.host_pid() if self.host_pid is not None else None,
        )
        if not self.stopped:
            write_atomic(self.path, msgspec.json.encode(hb), fsync=False)
            if self.served is not None:
                self.served(hb)
        return hb

    def remove(self) -> None:
        """Delete the file: synchronous and cheap, so it runs before any slower teardown."""
        self.stopped = True
        try:
            safefs.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("could not remove heartbeat %s: %s", self.path, exc)

    async def run(self, every: float | None = None) -> None:
        """Beat until cancelled. A failed write (full disk, folder gone) is logged and retried
        next beat; it never ends the loop, so it never takes the server down."""
        import anyio

        every = every or interval()
        while not self.stopped:
            try:
                self.beat()
            except OSError as exc:
                log.warning("heartbeat write failed (%s); retrying in %.0f s", exc, every)
            await anyio.sleep(every)
