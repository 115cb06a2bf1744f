"""The Hub: a local web page listing every session of every registered project.

Transcript previews (other sessions' prompts) must stay on this machine, and other local
accounts can reach loopback ports too, so the app trusts only a request that shows this
process's token, and nothing a browser sends by itself counts as showing it:

- it serves loopback only and refuses a Host header that is not a loopback name (DNS
  rebinding) with 421;
- every ``/api/*`` request, reads and the event stream included, needs the token in a header,
  ``Authorization: Bearer T`` or ``X-C3-Token: T``. No cookie is a credential: cookies ignore
  ports, so a browser sends them to every server of this host, another account's included
  (cookies named ``c3async-hub-PORT`` that earlier versions set are expired when the page is
  served). The token reaches a browser only through the URL ``c3async hub`` prints (and
  opens), ``/?token=T``: the page's script, run before anything else of the page, keeps it in
  the localStorage of the page's own origin (``http://127.0.0.1:PORT``: the port is part of
  the origin, so no other server, nor a Hub on another port, can read it), takes it out of the
  address bar and the history, and sends it as ``X-C3-Token`` on every request, the event
  stream included (read with fetch: EventSource cannot send a header). ``GET /`` serves the
  page to anyone (its HTML never holds the token or any data); a page without a token, or
  with one this Hub refuses (an earlier start's), goes to ``/welcome``, which says how to get
  in. A wrong token in the URL gets that text at once (403);
- CSRF: nothing a page elsewhere can make the browser send proves anything, so no page can act
  as the user without the token. What remains is cheap defence in depth, against a page that
  learned it: a state change (POST) whose Origin is sent must name exactly this Hub (http, a
  loopback name, this port), a Sec-Fetch-Site sent must be ``same-origin`` (or ``none`` for a
  read), and a browser's POST (it sends an Origin) must also carry ``X-C3-Request: 1``, which
  no form can send;
- every response, refusals, 404s and 500s included, carries the security headers (a
  Content-Security-Policy with no inline script among them): ``Guard`` wraps the whole
  Starlette app, outside its error middleware;
- project paths and session ids come only from what it lists itself, request bodies and query
  values are bounded and validated (4xx, never 500; a well-formed id no project has is a 404,
  ``NotFound``). Listings never carry prompts or turns; a row's detail does.

Errors: a route raises, and ``_answer`` answers, once for the whole app. One of ours is
``{"error": message}`` with the status its kind has in ``STATUS``; an OSError that is not ours
(EACCES on a file) is a 500 that says so (and is logged). HTTP's own refusals (a foreign Host,
no token, a body too large, an unknown path) are ``Guard``'s and Starlette's.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any, overload

import anyio
import msgspec
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..catalog import conversation
from ..catalog.listing import is_session_id
from ..catalog.locate import canonical
from ..ground.disk import said
from ..ground.errors import DECODE_ERRORS, BadArgument, C3Error, Kind, NotFound, NotRegularFile
from ..ground.project import Project, resolve
from ..sessions.act import keep_expiring
from ..sessions.act import mark as mark_session
from ..sessions.detail import show
from ..sessions.export import FORMATS, open_export
from ..sessions.export_html import CSP as EXPORT_CSP
from ..sessions.launch import open_terminal, terminal_argv
from ..sessions.projects import KnownProject, known_projects, listed_projects
from ..sessions.query import FILTERS, PAGE, SORTS, Query, wanted_tag
from ..sessions.runtime import Feed, Runtime
from ..sessions.view import list_rows_sync, project_usage, row_for
from .table import MAX_DEPTH, MAX_PAGE, Table

__all__ = ("LOOPBACK_HOSTS", "Guard", "create_app")

log = logging.getLogger("c3async.hub")

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
# What a listing row may carry: never the prompts (they are in the detail, on request).
LISTING_DROPS = ("first_prompt", "last_prompt", "first_prompt_truncated", "last_prompt_truncated")
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]
# The cookies that held the token before it moved to the page's storage: expired on sight.
_OLD_COOKIE = re.compile(r"c3async-hub-\d{1,5}")
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
MAX_BODY = 64 * 1024  # a mark's body; the marks layer bounds each field further
MAX_QUERY = 8 * 1024  # the whole query string
MAX_PROJECT = 4096  # a project path
MAX_SEARCH = 1000  # the search box
_HOST = re.compile(r"^(\[[0-9a-fA-F:]+\]|[^:\[\]/]+)(?::(\d{1,5}))?$")


def _host_name(value: str) -> str | None:
    m = _HOST.match(value.strip())
    return m.group(1).lower() if m else None


def _own_port(scope: Scope) -> int | None:
    server = scope.get("server")
    return server[1] if server and len(server) > 1 else None


def _is_own_origin(origin: str, port: int | None) -> bool:
    """``Origin`` is exactly this Hub: http, a loopback name, this port (not another local server)."""
    scheme, sep, rest = origin.partition("://")
    if scheme.lower() != "http" or not sep:
        return False
    m = _HOST.match(rest)
    if not m or m.group(1).lower() not in LOOPBACK_HOSTS:
        return False
    return port is not None and int(m.group(2) or 80) == port


def token_sent(scope: Scope, token: str) -> bool:
    """Whether the request shows the token in a header (``Authorization: Bearer`` or
    ``X-C3-Token``); a cookie never counts. Tokens are compared as bytes with
    ``compare_digest`` (a str compare refuses non-ASCII, and a forged header may be anything)."""
    want = token.encode()
    for key, value in scope.get("headers", ()):
        key = key.lower()
        if key == b"authorization":
            scheme, _, rest = value.strip().partition(b" ")
            if scheme.lower() == b"bearer" and secrets.compare_digest(rest.strip(), want):
                return True
        elif key == b"x-c3-token" and secrets.compare_digest(value.strip(), want):
            return True
    return False


class Guard:
    """The outermost ASGI layer, around the whole Starlette app (so around its error middleware):
    every response gets the security headers; a loopback Host only; ``/api`` needs the token
    in a header; anything that escapes the app becomes a 500 that carries the headers too.

    The token header is what keeps other pages out: a page elsewhere does not know it, and a
    cross-origin request that carried it would need a CORS preflight this Hub never grants.
    The rest is defence in depth, for a page that learned the token (module docstring): a
    state change (POST) that comes with an Origin (from a browser) must name exactly this Hub's
    origin (http, a loopback name, this port) and carry ``X-C3-Request: 1``; one with a
    Sec-Fetch-Site must say ``same-origin``; an API read with a Sec-Fetch-Site must say
    ``same-origin`` or ``none``. Scripts send neither header and need nothing more."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websockets here
            await send({"type": "websocket.close", "code": 1008})
            return
        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                # Ours replace any the response set itself (the event stream sets cache-control),
                # but a policy of its own is kept beside ours: a browser enforces both (an export).
                ours = {name for name, _ in SECURITY_HEADERS} - {b"content-security-policy"}
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in ours]
                message["headers"] = kept + SECURITY_HEADERS
            await send(message)

        try:
            refusal = self.refusal(scope)
            if refusal is not None:
                await refusal(scope, receive, send_with_headers)
                return
            await self.app(scope, receive, send_with_headers)
        except Exception:  # the last line: whatever escaped still gets an answer
            if started:  # the app's error handler answered (and logged) already
                return
            log.exception("%s %s failed", scope.get("method"), scope.get("path"))
            await _error(500, "the Hub failed on this request; its terminal shows the details")(
                scope, receive, send_with_headers
            )

    def refusal(self, scope: Scope) -> Response | None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if _host_name(headers.get("host", "")) not in LOOPBACK_HOSTS:
            return _error(421, "this Hub answers only to a loopback Host (127.0.0.1 or localhost)")
        if len(scope.get("query_string", b"")) > MAX_QUERY:
            return _error(414, f"the query string is longer than {MAX_QUERY} bytes")
        path = scope["path"]
        api = path == "/api" or path.startswith("/api/")
        change = scope["method"] not in SAFE_METHODS
        origin = headers.get("origin")
        site = headers.get("sec-fetch-site")
        if change:
            if origin is not None and not _is_own_origin(origin, _own_port(scope)):
                return _error(403, "cross-origin request refused: state changes come only from this Hub's page")
            if site is not None and site != "same-origin":
                return _error(403, f"cross-site request refused (Sec-Fetch-Site: {site[:40]!r})")
            length = headers.get("content-length")
            if length is not None and (not length.strip().isdigit() or int(length) > MAX_BODY):
                return _error(413, f"the body is larger than {MAX_BODY // 1024} KiB")
        elif api and site is not None and site not in ("same-origin", "none"):
            # another site, or another local server (same-site: another port of this host)
            return _error(403, f"cross-site request refused (Sec-Fetch-Site: {site[:40]!r})")
        if api:
            if not token_sent(scope, self.token):
                return _error(
                    401,
                    "this needs the Hub's token: open the URL that `c3async hub` printed "
                    "(it is also in $C3_HOME/hub/hub-PORT.json), or send Authorization: Bearer TOKEN",
                    headers={"WWW-Authenticate": 'Bearer realm="c3async hub"'},
                )
            if change and origin is not None and headers.get("x-c3-request") != "1":
                return _error(403, "a state change from a browser needs X-C3-Request: 1 (reload the page)")
        return None


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


