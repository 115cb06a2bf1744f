"""The MCP server, ``c3async serve``: one process per IDE session, many at once per project.

An anyio task group runs, beside the protocol: the heartbeat (the live light), a warm catalog
scan (so the first ``list`` is fast) and mark folding (new bytes of the marks file as they
arrive). A failing background task is logged to stderr and restarted with backoff; it never
takes the server down. Nothing but protocol messages goes to stdout.

Shutdown (SIGINT, SIGTERM, stdin EOF, normal exit) deletes the heartbeat file FIRST, before any
slower teardown: Claude Code sends SIGINT, SIGTERM 100 ms later, SIGKILL ~400 ms after that.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent

from . import __version__, activity, records, registry, safefs, session_actions, status
from .catalog.gitrefs import current_branch
from .catalog.scan import scan_project
from .errors import BadArgument, C3Error, clip
from .live.heartbeat import HeartbeatWriter
from .live.identity import HostIdentity, detect_ide
from .marks import MarkBook
from .paths import canonical, default_project, project_root

__all__ = ("mcp", "serve")

log = logging.getLogger("c3async.server")

BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0)
MARK_POLL_S = 2.0
USAGE_EVERY_S = 60.0
TEARDOWN_BUDGET_S = 1.0
INSTALL_SIGNAL_HANDLERS = False  # serve() sets it; in-process tests keep pytest's handlers
LOG_FIELD = 200  # characters of a string kept in an activity row


@dataclass
class ServerState:
    project: str
    c3_session_id: str
    identity: HostIdentity
    ide: str
    heartbeat: HeartbeatWriter
    record: records.SessionRecord
    book: MarkBook
    started: float = field(default_factory=time.time)
    warm: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


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


async def _warm_scan(state: ServerState) -> None:
    await scan_project(state.project)
    state.warm = True


async def _fold_marks(state: ServerState) -> None:
    while True:
        await anyio.to_thread.run_sync(state.book.refresh)
        await anyio.sleep(MARK_POLL_S)


async def _account_usage(state: ServerState) -> None:
    """Keep .c3/session_stats.jsonl current: each run reads only bytes appended since the last."""
    from .usage.account import account

    while True:
        await anyio.to_thread.run_sync(account, state.project)
        await anyio.sleep(USAGE_EVERY_S)


async def _watch_signals(state: ServerState, scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            state.heartbeat.remove()  # first, before anything that could be cut short
            log.info("signal %s: shutting down", signum)
            # The stdio transport reads stdin in a thread that only returns at EOF; a host that
            # signals without closing our stdin would leave us hanging: exit after the budget.
            backstop = threading.Timer(TEARDOWN_BUDGET_S + 0.5, os._exit, args=(0,))
            backstop.daemon = True
            backstop.start()
            # Claude Code follows SIGINT with SIGTERM 100 ms later: let teardown finish rather
            # than die on the second signal's default action.
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_IGN)
            scope.cancel()
            return


def _new_state() -> ServerState:
    checkout = canonical(default_project())  # where this server runs: the main checkout or a worktree
    project = project_root(checkout)  # the project: one state root for a repository and its worktrees
    c3_session_id = str(uuid.uuid4())
    identity = HostIdentity()
    ide = detect_ide()
    record = records.new_record(c3_session_id, ide, checkout)
    record.branch = current_branch(checkout)
    state = ServerState(project, c3_session_id, identity, ide, None, record, MarkBook(project))  # type: ignore[arg-type]
    state.heartbeat = HeartbeatWriter(project, c3_session_id, ide, lambda: _serving(state, identity.current()))
    return state


def _serving(state: ServerState, host: str | None) -> str | None:
    """Note in this server's C3 record each host session it serves (a /clear brings a new one),
    as soon as it is seen: the record names the folder the session runs in, which is how the
    session is still found after its worktree is removed."""
    if host and host not in state.record.host_session_ids:
        with state.lock:
            state.record.serve(host)
            try:
                records.save(state.project, state.record)
            except OSError as exc:  # the record is a convenience; the server goes on
                log.warning("could not save the C3 session record: %s", exc)
    return host


@asynccontextmanager
async def lifespan(server: MCPServer) -> AsyncIterator[ServerState]:
    state = _new_state()
    try:
        registry.register(state.project)
    except Exception as exc:  # the registry only feeds the Hub's project list
        log.warning("could not register %s: %s", state.project, exc)
    log.info("c3async %s serving %s (C3 session %s, %s)", __version__, state.project, state.c3_session_id, state.ide)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(supervised, "heartbeat", state.heartbeat.run)
            tg.start_soon(supervised, "catalog", lambda: _warm_scan(state))
            tg.start_soon(supervised, "marks", lambda: _fold_marks(state))
            tg.start_soon(supervised, "usage", lambda: _account_usage(state))
            if INSTALL_SIGNAL_HANDLERS:
                tg.start_soon(_watch_signals, state, tg.cancel_scope)
            try:
                yield state
            finally:
                state.heartbeat.remove()  # synchronous, no await: nothing can cut it short
                tg.cancel_scope.cancel()
    finally:
        state.heartbeat.remove()


mcp = MCPServer(
    "c3async",
    version=__version__,
    instructions=(
        "c3async catalogs this project's Claude Code sessions. Use c3_session(action='list') to "
        "find earlier sessions, 'show' to read one, 'stale' (with reasoning) to mark a dead end, "
        "and 'note' before stopping. c3_status(view='live') shows what is running."
    ),
    lifespan=lifespan,
)


def _result(text: str, error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=error)


async def _call(
    state: ServerState,
    tool: str,
    action: str,
    fn: Callable[[str | None], str],
    check: Callable[[], str],
) -> CallToolResult:
    """Run a tool body in a worker thread (file I/O stays off the event loop): validate the
    arguments with ``check()`` (which returns the normalised action name, or raises a C3Error
    before anything is logged), find the host session as of now (a /clear moves it), log the
    call, run ``fn(host)``, and turn our errors into readable tool errors and anything else into a
    logged, generic one."""

    def body() -> str:
        name = check()  # an unknown action or bad text is refused here: nothing is written
        host = _serving(state, state.identity.current())
        try:
            activity.record(
                state.project,
                "tool_call",
                session_id=host,
                c3_session_id=state.c3_session_id,
                tool=tool,
                action=clip(name, LOG_FIELD) or None,
            )
        except Exception as exc:
            log.warning("could not write the activity log: %s", exc)
        return fn(host)

    try:
        text = await anyio.to_thread.run_sync(body)
    except OSError as exc:  # first: a refused state file (safefs.UnsafeState) is both
        return _result(f"{tool}: could not read or write a file: {exc}", error=True)
    except C3Error as exc:
        return _result(str(exc), error=True)
    except Exception:
        shown = ascii(clip(action or "", 60))  # any text: bounded and escaped for stderr and the result
        log.exception("%s(action=%s) failed", tool, shown)
        return _result(
            f"{tool}(action={shown}) failed inside c3async; the server's stderr has "
            "the details. Other actions still work.",
            error=True,
        )
    return _result(text)


def _check_view(view: str) -> str:
    name = (view or "").strip().lower()
    if name not in status.VIEWS:
        shown = clip(view or "", 60)
        raise BadArgument(f"unknown view {shown!r}: use one of {', '.join(status.VIEWS)}")
    return name


@mcp.tool()
async def c3_session(
    action: str,
    data: str = "",
    reasoning: str = "",
    description: str = "",
    summary: str = "",
    event_type: str = "",
    target: str = "",
    *,
    ctx: Context[ServerState],
) -> CallToolResult:
    """Sessions of this project: the catalog of Claude Code conversations, and this C3 session.

    Catalog actions (target takes a session id or a unique prefix of 4+ characters):
    - list: one line per session, newest first. target: all | likely | stale | live | search text.
    - show: one session expanded (prompts, note or snapshot, chain, last turns). target: id.
    - stale: mark a session not worth resuming. target, reasoning (why) required; data: successor id.
    - unstale: undo it. target.
    - note: leave a note. data: summary, reasoning: next steps; target defaults to this session.
    Lifecycle actions: start (description), log (event_type, data, reasoning),
    snapshot (summary, data), restore (target), plan (data; empty reads it), end (summary).
    Text limits (characters): stale reasoning 2,000; note data and reasoning 8,000 each; log and
    snapshot data and plan 20,000; summaries 8,000; description 2,000; target 500. No NUL.
    """
    state: ServerState = ctx.request_context.lifespan_context
    args = dict(
        data=data, reasoning=reasoning, description=description, summary=summary, event_type=event_type, target=target
    )

    def body(host: str | None) -> str:
        caller = session_actions.Caller(state.project, state.c3_session_id, host, state.record, by="agent")
        if action.strip().lower() in session_actions.LIFECYCLE:
            with state.lock:  # one writer of this process's record at a time
                return session_actions.run(caller, action, **args)
        return session_actions.run(caller, action, **args)

    return await _call(state, "c3_session", action, body, lambda: session_actions.validate(action, **args))


@mcp.tool()
async def c3_task(
    action: str,
    task_id: str = "",
    title: str = "",
    description: str = "",
    status: str = "",
    priority: str = "",
    due: str = "",
    tags: str = "",
    milestone: str = "",
    blocked_by: str = "",
    text: str = "",
    reasoning: str = "",
    link_type: str = "",
    ref: str = "",
    *,
    ctx: Context[ServerState],
) -> CallToolResult:
    """Durable project tasks, milestones and decisions (they outlive every conversation).

    Changes: add (title; description, status backlog|in_progress|blocked|done, priority p0-p3,
    due YYYY-MM-DD, tags a,b, milestone, blocked_by ids), update (task_id + fields), link
    (task_id, link_type='session', ref='current' or a session id), decide (text, reasoning,
    task_id), milestone_add (milestone, due), milestone_complete / milestone_reopen /
    milestone_archive (milestone: id or name), time_start / time_stop (task_id).
    Reads (never write): get, list (filters status, priority, tags, milestone, due), board,
    report (blocking / ready to unblock), history, decisions, time_report, milestones (status:
    open by default, or completed, archived, all; each with task counts and open tasks). Done
    tasks of a completed milestone leave the default list and board but keep their link.
    Task ids accept a unique prefix of 4+ characters. Tasks and decisions changed here are
    linked to the current session. Text limits (characters): title 500, description 20,000,
    decision text and reasoning 8,000 each, milestone name 200, up to 50 tags of 64. No NUL.
    """
    import msgspec

    from .pm import actions as pm_actions
    from .sessions.refs import run_task

    state: ServerState = ctx.request_context.lifespan_context
    args = dict(
        task_id=task_id,
        title=title,
        description=description,
        status=status,
        priority=priority,
        due=due,
        tags=tags,
        milestone=milestone,
        blocked_by=blocked_by,
        text=text,
        reasoning=reasoning,
        link_type=link_type,
        ref=ref,
    )

    def body(host: str | None) -> str:
        result = run_task(state.project, pm_actions.Who(session=host, by="agent"), action, **args)
        return msgspec.json.format(msgspec.json.encode(result), indent=1).decode()

    return await _call(state, "c3_task", action, body, lambda: pm_actions.validate(action, **args))


@mcp.tool()
async def c3_status(view: str = "sessions", *, ctx: Context[ServerState]) -> CallToolResult:
    """Reports. view='sessions': tokens and cost per host session (a budget report, not the
    catalog). view='live': the project's live sessions and their MCP processes."""
    state: ServerState = ctx.request_context.lifespan_context
    return await _call(
        state, "c3_status", view, lambda host: status.run(state.project, view), lambda: _check_view(view)
    )


def serve() -> int:
    """``c3async serve``: the stdio server, until the client goes away or a signal comes."""
    global INSTALL_SIGNAL_HANDLERS
    INSTALL_SIGNAL_HANDLERS = True
    logging.getLogger("c3async").setLevel(logging.INFO)
    try:
        anyio.run(mcp.run_stdio_async)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(serve())
