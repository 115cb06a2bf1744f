"""The status line: Claude Code's rate limits recorded (one line per change, shared by every
window, bounded), the line it prints (a note, who waits elsewhere, the binding window), your own
status line run first, install-statusline and its removal, and `live --watch`'s changes."""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_live_registry import registry_file

from c3async.cli.watch import changes
from c3async.ground.errors import Damaged, Refused
from c3async.live.hooks import settings_path
from c3async.live.statusline import install, ours, uninstall
from c3async.statusline import age, line
from c3async.usage import ratelimits
from stress.transcripts import simple_session

pytestmark = pytest.mark.process

NOW = time.time()
RESET = int(NOW) + 3600


def status(sid: str | None = None, cwd: str | None = None, five: float | None = 42, week: float | None = 12, **more):
    limits = {}
    if five is not None:
        limits["five_hour"] = {"used_percentage": five, "resets_at": RESET}
    if week is not None:
        limits["seven_day"] = {"used_percentage": week, "resets_at": RESET + 86_400}
    payload = {"session_id": sid or "11111111-2222-4333-8444-555555555555", "cwd": cwd or "/nowhere", **more}
    if limits:
        payload["rate_limits"] = limits
    return json.dumps(payload).encode()


def log_lines(claude) -> list[dict]:
    path = claude.c3home / "usage" / "rate_limits.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_each_change_is_one_line_and_ten_windows_refreshing_write_none(claude, monkeypatch):
    claude.activate(monkeypatch)
    for _ in range(10):
        line(status(), dict(os.environ), NOW)
    rows = log_lines(claude)
    assert [(r["window"], r["used"], r["resets_at"]) for r in rows] == [
        ("five_hour", 42.0, RESET),
        ("seven_day", 12.0, RESET + 86_400),
    ]
    assert set(rows[0]) == {"t", "window", "used", "resets_at"}
    line(status(five=43.5), dict(os.environ), NOW + 60)
    rows = log_lines(claude)
    assert len(rows) == 3 and rows[-1]["window"] == "five_hour" and rows[-1]["used"] == 43.5
    path = claude.c3home / "usage" / "rate_limits.jsonl"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert ratelimits.current(NOW + 60)["five_hour"].used == 43.5


def test_values_out_of_range_are_left_out(claude, monkeypatch):
    claude.activate(monkeypatch)
    bad = [1e308, -1, float("nan"), True, "42", None]
    for used in bad:
        assert (
            ratelimits.from_status({"rate_limits": {"five_hour": {"used_percentage": used, "resets_at": RESET}}}, NOW)
            == []
        )
    year_3000 = 32_503_680_000
    for reset in (year_3000, NOW - 86_400, NOW + 7 * 3600, 10**400):
        assert (
            ratelimits.from_status({"rate_limits": {"five_hour": {"used_percentage": 5, "resets_at": reset}}}, NOW)
            == []
        )
    assert (
        ratelimits.from_status({"rate_limits": {"five_hour\x1b]0;x": {"used_percentage": 5, "resets_at": RESET}}}, NOW)
        == []
    )
    assert ratelimits.from_status({"rate_limits": [1, 2]}, NOW) == []
    # A week's reset is in reach of the weekly windows only.
    assert ratelimits.from_status(
        {"rate_limits": {"seven_day": {"used_percentage": 5, "resets_at": NOW + 6 * 86_400}}}, NOW
    )


def test_the_line_shows_the_note_who_waits_elsewhere_and_the_binding_window(claude, monkeypatch, sleepers):
    claude.activate(monkeypatch)
    proj = claude.project("app")
    me = simple_session(claude.folder(proj), proj, "wire the status line")
    assert claude.run("mark", "note", me, "--summary", "parser done\x1b]0;owned\x07", "--project", proj).returncode == 0
    other = [claude.project(f"billing-api-{i}") for i in range(3)]
    since = (NOW - 240) * 1000
    registry_file(
        claude.config, sleepers[0], "aaaaaaaa-0000-4000-8000-000000000001", other[0], status="waiting", since_ms=since
    )
    registry_file(
        claude.config,
        sleepers[1],
        "aaaaaaaa-0000-4000-8000-000000000002",
        other[1],
        status="waiting",
        since_ms=since + 60_000,
    )
    registry_file(claude.config, sleepers[2], me, proj, status="waiting", since_ms=since - 600_000)  # this window
    text = line(status(me, proj, five=81, week=12), dict(os.environ), NOW)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    assert plain.startswith("note: parser done\\x1b]0;owned\\x07 · 2 waiting · billing-api-0 4m · 5h 81% · resets ")
    assert "\x1b]" not in text and "\x07" not in text
    # The weekly window binds when it is nearer its limit.
    assert "7d \x1b[31m95%" in line(status(me, proj, five=10, week=95), dict(os.environ), NOW)


