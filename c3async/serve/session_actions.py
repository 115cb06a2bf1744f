"""``c3_session``: the actions behind the MCP tool, declared once and done as plain functions
over a ``Caller``.

Each action is a msgspec Struct (``ground.schema``): its tag the action's name, its docstring its
line of help, its fields its arguments with their limits and help. The tool's parameters and
their descriptions, the limits and the arguments an action cannot do without come from them.

Two families. Lifecycle (start, log, snapshot, restore, plan, end) writes this server's C3
session record and the activity log. Catalog (list, show, search, files, stale, unstale, note,
keep, unkeep, tag, untag) reads and marks the session catalog through the same library functions the CLI and the
Hub use. Every problem raises a C3Error whose message says how to fix the call.

``validate`` checks what needs no file (the action name, text limits, NUL and lone surrogates,
the arguments an action cannot do without) and runs before anything is logged or written.
Limits, in characters: a stale reason 2,000, a note's summary and next steps 8,000 each (see
``marks``); a log entry's data 20,000 and its reasoning 8,000; a snapshot's summary 8,000 and
data 20,000; a plan 20,000; a start description 2,000; an end summary 8,000; event_type 64;
target 500 (search's 2,000). The module is light, as the server declares its tool from it at
start: what the actions read with (the sessions view, details, marks) loads with the first call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Annotated, Any, ClassVar

import msgspec

from ..ground import schema
from ..ground.errors import BadArgument, NotFound, check_text, clip
from ..ground.project import Project
from ..ground.schema import Field, Param, name_of
from ..stores import activity, records
from ..stores.marks import MAX_NEXT_STEPS, MAX_REASON, MAX_REF, MAX_SUMMARY

__all__ = (
    "ACTIONS",
    "ACTION_TYPES",
    "LIFECYCLE",
    "LIMITS",
    "READS",
    "Caller",
    "reads_only",
    "run",
    "validate",
)

LIST_ROWS = 40  # rows a `list` answer shows; the rest are counted
MAX_TEXT = 20_000  # a log entry's or a snapshot's data, a plan
MAX_DESCRIPTION = 2_000
MAX_EVENT_TYPE = 64
MAX_TARGET = 500  # a session id or prefix, a filter, or search text
MAX_QUERY = 2_000  # search text (search.query.MAX_QUERY)
LOG_FIELD = 200  # characters of a string kept in an activity row


def _prose(help: str, most: int, needs: str = "") -> Param:
    return Param(help, most, needs=needs, prose=True)


TARGET = Param("a session id or a unique prefix (4+ characters)", MAX_TARGET)
REASON = _prose("why (optional)", MAX_REASON)


class Action(msgspec.Struct, kw_only=True, tag_field="action"):
    """A call of c3_session. ``reads``: it changes nothing (plan-mode safe; ``plan`` without
    data too, ``reads_only``); ``lifecycle``: it acts on this server's C3 session record."""

    reads: ClassVar[bool] = False
    lifecycle: ClassVar[bool] = False


class Lifecycle(Action):
    lifecycle: ClassVar[bool] = True


class Start(Lifecycle, tag="start"):
    """begin this C3 session's record"""

    description: Annotated[str, _prose("what this C3 session is for", MAX_DESCRIPTION)] = ""


class Log(Lifecycle, tag="log"):
    """record an event of this C3 session"""

    event_type: Annotated[
        str,
        Param(
            "decision, discovery, blocker, progress...",
            MAX_EVENT_TYPE,
            needs="decision, discovery, blocker, progress...",
        ),
    ]
    data: Annotated[str, _prose("what happened", MAX_TEXT, needs="what happened")]
    reasoning: Annotated[str, _prose("why", 8_000)] = ""


class Snapshot(Lifecycle, tag="snapshot"):
    """save where things stand"""

    summary: Annotated[str, _prose("where things stand", 8_000, needs="where things stand")]
    data: Annotated[str, _prose("what is done and what is next", MAX_TEXT)] = ""


class Restore(Lifecycle, tag="restore"):
    """the last snapshot of a session"""

    reads: ClassVar[bool] = True
    target: Annotated[str, replace(TARGET, help=TARGET.help + " (default: this session, else the newest snapshot)")] = (
        ""
    )


