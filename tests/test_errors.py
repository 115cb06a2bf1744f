"""One error tree, one answer a door: each kind of error through each door's table, in process
(the CLI's ``_said``, the Hub's app with a route that raises it, the MCP server's tool call,
resource read and prompt), then a few end to end: an unknown id, an ambiguous prefix, a call
that cannot run and a conflict through the CLI (a subprocess), the Hub's routes and the MCP
server (in process, over a sandbox)."""

from __future__ import annotations

import errno
import json
import time
from pathlib import Path

import httpx
import pytest
from mcp import Client
from starlette.requests import Request
from starlette.routing import Route

from c3async import cli
from c3async.ground import errors
from c3async.ground.errors import Arg, C3Error, Call, Kind, TaskArgError, TaskError, TaskNotFound
from c3async.hub import app as hub_app
from c3async.serve import app as server
from c3async.serve import prompts as mcp_prompts
from stress.transcripts import simple_session

# One error of each kind, as the floors raise them.
SAMPLES: dict[Kind, C3Error] = {
    Kind.USAGE: errors.UsageError("--all goes with --expiring"),
    Kind.BAD_ARGUMENT: errors.BadArgument("give something to search for"),
    Kind.NOT_FOUND: errors.UnknownSession("ffff9999", "/work/app"),
    Kind.AMBIGUOUS: errors.AmbiguousSession("aaaa", ["aaaa1111", "aaaa2222"]),
    Kind.CONFLICT: errors.Conflict("a milestone named 'v1' exists already"),
    Kind.REFUSED: errors.UnsafeState("/work/app/.c3/session_marks.jsonl", "a symbolic link"),
    Kind.UNAVAILABLE: errors.NoFTS5("full-text search needs SQLite's FTS5"),
    Kind.DAMAGED: errors.NewerDocument(Path("/work/app/.c3/pm/pm.json"), 99, 3),
    Kind.DISK_FULL: errors.DiskFull("/work/app/.c3", 0),
}
NOT_OURS = PermissionError(errno.EACCES, "Permission denied", "/work/app/notes.md")
HTTP = {
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
FILE_LEAD = "c3_task: could not read or write a file: "


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _tree(cls: type) -> set[type]:
    return {cls} | {c for sub in cls.__subclasses__() for c in _tree(sub)}


def _task_error() -> TaskArgError:
    exc = TaskArgError("{action} needs {arg}", arg=Arg("title"))
    exc.action = "add"
    return exc


# ------------------------------------------------------------------------------ the tables


def test_every_error_has_a_kind_and_every_kind_an_answer_at_each_door():
    for cls in _tree(C3Error) - {C3Error, TaskError}:
        assert isinstance(cls.kind, Kind), cls
    assert {exc.kind for exc in SAMPLES.values()} == set(Kind)
    assert all(exc.kind is kind for kind, exc in SAMPLES.items())
    assert set(cli.EXIT) == set(hub_app.STATUS) == set(server.ANSWERS) == set(Kind)
    assert hub_app.STATUS == HTTP


def test_the_cli_exits_2_for_a_call_that_cannot_run_and_1_for_any_other(capsys):
    for kind, exc in SAMPLES.items():
        assert cli._said(exc) == (2 if kind is Kind.USAGE else 1), kind
        assert capsys.readouterr().err == f"c3async: error: {exc}\n"


def test_the_cli_words_a_task_error_in_its_flags_and_says_an_oserror_that_is_not_ours(capsys, tmp_path):
    assert cli._said(_task_error()) == 2
    assert capsys.readouterr().err == "c3async: error: tasks add needs --title\n"
    missing = TaskNotFound("no task has the id {ref} (`{listing}` shows them)", ref="'ffff'", listing=Call("list"))
    missing.action = "get"
    assert cli._said(missing) == 1
    assert capsys.readouterr().err == "c3async: error: no task has the id 'ffff' (`c3async tasks list` shows them)\n"
    assert cli._said(NOT_OURS) == 1
    assert capsys.readouterr().err == "c3async: error: [Errno 13] Permission denied: '/work/app/notes.md'\n"
    assert cli._said(OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "notes.md"))) == 1
    assert capsys.readouterr().err.startswith(f"c3async: error: the disk holding {tmp_path} is full: ")


