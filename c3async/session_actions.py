"""``c3_session``: the actions behind the MCP tool, as plain functions over a ``Caller``.

Two families. Lifecycle (start, log, snapshot, restore, plan, end) writes this server's C3
session record and the activity log. Catalog (list, show, stale, unstale, note) reads and marks
the session catalog through the same library functions the CLI and the Hub use.
Every problem raises a C3Error whose message says how to fix the call.

``validate`` checks what needs no file (the action name, text limits, NUL and lone surrogates)
and runs before anything is logged or written. Limits, in characters: a stale reason 2,000, a
note's summary and next steps 8,000 each (see ``marks``); a log entry's data 20,000 and its
reasoning 8,000; a snapshot's summary 8,000 and data 20,000; a plan 20,000; a start description
2,000; an end summary 8,000; event_type 64; target 500; every other argument 20,000.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from .ground.errors import BadArgument, NotFound, check_text, clip
from .sessions import detail as session_detail
from .sessions.act import mark as mark_session
from .sessions.refs import find
from .sessions.rows import age
from .sessions.view import FILTERS, list_rows_sync
from .stores import activity, records
from .stores.marks import MAX_NEXT_STEPS, MAX_REASON, MAX_REF, MAX_SUMMARY

__all__ = ("ACTIONS", "LIMITS", "READS", "Caller", "reads_only", "run", "validate")

LIFECYCLE = ("start", "log", "snapshot", "restore", "plan", "end")
CATALOG = ("list", "show", "search", "stale", "unstale", "note", "keep", "unkeep")
ACTIONS = LIFECYCLE + CATALOG
READS = ("list", "show", "search", "restore")  # and plan with no data: they change nothing (plan-mode safe)
LIST_ROWS = 40  # rows a `list` answer shows; the rest are counted

MAX_TEXT = 20_000  # any argument an action has no tighter limit for
MAX_DESCRIPTION = 2_000
MAX_EVENT_TYPE = 64
MAX_TARGET = 500  # a session id or prefix, a filter, or search text
LOG_FIELD = 200  # characters of a string kept in an activity row
# (action, argument) -> the most characters it may hold.
LIMITS: dict[tuple[str, str], int] = {
    ("start", "description"): MAX_DESCRIPTION,
    ("log", "event_type"): MAX_EVENT_TYPE,
    ("log", "data"): MAX_TEXT,
    ("log", "reasoning"): 8_000,
    ("snapshot", "summary"): 8_000,
    ("snapshot", "data"): MAX_TEXT,
    ("plan", "data"): MAX_TEXT,
    ("end", "summary"): 8_000,
    ("stale", "reasoning"): MAX_REASON,
    ("stale", "data"): MAX_REF,  # the successor's id
    ("unstale", "reasoning"): MAX_REASON,
    ("keep", "reasoning"): MAX_REASON,
    ("unkeep", "reasoning"): MAX_REASON,
    ("note", "data"): MAX_SUMMARY,
    ("note", "reasoning"): MAX_NEXT_STEPS,
    ("search", "target"): 2_000,  # the query (search.query.MAX_QUERY)
    ("search", "data"): MAX_DESCRIPTION,  # its options
}


@dataclass
class Caller:
    """Who is calling: the project, this server's C3 session and record, the host session now."""

    project: str
    c3_session_id: str
    host_session_id: str | None
    record: records.SessionRecord
    by: str = "agent"


def validate(action: str, **args: str) -> str:
    """The action's name, normalised, once every check that needs no file has passed: a known
    action, and every argument within its limit and free of NUL and lone surrogates. Raises
    BadArgument naming the argument, its limit and its length. Nothing is logged or written
    before this passes."""
    name = (action or "").strip().lower()
    if name not in _HANDLERS:
        shown = action if len(action or "") <= 60 else clip(action, 60)
        raise BadArgument(f"unknown action {shown!r}: use one of {', '.join(ACTIONS)}")
    for arg, value in args.items():
        if value is None:
            continue
        if not isinstance(value, str):
            raise BadArgument(f"c3_session {arg} must be text")
        limit = LIMITS.get((name, arg)) or (MAX_TARGET if arg == "target" else MAX_TEXT)
        check_text(value, f"c3_session(action='{name}') {arg}", limit)
    return name