class Plan(Lifecycle, tag="plan"):
    """this C3 session's plan (ephemeral: durable work goes in c3_task)"""

    data: Annotated[str, _prose("the plan; empty reads it back", MAX_TEXT)] = ""


class End(Lifecycle, tag="end"):
    """close this C3 session's record"""

    summary: Annotated[str, _prose("how it ended", 8_000)] = ""


class List(Action, tag="list"):
    """one line per session, newest first"""

    reads: ClassVar[bool] = True
    target: Annotated[str, Param("all, likely, stale, live, or text to search for (default: all)", MAX_TARGET)] = ""
    data: Annotated[str, Param("options: tag=WORD (only the sessions tagged WORD)", MAX_DESCRIPTION)] = ""


class Show(Action, tag="show"):
    """one session expanded: prompts, note or snapshot, chain, last turns"""

    reads: ClassVar[bool] = True
    target: Annotated[str, replace(TARGET, help=TARGET.help + " (default: this session)")] = ""


class Search(Action, tag="search"):
    """the full text of every conversation (what was said; tool output only when asked)"""

    reads: ClassVar[bool] = True
    target: Annotated[
        str,
        Param(
            'words, "exact phrase", prefix*, OR, -word, identifiers like retry_budget',
            MAX_QUERY,
            needs='the words to find ("exact phrase", prefix*, OR, -word)',
        ),
    ]
    data: Annotated[
        str,
        Param(
            "options, e.g. all tools role=user since=7d branch=main tag=WORD limit=5 (default: this project)",
            MAX_DESCRIPTION,
        ),
    ] = ""


class Files(Action, tag="files"):
    """the sessions that created, edited or wrote a file (or anything in a folder), newest first"""

    reads: ClassVar[bool] = True
    target: Annotated[
        str,
        Param(
            "a file or a folder: relative to the project, or absolute", MAX_TARGET, needs="the file or folder's path"
        ),
    ]
    data: Annotated[str, Param("options: limit=N (default 10)", MAX_DESCRIPTION)] = ""


class Stale(Action, tag="stale"):
    """mark a session not worth resuming"""

    target: Annotated[str, replace(TARGET, needs="the session id or prefix to mark")]
    reasoning: Annotated[
        str,
        _prose(
            "why it should not be resumed (superseded, finished, abandoned)",
            MAX_REASON,
            needs="why it should not be resumed (superseded, finished, abandoned)",
        ),
    ]
    data: Annotated[str, Param("the session that took over (its id)", MAX_REF)] = ""


class Unstale(Action, tag="unstale"):
    """undo a stale mark"""

    target: Annotated[str, replace(TARGET, needs="the session id or prefix")]
    reasoning: Annotated[str, REASON] = ""


class Note(Action, tag="note"):
    """leave a note on a session"""

    target: Annotated[str, replace(TARGET, help=TARGET.help + " (default: this session)")] = ""
    data: Annotated[str, _prose("the summary: what was done", MAX_SUMMARY)] = ""
    reasoning: Annotated[str, _prose("the next steps", MAX_NEXT_STEPS)] = ""


class Keep(Action, tag="keep"):
    """keep a session past Claude Code's cleanup (its transcript is preserved in the archive, listed and resumable after Claude Code deletes it)"""

    target: Annotated[str, replace(TARGET, needs="the session id or prefix to keep past Claude Code's cleanup")]
    reasoning: Annotated[str, REASON] = ""


class Unkeep(Action, tag="unkeep"):
    """release a kept session (its archive entry is removed)"""

    target: Annotated[str, replace(TARGET, needs="the session id or prefix to release")]
    reasoning: Annotated[str, REASON] = ""


TAG_WORDS = Param("the tags, words separated by spaces (letters, digits, _ . + -; 40 each)", MAX_DESCRIPTION)


class Tag(Action, tag="tag"):
    """tag a session with words (list and search take tag=WORD)"""

    data: Annotated[str, replace(TAG_WORDS, needs="the tags to add, separated by spaces")]
    target: Annotated[str, replace(TARGET, help=TARGET.help + " (default: this session)")] = ""


