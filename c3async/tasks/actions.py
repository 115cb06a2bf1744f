"""The c3_task operations, shared by the MCP tool and the CLI.

Each takes the project, a ``Who`` (which host session acts, agent or user) and the call as its
action's struct (``schema``: what the action takes, read and checked before anything else), and
returns a plain dict (JSON for scripts; the front ends render it). ``run`` takes the call's text
as a tool receives it. Read actions never write: they are safe in plan mode. Every change is
recorded as an Event, and a task or decision changed from a session is linked to that session.
A delete leaves no link behind (blockers, milestones, decisions) and its event keeps what was
deleted. Refusals are ``ground.errors.TaskError``: written once, worded by each door in its syntax.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

import msgspec

from ..catalog.listing import is_session_id
from ..ground.errors import (
    Ambiguous,
    AmbiguousSession,
    Arg,
    Call,
    Conflict,
    TaskAmbiguous,
    TaskArgError,
    TaskError,
    TaskNotFound,
    clip,
)
from ..ground.project import Project
from ..ground.schema import UNSET, name_of
from . import schema, store
from .schema import (
    MAX_BLOCKED_BY,
    MAX_DECISION_REASONING,
    MAX_DECISION_TEXT,
    MAX_DESCRIPTION,
    MAX_MILESTONE_NAME,
    MAX_SHORT,
    MAX_TAG,
    MAX_TAGS,
    MAX_TITLE,
    MILESTONE_STATUSES,
    MIN_PREFIX,
    PRIORITIES,
    STATUSES,
    UPDATABLE,
)
from .store import Decision, Event, Milestone, Task, TaskFile, TimeEntry

__all__ = (
    "ACTIONS",
    "MAX_BLOCKED_BY",
    "MAX_DECISION_REASONING",
    "MAX_DECISION_TEXT",
    "MAX_DESCRIPTION",
    "MAX_MILESTONE_NAME",
    "MAX_SHORT",
    "MAX_TAG",
    "MAX_TAGS",
    "MAX_TITLE",
    "MILESTONE_STATUSES",
    "PRIORITIES",
    "READ_ACTIONS",
    "STATUSES",
    "Who",
    "run",
    "validate",
)


@dataclass
class Who:
    session: str | None = None  # the host session acting (linked to what it changes)
    by: str = "agent"


def _new_id() -> str:
    return uuid.uuid4().hex[:12]


def _task(doc: TaskFile, ref: str) -> Task:
    """The task ``ref`` (an id or a unique prefix, checked by ``schema``) names."""
    found = [t for t in doc.tasks if t.id.startswith(ref)]
    if len(found) > 1:
        raise AmbiguousSession(ref, [f"{t.id} ({t.title})" for t in found])
    if not found:
        raise TaskNotFound("no task has the id {ref} (`{listing}` shows them)", ref=repr(ref), listing=Call("list"))
    return found[0]


def _decision(doc: TaskFile, ref: str) -> Decision:
    found = [d for d in doc.decisions if d.id.startswith(ref)]
    if len(found) > 1:
        names = ", ".join(f"{d.id} ({clip(d.text, 40)})" for d in found[:10])
        raise TaskAmbiguous(
            "the id prefix {ref} matches {n} decisions: {names}. Give more characters.",
            ref=repr(ref),
            n=str(len(found)),
            names=names,
        )
    if not found:
        raise TaskNotFound(
            "no decision has the id {ref} (`{listing}` shows them)", ref=repr(ref), listing=Call("decisions")
        )
    return found[0]


def _milestone(doc: TaskFile, ref: str) -> Milestone:
    """The milestone ``ref`` names: its id, a unique prefix of it, or its name."""
    by_id = [m for m in doc.milestones if m.id == ref or (len(ref) >= MIN_PREFIX and m.id.startswith(ref.lower()))]
    if len(by_id) == 1:
        return by_id[0]
    by_name = [m for m in doc.milestones if m.name.casefold() == ref.casefold()]
    if len(by_name) == 1:
        return by_name[0]
    if len(by_id) + len(by_name) > 1:
        names = ", ".join(f"{m.id} ({m.name}, {m.status})" for m in by_id + by_name)
        raise Ambiguous(f"milestone {ref!r} is ambiguous: {names}; use the id")
    raise TaskNotFound(
        "no milestone {ref} (`{add}` creates one)", ref=repr(ref), add=Call("milestone_add", (("milestone", "..."),))
    )


def validate(action: str, **args: str) -> str:
    """The action's name, normalised, once every check that needs no file has passed
    (``schema.read``). Nothing is logged or written before this passes."""
    return name_of(type(schema.read(action, **args)))


# The operation of each action: fn(project, who, call)
_DO: dict[type[schema.Action], Callable[[Project, Who, Any], dict]] = {}


def _does(
    action: type[schema.Action],
) -> Callable[[Callable[[Project, Who, Any], dict]], Callable[[Project, Who, Any], dict]]:
    """Make the decorated function the operation of ``action``."""

    def register(fn: Callable[[Project, Who, Any], dict]) -> Callable[[Project, Who, Any], dict]:
        _DO[action] = fn
        return fn

    return register


def _touch(task: Task, who: Who) -> None:
    task.updated = store.now()
    if who.session and who.session not in task.sessions:
        task.sessions.append(who.session)


def _event(doc: TaskFile, who: Who, action: str, target: str | None, **changes: Any) -> None:
    doc.events.append(
        Event(
            ts=store.now(),
            action=action,
            target=target,
            session=who.session,
            by=who.by,
            changes={k: v for k, v in changes.items() if v is not None},
        )
    )


def _view(task: Task) -> dict[str, Any]:
    out = msgspec.to_builtins(task)
    open_timer = next((e for e in task.time if e.end is None), None)
    out["tracked_s"] = round(sum((e.end or store.now()) - e.start for e in task.time), 1)
    out["timer_running"] = open_timer is not None
    del out["time"]
    return out


# ------------------------------------------------------------------ changes


@_does(schema.Add)
def add(project: Project, who: Who, call: schema.Add) -> dict:
    def fn(doc: TaskFile) -> dict:
        task = Task(
            id=_new_id(),
            title=call.title,
            description=call.description,
            status=call.status,
            priority=call.priority,
            due=call.due,
            tags=list(call.tags),
            created=store.now(),
        )
        if call.milestone is not None:
            task.milestone = _milestone(doc, call.milestone).id
        task.blocked_by = [_task(doc, ref).id for ref in call.blocked_by]
        _touch(task, who)
        doc.tasks.append(task)
        _event(doc, who, "add", task.id, title=task.title, status=task.status, priority=task.priority)
        return _view(task)

    return store.change(project, fn)


@_does(schema.Update)
def update(project: Project, who: Who, call: schema.Update) -> dict:
    """Change what the call gives (``UPDATABLE``); a milestone or blockers of ``none`` clear them."""

    def fn(doc: TaskFile) -> dict:
        task = _task(doc, call.task_id)
        changes: dict[str, Any] = {}
        for name in UPDATABLE:
            value = getattr(call, name)
            if value is UNSET:
                continue
            if name == "milestone" and value is not None:
                value = _milestone(doc, value).id
            elif name == "blocked_by":
                value = [_task(doc, ref).id for ref in value]
            setattr(task, name, value)
            changes[name] = value
        if not changes:
            raise TaskArgError(
                "{action} changed nothing: give " + ", ".join(f"{{{n}}}" for n in UPDATABLE[:-1]) + " or {last}",
                last=Arg(UPDATABLE[-1]),
                **{name: Arg(name) for name in UPDATABLE[:-1]},
            )
        _touch(task, who)
        _event(doc, who, "update", task.id, **changes)
        return _view(task)

    return store.change(project, fn)


@_does(schema.Link)
def link(project: Project, who: Who, call: schema.Link) -> dict:
    if call.ref is UNSET:  # the session acting
        if not who.session:
            raise TaskArgError("{arg}='current' needs a current session; give a session id", arg=Arg("ref"))
        session = who.session
    elif is_session_id(call.ref):
        session = call.ref
    else:  # a prefix reaches the store only past a door that did not resolve it
        raise TaskArgError(
            "{arg} must be 'current' or a full session id (a UUID) here, got {got}", arg=Arg("ref"), got=repr(call.ref)
        )

    def fn(doc: TaskFile) -> dict:
        task = _task(doc, call.task_id)
        if session not in task.sessions:
            task.sessions.append(session)
        task.updated = store.now()
        _event(doc, who, "link", task.id, session=session)
        return {**_view(task), "session": session}  # the session linked

    return store.change(project, fn)


@_does(schema.Decide)
def decide(project: Project, who: Who, call: schema.Decide) -> dict:
    def fn(doc: TaskFile) -> dict:
        task = _task(doc, call.task_id).id if call.task_id is not None else None
        d = Decision(
            id=_new_id(), text=call.text, reasoning=call.reasoning, task=task, session=who.session, ts=store.now()
        )
        doc.decisions.append(d)
        _event(doc, who, "decide", d.id, task=task)
        return msgspec.to_builtins(d)

    return store.change(project, fn)


@_does(schema.MilestoneAdd)
def milestone_add(project: Project, who: Who, call: schema.MilestoneAdd) -> dict:
    """A new open milestone named by ``milestone`` or ``title`` (what a task is named by)."""
    if call.milestone and call.title and call.milestone != call.title:
        raise TaskArgError(
            "{action} takes one name: give {milestone} or {title}, not both",
            milestone=Arg("milestone"),
            title=Arg("title"),
        )
    name = call.milestone or call.title
    if not name:
        raise TaskArgError("{action} needs {arg}: its name", arg=Arg("milestone"))

    def fn(doc: TaskFile) -> dict:
        if any(m.name.casefold() == name.casefold() and m.status != "archived" for m in doc.milestones):
            raise Conflict(f"a milestone named {name!r} exists already")
        m = Milestone(id=_new_id(), name=name, due=call.due, created=store.now())
        doc.milestones.append(m)
        _event(doc, who, "milestone_add", m.id, name=name)
        return msgspec.to_builtins(m)

    return store.change(project, fn)


@_does(schema.MilestoneComplete)
def milestone_complete(project: Project, who: Who, call: schema.MilestoneComplete) -> dict:
    def fn(doc: TaskFile) -> dict:
        m = _milestone(doc, call.milestone)
        if m.status != "open":
            raise Conflict(f"milestone {m.name!r} is {m.status}, not open")
        still_open = [t for t in doc.tasks if t.milestone == m.id and t.status != "done"]
        if still_open:
            names = "; ".join(f"{t.id[:8]} {t.title} ({t.status})" for t in still_open)
            raise Conflict(
                f"milestone {m.name!r} still has {len(still_open)} open task(s): {names}. "
                "Finish them or move them to another milestone first."
            )
        m.status, m.completed_at = "completed", store.now()
        _event(doc, who, "milestone_complete", m.id)
        return msgspec.to_builtins(m)

    return store.change(project, fn)


@_does(schema.MilestoneReopen)
def milestone_reopen(project: Project, who: Who, call: schema.MilestoneReopen) -> dict:
    def fn(doc: TaskFile) -> dict:
        m = _milestone(doc, call.milestone)
        if m.status != "completed":
            raise Conflict(f"milestone {m.name!r} is {m.status}; only a completed one can be reopened")
        m.status, m.completed_at = "open", None
        _event(doc, who, "milestone_reopen", m.id)
        return msgspec.to_builtins(m)

    return store.change(project, fn)


@_does(schema.MilestoneArchive)
def milestone_archive(project: Project, who: Who, call: schema.MilestoneArchive) -> dict:
    """Archive a milestone and detach its tasks (what shipped under it survives only in the
    event log: `milestone_complete` keeps the links)."""

    def fn(doc: TaskFile) -> dict:
        m = _milestone(doc, call.milestone)
        detached = [t.id for t in doc.tasks if t.milestone == m.id]
        for t in doc.tasks:
            if t.milestone == m.id:
                t.milestone = None
                t.updated = store.now()
        m.status, m.archived_at = "archived", store.now()
        _event(doc, who, "milestone_archive", m.id, detached=detached)
        return {**msgspec.to_builtins(m), "detached": detached}

    return store.change(project, fn)


@_does(schema.TimeStart)
def time_start(project: Project, who: Who, call: schema.TimeStart) -> dict:
    def fn(doc: TaskFile) -> dict:
        task = _task(doc, call.task_id)
        if any(e.end is None for e in task.time):
            raise Conflict(f"the timer of task {task.id[:8]} is already running")
        task.time.append(TimeEntry(start=store.now(), session=who.session))
        _touch(task, who)
        _event(doc, who, "time_start", task.id)
        return _view(task)

    return store.change(project, fn)


@_does(schema.TimeStop)
def time_stop(project: Project, who: Who, call: schema.TimeStop) -> dict:
    def fn(doc: TaskFile) -> dict:
        task = _task(doc, call.task_id)
        entry = next((e for e in task.time if e.end is None), None)
        if entry is None:
            raise Conflict(f"no timer is running on task {task.id[:8]}")
        entry.end = store.now()
        _touch(task, who)
        _event(doc, who, "time_stop", task.id, seconds=round(entry.end - entry.start, 1))
        return _view(task)

    return store.change(project, fn)


@_does(schema.Delete)
def delete(project: Project, who: Who, call: schema.Delete) -> dict:
    """Remove a task and every link to it: other tasks' ``blocked_by`` lose it, decisions about
    it keep their text and lose the task. The event keeps the whole task, so what was deleted
    can still be read in the log."""

    def fn(doc: TaskFile) -> dict:
        task = _task(doc, call.task_id)
        waited = [t for t in doc.tasks if task.id in t.blocked_by]
        for t in waited:
            t.blocked_by = [b for b in t.blocked_by if b != task.id]
            t.updated = store.now()
        about_it = [d for d in doc.decisions if d.task == task.id]
        for d in about_it:
            d.task = None
        doc.tasks.remove(task)
        unlinked = {"blocked_by": [t.id for t in waited], "decisions": [d.id for d in about_it]}
        _event(doc, who, "delete", task.id, title=task.title, task=msgspec.to_builtins(task), unlinked=unlinked)
        return {**_view(task), "unlinked": unlinked}

    return store.change(project, fn)


@_does(schema.MilestoneDelete)
def milestone_delete(project: Project, who: Who, call: schema.MilestoneDelete) -> dict:
    """Remove a milestone, whatever its status, and detach its tasks (they stay)."""

    def fn(doc: TaskFile) -> dict:
        m = _milestone(doc, call.milestone)
        detached = [t for t in doc.tasks if t.milestone == m.id]
        for t in detached:
            t.milestone = None
            t.updated = store.now()
        doc.milestones.remove(m)
        shown = msgspec.to_builtins(m)
        _event(doc, who, "milestone_delete", m.id, name=m.name, milestone=shown, detached=[t.id for t in detached])
        return {**shown, "detached": [t.id for t in detached]}

    return store.change(project, fn)


@_does(schema.DecisionDelete)
def decision_delete(project: Project, who: Who, call: schema.DecisionDelete) -> dict:
    """Remove a decision note (``ref``: its id or a unique prefix); the event keeps its text."""

    def fn(doc: TaskFile) -> dict:
        d = _decision(doc, call.ref)
        doc.decisions.remove(d)
        shown = msgspec.to_builtins(d)
        _event(doc, who, "decision_delete", d.id, decision=shown)
        return shown

    return store.change(project, fn)


# ------------------------------------------------------------------ reads (never write)


@_does(schema.Get)
def get(project: Project, who: Who, call: schema.Get) -> dict:
    doc = store.load(project)
    task = _task(doc, call.task_id)
    out = _view(task)
    out["decisions"] = [msgspec.to_builtins(d) for d in doc.decisions if d.task == task.id]
    return out


def _closed_milestones(doc: TaskFile) -> set[str]:
    """The ids of completed and archived milestones."""
    return {m.id for m in doc.milestones if m.status != "open"}


def _shown_by_default(doc: TaskFile) -> list[Task]:
    """The tasks a default `list` and the board show: all but the finished work of a completed
    or archived milestone (those tasks keep their link; `list` with `milestone` or `status`
    shows them). An open task is never hidden, whatever its milestone."""
    closed = _closed_milestones(doc)
    return [t for t in doc.tasks if not (t.status == "done" and t.milestone in closed)]


@_does(schema.List)
def list_(project: Project, who: Who, call: schema.List) -> dict:
    """Tasks, filtered. Without ``milestone`` or ``status``, the done tasks of completed and
    archived milestones are left out; ``status='all'`` (or any status, or the milestone named)
    brings them back."""
    doc = store.load(project)
    tasks = doc.tasks
    if call.status is not UNSET:
        if "all" not in call.status:
            tasks = [t for t in tasks if t.status in call.status]
    elif call.milestone is UNSET:
        tasks = _shown_by_default(doc)
    if call.priority is not UNSET:
        tasks = [t for t in tasks if t.priority in call.priority]
    if call.tags is not UNSET:
        wanted_tags = set(call.tags)
        tasks = [t for t in tasks if wanted_tags & set(t.tags)]
    if call.milestone is not UNSET:
        mid = _milestone(doc, call.milestone).id
        tasks = [t for t in tasks if t.milestone == mid]
    if call.due is not UNSET:
        due = call.due  # None (`none`): no date is on or before it
        tasks = [t for t in tasks if t.due is not None and due is not None and t.due <= due]
    tasks = sorted(tasks, key=lambda t: (t.status == "done", t.priority, t.due or "9999", -t.updated))
    return {"tasks": [_view(t) for t in tasks]}


def _milestone_order(m: Milestone) -> tuple:
    """By due date (none last), then name, then id."""
    return (m.due is None, m.due or "", m.name.casefold(), m.id)


@_does(schema.Board)
def board(project: Project, who: Who, call: schema.Board) -> dict:
    """``columns``: status -> tasks, every task a default `list` shows (the done tasks of
    completed and archived milestones leave the board). ``milestones``: each open milestone,
    in `milestones` order, with its own tasks in the same columns."""
    doc = store.load(project)
    opened = sorted((m for m in doc.milestones if m.status == "open"), key=_milestone_order)
    columns: dict[str, list[dict]] = {s: [] for s in STATUSES}
    groups: dict[str, dict[str, list[dict]]] = {m.id: {s: [] for s in STATUSES} for m in opened}
    for t in sorted(_shown_by_default(doc), key=lambda t: (t.priority, -t.updated)):
        card = {"id": t.id, "title": t.title, "priority": t.priority}
        columns[t.status].append(card)
        if t.milestone in groups:
            groups[t.milestone][t.status].append(dict(card))
    return {
        "columns": columns,
        "milestones": [{"id": m.id, "name": m.name, "due": m.due, "columns": groups[m.id]} for m in opened],
    }


@_does(schema.Report)
def report(project: Project, who: Who, call: schema.Report) -> dict:
    """What is blocking (open tasks others wait on), and what is ready to unblock (blocked
    tasks whose blockers are all done)."""
    doc = store.load(project)
    by_id = {t.id: t for t in doc.tasks}
    waiting: dict[str, list[str]] = {}
    ready: list[dict] = []
    blocked: list[dict] = []
    for t in doc.tasks:
        if t.status == "done":
            continue
        open_blockers = [b for b in t.blocked_by if b in by_id and by_id[b].status != "done"]
        for b in open_blockers:
            waiting.setdefault(b, []).append(t.id)
        if t.status == "blocked" or t.blocked_by:
            (blocked if open_blockers else ready).append({"id": t.id, "title": t.title, "waiting_on": open_blockers})
    blocking = [
        {"id": b, "title": by_id[b].title, "status": by_id[b].status, "blocks": ids} for b, ids in waiting.items()
    ]
    today = date.today().isoformat()
    overdue = [
        {"id": t.id, "title": t.title, "due": t.due}
        for t in doc.tasks
        if t.status != "done" and t.due and t.due < today
    ]
    return {"blocking": blocking, "ready_to_unblock": ready, "still_blocked": blocked, "overdue": overdue}


def _for_task(doc: TaskFile, task_id: str | None, items: list, field: str) -> list:
    """``items`` whose ``field`` is the task ``task_id`` names (all of them without one)."""
    if task_id is None:
        return items
    tid = _task(doc, task_id).id
    return [x for x in items if getattr(x, field) == tid]


@_does(schema.History)
def history(project: Project, who: Who, call: schema.History) -> dict:
    doc = store.load(project)
    return {"events": [msgspec.to_builtins(e) for e in _for_task(doc, call.task_id, doc.events, "target")[-200:]]}


@_does(schema.Decisions)
def decisions(project: Project, who: Who, call: schema.Decisions) -> dict:
    doc = store.load(project)
    return {"decisions": [msgspec.to_builtins(d) for d in _for_task(doc, call.task_id, doc.decisions, "task")[-100:]]}


@_does(schema.TimeReport)
def time_report(project: Project, who: Who, call: schema.TimeReport) -> dict:
    doc = store.load(project)
    tasks = [_task(doc, call.task_id)] if call.task_id is not None else doc.tasks
    rows = [
        {
            "id": t.id,
            "title": t.title,
            "tracked_s": _view(t)["tracked_s"],
            "running": any(e.end is None for e in t.time),
        }
        for t in tasks
        if t.time
    ]
    return {"tasks": rows, "total_s": round(sum(r["tracked_s"] for r in rows), 1)}


@_does(schema.Milestones)
def milestones(project: Project, who: Who, call: schema.Milestones) -> dict:
    """Milestones with their task counts: open ones by default; ``status`` takes open,
    completed, archived (comma-separated) or all. Sorted by due date (none last), then name.
    An archived milestone's tasks were detached when it was archived, so its counts are 0."""
    doc = store.load(project)
    by_milestone: dict[str, list[Task]] = {}
    for t in doc.tasks:
        if t.milestone:
            by_milestone.setdefault(t.milestone, []).append(t)
    rows = []
    for m in sorted((m for m in doc.milestones if m.status in call.status), key=_milestone_order):
        tasks = by_milestone.get(m.id, [])
        still_open = sorted(
            (t for t in tasks if t.status != "done"),
            key=lambda t: (t.priority, t.due or "9999", t.title.casefold(), t.id),
        )
        rows.append(
            {
                **msgspec.to_builtins(m),  # the milestone as stored, every field
                "tasks": {"total": len(tasks), "done": len(tasks) - len(still_open), "open": len(still_open)},
                "open_tasks": [
                    {"id": t.id, "title": t.title, "status": t.status, "priority": t.priority} for t in still_open
                ],
            }
        )
    return {"milestones": rows}


ACTIONS = tuple(schema.BY_NAME)
READ_ACTIONS = schema.READS


def run(project: Project, who: Who, action: str, **args: str) -> dict:
    """The call of ``action`` with the text ``args``, read (``schema.read``) and done. Raises
    C3Error; a TaskError says which action failed (``action``) for a door to word."""
    call = schema.read(action, **args)
    try:
        return _DO[type(call)](project, who, call)
    except TaskError as exc:
        exc.action = name_of(type(call))
        raise