def reads_only(name: str, data: str = "") -> bool:
    """Whether the (validated) action changes nothing: list, show, restore, and plan with empty
    data (which reads the plan back)."""
    return name in READS or (name == "plan" and not (data or "").strip())


def _need(value: str, name: str, action: str, what: str) -> str:
    value = (value or "").strip()
    if not value:
        raise BadArgument(f"c3_session(action='{action}') needs {name}: {what}")
    return value


def _save(caller: Caller) -> None:
    caller.record.serve(caller.host_session_id)
    records.save(caller.project, caller.record)


# ---------------------------------------------------------------- lifecycle


def start(c: Caller, description: str = "", **_: str) -> str:
    validate("start", description=description)
    c.record.description = description.strip() or c.record.description
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


def log(c: Caller, event_type: str = "", data: str = "", reasoning: str = "", **_: str) -> str:
    validate("log", event_type=event_type, data=data, reasoning=reasoning)
    event_type = _need(event_type, "event_type", "log", "decision, discovery, blocker, progress...")
    data = _need(data, "data", "log", "what happened")
    c.record.events.append(
        records.Event(
            ts=time.time(),
            host_session_id=c.host_session_id,
            event_type=event_type,
            data=data,
            reasoning=reasoning.strip(),
        )
    )
    _save(c)
    activity.record(
        c.project, "log", session_id=c.host_session_id, c3_session_id=c.c3_session_id, event_type=event_type
    )
    return f"logged {event_type} ({len(c.record.events)} events in this C3 session)"


def snapshot(c: Caller, summary: str = "", data: str = "", **_: str) -> str:
    validate("snapshot", summary=summary, data=data)
    summary = _need(summary, "summary", "snapshot", "where things stand")
    c.record.snapshots.append(
        records.Snapshot(ts=time.time(), host_session_id=c.host_session_id, summary=summary, data=data.strip())
    )
    _save(c)
    activity.record(c.project, "snapshot", session_id=c.host_session_id, c3_session_id=c.c3_session_id)
    return f"snapshot saved ({len(c.record.snapshots)} in this C3 session)"


def restore(c: Caller, target: str = "", **_: str) -> str:
    """The last snapshot of a host session (target: id or prefix; default: the current one,
    else the project's latest)."""
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


def plan(c: Caller, data: str = "", **_: str) -> str:
    validate("plan", data=data)
    if not data.strip():
        return c.record.plan or "(no plan yet: set one with data='...')"
    c.record.plan = data.strip()
    _save(c)
    return "plan saved (ephemeral: it lives with this C3 session; durable work goes in c3_task)"


def end(c: Caller, summary: str = "", **_: str) -> str:
    validate("end", summary=summary)
    c.record.ended = time.time()
    c.record.summary = summary.strip() or c.record.summary
    _save(c)
    activity.record(c.project, "c3_end", session_id=c.host_session_id, c3_session_id=c.c3_session_id)
    return f"ended C3 session {c.c3_session_id[:8]}"


# ---------------------------------------------------------------- catalog


