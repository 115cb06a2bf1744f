"""Live by Claude Code's own registry, end to end: the real CLI 2.1.332, interactive in a pty,
offline against a stand-in Messages API, in a project where c3async is not configured (no MCP
server, no hooks). Its session reads live with its state (idle, busy, waiting for a permission)
in ``sessions --json``, ``live --all``, an MCP ``c3_status(view='live')`` and the Hub's listing;
once the CLI is SIGKILLed (its registry file left behind), it is not live in the next listing."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import anyio
from claude_pty import Terminal, trust
from fake_api import FakeAPI, claude_cli, needs_claude
from hubproc import Hub

pytestmark = needs_claude


def _until(check, what: str, timeout: float = 60.0, term: Terminal | None = None):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} never happened" + (
            f"; screen: {term.text()[-800:]!r}" if term else ""
        )
        if term is not None:
            term.pump(0.2)
        else:
            time.sleep(0.2)


def _mcp_live(claude, project: str) -> str:
    from mcp import Client, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "c3async", "serve"], cwd=project, env=claude.env(CLAUDE_PROJECT_DIR=project)
    )

    async def call() -> str:
        async with Client(stdio_client(params)) as c:
            result = await c.call_tool("c3_status", {"view": "live"})
            return "\n".join(block.text for block in result.content)

    return anyio.run(call)


def test_an_interactive_claude_without_c3async_reads_live_with_its_state(claude, tmp_path):
    script, log, release = tmp_path / "script.json", tmp_path / "api.jsonl", tmp_path / "release"
    script.write_text(
        json.dumps(
            [
                {"text": "hello back"},
                {"hold": str(release), "then": {"text": "done thinking"}},
                {"tool_use": {"name": "Bash", "input": {"command": "rm -rf ./build-output", "description": "clean"}}},
            ]
        )
    )
    api = FakeAPI(script, log).wait_ready()
    env = api.env(claude)
    project = claude.project("plain")
    trust(claude.config, project, env["ANTHROPIC_API_KEY"])
    term = Terminal([claude_cli(), "--permission-mode", "default"], project, env)
    try:
        term.wait_for("for agents", timeout=60)
        term.type("say hello")
        term.pump(0.3)
        term.type("\r")
        term.wait_for("hello back", timeout=60)

        def row():
            rows = [r for r in claude.sessions(project) if r["live"]]
            return rows[0] if len(rows) == 1 else None

        idle = _until(lambda: (r := row()) and r["state"] == "idle" and r, "an idle live row", term=term)
        sid = idle["id"]
        assert idle["mcp_count"] == 0 and not Path(project, ".c3", "live").exists()  # no c3async server here

        term.type("think hard")
        term.pump(0.3)
        term.type("\r")
        _until(lambda: Path(f"{release}.held").exists(), "the held turn", term=term)
        _until(lambda: (r := row()) and r["state"] == "busy", "a busy row", term=term)
        everywhere = json.loads(claude.run("live", "--all", "--json").stdout)
        assert [(e["id"], e["state"], e["source"]) for e in everywhere] == [(sid, "busy", "registry")]
        release.write_text("")
        term.wait_for("done thinking", timeout=60)

        term.type("clean the build output")
        term.pump(0.3)
        term.type("\r")
        waiting = _until(lambda: (r := row()) and r["state"] == "waiting" and r, "a waiting row", term=term)
        assert waiting["id"] == sid and waiting["state_since"]
        assert [r["id"] for r in claude.sessions(project, "--filter", "waiting")] == [sid]
        text = claude.run("live", "--all")
        assert text.returncode == 0 and text.stdout.startswith("waiting") and sid in text.stdout
        status = _mcp_live(claude, project)
        assert status.startswith("waiting") and sid in status, status
        with Hub(claude) as hub, hub.client() as c:
            data = c.get("/api/rows", params={"filter": "waiting"}).json()
        assert [(r["id"], r["state"]) for r in data["rows"]] == [(sid, "waiting")] and data["waiting"] == 1

        registry = claude.config / "sessions" / f"{term.pid}.json"
        assert registry.exists()
        os.kill(term.pid, signal.SIGKILL)
        os.waitpid(term.pid, 0)
        assert registry.exists()  # left behind, as Claude Code leaves it
        rows = claude.rows_by_id(project)
        assert rows[sid]["live"] is False and rows[sid]["state"] is None
        assert json.loads(claude.run("live", "--all", "--json").stdout) == []
        assert registry.exists()  # and never deleted by us
    finally:
        try:
            term.close()
        except (OSError, ChildProcessError):
            pass
        api.stop()
