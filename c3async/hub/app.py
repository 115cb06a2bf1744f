"""The Hub: a local web page listing every session of every registered project.

Transcript previews (other sessions' prompts) must stay on this machine, so the app is strict:
it serves loopback only, refuses a Host header that is not a loopback name (DNS rebinding),
refuses state changes without this process's CSRF token or from a foreign Origin, sends a
Content-Security-Policy with no inline script, and takes project paths and session ids only
from what it lists itself. Listings never carry prompts or turns; a row's detail does.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
from importlib import resources
from typing import Any

import anyio
import msgspec
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from .. import registry
from ..catalog.detail import detail
from ..catalog.join import FILTERS, list_rows_sync, row_for
from ..catalog.listing import is_session_id
from ..catalog.locate import canonical, locate
from ..errors import C3Error
from ..marks import marks_path, write_mark
from ..paths import project_state

__all__ = ("LOOPBACK_HOSTS", "create_app")

log = logging.getLogger("c3async.hub")

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
# What a listing row may carry: never the prompts (they are in the detail, on request).
LISTING_DROPS = ("first_prompt", "last_prompt", "first_prompt_truncated", "last_prompt_truncated")
EVENT_POLL_S = 1.0
SECURITY_HEADERS = [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY"),
                    (b"cache-control", b"no-store")]
_HOST = re.compile(r"^(\[[0-9a-fA-F:]+\]|[^:]+)(?::(\d+))?$")


def _host_name(value: str) -> str | None:
    m = _HOST.match(value.strip())
    return m.group(1).lower() if m else None


class Guard:
    """ASGI middleware: loopback Host only; state changes need the token and a local Origin."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", [])) + SECURITY_HEADERS
            await send(message)

        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = _host_name(headers.get("host", ""))
        if host not in LOOPBACK_HOSTS:
            refusal = _error(421, "this Hub answers only to a loopback Host (127.0.0.1 or localhost)")
            await refusal(scope, receive, send_with_headers)
            return
        if scope["method"] not in ("GET", "HEAD", "OPTIONS"):
            origin = headers.get("origin")
            if origin is not None and _host_name(origin.split("://", 1)[-1]) not in LOOPBACK_HOSTS:
                await _error(403, "cross-origin request refused")(scope, receive, send_with_headers)
                return
            # Bytes, not str: compare_digest refuses non-ASCII strings (a forged header).
            if not secrets.compare_digest(headers.get("x-c3-token", "").encode("latin-1"), self.token.encode()):
                await _error(403, "missing or wrong X-C3-Token (reload the page)")(scope, receive, send_with_headers)
                return
        await self.app(scope, receive, send_with_headers)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _json(data: Any, status: int = 200) -> Response:
    return Response(msgspec.json.encode(data), status_code=status, media_type="application/json")


def _projects() -> list[str]:
    return registry.projects()


def _project_param(request: Request, value: str | None = None) -> str | None:
    """A project named by the client must be one the registry lists: no other path is read."""
    value = value or request.query_params.get("project") or None
    if value is None:
        return None
    if not isinstance(value, str):
        raise C3Error("project must be a path")
    known = _projects()
    if value in known:
        return value
    value = canonical(value)
    if value in known:
        return value
    raise C3Error(f"unknown project {value!r}: the Hub serves only registered projects")


def _listing_row(row: Any) -> dict[str, Any]:
    out = msgspec.to_builtins(row)
    for key in LISTING_DROPS:
        out.pop(key, None)
    return out


async def index(request: Request) -> Response:
    html = resources.files("c3async.hub").joinpath("static/index.html").read_text(encoding="utf-8")
    return HTMLResponse(html.replace("{{TOKEN}}", request.app.state.token))


async def favicon(request: Request) -> Response:
    return Response(status_code=204)


async def api_projects(request: Request) -> Response:
    return _json({"projects": [{"path": p, "name": p.rstrip("/").rsplit("/", 1)[-1] or p} for p in _projects()]})


async def api_sessions(request: Request) -> Response:
    try:
        project = _project_param(request)
    except C3Error as exc:
        return _error(400, str(exc))
    which = request.query_params.get("filter") or "all"
    if which not in FILTERS:
        return _error(400, f"filter must be one of {', '.join(FILTERS)}")
    q = (request.query_params.get("q") or "").strip() or None
    projects = [project] if project else _projects()
    # The whole listing (scan, joins) in a worker thread: the event loop stays free for others.
    scans, rows = await anyio.to_thread.run_sync(
        lambda: list_rows_sync(projects, which=which, search=q, processes=False))
    return _json({
        "rows": [_listing_row(r) for r in rows],
        "projects": [{"path": s.dirs.project, "sessions": len(s.sessions), "read": s.read} for s in scans],
    })


