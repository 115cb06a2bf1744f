"""Forks made by the real Claude Code CLI 2.1.332 (offline, a stand-in Messages API): ``claude
--resume ID --fork-session -p`` and ``/branch`` in the interactive CLI each make a row that names
its parent and sits under it in the table; the hooks record the fork's SessionStart source; and
the pair's tokens equal ccusage's for the same transcripts (copied responses count once). A
``/branch`` typed in a fresh session (prompt, ``/branch``, a prompt in the branch, ``/exit``)
names its parent in every door: ``sessions --json``, ``show``, MCP ``list`` and ``show``, the Hub."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import anyio
import pytest
from claude_pty import Terminal, trust
from fake_api import FakeAPI, claude_cli, needs_claude

CCUSAGE = os.environ.get("C3_CCUSAGE") or shutil.which("ccusage")
pytestmark = needs_claude


@pytest.fixture
def offline(claude, tmp_path):
    """(env, project): the stand-in API running, a git project the CLI trusts."""
    api = FakeAPI.started(tmp_path)
    try:
        env = api.env(claude)
        project = claude.project("forky")
        subprocess.run(["git", "init", "-q", project], check=True)
        trust(claude.config, project, env["ANTHROPIC_API_KEY"])
        yield env, project
    finally:
        api.stop()


def _enter(term: Terminal, text: str) -> None:
    """Type a line and press Enter once the CLI has drawn it (a command's menu opens first)."""
    term.type(text)
    term.pump(0.8)
    term.type("\r")


def _until(check, what: str, term: Terminal, timeout: float = 60) -> None:
    """Pump the terminal until ``check()`` holds (a file the CLI writes says it is done)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what}; the end of the screen: {term.text()[-1500:]!r}"
        term.pump(0.1)


def test_forks_of_the_real_cli_sit_under_their_parent(claude, offline, tmp_path):
    env, project = offline
    assert claude.run("install-hooks", "--project", project).returncode == 0

    def cli(*args: str) -> dict:
        proc = subprocess.run(
            [claude_cli(), *args, "--output-format", "json"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    parent = cli("-p", "sketch the importer")["session_id"]
    cli("-p", "now the exporter", "--resume", parent)
    fork = cli("-p", "try the importer with msgspec", "--resume", parent, "--fork-session")["session_id"]
    assert fork != parent

    term = Terminal([claude_cli(), "--resume", parent], project, env)
    try:
        term.wait_for("for agents", timeout=60)
        term.pump(1)
        _enter(term, "/branch")
        screen = term.wait_for("Branched", timeout=60)
    finally:
        term.close()
    folder = claude.folder(project)
    branch = next(p.stem for p in folder.glob("*.jsonl") if p.stem not in (parent, fork))
    assert branch[:8] in screen.replace(" ", "")

    rows = claude.rows_by_id(project)
    assert rows[fork]["forked_from"] == parent  # known only by the lines it shares
    assert rows[branch]["forked_from"] == parent  # named by forkedFrom
    assert sorted(rows[parent]["forks"]) == sorted([fork, branch])
    assert rows[branch]["title"].endswith("(Branch)")
    table = claude.run("sessions", "--project", project).stdout.splitlines()
    at = next(i for i, line in enumerate(table) if line.startswith(parent[:8]))
    under = {line[:8] for line in table[at + 1 : at + 3] if "\u2514 fork:" in line}
    assert under == {fork[:8], branch[:8]}, table

    starts = [json.loads(line) for line in Path(project, ".c3", "activity.jsonl").read_text().splitlines()]
    sources = {r["session_id"]: r.get("source") for r in starts if r.get("kind") == "session_start"}
    assert (sources[fork], sources[branch]) == ("fork", "fork"), sources  # as the hook recorded it

    stats = json.loads(claude.run("stats", "--project", project, "--json").stdout)
    ours = {s["id"]: s for s in stats}
    assert {parent, fork} <= set(ours)
    if CCUSAGE is None:
        pytest.skip("ccusage is not installed (set C3_CCUSAGE): the token comparison is skipped")
    out = subprocess.run(
        [CCUSAGE, "claude", "session", "--json", "--offline"],
        capture_output=True,
        text=True,
        env={**claude.env(), "HOME": str(tmp_path)},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    theirs = {s["sessionId"]: s for s in json.loads(out.stdout)["sessions"]}
    pair = [parent, fork, branch]

    def total(s: dict, keys: tuple[str, ...]) -> int:
        return sum(int(s.get(k) or 0) for k in keys)

    mine = sum(
        total(ours[s], ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read")) for s in pair if s in ours
    )
    cc = sum(
        total(theirs[s], ("inputTokens", "outputTokens", "cacheCreationTokens", "cacheReadTokens"))
        for s in pair
        if s in theirs
    )
    assert mine == cc > 0
    # and each copied response once: the parent keeps what was said in it
    assert ours[parent]["responses"] == 2 and ours[fork]["responses"] == 1


def test_an_interactive_branch_names_its_parent_in_every_door(claude, offline, monkeypatch):
    # prompt, /branch, a prompt in the branch, /exit: the real CLI's interactive /branch writes a
    # branch whose copies are timed before the parent's own first snapshot
    from hubproc import Hub
    from mcp import Client

    from c3async.serve import app as server

    env, project = offline
    folder = claude.folder(project)

    def transcripts_holding(text: str) -> list[Path]:
        return [p for p in folder.glob("*.jsonl") if text in p.read_text(errors="replace")]

    term = Terminal([claude_cli()], project, env)
    try:
        term.wait_for("for agents", timeout=60)
        term.pump(1)
        _enter(term, "sketch the importer")
        _until(
            lambda: any('"text":"Done."' in p.read_text() for p in transcripts_holding("sketch the importer")),
            "the first turn was never answered",
            term,
        )
        _enter(term, "/branch")
        term.wait_for("Branched", timeout=60)
        term.pump(1)
        _enter(term, "now in the branch")
        _until(
            lambda: any(p.read_text().count('"text":"Done."') >= 2 for p in transcripts_holding("now in the branch")),
            "the branch's turn was never answered",
            term,
        )
        _enter(term, "/exit")
        term.wait_for("Resume this session with", timeout=60)
    finally:
        term.close()
    (branch_file,) = transcripts_holding("now in the branch")
    branch = branch_file.stem
    (parent,) = {p.stem for p in folder.glob("*.jsonl")} - {branch}

    rows = claude.rows_by_id(project)
    assert (rows[branch]["forked_from"], rows[parent]["forked_from"]) == (parent, None)
    assert (rows[parent]["forks"], rows[branch]["forks"]) == ([branch], [])
    assert rows[branch]["title"].endswith("(Branch)") and rows[branch]["last_prompt"] == "now in the branch"
    shown = json.loads(claude.run("show", branch[:8], "--project", project, "--json").stdout)
    assert shown["row"]["forked_from"] == parent and shown["chain"]["predecessors"] == [parent]
    assert f"forked from: {parent}" in claude.run("show", branch[:8], "--project", project).stdout

    for key, value in {**claude.env(), "CLAUDE_PROJECT_DIR": project}.items():
        monkeypatch.setenv(key, value)

    async def mcp() -> tuple[str, str]:
        async with Client(server.mcp) as c:
            listed = await c.call_tool("c3_session", {"action": "list"})
            shown = await c.call_tool("c3_session", {"action": "show", "target": branch})
            return listed.content[0].text, shown.content[0].text

    listed, mcp_shown = anyio.run(mcp)
    line = next(x for x in listed.splitlines() if x.startswith(branch[:8]))
    assert f"fork of {parent[:8]}" in line, listed
    assert f"forked from: {parent}" in mcp_shown and f"forks: {branch}" not in mcp_shown

    with Hub(claude) as hub, hub.client() as client:
        d = client.get(f"/api/sessions/{branch}", params={"project": project}).json()
        assert d["row"]["forked_from"] == parent and d["chain"]["predecessors"] == [parent]
        page = client.get("/api/rows", params={"project": project, "forks_of": parent}).json()
        assert [(r["id"], r["forked_from"]) for r in page["rows"]] == [(branch, parent)]
