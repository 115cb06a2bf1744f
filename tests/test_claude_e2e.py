"""End to end with the real Claude Code CLI, run offline against a stand-in Messages API
(tests/fake_anthropic.py): `claude mcp add`/`mcp list` with our server, a session whose model
calls c3_session, our hooks, and a session whose long first prompt names the previous one (as a
plan accepted with "clear context" does) resumed turn after turn. Skipped where no `claude`
binary is installed (CI installs it from npm; set C3_CLAUDE to point at one)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fake_api import FakeAPI, claude_cli, needs_claude

HERE = Path(__file__).resolve().parent


_claude = claude_cli
pytestmark = needs_claude


@pytest.fixture
def world(claude, tmp_path):
    """A git project, our server registered with Claude Code, and a scripted fake API."""
    proj = claude.project("e2e")
    subprocess.run(["git", "init", "-q", proj], check=True)
    api = FakeAPI.started(tmp_path)
    script = api.script
    env = api.env(claude)

    def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([_claude(), *args], cwd=proj, env=env, capture_output=True, text=True, timeout=timeout)

    added = run("mcp", "add", "c3", "--", sys.executable, "-m", "c3async", "serve")
    assert added.returncode == 0, added.stderr
    yield proj, run, script, env
    api.stop()


def test_mcp_list_reports_connected_and_leaves_no_phantom(world, claude):
    proj, run, _script, _env = world
    out = run("mcp", "list")
    assert out.returncode == 0, out.stderr
    assert "c3" in out.stdout and "Connected" in out.stdout, out.stdout
    state = Path(proj, ".c3")
    assert not list((state / "live").glob("*.json")), "the health check's server left a heartbeat"
    activity = state / "activity.jsonl"
    assert not activity.exists() or "session_start" not in activity.read_text()
    assert claude.sessions(proj) == []  # no transcript, no row


def test_a_real_session_calls_c3_session_and_the_note_lands_on_its_row(world, claude):
    proj, run, script, _env = world
    script.write_text(
        json.dumps(
            [
                {
                    "tool_use": {
                        "name": "mcp__c3__c3_session",
                        "input": {"action": "note", "data": "hub tab done", "reasoning": "desk segment next"},
                    }
                },
                {"text": "Noted."},
            ]
        )
    )
    out = run("-p", "leave a note for later", "--allowedTools", "mcp__c3__c3_session")
    assert out.returncode == 0, out.stderr
    rows = claude.sessions(proj)
    assert len(rows) == 1
    row = rows[0]
    assert row["title"] == "leave a note for later"
    assert row["note"]["summary"] == "hub tab done" and row["note"]["next_steps"] == "desk segment next"
    marks = [json.loads(x) for x in Path(proj, ".c3", "session_marks.jsonl").read_text().splitlines()]
    assert marks[-1]["by"] == "agent" and marks[-1]["by_session"] == row["id"]
    assert not list(Path(proj, ".c3", "live").glob("*.json")), "the heartbeat outlived the session"


def test_hooks_record_the_session_start_and_end(world, claude):
    proj, run, _script, _env = world
    installed = claude.run("install-hooks", "--project", proj)
    assert installed.returncode == 0, installed.stderr
    out = run("-p", "hello")
    assert out.returncode == 0, out.stderr
    sid = claude.sessions(proj)[0]["id"]
    rows = [json.loads(x) for x in Path(proj, ".c3", "activity.jsonl").read_text().splitlines()]
    kinds = [(r["kind"], r.get("session_id")) for r in rows if r["kind"] in ("session_start", "session_end")]
    assert ("session_start", sid) in kinds and ("session_end", sid) in kinds
    start = next(r for r in rows if r["kind"] == "session_start")
    assert start["source"] == "startup"


def test_a_long_first_prompt_naming_the_last_session_keeps_every_turn_and_joins_the_chain(world, claude):
    # The first prompt a plan accepted with "clear context" gives: the plan (over 2,000
    # characters), then the previous session's transcript; then several turns, resumed.
    proj, run, _script, _env = world

    def ask(*args: str) -> str:
        out = run(*args, "--output-format", "json")
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["session_id"]

    before = ask("-p", "plan the importer")
    previous = claude.folder(proj) / f"{before}.jsonl"
    plan = "\n".join(f"{i}. change the importer's step {i} " + "carefully " * 8 for i in range(40))
    first = (
        f"Implement the following plan:\n\n{plan}\n\nIf you need specific details from before exiting plan "
        "mode (like exact code snippets, error messages, or content you generated), read the full "
        f"transcript at: {previous}"
    )
    sid = ask("-p", first)
    for n in range(8):
        ask("-p", f"step {n} done, go on", "--resume", sid)
    path = claude.folder(proj) / f"{sid}.jsonl"
    assert 100 * 1024 < path.stat().st_size < 1024 * 1024
    rows = claude.rows_by_id(proj)
    row = rows[sid]
    assert row["first_prompt_truncated"] and row["last_prompt"] == "step 7 done, go on"
    assert (row["user_turns"], row["user_turns_exact"]) == (9, True)
    assert (rows[before]["chain_next"], row["chain_prev"]) == ([sid], [before])