class Untag(Action, tag="untag"):
    """take tags off a session"""

    data: Annotated[str, replace(TAG_WORDS, needs="the tags to take off, separated by spaces")]
    target: Annotated[str, replace(TARGET, help=TARGET.help + " (default: this session)")] = ""


ACTION_TYPES: tuple[type[Action], ...] = (
    Start,
    Log,
    Snapshot,
    Restore,
    Plan,
    End,
    List,
    Show,
    Search,
    Files,
    Stale,
    Unstale,
    Note,
    Keep,
    Unkeep,
    Tag,
    Untag,
)
_BY_NAME: dict[str, type[Action]] = {name_of(a): a for a in ACTION_TYPES}
ACTIONS = tuple(_BY_NAME)
LIFECYCLE = tuple(name for name, a in _BY_NAME.items() if a.lifecycle)
READS = tuple(name for name, a in _BY_NAME.items() if a.reads)  # and plan with no data (``reads_only``)
# (action, argument) -> the most characters it may hold.
LIMITS: dict[tuple[str, str], int] = {
    (name_of(a), f.name): f.param.limit for a in ACTION_TYPES for f in schema.fields(a)
}


@dataclass
class Caller:
    """Who is calling: the project, this server's C3 session and record, the host session now."""

    project: Project
    c3_session_id: str
    host_session_id: str | None
    record: records.SessionRecord
    by: str = "agent"


def _needs(action: str) -> Callable[[Field], BadArgument]:
    return lambda f: BadArgument(f"c3_session(action='{action}') needs {f.name}: {f.param.needs}")


def read(action: str, **args: str | None) -> Action:
    """The call as its action's struct, once every check that needs no file has passed: a known
    action, every argument within its limit and free of NUL and lone surrogates, and the ones
    the action cannot do without given. Raises BadArgument naming the argument (and its limit
    and length). Nothing is logged or written before this passes."""
    name = (action or "").strip().lower()
    kind = _BY_NAME.get(name)
    if kind is None:
        shown = action if len(action or "") <= 60 else clip(action, 60)
        raise BadArgument(f"unknown action {shown!r}: use one of {', '.join(ACTIONS)}")
    for arg, value in args.items():
        if value is None:
            continue
        if not isinstance(value, str):
            raise BadArgument(f"c3_session {arg} must be text")
        most = schema.limit(ACTION_TYPES, kind, arg)
        if most is None:
            raise BadArgument(f"c3_session takes no argument {clip(arg, 60)!r}")
        check_text(value, f"c3_session(action='{name}') {arg}", most)
    return schema.parse(kind, {k: v or "" for k, v in args.items()}, _needs(name))


def validate(action: str, **args: str | None) -> str:
    """The action's name, normalised, once ``read`` has passed."""
    return name_of(type(read(action, **args)))


def reads_only(name: str, data: str = "") -> bool:
    """Whether the (validated) action changes nothing: list, show, search, restore, and plan
    with empty data (which reads the plan back)."""
    return name in READS or (name == "plan" and not (data or "").strip())


# The operation of each action, by its name: fn(caller, call)
_HANDLERS: dict[str, Callable[[Caller, Any], str]] = {}


def _does(action: type[Action]) -> Callable[[Callable[[Caller, Any], str]], Callable[[Caller, Any], str]]:
    """Make the decorated function the operation of ``action``."""

    def register(fn: Callable[[Caller, Any], str]) -> Callable[[Caller, Any], str]:
        _HANDLERS[name_of(action)] = fn
        return fn

    return register


def _save(caller: Caller) -> None:
    caller.record.serve(caller.host_session_id)
    records.save(caller.project, caller.record)


# ---------------------------------------------------------------- lifecycle


@_does(Start)
def start(c: Caller, call: Start) -> str:
    c.record.description = call.description.strip() or c.record.description
    _save(c)
    # Not "session_start": that kind is the hooks' fact about a host session, which the liveness
    # fallback trusts; a lifecycle start says nothing about when the host session ends.
    activity.record(
        c.project,
        "c3_start",
        session_id=c.host_session_id,
        c3_session_id=c.c3_session_id,
        description=clip(c.record.description, LOG_FIELD) if c.record.description else None,
    )
    return f"started C3 session {c.c3_session_id[:8]} for host session {c.host_session_id or '(unknown)'}"


