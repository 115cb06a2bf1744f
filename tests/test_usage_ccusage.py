"""Our per-session token totals against ccusage's on the same transcripts: they must match
exactly, and costs within a cent. Skipped where no ccusage binary is installed (CI installs
it from npm; set C3_CCUSAGE to point at one)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from test_usage import OTHER, SID, usage_line, write

from c3async.ground.project import resolve
from c3async.usage import account as acc
from c3async.usage import reader

CCUSAGE = os.environ.get("C3_CCUSAGE") or shutil.which("ccusage")
pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(CCUSAGE is None, reason="ccusage is not installed (set C3_CCUSAGE)"),
]

THIRD = "cccccccc-0000-4000-8000-000000000003"


@pytest.mark.parametrize("mode", ["this process", "worker processes, small pieces"])
def test_totals_match_ccusage(claude, monkeypatch, tmp_path, mode):
    if mode != "this process":
        if acc.can_fork_workers() < 2:
            pytest.skip("worker processes need two cores and a process with no other thread")
        monkeypatch.setattr(acc, "PROCESS_MIN_BYTES", 0)
        monkeypatch.setattr(acc, "HANDOFF_FILES", 1)
        monkeypatch.setattr(reader, "CHUNK", 4096)  # pieces end mid-line everywhere
    for k, v in claude.env().items():
        monkeypatch.setenv(k, v)
    proj = claude.project("app")
    folder = claude.folder(proj)
    lines = []
    for i in range(30):  # one response a turn, written as three block lines with one usage
        lines += [
            usage_line(
                f"msg_{i}",
                f"req_{i}",
                inp=3 + i,
                out=40 + i,
                w5=1000 * i,
                read=5000 * i,
                ts=f"2026-11-01T10:{i:02d}:00.000Z",
            )
        ] * 3
    lines.append(usage_line("msg_p", "req_p", out=2))  # a streaming partial ...
    lines.append(usage_line("msg_p", "req_p", out=90))  # ... and its final copy
    lines.append(usage_line("msg_s", "req_s", model="<synthetic>", inp=0, out=0, w5=0, read=0))
    lines.append(usage_line("msg_h", "req_h", model="claude-opus-4-5-20251101", w5=0, w1h=7000))
    write(folder / f"{SID}.jsonl", lines)
    write(
        folder / SID / "subagents" / "agent-a1b2c3d4e5f6a7b8c.jsonl",
        [usage_line(f"msg_a{i}", f"req_a{i}", sidechain=True, model="claude-haiku-4-5-20251001") for i in range(5)],
    )
    write(folder / f"{OTHER}.jsonl", [usage_line(f"m{i}", f"r{i}", session=OTHER, inp=300_000) for i in range(3)])
    write(folder / f"{THIRD}.jsonl", [usage_line(None, "r", session=THIRD)] * 2)  # no message.id
    result = acc.account(resolve(proj))
    assert result.workers == 0 if mode == "this process" else result.workers >= 2
    ours = result.priced()
    out = subprocess.run(
        [CCUSAGE, "claude", "session", "--json", "--offline"],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(tmp_path)},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    theirs = {s["sessionId"]: s for s in json.loads(out.stdout)["sessions"]}
    assert set(theirs) == set(ours)
    for sid, c in theirs.items():
        o = ours[sid]
        assert (o.input, o.output, o.cache_write_5m + o.cache_write_1h, o.cache_read) == (
            c["inputTokens"],
            c["outputTokens"],
            c["cacheCreationTokens"],
            c["cacheReadTokens"],
        ), sid
        assert o.cost_usd == pytest.approx(c["totalCost"], abs=0.01), sid
