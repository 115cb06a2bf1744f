"""The c3_task actions, declared once: one msgspec Struct per action (``ground.schema``), its
tag the action's name, its docstring its line of help, its fields its arguments, each with its
type, its limit, how its text is read and its help. The MCP tool's parameters and their
descriptions, the CLI's subcommands, flags and help, the checks before anything is read or
written, and which arguments an update names all come from here: adding an argument to an
action is one field.

``read`` turns a call's text into its action's struct, refusing what needs no file to refuse: an
unknown action, text over its limit or holding NUL or lone surrogates, a status, priority or
date that is not one, an id that cannot be one, too many tags or blockers. The values it gives are
typed: a status is one of ``STATUSES``, tags a sorted list, a due date ``None`` when cleared, and
an update's field ``UNSET`` when the call leaves it as it is.

Limits, in characters: a task title ``MAX_TITLE`` (500), a description ``MAX_DESCRIPTION``
(20,000), a decision's text and reasoning ``MAX_DECISION_TEXT`` / ``MAX_DECISION_REASONING``
(8,000 each), a milestone name ``MAX_MILESTONE_NAME`` (200), at most ``MAX_TAGS`` (50) tags of
``MAX_TAG`` (64) each, at most ``MAX_BLOCKED_BY`` (50) blockers, and ``MAX_SHORT`` (200) for an
id, a status, a priority, a date or a link type.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Annotated, Any, ClassVar, get_args

import msgspec

from ..catalog.listing import is_session_id
from ..ground.errors import Arg, BadArgument, Call, TaskArgError, TaskError, check_text, clip
from ..ground.schema import UNSET, Field, Param, UnsetType, fields, limit, name_of, parse
from . import store
from .store import MilestoneStatus, Priority, Status

__all__ = ("ACTION_TYPES", "BY_NAME", "READS", "STATUSES", "UPDATABLE", "Action", "read")

# the values the records hold (``store``), in their order
STATUSES: tuple[str, ...] = get_args(Status)
PRIORITIES: tuple[str, ...] = get_args(Priority)
MILESTONE_STATUSES: tuple[str, ...] = get_args(MilestoneStatus)
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
# fullmatch everywhere: `$` would also accept a final newline. ASCII digits only (\d is Unicode).
_TASK_REF = re.compile(rf"[0-9a-z_-]{{{MIN_PREFIX},64}}")


def _shown(value: str, most: int = 60) -> str:
    return repr(clip(value, most))


def _either(words: Sequence[str]) -> str:
    return ", ".join(words[:-1]) + " or " + words[-1]


# ------------------------------------------------------------------ readers: (text, argument) -> value


def _stripped(value: str, name: str) -> str | UnsetType:
    return value.strip() or UNSET


def id_ref(ref: str, arg: str, kind: str, listing: str) -> str:
    """``ref``, a typed id or id prefix of a ``kind`` (task, decision), checked: ``arg`` is the
    argument that held it and ``listing`` the read action that shows the ids."""
    ref = ref.strip(" \t").lower()  # spaces around a pasted id; never a newline
    parts: dict[str, str | Arg | Call] = {"arg": Arg(arg), "kind": kind, "least": str(MIN_PREFIX), "got": _shown(ref)}
    if len(ref) < MIN_PREFIX:
        raise TaskArgError("{arg} needs at least {least} characters of a {kind} id, got {got}", **parts)
    if _TASK_REF.fullmatch(ref) is None:
        raise TaskArgError(
            "{got} is not a {kind} id: {kind} ids are letters, digits, '-' and '_' (`{listing}` shows them)",
            listing=Call(listing),
            **parts,
        )
    return ref


def _ref_of(kind: str, listing: str) -> Callable[[str, str], str | UnsetType]:
    def read(value: str, name: str) -> str | UnsetType:
        return id_ref(value, name, kind, listing) if value.strip(" \t") else UNSET

    return read


def choice(value: str, allowed: Sequence[str], name: str) -> str:
    value = value.strip().lower()
    if value not in allowed:
        raise TaskArgError(
            "{arg} must be one of {allowed}, got {got}", arg=Arg(name), allowed=", ".join(allowed), got=repr(value)
        )
    return value


def one_of(allowed: Sequence[str]) -> Callable[[str, str], str | UnsetType]:
    def read(value: str, name: str) -> str | UnsetType:
        return choice(value, allowed, name) if value.strip() else UNSET

    return read


def _any_of(allowed: Sequence[str]) -> Callable[[str, str], frozenset[str] | UnsetType]:
    """Comma-separated, each one of ``allowed``."""

    def read(value: str, name: str) -> frozenset[str] | UnsetType:
        return frozenset(choice(part, allowed, name) for part in value.split(",")) if value.strip() else UNSET

    return read


def _milestone_statuses(value: str, name: str) -> frozenset[str] | UnsetType:
    if not value.strip():
        return UNSET
    wanted: set[str] = set()
    for part in value.split(","):
        part = part.strip().lower()
        if part not in (*MILESTONE_STATUSES, "all"):
            raise TaskArgError(
                "{arg} for milestones must be one of "
                + f"{', '.join(MILESTONE_STATUSES)} or all (comma-separated), got "
                + "{got}",
                arg=Arg(name),
                got=_shown(part),
            )
        wanted |= set(MILESTONE_STATUSES) if part == "all" else {part}
    return frozenset(wanted)


def _date(value: str, name: str) -> str | UnsetType | None:
    """YYYY-MM-DD, a real date; ``none`` clears it."""
    value = value.strip()
    if not value:
        return UNSET
    if value.lower() == "none":
        return None
    if store.DATE.fullmatch(value) is None:
        raise TaskArgError("{arg} must be a date YYYY-MM-DD, got {got}", arg=Arg(name), got=_shown(value))
    if not store.real_date(value):
        raise TaskArgError("{arg} is not a real date: {got}", arg=Arg(name), got=repr(value))
    return value


def _tags(value: str, name: str) -> list[str] | UnsetType:
    if not value.strip():
        return UNSET
    tags = sorted({t.strip().lower() for t in value.split(",") if t.strip()})
    if len(tags) > MAX_TAGS:
        raise TaskArgError("{arg}: " + f"{len(tags)} given, the limit is {MAX_TAGS}", arg=Arg(name))
    for tag in tags:
        if len(tag) > MAX_TAG:
            raise TaskArgError(
                "{arg}: the tag {tag} " + f"is {len(tag)} characters long, the limit is {MAX_TAG}",
                arg=Arg(name),
                tag=_shown(tag),
            )
    return tags


def _task_refs(value: str, name: str) -> list[str] | UnsetType:
    if not value.strip():
        return UNSET
    refs = [r for r in value.split(",") if r.strip()]
    if len(refs) > MAX_BLOCKED_BY:
        raise TaskArgError("{arg}: " + f"{len(refs)} tasks given, the limit is {MAX_BLOCKED_BY}", arg=Arg(name))
    return [id_ref(r, name, "task", "list") for r in refs]


def _or_none(read: Callable[[str, str], Any], cleared: Any) -> Callable[[str, str], Any]:
    """``read``, where the word none gives ``cleared``."""

    def either(value: str, name: str) -> Any:
        return cleared if value.strip().lower() == "none" else read(value, name)

    return either


def _milestone_ref(value: str, name: str) -> str | UnsetType:
    return value.strip(" \t") or UNSET  # never strip a newline from a ref


def _milestone_filter(value: str, name: str) -> str | UnsetType:
    """A milestone a task is put in or listed by: blank text names none."""
    return _milestone_ref(value, name) if value.strip() else UNSET


def _session_ref(value: str, name: str) -> str | UnsetType:
    """A full session id; blank or ``current``: the session acting (UNSET)."""
    ref = value.strip(" \t")
    if ref in ("", "current"):
        return UNSET
    if not is_session_id(ref):
        raise TaskArgError(
            "{arg} must be 'current' or a full session id (a UUID), got {got}", arg=Arg(name), got=_shown(ref)
        )
    return ref.lower()


def _link_type(value: str, name: str) -> str | UnsetType:
    if value.strip() and value.strip() != "session":
        raise TaskArgError("{arg} must be 'session', got {got}", arg=Arg(name), got=repr(value))
    return UNSET


# ------------------------------------------------------------------ arguments

_ID_HELP = f"a task id or a unique prefix ({MIN_PREFIX}+ characters)"
TASK_ID = Param(
    _ID_HELP,
    MAX_SHORT,
    read=_ref_of("task", "list"),
    needs=f"a task id or a unique prefix of {MIN_PREFIX}+ characters",
    positional=True,
    metavar="ID",
    old_flags=("--task-id",),
)
EVERY_TASK = replace(TASK_ID, help=_ID_HELP + " (default: every task)")
TITLE = Param("the task's title", MAX_TITLE, read=_stripped, prose=True, metavar="TEXT")
DESCRIPTION = Param("what it is about", MAX_DESCRIPTION, read=_stripped, prose=True, metavar="TEXT")
STATUS = Param(_either(STATUSES), MAX_SHORT, read=one_of(STATUSES))
PRIORITY = Param("p0 (first) to p3", MAX_SHORT, read=one_of(PRIORITIES), metavar="P")
DUE = Param("a date, YYYY-MM-DD", MAX_SHORT, read=_date, metavar="DATE")
TAGS = Param("comma-separated", MAX_TAGS * (MAX_TAG + 2), read=_tags)
MILESTONE = Param("a milestone id or name", MAX_MILESTONE_NAME, read=_milestone_filter)
BLOCKED_BY = Param(
    "the tasks it waits on: comma-separated ids", MAX_BLOCKED_BY * (MAX_SHORT // 2), read=_task_refs, metavar="IDS"
)
A_MILESTONE = Param(
    "a milestone id or its name",
    MAX_MILESTONE_NAME,
    read=_milestone_ref,
    needs="a milestone id or its unique name",
    positional=True,
    metavar="MILESTONE",
    old_flags=("--milestone",),
)
MILESTONE_NAME = Param(
    "the milestone's name",
    MAX_MILESTONE_NAME,
    read=_stripped,
    prose=True,
    metavar="NAME",
    flags=("--title", "--name"),
    old_flags=("--milestone",),
)


class Action(msgspec.Struct, kw_only=True, tag_field="action"):
    """A call of c3_task. ``reads``: it never writes (plan-mode safe); ``example``: a command
    line for the CLI's help; ``aliases``: other names the CLI takes for it."""

    reads: ClassVar[bool] = False
    example: ClassVar[str] = ""
    aliases: ClassVar[tuple[str, ...]] = ()