async def _raised_at_the_hub(exc: BaseException) -> httpx.Response:
    """What the Hub's app (``Guard`` around it, its handlers) answers a route that raises ``exc``."""
    token = "t" * 43
    guard = hub_app.create_app(token)

    async def route(request: Request):
        raise exc

    guard.app.router.routes.insert(0, Route("/api/raise", route))
    transport = httpx.ASGITransport(app=guard)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as c:
        return await c.get("/api/raise", headers={"Authorization": f"Bearer {token}"})


async def test_the_hub_answers_each_kind_with_its_status_and_the_message():
    for kind, exc in SAMPLES.items():
        r = await _raised_at_the_hub(exc)
        assert (r.status_code, r.json()) == (HTTP[kind], {"error": str(exc)}), kind
        assert "content-security-policy" in r.headers
    r = await _raised_at_the_hub(_task_error())  # the page words it as the MCP tool does
    assert (r.status_code, r.json()["error"]) == (400, "c3_task(action='add') needs title")
    r = await _raised_at_the_hub(NOT_OURS)
    assert (r.status_code, r.json()["error"]) == (500, f"could not read or write a file: {NOT_OURS}")
    r = await _raised_at_the_hub(OSError(errno.ENOSPC, "No space left on device"))
    assert r.status_code == 507 and "is full" in r.json()["error"]
    r = await _raised_at_the_hub(RuntimeError("secret internal detail"))
    assert r.status_code == 500 and "secret" not in r.text and "terminal" in r.json()["error"]


async def test_the_mcp_server_answers_each_kind_as_a_tool_error_a_resource_error_and_a_prompt(monkeypatch):
    for kind, exc in [*SAMPLES.items(), (None, NOT_OURS)]:
        answer = server.ANSWERS[kind] if kind else server.NOT_OURS

        def refuse(exc: BaseException = exc):
            raise exc

        result = await server._call(None, "c3_task", "get", refuse, refuse)
        text = result.content[0].text
        assert result.is_error and text == (FILE_LEAD if answer.about_files else "") + str(exc), kind
        with pytest.raises(answer.resource) as read:
            await server._read(None, refuse)
        assert str(read.value) == str(exc)
        monkeypatch.setattr(mcp_prompts, "refusing", refuse, raising=False)
        assert await server._prompt("refusing") == f"c3async could not build this prompt: {exc}"
    assert server.ANSWERS[Kind.NOT_FOUND].resource.__name__ == "ResourceNotFoundError"
    assert server.ANSWERS[Kind.DAMAGED].resource.__name__ == "ResourceError"

    def refuse_a_task() -> None:
        raise _task_error()

    result = await server._call(None, "c3_task", "add", refuse_a_task, refuse_a_task)
    assert result.is_error and result.content[0].text == "c3_task(action='add') needs title"


# ------------------------------------------------------------------------------ end to end

HOST = "aaaa1111-0000-4000-8000-000000000001"
OTHER = "aaaa2222-0000-4000-8000-000000000002"  # shares the prefix "aaaa"
UNKNOWN = "ffff0000-0000-4000-8000-00000000ffff"


@pytest.fixture
def app_project(claude, monkeypatch) -> str:
    """Two sessions sharing a prefix, registered; this process pointed at the sandbox."""
    project = claude.project("app")
    now = time.time()
    simple_session(claude.folder(project), project, "Add the cache layer", session_id=OTHER, mtime=now - 200)
    simple_session(claude.folder(project), project, "Fix the flaky retry test", session_id=HOST, mtime=now - 100)
    assert claude.run("sessions", "--project", project).returncode == 0  # registers it
    for key in ("CLAUDE_CODE_SESSION_ID", "CLAUDE_PROJECT_DIR"):
        monkeypatch.delenv(key, raising=False)
    claude.activate(monkeypatch)
    return project


