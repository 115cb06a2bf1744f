"""Finding sessions the real Claude Code CLI 2.1.332 wrote (offline, a stand-in Messages API): a
session named with ``--name`` writes, reads and edits files, and calls MultiEdit (a tool the CLI
no longer has) and NotebookEdit on a notebook it never read, both refused; a fork of it writes
one more file. ``files`` (a file, its folder, a path relative to where it runs) lists each session
with the calls that changed something, the fork told from its parent, in every door: the CLI in
process, ``c3_session(action='files')`` over the real stdio server, the Hub's ``/api/files``;
``search`` finds the session by its custom title. And tags, search and files over the stdio
server alone, with transcripts written here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import anyio
import pytest
from fake_api import FakeAPI, claude_cli, skip_reason
from hubproc import Hub, wait_for
from mcp import Client, StdioServerParameters

from stress.transcripts import Conversation, text, tool_use, write_session

SERVE = ["-m", "c3async", "serve"]


def _mcp(claude, project: str, calls: list[tuple[str, dict]]) -> list[str]:
    """The text answers of ``c3_session`` calls made over one real ``c3async serve``."""
    params = StdioServerParameters(
        command=sys.executable, args=SERVE, env=claude.env(CLAUDE_PROJECT_DIR=project), cwd=project
    )

    async def run() -> list[str]:
        async with Client(params) as c:
            out = []
            for name, args in calls:
                answer = await c.call_tool(name, args)
                out.append(answer.content[0].text)
            return out

    return anyio.run(run)


def _json(claude, *args: str, cwd: str | None = None) -> dict:
    done = claude.run(*args, "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.e2e
@pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")
def test_files_and_names_of_real_sessions_and_a_fork_in_every_door(claude, tmp_path):
    project = claude.project("app")
    subprocess.run(["git", "init", "-q", project], check=True)
    os.makedirs(f"{project}/src")
    with open(f"{project}/src/a.py", "w") as f:
        f.write("x = 1\ny = 2\n")
    script, log = tmp_path / "script.json", tmp_path / "api.jsonl"
    a = f"{project}/src/a.py"
    replies = [
        {"tool_use": {"name": "Write", "input": {"file_path": f"{project}/new.py", "content": "print(1)\n"}}},
        {"tool_use": {"name": "Read", "input": {"file_path": a}}},
        {"tool_use": {"name": "Edit", "input": {"file_path": a, "old_string": "x = 1", "new_string": "x = 10"}}},
        {
            "tool_use": {
                "name": "MultiEdit",
                "input": {"file_path": a, "edits": [{"old_string": "y", "new_string": "z"}]},
            }
        },
        {
            "tool_use": {
                "name": "NotebookEdit",
                "input": {"notebook_path": f"{project}/nb.ipynb", "new_source": "1", "edit_mode": "insert"},
            }
        },
        {"tool_use": {"name": "Write", "input": {"file_path": "rel.txt", "content": "relative\n"}}},
        {"text": "Edited."},
        # the fork's turn
        {"tool_use": {"name": "Write", "input": {"file_path": f"{project}/src/forked.py", "content": "f\n"}}},
        {"text": "Forked."},
    ]
    script.write_text(json.dumps(replies))
    api = FakeAPI(script, log).wait_ready()
    env = api.env(claude)

    def cli(*args: str) -> str:
        done = subprocess.run(
            [claude_cli(), "-p", *args, "--output-format", "json", "--allowedTools", "Write,Edit,Read"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)["session_id"]

    try:
        parent = cli("edit the parser files", "--name", "Übersicht der Parser")
        fork = cli("now write the forked module", "--resume", parent, "--fork-session")
    finally:
        api.stop()
    with open(a) as f:
        assert f.read() == "x = 10\ny = 2\n"  # the Edit ran, the MultiEdit did not
    assert not os.path.exists(f"{project}/nb.ipynb") and os.path.exists(f"{project}/rel.txt")

    # the CLI, in process (a fork is known from the catalog, which a listing keeps)
    assert claude.run("sessions", "--project", project).returncode == 0
    found = _json(claude, "files", "src/a.py", "--project", project)
    by_id = {s["id"]: s for s in found["sessions"]}
    assert set(by_id) == {parent, fork}
    assert (by_id[parent]["count"], by_id[parent]["tools"], by_id[parent]["forked_from"]) == (1, ["Edit"], None)
    assert by_id[fork]["forked_from"] == parent  # it carries the parent's calls, and says whose
    assert by_id[parent]["title"] == "Übersicht der Parser" and by_id[parent]["title_source"] == "custom"
    relative = _json(claude, "files", "rel.txt", cwd=project)
    assert relative["paths"][0] == f"{project}/rel.txt" and {s["id"] for s in relative["sessions"]} == {parent, fork}
    folder = _json(claude, "files", f"{project}/src")
    newest = by_id_of(folder)
    assert set(newest) == {parent, fork} and newest[fork]["last_ts"] >= newest[parent]["last_ts"]  # its own Write
    assert {c["path"] for c in by_id_of(folder)[fork]["files"]} == {a, f"{project}/src/forked.py"}
    assert {c["path"] for c in by_id_of(folder)[parent]["files"]} == {a}
    refused = claude.run("files", "nb.ipynb", "--project", project)
    assert refused.returncode != 0 and "no session changed it" in refused.stderr
    shown = claude.run("files", "src/a.py", "--project", project).stdout
    assert f"fork of {parent[:8]}" in shown and "MultiEdit" not in shown
    named = _json(claude, "search", "übersicht", "--project", project)["results"]
    assert named and {r["id"] for r in named} <= {parent, fork} and "title" in named[0]["fields"]
    assert parent in {r["id"] for r in named}

    # MCP, over the real stdio server
    (answer,) = _mcp(claude, project, [("c3_session", {"action": "files", "target": "src/a.py"})])
    assert "2 session(s) changed" in answer and f"fork of {parent[:8]}" in answer and "MultiEdit" not in answer
    assert "1 change(s): Edit  Übersicht der Parser" in answer

    # the Hub
    with Hub(claude) as hub, hub.client() as c:
        page = wait_for(
            lambda: c.get("/api/files", params={"path": "src/a.py", "project": project}).json()["sessions"],
            timeout=30,
        )
        assert {(s["id"], s["count"], s["forked_from"]) for s in page} == {(parent, 1, None), (fork, 1, parent)}


def by_id_of(found: dict) -> dict[str, dict]:
    return {s["id"]: s for s in found["sessions"]}


@pytest.mark.process
def test_tags_search_and_files_over_the_stdio_server(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    convs = {}
    for key, prompt, path in (("cache", "add the cache layer", "cache.py"), ("docs", "document the API", "API.md")):
        conv = Conversation(project)
        lines = [conv.permission_mode(), conv.prompt(prompt)]
        lines += conv.reply(tool_use("Write", {"file_path": f"{project}/{path}", "content": "x"}))
        lines.append(conv.tool_result(lines[-1]["message"]["content"][0]["id"], "ok"))
        lines += conv.reply(text("Done."))
        write_session(folder, conv.id, lines, mtime=conv.clock.timestamp())
        convs[key] = conv.id
    with open(f"{project}/cache.py", "w") as f:
        f.write("x")
    tagged, listed, other, searched, files = _mcp(
        claude,
        project,
        [
            ("c3_session", {"action": "tag", "target": convs["cache"], "data": "perf release-2"}),
            ("c3_session", {"action": "list", "data": "tag=perf"}),
            ("c3_session", {"action": "list", "data": "tag=nothing-tagged"}),
            ("c3_session", {"action": "search", "target": "perf"}),
            ("c3_session", {"action": "files", "target": "cache.py"}),
        ],
    )
    assert convs["cache"][:8] in tagged and "perf" in tagged, tagged
    assert convs["cache"][:8] in listed and convs["docs"][:8] not in listed, listed
    assert convs["cache"][:8] not in other
    assert convs["cache"][:8] in searched and "tags" in searched and convs["docs"][:8] not in searched, searched
    assert "1 session(s) changed" in files and convs["cache"][:8] in files and "Write" in files, files