class Read(Action):
    reads: ClassVar[bool] = True


class OnTask(Action):
    """An action on one task."""

    task_id: Annotated[str, TASK_ID]


class OfTasks(Read):
    """A read of every task, or of one."""

    task_id: Annotated[str | None, EVERY_TASK] = None


class OnMilestone(Action):
    """An action on one milestone."""

    milestone: Annotated[str, A_MILESTONE]


class List(Read, tag="list"):
    """the tasks, filtered"""

    example: ClassVar[str] = "c3async tasks list --status in_progress,blocked --tags ui"
    status: Annotated[
        frozenset[str] | UnsetType,
        replace(
            STATUS,
            help=f"{', '.join(STATUSES)} or all, comma-separated (default: all but the done tasks of closed milestones)",
            read=_any_of((*STATUSES, "all")),
        ),
    ] = UNSET
    priority: Annotated[
        frozenset[str] | UnsetType, replace(PRIORITY, help="p0 to p3, comma-separated", read=_any_of(PRIORITIES))
    ] = UNSET
    tags: Annotated[list[str] | UnsetType, replace(TAGS, help="tasks with any of these (comma-separated)")] = UNSET
    milestone: Annotated[str | UnsetType, replace(MILESTONE, help="only this milestone's tasks (an id or name)")] = (
        UNSET
    )
    due: Annotated[str | UnsetType | None, replace(DUE, help="due on or before this date, YYYY-MM-DD")] = UNSET