@pytest.mark.process
def test_the_cli_end_to_end(claude, app_project):
    def run(*args: str) -> tuple[int, str]:
        done = claude.run(*args, "--project", app_project)
        assert done.stdout == "" and "Traceback" not in done.stderr, done.stderr
        return done.returncode, done.stderr

    code, said = run("show", "ffff0000")
    assert code == 1 and said.startswith(f"c3async: error: no session of {app_project} has the id 'ffff0000'")
    code, said = run("show", "aaaa")
    assert code == 1 and "matches 2 sessions" in said and HOST in said and OTHER in said
    code, said = run("tasks", "add")
    assert (code, said) == (2, "c3async: error: tasks add needs --title\n")
    code, said = run("tasks", "get", "ffffffff")
    assert code == 1 and "no task has the id 'ffffffff' (`c3async tasks list` shows them)" in said
    assert claude.run("tasks", "milestone_add", "--title", "v1", "--project", app_project).returncode == 0
    code, said = run("tasks", "milestone_add", "--title", "v1")
    assert (code, said) == (1, "c3async: error: a milestone named 'v1' exists already\n")


@pytest.mark.process  # the fixture registers the project through the CLI
async def test_the_hubs_routes_end_to_end(app_project):
    token = "t" * 43
    transport = httpx.ASGITransport(app=hub_app.create_app(token))
    async with httpx.AsyncClient(
        transport=transport, base_url="http://127.0.0.1:8765", headers={"Authorization": f"Bearer {token}"}
    ) as c:
        r = await c.get(f"/api/sessions/{UNKNOWN}")
        assert r.status_code == 404 and UNKNOWN in r.json()["error"]
        r = await c.get("/api/sessions/aaaa")
        assert (r.status_code, r.json()) == (400, {"error": "a session id is a UUID"})
        r = await c.post(f"/api/sessions/{HOST}/marks", content=b"[1]")
        assert (r.status_code, r.json()) == (400, {"error": "the body must be a JSON object"})
        r = await c.post(f"/api/sessions/{HOST}/marks", content=b"x" * (hub_app.MAX_BODY + 1))
        assert r.status_code == 413
        r = await c.post(f"/api/sessions/{HOST}/marks", json={"op": "note", "summary": "x", "project": app_project})
        assert r.status_code == 201, r.text
        config = Path(app_project, ".c3", "config.json")
        config.write_text(json.dumps({"idle_days": 0}))  # a setting out of range: a file to repair
        r = await c.get("/api/sessions", params={"project": app_project})
        assert r.status_code == 409 and str(config) in r.json()["error"] and "idle_days" in r.json()["error"]


@pytest.mark.process  # the fixture registers the project through the CLI
async def test_the_mcp_server_end_to_end(app_project, monkeypatch):
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", app_project)
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", HOST)
    async with Client(server.mcp, mode="auto") as c:
        unknown = await c.call_tool("c3_session", {"action": "show", "target": "ffff0000"})
        assert unknown.is_error and "no session of" in unknown.content[0].text
        ambiguous = await c.call_tool("c3_session", {"action": "show", "target": "aaaa"})
        assert ambiguous.is_error and "matches 2 sessions" in ambiguous.content[0].text
        missing = await c.call_tool("c3_task", {"action": "get", "task_id": "ffffffff"})
        assert missing.is_error
        assert missing.content[0].text == "no task has the id 'ffffffff' (`c3_task(action='list')` shows them)"
        assert not (await c.call_tool("c3_task", {"action": "milestone_add", "milestone": "v1"})).is_error
        twice = await c.call_tool("c3_task", {"action": "milestone_add", "milestone": "v1"})
        assert twice.is_error and twice.content[0].text == "a milestone named 'v1' exists already"