# The HTTP status of each kind of error (ground/errors.py). A 4xx is answered once someone
# changes something: the request (400), what it names (404), or the state it meets (409, RFC
# 9110's "conflict with the current state of the target resource" that "the user might be able
# to resolve": a prefix two sessions now share, a milestone that exists already, a file to
# repair); 403 is what is refused whoever asks (a link planted in our state, a folder others can
# write). 503: not now (a lock held, no FTS5); 507 (Insufficient Storage): the request was fine,
# the disk is not. 500 stays the Hub's own failure.
STATUS = {
    Kind.USAGE: 400,
    Kind.BAD_ARGUMENT: 400,
    Kind.NOT_FOUND: 404,
    Kind.AMBIGUOUS: 409,
    Kind.CONFLICT: 409,
    Kind.REFUSED: 403,
    Kind.UNAVAILABLE: 503,
    Kind.DAMAGED: 409,
    Kind.DISK_FULL: 507,
}


def _json(data: Any, status: int = 200) -> Response:
    return Response(msgspec.json.encode(data), status_code=status, media_type="application/json")


@overload
def _text(value: str, what: str, limit: int) -> str: ...
@overload
def _text(value: Any, what: str, limit: int) -> str | None: ...
def _text(value: Any, what: str, limit: int) -> str | None:
    """A string from the client: bounded, no NUL, no lone surrogate (it cannot be stored)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadArgument(f"{what} must be a string")
    if len(value) > limit:
        raise BadArgument(f"{what} is longer than {limit} characters")
    if "\x00" in value:
        raise BadArgument(f"{what} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BadArgument(f"{what} is not valid Unicode (a lone surrogate)") from None
    return value


def _projects() -> list[Project]:
    """Every project the Hub lists: registered, or found in Claude Code's folders (a missing one
    too: its sessions are still shown)."""
    return listed_projects()


def _project_param(request: Request, value: str | None = None) -> Project | None:
    """A project named by the client must be one the Hub lists: no other path is read. The
    Hub's door: a request's project is resolved here, once."""
    value = value or request.query_params.get("project") or None
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadArgument("project must be a path")
    value = _text(value, "project", MAX_PROJECT)
    known = _projects()
    if Project(value) in known:
        return Project(value)
    try:
        value = canonical(value)
        if Project(value) not in known:  # a worktree names its repository's project
            value = resolve(value).root
    except (OSError, ValueError) as exc:
        raise BadArgument(f"project {value!r} is not a usable path ({exc})") from None
    if Project(value) in known:
        return Project(value)
    raise BadArgument(f"unknown project {value!r}: the Hub serves only registered projects")


def _listing_row(row: Any) -> dict[str, Any]:
    out = msgspec.to_builtins(row)
    for key in LISTING_DROPS:
        out.pop(key, None)
    return out


# What the page shows where it has no token, or one this Hub refuses: how to get in, and
# nothing else (no project, no data, no script).
WELCOME = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>c3async Hub</title>
<link rel="stylesheet" href="/static/app.css">
</head>
<body class="welcome">
<main>
<h1>c3async Hub</h1>
{problem}<p>This page needs the Hub's token. Open the address that <code>c3async hub</code> printed when it
started (it ends in <code>?token=&hellip;</code>); <code>c3async hub --open</code> opens it for you.</p>
<p>The address is also in the file <code>hub/hub-PORT.json</code> under your c3async home
(<code>$C3_HOME</code>, by default <code>~/.c3</code>), readable by you only. Each start of the Hub
makes a new token.</p>
</main>
</body>
</html>
"""
WRONG_TOKEN = "<p><strong>That token is not this Hub's</strong> (it may be an old one).</p>\n"