def test_without_rate_limits_in_the_json_the_recorded_ones_are_shown(claude, monkeypatch):
    claude.activate(monkeypatch)
    line(status(five=55), dict(os.environ), NOW)
    assert "5h" in line(status(five=None, week=None), dict(os.environ), NOW + 10)
    # past its reset, a window is gone until Claude Code reports it again
    assert "5h" not in line(status(five=None, week=None), dict(os.environ), RESET + 10)


def test_an_idle_window_holding_an_older_percent_neither_records_it_nor_shows_it(claude, monkeypatch):
    """Each Claude Code process holds the percent of its own last response: a window idle since
    55% refreshes its line after another saw 61%."""
    claude.activate(monkeypatch)
    line(status(five=61), dict(os.environ), NOW)
    assert "5h \x1b[33m61%" in line(status(five=55), dict(os.environ), NOW + 10)
    assert "5h \x1b[33m61%" in line(status(five=60.9), dict(os.environ), NOW + 20)
    assert [r["used"] for r in log_lines(claude) if r["window"] == "five_hour"] == [61.0]
    # a window that reset: a lower percent of a later reset is news
    later = json.loads(status(five=3))
    later["rate_limits"]["five_hour"]["resets_at"] = RESET + 5 * 3600
    assert "61%" not in line(json.dumps(later).encode(), dict(os.environ), NOW + 30)  # the weekly binds now
    # and a percent of an earlier window than the last recorded is old news
    line(status(five=80), dict(os.environ), NOW + 40)
    assert [r["used"] for r in log_lines(claude) if r["window"] == "five_hour"] == [61.0, 3.0]


def test_a_usage_snapshot_in_claude_json_gives_the_per_model_weeklies(claude, monkeypatch):
    claude.activate(monkeypatch)
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW + 3 * 86_400))
    (claude.config / ".claude.json").write_text(
        json.dumps(
            {
                "cachedUsageUtilization": {
                    "fetchedAtMs": (NOW - 30) * 1000,
                    "accountUuid": "x",
                    "utilization": {"seven_day_opus": {"utilization": 97, "resets_at": iso}, "extra_usage": None},
                }
            }
        )
    )
    assert "7d opus \x1b[31m97%" in line(status(five=40, week=20), dict(os.environ), NOW)
    assert {r["window"] for r in log_lines(claude)} == {"five_hour", "seven_day", "seven_day_opus"}


def _snapshot(used: float, fetched: float = NOW - 30) -> dict:
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW + 3 * 86_400))
    return {"fetchedAtMs": fetched * 1000, "utilization": {"seven_day_opus": {"utilization": used, "resets_at": iso}}}


def _claude_json(claude, before: bytes, snapshot: dict, after: bytes = b"") -> Path:
    """A .claude.json as Claude Code writes it (indented), the snapshot between ``before``'s
    projects and ``after``."""
    path = claude.config / ".claude.json"
    body = json.dumps({"cachedUsageUtilization": snapshot}, indent=2).encode()[1:-1]
    path.write_bytes(b'{\n  "projects": "' + before + b'",' + body + after + b"}\n")
    return path


def test_the_snapshot_is_found_in_a_many_mb_claude_json_without_decoding_it_whole(claude, monkeypatch):
    claude.activate(monkeypatch)
    # 20 MB before it, and before it the key's text inside a string and in another key: no key
    noise = b"x" * (20 << 20) + b'\\"cachedUsageUtilization\\": {}", "k\\"cachedUsageUtilization": 5, "z": "'
    path = _claude_json(claude, noise, _snapshot(97))
    assert json.loads(path.read_bytes())['k"cachedUsageUtilization'] == 5
    assert [(s.window, s.used) for s in ratelimits.from_snapshot(str(path), NOW)] == [("seven_day_opus", 97.0)]
    assert "7d opus \x1b[31m97%" in line(status(five=40, week=20), dict(os.environ), NOW)
    # read again only when the file moved: the same stat (size, mtime) is not read again
    st = path.stat()
    _claude_json(claude, noise, _snapshot(98))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    line(status(five=40, week=20), dict(os.environ), NOW)
    assert [r["used"] for r in log_lines(claude) if r["window"] == "seven_day_opus"] == [97.0]
    _claude_json(claude, noise, _snapshot(99.5))
    line(status(five=40, week=20), dict(os.environ), NOW)
    assert [r["used"] for r in log_lines(claude) if r["window"] == "seven_day_opus"] == [97.0, 99.5]


