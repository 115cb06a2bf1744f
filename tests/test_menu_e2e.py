"""The ``@`` menu and ``/continue`` in the real Claude Code CLI (offline, a stand-in Messages API),
with our server added by ``claude mcp add``: a fork made by ``claude --resume ID --fork-session``
is offered in the ``@`` menu by its own first prompt and "fork of <the parent's title>", never
under its parent's title; and ``/mcp__c3__continue`` followed by several words (Claude Code passes
each word as one argument) continues the one session all the words name, where each word alone
names two."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from claude_pty import Terminal, trust
from fake_api import FakeAPI, claude_cli, needs_claude

pytestmark = needs_claude


@pytest.fixture
def world(claude, tmp_path):
    """(run, env, project, log): our server added to a trusted git project, the API stand-in."""
    proj = claude.project("menu")
    subprocess.run(["git", "init", "-q", proj], check=True)
    api = FakeAPI.started(tmp_path)
    log = api.log
    env = api.env(claude)
    trust(claude.config, proj, env["ANTHROPIC_API_KEY"])

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([claude_cli(), *args], cwd=proj, env=env, capture_output=True, text=True, timeout=180)

    added = run("mcp", "add", "c3", "--", sys.executable, "-m", "c3async", "serve")
    assert added.returncode == 0, added.stderr
    yield run, env, proj, log
    api.stop()


def _session(run, *args: str) -> str:
    out = run(*args, "--output-format", "json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["session_id"]


def _sent(log: Path) -> str:
    """Every text the API received, joined."""
    out = []
    for line in log.read_text().splitlines():
        for m in json.loads(line).get("messages") or []:
            content = m.get("content")
            blocks = [{"text": content}] if isinstance(content, str) else content or []
            out += [b.get("text") or "" for b in blocks if isinstance(b, dict)]
    return "\n".join(out)


def test_continue_with_several_words_names_the_one_session_all_of_them_match(world):
    run, _env, _proj, log = world
    webhook = _session(run, "-p", "wire the billing webhook")
    _session(run, "-p", "export the billing ledger")
    _session(run, "-p", "document the webhook retries")
    log.write_text("")
    out = run("-p", "/mcp__c3__continue billing webhook")
    assert out.returncode == 0, out.stderr
    sent = _sent(log)
    assert f"`{webhook}`" in sent and "could not tell" not in sent, sent[-2000:]


def test_the_at_menu_tells_a_fork_from_its_parent(world, claude):
    run, env, proj, _log = world
    parent = _session(run, "-p", "sketch the importer")
    fork = _session(run, "-p", "try the importer with msgspec", "--resume", parent, "--fork-session")
    assert claude.rows_by_id(proj)[fork]["forked_from"] == parent

    term = Terminal([claude_cli()], proj, env)
    try:
        term.wait_for("for agents", timeout=60)
        deadline = time.monotonic() + 60
        while not list(Path(proj, ".c3", "live").glob("*.json")):  # our server runs
            assert time.monotonic() < deadline, "the server never started"
            term.pump(0.1)
        term.pump(2)
        term.type("@")
        screen = "".join(term.wait_for("(fork of sketch the importer)", timeout=30).split())
        # the menu draws the address (its id cut) and the description, which the name leads
        assert f"c3:c3://session/{fork[:13]}\u2026trytheimporterwithmsgspec(forkofsketchtheimporter)".lower() in (
            screen.lower()
        ), screen[-1500:]
        assert f"c3:c3://session/{parent[:13]}\u2026sketchtheimporter\u00b7" in screen, screen[-1500:]
    finally:
        term.close()