@_does(Log)
def log(c: Caller, call: Log) -> str:
    event_type = call.event_type.strip()
    c.record.events.append(
        records.Event(
            ts=time.time(),
            host_session_id=c.host_session_id,
            event_type=event_type,
            data=call.data.strip(),
            reasoning=call.reasoning.strip(),
        )
    )
    _save(c)
    activity.record(
        c.project, "log", session_id=c.host_session_id, c3_session_id=c.c3_session_id, event_type=event_type
    )
    return f"logged {event_type} ({len(c.record.events)} events in this C3 session)"


@_does(Snapshot)
def snapshot(c: Caller, call: Snapshot) -> str:
    c.record.snapshots.append(
        records.Snapshot(
            ts=time.time(), host_session_id=c.host_session_id, summary=call.summary.strip(), data=call.data.strip()
        )
    )
    _save(c)
    activity.record(c.project, "snapshot", session_id=c.host_session_id, c3_session_id=c.c3_session_id)
    return f"snapshot saved ({len(c.record.snapshots)} in this C3 session)"


@_does(Restore)
def restore(c: Caller, call: Restore) -> str:
    """The last snapshot of a host session (target: id or prefix; default: the current one,
    else the project's latest)."""
    from ..sessions.refs import find

    target = call.target
    found = find(c.project, target, host=c.host_session_id) if target.strip() else None
    host = found.id if found is not None else c.host_session_id
    home = found.project if found is not None else c.project
    best = None
    for rec in records.load_all(home):
        for s in rec.snapshots:
            if (host is None or s.host_session_id == host) and (best is None or s.ts > best.ts):
                best = s
    if best is None and not target.strip():
        for rec in records.load_all(c.project):
            for s in rec.snapshots:
                if best is None or s.ts > best.ts:
                    best = s
    if best is None:
        raise NotFound(f"no snapshot for {host or 'this project'}: take one with action='snapshot'")
    when = datetime.fromtimestamp(best.ts).isoformat(timespec="seconds") if best.ts else "an unknown time"
    return f"snapshot of {best.host_session_id or '?'} at {when}\n{best.summary}" + (
        f"\n\n{best.data}" if best.data else ""
    )


@_does(Plan)
def plan(c: Caller, call: Plan) -> str:
    if not call.data.strip():
        return c.record.plan or "(no plan yet: set one with data='...')"
    c.record.plan = call.data.strip()
    _save(c)
    return "plan saved (ephemeral: it lives with this C3 session; durable work goes in c3_task)"


@_does(End)
def end(c: Caller, call: End) -> str:
    c.record.ended = time.time()
    c.record.summary = call.summary.strip() or c.record.summary
    _save(c)
    activity.record(c.project, "c3_end", session_id=c.host_session_id, c3_session_id=c.c3_session_id)
    return f"ended C3 session {c.c3_session_id[:8]}"


# ---------------------------------------------------------------- catalog


@_does(List)
def list_(c: Caller, call: List) -> str:
    from ..sessions.query import FILTERS
    from ..sessions.rows import age
    from ..sessions.view import list_rows_sync

    target = call.target.strip()
    which, search = (target.lower(), None) if target.lower() in FILTERS else ("all", target or None)
    tag = _options("list", call.data, ("tag",), "tag=WORD").get("tag")
    _scans, rows = list_rows_sync([c.project], which=which, search=search, processes=False, tag=tag)
    if not rows:
        return (
            f"no {which if which != 'all' else ''} sessions".replace("  ", " ")
            + (f" matching {search!r}" if search else "")
            + (f" tagged {tag!r}" if tag else "")
        )
    now = time.time()
    lines = []
    for r in rows[:LIST_ROWS]:
        flags = "LIVE " if r.live else ""
        if r.archived:
            flags += "ARCHIVED "
        if r.mcp_count > 1:
            flags += f"MCP×{r.mcp_count} "
        if r.forked_from:
            flags += f"(fork of {r.forked_from[:8]}) "
        tail = f"stale: {r.stale.reason}" if r.stale is not None else ", ".join(r.hints)
        cur = " (this session)" if r.id == c.host_session_id else ""
        tags = "".join(f" #{t}" for t in r.tags)
        lines.append(
            f"{r.id[:8]}  {age(r.last_activity or r.mtime, now):>4}  {r.branch or '-'}  "
            f"{flags}{' '.join(r.title.split())[:80]}{cur}{tags}" + (f"  [{tail}]" if tail else "")
        )
    more = len(rows) - LIST_ROWS
    if more > 0:
        lines.append(f"... {more} more; narrow with target='likely', 'stale', 'live' or search text")
    return "\n".join(lines)


