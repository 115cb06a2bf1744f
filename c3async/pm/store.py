"""The pm.json format and the one safe way to change it.

Every change is: lock ``pm.json.lock`` (a sidecar, never the file that is replaced), read,
modify, write a temp file, fsync, ``os.replace``. Before the replace, the current good file is
kept as ``pm.json.bak``. A pm.json that does not parse is never overwritten: the change fails with
an error naming the file and that backup. Reads take no lock: a replace is atomic.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal, TypeVar

import msgspec

from ..ground import jsondoc
from ..ground.jsondoc import CorruptDocument
from ..ground.stateroot import project_state

__all__ = (
    "PM",
    "Decision",
    "Event",
    "Milestone",
    "PMCorrupt",
    "Task",
    "TimeEntry",
    "change",
    "load",
    "pm_path",
)

Status = Literal["backlog", "in_progress", "blocked", "done"]
Priority = Literal["p0", "p1", "p2", "p3"]
MilestoneStatus = Literal["open", "completed", "archived"]
T = TypeVar("T")


class TimeEntry(msgspec.Struct, kw_only=True):
    start: float
    end: float | None = None
    session: str | None = None


class Task(msgspec.Struct, kw_only=True):
    id: str
    title: str
    description: str = ""
    status: Status = "backlog"
    priority: Priority = "p2"
    due: str | None = None  # YYYY-MM-DD
    tags: list[str] = msgspec.field(default_factory=list)
    blocked_by: list[str] = msgspec.field(default_factory=list)
    milestone: str | None = None
    created: float = 0.0
    updated: float = 0.0
    sessions: list[str] = msgspec.field(default_factory=list)  # host sessions that created/touched it
    time: list[TimeEntry] = msgspec.field(default_factory=list)


class Milestone(msgspec.Struct, kw_only=True):
    id: str
    name: str
    status: MilestoneStatus = "open"
    due: str | None = None
    created: float = 0.0
    completed_at: float | None = None
    archived_at: float | None = None


class Decision(msgspec.Struct, kw_only=True):
    id: str
    text: str
    reasoning: str = ""
    task: str | None = None
    session: str | None = None
    ts: float = 0.0


class Event(msgspec.Struct, kw_only=True):
    """One change: what, to which task or milestone, from which session, and the new values."""

    ts: float
    action: str
    target: str | None = None
    session: str | None = None
    by: str = "agent"
    changes: dict[str, object] = msgspec.field(default_factory=dict)


class PM(msgspec.Struct, kw_only=True):
    version: int = 1
    tasks: list[Task] = msgspec.field(default_factory=list)
    milestones: list[Milestone] = msgspec.field(default_factory=list)
    decisions: list[Decision] = msgspec.field(default_factory=list)
    events: list[Event] = msgspec.field(default_factory=list)


# A pm.json that does not parse: the change fails, naming the file and its last good copy.
PMCorrupt = CorruptDocument


def pm_path(project: str) -> Path:
    return project_state(project) / "pm" / "pm.json"


def load(project: str) -> PM:
    """The current state, for reading (no lock: a replace is atomic; raises PMCorrupt)."""
    return jsondoc.read(pm_path(project), PM, PM)


def change(project: str, fn: Callable[[PM], T]) -> T:
    """Apply ``fn`` to the state under the lock and store the result, keeping the previous file
    as ``pm.json.bak``; ``fn``'s return value is returned. If ``fn`` raises, nothing is written."""
    return jsondoc.update(pm_path(project), PM, PM, fn, backup=True)


def now() -> float:
    return round(time.time(), 3)
