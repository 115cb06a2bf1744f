"""The c3_task operations, shared by the MCP tool, the CLI and the Hub.

Each takes the project, a ``Who`` (which host session and C3 session act, agent or user) and
string arguments as a tool receives them, and returns a plain dict (JSON for scripts; the
front ends render it). Read actions never write: they are safe in plan mode. Every change is
recorded as an Event, and a task or decision changed from a session is linked to that session.
A delete leaves no link behind (blockers, milestones, decisions) and its event keeps what was
deleted. Refusals are ``ground.errors.TaskError``: written once, worded by each door in its syntax.

Limits, in characters: a task title ``MAX_TITLE`` (500), a description ``MAX_DESCRIPTION``
(20,000), a decision's text and reasoning ``MAX_DECISION_TEXT`` / ``MAX_DECISION_REASONING``
(8,000 each), a milestone name ``MAX_MILESTONE_NAME`` (200), at most ``MAX_TAGS`` (50) tags of
``MAX_TAG`` (64) each, at most ``MAX_BLOCKED_BY`` (50) blockers, and ``MAX_SHORT`` (200) for an
id, a status, a priority, a date or a link type. ``validate`` checks them (and refuses NUL and
lone surrogates) before anything is logged or written.
"""

from __future__ import annotations

import re
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
    BadArgument,
    Call,
    Conflict,
    TaskAmbiguous,
    TaskArgError,
    TaskError,
    TaskNotFound,
    check_text,
    clip,
)
from . import store
from .store import PM, Decision, Event, Milestone, Task, TimeEntry

__all__ = ("ACTIONS", "READ_ACTIONS", "Who", "run", "validate")

