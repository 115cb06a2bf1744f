"""What the end-to-end tests share: the real Claude Code CLI (``C3_CLAUDE``, else ``claude`` on
PATH; CI runs them once with the npm build and once with the Agent SDK's bundled one), their
marker (``pytestmark = needs_claude``), and the stand-in Messages API (``fake_anthropic.py``)
run as a process of its own."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
NO_CLAUDE = "the Claude Code CLI is not installed (set C3_CLAUDE)"


def claude_cli() -> str | None:
    return os.environ.get("C3_CLAUDE") or shutil.which("claude")


def skip_reason() -> str | None:
    """Why the end-to-end tests cannot run here (None: they can)."""
    claude = claude_cli()
    if claude is None:
        return NO_CLAUDE
    if not os.access(claude, os.X_OK):
        return f"C3_CLAUDE={claude} is not an executable file"
    try:
        with open(claude, "rb") as f:
            head = f.read(128)
    except OSError as exc:
        return f"cannot read {claude}: {exc}"
    # The npm package's launcher is a native binary today; an older one is a node script.
    if head.startswith(b"#!") and b"node" in head.split(b"\n", 1)[0] and shutil.which("node") is None:
        return f"{claude} needs node, which is not installed"
    return None


needs_claude = [pytest.mark.e2e, pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakeAPI:
    """``python fake_anthropic.py PORT SCRIPT LOG`` on a free port; ``env`` points Claude Code at
    it (offline: no telemetry, no updates, no other traffic)."""

    def __init__(self, script: Path, log: Path) -> None:
        self.script, self.log = script, log
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "fake_anthropic.py"), str(self.port), str(script), str(log)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    @classmethod
    def started(cls, folder: Path, script: str = "[]") -> FakeAPI:
        """The stand-in running with ``folder/script.json`` (written from ``script``: what it
        answers, rewritten by a test as it goes) and ``folder/api.jsonl`` (what it was asked)."""
        (folder / "script.json").write_text(script)
        return cls(folder / "script.json", folder / "api.jsonl").wait_ready()

    def wait_ready(self, timeout: float = 20.0) -> FakeAPI:
        deadline = time.time() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                assert time.time() < deadline, "the stand-in API did not start"
                time.sleep(0.1)

    def env(self, sandbox, **more: str) -> dict[str, str]:
        return sandbox.env(
            ANTHROPIC_BASE_URL=f"http://127.0.0.1:{self.port}",
            ANTHROPIC_API_KEY="sk-test-fake",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_TELEMETRY="1",
            DISABLE_AUTOUPDATER="1",
            # `claude -p` connects MCP servers in the background by default: on a loaded machine its
            # first turn can come before `c3async serve` answers ("No such tool available"). Off,
            # the first turn waits for the servers: a ready handshake rather than a race.
            MCP_CONNECTION_NONBLOCKING="false",
            **more,
        )

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def unified_headers(five: float, week: float, five_reset: int, week_reset: int, five_status: str = "allowed"):
    """The unified rate-limit headers of a subscriber's response (``claude-code-usage-facts.md``):
    the 5-hour and weekly windows' use (a fraction) and resets; ``five_status`` ``rejected``:
    the 5-hour window refuses."""
    return {
        "anthropic-ratelimit-unified-status": five_status,
        "anthropic-ratelimit-unified-reset": str(five_reset),
        "anthropic-ratelimit-unified-representative-claim": "five_hour",
        "anthropic-ratelimit-unified-5h-utilization": str(five),
        "anthropic-ratelimit-unified-5h-reset": str(five_reset),
        "anthropic-ratelimit-unified-5h-status": five_status,
        "anthropic-ratelimit-unified-7d-utilization": str(week),
        "anthropic-ratelimit-unified-7d-reset": str(week_reset),
        "anthropic-ratelimit-unified-7d-status": "allowed",
    }


def write_script(path: Path, text: str) -> None:
    """Replace the stand-in API's script whole (it re-reads the script on every request)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def held_run(
    cmd: list[str], cwd: str, env: dict[str, str], *, until, release: Path, wait: float
) -> tuple[int, str, str, float | None]:
    """Run ``cmd`` (a claude whose reply the stand-in API holds: ``{"hold": release}``) until
    ``until()`` or it exits or ``wait`` seconds pass, then release the reply: (exit status,
    stdout, stderr, seconds until ``until()`` held, or None). Claude Code's start-up cleanup
    runs ~5 s after it starts, in the background: a claude held mid-turn lives to run it."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    waited = None
    try:
        start = time.monotonic()
        while time.monotonic() - start < wait and proc.poll() is None:
            if until():
                waited = time.monotonic() - start
                break
            time.sleep(0.2)
        release.write_text("go")
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, err, waited


class KeptWorld:
    """For an end-to-end world of kept sessions: ``sandbox``, ``folder`` (Claude Code's folder
    of the project) and ``ids`` (key -> session id) say where each transcript is."""

    sandbox: Any
    folder: Path
    ids: dict[str, str]

    def transcript(self, key: str) -> Path:
        return self.folder / f"{self.ids[key]}.jsonl"

    def archived(self, key: str) -> Path:
        return self.sandbox.c3home / "archive" / self.folder.name / f"{self.ids[key]}.jsonl"
