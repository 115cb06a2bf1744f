"""Several windows of the real Claude Code CLI at once, in two projects, each in a pseudo-terminal,
signed in with an OAuth token against the stand-in API (which changes the unified rate-limit
headers between prompts), with c3async's status line installed over one of the person's: each
window shows the person's line first and then ours, with the binding window's percent as the
last response carried it, and how many wait in another window once one of them waits for a
permission; the samples recorded follow the headers (one line per change, however many windows
draw); `install-statusline --remove` leaves the settings byte for byte as they were."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from claude_pty import Terminal, trust
from fake_api import FakeAPI, claude_cli, needs_claude, unified_headers, write_script

pytestmark = needs_claude

BEFORE = (
    b'{\n  "theme": "dark",\n  "statusLine": {\n    "type": "command",\n    "command": "echo my-own-line"\n  }\n}\n'
)


START = int(time.time())


def _headers(five: float, week: float) -> dict[str, str]:
    """A subscriber's headers: the windows' resets stay put as their percentages move."""
    return unified_headers(five, week, START + 3 * 3600, START + 4 * 86_400)


def _squeezed(text: str) -> str:
    return "".join(text.split())


class Windows:
    """The terminals, all read while any is waited on (a CLI whose terminal is not read stops
    writing, and so stops)."""

    def __init__(self) -> None:
        self.terms: dict[str, Terminal] = {}

    def open(self, name: str, project: str, env: dict[str, str]) -> Terminal:
        self.terms[name] = Terminal([claude_cli() or "claude", "--permission-mode", "default"], project, env)
        return self.terms[name]

    def until(self, check, what: str, timeout: float = 60.0):
        end = time.monotonic() + timeout
        while not (got := check()):
            if time.monotonic() > end:
                screens = {n: t.text()[-600:] for n, t in self.terms.items()}
                raise AssertionError(f"{what} never came; the screens' ends: {screens!r}")
            for term in self.terms.values():
                term.pump(0.03)
        return got

    def drawn(self, name: str, needle: str, after: str = "", timeout: float = 60.0) -> str:
        """Wait until ``needle`` is drawn in window ``name`` after the last ``after``, spaces
        ignored (the CLI may draw a gap as a cursor move); returns what follows ``after``, its
        spaces taken out."""
        term = self.terms[name]

        def tail() -> str | None:
            text, mark = _squeezed(term.text()), _squeezed(after)
            if mark not in text:
                return None
            rest = text.rpartition(mark)[2] if mark else text
            return rest if _squeezed(needle) in rest else None

        return self.until(tail, f"{needle!r} in window {name}", timeout)

    def prompt(self, name: str, text: str, answer: str) -> str:
        term = self.terms[name]
        term.type(text)
        self.until(lambda: True, "", 0)
        term.type("\r")
        return self.drawn(name, answer)

    def close(self) -> None:
        for term in self.terms.values():
            try:
                term.close()
            except (OSError, ChildProcessError):
                pass


def _samples(claude) -> list[tuple[str, float]]:
    path = claude.c3home / "usage" / "rate_limits.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    return [(r["window"], r["used"]) for r in rows]


def _waiting(claude, pid: int) -> bool:
    try:
        return json.loads((claude.config / "sessions" / f"{pid}.json").read_text()).get("status") == "waiting"
    except (OSError, ValueError):
        return False


def test_three_windows_in_two_projects_show_theirs_then_ours_and_who_waits(claude, tmp_path):
    script, log = tmp_path / "script.json", tmp_path / "api.jsonl"
    clean = {"tool_use": {"name": "Bash", "input": {"command": "rm -rf ./build-output", "description": "clean"}}}
    script.write_text(
        json.dumps(
            {
                "conversations": {
                    "alpha-one": [{"text": "one first answer"}, {"text": "one second answer"}],
                    "alpha-two": [{"text": "two first answer"}],
                    "beta-three": [clean],
                }
            }
        )
    )
    headers = Path(f"{script}.headers")
    write_script(headers, json.dumps(_headers(0.42, 0.12)))
    api = FakeAPI(script, log).wait_ready()
    env = api.env(claude, CLAUDE_CODE_OAUTH_TOKEN="fake-oauth-token")
    del env["ANTHROPIC_API_KEY"]  # a subscriber's login: Claude Code applies the headers
    alpha, beta = claude.project("alpha"), claude.project("beta")
    for project in (alpha, beta):
        trust(claude.config, project, "none")
    settings = claude.config / "settings.json"
    settings.write_bytes(BEFORE)
    install = [sys.executable, "-m", "c3async", "install-statusline", "--user"]
    installed = subprocess.run(install, env=env, capture_output=True, text=True, timeout=60)
    assert installed.returncode == 0, installed.stderr
    assert json.loads(settings.read_text())["statusLine"]["refreshInterval"] > 0  # an idle window redraws
    w = Windows()
    try:
        w.open("one", alpha, env), w.open("two", alpha, env)
        three = w.open("three", beta, env)
        for name in w.terms:
            # at start, before any response: the person's line, then ours (no rate limit yet)
            w.drawn(name, "my-own-line none waiting")  # on two rows: theirs, then ours

        w.prompt("one", "alpha-one: say hello", "one first answer")
        w.drawn("one", "5h 42%", after="one first answer")
        w.until(lambda: ("five_hour", 42.0) in _samples(claude), "the 42% sample")

        write_script(headers, json.dumps(_headers(0.55, 0.12)))
        w.prompt("two", "alpha-two: say hello", "two first answer")
        w.drawn("two", "5h 55%", after="two first answer")
        w.until(lambda: ("five_hour", 55.0) in _samples(claude), "the 55% sample")

        w.prompt("three", "beta-three: clean the build output", "rm -rf ./build-output")
        w.until(lambda: _waiting(claude, three.pid), "window three waiting for its permission")

        # the weekly window is now the binding one; window one's next response redraws its line
        write_script(headers, json.dumps(_headers(0.61, 0.70)))
        w.prompt("one", "and again", "one second answer")
        w.drawn("one", "1 waiting · beta", after="one second answer")
        w.drawn("one", "70", after="one second answer")
        # window two, idle, redraws on its refreshInterval: the waiting window shows there too,
        # and the binding window as window one last saw it (its own Claude Code still holds 55%)
        w.drawn("two", "1 waiting · beta", after="two first answer", timeout=40)
        w.drawn("two", "7d 70%", after="two first answer")
        w.until(lambda: ("seven_day", 70.0) in _samples(claude), "the 70% sample")
        assert _waiting(claude, three.pid)  # still asking: nothing answered it
    finally:
        w.close()
        api.stop()
    samples = _samples(claude)
    assert [u for k, u in samples if k == "five_hour"] == [42.0, 55.0, 61.0], samples  # one line per change
    assert [u for k, u in samples if k == "seven_day"] == [12.0, 70.0], samples
    removed = subprocess.run([*install, "--remove"], env=env, capture_output=True, text=True, timeout=60)
    assert removed.returncode == 0, removed.stderr
    assert settings.read_bytes() == BEFORE