STATUSES = ("backlog", "in_progress", "blocked", "done")
PRIORITIES = ("p0", "p1", "p2", "p3")
MIN_PREFIX = 4
MAX_TITLE = 500
MAX_DESCRIPTION = 20_000
MAX_DECISION_TEXT = 8_000
MAX_DECISION_REASONING = 8_000
MAX_MILESTONE_NAME = 200
MAX_TAGS = 50
MAX_TAG = 64
MAX_BLOCKED_BY = 50
MAX_SHORT = 200  # a task id, status, priority, due date, link type or session ref
# Per argument of c3_task; "text" and "reasoning" belong to `decide`.
LIMITS = {
    "title": MAX_TITLE,
    "description": MAX_DESCRIPTION,
    "text": MAX_DECISION_TEXT,
    "reasoning": MAX_DECISION_REASONING,
    "milestone": MAX_MILESTONE_NAME,
    "tags": MAX_TAGS * (MAX_TAG + 2),
    "blocked_by": MAX_BLOCKED_BY * (MAX_SHORT // 2),
}
# fullmatch everywhere: `$` would also accept a final newline. ASCII digits only (\d is Unicode).
_TASK_REF = re.compile(rf"[0-9a-z_-]{{{MIN_PREFIX},64}}")


@dataclass
class Who:
    session: str | None = None  # the host session acting (linked to what it changes)
    by: str = "agent"


def _new_id() -> str:
    return uuid.uuid4().hex[:12]


def _shown(value: str, limit: int = 60) -> str:
    return repr(clip(value, limit))


def _id_ref(ref: str, arg: str, kind: str, listing: str) -> str:
    """A typed id or id prefix of a ``kind`` (task, decision), checked; ``arg`` is the argument
    that held it and ``listing`` the read action that shows the ids."""
    ref = (ref or "").strip(" \t").lower()  # spaces around a pasted id; never a newline
    parts: dict[str, str | Arg | Call] = {
        "arg": Arg(arg),
        "kind": kind,
        "least": str(MIN_PREFIX),
        "got": _shown(ref),
        "listing": Call(listing),
    }
    if not ref:
        raise TaskArgError("{action} needs {arg}: a {kind} id or a unique prefix of {least}+ characters", **parts)
    if len(ref) < MIN_PREFIX:
        raise TaskArgError("{arg} needs at least {least} characters of a {kind} id, got {got}", **parts)
    if _TASK_REF.fullmatch(ref) is None:
        raise TaskArgError(
            "{got} is not a {kind} id: {kind} ids are letters, digits, '-' and '_' (`{listing}` shows them)", **parts
        )
    return ref


def _task(pm: PM, ref: str, arg: str = "task_id") -> Task:
    ref = _id_ref(ref, arg, "task", "list")
    found = [t for t in pm.tasks if t.id.startswith(ref)]
    if len(found) > 1:
        raise AmbiguousSession(ref, [f"{t.id} ({t.title})" for t in found])
    if not found:
        raise TaskNotFound("no task has the id {ref} (`{listing}` shows them)", ref=repr(ref), listing=Call("list"))
    return found[0]


def _decision(pm: PM, ref: str) -> Decision:
    ref = _id_ref(ref, "ref", "decision", "decisions")
    found = [d for d in pm.decisions if d.id.startswith(ref)]
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


def _milestone(pm: PM, ref: str) -> Milestone:
    ref = (ref or "").strip(" \t")  # never strip a newline from a ref
    if not ref:
        raise TaskArgError("{action} needs {arg}: a milestone id or its unique name", arg=Arg("milestone"))
    by_id = [m for m in pm.milestones if m.id == ref or (len(ref) >= MIN_PREFIX and m.id.startswith(ref.lower()))]
    if len(by_id) == 1:
        return by_id[0]
    by_name = [m for m in pm.milestones if m.name.casefold() == ref.casefold()]
    if len(by_name) == 1:
        return by_name[0]
    if len(by_id) + len(by_name) > 1:
        names = ", ".join(f"{m.id} ({m.name}, {m.status})" for m in by_id + by_name)
        raise Ambiguous(f"milestone {ref!r} is ambiguous: {names}; use the id")
    raise TaskNotFound(
        "no milestone {ref} (`{add}` creates one)", ref=repr(ref), add=Call("milestone_add", (("milestone", "..."),))
    )


def _choice(value: str, allowed: tuple[str, ...], name: str) -> str:
    value = value.strip().lower()
    if value not in allowed:
        raise TaskArgError(
            "{arg} must be one of {allowed}, got {got}", arg=Arg(name), allowed=", ".join(allowed), got=repr(value)
        )
    return value


def _due(value: str) -> str | None:
    value = value.strip()
    if not value or value.lower() == "none":
        return None
    if store.DATE.fullmatch(value) is None:
        raise TaskArgError("{arg} must be a date YYYY-MM-DD, got {got}", arg=Arg("due"), got=_shown(value))
    if not store.real_date(value):
        raise TaskArgError("{arg} is not a real date: {got}", arg=Arg("due"), got=repr(value))
    return value


def _tags(value: str) -> list[str]:
    tags = sorted({t.strip().lower() for t in value.split(",") if t.strip()})
    if len(tags) > MAX_TAGS:
        raise TaskArgError("{arg}: " + f"{len(tags)} given, the limit is {MAX_TAGS}", arg=Arg("tags"))
    for tag in tags:
        if len(tag) > MAX_TAG:
            raise TaskArgError(
                "{arg}: the tag {tag} " + f"is {len(tag)} characters long, the limit is {MAX_TAG}",
                arg=Arg("tags"),
                tag=_shown(tag),
            )
    return tags


def _refs(value: str) -> list[str]:
    refs = [r for r in value.split(",") if r.strip()]
    if len(refs) > MAX_BLOCKED_BY:
        raise TaskArgError("{arg}: " + f"{len(refs)} tasks given, the limit is {MAX_BLOCKED_BY}", arg=Arg("blocked_by"))
    return refs


def validate(action: str, **args: str) -> str:
    """The action's name, normalised, once every check that needs no file has passed: a known
    action, every argument within its limit and free of NUL and lone surrogates, tags and
    blockers within their counts. Raises BadArgument naming the argument, the limit and the
    length. Nothing is logged or written before this passes."""
    name = (action or "").strip().lower()
    if name not in _CHANGES and name not in _READS:
        raise BadArgument(f"unknown action {_shown(name)}: use one of {', '.join(ACTIONS)}")
    try:
        for arg, value in args.items():
            if value is None:
                continue
            if not isinstance(value, str):
                raise BadArgument(f"c3_task {arg} must be text")
            try:
                check_text(value, arg, LIMITS.get(arg, MAX_SHORT))
            except BadArgument as exc:
                raise TaskArgError.about(arg, exc) from None
        if args.get("tags"):
            _tags(args["tags"])
        if args.get("blocked_by"):
            _refs(args["blocked_by"])
    except TaskError as exc:
        exc.action = name
        raise
    return name


def _touch(task: Task, who: Who) -> None:
    task.updated = store.now()
    if who.session and who.session not in task.sessions:
        task.sessions.append(who.session)


def _event(pm: PM, who: Who, action: str, target: str | None, **changes: Any) -> None:
    pm.events.append(
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


def add(
    project: str,
    who: Who,
    title: str = "",
    description: str = "",
    status: str = "",
    priority: str = "",
    due: str = "",
    tags: str = "",
    milestone: str = "",
    blocked_by: str = "",
    **_: str,
) -> dict:
    title = title.strip()
    if not title:
        raise TaskArgError("{action} needs {arg}", arg=Arg("title"))

    def fn(pm: PM) -> dict:
        task = Task(
            id=_new_id(),
            title=title,
            description=description.strip(),
            status=_choice(status or "backlog", STATUSES, "status"),  # type: ignore[arg-type]
            priority=_choice(priority or "p2", PRIORITIES, "priority"),  # type: ignore[arg-type]
            due=_due(due),
            tags=_tags(tags),
            created=store.now(),
        )
        if milestone.strip():
            task.milestone = _milestone(pm, milestone).id
        task.blocked_by = [_task(pm, ref, "blocked_by").id for ref in _refs(blocked_by)]
        _touch(task, who)
        pm.tasks.append(task)
        _event(pm, who, "add", task.id, title=task.title, status=task.status, priority=task.priority)
        return _view(task)

    return store.change(project, fn)


_UPDATABLE = ("title", "description", "status", "priority", "due", "tags", "milestone", "blocked_by")


def update(
    project: str,
    who: Who,
    task_id: str = "",
    title: str = "",
    description: str = "",
    status: str = "",
    priority: str = "",
    due: str = "",
    tags: str = "",
    milestone: str = "",
    blocked_by: str = "",
    **_: str,
) -> dict:
    def fn(pm: PM) -> dict:
        task = _task(pm, task_id)
        changes: dict[str, Any] = {}
        if title.strip():
            changes["title"] = task.title = title.strip()
        if description.strip():
            changes["description"] = task.description = description.strip()
        if status.strip():
            changes["status"] = task.status = _choice(status, STATUSES, "status")  # type: ignore[assignment]
        if priority.strip():
            changes["priority"] = task.priority = _choice(priority, PRIORITIES, "priority")  # type: ignore[assignment]
        if due.strip():
            changes["due"] = task.due = _due(due)
        if tags.strip():
            changes["tags"] = task.tags = _tags(tags)
        if milestone.strip():
            task.milestone = None if milestone.strip().lower() == "none" else _milestone(pm, milestone).id
            changes["milestone"] = task.milestone
        if blocked_by.strip():
            refs = [] if blocked_by.strip().lower() == "none" else _refs(blocked_by)
            changes["blocked_by"] = task.blocked_by = [_task(pm, r, "blocked_by").id for r in refs]
        if not changes:
            raise TaskArgError(
                "{action} changed nothing: give {title}, {description}, {status}, {priority}, {due}, {tags}, "
                "{milestone} or {blocked_by}",
                **{name: Arg(name) for name in _UPDATABLE},
            )
        _touch(task, who)
        _event(pm, who, "update", task.id, **changes)
        return _view(task)

    return store.change(project, fn)


def link(project: str, who: Who, task_id: str = "", link_type: str = "session", ref: str = "", **_: str) -> dict:
    if (link_type or "session").strip() != "session":
        raise TaskArgError("{arg} must be 'session', got {got}", arg=Arg("link_type"), got=repr(link_type))
    ref = ref.strip(" \t")
    if ref in ("", "current"):
        if not who.session:
            raise TaskArgError("{arg}='current' needs a current session; give a session id", arg=Arg("ref"))
        session = who.session
    elif is_session_id(ref):
        session = ref.lower()
    else:
        raise TaskArgError(
            "{arg} must be 'current' or a full session id (a UUID), got {got}", arg=Arg("ref"), got=_shown(ref)
        )

    def fn(pm: PM) -> dict:
        task = _task(pm, task_id)
        if session not in task.sessions:
            task.sessions.append(session)
        task.updated = store.now()
        _event(pm, who, "link", task.id, session=session)
        return {**_view(task), "session": session}  # the session linked

    return store.change(project, fn)


def decide(project: str, who: Who, text: str = "", reasoning: str = "", task_id: str = "", **_: str) -> dict:
    text = text.strip()
    if not text:
        raise TaskArgError("{action} needs {arg}: the decision", arg=Arg("text"))

    def fn(pm: PM) -> dict:
        task = _task(pm, task_id).id if task_id.strip() else None
        d = Decision(
            id=_new_id(), text=text, reasoning=reasoning.strip(), task=task, session=who.session, ts=store.now()
        )
        pm.decisions.append(d)
        _event(pm, who, "decide", d.id, task=task)
        return msgspec.to_builtins(d)

    return store.change(project, fn)


def milestone_add(project: str, who: Who, milestone: str = "", title: str = "", due: str = "", **_: str) -> dict:
    """A new open milestone named by ``milestone`` or ``title`` (what a task is named by)."""
    name, other = milestone.strip(), title.strip()
    if name and other and name != other:
        raise TaskArgError(
            "{action} takes one name: give {milestone} or {title}, not both",
            milestone=Arg("milestone"),
            title=Arg("title"),
        )
    name = name or other
    if not name:
        raise TaskArgError("{action} needs {arg}: its name", arg=Arg("milestone"))
    try:  # a title may be longer than a milestone's name
        check_text(name, "milestone" if milestone.strip() else "title", MAX_MILESTONE_NAME)
    except BadArgument as exc:
        raise TaskArgError.about("milestone" if milestone.strip() else "title", exc) from None

    def fn(pm: PM) -> dict:
        if any(m.name.casefold() == name.casefold() and m.status != "archived" for m in pm.milestones):
            raise Conflict(f"a milestone named {name!r} exists already")
        m = Milestone(id=_new_id(), name=name, due=_due(due), created=store.now())
        pm.milestones.append(m)
        _event(pm, who, "milestone_add", m.id, name=name)
        return msgspec.to_builtins(m)

    return store.change(project, fn)


def milestone_complete(project: str, who: Who, milestone: str = "", **_: str) -> dict:
    def fn(pm: PM) -> dict:
        m = _milestone(pm, milestone)
        if m.status != "open":
            raise Conflict(f"milestone {m.name!r} is {m.status}, not open")
        still_open = [t for t in pm.tasks if t.milestone == m.id and t.status != "done"]
        if still_open:
            names = "; ".join(f"{t.id[:8]} {t.title} ({t.status})" for t in still_open)
            raise Conflict(
                f"milestone {m.name!r} still has {len(still_open)} open task(s): {names}. "
                "Finish them or move them to another milestone first."
            )
        m.status, m.completed_at = "completed", store.now()
        _event(pm, who, "milestone_complete", m.id)
        return msgspec.to_builtins(m)

    return store.change(project, fn)


def milestone_reopen(project: str, who: Who, milestone: str = "", **_: str) -> dict:
    def fn(pm: PM) -> dict:
        m = _milestone(pm, milestone)
        if m.status != "completed":
            raise Conflict(f"milestone {m.name!r} is {m.status}; only a completed one can be reopened")
        m.status, m.completed_at = "open", None
        _event(pm, who, "milestone_reopen", m.id)
        return msgspec.to_builtins(m)

    return store.change(project, fn)


def milestone_archive(project: str, who: Who, milestone: str = "", **_: str) -> dict:
    """Archive a milestone and detach its tasks (what shipped under it survives only in the
    event log: `milestone_complete` keeps the links)."""

    def fn(pm: PM) -> dict:
        m = _milestone(pm, milestone)
        detached = [t.id for t in pm.tasks if t.milestone == m.id]
        for t in pm.tasks:
            if t.milestone == m.id:
                t.milestone = None
                t.updated = store.now()
        m.status, m.archived_at = "archived", store.now()
        _event(pm, who, "milestone_archive", m.id, detached=detached)
        return {**msgspec.to_builtins(m), "detached": detached}

    return store.change(project, fn)


def time_start(project: str, who: Who, task_id: str = "", **_: str) -> dict:
    def fn(pm: PM) -> dict:
        task = _task(pm, task_id)
        if any(e.end is None for e in task.time):
            raise Conflict(f"the timer of task {task.id[:8]} is already running")
        task.time.append(TimeEntry(start=store.now(), session=who.session))
        _touch(task, who)
        _event(pm, who, "time_start", task.id)
        return _view(task)

    return store.change(project, fn)


def time_stop(project: str, who: Who, task_id: str = "", **_: str) -> dict:
    def fn(pm: PM) -> dict:
        task = _task(pm, task_id)
        entry = next((e for e in task.time if e.end is None), None)
        if entry is None:
            raise Conflict(f"no timer is running on task {task.id[:8]}")
        entry.end = store.now()
        _touch(task, who)
        _event(pm, who, "time_stop", task.id, seconds=round(entry.end - entry.start, 1))
        return _view(task)

    return store.change(project, fn)


def delete(project: str, who: Who, task_id: str = "", **_: str) -> dict:
    """Remove a task and every link to it: other tasks' ``blocked_by`` lose it, decisions about
    it keep their text and lose the task. The event keeps the whole task, so what was deleted
    can still be read in the log."""

    def fn(pm: PM) -> dict:
        task = _task(pm, task_id)
        waited = [t for t in pm.tasks if task.id in t.blocked_by]
        for t in waited:
            t.blocked_by = [b for b in t.blocked_by if b != task.id]
            t.updated = store.now()
        about_it = [d for d in pm.decisions if d.task == task.id]
        for d in about_it:
            d.task = None
        pm.tasks.remove(task)
        unlinked = {"blocked_by": [t.id for t in waited], "decisions": [d.id for d in about_it]}
        _event(pm, who, "delete", task.id, title=task.title, task=msgspec.to_builtins(task), unlinked=unlinked)
        return {**_view(task), "unlinked": unlinked}

    return store.change(project, fn)


def milestone_delete(project: str, who: Who, milestone: str = "", **_: str) -> dict:
    """Remove a milestone, whatever its status, and detach its tasks (they stay)."""

    def fn(pm: PM) -> dict:
        m = _milestone(pm, milestone)
        detached = [t for t in pm.tasks if t.milestone == m.id]
        for t in detached:
            t.milestone = None
            t.updated = store.now()
        pm.milestones.remove(m)
        shown = msgspec.to_builtins(m)
        _event(pm, who, "milestone_delete", m.id, name=m.name, milestone=shown, detached=[t.id for t in detached])
        return {**shown, "detached": [t.id for t in detached]}

    return store.change(project, fn)


def decision_delete(project: str, who: Who, ref: str = "", **_: str) -> dict:
    """Remove a decision note (``ref``: its id or a unique prefix); the event keeps its text."""

    def fn(pm: PM) -> dict:
        d = _decision(pm, ref)
        pm.decisions.remove(d)
        shown = msgspec.to_builtins(d)
        _event(pm, who, "decision_delete", d.id, decision=shown)
        return shown

    return store.change(project, fn)


# ------------------------------------------------------------------ reads (never write)


def get(project: str, who: Who, task_id: str = "", **_: str) -> dict:
    pm = store.load(project)
    task = _task(pm, task_id)
    out = _view(task)
    out["decisions"] = [msgspec.to_builtins(d) for d in pm.decisions if d.task == task.id]
    return out


def _closed_milestones(pm: PM) -> set[str]:
    """The ids of completed and archived milestones."""
    return {m.id for m in pm.milestones if m.status != "open"}


def _shown_by_default(pm: PM) -> list[Task]:
    """The tasks a default `list` and the board show: all but the finished work of a completed
    or archived milestone (those tasks keep their link; `list` with `milestone` or `status`
    shows them). An open task is never hidden, whatever its milestone."""
    closed = _closed_milestones(pm)
    return [t for t in pm.tasks if not (t.status == "done" and t.milestone in closed)]


def list_(
    project: str,
    who: Who,
    status: str = "",
    priority: str = "",
    tags: str = "",
    milestone: str = "",
    due: str = "",
    **_: str,
) -> dict:
    """Tasks, filtered. Without ``milestone`` or ``status``, the done tasks of completed and
    archived milestones are left out; ``status='all'`` (or any status, or the milestone named)
    brings them back."""
    pm = store.load(project)
    tasks = pm.tasks
    if status.strip():
        wanted = {_choice(s, (*STATUSES, "all"), "status") for s in status.split(",")}
        if "all" not in wanted:
            tasks = [t for t in tasks if t.status in wanted]
    elif not milestone.strip():
        tasks = _shown_by_default(pm)
    if priority.strip():
        wanted = {_choice(p, PRIORITIES, "priority") for p in priority.split(",")}
        tasks = [t for t in tasks if t.priority in wanted]
    if tags.strip():
        wanted_tags = set(_tags(tags))
        tasks = [t for t in tasks if wanted_tags & set(t.tags)]
    if milestone.strip():
        mid = _milestone(pm, milestone).id
        tasks = [t for t in tasks if t.milestone == mid]
    if due.strip():
        limit = _due(due)
        tasks = [t for t in tasks if t.due is not None and limit is not None and t.due <= limit]
    tasks = sorted(tasks, key=lambda t: (t.status == "done", t.priority, t.due or "9999", -t.updated))
    return {"tasks": [_view(t) for t in tasks]}


def _milestone_order(m: Milestone) -> tuple:
    """By due date (none last), then name, then id."""
    return (m.due is None, m.due or "", m.name.casefold(), m.id)


def board(project: str, who: Who, **_: str) -> dict:
    """``columns``: status -> tasks, every task a default `list` shows (the done tasks of
    completed and archived milestones leave the board). ``milestones``: each open milestone,
    in `milestones` order, with its own tasks in the same columns."""
    pm = store.load(project)
    opened = sorted((m for m in pm.milestones if m.status == "open"), key=_milestone_order)
    columns: dict[str, list[dict]] = {s: [] for s in STATUSES}
    groups: dict[str, dict[str, list[dict]]] = {m.id: {s: [] for s in STATUSES} for m in opened}
    for t in sorted(_shown_by_default(pm), key=lambda t: (t.priority, -t.updated)):
        card = {"id": t.id, "title": t.title, "priority": t.priority}
        columns[t.status].append(card)
        if t.milestone in groups:
            groups[t.milestone][t.status].append(dict(card))
    return {
        "columns": columns,
        "milestones": [{"id": m.id, "name": m.name, "due": m.due, "columns": groups[m.id]} for m in opened],
    }


def report(project: str, who: Who, **_: str) -> dict:
    """What is blocking (open tasks others wait on), and what is ready to unblock (blocked
    tasks whose blockers are all done)."""
    pm = store.load(project)
    by_id = {t.id: t for t in pm.tasks}
    waiting: dict[str, list[str]] = {}
    ready: list[dict] = []
    blocked: list[dict] = []
    for t in pm.tasks:
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
        {"id": t.id, "title": t.title, "due": t.due} for t in pm.tasks if t.status != "done" and t.due and t.due < today
    ]
    return {"blocking": blocking, "ready_to_unblock": ready, "still_blocked": blocked, "overdue": overdue}


def _for_task(pm: PM, task_id: str, items: list, field: str) -> list:
    """``items`` whose ``field`` is the task ``task_id`` names (all of them without one)."""
    if not task_id.strip():
        return items
    tid = _task(pm, task_id).id
    return [x for x in items if getattr(x, field) == tid]


def history(project: str, who: Who, task_id: str = "", **_: str) -> dict:
    pm = store.load(project)
    return {"events": [msgspec.to_builtins(e) for e in _for_task(pm, task_id, pm.events, "target")[-200:]]}


def decisions(project: str, who: Who, task_id: str = "", **_: str) -> dict:
    pm = store.load(project)
    return {"decisions": [msgspec.to_builtins(d) for d in _for_task(pm, task_id, pm.decisions, "task")[-100:]]}


def time_report(project: str, who: Who, task_id: str = "", **_: str) -> dict:
    pm = store.load(project)
    tasks = [_task(pm, task_id)] if task_id.strip() else pm.tasks
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


MILESTONE_STATUSES = ("open", "completed", "archived")


def milestones(project: str, who: Who, status: str = "", **_: str) -> dict:
    """Milestones with their task counts: open ones by default; ``status`` takes open,
    completed, archived (comma-separated) or all. Sorted by due date (none last), then name.
    An archived milestone's tasks were detached when it was archived, so its counts are 0."""
    wanted = {"open"}
    if status.strip():
        wanted = set()
        for part in status.split(","):
            part = part.strip().lower()
            if part not in (*MILESTONE_STATUSES, "all"):
                raise TaskArgError(
                    "{arg} for milestones must be one of "
                    + f"{', '.join(MILESTONE_STATUSES)} or all (comma-separated), got "
                    + "{got}",
                    arg=Arg("status"),
                    got=_shown(part),
                )
            wanted |= set(MILESTONE_STATUSES) if part == "all" else {part}
    pm = store.load(project)
    by_milestone: dict[str, list[Task]] = {}
    for t in pm.tasks:
        if t.milestone:
            by_milestone.setdefault(t.milestone, []).append(t)
    rows = []
    for m in sorted((m for m in pm.milestones if m.status in wanted), key=_milestone_order):
        tasks = by_milestone.get(m.id, [])
        still_open = sorted(
            (t for t in tasks if t.status != "done"),
            key=lambda t: (t.priority, t.due or "9999", t.title.casefold(), t.id),
        )
        rows.append(
            {
                "id": m.id,
                "name": m.name,
                "status": m.status,
                "due": m.due,
                "created": m.created,
                "completed_at": m.completed_at,
                "archived_at": m.archived_at,
                "tasks": {"total": len(tasks), "done": len(tasks) - len(still_open), "open": len(still_open)},
                "open_tasks": [
                    {"id": t.id, "title": t.title, "status": t.status, "priority": t.priority} for t in still_open
                ],
            }
        )
    return {"milestones": rows}


# each is called as fn(project, who, **args)
_CHANGES: dict[str, Callable[..., dict]] = {
    "add": add,
    "update": update,
    "link": link,
    "decide": decide,
    "milestone_add": milestone_add,
    "milestone_complete": milestone_complete,
    "milestone_reopen": milestone_reopen,
    "milestone_archive": milestone_archive,
    "time_start": time_start,
    "time_stop": time_stop,
    "delete": delete,
    "milestone_delete": milestone_delete,
    "decision_delete": decision_delete,
}
_READS: dict[str, Callable[..., dict]] = {
    "get": get,
    "list": list_,
    "board": board,
    "report": report,
    "history": history,
    "decisions": decisions,
    "time_report": time_report,
    "milestones": milestones,
}
ACTIONS = tuple(_CHANGES) + tuple(_READS)
READ_ACTIONS = tuple(_READS)


def run(project: str, who: Who, action: str, **args: str) -> dict:
    """Raises C3Error; a TaskError says which action failed (``action``) for a door to word."""
    args = {k: (v or "") for k, v in args.items()}
    action = validate(action, **args)
    fn = _CHANGES.get(action) or _READS[action]  # validate() returned a known action
    try:
        return fn(project, who, **args)
    except TaskError as exc:
        exc.action = action
        raise
