"""The keep policy against the real Claude Code CLI's cleanup, with nothing but our hooks running
before it.

Claude Code deletes every transcript older than ``cleanupPeriodDays`` a few seconds after it
starts, in the background (claude-code-facts.md §5, and tests/test_retention_e2e.py for how the
sweep is made to run in ``-p`` mode). The SessionStart hook c3async installs runs as it starts:
its last-chance pass preserves the sessions the keep policy covers before the sweep deletes them.

One module-scoped world, the real ``claude -p`` offline against tests/fake_anthropic.py:

- the hooks installed in a sandbox project (``c3async install-hooks``), the policy ``marked``
  written in ``$C3_HOME/config.json``;
- three real sessions: ``noted`` and ``plain`` (their mtimes then set 3 days back, past a 1-day
  ``cleanupPeriodDays``) and ``fresh``; ``c3async mark note`` on the noted one, and no listing,
  no MCP server: nothing has preserved it when the next claude starts;
- one more real ``claude -p``, held mid-turn until its sweep has deleted the old transcripts.

Then the noted session is listed from the archive and resumed by the real CLI; the plain one
is gone, and ``stats`` still counts what it spent, marked deleted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fake_api import FakeAPI, KeptWorld, claude_cli, held_run, needs_claude, write_script

DAY = 86_400
SWEEP_WAIT = 25  # s: the sweep starts 5 s after start-up; generous for a loaded 2-core machine
OLD = ("noted", "plain")
NOTE = "keep e2e: the marked policy keeps a noted session"
RESUMED_REPLY = "Resumed reply from the stand-in API [c3keep-resumed]"

pytestmark = needs_claude


def _marker(key: str) -> str:
    return f"[c3keep:{key}]"


@dataclass
class World(KeptWorld):
    sandbox: object
    proj: str
    folder: Path
    env: dict[str, str]  # for claude and c3async alike (claude on PATH)
    script: Path
    tmp: Path
    ids: dict[str, str] = field(default_factory=dict)
    held_before: dict[str, bool] = field(default_factory=dict)  # archived before the sweep?
    stats_before: dict[str, dict] = field(default_factory=dict)
    trigger: tuple[int, str, str] = (0, "", "")
    still_there: list[str] = field(default_factory=list)

    def c3(self, *args: str) -> subprocess.CompletedProcess:
        return self.sandbox.run(*args, env=self.env, cwd=self.proj)

    def rows(self) -> dict[str, dict]:
        proc = self.c3("sessions", "--project", self.proj, "--json")
        assert proc.returncode == 0, proc.stderr
        return {row["id"]: row for row in json.loads(proc.stdout)}

    def stats(self) -> dict[str, dict]:
        proc = self.c3("stats", "--project", self.proj, "--json")
        assert proc.returncode == 0, proc.stderr
        return {row["id"]: row for row in json.loads(proc.stdout)}

    def converse(self, replies: dict) -> None:
        convs = {_marker(k): [{"text": f"Answer of {k}."}] for k in (*OLD, "fresh")}
        write_script(self.script, json.dumps({"conversations": {**convs, **replies}}))


@pytest.fixture(scope="module")
def world(module_claude, tmp_path_factory):
    sandbox = module_claude
    tmp = tmp_path_factory.mktemp("keep")
    proj = sandbox.project("keep")
    script = tmp / "script.json"
    script.write_text("[]")
    api = FakeAPI(script, tmp / "api.jsonl").wait_ready()
    bindir = tmp / "bin"  # `c3async resume` runs the `claude` on PATH: the binary under test
    bindir.mkdir()
    (bindir / "claude").symlink_to(os.path.realpath(claude_cli()))
    env = api.env(sandbox)
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    w = World(sandbox, proj, sandbox.folder(proj), env, script, tmp)
    try:
        hooks = w.c3("install-hooks", "--project", proj)
        assert hooks.returncode == 0, hooks.stderr
        sandbox.c3home.mkdir(parents=True, exist_ok=True)
        (sandbox.c3home / "config.json").write_text(json.dumps({"keep": "marked"}))
        w.converse({})
        for key in (*OLD, "fresh"):
            proc = subprocess.run(
                ["claude", "-p", f"{_marker(key)} the {key} session", "--output-format", "json"],
                cwd=proj,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert proc.returncode == 0, proc.stderr[-1500:]
            w.ids[key] = json.loads(proc.stdout)["session_id"]
        w.stats_before = w.stats()
        (sandbox.config / "settings.json").write_text(json.dumps({"cleanupPeriodDays": 1}))
        old = time.time() - 3 * DAY
        for key in OLD:
            os.utime(w.transcript(key), (old, old))
        noted = w.c3("mark", "note", w.ids["noted"], "--summary", NOTE)
        assert noted.returncode == 0, noted.stderr
        w.held_before = {key: w.archived(key).exists() for key in w.ids}

        release = tmp / "release-trigger"
        w.converse({_marker("trigger"): [{"hold": str(release), "hold_s": SWEEP_WAIT + 30, "then": {"text": "ok"}}]})
        sentinel = sandbox.config / ".last-cleanup"
        if sentinel.exists():  # a sweep of one of the runs above: this start sweeps as a day later
            past = time.time() - 2 * DAY
            os.utime(sentinel, (past, past))
        code, out, err, _ = held_run(
            ["claude", "-p", f"{_marker('trigger')} hi", "--output-format", "json"],
            proj,
            env,
            until=lambda: not any(w.transcript(k).exists() for k in OLD),
            release=release,
            wait=SWEEP_WAIT,
        )
        w.trigger = (code, out, err)
        w.still_there = [k for k in OLD if w.transcript(k).exists()]
        yield w
    finally:
        api.stop()


def test_nothing_preserved_the_noted_session_before_claude_started(world):
    assert world.held_before == {"noted": False, "plain": False, "fresh": False}, world.held_before
    assert {world.ids["noted"], world.ids["plain"]} <= set(world.stats_before), world.stats_before


def test_the_sweep_deleted_both_old_transcripts(world):
    code, out, err = world.trigger
    assert code == 0, f"claude exited {code}: {err[-1500:]} {out[-500:]}"
    assert world.still_there == [], f"Claude Code's sweep left {world.still_there} within {SWEEP_WAIT} s"
    assert world.transcript("fresh").is_file()


def test_the_hook_preserved_the_noted_session_and_nothing_else(world):
    assert world.still_there == [], "no sweep (see above)"
    kept = world.archived("noted")
    assert kept.is_file(), "the SessionStart hook did not preserve the noted session before the sweep"
    assert os.stat(kept).st_nlink == 1, "Claude Code's name is gone: the archive's link holds the transcript"
    assert _marker("noted") in kept.read_text()
    assert not world.archived("plain").exists()
    errors = world.sandbox.c3home / "hook-errors.log"
    assert not errors.exists(), errors.read_text()


def test_the_noted_session_is_listed_from_the_archive_and_the_plain_one_is_gone(world):
    rows = world.rows()
    assert world.ids["plain"] not in rows
    row = rows.get(world.ids["noted"])
    assert row is not None, sorted(rows)
    assert (row["archived"], row["kept"], row["kept_by"]) == (True, True, "policy: noted"), row
    assert row["note"]["summary"] == NOTE
    assert row["resume"] == f"cd {world.proj} && c3async resume {world.ids['noted']}"
    assert rows[world.ids["fresh"]]["archived"] is False


def test_stats_keep_what_the_deleted_session_spent(world):
    stats = world.stats()
    plain, noted = stats.get(world.ids["plain"]), stats.get(world.ids["noted"])
    assert plain is not None and plain["deleted"] is True, plain
    assert noted is not None and noted["deleted"] is False, noted  # the archive holds it
    before = world.stats_before[world.ids["plain"]]
    assert (plain["input"], plain["output"]) == (before["input"], before["output"]) and plain["input"] > 0
    table = world.c3("stats", "--project", world.proj)
    assert table.returncode == 0 and "[deleted]" in table.stdout, table.stdout


def test_the_noted_session_resumes_with_the_real_cli(world):
    sid = world.ids["noted"]
    world.converse({_marker("noted"): [{"text": "Answer of noted."}, {"text": RESUMED_REPLY}]})
    proc = subprocess.run(
        [sys.executable, "-m", "c3async", "resume", sid, "--", "-p", "continue", "--output-format", "json"],
        cwd=world.proj,
        env=world.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "put back" in proc.stderr, proc.stderr
    out = json.loads(proc.stdout)
    assert out["session_id"] == sid and RESUMED_REPLY in out["result"], out
    live = world.transcript("noted")
    assert live.is_file() and os.path.samefile(live, world.archived("noted"))
    assert RESUMED_REPLY in live.read_text()
