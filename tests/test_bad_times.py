"""Times and numbers out of range are values: a transcript's mtime past 2262, a registry
``statusUpdatedAt`` of -1, 1e30 or "x", a shared pm.json holding 1e19, a mark or an activity row
from the future, token counts of -5 or 1e12. Each is skipped or clamped (``ground.clock``), said
once on stderr, and every door goes on: no OverflowError, no project dropped. Misspelt keys of
``prices.json`` and ``config.json`` are named with the key they most likely mean."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hubproc import Hub
from test_live_registry import registry_file
from test_usage import usage_line

from c3async.ground import clock
from c3async.ground.project import resolve
from c3async.live.running import proc_start_ticks
from stress.transcripts import Conversation, set_mtime, simple_session, write_session

YEAR_2300 = 10_413_792_000  # seconds: past what 64-bit nanoseconds hold (2262-04-11)


def _no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr


def _said_once(stderr: str, *words: str) -> None:
    lines = [line for line in stderr.splitlines() if all(w in line for w in words)]
    assert len(lines) == 1, stderr


@pytest.fixture
def project(claude) -> str:
    project = claude.project("app")
    simple_session(
        claude.folder(project), project, "fix the retry budget", start=datetime.now(UTC) - timedelta(hours=1)
    )
    return project


# ------------------------------------------------------------------ the one rule


@pytest.fixture
def said(caplog):
    """The warnings said in this process (``paths.warn_once`` forgets nothing between tests: the
    keys used here are emptied first)."""
    from c3async.ground import memo, paths, safefs

    memo.forget()  # what earlier tests of this process left remembered (a price table, its warnings)
    paths._warned.clear()
    safefs._warned.clear()
    with caplog.at_level(logging.WARNING, logger="c3async"):
        yield lambda: [r.getMessage() for r in caplog.records]
    memo.forget()
    paths._warned.clear()
    safefs._warned.clear()


def test_an_event_time_is_a_number_of_seconds_after_1970_and_before_next_year(said):
    now = time.time()
    assert clock.event(now, "a test time", "here") == now
    assert clock.event(int(now), "a test time", "here") == int(now)
    assert clock.event(now * 1000, "a test time", "here", scale=0.001) == pytest.approx(now)
    assert clock.event(now + 300 * 86400, "a test time", "here") is not None  # a clock ahead, still read
    assert clock.event(None, "a test time", "here") is None and clock.event(0, "a test time", "here") is None
    assert said() == []  # absent is no problem
    for bad in (
        -1,
        -1e19,
        1e19,
        1e30,
        now + 400 * 86400,
        float("nan"),
        float("inf"),
        "x",
        "1700000000",
        True,
        10**400,
        -(10**5000),
        [1],
        {"a": 1},
    ):
        assert clock.event(bad, "a test time", "here") is None, bad
    assert len(said()) == 1  # once per kind of time
    assert "here: ignoring a test time -1, not a time from 1970-01-01 to" in said()[0]
    clock.event(-5, "another time", "there", key="a test time")
    assert len(said()) == 1
    clock.event(-5, "another time", "there")
    assert len(said()) == 2 and "another time -5" in said()[1]


def test_an_iso_time_parses_without_raising_and_is_checked(said):
    assert clock.parse_iso("2026-11-01T10:00:00.000Z") == datetime(2026, 11, 1, 10, tzinfo=UTC).timestamp()
    assert clock.parse_iso("2026-11-01T10:00:00") == clock.parse_iso("2026-11-01T10:00:00+00:00")  # no zone: UTC
    for never in (
        "0001-01-01T00:00:00",
        "9999-12-31T23:59:59-14:00",
        "99999-01-01T00:00:00Z",
        "",
        "x",
        "2" * 10_000,
        None,
        1.5,
        b"2026-11-01",
    ):
        clock.parse_iso(never)  # never raises (year 0 in local time, past 9999, garbage)
    assert clock.event_iso("2026-11-01T10:00:00.000Z", "a stamp", "f") is not None
    for bad in (
        "0001-01-01T00:00:00Z",
        "9999-12-31T23:59:59Z",
        "1969-12-31T23:59:59Z",
        "2026-13-01T00:00:00Z",
        "x",
        17,
    ):
        assert clock.event_iso(bad, "a stamp", "f") is None, bad
    assert clock.event_iso(None, "a stamp", "f") is None and len(said()) == 1
    earliest, last = clock.iso_window()
    assert earliest < "2026-11-01T10:00:00.000Z" <= last
    assert not earliest < "0001-01-01T00:00:00Z" and last < "99999-01-01T00:00:00Z"


def test_a_file_time_is_clamped_to_what_64_bit_nanoseconds_hold(said):
    assert clock.file_ns(1_700_000_000 * 10**9, "f") == 1_700_000_000 * 10**9
    assert clock.file_ns(YEAR_2300 * 10**9, "/x/a.jsonl") == clock.MAX_NS == 2**63 - 1
    assert clock.file_ns(-(10**18), "/x/b.jsonl") == 0
    assert said() == [
        "/x/a.jsonl: its modification time is past 2262-04-11 (what 64-bit nanoseconds hold): "
        "read as that (files like it too)"
    ]
    assert clock.clamp_ns(10**30) == clock.MAX_NS and clock.clamp_ns(-1) == 0


# ------------------------------------------------------------------ the catalog and the search index


@pytest.mark.process
def test_a_transcript_from_the_year_2300_is_listed_and_searched(claude, project):
    path = next(claude.folder(project).glob("*.jsonl"))
    set_mtime(path, YEAR_2300)
    if os.stat(path).st_mtime_ns <= clock.MAX_NS:
        pytest.skip("this file system cannot hold a time past 2262")
    for _ in range(2):  # the second search reads the index the first wrote
        proc = claude.run("search", "retry", "--project", project, "--json")
        _no_traceback(proc)
        assert proc.returncode == 0, proc.stderr
        assert len(json.loads(proc.stdout)["results"]) == 1
        _said_once(proc.stderr, str(path), "past 2262-04-11")
    other = claude.project("other")
    simple_session(claude.folder(other), other, "another project's retry")
    proc = claude.run("search", "retry", "--project", other, "--json")  # any project's search
    assert proc.returncode == 0 and len(json.loads(proc.stdout)["results"]) == 1, proc.stderr
    [row] = claude.sessions(project)
    assert row["mtime"].startswith("2262-04-11T")


@pytest.mark.process
def test_transcript_times_out_of_range_are_dropped(claude, project, said):
    folder = claude.folder(project)
    conv = Conversation(project)
    lines = [conv.permission_mode(), *conv.exchange("a session from nowhen")]
    for line in lines:
        line["timestamp"] = "99999-01-01T00:00:00.000Z" if "timestamp" in line else None
    write_session(folder, conv.id, lines)
    proc = claude.run("sessions", "--project", project, "--json")
    assert proc.returncode == 0, proc.stderr
    row = {r["id"]: r for r in json.loads(proc.stdout)}[conv.id]
    assert row["created_at"] is None and row["last_activity"] is None
    _said_once(proc.stderr, "ignoring a transcript's timestamp '99999-01-01T00:00:00.000Z'")


@pytest.mark.process
def test_a_cache_entry_with_times_no_read_keeps_is_read_again(claude, project, monkeypatch):
    from c3async.catalog import cache
    from c3async.catalog.scan import cache_path

    assert claude.run("sessions", "--project", project).returncode == 0
    claude.activate(monkeypatch)
    where = cache_path(resolve(project))
    doc = json.loads(where.read_text())
    [entry] = doc["entries"].values()
    assert cache.load(where)
    for planted in ({"created_ts": 1e19}, {"last_ts": -5.0}, {"mtime_ns": -1}, {"created_ts": None}):
        where.write_text(json.dumps({**doc, "entries": {k: {**entry, **planted} for k in doc["entries"]}}))
        assert cache.load(where) == {}, planted


# ------------------------------------------------------------------ Claude Code's registry


@pytest.mark.process
@pytest.mark.parametrize("since", [-1, 1e30, -1e19, "x", [1]])
def test_a_registry_time_out_of_range_is_ignored_by_every_door(claude, project, sleeper, since):
    if proc_start_ticks(sleeper.pid) is None:
        pytest.skip("needs /proc (Linux)")
    sid = next(claude.folder(project).glob("*.jsonl")).stem
    path = registry_file(claude.config, sleeper.pid, sid, project, status="waiting", since_ms=since, startedAt=since)
    for args in (["sessions"], ["sessions", "--json"], ["live"], ["live", "--json"], ["show", sid]):
        proc = claude.run(*args, "--project", project)
        _no_traceback(proc)
        assert proc.returncode == 0, (args, proc.stderr)
        _said_once(proc.stderr, str(path), "ignoring a registry time")
    row = claude.rows_by_id(project)[sid]
    assert (row["live"], row["state"], row["state_since"]) == (True, "waiting", None)  # the file still counts
    with Hub(claude) as hub, hub.client() as c:
        r = c.get("/api/rows")
        assert r.status_code == 200 and [x["id"] for x in r.json()["rows"]] == [sid], r.text
        assert c.get("/api/sessions", params={"project": project}).status_code == 200


# ------------------------------------------------------------------ the task store

PM_TIMES = [1e19, -1e19, 1e300]


@pytest.mark.process
@pytest.mark.parametrize("bad", PM_TIMES)
def test_a_shared_task_store_with_times_out_of_range_reads(claude, project, bad):
    task = json.loads(claude.run("tasks", "add", "--title", "ship it", "--project", project, "--json").stdout)["id"]
    assert claude.run("tasks", "decide", "--text", "we go", "--task", task, "--project", project).returncode == 0
    assert claude.run("tasks", "time_start", task, "--project", project).returncode == 0
    assert claude.run("tasks", "time_stop", task, "--project", project).returncode == 0
    assert (
        claude.run("tasks", "milestone_add", "--title", "v1", "--due", "2027-01-01", "--project", project).returncode
        == 0
    )
    pm = Path(project, ".c3", "pm", "pm.json")
    doc = json.loads(pm.read_text())
    for t in doc["tasks"]:
        t["created"] = t["updated"] = bad
        t["due"] = "2026-02-30"
        t["time"] += [{"start": bad, "end": None}, {"start": 1.7e9, "end": bad}]
    for m in doc["milestones"]:
        m["created"], m["completed_at"] = bad, bad
    for d in doc["decisions"]:
        d["ts"] = bad
    for e in doc["events"]:
        e["ts"] = bad
    pm.write_text(json.dumps(doc))
    for args in (
        ["get", task],
        ["decisions"],
        ["history", task],
        ["list"],
        ["board"],
        ["report"],
        ["milestones"],
        ["time_report"],
        ["get", task, "--json"],
        ["history", task, "--json"],
    ):
        proc = claude.run("tasks", *args, "--project", project)
        _no_traceback(proc)
        assert proc.returncode == 0, (args, proc.stderr)
        _said_once(proc.stderr, str(pm), "ignoring a task store's")
    got = json.loads(claude.run("tasks", "get", task, "--project", project, "--json").stdout)
    assert got["created"] == 0.0 and got["due"] is None
    # no timer runs from a bad start, and an entry ending out of range ends as it starts
    assert got["timer_running"] is False and 0 <= got["tracked_s"] < 60
    # a change stores the file with the times read as unknown (the old one is pm.json.bak)
    assert claude.run("tasks", "update", task, "--status", "done", "--project", project).returncode == 0
    assert bad not in json.loads(pm.read_text())["tasks"][0].values()


@pytest.mark.process
def test_a_time_of_the_wrong_type_in_pm_json_is_a_message(claude, project):
    assert claude.run("tasks", "add", "--title", "ship it", "--project", project).returncode == 0
    pm = Path(project, ".c3", "pm", "pm.json")
    doc = json.loads(pm.read_text())
    doc["tasks"][0]["created"] = "NaN"
    pm.write_text(json.dumps(doc))
    for args in (["get", doc["tasks"][0]["id"]], ["decisions"], ["history", doc["tasks"][0]["id"]]):
        proc = claude.run("tasks", *args, "--project", project)
        _no_traceback(proc)
        assert proc.returncode == 1 and "pm.json does not parse" in proc.stderr and "created" in proc.stderr


# ------------------------------------------------------------------ marks, activity, heartbeats


@pytest.mark.process
def test_a_mark_or_an_activity_row_from_the_future_never_wins(claude, project, monkeypatch):
    from c3async.ground import jsonl
    from c3async.stores import activity, marks

    claude.activate(monkeypatch)
    sid = next(claude.folder(project).glob("*.jsonl")).stem
    now = time.time()
    jsonl.append(
        marks.marks_path(resolve(project)), {"ts": 1e19, "id": sid, "op": "stale", "reason": "planted", "by": "user"}
    )
    jsonl.append(activity.activity_path(resolve(project)), {"ts": 1e19, "kind": "session_start", "session_id": sid})
    jsonl.append(activity.activity_path(resolve(project)), {"ts": 10**400, "kind": "session_start", "session_id": sid})
    proc = claude.run("sessions", "--project", project, "--json")
    row = json.loads(proc.stdout)[0]
    assert row["stale"] is None and row["live"] is False
    _said_once(proc.stderr, "ignoring a mark's ts 1e+19")
    _said_once(proc.stderr, "ignoring an activity row's ts 1e+19")
    assert claude.run("mark", "unstale", sid, "--project", project, "--reason", "fresh").returncode == 0
    assert claude.run("mark", "stale", sid, "--project", project, "--reason", "done").returncode == 0
    assert claude.rows_by_id(project)[sid]["stale"]["reason"] == "done"
    activity.record_once(resolve(project), "hook", 5.0, ("session_id",), session_id=sid)  # reads the rows above
    assert now - 5 < activity.facts(resolve(project)).newest < now + 60


@pytest.mark.process
def test_a_heartbeat_of_no_time_never_reads_live(claude, project):
    from c3async.live.heartbeat import boot_id, live_dir

    if not boot_id():
        pytest.skip("needs /proc/sys/kernel/random/boot_id")
    folder = live_dir(resolve(project))
    folder.mkdir(parents=True)
    hb = folder / "11111111-2222-4333-8444-555555555555.json"
    hb.write_text(
        json.dumps(
            {
                "session_id": "c3",
                "host_session_id": "h",
                "ide": "x",
                "pid": 1,
                "ts": 1e19,
                "boot_id": boot_id(),
                "mono": time.monotonic(),
            }
        )
    )
    proc = claude.run("live", "--project", project, "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout) == [], proc.stderr
    assert not hb.exists()  # pruned as any dead heartbeat is


# ------------------------------------------------------------------ token counts and costs


@pytest.mark.process
def test_token_counts_out_of_range_are_not_counted_and_said_once(claude, project):
    sid = "aaaaaaaa-0000-4000-8000-000000000001"
    good = [usage_line("m1", "r1"), usage_line("m2", "r2", ts="99999-01-01T00:00:00Z")]
    bad = [
        usage_line("m3", "r3", inp=-5),
        usage_line("m4", "r4", out=10**12),
        usage_line("m5", "r5", read=10**30),
        usage_line("m6", "r6").replace('"output_tokens":20', '"output_tokens":1e12'),
        usage_line("m7", "r7").replace('"output_tokens":20', '"output_tokens":2.5'),
        usage_line("m8", "r8", cost=-5.0),
        usage_line("m9", "r9", cost=1e300),
    ]
    path = claude.folder(project) / f"{sid}.jsonl"
    path.write_text("".join(line + "\n" for line in bad + good))
    proc = claude.run("stats", "--project", project, "--json")
    _no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    [row] = [r for r in json.loads(proc.stdout) if r["id"] == sid]
    assert (row["responses"], row["input"], row["output"], row["cache_read"]) == (2, 20, 40, 2000)
    assert 0 < row["cost_usd"] < 0.01 and row["first_ts"] == row["last_ts"] == "2026-11-01T10:00:00.000Z"
    _said_once(proc.stderr, str(path), "the usage of 7 response(s) is not counted")
    _said_once(proc.stderr, "ignoring a transcript's timestamp '99999-01-01T00:00:00Z'")
    again = claude.run("stats", "--project", project)
    assert again.returncode == 0 and "not counted" not in again.stderr  # those bytes are read once
    assert "-" not in again.stdout.splitlines()[-1]


def test_a_stats_log_row_out_of_range_is_skipped(claude, project, monkeypatch):
    from c3async.usage.totals import latest, stats_path

    claude.activate(monkeypatch)
    log = stats_path(resolve(project))
    log.parent.mkdir(parents=True, exist_ok=True)
    rows = [
        {"session_id": "a", "ts": 1e19, "input": 5},
        {"session_id": "b", "ts": 1.7e9, "input": -5},
        {"session_id": "c", "ts": 1.7e9, "input": 10**30},
        {"session_id": "d", "ts": 1.7e9, "cost_usd": -1.0},
        {"session_id": "e", "ts": 1.7e9, "input": 7, "first_ts": "99999-01-01", "last_ts": "2026-11-01T10:00:00Z"},
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows) + "x" * 300_000 + "\n")  # past a checkpoint's size
    got = latest(resolve(project))
    assert list(got) == ["e"] and (got["e"].input, got["e"].first_ts, got["e"].last_ts) == (
        7,
        None,
        "2026-11-01T10:00:00Z",
    )
    assert (log.parent / "cache" / "session_stats.fold").exists()  # its checkpoint holds what it folded


# ------------------------------------------------------------------ settings files


@pytest.mark.process
def test_misspelt_keys_of_prices_and_config_are_named(claude, project):
    claude.c3home.mkdir(parents=True, exist_ok=True)
    prices = claude.c3home / "prices.json"
    prices.write_text(
        json.dumps(
            {
                "claude-x": {
                    "input": 1,
                    "output": 2,
                    "cache_reed": 3,
                    "above_200k": {"input": 2, "output": 4, "ouptut": 1},
                }
            }
        )
    )
    config = Path(project, ".c3", "config.json")
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"idle_dayz": 3, "idle_days": 9, "zzz": 1}))
    for args in (["stats"], ["sessions"]):
        proc = claude.run(*args, "--project", project)
        assert proc.returncode == 0, proc.stderr
        _said_once(proc.stderr, str(prices), "'claude-x'", "'cache_reed' (did you mean 'cache_read'?)")
        _said_once(proc.stderr, str(prices), "'claude-x.above_200k'", "'ouptut' (did you mean 'output'?)")
    _said_once(proc.stderr, str(config), "'idle_dayz' (did you mean 'idle_days'?), 'zzz'", "not a setting")
    assert claude.rows_by_id(project)  # the settings that are settings still apply
    from c3async.ground.errors import unknown_keys

    assert unknown_keys({"a": 1}, ("a",)) is None
    assert unknown_keys([f"k{i}" for i in range(9)], ("x",)) == "'k0', 'k1', 'k2', 'k3', 'k4' and 4 more"
    assert unknown_keys(["x" * 10_000], ("x",)).startswith("'" + "x" * 60 + "'")


@pytest.mark.process
def test_the_mcp_server_reads_bad_times_and_logs_unknown_keys(claude, project, monkeypatch, said):
    from mcp import Client

    from c3async.serve import app as server

    for key, value in {**claude.env(), "CLAUDE_PROJECT_DIR": project}.items():
        monkeypatch.setenv(key, value)
    task = json.loads(claude.run("tasks", "add", "--title", "ship it", "--project", project, "--json").stdout)["id"]
    pm = Path(project, ".c3", "pm", "pm.json")
    doc = json.loads(pm.read_text())
    doc["tasks"][0]["created"] = doc["events"][0]["ts"] = 1e19
    pm.write_text(json.dumps(doc))
    claude.c3home.mkdir(parents=True, exist_ok=True)
    (claude.c3home / "prices.json").write_text(json.dumps({"claude-x": {"input": 1, "output": 2, "cache_reed": 3}}))

    async def main() -> list[tuple[bool, str]]:
        out = []
        async with Client(server.mcp) as c:
            for tool, args in (
                ("c3_task", {"action": "get", "task_id": task}),
                ("c3_task", {"action": "history"}),
                ("c3_session", {"action": "list"}),
                ("c3_status", {"view": "sessions"}),  # its stats come from the background accounting
                ("c3_status", {"view": "usage"}),  # priced now, whatever that accounting has done yet
            ):
                r = await c.call_tool(tool, args)
                out.append((r.is_error, r.content[0].text))
        return out

    import anyio

    answers = anyio.run(main)
    assert [is_error for is_error, _ in answers] == [False] * 5, answers
    logged = said()
    assert any("ignoring a task store's" in m for m in logged), logged
    assert any("'cache_reed' (did you mean 'cache_read'?)" in m for m in logged), logged


# ------------------------------------------------------------------ records, the registry, hooks


@pytest.mark.process
def test_a_record_or_a_registered_project_with_times_out_of_range_reads(claude, project, monkeypatch):
    sid = next(claude.folder(project).glob("*.jsonl")).stem
    record = Path(project, ".c3", "sessions", "c3-planted.json")
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(
        json.dumps(
            {
                "c3_session_id": "c3-planted",
                "host_session_ids": [sid],
                "started": -1e19,
                "ended": 1e30,
                "snapshots": [{"ts": 1e19, "host_session_id": sid, "summary": "planted snapshot"}],
                "events": [{"ts": -5, "host_session_id": sid, "event_type": "decision"}],
            }
        )
    )
    assert claude.run("sessions", "--project", project).returncode == 0  # registers it
    registry = claude.c3home / "projects.json"
    doc = json.loads(registry.read_text())
    doc["projects"][0].update(added=1e300, last_seen=-1e19)
    registry.write_text(json.dumps(doc))
    said = []
    for args in (
        ["sessions", "--project", project, "--json"],
        ["show", sid, "--project", project],
        ["projects", "--json"],
    ):
        proc = claude.run(*args)
        _no_traceback(proc)
        assert proc.returncode == 0, (args, proc.stderr)
        said.append(proc.stderr)
    _said_once(said[0], str(registry), "ignoring a registered project's time")  # and stored as unknown
    assert json.loads(proc.stdout)[0]["added"] == 0.0 and "registered project" not in said[2]
    claude.activate(monkeypatch)
    from c3async.serve import session_actions
    from c3async.stores import records

    [rec] = records.load_all(resolve(project))
    assert (rec.started, rec.ended, rec.snapshots[0].ts, rec.events[0].ts) == (0.0, None, 0.0, 0.0)
    caller = session_actions.Caller(resolve(project), "c3-mine", sid, records.new_record("c3-mine", None, project))
    restored = session_actions.restore(caller, session_actions.Restore())
    assert restored.startswith(f"snapshot of {sid} at an unknown time\nplanted snapshot")


@pytest.mark.process
def test_a_clear_hook_reads_past_an_activity_row_of_no_time(claude, project):
    from test_hooks import payload, run_hook

    folder = claude.folder(project)
    old, new = (simple_session(folder, project, prompt) for prompt in ("the old one", "the new one"))
    run_hook(claude, payload("SessionStart", old, project, source="startup"), project=project, pid="5001")
    run_hook(claude, payload("SessionEnd", old, project, reason="clear"), project=project, pid="5001")
    with open(Path(project, ".c3", "activity.jsonl"), "ab") as f:
        f.write(b'{"ts": ' + b"9" * 400 + b', "kind": "hook"}\n{"ts": 1e400, "kind": "hook"}\n')
    proc, _ = run_hook(claude, payload("SessionStart", new, project, source="clear"), project=project, pid="5001")
    assert proc.returncode == 0 and not (claude.c3home / "hook-errors.log").exists(), proc.stderr
    start = json.loads(Path(project, ".c3", "activity.jsonl").read_bytes().splitlines()[-1])
    assert (start["session_id"], start["predecessor"]) == (new, old)
