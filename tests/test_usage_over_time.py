"""Usage over time, door by door: `c3async usage --by ...` from the accountant's timeline (daily
and monthly totals against the real ccusage's, in a zone half an hour off UTC and one with
daylight saving), windows and weeks as Claude Code reported them or by the rules, sessions whose
transcripts are gone still counted, `stats` as `usage --by session`, a pass over an unchanged
project reading nothing, and `c3_status(view='usage')`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest
from test_usage import OTHER, SID, usage_line, write

from c3async.ground.project import resolve
from c3async.sessions.reports import run as status_run
from c3async.usage import account as acc
from c3async.usage import timeline

CCUSAGE = os.environ.get("C3_CCUSAGE") or shutil.which("ccusage")
MODELS = ("claude-sonnet-4-5-20250929", "claude-opus-4-5-20251101", "claude-haiku-4-5-20251001")
FUTURE = "claude-future-9-20270101"  # no shipped family prices it
HOUR = 3600


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(seconds))


def _spread(n: int = 240) -> list[str]:
    """Responses over two months and every hour of the day, each written as two lines."""
    lines = []
    for i in range(n):
        hour, day = (i * 37) % 24, 1 + (i * 13) % 58
        month, day = (10, day) if day <= 31 else (11, day - 31)
        ts = f"2026-{month:02d}-{day:02d}T{hour:02d}:{(i * 7) % 60:02d}:00.000Z"
        line = usage_line(f"m{i}", f"r{i}", inp=3 + i, out=40 + i, w5=100 * i, read=5000 * i, ts=ts,
                          model=MODELS[i % 3])  # fmt: skip
        lines += [line, line]
    return lines


def _usage(claude, *args: str, env: dict[str, str] | None = None) -> list[dict]:
    proc = claude.run("usage", *args, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.process  # ccusage
@pytest.mark.skipif(CCUSAGE is None, reason="ccusage is not installed (set C3_CCUSAGE)")
@pytest.mark.parametrize("zone", ["Asia/Kolkata", "America/New_York"])
def test_daily_and_monthly_totals_are_ccusages(claude, zone, tmp_path):
    proj = claude.project("app")
    write(claude.folder(proj) / f"{SID}.jsonl", _spread())
    env = claude.env(TZ=zone)
    for by, report, field in (("day", "daily", "date"), ("month", "monthly", "month")):
        ours = {r["bucket"]: r for r in _usage(claude, "--by", by, "--project", proj, env=env)}
        out = subprocess.run([CCUSAGE, "claude", report, "--json", "--offline"], capture_output=True, text=True,
                             env={**env, "HOME": str(tmp_path)}, timeout=120)  # fmt: skip
        assert out.returncode == 0, out.stderr
        theirs = {d[field]: d for d in json.loads(out.stdout)[report]}
        assert set(ours) == set(theirs) and len(ours) > (50 if by == "day" else 1)
        for key, c in theirs.items():
            o = ours[key]
            assert (o["input"], o["output"], o["cache_write_5m"] + o["cache_write_1h"], o["cache_read"]) == (
                c["inputTokens"],
                c["outputTokens"],
                c["cacheCreationTokens"],
                c["cacheReadTokens"],
            ), key
            assert o["cost_usd"] == pytest.approx(c["totalCost"], abs=0.01), key


@pytest.mark.process  # ccusage
@pytest.mark.skipif(CCUSAGE is None, reason="ccusage is not installed (set C3_CCUSAGE)")
def test_windows_without_a_recorded_reset_are_ccusages_blocks(claude, tmp_path):
    proj = claude.project("app")
    base = 1_793_520_000  # 2026-11-02T06:40:00Z
    # responses 40 minutes apart, a gap of 6 hours, then more: blocks start at the hour
    times = [base + k * 2400 for k in range(12)] + [base + 12 * 2400 + 6 * HOUR + k * 600 for k in range(5)]
    write(claude.folder(proj) / f"{SID}.jsonl",
          [usage_line(f"m{k}", f"r{k}", out=10 + k, ts=_iso(t)) for k, t in enumerate(times)])  # fmt: skip
    ours = _usage(claude, "--by", "window", "--project", proj, env=claude.env(TZ="UTC"))
    out = subprocess.run([CCUSAGE, "claude", "blocks", "--json", "--offline"], capture_output=True, text=True,
                         env={**claude.env(TZ="UTC"), "HOME": str(tmp_path)}, timeout=120)  # fmt: skip
    theirs = [b for b in json.loads(out.stdout)["blocks"] if not b["isGap"]]
    assert [r["rule"] for r in ours] == ["ccusage"] * len(theirs)
    assert [r["start"][:16] for r in ours] == [b["startTime"][:16] for b in theirs]
    assert [r["output"] for r in ours] == [b["tokenCounts"]["outputTokens"] for b in theirs]


def test_windows_and_weeks_as_claude_code_reported_them(claude, monkeypatch):
    claude.activate(monkeypatch)
    proj = claude.project("app")
    now = time.time()
    reset = now + 2 * HOUR  # the 5-hour window began 3 hours ago
    before = now - 10 * HOUR  # earlier usage, in no reported window: ccusage's rule
    lines = [usage_line("a1", "r", out=1, ts=_iso(before)), usage_line("a2", "r", out=2, ts=_iso(now - 1 * HOUR)),
             usage_line("a3", "r", out=4, ts=_iso(now - 2 * HOUR))]  # fmt: skip
    write(claude.folder(proj) / f"{SID}.jsonl", lines)
    limits = claude.c3home / "usage" / "rate_limits.jsonl"
    limits.parent.mkdir(parents=True)
    samples = [
        {"t": now - 3000, "window": "five_hour", "used": 10, "resets_at": reset},
        {"t": now - 60, "window": "five_hour", "used": 42.5, "resets_at": reset + 2},  # the same window
        {"t": now - 60, "window": "seven_day", "used": 17, "resets_at": now + 3 * 86400},
        {"t": now, "window": "five_hour", "used": 400, "resets_at": reset},  # no percent
        {"t": now, "window": "five_hour", "used": 5, "resets_at": now + 50 * HOUR},
    ]  # no 5-hour reset
    limits.write_text("".join(json.dumps(s) + "\n" for s in samples) + "not json\n")
    rows = _usage(claude, "--by", "window", "--project", proj)
    assert [(r["rule"], r["output"]) for r in rows] == [("ccusage", 1), ("reported", 6)]
    assert _epoch(rows[1]["end"]) == pytest.approx(reset + 2, abs=1)
    assert _epoch(rows[1]["start"]) == pytest.approx(reset + 2 - 5 * HOUR, abs=1)
    weeks = _usage(claude, "--by", "week", "--project", proj)
    assert [(r["rule"], r["output"]) for r in weeks] == [("reported", 7)]
    assert _epoch(weeks[0]["end"]) == pytest.approx(now + 3 * 86400, abs=1)
    table = claude.run("usage", "--by", "window", "--project", proj)
    assert table.returncode == 0 and "rate_limits.jsonl: 3 line(s) are not rate-limit samples" in table.stderr
    head = table.stdout.splitlines()[0].split()
    assert head == ["WINDOW", "RULE", "INPUT", "OUTPUT", "CACHE-W", "CACHE-R", "COST", "RESPONSES", "SESSIONS"]
    assert any(line.startswith("reported: as Claude Code reported") for line in table.stdout.splitlines())
    # The agent's view: the current windows, their totals and shares, Claude Code's percent
    view = status_run(resolve(proj), "usage")
    assert "5-hour window" in view and "(reported); Claude Code reported 42.5% used" in view
    assert "weekly window" in view and "17% used" in view
    assert "100%  $" in view and "app (this project)" in view and SID[:8] in view
    # Without samples: calendar weeks, from Monday
    limits.unlink()
    weeks = _usage(claude, "--by", "week", "--project", proj)
    assert {r["rule"] for r in weeks} == {"calendar"}
    assert all(time.localtime(_epoch(r["start"])).tm_wday == 0 for r in weeks)


def _epoch(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp()


def test_stats_is_usage_by_session_and_a_period_is_its_part(claude, monkeypatch):
    claude.activate(monkeypatch)
    proj = claude.project("app")
    write(claude.folder(proj) / f"{SID}.jsonl", _spread(60))
    write(claude.folder(proj) / f"{OTHER}.jsonl",
          [usage_line("o1", "r", session=OTHER, model=FUTURE, inp=1000, ts=_iso(time.time() - 600))])  # fmt: skip
    stats, usage = claude.run("stats", "--project", proj), claude.run("usage", "--by", "session", "--project", proj)
    assert stats.returncode == usage.returncode == 0 and stats.stdout == usage.stdout
    assert claude.run("stats", "--json", "--project", proj).stdout == usage_json(claude, proj)
    by_day = _usage(claude, "--project", proj)
    by_session = json.loads(usage_json(claude, proj))
    for k in ("input", "output", "cache_read", "responses"):
        assert sum(r[k] for r in by_day) == sum(r[k] for r in by_session)
    assert sum(r["cost_usd"] for r in by_day) == pytest.approx(sum(r["cost_usd"] for r in by_session))
    # --since: only the period's part; a model with no price named in every rendering
    (recent,) = _usage(claude, "--by", "session", "--since", "today", "--project", proj)
    assert (recent["id"], recent["input"], recent["unpriced_models"]) == (OTHER, 1000, [FUTURE])
    assert [r["bucket"] for r in _usage(claude, "--by", "model", "--since", "5h", "--project", proj)] == [FUTURE]
    table = claude.run("usage", "--by", "model", "--project", proj).stdout
    assert f"+ not in the cost: the usage of models with no price: {FUTURE} (2,120 tokens)" in table
    assert _usage(claude, "--since", "2030-01-01", "--project", proj) == []
    bad = claude.run("usage", "--since", "yesterday-ish", "--project", proj)
    assert bad.returncode == 1 and "--since: give a time ago" in bad.stderr and "Traceback" not in bad.stderr


def usage_json(claude, proj: str) -> str:
    proc = claude.run("usage", "--by", "session", "--json", "--project", proj)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_an_unchanged_project_is_not_read_and_a_deleted_transcript_stays_counted(claude, monkeypatch):
    claude.activate(monkeypatch)
    proj = claude.project("app")
    folder = claude.folder(proj)
    write(folder / f"{SID}.jsonl", _spread(30))
    write(folder / f"{OTHER}.jsonl", [usage_line("o1", "r", session=OTHER, inp=7, ts="2026-10-03T10:00:00.000Z")])
    first = _usage(claude, "--by", "month", "--project", proj)
    (settled,) = acc.account_projects([resolve(proj)], only_changed=True)
    assert settled.settled and settled.bytes_read == 0 and settled.timeline is not None
    with open(folder / f"{OTHER}.jsonl", "a") as f:
        f.write(usage_line("o2", "r", session=OTHER, inp=5, ts="2026-10-03T11:00:00.000Z") + "\n")
    (grown,) = acc.account_projects([resolve(proj)], only_changed=True)
    assert not grown.settled and grown.bytes_read > 0
    months = _usage(claude, "--by", "month", "--project", proj)
    assert sum(r["input"] for r in months) == sum(r["input"] for r in first) + 5
    # Claude Code deletes the transcript, and the accountant's state is rebuilt: what it spent stays
    os.unlink(folder / f"{OTHER}.jsonl")
    os.unlink(acc._state_path(resolve(proj)))
    again = _usage(claude, "--by", "month", "--project", proj)
    assert [(r["bucket"], r["input"], r["responses"]) for r in again] == [
        (r["bucket"], r["input"], r["responses"]) for r in months]  # fmt: skip
    line = timeline.load(resolve(proj))
    assert line is not None and {s.session for s in line.slots if s.whole} == {OTHER}
    table = claude.run("usage", "--by", "month", "--project", proj).stdout
    assert "1 session(s) whose responses are no longer held" in table


def test_a_damaged_timeline_is_rebuilt_and_prices_keys_are_checked(claude, monkeypatch):
    claude.activate(monkeypatch)
    proj = claude.project("app")
    write(claude.folder(proj) / f"{SID}.jsonl", _spread(20))
    good = _usage(claude, "--project", proj)
    timeline.path(resolve(proj)).write_bytes(b"\x93\xff garbage")
    assert _usage(claude, "--project", proj) == good
    claude.c3home.mkdir(exist_ok=True)
    (claude.c3home / "prices.json").write_text(json.dumps({"Claude Opus 9": {"input": 1, "output": 2}}))
    proc = claude.run("usage", "--project", proj)
    assert proc.returncode == 0 and "'Claude Opus 9' matches no model id" in proc.stderr
