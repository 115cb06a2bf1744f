"""The task file's format and the one safe way to change it. The file is ``.c3/pm/pm.json`` (a
name the spec fixes: ``file_path`` is the one place that spells it).

Every change is: lock ``pm.json.lock`` (a sidecar, never the file that is replaced), read,
modify, write a temp file, fsync, ``os.replace``. Before the replace, the current good file is
kept as ``pm.json.bak``. A task file that does not parse is never overwritten: the change fails with
an error naming the file and that backup. Reads take no lock: a replace is atomic.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Literal, TypeVar

import msgspec

from ..ground import clock, jsondoc
from ..ground.errors import CorruptDocument
from ..ground.project import Project

__all__ = (
    "Decision",
    "Event",
    "Milestone",
    "Task",
    "TaskFile",
    "TaskFileCorrupt",
    "TimeEntry",
    "change",
    "file_path",
    "load",
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


class TaskFile(msgspec.Struct, kw_only=True):
    """Everything the task file holds."""

    version: int = 1
    tasks: list[Task] = msgspec.field(default_factory=list)
    milestones: list[Milestone] = msgspec.field(default_factory=list)
    decisions: list[Decision] = msgspec.field(default_factory=list)
    events: list[Event] = msgspec.field(default_factory=list)


# A task file that does not parse: the change fails, naming the file and its last good copy.
TaskFileCorrupt = CorruptDocument


def file_path(project: Project) -> Path:
    return project.state / "pm" / "pm.json"


def load(project: Project) -> TaskFile:
    """The current state, for reading (no lock: a replace is atomic; raises TaskFileCorrupt)."""
    path = file_path(project)
    return checked(jsondoc.read(path, TaskFile, TaskFile), path)


def change(project: Project, fn: Callable[[TaskFile], T]) -> T:
    """Apply ``fn`` to the state under the lock and store the result, keeping the previous file
    as ``pm.json.bak``; ``fn``'s return value is returned. If ``fn`` raises, nothing is written."""
    path = file_path(project)
    return jsondoc.update(path, TaskFile, TaskFile, lambda doc: fn(checked(doc, path)), backup=True)


DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")  # fullmatch; ASCII digits only (\d is Unicode)


def real_date(value: str) -> bool:
    """Is ``value`` a real date written YYYY-MM-DD?"""
    if DATE.fullmatch(value) is None:
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def checked(doc: TaskFile, path: Path) -> TaskFile:
    """``doc`` with every time in range (``ground.clock``): one out of range reads as unknown (0,
    or None where the field may be None), a time entry that did not start in range is dropped
    and one that ends before it starts ends when it starts; a due date that is no real date
    reads as none. Each kind said once. A task file is shared (a repository can ship one), so this
    is what every reader and every change sees."""

    def when(value: float | None, kind: str) -> float | None:
        return clock.event(value, f"a task store's {kind}", path, key="tasks")

    def due(value: str | None) -> str | None:
        if value is None or real_date(value):
            return value
        clock.event(value, "a task store's due date", path, key="tasks")
        return None

    for t in doc.tasks:
        t.created, t.updated = when(t.created, "created") or 0.0, when(t.updated, "updated") or 0.0
        t.due = due(t.due)
        entries = []
        for e in t.time:
            start = when(e.start, "time entry start")
            if start is not None:
                e.start = start
                if e.end is not None:
                    e.end = max(start, when(e.end, "time entry end") or start)
                entries.append(e)
        t.time = entries
    for m in doc.milestones:
        m.created, m.due = when(m.created, "created") or 0.0, due(m.due)
        m.completed_at, m.archived_at = when(m.completed_at, "completed_at"), when(m.archived_at, "archived_at")
    for d in doc.decisions:
        d.ts = when(d.ts, "decision ts") or 0.0
    for ev in doc.events:
        ev.ts = when(ev.ts, "event ts") or 0.0
    return doc


def now() -> float:
    return round(time.time(), 3)
