"""Liveness v2: heartbeat files, the reader that trusts their timestamps and prunes dead ones, the
activity-log fallback, the catalog join, the writer loop, and which host session / IDE a server
serves. Real files and, where races or other processes matter, real processes."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from c3async.ground.project import resolve
from c3async.live import heartbeat as hbmod
from c3async.live.heartbeat import HeartbeatWriter, boot_id, live_dir
from c3async.live.identity import HostIdentity, detect_ide
from c3async.live.reader import ACTIVITY_WINDOW_S, _prune, live_sessions
from c3async.stores import activity
from stress.transcripts import simple_session

SPEC_FIELDS = {"session_id", "host_session_id", "ide", "pid", "ts"}
IDES = {"vscode", "cursor", "windsurf", "jetbrains", "zed", "terminal", "unknown"}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, claude) -> None:
    """In-process calls see the sandbox and the default intervals, whatever the runner's env."""
    for name in ("C3_HEARTBEAT_TTL_S", "C3_HEARTBEAT_INTERVAL_S", "CLAUDE_CODE_SESSION_ID", "CLAUDE_PROJECT_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude.config))
    monkeypatch.setenv("C3_HOME", str(claude.c3home))


def hb_name(name: str) -> str:
    """Heartbeat files are named by the C3 session's uuid; only such names are ever pruned."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


def write_hb(
    project: str,
    name: str,
    *,
    host: str | None = "host-1",
    ts: float | None = None,
    ide: str = "vscode",
    pid: int | None = None,
    **extra,
) -> Path:
    """A heartbeat file as an MCP process (or an older C3 without boot_id/mono) leaves it."""
    folder = live_dir(resolve(project))
    folder.mkdir(parents=True, exist_ok=True)
    data = {
        "session_id": name,
        "host_session_id": host,
        "ide": ide,
        "pid": os.getpid() if pid is None else pid,
        "ts": time.time() if ts is None else ts,
        **extra,
    }
    path = folder / f"{hb_name(name)}.json"
    path.write_text(json.dumps(data))
    return path


def write_rows(project: str, rows: list[dict]) -> None:
    """Activity rows with chosen timestamps, one line each (as jsonl.append writes them)."""
    path = activity.activity_path(resolve(project))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        f.write(b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in rows))


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def proc_start(pid: int) -> int:
    data = Path(f"/proc/{pid}/stat").read_bytes()
    return int(data[data.rindex(b")") + 2 :].split()[19])  # field 22


# --- the reader ------------------------------------------------------------------------------


def test_fresh_heartbeat_is_live(claude) -> None:
    proj = claude.project("app")
    path = write_hb(proj, "c3-a", host="h1", ide="vscode", pid=1234)
    live = live_sessions(resolve(proj))
    assert set(live) == {"h1"}
    entry = live["h1"]
    assert entry.live and entry.source == "heartbeat" and entry.mcp_count == 1
    assert entry.ides == ["vscode"] and entry.pids == [1234] and entry.c3_sessions == ["c3-a"]
    assert path.exists()


def test_old_heartbeat_is_dead_and_pruned(claude, monkeypatch) -> None:
    proj = claude.project("app")
    now = time.time()
    dead = write_hb(proj, "c3-dead", host="h-dead", ts=now - 181)  # default TTL is 180 s
    alive = write_hb(proj, "c3-alive", host="h-alive", ts=now - 170)
    assert set(live_sessions(resolve(proj))) == {"h-alive"}
    assert not dead.exists() and alive.exists()

    monkeypatch.setenv("C3_HEARTBEAT_TTL_S", "30")
    dead2 = write_hb(proj, "c3-dead2", host="h-dead2", ts=now - 31)
    young = write_hb(proj, "c3-young", host="h-young", ts=time.time() - 20)
    live = live_sessions(resolve(proj))
    assert "h-dead2" not in live and "h-alive" not in live and "h-young" in live
    assert not dead2.exists() and not alive.exists() and young.exists()


def test_an_older_writers_file_and_a_bad_ttl_setting(claude, monkeypatch) -> None:
    """Only the five spec fields, an integer ts, unknown extra fields: still a heartbeat. A TTL
    setting that is not a positive number falls back to the default."""
    proj = claude.project("app")
    folder = live_dir(resolve(proj))
    folder.mkdir(parents=True)
    (folder / "c3-old.json").write_text(
        json.dumps(
            {
                "session_id": "c3-old",
                "host_session_id": "h-old",
                "ide": "terminal",
                "pid": 99,
                "ts": int(time.time()) - 100,
                "future_field": {"x": 1},
            }
        )
    )
    for bad in ("abc", "0", "-5", ""):
        monkeypatch.setenv("C3_HEARTBEAT_TTL_S", bad)
        assert set(live_sessions(resolve(proj))) == {"h-old"}, bad
    assert (folder / "c3-old.json").exists()


def test_far_future_heartbeat_is_not_live_and_pruned(claude) -> None:
    proj = claude.project("app")
    future = write_hb(proj, "c3-future", host="h-future", ts=time.time() + 10 * 86400)
    assert live_sessions(resolve(proj)) == {}
    assert not future.exists()


def test_same_boot_monotonic_age_beats_the_wall_clock(claude) -> None:
    proj = claude.project("app")
    me = boot_id()
    assert me, "this test needs /proc/sys/kernel/random/boot_id"
    now, mono = time.time(), time.monotonic()
    # A wall-clock step made a live file look an hour old: the monotonic reading says fresh.
    stepped = write_hb(proj, "c3-stepped", host="h-stepped", ts=now - 3600, boot_id=me, mono=mono)
    # The reverse: wall clock says fresh, the monotonic clock says it stopped beating long ago.
    stopped = write_hb(proj, "c3-stopped", host="h-stopped", ts=now, boot_id=me, mono=mono - 3600)
    # Written before a reboot: its monotonic reading means nothing here, the wall clock decides.
    other_boot = write_hb(proj, "c3-other", host="h-other", ts=now, boot_id="another-boot", mono=mono - 1e6)
    live = live_sessions(resolve(proj))
    assert set(live) == {"h-stepped", "h-other"}
    assert stepped.exists() and other_boot.exists() and not stopped.exists()


def test_unreadable_files_are_ignored_and_pruned_only_after_the_ttl(claude) -> None:
    proj = claude.project("app")
    folder = live_dir(resolve(proj))
    folder.mkdir(parents=True)
    bad = {
        "garbage": b"\x00\xff not json at all",
        "empty": b"",
        "partial": b'{"session_id": "c3-p", "host_session_id": "h-p", "ide": "vscode", "ts": ',
        "wrongtype": b'{"session_id": 1, "host_session_id": null, "ide": "x", "pid": 1, "ts": "now"}',
        "array": b"[1, 2, 3]",
        "null": b"null",
        "deep": b"[" * 100_000 + b"]" * 100_000,
    }
    bad = {f"{hb_name(k)}.json": v for k, v in bad.items()}
    # Not a name c3async gives a heartbeat: read if it is one, never deleted however old.
    foreign = {
        "notes.json": b"not ours",
        "dead-but-foreign.json": json.dumps(
            {"session_id": "x", "host_session_id": "h-x", "ide": "vscode", "pid": 1, "ts": time.time() - 10_000}
        ).encode(),
    }
    for name, data in {**bad, **foreign}.items():
        (folder / name).write_bytes(data)
    good = write_hb(proj, "c3-good", host="h-good")
    live = live_sessions(resolve(proj))
    assert set(live) == {"h-good"}
    assert {p.name for p in folder.iterdir()} == set(bad) | set(foreign) | {good.name}  # young: maybe a write in flight

    old = time.time() - 200
    for name in {**bad, **foreign}:
        os.utime(folder / name, (old, old))
    os.utime(good, (old, old))  # a good file is judged by its ts, never by its mtime
    assert set(live_sessions(resolve(proj))) == {"h-good"}
    assert {p.name for p in folder.iterdir()} == {good.name} | set(foreign)


def test_dot_files_are_ignored(claude) -> None:
    proj = claude.project("app")
    folder = live_dir(resolve(proj))
    folder.mkdir(parents=True)
    hb = {"session_id": "c3-tmp", "host_session_id": "h-tmp", "ide": "vscode", "pid": 1, "ts": time.time()}
    tmp = folder / ".c3-tmp.json.x1y2.tmp"  # write_atomic's temp file
    hidden = folder / ".c3-hidden.json"
    for path in (tmp, hidden):
        path.write_text(json.dumps(hb))
    stale_hidden = folder / ".prune.1.abc.c3-old.json"
    stale_hidden.write_text(json.dumps({**hb, "ts": time.time() - 10_000}))
    assert live_sessions(resolve(proj)) == {}
    assert tmp.exists() and hidden.exists() and stale_hidden.exists()


def test_no_live_dir_means_no_live_sessions(claude) -> None:
    proj = claude.project("app")
    assert live_sessions(resolve(proj)) == {}
    assert not (Path(proj) / ".c3").exists()  # reading creates nothing
    (Path(proj) / ".c3").mkdir()
    assert live_sessions(resolve(proj)) == {}
    assert live_sessions(resolve(str(Path(proj) / "does-not-exist"))) == {}


def test_two_mcp_processes_for_one_host_session(claude) -> None:
    proj = claude.project("app")
    write_hb(proj, "c3-one", host="shared", ide="vscode", pid=101)
    write_hb(proj, "c3-two", host="shared", ide="cursor", pid=202)
    write_hb(proj, "c3-three", host="alone", ide="terminal", pid=303)
    live = live_sessions(resolve(proj))
    assert set(live) == {"shared", "alone"}
    assert live["shared"].mcp_count == 2
    assert sorted(live["shared"].ides) == ["cursor", "vscode"]
    assert sorted(live["shared"].pids) == [101, 202]
    assert sorted(live["shared"].c3_sessions) == ["c3-one", "c3-two"]
    assert live["alone"].mcp_count == 1 and live["alone"].ides == ["terminal"]


def test_two_servers_under_one_claude_process_count_once(claude) -> None:
    """The plugin's server and one added by hand, in one window: one MCP connection of it."""
    proj = claude.project("app")
    write_hb(proj, "c3-plugin", host="shared", pid=101, host_pid=900)
    write_hb(proj, "c3-by-hand", host="shared", pid=102, host_pid=900)
    write_hb(proj, "c3-other-window", host="shared", pid=103, host_pid=901)
    write_hb(proj, "c3-unverified", host="shared", pid=104)  # no registry file: counted as itself
    live = live_sessions(resolve(proj))
    assert live["shared"].mcp_count == 3
    assert sorted(live["shared"].pids) == [101, 102, 103, 104]


def test_heartbeat_without_host_session_is_reported_under_none(claude) -> None:
    proj = claude.project("app")
    write_hb(proj, "c3-anon", host=None, ide="unknown")
    live = live_sessions(resolve(proj))
    assert set(live) == {None}
    assert live[None].live and live[None].mcp_count == 1 and live[None].host_session_id is None


@pytest.mark.process
def test_liveness_is_the_timestamp_never_the_pid(claude) -> None:
    proj = claude.project("app")
    gone = dead_pid()
    assert not Path(f"/proc/{gone}").exists()
    fresh_dead_pid = write_hb(proj, "c3-fresh", host="h-fresh", pid=gone)
    stale_live_pid = write_hb(proj, "c3-stale", host="h-stale", pid=os.getpid(), ts=time.time() - 1000)
    live = live_sessions(resolve(proj))
    assert set(live) == {"h-fresh"}
    assert live["h-fresh"].pids == [gone]
    assert fresh_dead_pid.exists() and not stale_live_pid.exists()


def test_prune_never_removes_a_file_that_turned_out_fresh(claude) -> None:
    """The reader decided "stale", then the writer beat before the prune: it must stay."""
    proj = claude.project("app")
    path = write_hb(proj, "c3-raced", host="h")
    before = path.read_bytes()
    _prune(path, hbmod.ttl())
    assert path.read_bytes() == before
    assert [p.name for p in live_dir(resolve(proj)).iterdir()] == [path.name]  # no aside copy left
    stale = write_hb(proj, "c3-stale", host="h2", ts=time.time() - 1000)
    _prune(stale, hbmod.ttl())
    assert [p.name for p in live_dir(resolve(proj)).iterdir()] == [path.name]
    _prune(stale, hbmod.ttl())  # gone already (another reader pruned it): no error


READER = textwrap.dedent("""
    import os, sys, time, traceback
    from pathlib import Path
    from c3async.ground.project import resolve
    from c3async.live.reader import live_sessions
    project, host, misses, ready, stop = sys.argv[1:6]
    project = resolve(project)
    Path(ready).touch()
    n = 0
    try:
        while not os.path.exists(stop):
            live = live_sessions(project)
            e = live.get(host)
            if e is None or not e.live or e.source != "heartbeat" or e.mcp_count != 1:
                with open(misses, "a") as f:
                    f.write(f"{os.getpid()} {time.time():.3f} {e!r}\\n")
            n += 1
    except BaseException:
        with open(misses, "a") as f:
            f.write(f"{os.getpid()} raised: {traceback.format_exc()}\\n")
        raise
    print(n)
""")

WRITER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from c3async.ground.project import resolve
    from c3async.live.heartbeat import HeartbeatWriter
    project, host, ready, stop = sys.argv[1:5]
    w = HeartbeatWriter(resolve(project), "00000000-0000-4000-8000-00000000feed", "terminal", lambda: host)
    w.beat()
    Path(ready).touch()
    n = 1
    while not os.path.exists(stop):
        time.sleep(0.05)
        w.beat()
        n += 1
    print(n)
""")

STALE_MAKER = textwrap.dedent("""
    import json, os, sys, time, uuid
    from pathlib import Path
    project, host, ready, stop = sys.argv[1:5]
    folder = Path(project) / ".c3" / "live"
    Path(ready).touch()
    n = 0
    while not os.path.exists(stop):
        n += 1
        name = f"{uuid.uuid4()}.json"
        hb = {"session_id": f"zombie-{n}", "host_session_id": host if n % 2 else "other",
              "ide": "vscode", "pid": os.getpid(), "ts": time.time() - 3600}
        tmp = folder / f".{name}.tmp"
        tmp.write_text(json.dumps(hb))
        os.replace(tmp, folder / name)  # a crashed server's last beat, whole
        time.sleep(0.01)
    print(n)
""")


@pytest.mark.process
def test_concurrent_readers_prune_safely_while_a_writer_beats(claude, tmp_path) -> None:
    proj = claude.project("app")
    host = "host-under-load"
    folder = live_dir(resolve(proj))
    folder.mkdir(parents=True)
    old = time.time() - 3600
    stale = [write_hb(proj, f"stale-{i}", host=host if i % 2 else "h-old", ts=old) for i in range(12)]
    for i in range(3):  # unreadable leftovers, untouched for an hour
        junk = folder / f"{hb_name(f'junk-{i}')}.json"
        junk.write_bytes(b'{"session_id": "j", "ts": ')
        os.utime(junk, (old, old))
    ctl = tmp_path / "ctl"
    ctl.mkdir()
    misses, stop, stale_stop = ctl / "misses.txt", ctl / "stop", ctl / "stale-stop"
    env = claude.env()

    def spawn(script: str, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-c", script, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    writer = spawn(WRITER, proj, host, str(ctl / "writer.ready"), str(stop))
    procs = [writer]
    try:
        deadline = time.monotonic() + 30
        while not (ctl / "writer.ready").exists():
            assert writer.poll() is None, writer.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        readers = [spawn(READER, proj, host, str(misses), str(ctl / f"r{i}.ready"), str(stop)) for i in range(8)]
        maker = spawn(STALE_MAKER, proj, host, str(ctl / "maker.ready"), str(stale_stop))
        procs += [*readers, maker]
        while not all((ctl / f"r{i}.ready").exists() for i in range(8)) or not (ctl / "maker.ready").exists():
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs if p.poll() is not None]
            assert time.monotonic() < deadline, "processes did not start"
            time.sleep(0.02)
        time.sleep(1.6)
        stale_stop.touch()  # the zombies stop appearing; readers keep going and prune the rest
        maker_out = maker.communicate(timeout=30)
        assert maker.returncode == 0, maker_out[1]
        fresh = ["00000000-0000-4000-8000-00000000feed.json"]
        deadline = time.monotonic() + 30
        while sorted(os.listdir(folder)) != fresh and time.monotonic() < deadline:  # the readers prune the rest
            time.sleep(0.02)
        stop.touch()
        outs = [p.communicate(timeout=60) for p in readers]
        writer_out = writer.communicate(timeout=30)
    finally:
        stop.touch()
        stale_stop.touch()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    assert writer.returncode == 0, writer_out[1]
    assert [p.returncode for p in readers] == [0] * 8, [o[1] for o in outs]
    rounds = [int(o[0]) for o in outs]
    print(f"reader rounds {rounds}, writer beats {writer_out[0].strip()}, zombies made {maker_out[0].strip()}")
    assert all(r >= 1 for r in rounds)
    assert not misses.exists(), misses.read_text()[:3000]
    # The fresh file stays; every stale, junk and zombie file and every aside copy is gone.
    assert sorted(os.listdir(folder)) == ["00000000-0000-4000-8000-00000000feed.json"]
    data = json.loads((folder / "00000000-0000-4000-8000-00000000feed.json").read_text())
    assert data["host_session_id"] == host and time.time() - data["ts"] < 60
    assert all(not p.exists() for p in stale)


# --- the activity-log fallback ---------------------------------------------------------------


def test_session_start_without_end_reads_live_from_the_log(claude) -> None:
    proj = claude.project("app")
    activity.record(resolve(proj), "session_start", session_id="S1", source="startup")
    live = live_sessions(resolve(proj))
    assert set(live) == {"S1"}
    assert live["S1"].live and live["S1"].source == "activity" and live["S1"].mcp_count == 0
    assert live["S1"].ides == [] and live["S1"].pids == []
    activity.record(resolve(proj), "session_end", session_id="S1", reason="prompt_input_exit")
    assert live_sessions(resolve(proj)) == {}
    activity.record(resolve(proj), "session_start", session_id="S1", source="resume")  # claude --resume
    assert set(live_sessions(resolve(proj))) == {"S1"}


@pytest.mark.process
def test_the_log_never_calls_a_session_live_whose_claude_is_gone(claude) -> None:
    """The hook names its claude (CLAUDE_PID): once that process has exited, the session is not
    live, however recent its activity; a pid a newer process took since is not that claude."""
    proj = claude.project("app")
    claude_proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        activity.record(resolve(proj), "session_start", session_id="runs", source="startup", claude_pid=claude_proc.pid)
        activity.record(resolve(proj), "session_start", session_id="nameless", source="startup")  # an older hook
        # The same pid, named by a hook ten minutes before that process started: a pid reused.
        activity.record(resolve(proj), "tool", session_id="reused")
        write_rows(
            proj,
            [{"ts": time.time() - 600, "kind": "session_start", "session_id": "reused", "claude_pid": claude_proc.pid}],
        )
        live = live_sessions(resolve(proj))
        assert live["runs"].source == "activity" and "nameless" in live
        assert "reused" not in live
    finally:
        claude_proc.stdin.close()
        claude_proc.wait()
    live = live_sessions(resolve(proj))
    assert "runs" not in live and "nameless" in live
    proc = claude.run("live", "--project", proj, "--json")
    assert proc.returncode == 0 and "runs" not in {e["id"] for e in json.loads(proc.stdout)}


def test_session_start_older_than_the_window_is_not_live(claude) -> None:
    proj = claude.project("app")
    now = time.time()
    write_rows(
        proj,
        [
            {"ts": now - 21 * 60, "kind": "session_start", "session_id": "quiet"},
            {"ts": now - 30 * 60, "kind": "session_start", "session_id": "busy"},
            {"ts": now - 60, "kind": "tool", "session_id": "busy", "tool": "c3_task"},
        ],
    )
    live = live_sessions(resolve(proj))
    assert set(live) == {"busy"}  # recent activity keeps a started session live
    assert ACTIVITY_WINDOW_S == 20 * 60


def test_a_heartbeat_wins_over_the_log(claude) -> None:
    proj = claude.project("app")
    activity.record(resolve(proj), "session_start", session_id="H")
    activity.record(resolve(proj), "session_start", session_id="L")
    write_hb(proj, "c3-h", host="H", ide="jetbrains")
    live = live_sessions(resolve(proj))
    assert live["H"].source == "heartbeat" and live["H"].mcp_count == 1 and live["H"].ides == ["jetbrains"]
    assert live["L"].source == "activity" and live["L"].mcp_count == 0


@pytest.mark.process
def test_a_session_start_deep_in_a_busy_log_still_reads_live(claude) -> None:
    """The old lookup scanned only the log's last 100 lines."""
    proj = claude.project("app")
    now = time.time()
    rows = [{"ts": now - 600, "kind": "session_start", "session_id": "deep", "source": "startup"}]
    n = 20_000
    for i in range(n):
        ts = now - 600 + 590 * (i + 1) / n
        sid = f"other-{i % 40}"
        if i % 1000 == 0:
            rows.append({"ts": ts, "kind": "session_start", "session_id": f"brief-{i}"})
        elif i % 1000 == 1:
            rows.append({"ts": ts, "kind": "session_end", "session_id": f"brief-{i - 1}", "reason": "other"})
        else:
            rows.append({"ts": ts, "kind": "tool", "session_id": sid, "tool": "c3_sessions"})
    write_rows(proj, rows)
    live = live_sessions(resolve(proj))
    assert "deep" in live and live["deep"].source == "activity"
    assert not any(k.startswith("brief-") for k in live if k)
    proc = claude.run("live", "--project", proj, "--json")
    assert proc.returncode == 0, proc.stderr
    assert "deep" in {e["id"] for e in json.loads(proc.stdout)}


# --- the catalog join ------------------------------------------------------------------------


@pytest.mark.process
def test_catalog_rows_carry_live_and_mcp_count_and_no_hints(claude) -> None:
    proj = claude.project("app")
    folder = claude.folder(proj)
    month_ago = datetime.now(UTC) - timedelta(days=30)
    idle = month_ago.timestamp()
    live_id = simple_session(folder, proj, "Fix the flaky retry test", start=month_ago, mtime=idle)
    quiet_id = simple_session(folder, proj, "Write the changelog", start=month_ago, mtime=idle)
    logged_id = simple_session(folder, proj, "Bump the version", start=month_ago, mtime=idle)
    HeartbeatWriter(resolve(proj), "c3-vscode", "vscode", lambda: live_id).beat()
    HeartbeatWriter(resolve(proj), "c3-cursor", "cursor", lambda: live_id).beat()
    activity.record(resolve(proj), "session_start", session_id=logged_id, source="startup")

    rows = claude.rows_by_id(proj)
    assert rows[live_id]["live"] is True and rows[live_id]["mcp_count"] == 2
    assert rows[live_id]["hints"] == []  # idle for 30 days and short, but live: no hints
    assert rows[logged_id]["live"] is True and rows[logged_id]["mcp_count"] == 0
    assert rows[logged_id]["hints"] == []
    assert rows[quiet_id]["live"] is False and rows[quiet_id]["mcp_count"] == 0
    assert "short" in rows[quiet_id]["hints"] and any(h.startswith("idle ") for h in rows[quiet_id]["hints"])

    assert {r["id"] for r in claude.sessions(proj, "--filter", "live")} == {live_id, logged_id}
    assert {r["id"] for r in claude.sessions(proj, "--filter", "likely")} == {quiet_id}

    proc = claude.run("live", "--project", proj, "--json")
    assert proc.returncode == 0, proc.stderr
    entries = json.loads(proc.stdout)
    assert isinstance(entries, list) and len(entries) == 2
    keys = {
        "id",
        "project",
        "title",
        "branch",
        "cwd",
        "state",
        "state_since",
        "waiting_for",
        "source",
        "mcp_count",
        "ides",
        "pids",
        "c3_sessions",
        "claude_pids",
        "last_seen",
        "resume",
        "tokens_per_h",
        "usd_per_h",
        "window_share",
    }
    assert all(set(e) == keys for e in entries)
    by_id = {e["id"]: e for e in entries}
    hb = by_id[live_id]
    assert hb["mcp_count"] == 2 and hb["source"] == "heartbeat" and hb["project"] == proj
    assert sorted(hb["ides"]) == ["cursor", "vscode"] and hb["pids"] == [os.getpid()] * 2
    assert sorted(hb["c3_sessions"]) == ["c3-cursor", "c3-vscode"]
    assert abs(hb["last_seen"] - time.time()) < 60
    logged = {k: by_id[logged_id][k] for k in ("id", "source", "mcp_count", "ides", "pids", "c3_sessions", "state")}
    assert logged == {
        "id": logged_id,
        "source": "activity",
        "mcp_count": 0,
        "ides": [],
        "pids": [],
        "c3_sessions": [],
        "state": None,
    }  # no registry entry: no state, not a guessed one

    text = claude.run("live", "--project", proj)
    assert text.returncode == 0 and "MCP×2" in text.stdout and live_id in text.stdout


@pytest.mark.process
def test_live_command_with_nothing_live(claude) -> None:
    proj = claude.project("empty")
    proc = claude.run("live", "--project", proj, "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout) == []
    proc = claude.run("live", "--project", proj)
    assert proc.returncode == 0 and proc.stdout == "" and "no live sessions" in proc.stderr


# --- the writer ------------------------------------------------------------------------------


def test_beat_writes_the_spec_fields_atomically(claude) -> None:
    proj = claude.project("app")
    host = {"id": "first"}
    w = HeartbeatWriter(resolve(proj), "c3-w", "vscode", lambda: host["id"])
    before = time.time()
    w.beat()
    assert w.path == live_dir(resolve(proj)) / "c3-w.json"
    assert os.listdir(live_dir(resolve(proj))) == ["c3-w.json"]  # no temp file left beside it
    data = json.loads(w.path.read_text())
    assert set(data) >= SPEC_FIELDS
    assert data["session_id"] == "c3-w" and data["host_session_id"] == "first" and data["ide"] == "vscode"
    assert data["pid"] == os.getpid() and before - 1 <= data["ts"] <= time.time() + 1
    inode = w.path.stat().st_ino
    host["id"] = "after-clear"  # the host is asked again on every beat
    w.beat()
    assert json.loads(w.path.read_text())["host_session_id"] == "after-clear"
    assert w.path.stat().st_ino != inode  # replaced, not rewritten in place
    assert os.listdir(live_dir(resolve(proj))) == ["c3-w.json"]
    assert set(live_sessions(resolve(proj))) == {"after-clear"}


def test_remove_deletes_and_later_beats_write_nothing(claude) -> None:
    proj = claude.project("app")
    w = HeartbeatWriter(resolve(proj), "c3-w", "vscode", lambda: "h")
    w.beat()
    w.remove()
    assert not w.path.exists()
    w.beat()
    assert not w.path.exists()
    w.remove()  # twice: no error
    assert live_sessions(resolve(proj)) == {}


async def test_run_survives_an_unwritable_live_dir(claude, caplog) -> None:
    proj = claude.project("app")
    obstacle = live_dir(resolve(proj))
    obstacle.parent.mkdir(parents=True)
    obstacle.write_text("a file where the live folder should be")
    w = HeartbeatWriter(resolve(proj), "c3-run", "terminal", lambda: "h-run")
    caplog.set_level(logging.WARNING, logger="c3async.live")

    def failures() -> int:
        return sum("heartbeat write failed" in r.getMessage() for r in caplog.records)

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(w.run, 0.02)
            while failures() < 3:  # it logs and keeps going
                await anyio.sleep(0.01)
            obstacle.unlink()
            while not w.path.exists():
                await anyio.sleep(0.01)
            assert json.loads(w.path.read_text())["host_session_id"] == "h-run"
            w.remove()  # a clean shutdown ends the loop by itself
    assert not w.path.exists()
    assert failures() >= 3


# --- which host session, which IDE -----------------------------------------------------------


@pytest.fixture
def child():
    proc = subprocess.Popen(["sleep", "30"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def registry_file(
    claude, pid: int, session_id: str, proc_start: int | str | None, *, file_pid: int | None = None, **extra
) -> Path:
    folder = claude.config / "sessions"
    folder.mkdir(parents=True, exist_ok=True)
    data = {
        "pid": pid if file_pid is None else file_pid,
        "sessionId": session_id,
        "cwd": str(claude.root),
        "startedAt": int(time.time() * 1000),
        "version": "2.1.332",
        "kind": "interactive",
        "entrypoint": "cli",
        "status": "idle",
        **extra,
    }
    if proc_start is not None:
        data["procStart"] = proc_start
    path = folder / f"{pid}.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.process
def test_host_identity_reads_the_parents_registry_file(claude, child) -> None:
    ticks = proc_start(child.pid)
    path = registry_file(claude, child.pid, "from-registry", str(ticks))  # Claude Code writes a string
    ident = HostIdentity(parent_pid=child.pid, env={"CLAUDE_CODE_SESSION_ID": "env-id"})
    assert ident.registry_path() == path
    assert ident.current() == "from-registry" and ident.source == "registry"
    registry_file(claude, child.pid, "after-clear", ticks)  # /clear rewrites sessionId (int form too)
    assert ident.current() == "after-clear"


@pytest.mark.process
def test_host_identity_rejects_a_file_for_another_process(claude, child) -> None:
    ticks = proc_start(child.pid)
    registry_file(claude, child.pid, "reused-pid", str(ticks + 12345))
    ident = HostIdentity(parent_pid=child.pid, env={"CLAUDE_CODE_SESSION_ID": "env-id"})
    assert ident.current() == "env-id" and ident.source == "env"
    registry_file(claude, child.pid, "wrong-pid-field", str(ticks), file_pid=child.pid + 1)
    assert ident.current() == "env-id"
    registry_file(claude, child.pid, "good", str(ticks))
    assert ident.current() == "good"


@pytest.mark.process
def test_host_identity_ignores_a_dead_claudes_leftover_file(claude) -> None:
    proc = subprocess.Popen(["sleep", "30"])
    ticks = proc_start(proc.pid)
    registry_file(claude, proc.pid, "dead-claude", str(ticks))
    proc.kill()
    proc.wait()
    ident = HostIdentity(parent_pid=proc.pid, env={"CLAUDE_CODE_SESSION_ID": "env-id"})
    assert ident.current() == "env-id"


@pytest.mark.process
def test_host_identity_startedat_when_there_is_no_procstart(claude, child) -> None:
    import psutil

    started_ms = psutil.Process(child.pid).create_time() * 1000
    registry_file(claude, child.pid, "by-started-at", None, startedAt=started_ms)
    ident = HostIdentity(parent_pid=child.pid, env={"CLAUDE_CODE_SESSION_ID": "env-id"})
    assert ident.current() == "by-started-at"
    registry_file(claude, child.pid, "started-long-ago", None, startedAt=started_ms - 3_600_000)
    assert ident.current() == "env-id"


@pytest.mark.process
def test_host_identity_falls_back_to_the_environment(claude, child) -> None:
    ident = HostIdentity(parent_pid=child.pid, env={"CLAUDE_CODE_SESSION_ID": "env-id"})
    assert ident.current() == "env-id"  # no file
    path = claude.config / "sessions" / f"{child.pid}.json"
    path.parent.mkdir(parents=True)
    for junk in (b"", b"{not json", b"[]", b'{"sessionId": 7}', b'{"pid": "x", "sessionId": "s"}'):
        path.write_bytes(junk)
        assert ident.current() == "env-id", junk
    path.unlink()
    none = HostIdentity(parent_pid=child.pid, env={})
    assert none.current() is None and none.source is None
    empty = HostIdentity(parent_pid=child.pid, env={"CLAUDE_CODE_SESSION_ID": ""})
    assert empty.current() is None


def test_detect_ide_from_the_environment() -> None:
    assert detect_ide(env={"TERM_PROGRAM": "vscode"}) == "vscode"
    assert detect_ide(env={"VSCODE_PID": "123"}) == "vscode"
    assert detect_ide(env={"CLAUDE_CODE_ENTRYPOINT": "claude-vscode"}) == "vscode"
    assert detect_ide(env={"CURSOR_TRACE_ID": "abc"}) == "cursor"
    assert detect_ide(env={"TERM_PROGRAM": "vscode", "CURSOR_TRACE_ID": "abc"}) == "cursor"  # Cursor is a VS Code fork
    assert detect_ide(env={"TERMINAL_EMULATOR": "JetBrains-JediTerm"}) == "jetbrains"
    for env in ({}, {"TERM": "xterm-256color"}, {"TERM_PROGRAM": "iTerm.app"}):
        result = detect_ide(env=env)
        assert isinstance(result, str) and result in IDES, result