@_does(Show)
def show(c: Caller, call: Show) -> str:
    from ..sessions import detail as session_detail

    if not call.target.strip() and not c.host_session_id:
        raise BadArgument("c3_session(action='show') needs target: a session id or prefix")
    d = session_detail.show(c.project, call.target, host=c.host_session_id)
    where = f"(this session is in the project {d.row.project}, not this one)\n" if d.elsewhere else ""
    return where + session_detail.render(d)


SEARCH_RESULTS = 10
_SEARCH_OPTIONS = ("all", "tools", "role", "since", "until", "branch", "tag", "limit")
_SEARCH_USE = "all, tools, role=user|assistant|tool, since=7d, until=DATE, branch=NAME, tag=WORD, limit=N"


def _options(action: str, data: str, known: tuple[str, ...], use: str) -> dict[str, str]:
    """``all tools role=user since=7d limit=5`` -> options (a bad one is named)."""
    out: dict[str, str] = {}
    for word in data.split():
        key, _, value = word.partition("=")
        key = key.strip().lower()
        if key not in known:
            raise BadArgument(f"c3_session(action='{action}') data: unknown option {clip(word, 40)!r}; use {use}")
        out[key] = value or "1"
    return out


def _limit(action: str, opts: dict[str, str], default: int) -> int:
    try:
        return int(opts.get("limit", default))
    except ValueError:
        raise BadArgument(f"c3_session(action='{action}') data: limit=N takes a number") from None


@_does(Search)
def search(c: Caller, call: Search) -> str:
    from ..sessions.search import search as run_search

    target = call.target
    opts = _options("search", call.data, _SEARCH_OPTIONS, _SEARCH_USE)
    limit = _limit("search", opts, SEARCH_RESULTS)
    found = run_search(
        target,
        projects=None if "all" in opts else [c.project],
        role=opts.get("role"),
        since=opts.get("since"),
        until=opts.get("until"),
        branch=opts.get("branch"),
        tools="tools" in opts,
        tag=opts.get("tag"),
        limit=limit,
        background=True,  # this server has threads: a first build runs as its own process
    )
    lines = []
    if found.index.updating or found.index.pending_bytes:
        pct = (
            f"{100 * found.index.done_bytes // found.index.total_bytes}% done" if found.index.total_bytes else "started"
        )
        lines.append(f"(the search index is being built in the background, {pct}: results cover what it has indexed)")
    lines += [f"warning: {p}" for p in found.problems]
    if not found.results:
        lines.append(
            f"no session matches {target!r}"
            + ("" if "all" in opts else " in this project (data='all' searches every project)")
        )
        return "\n".join(lines)
    lines.append(f"{found.total} session(s) match {target!r}; best first:")
    for n, r in enumerate(found.results, 1):
        lines.append(
            f"{n}. {r.id[:8]}  {r.age}  {r.branch or '-'}  {' '.join((r.title or '(untitled)').split())[:80]}"
            f"  [{r.project}]  matched {', '.join(r.fields)}" + (f", {r.hits} hit(s)" if r.hits else "")
        )
        for sn in r.snippets:
            text, pos = [], 0
            for a, b in sn.marks:
                text += [sn.text[pos:a], "«", sn.text[a:b], "»"]
                pos = b
            text.append(sn.text[pos:])
            lines.append(f"   {sn.role}{' (sub-agent)' if sn.sidechain else ''}: {''.join(text)}")
        lines.append(f"   resume: {r.resume}")
    if found.total > len(found.results):
        lines.append(f"... {found.total - len(found.results)} more (data='limit=N')")
    return "\n".join(lines)