def _session_project(request: Request, sid: str) -> str:
    project = _project_param(request)
    if project:
        return project
    for p in _projects():  # no project given: the one whose transcripts hold this session
        if row_for(p, sid) is not None:
            return p
    raise C3Error(f"no registered project has the session {sid}")


async def api_session(request: Request) -> Response:
    sid = request.path_params["sid"].lower()
    if not is_session_id(sid):
        return _error(400, "a session id is a UUID")
    try:
        project = await anyio.to_thread.run_sync(_session_project, request, sid)
        _, rows = await anyio.to_thread.run_sync(lambda: list_rows_sync([project], processes=False))
        row = next((r for r in rows if r.id == sid), None) or await anyio.to_thread.run_sync(row_for, project, sid)
        if row is None:
            return _error(404, f"no session {sid} in {project}")
        d = await anyio.to_thread.run_sync(detail, project, row, rows)
    except C3Error as exc:
        return _error(400, str(exc))
    return _json(d)


async def api_mark(request: Request) -> Response:
    sid = request.path_params["sid"].lower()
    if not is_session_id(sid):
        return _error(400, "a session id is a UUID")
    try:
        body = await request.json()
    except (ValueError, json.JSONDecodeError):
        return _error(400, "the body must be JSON: {op, reason, successor, summary, next_steps, project}")
    if not isinstance(body, dict):
        return _error(400, "the body must be a JSON object")
    try:
        project = _project_param(request, body.get("project")) or await anyio.to_thread.run_sync(
            _session_project, request, sid)
        fields = {k: body.get(k) if isinstance(body.get(k), str) else None
                  for k in ("reason", "successor", "summary", "next_steps")}
        mark = await anyio.to_thread.run_sync(
            lambda: write_mark(project, sid, str(body.get("op") or ""), by="user", by_session=None, **fields))
    except C3Error as exc:
        return _error(400, str(exc))
    except OSError as exc:
        return _error(500, f"could not write the mark: {exc}")
    return _json(mark, status=201)


def _signature(projects: list[str]) -> tuple:
    """What changes when a row would: marks, heartbeats, activity, the catalog cache."""
    sig = []
    for p in projects:
        state = project_state(p)
        for path in (marks_path(p), state / "activity.jsonl", state / "cache" / "session_catalog.json"):
            try:
                st = path.stat()
                sig.append((st.st_size, st.st_mtime_ns))
            except OSError:
                sig.append(None)
        try:
            live = state / "live"
            sig.append(tuple(sorted((e.name, e.stat().st_mtime_ns) for e in live.iterdir())))
        except OSError:
            sig.append(None)
        for folder, _cwd in locate(p).folders:  # a new session file changes its folder
            try:
                sig.append(folder.stat().st_mtime_ns)
            except OSError:
                sig.append(None)
    return tuple(sig)


async def api_events(request: Request) -> Response:
    """Server-sent events: `change` whenever marks, liveness or the catalog move, so the page
    refreshes its rows without a reload. A comment line every 15 s keeps proxies quiet."""

    async def stream():
        last = await anyio.to_thread.run_sync(_signature, _projects())
        quiet = 0.0
        yield b"retry: 2000\n\n"
        while not await request.is_disconnected():
            await anyio.sleep(EVENT_POLL_S)
            sig = await anyio.to_thread.run_sync(_signature, _projects())
            if sig != last:
                last = sig
                quiet = 0.0
                yield b"event: change\ndata: {}\n\n"
            else:
                quiet += EVENT_POLL_S
                if quiet >= 15:
                    quiet = 0.0
                    yield b": keep-alive\n\n"

    return StreamingResponse(stream(), media_type="text/event-stream")


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _error(exc.status_code, exc.detail or "error")


async def _crash(request: Request, exc: Exception) -> Response:
    log.exception("%s %s failed", request.method, request.url.path, exc_info=exc)
    return _error(500, "the Hub failed on this request; its terminal shows the details")


def create_app(token: str | None = None) -> Starlette:
    token = token or secrets.token_urlsafe(32)
    static = str(resources.files("c3async.hub").joinpath("static"))
    app = Starlette(
        routes=[
            Route("/", index),
            Route("/favicon.ico", favicon),
            Route("/api/projects", api_projects),
            Route("/api/sessions", api_sessions),
            Route("/api/sessions/{sid}", api_session),
            Route("/api/sessions/{sid}/marks", api_mark, methods=["POST"]),
            Route("/api/events", api_events),
            Mount("/static", StaticFiles(directory=static), name="static"),
        ],
        middleware=[Middleware(Guard, token=token)],
        exception_handlers={HTTPException: _http_error, Exception: _crash},
    )
    app.state.token = token
    return app