def _welcome(status: int = 200, problem: str = "") -> Response:
    return HTMLResponse(WELCOME.format(problem=problem), status_code=status)


async def index(request: Request) -> Response:
    """The page, to anyone: it holds no data and no token, and its script goes to ``/welcome``
    without a token. A wrong token in the URL is said at once (the script would only be refused)."""
    token: str = request.app.state.token
    given = request.query_params.get("token")
    if given is not None and not secrets.compare_digest(given.encode("utf-8", "replace"), token.encode()):
        return _welcome(403, WRONG_TOKEN)
    html = resources.files("c3async.hub").joinpath("static/index.html").read_text(encoding="utf-8")
    response = HTMLResponse(html)
    for name in request.cookies:  # an earlier version's cookie held an earlier token: gone
        if _OLD_COOKIE.fullmatch(name):
            response.raw_headers.append(
                (b"set-cookie", f"{name}=; Max-Age=0; Path=/; HttpOnly; SameSite=Strict".encode())
            )
    return response


async def welcome(request: Request) -> Response:
    """How to get in; ``?refused=1`` (the page's token was refused) says that token is not this Hub's."""
    return _welcome(problem=WRONG_TOKEN if request.query_params.get("refused") == "1" else "")


async def favicon(request: Request) -> Response:
    return Response(status_code=204)


