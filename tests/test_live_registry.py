"""Claude Code's registry of running processes (``$CLAUDE_CONFIG_DIR/sessions/<pid>.json``) as
the second fact of liveness: real processes (this test's children), real files, the real CLI
commands. A file counts only while its pid runs with the same start time; dead, reused, linked,
oversized or malformed files are ignored and left where they are."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from c3async.ground.project import resolve
from c3async.live.running import proc_start_ticks, read_registry, running
from stress.transcripts import simple_session

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)"),
]


def registry_file(
    config: Path,
    pid: int,
    sid: str,
    cwd: str,
    *,
    status: str = "idle",
    since_ms: float | None = None,
    proc_start: int | str | None = None,
    **more,
) -> Path:
    folder = config / "sessions"
    folder.mkdir(parents=True, exist_ok=True)
    data = {
        "pid": pid,
        "sessionId": sid,
        "cwd": cwd,
        "startedAt": time.time() * 1000,
        "procStart": str(proc_start_ticks(pid) if proc_start is None else proc_start),
        "version": "2.1.332",
        "kind": "interactive",
        "entrypoint": "cli",
        "name": "x",
        "status": status,
        "statusUpdatedAt": time.time() * 1000 if since_ms is None else since_ms,
        **more,
    }
    path = folder / f"{pid}.json"
    path.write_text(json.dumps(data))
    return path


def test_a_running_process_makes_its_session_live_with_its_state(claude, sleeper):
    proj = claude.project("app")
    sid = simple_session(claude.folder(proj), proj, "answer the reviewer")
    waited = time.time() - 180
    registry_file(
        claude.config, sleeper.pid, sid, proj, status="waiting", since_ms=waited * 1000, waitingFor="dialog open"
    )
    row = claude.rows_by_id(proj)[sid]
    assert (row["live"], row["state"], row["mcp_count"]) == (True, "waiting", 0)
    assert abs(time.mktime(time.strptime(row["state_since"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone - waited) < 2
    assert [r["id"] for r in claude.sessions(proj, "--filter", "waiting")] == [sid]
    live = json.loads(claude.run("live", "--project", proj, "--json").stdout)
    assert [(e["id"], e["state"], e["source"], e["claude_pids"], e["title"], e["waiting_for"]) for e in live] == [
        (sid, "waiting", "registry", [sleeper.pid], "answer the reviewer", "dialog open")
    ]
    text = claude.run("live", "--project", proj)
    assert text.returncode == 0 and text.stdout.startswith("waiting 3m") and "answer the reviewer" in text.stdout
    table = claude.run("sessions", "--project", proj)
    assert "[LIVE WAITING 3m] answer the reviewer" in table.stdout


def test_dead_reused_and_hostile_files_never_read_live_and_stay(claude, sleeper, tmp_path):
    proj = claude.project("app")
    folder = claude.folder(proj)
    dead_sid, reused_sid, linked_sid = (simple_session(folder, proj, t) for t in ("killed", "reused", "linked"))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    files = [
        registry_file(claude.config, gone.pid, dead_sid, proj),  # a SIGKILLed claude's leftover
        registry_file(claude.config, sleeper.pid, reused_sid, proj, proc_start=proc_start_ticks(sleeper.pid) - 7),
    ]
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(
        json.dumps(
            {
                "pid": os.getpid(),
                "sessionId": linked_sid,
                "cwd": proj,
                "procStart": str(proc_start_ticks(os.getpid())),
                "status": "busy",
            }
        )
    )
    sessions = claude.config / "sessions"
    (sessions / f"{os.getpid()}.json").symlink_to(elsewhere)  # a link: never followed
    os.mkfifo(sessions / f"{os.getppid()}.json")  # a FIFO: never opened to block
    (sessions / "1.json").write_bytes(b"\x00\xff" * 50_000)  # junk, and too big
    (sessions / "notes.json").write_text("{}")
    before = sorted(p.name for p in sessions.iterdir())
    rows = claude.rows_by_id(proj)
    assert [rows[s]["live"] for s in (dead_sid, reused_sid, linked_sid)] == [False, False, False]
    assert json.loads(claude.run("live", "--project", proj, "--json").stdout) == []
    assert sorted(p.name for p in sessions.iterdir()) == before  # Claude Code's files: never deleted
    assert all(f.exists() for f in files)
    snap = read_registry(sessions)
    assert snap.running == [] and dead_sid in snap.ended and reused_sid in snap.ended


def test_a_leftover_stays_ended_and_a_reused_pid_is_read_again(claude, sleeper):
    """A reader that polls keeps what it concluded of a file a killed claude left, reading only
    the files of running processes and a slice of the settled ones, until the folder changes or the
    slice comes round: then a file written again is read again (here a new claude took the pid and
    wrote its own in place)."""
    from c3async.live import running as registry_reader

    proj = claude.project("app")
    folder = claude.folder(proj)
    old_sid, new_sid, other = (simple_session(folder, proj, t) for t in ("killed", "took the pid", "runs"))
    sessions = claude.config / "sessions"
    path = registry_file(claude.config, sleeper.pid, old_sid, proj, proc_start=proc_start_ticks(sleeper.pid) - 7)
    long_ago = time.time() - 600
    for settled in (path, sessions):  # written long ago: a verdict on them is kept
        os.utime(settled, (long_ago, long_ago))
    for _ in range(3):
        snap = read_registry(sessions)
        assert snap.running == [] and snap.ended == {old_sid}
    registry_file(claude.config, sleeper.pid, new_sid, proj, status="waiting")  # rewritten in place
    assert read_registry(sessions).ended == {old_sid}  # not read again before its slice's turn...
    for _ in range(registry_reader.RECHECK_PARTS):  # ...and within one round it is
        snap = read_registry(sessions)
        if snap.running:
            break
    assert [(r.session_id, r.state) for r in snap.running] == [(new_sid, "waiting")] and snap.ended == set()
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]) as second:
        try:
            registry_file(claude.config, second.pid, other, proj, status="busy")  # a new file: the folder moved
            assert {r.session_id for r in read_registry(sessions).running} == {new_sid, other}
        finally:
            second.kill()
    assert {r.session_id for r in read_registry(sessions).running} == {new_sid}  # a running one is read each time
    path.unlink()
    assert [r.session_id for r in read_registry(sessions).running] == []


def test_a_killed_claude_is_not_revived_by_its_hook_rows(claude, monkeypatch):
    """The activity log says started, never ended (no SessionEnd after SIGKILL); the registry
    file it left names a dead process: not live."""
    proj = claude.project("app")
    sid = simple_session(claude.folder(proj), proj, "killed mid-turn")
    from c3async.stores import activity

    claude.activate(monkeypatch)
    activity.record(resolve(proj), "session_start", session_id=sid, source="startup")
    assert claude.rows_by_id(proj)[sid]["live"] is True  # the fallback, with no registry entry
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    registry_file(claude.config, gone.pid, sid, proj, status="busy")
    assert claude.rows_by_id(proj)[sid]["live"] is False


def test_live_all_finds_a_project_never_registered(claude, sleeper):
    known, unknown = claude.project("known"), claude.project("never-seen")
    sid = simple_session(claude.folder(unknown), unknown, "in a project c3async never listed")
    registry_file(claude.config, sleeper.pid, sid, unknown, status="busy")
    assert claude.run("sessions", "--project", known).returncode == 0
    one = json.loads(claude.run("live", "--project", known, "--json").stdout)
    assert one == []
    every = json.loads(claude.run("live", "--all", "--project", known, "--json").stdout)
    assert [(e["id"], e["project"], e["state"], e["title"]) for e in every] == [
        (sid, unknown, "busy", "in a project c3async never listed")
    ]


def test_waiting_comes_first_the_longest_first(claude, sleeper):
    proj = claude.project("app")
    folder = claude.folder(proj)
    ids = {name: simple_session(folder, proj, name) for name in ("busy one", "waits long", "waits short", "idle one")}
    extra = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]) for _ in range(3)]
    try:
        now = time.time() * 1000
        for proc, (name, status, ago) in zip(
            [sleeper, *extra],
            [
                ("busy one", "busy", 5),
                ("waits long", "waiting", 900),
                ("waits short", "waiting", 30),
                ("idle one", "idle", 60),
            ],
        ):
            registry_file(claude.config, proc.pid, ids[name], proj, status=status, since_ms=now - ago * 1000)
        live = json.loads(claude.run("live", "--project", proj, "--json").stdout)
        assert [e["title"] for e in live] == ["waits long", "waits short", "busy one", "idle one"]
    finally:
        for proc in extra:
            proc.kill()
            proc.wait()


def test_the_registry_reader_takes_only_uuid_sessions_and_known_states(claude, sleeper):
    sessions = claude.config / "sessions"
    registry_file(claude.config, sleeper.pid, "not-a-uuid", "/x")
    assert running(sessions) == []
    sid = str(uuid.uuid4())
    registry_file(claude.config, sleeper.pid, sid, "relative/path", status="dancing\x1b[2J")
    (entry,) = running(sessions)
    assert (entry.session_id, entry.state, entry.state_since, entry.cwd) == (sid, None, None, None)


def test_an_empty_filter_says_so_on_stderr(claude):
    proj = claude.project("app")
    simple_session(claude.folder(proj), proj, "nothing waits here")
    proc = claude.run("sessions", "--project", proj, "--filter", "waiting")
    assert proc.returncode == 0 and proc.stdout == ""
    assert "no sessions match --filter waiting (of 1 listed)" in proc.stderr
    proc = claude.run("sessions", "--project", proj, "--filter", "waiting", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout) == []


def test_a_registry_of_projects_that_does_not_parse_leaves_one_projects_live_listing_whole(claude, sleeper):
    """``live --project P`` works out each live session's share of the account's window from the
    other projects too; a ``projects.json`` that does not parse leaves those out and says so,
    and P's live sessions are still listed (not an error about a file P does not need)."""
    proj = claude.project("app")
    sid = simple_session(claude.folder(proj), proj, "still running")
    registry_file(claude.config, sleeper.pid, sid, proj, status="busy")
    claude.c3home.mkdir(parents=True, exist_ok=True)
    (claude.c3home / "projects.json").write_text('{"version":1,"projects":[[[]]]}')
    proc = claude.run("live", "--project", proj, "--json")
    assert proc.returncode == 0, proc.stderr
    assert [e["id"] for e in json.loads(proc.stdout)] == [sid]
    assert "projects.json" in proc.stderr and "Traceback" not in proc.stderr
    assert (claude.c3home / "projects.json").read_text() == '{"version":1,"projects":[[[]]]}'
