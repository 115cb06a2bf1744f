"""The Hub's Usage page API, ``GET /api/usage``, in process (the app over httpx's ASGI transport):
tokens and cost per day and per 5-hour window stacked by project and equal to ``c3async usage``'s
buckets, the current windows (reported, else by the rule, never a made-up 0), the live
sessions' burn, the token it needs and the parameters it refuses."""

from __future__ import annotations

import json
import os
import time

import anyio
import pytest
from hubproc import httpx
from test_usage import OTHER, SID, usage_line, write

from c3async.hub.app import create_app
from c3async.usage import ratelimits

TOKEN = "t" * 43
HOUR = 3600
NOW = time.time()
BASE = NOW - NOW % HOUR - 3 * HOUR  # three hours ago, on the hour
HTML = "<img src=x onerror=alert(1)>"


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(seconds))


def _in(project: str, lines: list[str]) -> list[str]:
    """The lines as written in ``project`` (their cwd: the Hub lists projects by it)."""
    return [json.dumps({**json.loads(line), "cwd": project}, separators=(",", ":")) for line in lines]


class World:
    """Two projects (one named with markup), their usage accounted: alpha's session two
    responses three hours ago and one now, beta's one response two days ago."""

    def __init__(self, claude, monkeypatch) -> None:
        self.claude = claude
        claude.activate(monkeypatch)
        self.alpha = claude.project("alpha")
        self.beta = claude.project(HTML)
        write(claude.folder(self.alpha) / f"{SID}.jsonl", _in(self.alpha, [
            usage_line("m1", "r1", out=100, ts=_iso(BASE + 60)),
            usage_line("m2", "r2", out=200, ts=_iso(BASE + 600)),
            usage_line("m3", "r3", out=50, ts=_iso(NOW - 120)),
        ]))  # fmt: skip
        write(claude.folder(self.beta) / f"{OTHER}.jsonl",
              _in(self.beta, [usage_line("m4", "r4", out=1000, session=OTHER, ts=_iso(BASE - 2 * 86400))]))  # fmt: skip
        for p in (self.alpha, self.beta):
            claude.sessions(p)  # registers it
            assert claude.run("usage", "--project", p).returncode == 0  # accounts it: the timeline

    def cli(self, by: str, since: str) -> dict[tuple[str, str], dict]:
        """``c3async usage --by BY --since SINCE`` of each project, by (bucket, project)."""
        out = {}
        for p in (self.alpha, self.beta):
            proc = self.claude.run("usage", "--by", by, "--since", since, "--project", p, "--json")
            assert proc.returncode == 0, proc.stderr
            out.update({(r["bucket"], p): r for r in json.loads(proc.stdout)})
        return out


@pytest.fixture
def world(claude, monkeypatch) -> World:
    return World(claude, monkeypatch)


def get(path: str, token: str | None = TOKEN, **params) -> httpx.Response:
    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=create_app(TOKEN))
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as c:
            return await c.get(path, params=params, headers=headers)

    return anyio.run(call)


def usage(**params) -> dict:
    r = get("/api/usage", **params)
    assert r.status_code == 200, r.text
    return r.json()


def test_it_needs_the_token(world):
    for token in (None, "x" * 43):
        r = get("/api/usage", token=token)
        assert r.status_code == 401 and "token" in r.json()["error"]
        assert "alpha" not in r.text and "cost" not in r.text


@pytest.mark.parametrize("by", ["day", "window"])
def test_buckets_stacked_by_project_are_the_usage_reports(world, by):
    data = usage(by=by, since="7d")
    assert data["by"] == by
    cli = world.cli(by, "7d")
    parts = {(b["bucket"], p["project"]): (b, p) for b in data["buckets"] for p in b["parts"]}
    assert set(parts) == set(cli)  # the same buckets, a part per project
    for key, (bar, part) in parts.items():
        want = cli[key]
        assert (
            part["tokens"]
            == want["input"] + want["output"] + want["cache_write_5m"] + want["cache_write_1h"] + want["cache_read"]
        )
        assert (part["output"], part["responses"]) == (want["output"], want["responses"])
        assert part["cost_usd"] == pytest.approx(want["cost_usd"], abs=1e-6)
        assert (bar["start"], bar["end"], bar["rule"]) == (want["start"], want["end"], want["rule"])
    for bar in data["buckets"]:  # a bar's figures are its parts' sums
        assert bar["tokens"] == sum(p["tokens"] for p in bar["parts"])
        assert bar["cost_usd"] == pytest.approx(sum(p["cost_usd"] for p in bar["parts"]))
    names = {p["project"]: p["name"] for p in data["projects"]}
    assert names == {world.alpha: "alpha", world.beta: HTML}  # as it is: the page sets it as text
    assert data["projects"][0]["project"] == world.beta  # the largest first


def test_since_bounds_the_chart(world):
    day = usage(by="day", since="1d")
    assert {p["project"] for b in day["buckets"] for p in b["parts"]} == {world.alpha}
    assert sum(b["parts"][0]["output"] for b in day["buckets"]) == 350
    default = usage()  # by day, the last 30 days
    assert default["by"] == "day" and sum(b["output"] for b in default["buckets"]) == 1350


def test_windows_by_the_rule_when_nothing_was_reported(world):
    data = usage(by="window")
    assert data["refusals"] == []  # none recorded in these transcripts
    five, week = data["windows"]
    assert (five["window"], week["window"]) == ("five_hour", "seven_day")
    assert five["used"] is None and five["samples"] == 0 and five["runway"] is None  # unknown, not 0
    assert five["rule"] == "ccusage" and five["output"] == 350  # the window holding now: from three hours ago
    assert week["rule"] == "calendar" and week["resets_at"]