def _live_count(project: Project) -> int:
    """How many host sessions of the project are live now (the rail shows it)."""
    from ..live.reader import live_sessions

    return sum(1 for sid, entry in live_sessions(project).items() if sid and entry.live)


def _project_entry(p: KnownProject) -> dict[str, Any]:
    """A rail entry: whether it is registered (else found in Claude Code's folders) or missing,
    the live count, and the tokens and cost of all the project's accounted sessions (``usage``:
    ``{sessions, tokens, cost_usd}``, the row's shape; null until known)."""
    here = Project(p.path)
    usage = project_usage(here)
    return {
        "path": p.path,
        "name": p.path.rstrip("/").rsplit("/", 1)[-1] or p.path,
        "registered": p.registered,
        "missing": p.missing,
        "live": _live_count(here),
        "usage": msgspec.to_builtins(usage),
    }


async def api_projects(request: Request) -> Response:
    def listing() -> list[dict[str, Any]]:
        listed = set(_projects())
        return [_project_entry(p) for p in known_projects() if Project(p.path) in listed]

    return _json({"projects": await anyio.to_thread.run_sync(listing)})


async def api_sessions(request: Request) -> Response:
    project = _project_param(request)
    which = request.query_params.get("filter") or "all"
    if which not in FILTERS:
        raise BadArgument(f"filter must be one of {', '.join(FILTERS)}")
    q = (_text(request.query_params.get("q"), "the search (q)", MAX_SEARCH) or "").strip() or None
    projects = [project] if project else _projects()
    # The whole listing (scan, joins) in a worker thread: the event loop stays free for others.
    scans, rows = await anyio.to_thread.run_sync(
        lambda: list_rows_sync(projects, which=which, search=q, processes=False)
    )
    return _json(
        {
            "rows": [_listing_row(r) for r in rows],
            "projects": [{"path": s.project.root, "sessions": len(s.sessions), "read": s.read} for s in scans],
        }
    )


def _query(request: Request) -> Query:
    """The listing a page asks for, every value checked (a bad one is a 400, never a 500)."""
    params = request.query_params
    which = params.get("filter") or "all"
    if which not in FILTERS:
        raise BadArgument(f"filter must be one of {', '.join(FILTERS)}")
    sort = params.get("sort") or ""
    if sort and sort not in SORTS:
        raise BadArgument(f"sort must be one of {', '.join(SORTS)}")
    order = params.get("order") or "desc"
    if order not in ("asc", "desc"):
        raise BadArgument("order must be asc or desc")
    branch = _text(params.get("branch"), "branch", 500) or None
    return Query(
        filter=which,
        q=(_text(params.get("q"), "the search (q)", MAX_SEARCH) or "").strip(),
        project=_root(_project_param(request)),  # the query filters rows, whose project is a root
        branch=branch,
        sort=sort,
        order=order,
        cursor=_query_int(request, "cursor", 0, 10_000_000) or 0,
        limit=PAGE if params.get("limit") in (None, "") else (_query_int(request, "limit", 0, MAX_PAGE) or 0),
        forks_of=_text(params.get("forks_of"), "forks_of", 100) or None,
        grouped=params.get("grouped") not in ("0", "false"),
        tag=wanted_tag(_text(params.get("tag"), "tag", 200)),
    )