@_does(Files)
def files(c: Caller, call: Files) -> str:
    from ..sessions.search import files as changed_by

    limit = _limit("files", _options("files", call.data, ("limit",), "limit=N"), SEARCH_RESULTS)
    found = changed_by(call.target.strip(), bases=[c.project.root], limit=limit, background=True)
    lines = [f"warning: {p}" for p in found.problems]
    if found.index.updating:
        lines.append("(the search index is being built in the background: results cover what it has indexed)")
    gone = " (no longer on disk)" if found.kind == "gone" else ""
    if not found.sessions:
        return "\n".join([*lines, f"no session changed {found.paths[0]}{gone}"])
    lines.append(f"{found.total} session(s) changed {found.paths[0]}{gone}; newest first:")
    for n, t in enumerate(found.sessions, 1):
        when = datetime.fromtimestamp(t.last_ts).isoformat(timespec="minutes") if t.last_ts else "?"
        lines.append(
            f"{n}. {t.id[:8]}{f'  fork of {t.forked_from[:8]}' if t.forked_from else ''}  last {when} ({t.age} ago)  {t.count} change(s): {', '.join(t.tools)}"
            f"{' (some by a sub-agent)' if t.by_subagent else ''}  {' '.join((t.title or '(untitled)').split())[:80]}"
            f"  [{t.project}]"
        )
        if found.kind == "folder" or len(t.files) > 1:
            lines += [f"   {ch.count:>3}  {ch.path}" for ch in t.files]
            if t.more_files:
                lines.append(f"   ... {t.more_files} more")
        lines.append(f"   resume: {t.resume}")
    if found.total > len(found.sessions):
        lines.append(f"... {found.total - len(found.sessions)} more (data='limit=N')")
    return "\n".join(lines)


def _marked(c: Caller, op: str, target: str, **fields: Any) -> Any:
    from ..sessions.act import mark as mark_session

    return mark_session(c.project, target, op, host=c.host_session_id, by=c.by, **fields)


def _mark(c: Caller, op: str, target: str, **fields: Any) -> str:
    mark, found = _marked(c, op, target, **fields)
    where = f" ({found.where()}: the mark is written there)" if found.elsewhere else ""
    return f"{op} {mark.id}" + (f" (successor {mark.successor})" if mark.successor else "") + where


@_does(Stale)
def stale(c: Caller, call: Stale) -> str:
    return _mark(c, "stale", call.target, reason=call.reasoning, successor=call.data.strip(" \t") or None)


@_does(Unstale)
def unstale(c: Caller, call: Unstale) -> str:
    return _mark(c, "unstale", call.target, reason=call.reasoning.strip() or None)


@_does(Note)
def note(c: Caller, call: Note) -> str:
    if not call.target.strip(" \t") and not c.host_session_id:  # an id: a newline is not stripped
        raise BadArgument("c3_session(action='note') could not tell the current session: pass target")
    if not (call.data.strip() or call.reasoning.strip()):
        raise BadArgument("c3_session(action='note') needs data (the summary) and/or reasoning (next steps)")
    return _mark(c, "note", call.target, summary=call.data, next_steps=call.reasoning)


@_does(Keep)
def keep(c: Caller, call: Keep) -> str:
    return _mark(c, "keep", call.target, reason=call.reasoning.strip() or None) + " (preserved in the archive)"


@_does(Unkeep)
def unkeep(c: Caller, call: Unkeep) -> str:
    return _mark(c, "unkeep", call.target, reason=call.reasoning.strip() or None) + " (its archive entry is removed)"


def _tags(c: Caller, op: str, call: Tag | Untag) -> str:
    if not call.target.strip(" \t") and not c.host_session_id:
        raise BadArgument(f"c3_session(action='{op}') could not tell the current session: pass target")
    mark, found = _marked(c, op, call.target, tags=call.data.split())
    where = f" ({found.where()}: the mark is written there)" if found.elsewhere else ""
    return f"{op} {mark.id}: {' '.join(getattr(mark, 'tags', None) or ())}{where}"


@_does(Tag)
def tag(c: Caller, call: Tag) -> str:
    return _tags(c, "tag", call)


@_does(Untag)
def untag(c: Caller, call: Untag) -> str:
    return _tags(c, "untag", call)


def run(caller: Caller, action: str, **args: str) -> str:
    call = read(action, **args)
    return _HANDLERS[name_of(type(call))](caller, call)