class Board(Read, tag="board"):
    """the tasks by status, then each open milestone's"""

    example: ClassVar[str] = "c3async tasks board"


class Get(OnTask, tag="get"):
    """one task in full, with its decisions"""

    reads: ClassVar[bool] = True
    example: ClassVar[str] = "c3async tasks show 1a2b"
    aliases: ClassVar[tuple[str, ...]] = ("show",)


class Add(Action, tag="add"):
    """add a task"""

    example: ClassVar[str] = 'c3async tasks add --title "ship it" --priority p1 --tags release'
    title: Annotated[str, TITLE]
    description: Annotated[str, DESCRIPTION] = ""
    status: Annotated[Status, STATUS] = "backlog"
    priority: Annotated[Priority, PRIORITY] = "p2"
    due: Annotated[str | None, DUE] = None
    tags: Annotated[list[str], TAGS] = msgspec.field(default_factory=list)
    milestone: Annotated[str | None, MILESTONE] = None
    blocked_by: Annotated[list[str], BLOCKED_BY] = msgspec.field(default_factory=list)


class Update(OnTask, tag="update"):
    """change a task's title, status, priority, due date, tags, milestone or blockers"""

    example: ClassVar[str] = "c3async tasks update 1a2b --status done"
    title: Annotated[str | UnsetType, TITLE] = UNSET
    description: Annotated[str | UnsetType, DESCRIPTION] = UNSET
    status: Annotated[Status | UnsetType, STATUS] = UNSET
    priority: Annotated[Priority | UnsetType, PRIORITY] = UNSET
    due: Annotated[str | UnsetType | None, replace(DUE, help="a date, YYYY-MM-DD, or none")] = UNSET
    tags: Annotated[list[str] | UnsetType, TAGS] = UNSET
    milestone: Annotated[
        str | UnsetType | None,
        replace(MILESTONE, help="a milestone id or name, or none", read=_or_none(_milestone_filter, None)),
    ] = UNSET
    blocked_by: Annotated[
        list[str] | UnsetType,
        replace(BLOCKED_BY, help="comma-separated task ids, or none", read=_or_none(_task_refs, [])),
    ] = UNSET