async def api_rows(request: Request) -> Response:
    """One page of the listing over every registered project (or one): filtered, searched and
    sorted on the server, with the counts per filter and per project. ``depth=N`` (with a
    project) lists that project's N newest sessions instead of 200 (its older ones)."""
    query = _query(request)
    table: Table = request.app.state.table
    depth = _query_int(request, "depth", 1, MAX_DEPTH)
    if depth is not None:
        if query.project is None:
            raise BadArgument("depth needs a project")
        table.deepen(Project(query.project), depth)
    return _json(await anyio.to_thread.run_sync(table.query, query))


def _root(project: Project | None) -> str | None:
    return project.root if project is not None else None


def _session_project(request: Request, sid: str) -> Project:
    project = _project_param(request)
    if project:
        return project
    for p in _projects():  # no project given: the one whose transcripts hold this session
        if row_for(p, sid) is not None:
            return p
    raise NotFound(f"no registered project has the session {sid}")


def _sid(request: Request) -> str:
    """The session id in the path, checked."""
    sid = request.path_params["sid"].lower()
    if not is_session_id(sid):
        raise BadArgument("a session id is a UUID")
    return sid


async def api_session(request: Request) -> Response:
    sid = _sid(request)
    project = await anyio.to_thread.run_sync(_session_project, request, sid)
    d = await anyio.to_thread.run_sync(lambda: show(project, sid))
    if d.elsewhere:  # the page asked for a row of this project: another project's is not one
        raise NotFound(f"no session of {project} has the id {sid}")
    # whether "Open a terminal here" can work on this machine (a display and a terminal found)
    return _json({**msgspec.to_builtins(d), "terminal": terminal_argv(d.row.cwd) is not None})


async def api_terminal(request: Request) -> Response:
    """Open the platform's terminal in the session's folder (``sessions.launch.open_terminal``:
    the folder the catalog knows, a checkout of the project, started without a shell)."""
    sid = _sid(request)
    body = await _object(request, "{project}", empty=True)
    project = _project_param(request, body.get("project"))
    if not project:
        project = await anyio.to_thread.run_sync(_session_project, request, sid)
    folder = await anyio.to_thread.run_sync(open_terminal, project, sid)
    return _json({"opened": folder}, status=201)


MAX_OFFSET = 1 << 62  # a byte offset from the client (bigger means the end: the reader clamps)


def _query_int(request: Request, name: str, low: int, high: int) -> int | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    if len(value) > 20 or not value.isascii() or not value.isdigit() or not low <= int(value) <= high:
        raise BadArgument(f"{name} must be a whole number from {low} to {high}")
    return int(value)


async def api_conversation(request: Request) -> Response:
    """One page of a session's conversation (or of one of its sub-agents, ``agent=agent-<id>``):
    ``after=``, ``before=`` or ``at=`` a byte offset (none: the first page), ``limit`` items (at
    most 200). The JSON is ``conversation.Page`` with ``session`` and ``agent`` added."""
    sid = _sid(request)
    cursors = {k: _query_int(request, k, 0, MAX_OFFSET) for k in ("after", "before", "at")}
    limit = _query_int(request, "limit", 1, conversation.MAX_LIMIT) or conversation.PAGE_ITEMS
    agent = _text(request.query_params.get("agent") or None, "agent", 200)
    project = await anyio.to_thread.run_sync(_session_project, request, sid)
    row = await anyio.to_thread.run_sync(row_for, project, sid)
    if row is None:
        raise NotFound(f"no session of {project} has the id {sid}")
    path = row.path
    try:
        page = await anyio.to_thread.run_sync(lambda: conversation.page(path, **cursors, limit=limit, agent=agent))
    except OSError as exc:  # gone since it was listed, unreadable, or a link or a FIFO: not there to read
        if isinstance(exc, C3Error) and not isinstance(exc, NotRegularFile):
            raise  # a refusal of ours (UnsafeState is an OSError too): _answer says it
        what = f"the sub-agent transcript {agent}" if agent else "the transcript"
        raise NotFound(f"{what} of session {sid} cannot be read (gone, or not a regular file)") from exc
    out = msgspec.structs.asdict(page)
    out.update(id=sid, agent=agent)
    return _json(out)


