"""A usage-limit refusal through the real Claude Code CLI: signed in with an OAuth token, the
stand-in API answers 429 with the unified headers saying ``rejected`` for the 5-hour window, as
the real API does. Claude Code writes its synthetic refusal line in the transcript; `usage
--burn --json`, `c3_status(view='usage')` over the real stdio MCP server and the Hub's
`/api/usage` list that refusal with its window and reset, and each knows the 5-hour window from
it (full, ending at that reset) though no status line ever recorded a sample."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import anyio
import pytest
from fake_api import FakeAPI, claude_cli, needs_claude, unified_headers
from hubproc import Hub
from mcp import Client, StdioServerParameters

from c3async.ground.clock import parse_iso
from c3async.sessions.usage_report import refusal_lines
from c3async.usage.reader import Refusal

pytestmark = needs_claude


@pytest.fixture(scope="module")
def refused(module_claude, tmp_path_factory):
    """One `claude -p` refused by the 5-hour window: (sandbox, project, session id, reset)."""
    claude = module_claude
    work = tmp_path_factory.mktemp("api")
    script, log = work / "script.json", work / "api.jsonl"
    now = int(time.time())
    reset = now + 2 * 3600 + 17 * 60
    script.write_text(
        json.dumps([{"status": 429, "headers": unified_headers(1.0, 0.41, reset, now + 3 * 86_400, "rejected")}])
    )
    api = FakeAPI(script, log).wait_ready()
    env = api.env(claude, CLAUDE_CODE_OAUTH_TOKEN="fake-oauth-token")
    del env["ANTHROPIC_API_KEY"]  # a subscriber's login: Claude Code applies the headers
    project = claude.project("billing")
    try:
        proc = subprocess.run(
            [claude_cli(), "-p", "summarise the invoices"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        api.stop()
    assert "limit" in proc.stdout, (proc.returncode, proc.stdout, proc.stderr)  # what the person is told
    (transcript,) = claude.folder(project).glob("*.jsonl")
    return claude, project, transcript.stem, reset, transcript


def test_claude_code_writes_the_refusal_line(refused):
    _, _, sid, reset, transcript = refused
    lines = [json.loads(x) for x in transcript.read_text().splitlines()]
    (line,) = [x for x in lines if x.get("apiError") == "usage_limit_reached"]
    assert line["message"]["model"] == "<synthetic>"
    assert line["apiErrorStatus"] == 429 and line["isApiErrorMessage"] is True
    info = line["apiErrorParams"]["rate_limit_info"]
    assert (info["status"], info["rateLimitType"], info["resetsAt"]) == ("rejected", "five_hour", reset)
    assert line["sessionId"] == sid
    assert all(v == 0 for k, v in line["message"]["usage"].items() if k.endswith("_tokens"))


def test_usage_burn_lists_it_and_knows_the_window_from_it(refused):
    claude, project, sid, reset, _ = refused
    proc = subprocess.run(
        [sys.executable, "-m", "c3async", "usage", "--burn", "--json"],
        cwd=project,
        env=claude.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    (refusal,) = report["refusals"]
    assert refusal == {
        "project": project,
        "session": sid,
        "t": pytest.approx(time.time(), abs=600),
        "window": "five_hour",
        "resets_at": reset,
    }
    five, week = report["windows"]
    # no status line ran: the 5-hour window is the refusal's, full; the weekly is not known
    assert (five["name"], five["rule"], five["end"], five["used"]) == ("five_hour", "reported", reset, 100.0)
    assert (week["name"], week["used"]) == ("seven_day", None)


def test_c3_status_usage_over_stdio_lists_it(refused):
    claude, project, sid, reset, transcript = refused
    env = claude.env(CLAUDE_PROJECT_DIR=project, CLAUDE_CODE_SESSION_ID=sid)
    params = StdioServerParameters(command=sys.executable, args=["-m", "c3async", "serve"], env=env, cwd=project)

    async def call() -> str:
        async with Client(params, mode="legacy") as c:
            result = await c.call_tool("c3_status", {"view": "usage"})
            assert not result.is_error
            return "\n".join(block.text for block in result.content)

    text = anyio.run(call)
    line = next(x for x in map(json.loads, transcript.read_text().splitlines()) if x.get("apiError"))
    said = refusal_lines([(project, Refusal(sid, parse_iso(line["timestamp"]), "five_hour", reset))])
    assert said[1] in text.splitlines(), text
    assert "reported 100% used" in text, text


def test_the_hub_lists_it(refused):
    claude, project, sid, reset, _ = refused
    with Hub(claude) as hub, hub.client() as c:
        r = c.get("/api/usage", params={"by": "window"})
    assert r.status_code == 200, r.text
    page = r.json()
    got = [(x["project"], x["session"], x["window"], x["resets_at"]) for x in page["refusals"]]
    assert got == [(project, sid, "five_hour", reset)]
    five = next(w for w in page["windows"] if w["window"] == "five_hour")
    assert (five["rule"], five["used"]) == ("reported", 100.0)
