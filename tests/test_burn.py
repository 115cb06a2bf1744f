"""Live burn, attribution and runway: the calibration of Claude Code's percent against the tokens
counted (known answers), windows absent or no longer reported, no samples, samples that go
backwards or follow nothing; refusals read from transcripts; `usage --burn`, `live`'s burn,
c3_status(view='usage'), the Hub's usage_page and the status line's runway."""

from __future__ import annotations

import json
import os
import time

import pytest
from test_live_registry import registry_file
from test_usage import SID, usage_line, write

from c3async import statusline
from c3async.ground.project import resolve
from c3async.sessions.reports import run as status_run
from c3async.sessions.usage_report import burn_report, usage_page
from c3async.stores.registry import register
from c3async.usage import account as acc
from c3async.usage import pace, runway
from c3async.usage.burn import Spend, burn, slot_usd
from c3async.usage.prices import SHIPPED, PriceTable
from c3async.usage.ratelimits import Sample
from c3async.usage.timeline import SLOT_S, Slot

OTHER = "cccccccc-0000-4000-8000-000000000003"
SONNET = "claude-sonnet-4-5-20250929"
NOW = 1_800_000_000.0 - 1_800_000_000.0 % SLOT_S + 800  # 800 s into a quarter hour
TABLE = PriceTable(dict(SHIPPED))
K = 2.5  # percent points per USD, the answer the calibration must find