@pytest.mark.parametrize(
    "before, snapshot",
    [
        (b"x" * ratelimits.MAX_SNAPSHOT, _snapshot(97)),  # past the part searched
        (b"", {**_snapshot(97), "pad": "y" * ratelimits.SNAPSHOT_BYTES}),  # longer than a snapshot is read
        (b"", _snapshot(100.5)),  # a percent out of range
        (b"", _snapshot(97, fetched=NOW + 86_400)),  # fetched tomorrow
        (b"", {"fetchedAtMs": "soon", "utilization": []}),
    ],
    ids=["far", "long", "percent", "future", "kinds"],
)
def test_a_snapshot_out_of_reach_or_range_gives_nothing(claude, before, snapshot):
    path = _claude_json(claude, before, snapshot)
    assert ratelimits.from_snapshot(str(path), NOW) == []


def test_a_log_past_its_bound_keeps_its_newest_lines(claude, monkeypatch):
    claude.activate(monkeypatch)
    path = ratelimits.log_path()
    path.parent.mkdir(parents=True)
    old = json.dumps({"t": NOW - 10, "window": "five_hour", "used": 1.0, "resets_at": RESET}) + "\n"
    path.write_bytes(old.encode() * (ratelimits.MAX_BYTES // len(old) + 10))
    assert ratelimits.record(ratelimits.from_status(json.loads(status(five=2)), NOW), NOW) == 2
    size = path.stat().st_size
    assert ratelimits.KEEP_BYTES - 200 < size <= ratelimits.KEEP_BYTES + 200
    assert {s.window: s.used for s in ratelimits.read_samples(path, NOW)[-2:]} == {"five_hour": 2.0, "seven_day": 12.0}


WRITER = """
import sys
from c3async.usage import ratelimits
now, reset, me = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
for _ in range(40):  # every window sees the same numbers, and one of its own
    ratelimits.record([ratelimits.Sample(now, "five_hour", 42.0, reset),
                       ratelimits.Sample(now, "seven_day_w" + me, 10.0, reset)], now)
"""


def test_windows_appending_at_once_write_each_change_once(claude):
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(NOW), str(RESET), str(i)], env=claude.env())
        for i in range(6)
    ]
    assert [p.wait(60) for p in procs] == [0] * 6
    rows = log_lines(claude)  # every line whole (json.loads), each window once
    assert sorted(r["window"] for r in rows) == ["five_hour", *(f"seven_day_w{i}" for i in range(6))]


def run_statusline(claude, *args: str, data: bytes, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "c3async", "statusline", *args],
        input=data,
        capture_output=True,
        env=env or claude.env(),
        timeout=60,
        cwd=claude.root,
    )


def test_bad_input_never_breaks_the_line(claude):
    for data in (
        b"",
        b"not json",
        b"[1, 2]",
        b"{" * 100_000,
        b"\xff\xfe",
        os.urandom(4096),
        b'{"session_id": "x", "rate_limits": {"five_hour": {"used_percentage": 1e999}}}',
    ):
        proc = run_statusline(claude, data=data)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr.decode(), proc.stderr
        assert len(proc.stdout.decode().splitlines()) == 1
    proc = run_statusline(claude, data=b" " * (2 << 20))
    assert (proc.returncode, proc.stdout) == (0, b"c3async: status input too large\n")
    assert run_statusline(claude, data=status(), env=claude.env(NO_COLOR="1")).stdout.decode().startswith("5h 42%")


def test_your_status_line_runs_first_on_the_same_input_with_a_time_limit(claude):
    proc = run_statusline(
        claude,
        "--then",
        'python3 -c \'import sys,json; print("mine", json.load(sys.stdin)["cwd"])\'',
        data=status(cwd="/x"),
    )
    assert proc.stdout.decode().splitlines()[0] == "mine /x"
    assert "5h" in proc.stdout.decode().splitlines()[1]
    hung = run_statusline(claude, "--then", "echo early; sleep 30", data=status())
    assert hung.returncode == 0 and hung.stdout.decode().splitlines()[0] == "early"
    flood = run_statusline(claude, "--then", "yes 0123456789", data=status())
    rows = flood.stdout.decode().splitlines()
    assert len(rows) <= 9 and "5h" in rows[-1]


