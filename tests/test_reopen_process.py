"""``c3async reopen`` over real processes: stand-in claudes (each a process whose hook names it in
``CLAUDE_PID``, and one known only by its registry file) run, then are killed as a reboot or a
crash would; ``reopen --print`` offers the killed ones and never the one the person ended nor one
that runs. And tmux, where it is installed: ``resume --tmux`` and ``reopen`` open windows in the
sessions' folders (named with a ``;`` and spaces: nothing goes through a shell)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stress.transcripts import simple_session

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)"),
]


def _standin() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])


def _hook(claude, project: str, event: str, sid: str, pid: int, **fields) -> None:
    payload = {"hook_event_name": event, "session_id": sid, "cwd": project, **fields}
    env = claude.env(CLAUDE_PID=str(pid), CLAUDE_PROJECT_DIR=project, CLAUDE_CODE_ENTRYPOINT="cli")
    done = subprocess.run(
        [sys.executable, "-P", "-m", "c3async", "hook"], input=json.dumps(payload), text=True, env=env, timeout=60
    )
    assert done.returncode == 0


def _registered(claude, pid: int, sid: str, cwd: str) -> None:
    from c3async.live.registry_file import proc_start_ticks

    folder = claude.config / "sessions"
    folder.mkdir(exist_ok=True)
    data = {"pid": pid, "sessionId": sid, "cwd": cwd, "procStart": str(proc_start_ticks(pid)), "kind": "interactive"}
    (folder / f"{pid}.json").write_text(json.dumps({**data, "startedAt": time.time() * 1000}))


def _offered(claude) -> list[str]:
    proc = claude.run("reopen", "--print", process=True)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout.splitlines()


def test_killed_claudes_are_offered_again_and_the_one_ended_by_hand_is_not(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    hooked, also, ended, unhooked = (simple_session(folder, project, f"work {n}") for n in range(4))
    claudes = {sid: _standin() for sid in (hooked, also, ended, unhooked)}
    try:
        for sid in (hooked, also, ended):
            _hook(claude, project, "SessionStart", sid, claudes[sid].pid, source="startup")
        _registered(claude, claudes[unhooked].pid, unhooked, project)  # no hooks: the registry alone
        _hook(claude, project, "SessionEnd", ended, claudes[ended].pid, reason="prompt_input_exit")
        assert _offered(claude) == []  # all run (or were ended by hand)
        for proc in claudes.values():
            proc.kill()
            proc.wait()
        offered = _offered(claude)
        assert sorted(offered) == sorted(f"cd {project} && claude --resume {sid}" for sid in (hooked, also, unhooked))
        said = claude.run("reopen", "--json", process=True)
        why = {g["id"]: g["why"] for g in json.loads(said.stdout)}
        assert why == {hooked: "ended", also: "ended", unhooked: "killed"}
        # one started again (its new claude's hook) is running: no longer offered
        again = _standin()
        try:
            _hook(claude, project, "SessionStart", hooked, again.pid, source="resume")
            assert sorted(_offered(claude)) == sorted(
                offered[i] for i, line in enumerate(offered) if hooked not in line
            )
        finally:
            again.kill()
            again.wait()
    finally:
        for proc in claudes.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


@pytest.fixture
def tmux(tmp_path):
    """A tmux server of its own (socket in tmp_path); yields the $TMUX value a client inside it has."""
    sock = str(tmp_path / "tmux.sock")
    subprocess.run(["tmux", "-S", sock, "-f", "/dev/null", "new-session", "-d", "-s", "t", "sleep 600"], check=True)
    try:
        pid = subprocess.run(
            ["tmux", "-S", sock, "display-message", "-p", "#{pid}"], capture_output=True, text=True, check=True
        ).stdout.strip()
        yield sock, f"{sock},{pid},0"
    finally:
        subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True)


def _fake_claude(bin_dir: Path, out: Path) -> None:
    """A ``claude`` that writes where it runs and its arguments, then waits as claude would."""
    bin_dir.mkdir()
    script = bin_dir / "claude"
    script.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$PWD" "$@" > "{out}/$2.tmp" && mv "{out}/$2.tmp" "{out}/$2"\nexec sleep 600\n'
    )
    script.chmod(0o755)
    out.mkdir()


def _ran(out: Path, sid: str) -> list[str]:
    deadline = time.monotonic() + 30
    while not (out / sid).exists():  # the window's command has run once its file is there
        assert time.monotonic() < deadline, f"claude --resume {sid} never ran in a tmux window"
        time.sleep(0.05)
    return (out / sid).read_text().splitlines()


@needs_tmux
def test_resume_and_reopen_open_tmux_windows_in_the_sessions_folders(claude, tmux, tmp_path):
    sock, inside = tmux
    project = claude.project("my app; touch pwned")
    folder = claude.folder(project)
    one, two, three = (simple_session(folder, project, f"work {n}") for n in range(3))
    out, bin_dir = tmp_path / "ran", tmp_path / "my bin; touch pwned"  # run by tmux itself, or it breaks
    _fake_claude(bin_dir, out)
    env = claude.env(TMUX=inside, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    proc = claude.run("resume", one[:8], "--tmux", env=env, process=True)
    assert proc.returncode == 0, proc.stderr
    assert _ran(out, one) == [project, "--resume", one]

    from c3async.live import waslive

    now = time.time()
    entries = [
        {"id": sid, "cwd": project, "seen": now - 60, "since": now - 600, "boot": (waslive.boot_time() or 0) - 3600}
        for sid in (two, three)
    ]
    claude.c3home.mkdir(exist_ok=True)
    (claude.c3home / "was_live.json").write_text(json.dumps({"version": 1, "sessions": entries}))
    proc = claude.run("reopen", env=env, process=True)
    assert proc.returncode == 0, proc.stderr
    assert "2 sessions opened again" in proc.stderr
    assert _ran(out, two) == [project, "--resume", two] and _ran(out, three) == [project, "--resume", three]
    names = subprocess.run(
        ["tmux", "-S", sock, "list-windows", "-a", "-F", "#{window_name}"], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert {f"claude {sid[:8]}" for sid in (one, two, three)} <= set(names)
    assert not [p for p in (tmp_path, Path(project), Path.home()) if (p / "pwned").exists()]

    outside = claude.run("resume", one[:8], "--tmux", env=claude.env(), process=True)
    assert outside.returncode != 0 and "not inside tmux" in outside.stderr and "Traceback" not in outside.stderr