def test_a_reported_window_carries_its_percent_reset_and_samples(world):
    resets = NOW + 4.5 * HOUR  # the window began half an hour ago
    for i, used in enumerate((30.0, 42.0)):
        t = NOW - 60 + i * 30
        assert ratelimits.record([ratelimits.Sample(t, "five_hour", used, resets)], now=t) == 1
    five, week = usage(by="day")["windows"]
    assert five["rule"] == "reported" and five["used"] == 42.0 and five["samples"] == 2
    assert five["resets_at"].startswith(time.strftime("%Y-%m-%dT%H:%M", time.localtime(resets)))
    assert five["output"] == 50  # what was counted inside it (the responses of three hours ago are not)
    assert week["used"] is None and week["rule"] == "calendar"  # a window not reported stays unknown


def test_live_sessions_burn(world):
    assert usage()["live"] == []
    live = os.path.join(world.alpha, ".c3", "live")
    os.makedirs(live, exist_ok=True)
    with open(os.path.join(live, "c3000000-0000-4000-8000-000000000009.json"), "w") as f:
        json.dump({"session_id": "c3000000-0000-4000-8000-000000000009", "host_session_id": SID,
                   "ide": "terminal", "pid": os.getpid(), "ts": time.time()}, f)  # fmt: skip
    (row,) = usage()["live"]
    assert (row["id"], row["project"], row["name"]) == (SID, world.alpha, "alpha")
    five = usage()["windows"][0]
    assert row["window_cost"] == pytest.approx(five["cost_usd"]) and row["share"] == 1.0
    assert row["tokens_per_hour"] == 4 * (10 + 50 + 100 + 1000)  # the last quarter hour, per hour
    assert row["cost_per_hour"] > 0


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"by": "week"}, "by must be one of day, window"),
        ({"by": "<script>"}, "by must be one of"),
        ({"since": "yesterday"}, "since: give a time ago"),
        ({"since": "9" * 40 + "d"}, "since is longer than 40"),
        ({"since": "99999999999d"}, "since"),
        ({"since": "7d\x00"}, "NUL"),
        ({"since": "10000-01-01"}, "since"),
    ],
)
def test_bad_parameters_are_400_saying_which(world, params, said):
    r = get("/api/usage", **params)
    assert r.status_code == 400, (params, r.status_code, r.text)
    assert said in r.json()["error"] and "Traceback" not in r.text


def test_no_project_accounted_is_an_empty_page(claude, monkeypatch):
    claude.activate(monkeypatch)
    data = usage(by="window")
    assert data["buckets"] == [] and data["projects"] == [] and data["as_of"] is None
    assert [w["rule"] for w in data["windows"]] == [None, None] and data["live"] == []


def test_the_hub_works_out_the_pages_first_asks_at_start(world):
    from c3async.hub import app
    from c3async.sessions import usage_charts

    usage_charts._answers.clear()
    app._warm_usage()
    held = set(usage_charts._answers)
    assert {k[1] for k in held if k[0] == "chart"} == {"day", "window"} and any(k[0] == "drawn" for k in held)
    usage()  # the first visit, by day: a lookup of what start worked out
    usage(by="window")
    assert set(usage_charts._answers) == held


def test_the_runways_are_held_while_their_files_hold_and_the_hub_works_them_out_after_each_pass(world):
    """The runways and refusals (the burn's part of the page) are worked out once for both charts
    and held while nothing they rest on moves, ``BURN_HOLD_S`` at most (the pace moves with time);
    the Hub's accounting chore works them out again and keeps them for the status line. Each
    working-out writes the runways' file with its time (``runway.save``)."""
    from c3async.hub import app
    from c3async.sessions import runtime, usage_charts
    from c3async.sessions.projects import listed_projects
    from c3async.usage import runway

    def computed() -> float:
        return json.loads(runway.path().read_text())["computed"]

    resets = NOW + 4.5 * HOUR
    assert ratelimits.record([ratelimits.Sample(NOW - 60, "five_hour", 30.0, resets)], now=NOW - 60) == 1
    projects = listed_projects()
    t = NOW + 1
    usage_charts.usage_charts(projects, "day", None, now=t)
    assert computed() == pytest.approx(t)
    usage_charts.usage_charts(projects, "window", None, now=t + 30)
    assert computed() == pytest.approx(t), "held: the second chart of the page shares it"
    usage_charts.usage_charts(projects, "day", None, now=t + usage_charts.BURN_HOLD_S + 1)
    assert computed() == pytest.approx(t + usage_charts.BURN_HOLD_S + 1), "past the hold: worked out again"
    later = t + usage_charts.BURN_HOLD_S + 2
    assert ratelimits.record([ratelimits.Sample(later, "five_hour", 42.0, resets)], now=later) == 1
    five = usage_charts.usage_charts(projects, "day", None, now=later)["windows"][0]
    assert computed() == pytest.approx(later) and five["samples"] == 2, "a sample recorded: worked out again"
    before = time.time()
    runtime._runway(projects, app._runways)  # the Hub's chore after an accounting pass
    assert before - 1 <= computed() <= time.time() + 1  # not `later`'s, 90 s ahead
    runway.path().unlink()
    usage_charts.usage_charts(projects, "day", None, now=time.time())
    assert not runway.path().exists(), "the chore's working-out is what the page shows"