def test_install_over_yours_and_remove_leaves_the_file_byte_identical(claude, monkeypatch):
    claude.activate(monkeypatch)
    target = settings_path(None, user=True)
    before = (
        b'{\n    "model": "opus",\n    "statusLine": {"type": "command", "command": "~/bin/line.sh", "padding": 1}\n}\n'
    )
    target.path.write_bytes(before)
    assert "after yours" in install(target)
    set_ = json.loads(target.path.read_text())["statusLine"]
    assert ours(set_["command"]) == ("~/bin/line.sh", True)
    assert (set_["padding"], set_["refreshInterval"]) == (1, 10)
    assert "already" in install(target)
    uninstall(target)
    assert target.path.read_bytes() == before
    # changed meanwhile: yours back, the other change kept
    install(target)
    settings = json.loads(target.path.read_text())
    settings["theme"] = "dark"
    target.path.write_text(json.dumps(settings))
    uninstall(target)
    assert json.loads(target.path.read_text()) == {**json.loads(before), "theme": "dark"}


def test_install_without_a_file_and_remove_leaves_none(claude, monkeypatch):
    claude.activate(monkeypatch)
    proj = claude.project("app")
    target = settings_path(proj, user=False)
    install(target)
    assert ours(json.loads(target.path.read_text())["statusLine"]["command"]) == (None, True)
    uninstall(target)
    assert not (Path(proj) / ".claude").exists()


def test_links_and_damaged_settings_are_refused_and_left_alone(claude, monkeypatch, tmp_path):
    claude.activate(monkeypatch)
    target = settings_path(None, user=True)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("{}")
    target.path.symlink_to(elsewhere)
    with pytest.raises(Refused):
        install(target)
    assert elsewhere.read_text() == "{}"
    target.path.unlink()
    target.path.write_text("{not json")
    with pytest.raises(Damaged):
        install(target)
    assert target.path.read_text() == "{not json"
    target.path.write_text('{"statusLine": "a string"}')
    with pytest.raises(Damaged):
        install(target)
    # a person's own settings.json.bak is never touched
    target.path.write_text("{}")
    mine = target.path.with_name("settings.json.bak")
    mine.write_text("mine")
    install(target)
    uninstall(target)
    assert mine.read_text() == "mine"


def test_a_command_that_mentions_c3async_is_not_taken_for_ours():
    assert ours("echo 'c3async statusline'") is None
    assert ours("python -m c3async statusline --then 'x' --other") is None
    assert ours("/usr/bin/python3 -P -m c3async statusline --then 'a b' --refresh-added") == ("a b", True)


def test_ages_and_watch_changes():
    assert [age(s) for s in (5, 240, 3900, 200_000)] == ["5s", "4m", "1h05m", "2d"]
    before = {"a" * 36: ("busy", "api"), "b" * 36: ("idle", "web")}
    after = {"a" * 36: ("waiting", "api"), "c" * 36: ("busy", "cli")}
    assert changes(before, after) == [
        "waiting for you: api (aaaaaaaa)",
        "started, busy: cli (cccccccc)",
        "ended: web (bbbbbbbb)",
    ]


def test_live_watch_prints_changes_as_lines_when_not_a_terminal(claude, sleeper):
    proj = claude.project("app")
    sid = simple_session(claude.folder(proj), proj, "answer the reviewer")
    registry_file(claude.config, sleeper.pid, sid, proj, status="busy")
    with subprocess.Popen(
        [sys.executable, "-m", "c3async", "live", "--all", "--watch", "--project", proj],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=claude.env(),
        cwd=proj,
        text=True,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        try:
            assert "busy: answer the reviewer" in proc.stdout.readline()
            registry_file(claude.config, sleeper.pid, sid, proj, status="waiting")
            assert "waiting for you: answer the reviewer" in proc.stdout.readline()
        finally:
            proc.send_signal(2)
            assert proc.wait(10) == 130
        assert "Traceback" not in proc.stderr.read()


def installed(claude, *args: str, data: bytes, cwd: str) -> subprocess.CompletedProcess:
    """The command install-statusline writes, run as Claude Code runs it (``/bin/sh -c``)."""
    from c3async.live.statusline import statusline_command

    command = statusline_command()
    assert ours(command) == (None, False)
    return subprocess.run(
        ["/bin/sh", "-c", " ".join([command, *args])],
        input=data,
        capture_output=True,
        env=claude.env(NO_COLOR="1"),
        timeout=60,
        cwd=cwd,
    )


def imported(claude, data: bytes, cwd: str) -> set[str]:
    from c3async.live.statusline import statusline_command

    argv = shlex.split(statusline_command())
    proc = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]], input=data, capture_output=True, env=claude.env(), cwd=cwd, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return {
        row.rsplit("|", 1)[1].strip() for row in proc.stderr.decode().splitlines() if row.startswith("import time:")
    }