def list_(c: Caller, target: str = "", **_: str) -> str:
    target = target.strip()
    which, search = (target.lower(), None) if target.lower() in FILTERS else ("all", target or None)
    _scans, rows = list_rows_sync([c.project], which=which, search=search, processes=False)
    if not rows:
        return f"no {which if which != 'all' else ''} sessions".replace("  ", " ") + (
            f" matching {search!r}" if search else ""
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
        lines.append(
            f"{r.id[:8]}  {age(r.last_activity or r.mtime, now):>4}  {r.branch or '-'}  "
            f"{flags}{' '.join(r.title.split())[:80]}{cur}" + (f"  [{tail}]" if tail else "")
        )
    more = len(rows) - LIST_ROWS
    if more > 0:
        lines.append(f"... {more} more; narrow with target='likely', 'stale', 'live' or search text")
    return "\n".join(lines)


def show(c: Caller, target: str = "", **_: str) -> str:
    if not target.strip() and not c.host_session_id:
        raise BadArgument("c3_session(action='show') needs target: a session id or prefix")
    d = session_detail.show(c.project, target, host=c.host_session_id)
    where = f"(this session is in the project {d.row.project}, not this one)\n" if d.elsewhere else ""
    return where + session_detail.render(d)


SEARCH_RESULTS = 10
_SEARCH_OPTIONS = ("all", "tools", "role", "since", "until", "branch", "limit")


def _search_options(data: str) -> dict[str, str]:
    """``all tools role=user since=7d branch=main limit=5`` -> options (a bad one is named)."""
    out: dict[str, str] = {}
    for word in data.split():
        key, _, value = word.partition("=")
        key = key.strip().lower()
        if key not in _SEARCH_OPTIONS:
            raise BadArgument(
                f"c3_session(action='search') data: unknown option {clip(word, 40)!r}; use "
                "all, tools, role=user|assistant|tool, since=7d, until=DATE, branch=NAME, limit=N"
            )
        out[key] = value or "1"
    return out


def search(c: Caller, target: str = "", data: str = "", **_: str) -> str:
    from .sessions.search import search as run_search

    _need(target, "target", "search", 'the words to find ("exact phrase", prefix*, OR, -word)')
    opts = _search_options(data)
    try:
        limit = int(opts.get("limit", SEARCH_RESULTS))
    except ValueError:
        raise BadArgument("c3_session(action='search') data: limit=N takes a number") from None
    found = run_search(
        target,
        projects=None if "all" in opts else [c.project],
        role=opts.get("role"),
        since=opts.get("since"),
        until=opts.get("until"),
        branch=opts.get("branch"),
        tools="tools" in opts,
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
            f"  [{r.project}]  {r.hits} hit(s)"
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


def _mark(c: Caller, op: str, target: str, **fields) -> str:
    mark, found = mark_session(c.project, target, op, host=c.host_session_id, by=c.by, **fields)
    where = f" ({found.where()}: the mark is written there)" if found.elsewhere else ""
    return f"{op} {mark.id}" + (f" (successor {mark.successor})" if mark.successor else "") + where


def stale(c: Caller, target: str = "", reasoning: str = "", data: str = "", **_: str) -> str:
    _need(target, "target", "stale", "the session id or prefix to mark")
    _need(reasoning, "reasoning", "stale", "why it should not be resumed (superseded, finished, abandoned)")
    return _mark(c, "stale", target, reason=reasoning, successor=data.strip(" \t") or None)


def unstale(c: Caller, target: str = "", reasoning: str = "", **_: str) -> str:
    _need(target, "target", "unstale", "the session id or prefix")
    return _mark(c, "unstale", target, reason=reasoning.strip() or None)


def note(c: Caller, target: str = "", data: str = "", reasoning: str = "", **_: str) -> str:
    if not target.strip(" \t") and not c.host_session_id:  # an id: a newline is not stripped
        raise BadArgument("c3_session(action='note') could not tell the current session: pass target")
    if not (data.strip() or reasoning.strip()):
        raise BadArgument("c3_session(action='note') needs data (the summary) and/or reasoning (next steps)")
    return _mark(c, "note", target, summary=data, next_steps=reasoning)


def keep(c: Caller, target: str = "", reasoning: str = "", **_: str) -> str:
    _need(target, "target", "keep", "the session id or prefix to keep past Claude Code's cleanup")
    return _mark(c, "keep", target, reason=reasoning.strip() or None) + " (preserved in the archive)"


def unkeep(c: Caller, target: str = "", reasoning: str = "", **_: str) -> str:
    _need(target, "target", "unkeep", "the session id or prefix to release")
    return _mark(c, "unkeep", target, reason=reasoning.strip() or None) + " (its archive entry is removed)"


# each is called as fn(caller, **args)
_HANDLERS: dict[str, Callable[..., str]] = {
    "start": start,
    "log": log,
    "snapshot": snapshot,
    "restore": restore,
    "plan": plan,
    "end": end,
    "list": list_,
    "show": show,
    "search": search,
    "stale": stale,
    "unstale": unstale,
    "note": note,
    "keep": keep,
    "unkeep": unkeep,
}


def run(caller: Caller, action: str, **args: str) -> str:
    return _HANDLERS[validate(action, **args)](caller, **args)