async def api_export(request: Request) -> Response:
    """The session's export (``sessions.export``), ``format=md`` (the default) or ``html``, as
    a download: ``Content-Disposition: attachment``, streamed as it is rendered; the HTML with
    its own Content-Security-Policy too. A missing or refused transcript is said before the
    first byte (404 / 403)."""
    sid = _sid(request)
    fmt = request.query_params.get("format") or "md"
    if fmt not in FORMATS:
        raise BadArgument(f"format must be one of {', '.join(FORMATS)}")
    project = await anyio.to_thread.run_sync(_session_project, request, sid)
    try:
        exp = await anyio.to_thread.run_sync(lambda: open_export(project, sid, fmt))
    except OSError as exc:
        if isinstance(exc, C3Error) and not isinstance(exc, NotRegularFile):
            raise
        raise NotFound(f"the transcript of session {sid} cannot be read (gone, or not a regular file)") from exc
    if exp.detail.elsewhere:
        exp.close()
        raise NotFound(f"no session of {project} has the id {sid}")
    headers = {"Content-Disposition": f'attachment; filename="{exp.filename}"'}
    if fmt == "html":
        headers["Content-Security-Policy"] = EXPORT_CSP
    return StreamingResponse(exp.blocks(), media_type=exp.media_type, headers=headers)


SEARCH_LIMIT = 50


async def api_usage(request: Request) -> Response:
    """The Usage page's data (``sessions.usage_charts``): ``by=day|window`` (default ``day``),
    tokens and cost per bucket stacked by project, from ``since`` (``30d``, ``7d``, ``today``, a
    date; default per chart); the current 5-hour and weekly windows; the live sessions' burn."""
    from ..sessions.usage_charts import BY, usage_charts

    by = request.query_params.get("by") or "day"
    if by not in BY:
        raise BadArgument(f"by must be one of {', '.join(BY)}")
    since = _text(request.query_params.get("since") or None, "since", 40)
    projects = _projects()
    return _json(await anyio.to_thread.run_sync(lambda: usage_charts(projects, by, since)))


def _warm_usage() -> None:
    """The Usage page's two first asks answered once, held for the first visit (a background
    chore: a failure is logged, and the visit works it out itself)."""
    try:
        _runways(_projects())
    except Exception as exc:
        log.warning("could not work out the Usage page at start: %s", exc)


def _runways(projects: list[Project]) -> None:
    """After each accounting pass (and at start): the runways worked out again, and the Usage
    page's first asks, held for a visit."""
    from ..sessions.usage_charts import refresh

    refresh(projects)


async def api_search(request: Request) -> Response:
    """Full-text search of the registered projects' conversations (or one, ``project=``):
    ``q``, ``role``, ``since``, ``until``, ``branch``, ``tools=1``, ``limit``. The JSON is
    ``sessions.search.SearchResult``. A first build runs as its own process; until it is done
    the answer covers what is indexed and ``index.updating`` says so."""
    from ..sessions.search import search

    params = request.query_params
    q = _text(params.get("q") or "", "the search (q)", 2_000)
    project = _project_param(request)
    role, since, until, branch = (_text(params.get(k) or None, k, 200) for k in ("role", "since", "until", "branch"))
    limit = _query_int(request, "limit", 1, SEARCH_LIMIT) or 20
    tools = params.get("tools") in ("1", "true", "on")
    tag = _text(params.get("tag") or None, "tag", 200)
    projects = [project] if project else _projects()
    found = await anyio.to_thread.run_sync(
        lambda: search(
            q,
            projects=projects,
            role=role,
            since=since,
            until=until,
            branch=branch,
            tools=tools,
            tag=tag,
            limit=limit,
            background=True,
        )
    )
    return _json(found)


async def api_files(request: Request) -> Response:
    """The sessions that changed a file or anything in a folder (``path``: absolute, or relative
    to ``project``), newest first, from every project. The JSON is ``sessions.search.FilesResult``."""
    from ..sessions.search import files

    path = _text(request.query_params.get("path") or "", "path", 4096) or ""
    project = _project_param(request)
    limit = _query_int(request, "limit", 1, SEARCH_LIMIT) or SEARCH_LIMIT
    bases = [project.root] if project else []
    found = await anyio.to_thread.run_sync(lambda: files(path, bases=bases, limit=limit, background=True))
    return _json(found)


