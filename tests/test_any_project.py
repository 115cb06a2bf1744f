"""Any id, any project: ``show``, ``resume``, ``mark`` and task links take an id (or a prefix)
of another registered project's session, and ``show`` and ``resume`` one of any folder in
Claude Code's projects folder, saying where it was found; a prefix that sessions of two projects
start with lists both, with their projects."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import anyio
import pytest

from stress.transcripts import simple_session

pytestmark = pytest.mark.process

A_ID = "aaaa0001-0000-4000-8000-000000000001"
B_ID = "bbbb0002-0000-4000-8000-000000000002"
B_TWIN = "cccc0003-0000-4000-8000-000000000003"
C_TWIN = "cccc0004-0000-4000-8000-000000000004"
LOOSE_ID = "dddd0005-0000-4000-8000-000000000005"


@pytest.fixture
def two(claude):
    """Projects A and B, both registered; C only in Claude Code's folder (never listed here)."""
    a, b, c = claude.project("alpha"), claude.project("beta"), claude.project("gamma")
    simple_session(claude.folder(a), a, "alpha's work", session_id=A_ID)
    simple_session(claude.folder(b), b, "beta's work", session_id=B_ID)
    simple_session(claude.folder(b), b, "beta's twin", session_id=B_TWIN)
    simple_session(claude.folder(a), a, "alpha's twin", session_id=C_TWIN)
    simple_session(claude.folder(c), c, "gamma's loose session", session_id=LOOSE_ID)
    for p in (a, b):
        assert claude.run("sessions", "--project", p).returncode == 0
    return a, b, c


def _marks(project: str) -> list[dict]:
    path = Path(project, ".c3", "session_marks.jsonl")
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_show_finds_another_registered_projects_session_and_says_where(claude, two):
    a, b, _ = two
    proc = claude.run("show", B_ID[:8], "--project", a)
    assert proc.returncode == 0, proc.stderr
    assert "beta's work" in proc.stdout and b in proc.stderr and "is in the project" in proc.stderr
    d = json.loads(claude.run("show", B_ID[:8], "--project", a, "--json").stdout)
    assert d["row"]["project"] == b and d["elsewhere"] is True
    own = json.loads(claude.run("show", A_ID[:8], "--project", a, "--json").stdout)
    assert own["elsewhere"] is False


def test_a_mark_on_another_projects_session_is_written_in_that_project(claude, two):
    a, b, _ = two
    proc = claude.run("mark", "note", B_ID[:6], "--summary", "from alpha", "--project", a)
    assert proc.returncode == 0 and b in proc.stderr, proc.stderr
    assert [m["id"] for m in _marks(b)] == [B_ID] and _marks(a) == []
    assert claude.rows_by_id(b)[B_ID]["note"]["summary"] == "from alpha"


def test_resume_and_task_links_take_another_projects_id(claude, two):
    a, b, _ = two
    proc = claude.run("resume", B_ID[:8], "--print", "--project", a)
    assert proc.returncode == 0, proc.stderr
    assert shlex.split(proc.stdout) == ["cd", b, "&&", "claude", "--resume", B_ID]
    assert b in proc.stderr
    task = json.loads(claude.run("tasks", "add", "--title", "t", "--project", a, "--json").stdout)
    linked = json.loads(
        claude.run("tasks", "link", "--task-id", task["id"], "--ref", B_ID[:8], "--project", a, "--json").stdout
    )
    assert B_ID in linked["sessions"] and linked["session_project"] == b


def test_a_prefix_two_projects_share_lists_both_with_their_projects(claude, two):
    a, b, _ = two
    # in alpha, "cccc" is alpha's own session: the asking project wins
    assert json.loads(claude.run("show", "cccc", "--project", a, "--json").stdout)["row"]["id"] == C_TWIN
    elsewhere = claude.project("delta")
    proc = claude.run("show", "cccc", "--project", elsewhere)
    assert proc.returncode == 1
    assert B_TWIN in proc.stderr and C_TWIN in proc.stderr and a in proc.stderr and b in proc.stderr, proc.stderr


def test_show_and_resume_find_a_session_of_any_claude_code_folder(claude, two):
    a, _, c = two
    proc = claude.run("show", LOOSE_ID[:8], "--project", a)
    assert proc.returncode == 0 and "gamma's loose session" in proc.stdout and c in proc.stderr, proc.stderr
    proc = claude.run("resume", LOOSE_ID[:8], "--print", "--project", a)
    assert shlex.split(proc.stdout) == ["cd", c, "&&", "claude", "--resume", LOOSE_ID]
    # listing and showing a found project writes nothing into it; a mark registers it
    assert not Path(c, ".c3").exists()
    proc = claude.run("mark", "stale", LOOSE_ID[:8], "--reason", "x", "--project", a)
    assert proc.returncode == 0 and c in proc.stderr, proc.stderr
    assert [m["op"] for m in _marks(c)] == ["stale"]
    assert c in [p["path"] for p in json.loads(claude.run("projects", "--json").stdout) if p["registered"]]


def test_the_mcp_server_shows_and_marks_another_projects_session(claude, two, monkeypatch):
    from mcp import Client

    from c3async.serve import app as server

    a, b, _ = two
    for key, value in {**claude.env(), "CLAUDE_PROJECT_DIR": a}.items():
        monkeypatch.setenv(key, value)

    async def main() -> tuple[str, str]:
        async with Client(server.mcp) as c:
            shown = await c.call_tool("c3_session", {"action": "show", "target": B_ID[:8]})
            marked = await c.call_tool("c3_session", {"action": "stale", "target": B_ID[:8], "reasoning": "done"})
            return shown.content[0].text, marked.content[0].text

    shown, marked = anyio.run(main)
    assert "beta's work" in shown and b in shown
    assert b in marked and [m["op"] for m in _marks(b)] == ["stale"]


def test_an_id_found_nowhere_says_which_projects_were_searched(claude, two, monkeypatch):
    from mcp import Client

    from c3async.serve import app as server

    a, b, c = two
    nowhere = "eeee0006-0000-4000-8000-000000000006"
    folder = str(claude.projects_root)
    for args, anywhere in (
        (("show", nowhere[:8]), True),
        (("resume", nowhere, "--print"), True),
        (("mark", "note", nowhere[:8], "--summary", "s"), False),
    ):
        proc = claude.run(*args, "--project", a)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        said = proc.stderr
        assert f"no session of {a} has the id '{nowhere[:8]}" in said, said
        assert "the 2 other projects (" in said and b in said and c in said, said
        assert (folder in said) is anywhere, said
    for key, value in {**claude.env(), "CLAUDE_PROJECT_DIR": a}.items():
        monkeypatch.setenv(key, value)

    async def main() -> str:
        async with Client(server.mcp) as c:
            shown = await c.call_tool("c3_session", {"action": "show", "target": nowhere[:8]})
            assert shown.is_error
            return shown.content[0].text

    said = anyio.run(main)
    assert a in said and b in said and c in said and folder in said and "other projects" in said, said


def test_an_unknown_id_with_no_other_project_says_so(claude):
    alone = claude.project("alone")
    simple_session(claude.folder(alone), alone, "the only one")
    proc = claude.run("mark", "note", "ffff0000", "--summary", "s", "--project", alone)
    assert proc.returncode == 1 and "Claude Code has no other project" in proc.stderr, proc.stderr