def test_the_installed_command_shows_the_note_and_reads_it_again_only_when_the_marks_change(claude, sleepers):
    proj = claude.project("app")
    me = simple_session(claude.folder(proj), proj, "wire the status line")
    assert claude.run("mark", "note", me, "--summary", "first", "--project", proj).returncode == 0
    registry_file(
        claude.config,
        sleepers[0],
        "aaaaaaaa-0000-4000-8000-000000000001",
        claude.project("api"),
        status="waiting",
        since_ms=(time.time() - 240) * 1000,
    )
    # A cloned repository's modules in the folder it runs in are never imported (-I).
    Path(proj, "json.py").write_text("raise SystemExit('planted')\n")
    first = installed(claude, data=status(me, proj), cwd=proj)
    assert first.returncode == 0 and first.stderr == b"", first.stderr
    assert first.stdout.decode().startswith("note: first · 1 waiting · api 4m · 5h 42% · resets ")
    cache = claude.c3home / "cache" / "statusline_marks.json"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    # The common case, as every window refreshes: the standard library only, nothing of the rest.
    again = imported(claude, status(me, proj), proj)
    assert "c3async.sessions.statusline" in again
    heavy = {"pathlib", "logging", "dataclasses", "typing", "msgspec", "c3async.stores.marks", "c3async.ground.safefs"}
    assert not again & heavy, again & heavy
    # A new note moves the marks log: read again, shown at once.
    assert claude.run("mark", "note", me, "--summary", "second", "--project", proj).returncode == 0
    assert installed(claude, data=status(me, proj), cwd=proj).stdout.decode().startswith("note: second · ")
    # Another window of the project, without a note; a folder c3async was never used in.
    other = "11111111-2222-4333-8444-555555555555"
    assert installed(claude, data=status(other, proj), cwd=proj).stdout.decode().startswith("1 waiting · ")
    elsewhere = claude.project("never-used")
    assert installed(claude, data=status(other, elsewhere), cwd=elsewhere).stdout.decode().startswith("1 waiting")
    assert not (Path(elsewhere) / ".c3").exists()
    assert "c3async.stores.marks" not in imported(claude, status(other, elsewhere), elsewhere)


def test_a_marks_cache_that_lies_is_read_again_and_one_that_is_a_link_is_not_followed(claude, tmp_path):
    proj = claude.project("app")
    me = simple_session(claude.folder(proj), proj, "wire the status line")
    assert claude.run("mark", "note", me, "--summary", "the truth", "--project", proj).returncode == 0
    cache = claude.c3home / "cache" / "statusline_marks.json"
    assert installed(claude, data=status(me, proj), cwd=proj).stdout.decode().startswith("note: the truth")
    held = json.loads(cache.read_text())
    for marks in ({me: ["note", 42]}, {me: ["owned", "x"]}, {me: ["note", "x" * 100_000]}, {me: "note"}, []):
        held["folders"][proj]["marks"] = marks
        cache.write_text(json.dumps(held))
        assert installed(claude, data=status(me, proj), cwd=proj).stdout.decode().startswith("note: the truth")
    for garbage in (b"{not json", b"[" * 100_000, b"\0" * (2 << 20)):
        cache.write_bytes(garbage)
        shown = installed(claude, data=status(me, proj), cwd=proj)
        assert shown.stdout.decode().startswith("note: the truth") and shown.stderr == b""
    decoy = tmp_path / "decoy.json"
    decoy.write_text(json.dumps({"v": 1, "folders": {proj: {"git": None, "logs": [["/nowhere", None]], "marks": {}}}}))
    cache.unlink()
    cache.symlink_to(decoy)
    assert installed(claude, data=status(me, proj), cwd=proj).stdout.decode().startswith("note: the truth")
    assert not cache.is_symlink() and decoy.read_text().startswith('{"v": 1, "folders": {"' + proj + '": {"git": null')