async def api_search_status(request: Request) -> Response:
    """Whether the index is being built, and how far (bytes read of bytes to read)."""
    from ..search.index import progress_status

    status = await anyio.to_thread.run_sync(progress_status)
    return _json({"updating": status.updating, "done_bytes": status.done, "total_bytes": status.total})


async def _body(request: Request, limit: int = MAX_BODY) -> bytes:
    """The request body, read up to ``limit`` bytes (a chunked body has no Content-Length): a
    larger one, or one the client left before sending whole, is refused as HTTP's own error."""
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise HTTPException(413, f"the body is larger than {limit // 1024} KiB")
            chunks.append(chunk)
    except ClientDisconnect:
        raise HTTPException(400, "the client left before sending the whole body") from None
    return b"".join(chunks)


async def _object(request: Request, shape: str, *, empty: bool = False) -> dict[str, Any]:
    """The request's body, a JSON object of at most MAX_BODY bytes (``empty``: no body reads as
    ``{}``); ``shape`` says what the body holds, for the refusal of another."""
    raw = await _body(request)
    if empty and not raw.strip():
        return {}
    try:
        # msgspec refuses what is not UTF-8, lone surrogates (raw or as \ud800 escapes) included;
        # nesting deeper than the recursion limit raises RecursionError.
        body = msgspec.json.decode(raw)
    except DECODE_ERRORS:
        raise BadArgument(f"the body must be UTF-8 JSON: {shape}") from None
    if not isinstance(body, dict):
        raise BadArgument("the body must be a JSON object")
    return body


async def api_mark(request: Request) -> Response:
    sid = _sid(request)
    body = await _object(request, "{op, reason, successor, summary, next_steps, project}")
    project = _project_param(request, body.get("project"))
    if not project:  # (an `or` would infer run_sync's result as `str | None`)
        project = await anyio.to_thread.run_sync(_session_project, request, sid)
    fields = {
        k: _text(body.get(k), k, MAX_BODY) if isinstance(body.get(k), str) else None
        for k in ("reason", "successor", "summary", "next_steps")
    }
    op = body.get("op")
    op = _text(op, "op", 100) if isinstance(op, str) else ""
    release = body.get("release") is True  # unkeep of an archived session: the person confirmed
    tags = body.get("tags")  # a tag or untag mark's words: a list of strings
    if tags is not None and not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
        raise BadArgument("tags must be a list of words")
    mark, _found = await anyio.to_thread.run_sync(
        lambda: mark_session(
            project,
            sid,
            op,
            by="user",
            release=release,
            tags=tags,
            reason=fields["reason"],
            successor=fields["successor"],
            summary=fields["summary"],
            next_steps=fields["next_steps"],
        )
    )
    return _json(mark, status=201)


async def api_keep_expiring(request: Request) -> Response:
    """Keep every session Claude Code deletes within the week (the banner's "keep them all"):
    of ``project`` (a registered one), else of every registered project; a keep mark each, each
    preserved at once (``sessions.act.keep_expiring``). The answer counts what was kept and
    says the archive's refusal, if any."""
    body = await _object(request, "{project}", empty=True)
    project = _project_param(request, body.get("project"))
    projects = [project] if project else _projects()
    done = await anyio.to_thread.run_sync(lambda: keep_expiring(projects, by="user"))
    failed = [k for k in done.kept if not k.preserved]
    return _json(
        {
            "kept": len(done.kept) - len(failed),
            "marked": len(done.kept),
            "failed": len(failed),
            "error": failed[0].error if failed else None,
            "expiring": done.expiring,
            "held": done.held,
            "waived": done.waived,
        }
    )