class Delete(OnTask, tag="delete"):
    """delete a task (the tasks it blocked and the decisions about it keep no link to it)"""

    example: ClassVar[str] = "c3async tasks delete 1a2b"


class Link(OnTask, tag="link"):
    """link a task to a session"""

    example: ClassVar[str] = "c3async tasks link 1a2b 5e6f7a8b"
    # UNSET: the session acting (``current``)
    ref: Annotated[
        str | UnsetType,
        Param(
            "a session id or a unique prefix (default: the current session)",
            MAX_SHORT,
            read=_session_ref,
            positional=True,
            metavar="SESSION",
            old_flags=("--ref",),
        ),
    ] = UNSET
    link_type: Annotated[
        str, Param("what the task is linked to", MAX_SHORT, read=_link_type, flags=(), old_flags=("--link-type",))
    ] = "session"


class Report(Read, tag="report"):
    """what is blocking, ready to unblock, still blocked, overdue"""

    example: ClassVar[str] = "c3async tasks report"


class History(OfTasks, tag="history"):
    """the log of changes, of every task or of one"""

    example: ClassVar[str] = "c3async tasks history 1a2b"


class TimeStart(OnTask, tag="time_start"):
    """start a task's timer"""

    example: ClassVar[str] = "c3async tasks time_start 1a2b"


class TimeStop(OnTask, tag="time_stop"):
    """stop a task's timer"""

    example: ClassVar[str] = "c3async tasks time_stop 1a2b"


class TimeReport(OfTasks, tag="time_report"):
    """the time tracked, per task"""

    example: ClassVar[str] = "c3async tasks time_report"


class Decide(Action, tag="decide"):
    """record a decision and why"""

    example: ClassVar[str] = (
        'c3async tasks decide --text "use SSE" --reasoning "simpler than websockets" --task-id 1a2b'
    )
    text: Annotated[
        str, Param("the decision", MAX_DECISION_TEXT, read=_stripped, needs="the decision", prose=True, metavar="TEXT")
    ]
    reasoning: Annotated[str, Param("why", MAX_DECISION_REASONING, read=_stripped, prose=True, metavar="TEXT")] = ""
    task_id: Annotated[
        str | None,
        Param("the task it is about (an id or a unique prefix)", MAX_SHORT, read=_ref_of("task", "list"), metavar="ID"),
    ] = None


class Decisions(OfTasks, tag="decisions"):
    """the decisions, all or one task's"""

    example: ClassVar[str] = "c3async tasks decisions 1a2b"


