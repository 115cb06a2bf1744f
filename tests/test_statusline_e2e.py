"""End to end with the real Claude Code CLI in a pseudo-terminal, signed in with an OAuth token
against the stand-in API, which sends the unified rate-limit headers and changes them between
prompts: `install-statusline` over a status line of the person's shows both lines, the samples
recorded follow the headers, and `install-statusline --remove` leaves the settings byte for byte
as they were. Each claude found is run: C3_CLAUDE (else `claude`), and the one bundled with
claude-agent-sdk where it is installed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from claude_pty import Terminal, trust
from fake_api import FakeAPI, claude_cli, skip_reason, unified_headers

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")]


def _clis() -> list[str]:
    found = [c for c in [claude_cli()] if c]
    try:
        import claude_agent_sdk

        bundled = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
        if bundled.exists():
            found.append(str(bundled))
    except ImportError:
        pass
    return found


def _headers(five: float, week: float) -> dict[str, str]:
    now = int(time.time())
    return unified_headers(five, week, now + 3 * 3600, now + 4 * 86_400)


def _samples(claude) -> list[tuple[str, float]]:
    path = claude.c3home / "usage" / "rate_limits.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    return [(r["window"], r["used"]) for r in rows]


def _until(check, what: str, term: Terminal, timeout: float = 60.0):
    end = time.monotonic() + timeout
    while not (got := check()):
        assert time.monotonic() < end, f"{what} never came; the screen: {term.text()[-1500:]!r}"
        term.pump(0.2)
    return got


def _prompt(term: Terminal, text: str, answer: str) -> None:
    for keys in (text, "\r"):
        term.type(keys)
        term.pump(0.3)
    term.wait_for(answer, timeout=60)


@pytest.mark.parametrize("cli", _clis())
def test_the_status_line_over_yours_records_the_windows_as_the_headers_change(claude, tmp_path, cli):
    script, log = tmp_path / "script.json", tmp_path / "api.jsonl"
    script.write_text(json.dumps([{"text": "first answer"}, {"text": "second answer"}]))
    headers = Path(str(script) + ".headers")
    headers.write_text(json.dumps(_headers(0.42, 0.12)))
    api = FakeAPI(script, log).wait_ready()
    env = api.env(claude, CLAUDE_CODE_OAUTH_TOKEN="fake-oauth-token")
    del env["ANTHROPIC_API_KEY"]  # a subscriber's login: Claude Code applies the headers
    project = claude.project("app")
    trust(claude.config, project, "none")
    settings = claude.config / "settings.json"
    before = (
        b'{\n  "theme": "dark",\n  "statusLine": {\n    "type": "command",\n    "command": "echo my-own-line"\n  }\n}\n'
    )
    settings.write_bytes(before)
    installed = subprocess.run(
        [sys.executable, "-m", "c3async", "install-statusline", "--user"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert installed.returncode == 0, installed.stderr
    term = Terminal([cli], project, env)
    try:
        term.wait_for("my-own-line", timeout=60)
        _prompt(term, "say hello", "first answer")
        term.wait_for("5h 42%", timeout=30)
        _until(lambda: ("five_hour", 42.0) in _samples(claude), "the 42% sample", term)
        headers.write_text(json.dumps(_headers(0.55, 0.13)))
        _prompt(term, "and again", "second answer")
        # the CLI redraws only the cells that changed on the bar: "5h 42%" becomes "55" (and the
        # "%" too when its column moved) drawn over it
        _until(lambda: "55" in term.text().rpartition("second answer")[2], "55% on the bar", term)
        _until(lambda: ("five_hour", 55.0) in _samples(claude), "the 55% sample", term)
    finally:
        term.close()
        api.stop()
    samples = _samples(claude)
    fives = [u for w, u in samples if w == "five_hour"]
    assert fives == [42.0, 55.0], samples  # one line per change, however often the line ran
    assert [u for w, u in samples if w == "seven_day"] == [12.0, 13.0]
    removed = subprocess.run(
        [sys.executable, "-m", "c3async", "install-statusline", "--user", "--remove"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert removed.returncode == 0, removed.stderr
    assert settings.read_bytes() == before