async def api_events(request: Request) -> Response:
    """Server-sent events: `change` whenever marks, liveness or the catalog move, so the page
    refreshes its rows without a reload; a comment line every 15 s keeps proxies quiet.
    ``?project=P`` (a registered project) watches that project alone. Every stream waits on the
    Hub's one watcher (``sessions.runtime.Feed``): N open pages cost one poll a second."""
    project = _project_param(request)  # checked before the stream starts: a bad one is a 400
    feed: Feed = request.app.state.feed

    table: Table = request.app.state.table

    async def stream() -> AsyncIterator[ServerSentEvent]:
        await feed.primed.wait()
        seen = feed.version(project)
        versions = dict(feed.versions)
        yield ServerSentEvent(retry=2000)  # the baseline is taken: changes from here on
        while True:
            seen = await feed.wait(project, seen)
            moved = [p for p, v in feed.versions.items() if versions.get(p) != v and project in (None, p)]
            versions = dict(feed.versions)
            # The rows that changed, by id (the page updates them in place); `rows: null` when
            # a project's rows could not be compared (the page reloads what it shows).
            diffs = [await anyio.to_thread.run_sync(table.diff, p) for p in moved]
            rows = None if any(d is None for d in diffs) else [r for d in diffs if d for r in d.changed]
            removed = [] if rows is None else [sid for d in diffs if d for sid in d.removed]
            if rows is not None and len(rows) > MAX_PAGE:
                rows = None
            data = {
                "projects": [p.root for p in moved],
                "rows": rows,
                "removed": removed,
                "version": feed.version(None),
            }
            yield ServerSentEvent(event="change", data=msgspec.json.encode(data).decode())

    return EventSourceResponse(stream(), ping=15, ping_message_factory=lambda: ServerSentEvent(comment="keep-alive"))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _error(exc.status_code, exc.detail or "error", headers=exc.headers)


async def _answer(request: Request, exc: Exception) -> Response:
    """The Hub's one translation of an error a route raised: one of ours is its message, with
    its kind's status (``STATUS``); an OSError that is not ours is a 500 that says so, and is
    logged (a full disk that no writer named is said as one: ``disk.said``)."""
    told = said(exc)
    if isinstance(told, C3Error):
        return _error(STATUS[told.kind], str(told))
    log.warning("%s %s: %s", request.method, request.url.path, told)
    return _error(500, f"could not read or write a file: {told}")


async def _crash(request: Request, exc: Exception) -> Response:
    log.exception("%s %s failed", request.method, request.url.path, exc_info=exc)
    return _error(500, "the Hub failed on this request; its terminal shows the details")


def create_app(token: str | None = None) -> Guard:
    """The Hub as an ASGI app: ``Guard`` around the Starlette app (``.app``); ``.token`` is the
    token every ``/api`` request needs (a fresh one unless given)."""
    token = token or secrets.token_urlsafe(32)
    static = str(resources.files("c3async.hub").joinpath("static"))
    # the watcher, the warm scan, token totals (and the runways, held for the Usage page), the keep pass
    runtime = Runtime(_projects, index=True, runway=_runways)
    table = Table(_projects, runtime.feed.version)

    async def warm() -> None:
        """The Usage page's first answers worked out (it reads the timelines alone: no catalog
        to wait for), then every project's rows built once the catalog is warm: the first visit
        of either page is a lookup."""
        await anyio.to_thread.run_sync(_warm_usage, abandon_on_cancel=True)
        await runtime.warmed.wait()
        await anyio.to_thread.run_sync(table.refresh, abandon_on_cancel=True)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tg:
            tg.start_soon(runtime.run)
            tg.start_soon(warm)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
                runtime.stop()

    app = Starlette(
        lifespan=lifespan,
        routes=[
            Route("/", index),
            Route("/welcome", welcome),
            Route("/favicon.ico", favicon),
            Route("/api/projects", api_projects),
            Route("/api/sessions", api_sessions),
            Route("/api/rows", api_rows),
            Route("/api/search", api_search),
            Route("/api/search/status", api_search_status),
            Route("/api/files", api_files),
            Route("/api/usage", api_usage),
            Route("/api/sessions/{sid}", api_session),
            Route("/api/sessions/{sid}/conversation", api_conversation),
            Route("/api/sessions/{sid}/export", api_export),
            Route("/api/sessions/{sid}/marks", api_mark, methods=["POST"]),
            Route("/api/sessions/{sid}/terminal", api_terminal, methods=["POST"]),
            Route("/api/keep/expiring", api_keep_expiring, methods=["POST"]),
            Route("/api/events", api_events),
            Mount("/static", StaticFiles(directory=static), name="static"),
        ],
        exception_handlers={HTTPException: _http_error, C3Error: _answer, OSError: _answer, Exception: _crash},
    )
    app.state.token = token
    app.state.feed = runtime.feed
    app.state.table = table
    return Guard(app, token)