class DecisionDelete(Action, tag="decision_delete"):
    """delete a decision"""

    example: ClassVar[str] = "c3async tasks decision_delete 9c0d"
    ref: Annotated[
        str,
        Param(
            f"a decision id or a unique prefix ({MIN_PREFIX}+ characters)",
            MAX_SHORT,
            read=_ref_of("decision", "decisions"),
            needs=f"a decision id or a unique prefix of {MIN_PREFIX}+ characters",
            positional=True,
            metavar="DECISION",
        ),
    ]


class Milestones(Read, tag="milestones"):
    """the milestones with their task counts"""

    example: ClassVar[str] = "c3async tasks milestones --status all"
    status: Annotated[
        frozenset[str],
        Param(
            f"{', '.join(MILESTONE_STATUSES)} or all, comma-separated (default open)",
            MAX_SHORT,
            read=_milestone_statuses,
        ),
    ] = frozenset({"open"})


class MilestoneAdd(Action, tag="milestone_add"):
    """add a milestone"""

    example: ClassVar[str] = "c3async tasks milestone_add --title v1 --due 2026-06-01"
    milestone: Annotated[str, MILESTONE_NAME] = ""
    # the name as a task is named: what an agent may reach for; the CLI's --title is milestone
    title: Annotated[str, replace(MILESTONE_NAME, help="its name, as milestone", flags=(), old_flags=())] = ""
    due: Annotated[str | None, DUE] = None


class MilestoneComplete(OnMilestone, tag="milestone_complete"):
    """complete a milestone (once all its tasks are done)"""

    example: ClassVar[str] = "c3async tasks milestone_complete v1"


class MilestoneReopen(OnMilestone, tag="milestone_reopen"):
    """reopen a completed milestone"""

    example: ClassVar[str] = "c3async tasks milestone_reopen v1"


class MilestoneArchive(OnMilestone, tag="milestone_archive"):
    """archive a milestone and detach its tasks"""

    example: ClassVar[str] = "c3async tasks milestone_archive v1"


class MilestoneDelete(OnMilestone, tag="milestone_delete"):
    """delete a milestone and detach its tasks"""

    example: ClassVar[str] = "c3async tasks milestone_delete v1"


# In the order the CLI's help lists them (the tasks, then time, decisions and milestones).
ACTION_TYPES: tuple[type[Action], ...] = (
    List,
    Board,
    Get,
    Add,
    Update,
    Delete,
    Link,
    Report,
    History,
    TimeStart,
    TimeStop,
    TimeReport,
    Decide,
    Decisions,
    DecisionDelete,
    Milestones,
    MilestoneAdd,
    MilestoneComplete,
    MilestoneReopen,
    MilestoneArchive,
    MilestoneDelete,
)
BY_NAME: dict[str, type[Action]] = {name_of(a): a for a in ACTION_TYPES}
READS = tuple(name for name, a in BY_NAME.items() if a.reads)
# What an update may change: every argument of `update` but the task it names.
UPDATABLE = tuple(f.name for f in fields(Update) if f.name != "task_id")


def _needs(f: Field) -> TaskError:
    what = f": {f.param.needs}".replace("{", "{{").replace("}", "}}") if f.param.needs else ""
    return TaskArgError("{action} needs {arg}" + what, arg=Arg(f.name))


def read(action: str, **args: str | None) -> Action:
    """The call as its action's struct, once every check that needs no file has passed (see the
    module's docstring); nothing is logged or written before this. A refusal is a BadArgument
    naming the argument, a TaskArgError that lets each door name it in its own syntax."""
    name = (action or "").strip().lower()
    kind = BY_NAME.get(name)
    if kind is None:
        raise BadArgument(f"unknown action {_shown(name)}: use one of {', '.join(BY_NAME)}")
    try:
        for arg, value in args.items():
            if value is None:
                continue
            if not isinstance(value, str):
                raise BadArgument(f"c3_task {arg} must be text")
            most = limit(ACTION_TYPES, kind, arg)
            if most is None:
                raise BadArgument(f"c3_task takes no argument {_shown(arg)}")
            try:
                check_text(value, arg, most)
            except BadArgument as exc:
                raise TaskArgError.about(arg, exc) from None
        return parse(kind, {k: v or "" for k, v in args.items()}, _needs)
    except TaskError as exc:
        exc.action = name
        raise
