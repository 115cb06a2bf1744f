"""What was live, remembered past a reboot (``$C3_HOME/was_live.json``), and ``c3async reopen``,
in this process: the hooks' and the servers' records, the file's bounds and checks, what reopen
offers (a reboot, a claude that ended) and what it never offers (a session that runs now, a
session the person ended, an entry that names no transcript). The killed stand-in claudes and
tmux are in ``test_reopen_process.py``."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
import uuid

import pytest

from c3async.ground.errors import CorruptDocument
from c3async.ground.project import resolve
from c3async.live import hooks, waslive
from c3async.live.registry_file import proc_start_ticks
from c3async.sessions.reopen import gone
from stress.transcripts import simple_session


@pytest.fixture
def world(claude, monkeypatch):
    claude.activate(monkeypatch)
    monkeypatch.setenv("CLAUDE_CODE_ENTRYPOINT", "cli")
    return claude


def _hook(project: str, event: str, sid: str, pid: int | None = None, **fields) -> None:
    os.environ.pop("CLAUDE_PID", None)
    if pid is not None:
        os.environ["CLAUDE_PID"] = str(pid)
    try:
        hooks.handle({"hook_event_name": event, "session_id": sid, "cwd": project, **fields})
    finally:
        os.environ.pop("CLAUDE_PID", None)


def _write(doc: dict) -> None:
    path = waslive.path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def test_a_hook_remembers_a_session_and_forgets_it_only_when_the_person_ended_it(world):
    project = world.project("app")
    a, b, c = (str(uuid.uuid4()) for _ in range(3))
    for sid in (a, b, c):
        _hook(project, "SessionStart", sid, source="startup")
    _hook(project, "SessionEnd", a, reason="prompt_input_exit")  # /exit
    _hook(project, "SessionEnd", b, reason="other")  # a SIGTERM: how a reboot ends claude
    kept = {e.id: e for e in waslive.remembered()}
    assert set(kept) == {b, c}
    assert kept[b].cwd == project and kept[b].by == "hook" and kept[b].boot == waslive.boot_time()
    mode = stat.S_IMODE(os.stat(waslive.path()).st_mode)
    assert mode == 0o600, oct(mode)


def test_print_and_sdk_sessions_are_no_windows_and_are_not_remembered(world, monkeypatch):
    project = world.project("app")
    monkeypatch.setenv("CLAUDE_CODE_ENTRYPOINT", "sdk-cli")
    _hook(project, "SessionStart", str(uuid.uuid4()), source="startup")
    assert waslive.remembered() == []


def test_a_clear_replaces_what_the_claude_process_held(world):
    project = world.project("app")
    old, new, other = (str(uuid.uuid4()) for _ in range(3))
    me = os.getpid()  # a running process stands for the claude
    _hook(project, "SessionStart", old, me, source="startup")
    _hook(project, "SessionStart", other, None, source="startup")
    _hook(project, "SessionEnd", old, me, reason="clear")
    _hook(project, "SessionStart", new, me, source="clear")
    assert {e.id for e in waslive.remembered()} == {new, other}
    # and by the server's beat alone (no SessionEnd: it sees the registry switch ids)
    newer = str(uuid.uuid4())
    waslive.remember(newer, project, pid=me, by="server")
    assert {e.id for e in waslive.remembered()} == {newer, other}


def test_the_file_stays_bounded(world):
    project = world.project("app")
    for _ in range(waslive.MAX_ENTRIES + 20):
        waslive.remember(str(uuid.uuid4()), project, pid=None, by="server")
    assert len(waslive.remembered()) == waslive.MAX_ENTRIES
    assert waslive.path().stat().st_size < waslive.MAX_BYTES // 4


def test_concurrent_writers_lose_nothing(world):
    project = world.project("app")
    ids = [[str(uuid.uuid4()) for _ in range(6)] for _ in range(8)]

    def write(mine: list[str]) -> None:
        for sid in mine:
            waslive.remember(sid, project, pid=None, by="hook")

    threads = [threading.Thread(target=write, args=(mine,)) for mine in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {e.id for e in waslive.remembered()} == {sid for mine in ids for sid in mine}


def test_forged_entries_are_dropped_and_the_good_one_stands(world):
    project = world.project("app")
    good = str(uuid.uuid4())
    now = time.time()
    base = {"cwd": project, "seen": now, "since": now, "by": "hook"}
    _write(
        {
            "version": 1,
            "sessions": [
                {**base, "id": "../../etc/passwd"},
                {**base, "id": "1a2b"},
                {**base, "id": str(uuid.uuid4()), "cwd": "relative/dir"},
                {**base, "id": str(uuid.uuid4()), "cwd": "/a\u0000b"},
                {**base, "id": str(uuid.uuid4()), "pid": -4},
                {**base, "id": str(uuid.uuid4()), "pid": 2**40},
                {**base, "id": str(uuid.uuid4()), "seen": 32503680000.0},  # the year 3000
                {**base, "id": str(uuid.uuid4()), "seen": "yesterday"},
                {**base, "id": str(uuid.uuid4()), "by": "someone"},
                {**base, "id": str(uuid.uuid4()), "seen": now - waslive.FORGET_AFTER_S - 60},
                ["not", "an", "entry"],
                {**base, "id": good},
            ],
        }
    )
    assert [e.id for e in waslive.remembered()] == [good]
    waslive.remember(str(uuid.uuid4()), project, pid=None, by="hook")  # a write keeps only good entries
    assert len(json.loads(waslive.path().read_text())["sessions"]) == 2


def test_a_huge_or_broken_file_is_refused_and_left_as_it_is(world):
    path = waslive.path()
    path.parent.mkdir(parents=True, exist_ok=True)
    for data in (b"[" * 50 + b" " * (waslive.MAX_BYTES + 10), b"{not json"):
        path.write_bytes(data)
        with pytest.raises(CorruptDocument) as raised:
            waslive.remembered()
        assert str(path) in str(raised.value)
        with pytest.raises(CorruptDocument):
            waslive.remember(str(uuid.uuid4()), "/tmp", pid=None, by="hook")
        assert path.read_bytes() == data
    proc = world.run("reopen", "--print")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert str(path) in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def _entry(sid: str, cwd: str, **more) -> dict:
    now = time.time()
    return {"id": sid, "cwd": cwd, "seen": now - 300, "since": now - 600, "by": "hook", **more}


def test_reopen_offers_what_a_reboot_took_and_never_what_runs(world):
    project = world.project("app")
    folder = world.folder(project)
    rebooted, ended, runs, ghost = (simple_session(folder, project, f"work {n}") for n in range(4))
    boot = waslive.boot_time()
    assert boot is not None
    me = os.getpid()
    registry = world.config / "sessions"
    registry.mkdir()
    (registry / f"{me}.json").write_text(  # this process, running, holds `runs`
        json.dumps({"pid": me, "sessionId": runs, "cwd": project, "procStart": str(proc_start_ticks(me))})
    )
    _write(
        {
            "version": 1,
            "sessions": [
                _entry(rebooted, project, boot=boot - 3600, pid=me, started=waslive.process_start(me) - 3600),
                _entry(ended, project, boot=boot, pid=2**31 - 1, started=time.time() - 900),
                _entry(runs, project, boot=boot),
                _entry(ghost, "/etc", boot=boot - 3600),  # a real id beside a folder it never ran in
                _entry(str(uuid.uuid4()), project, boot=boot - 3600),  # an id with no transcript
            ],
        }
    )
    found = {g.id: g for g in gone()}
    assert runs not in found
    assert found[rebooted].why == "reboot" and found[ended].why == "ended"
    assert found[rebooted].command == f"cd {project} && claude --resume {rebooted}"
    assert found[ghost].cwd == project  # the catalog's folder, never the remembered one
    (unknown,) = [g for g in found.values() if g.command is None]
    assert "no session" in (unknown.problem or "")

    proc = world.run("reopen", "--print")
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.splitlines()) == sorted(
        f"cd {project} && claude --resume {sid}" for sid in (rebooted, ended, ghost)
    )
    assert "before the machine restarted" in proc.stderr and "Traceback" not in proc.stderr
    listed = world.run("reopen", "--json", "--since", "1h")
    assert [g["id"] for g in json.loads(listed.stdout)] == list(found), listed.stderr
    recent = json.loads(world.run("reopen", "--json", "--since", "2m").stdout)
    assert recent == [], [(g["seen"] - time.time(), g["by"]) for g in recent]
    bad = world.run("reopen", "--since", "soon")
    assert bad.returncode == 1 and "--since" in bad.stderr and "Traceback" not in bad.stderr


def test_resume_tmux_outside_tmux_is_a_clear_error(world, monkeypatch):
    project = world.project("app")
    sid = simple_session(world.folder(project), project)
    monkeypatch.delenv("TMUX", raising=False)
    from c3async.sessions.launch import tmux_window

    with pytest.raises(Exception) as raised:
        tmux_window(project, ["claude", "--resume", sid], name="x")
    assert "not inside tmux" in str(raised.value)


def test_a_servers_beat_remembers_the_window_it_serves_and_not_a_print_run(world):
    from c3async.live.heartbeat import HeartbeatWriter
    from c3async.live.identity import HostIdentity

    project = world.project("app")
    me = os.getpid()  # this process stands for the claude the server runs under
    registry = world.config / "sessions"
    registry.mkdir()

    def beat(sid: str, kind: str) -> None:
        (registry / f"{me}.json").write_text(
            json.dumps(
                {"pid": me, "sessionId": sid, "cwd": project, "procStart": str(proc_start_ticks(me)), "kind": kind}
            )
        )
        identity = HostIdentity(parent_pid=me, env={})
        HeartbeatWriter(
            resolve(project),
            str(uuid.uuid4()),
            "cli",
            identity.current,
            host_pid=lambda: identity.claude_pid,
            served=lambda hb: waslive.served(hb.host_session_id, hb.host_pid, identity.registered, project),
        ).beat()

    window, printed = str(uuid.uuid4()), str(uuid.uuid4())
    beat(window, "interactive")
    (kept,) = waslive.remembered()
    assert (kept.id, kept.by, kept.pid, kept.cwd) == (window, "server", me, project)
    beat(printed, "print")
    assert [e.id for e in waslive.remembered()] == [window]
