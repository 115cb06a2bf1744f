"""Reopen after a reboot, end to end: the real CLI 2.1.332, interactive in a pty, offline against a
stand-in Messages API, in a project with c3async's hooks installed. Its SessionStart hook
remembers the session; a SIGTERM (how a reboot's shutdown ends every process) makes Claude Code
run SessionEnd with reason ``other``, which keeps it; ``reopen --print`` then offers its resume
command, and offers nothing while it ran. A second claude left with ``/exit`` is never offered."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from claude_pty import Terminal, trust
from fake_api import FakeAPI, claude_cli, needs_claude

pytestmark = needs_claude


def _until(check, what: str, term: Terminal, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} never happened; screen: {term.text()[-800:]!r}"
        term.pump(0.2)


def _remembered(claude) -> list[str]:
    path = claude.c3home / "was_live.json"
    return [e["id"] for e in json.loads(path.read_text())["sessions"]] if path.exists() else []


def _ended(project: str) -> dict[str, str]:
    """session -> its SessionEnd reason, from the activity rows the hooks wrote."""
    log = Path(project, ".c3", "activity.jsonl")
    rows = [json.loads(line) for line in log.read_bytes().splitlines()] if log.exists() else []
    return {r["session_id"]: r.get("reason") for r in rows if r.get("kind") == "session_end"}


def _started(claude, project: str, env: dict[str, str]) -> tuple[Terminal, str]:
    before = set(_remembered(claude))
    term = Terminal([claude_cli()], project, env)
    term.wait_for("for agents", timeout=60)
    term.type("say hello")
    term.pump(0.3)
    term.type("\r")
    term.wait_for("hello back", timeout=60)
    new = _until(lambda: set(_remembered(claude)) - before, "the SessionStart hook's record", term)
    (sid,) = new
    return term, sid


def test_a_claude_ended_by_sigterm_is_offered_again_and_one_left_with_exit_is_not(claude, tmp_path):
    script, log = tmp_path / "script.json", tmp_path / "api.jsonl"
    script.write_text(json.dumps([{"text": "hello back"}] * 4))
    api = FakeAPI(script, log).wait_ready()
    env = api.env(claude)
    project = claude.project("app")
    trust(claude.config, project, env["ANTHROPIC_API_KEY"])
    hooks = claude.run("install-hooks", "--project", project)
    assert hooks.returncode == 0, hooks.stderr
    terms: list[Terminal] = []
    try:
        term, sid = _started(claude, project, env)
        terms.append(term)
        offered = claude.run("reopen", "--print", process=True)
        assert offered.returncode == 0 and offered.stdout == "", offered.stdout + offered.stderr  # it runs

        os.kill(term.pid, signal.SIGTERM)  # as a reboot's shutdown ends it
        _until(lambda: os.waitpid(term.pid, os.WNOHANG) != (0, 0), "claude's exit on SIGTERM", term)
        _until(lambda: sid in _ended(project), "the SessionEnd hook", term)
        assert _ended(project)[sid] == "other" and sid in _remembered(claude)
        offered = claude.run("reopen", "--print", process=True)
        assert offered.returncode == 0, offered.stderr
        assert offered.stdout.splitlines() == [f"cd {project} && claude --resume {sid}"]

        left, other = _started(claude, project, env)
        terms.append(left)
        left.type("/exit")
        left.pump(0.5)
        left.type("\r")
        _until(lambda: other in _ended(project), "the SessionEnd hook of /exit", left)
        assert _ended(project)[other] == "prompt_input_exit" and other not in _remembered(claude)
        offered = claude.run("reopen", "--print", process=True)
        assert offered.stdout.splitlines() == [f"cd {project} && claude --resume {sid}"]
    finally:
        for t in terms:
            try:
                t.close()
            except (OSError, ChildProcessError):
                pass
        api.stop()