def _slot(t: float, session: str = SID, out: int = 10_000) -> Slot:
    """One response at ``t``: ``out`` output tokens (USD 0.15 per 10,000 at Sonnet's price)."""
    return Slot(int(t // SLOT_S), session, SONNET, (0, out, 0, 0, 0), responses=1, first=t, last=t)


def _world(sessions=(SID,), quarters: int = 16, reset: float = NOW + 3600):
    """A response every quarter hour (300 s into it) for the last ``quarters`` quarter hours,
    sessions in turn, and a 5-hour sample 600 s into each quarter hour saying exactly
    10 + K x the USD spent since the first."""
    start = NOW - NOW % SLOT_S - (quarters - 1) * SLOT_S
    slots = [
        _slot(start + i * SLOT_S + 300, sessions[i % len(sessions)], 10_000 * (1 + i % 3)) for i in range(quarters)
    ]
    spent, samples = 0.0, []
    for i, s in enumerate(slots):
        spent += slot_usd(s, TABLE) or 0.0
        t = start + i * SLOT_S + 600
        if t <= NOW:
            samples.append(Sample(t, "five_hour", 10 + K * spent, reset))
    return slots, samples


def test_the_calibration_finds_the_percent_per_usd_and_the_runway_follows():
    slots, samples = _world()
    spend = Spend.of([("/p", slots)], TABLE)
    fit = runway.calibrate(samples, "five_hour", spend)
    assert fit.per_usd == pytest.approx(K) and fit.fit == pytest.approx(1.0)
    assert (fit.samples, fit.intervals, fit.reason) == (len(samples), len(samples) - 1, None)
    (five, _week) = burn([("/p", slots)], samples, TABLE, NOW, {SID})
    assert (five.rule, five.used, five.start, five.end) == ("reported", samples[-1].used, NOW - 4 * 3600, NOW + 3600)
    # the last quarter hour holds one response, 0.15, 0.30 or 0.45 USD: per hour, four times it
    last = slot_usd(slots[-1], TABLE) or 0.0
    assert five.usd_per_h == pytest.approx(4 * last)
    r = runway.runway(five, fit, spend, NOW)
    assert r is not None and r.pct_per_hour == pytest.approx(K * 4 * last)
    # the last sample came after the last response: nothing to bring forward
    assert r.used == pytest.approx(samples[-1].used, abs=0.01)
    expected = NOW + (100 - samples[-1].used) / (K * 4 * last) * 3600
    if expected < NOW + 3600:
        assert r.hits_at == pytest.approx(expected, abs=60)
    else:
        assert r.hits_at is None and r.reason == "not before the reset at this pace"


def test_the_runway_ends_before_the_reset_when_the_pace_is_high():
    slots, samples = _world(quarters=18, reset=NOW + 4 * 3600)
    slots.append(_slot(NOW - 10, out=2_000_000))  # a burst just now: 30 USD in the last quarter hour
    spend = Spend.of([("/p", slots)], TABLE)
    fit = runway.calibrate(samples, "five_hour", spend)
    five, _ = burn([("/p", slots)], samples, TABLE, NOW)
    r = runway.runway(five, fit, spend, NOW)
    assert r is not None and r.hits_at is not None and NOW < r.hits_at < NOW + 4 * 3600
    # what was spent since the last sample moves the percent forward first
    used = min(100.0, samples[-1].used + K * 30.0)
    assert r.used == pytest.approx(used, abs=0.1)
    assert r.hits_at == pytest.approx(NOW + (100 - used) / r.pct_per_hour * 3600, abs=1)
    assert runway.binding([r]) == r


def test_samples_that_go_backwards_or_jump_to_another_reset_are_left_out():
    slots, samples = _world()
    noisy = list(samples)
    noisy.insert(6, Sample(samples[5].t + 1000, "five_hour", 0.0, samples[5].resets_at))  # backwards
    noisy.insert(3, Sample(samples[2].t + 950, "five_hour", 100.0, NOW + 9999))  # another window, once
    noisy.sort(key=lambda s: s.t)
    fit = runway.calibrate(noisy, "five_hour", Spend.of([("/p", slots)], TABLE))
    assert fit.per_usd == pytest.approx(K) and fit.intervals < len(samples) - 1


def test_no_samples_too_few_or_a_percent_that_follows_nothing_give_no_runway():
    slots, samples = _world()
    spend = Spend.of([("/p", slots)], TABLE)
    none = runway.calibrate([], "five_hour", spend)
    assert none.per_usd is None and none.samples == 0 and "no samples" in (none.reason or "")
    few = runway.calibrate(samples[:3], "five_hour", spend)
    assert few.per_usd is None and few.intervals == 2 and "at least 3" in (few.reason or "")
    # the percent rises by steps that follow nothing spent here: another computer
    odd = [Sample(s.t, s.window, 10 + 10 * (i // 4), s.resets_at) for i, s in enumerate(samples)]
    loose = runway.calibrate(sorted(odd, key=lambda s: s.t), "five_hour", spend)
    assert loose.per_usd is None and loose.reason is not None
    five, _ = burn([("/p", slots)], odd, TABLE, NOW)
    r = runway.runway(five, loose, spend, NOW)
    assert r is not None and r.hits_at is None and r.pct_per_hour is None and r.reason == loose.reason


def test_a_window_not_reported_is_absent_never_zero():
    slots, samples = _world()
    # a plan with no 5-hour window: only weeklies were ever recorded
    week = [Sample(s.t, "seven_day", 3.0, NOW + 3 * 86400) for s in samples]
    five, seven = burn([("/p", slots)], week, TABLE, NOW)
    assert (five.rule, five.used, five.seen) == ("ccusage", None, None) and five.cost_usd > 0
    assert runway.runway(five, runway.calibrate(week, "five_hour", Spend([])), Spend([]), NOW) is None
    assert (seven.rule, seven.used) == ("reported", 3.0)
    # the 5-hour window stopped being reported: its last reset passed, nothing since
    stopped = [Sample(s.t - 5 * 3600, "five_hour", s.used, NOW - 3600) for s in samples]
    five, seven = burn([("/p", slots)], stopped, TABLE, NOW)
    assert (five.rule, five.used) == ("ccusage", None) and (seven.rule, seven.used) == ("rolling", None)
    # nothing recorded at all: the rules, no percent
    five, seven = burn([("/p", slots)], [], TABLE, NOW)
    assert (five.used, seven.used, seven.start, seven.end) == (None, None, NOW - 7 * 86400, NOW)


def test_each_session_and_project_has_its_part_live_first():
    slots, samples = _world(sessions=(SID, OTHER))
    mine, theirs = [s for s in slots if s.session == SID], [s for s in slots if s.session == OTHER]
    five, seven = burn([("/a", mine), ("/b", theirs)], samples, TABLE, NOW, {OTHER})
    for w in (five, seven):
        assert sum(s.cost_usd for s in w.sessions) == pytest.approx(w.cost_usd)
        assert sum(s.tokens for s in w.projects) == w.tokens == sum(sum(s.all_tokens()) for s in slots)
        assert sum(s.share or 0 for s in w.sessions) == pytest.approx(1.0)
        assert (w.sessions[0].key, w.sessions[0].live) == (OTHER, True)  # live first
        assert (w.projects[0].key, w.projects[0].live) == ("/b", True)
    last = slots[-1]
    now_rate = {s.key: s.usd_per_h for s in five.sessions}
    assert now_rate[last.session] == pytest.approx(4 * (slot_usd(last, TABLE) or 0))
    assert now_rate[SID if last.session == OTHER else OTHER] == 0.0


def test_the_status_line_reads_the_runway_kept_for_it(claude, monkeypatch):
    claude.activate(monkeypatch)
    now = time.time()
    reset = now + 3 * 3600
    row = runway.Runway("five_hour", reset, 40.0, 30.0, None, runway.Fit(2.0, 9, 8, 0.99, None), None)
    runway.save([row], now)
    seen = Sample(now, "five_hour", 65.0, reset)
    assert pace.left_at_pace(seen, now) == pytest.approx(35 / 30 * 3600)
    assert pace.left_at_pace(seen, now + pace.FRESH_S + 1) is None  # stale
    assert pace.left_at_pace(Sample(now, "five_hour", 65.0, reset + 3600), now) is None  # another window
    assert pace.left_at_pace(Sample(now, "five_hour", 1.0, reset), now) is None  # resets first
    payload = {"session_id": SID, "rate_limits": {"five_hour": {"used_percentage": 65, "resets_at": reset}}}
    text = statusline.line(json.dumps(payload).encode(), dict(os.environ), now)
    assert "5h" in text and "~1h10m left at this pace" in text
    for bad in (b"{", b'{"version": 1, "computed": 1e999, "runways": []}', b"[]", b"\x00" * 70_000):
        runway.path().write_bytes(bad)
        assert pace.left_at_pace(seen, now) is None
    runway.path().unlink()
    runway.path().symlink_to(claude.root / "elsewhere.json")
    (claude.root / "elsewhere.json").write_text(
        json.dumps(
            {
                "version": 1,
                "computed": now,
                "runways": [{"window": "five_hour", "resets_at": reset, "pct_per_hour": 30.0, "samples": 9}],
            }
        )
    )
    assert pace.left_at_pace(seen, now) is None  # a link in our state is never followed
    assert "left at this pace" not in statusline.line(json.dumps(payload).encode(), dict(os.environ), now)


def _refusal(ts: str, reset: object, window: object = "five_hour") -> str:
    line = {
        "type": "assistant",
        "timestamp": ts,
        "sessionId": SID,
        "uuid": "x",
        "isApiErrorMessage": True,
        "apiError": "usage_limit_reached",
        "error": "rate_limit",
        "apiErrorStatus": 429,
        "apiErrorParams": {"rate_limit_info": {"status": "rejected", "resetsAt": reset, "rateLimitType": window}},
        "message": {
            "model": "<synthetic>",
            "id": "s",
            "role": "assistant",
            "type": "message",
            "content": [{"type": "text", "text": "You've hit your 5-hour limit · resets 5:44pm (UTC)"}],
            "usage": {
                "input_tokens": 0,
                "output_tokens": 0,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        },
    }
    return json.dumps(line, separators=(",", ":"))  # as Claude Code writes it


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(t))


def test_refusals_are_read_from_transcripts_with_their_window_and_reset(claude, monkeypatch):
    claude.activate(monkeypatch)
    proj = claude.project("app")
    now = time.time()
    t = float(int(now) - 600)
    write(claude.folder(proj) / f"{SID}.jsonl", [
        usage_line("m1", "r1", ts=_iso(now - 900), out=50_000),
        _refusal(_iso(t), int(t + 3000)),
        _refusal(_iso(t + 1), 10**300, "seven_day_opus"),  # a reset no window reaches
        _refusal(_iso(t + 2), "soon", "five_hour\x1b[2J"),  # not a window's name
        _refusal("not a time", int(t + 3000)),  # no time: not kept
        usage_line("m2", "r2", ts=_iso(now - 60), out=50_000),
    ])  # fmt: skip
    result = acc.account(resolve(proj))
    assert result.totals[SID].responses == 2  # refusals are no responses
    line = result.timeline
    assert line is not None
    got = [(round(r.t), r.window, r.resets_at) for r in line.refusals]
    assert got == [(round(t), "five_hour", int(t + 3000)), (round(t + 1), "seven_day_opus", None),
                   (round(t + 2), None, None)]  # fmt: skip
    assert acc.account(resolve(proj)).timeline.refusals == line.refusals  # read again: each once
    report = burn_report([resolve(proj)], now)
    assert [r.window for _, r in report.refusals] == [None, "seven_day_opus", "five_hour"]  # newest first
    text = claude.run("usage", "--burn", "--project", proj)
    assert text.returncode == 0, text.stderr
    assert "usage-limit refusals recorded" in text.stdout and "\x1b[2J" not in text.stdout
    # no sample recorded, but the 5-hour refusal says its window is full until its reset
    assert "as Claude Code reported it, 100% used" in text.stdout
    assert "weekly window: no percent reported now" in text.stdout  # the weekly: absent
    data = json.loads(claude.run("usage", "--burn", "--json", "--project", proj).stdout)
    five, week = data["windows"]
    assert len(data["refusals"]) == 3 and (five["used"], five["end"], week["used"]) == (100.0, int(t + 3000), None)
    assert data["windows"][0]["sessions"][0]["key"] == SID
    view = status_run(resolve(proj), "usage")
    assert "runway" in view and "usage-limit refusals recorded" in view
    bad = claude.run("usage", "--burn", "--since", "5h", "--project", proj)
    assert bad.returncode == 1 and "--since does not apply" in bad.stderr


@pytest.mark.process  # a sleeper stands for the running claude
def test_usage_burn_and_the_usage_page_with_recorded_samples(claude, monkeypatch, sleeper):
    """A live session in one project, another in a second; samples recorded by the status line's
    log: the runway rests on them, `live` shows each live session's burn."""
    claude.activate(monkeypatch)
    a, b = claude.project("a"), claude.project("b")
    now = time.time()
    reset = now + 2 * 3600
    start = now - now % SLOT_S - 12 * SLOT_S
    lines_a, lines_b, spent, samples, inside = [], [], 0.0, [], 0
    for i in range(13):
        t = start + i * SLOT_S + 300
        if t > now:
            break
        target = lines_a if i % 2 else lines_b
        target.append(usage_line(f"m{i}", f"r{i}", ts=_iso(t), out=10_000, read=0, w5=0, inp=0,
                                 session=SID if i % 2 else OTHER))  # fmt: skip
        spent += 0.15
        inside += t >= reset - 5 * 3600
        if start + i * SLOT_S + 600 <= now:
            samples.append({"t": start + i * SLOT_S + 600, "window": "five_hour", "used": round(5 + K * spent, 2),
                            "resets_at": round(reset)})  # fmt: skip
    write(claude.folder(a) / f"{SID}.jsonl", lines_a)
    write(claude.folder(b) / f"{OTHER}.jsonl", lines_b)
    log = claude.c3home / "usage" / "rate_limits.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("".join(json.dumps(s) + "\n" for s in samples))
    assert claude.run("usage", "--project", b).returncode == 0  # b accounted once, as a server would
    assert "too loosely" in claude.run("usage", "--burn", "--project", a).stdout  # b unknown: half unseen
    register(resolve(b))  # as its server does when it first runs there
    registry_file(claude.config, sleeper.pid, SID, a, status="busy")
    data = json.loads(claude.run("usage", "--burn", "--json", "--project", a).stdout)
    five = data["windows"][0]
    assert five["rule"] == "reported" and five["samples"] == len(samples)
    assert five["runway"]["pct_per_usd"] == pytest.approx(K, rel=0.01)
    assert {p["key"] for p in five["projects"]} == {a, b}
    assert five["sessions"][0]["key"] == SID and five["sessions"][0]["live"]
    assert sum(s["cost_usd"] for s in five["sessions"]) == pytest.approx(0.15 * inside)
    page = usage_page([resolve(a), resolve(b)], now)
    assert json.loads(json.dumps(page))["windows"][0]["runway"]["samples"] == len(samples)
    kept = json.loads(runway.path().read_text())
    assert kept["runways"] == [] or kept["runways"][0]["window"] == "five_hour"
    live = json.loads(claude.run("live", "--project", a, "--json").stdout)
    assert [r["id"] for r in live] == [SID]
    mine = next(s for s in five["sessions"] if s["key"] == SID)
    assert live[0]["window_share"] == pytest.approx(mine["share"], abs=1e-6)
    assert live[0]["usd_per_h"] == pytest.approx(mine["usd_per_h"], abs=1e-6)
    text = claude.run("live", "--project", a).stdout
    assert "tok/h" in text and "of the 5h window" in text


def test_the_5_hour_rule_read_from_the_last_gap_places_now_as_over_every_row():
    """``period_at`` walks ccusage's blocks from the last response that came 5 hours or more
    after every earlier one: the windows holding now are those of the walk over every row."""
    import random

    from c3async.usage import buckets
    from c3async.usage.limits import Sample

    rng = random.Random(32)
    for _ in range(300):
        rows, t = [], NOW - 3 * 86_400
        for _ in range(rng.randint(1, 40)):
            t += rng.choice([60, 900, 3600, 4 * 3600, 5 * 3600 - 60, 5 * 3600, 6 * 3600])
            last = t + rng.choice([0, 300, 800])
            rows.append(("/p", Slot(int(t // SLOT_S), SID, SONNET, responses=1, first=t, last=last)))
        rng.shuffle(rows)
        at = rng.uniform(NOW - 3 * 86_400, t + 6 * 3600)
        samples = [Sample(at - 60, "five_hour", 40.0, at + rng.uniform(60, 5 * 3600))] if rng.random() < 0.3 else []
        now = rng.choice([t, at, t + rng.uniform(0, 6 * 3600)])
        every = {k for k in buckets._keys(rows, "window", samples) if k[1] <= now < k[2]}
        walked = {k for k in buckets._keys(buckets._chain(rows, now), "window", samples) if k[1] <= now < k[2]}
        assert walked == every
        assert (buckets.period_at(rows, "window", samples, now) in every) if every else True


def test_the_window_and_week_holding_now_are_those_of_every_row_summed_from_their_own():
    """``buckets.current`` (the Usage page's current windows) sums only the rows of the window
    or week holding now: the same row, figures and all, as ``bucket`` over every row gives."""
    import random

    from c3async.usage import buckets
    from c3async.usage.limits import Sample

    rng = random.Random(33)
    for _ in range(200):
        rows, t = [], NOW - 10 * 86_400
        for _ in range(rng.randint(1, 60)):
            t += rng.choice([60, 900, 3600, 4 * 3600, 5 * 3600, 6 * 3600, 86_400])
            last = t + rng.choice([0, 300, 800])
            slot = Slot(int(t // SLOT_S), rng.choice([SID, OTHER]), SONNET, tokens=(1, rng.randint(1, 9), 0, 0, 0),
                        responses=1, first=t, last=last)  # fmt: skip
            rows.append((rng.choice(["/p", "/q"]), slot))
        now = rng.choice([t, t + rng.uniform(0, 6 * 3600), t + rng.uniform(0, 8 * 86_400)])
        samples = []
        if rng.random() < 0.4:
            samples.append(Sample(now - 60, "five_hour", 40.0, now + rng.uniform(60, 5 * 3600)))
        if rng.random() < 0.4:
            samples.append(Sample(now - 60, "seven_day", 20.0, now + rng.uniform(60, 7 * 86_400)))
        timelines = [(p, [s for q, s in rows if q == p]) for p in ("/p", "/q")]
        for by in ("window", "week"):
            every = buckets.bucket(timelines, by, TABLE, samples=samples).rows
            holding = [r for r in every if _epoch(r.start) <= now < _epoch(r.end)]
            assert buckets.current(timelines, by, TABLE, samples, now) == (holding[0] if holding else None)


def _epoch(iso: str | None) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso or "").timestamp()
