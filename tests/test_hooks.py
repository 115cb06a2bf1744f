"""Claude Code hooks: ``c3async hook`` run as Claude Code runs it (``/bin/sh -c <command>``, the
hook's JSON on stdin, CLAUDE_PID and CLAUDE_PROJECT_DIR in the environment), and
``c3async install-hooks`` editing real settings files."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from stress.transcripts import simple_session

pytestmark = pytest.mark.process

HOOK_COMMAND = f"{shlex.quote(sys.executable)} -P -m c3async hook"


def run_hook(
    claude,
    payload: dict | bytes | str,
    *,
    project: str | None,
    pid: str | None = "4242",
    command: str = HOOK_COMMAND,
    **env: str,
) -> tuple[subprocess.CompletedProcess, float]:
    data = (
        payload
        if isinstance(payload, bytes)
        else (payload.encode() if isinstance(payload, str) else json.dumps(payload).encode())
    )
    extra = dict(env)
    if pid is not None:
        extra["CLAUDE_PID"] = pid
    if project is not None:
        extra["CLAUDE_PROJECT_DIR"] = project
    start = time.monotonic()
    proc = subprocess.run(
        ["/bin/sh", "-c", command],
        input=data,
        capture_output=True,
        env=claude.env(CLAUDE_CODE_ENTRYPOINT="cli", **extra),
        cwd=str(claude.root),
        timeout=60,
    )
    return proc, time.monotonic() - start


_NAMES: dict[str, str] = {}


def sid(name: str) -> str:
    """Claude Code's session ids are UUIDs (the hook ignores anything else): tests name sessions
    ("s-1") and ``payload``/``rows`` translate, so assertions read the names."""
    if name in _NAMES or len(name) == 36:
        return name
    value = str(uuid.uuid5(uuid.NAMESPACE_URL, name))
    _NAMES[value] = name
    return value


def payload(event: str, session_id: str, project: str, **fields) -> dict:
    session_id = sid(session_id)
    return {
        "session_id": session_id,
        "transcript_path": f"/tmp/{session_id}.jsonl",
        "cwd": project,
        "hook_event_name": event,
        **fields,
    }


def rows(project: str) -> list[dict]:
    path = Path(project) / ".c3" / "activity.jsonl"
    if not path.exists():
        return []
    out = [json.loads(line) for line in path.read_bytes().splitlines()]
    for row in out:
        for key in ("session_id", "predecessor"):
            if row.get(key) in _NAMES:
                row[key] = _NAMES[row[key]]
    return out


def test_session_start_and_end_rows(claude) -> None:
    proj = claude.project("app")
    before = time.time()
    proc, took = run_hook(claude, payload("SessionStart", "s-1", proj, source="startup"), project=proj)
    print(f"one hook run took {took * 1000:.0f} ms")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b""  # SessionStart stdout would be added to Claude's context
    [start] = rows(proj)
    assert start["kind"] == "session_start" and start["session_id"] == "s-1" and start["source"] == "startup"
    assert start["claude_pid"] == 4242 and start["transcript_path"] == f"/tmp/{sid('s-1')}.jsonl"
    assert "predecessor" not in start
    assert before - 1 <= start["ts"] <= time.time() + 1

    proc, _ = run_hook(claude, payload("SessionEnd", "s-1", proj, reason="prompt_input_exit"), project=proj)
    assert proc.returncode == 0 and proc.stdout == b"", proc.stderr
    end = rows(proj)[-1]
    assert end["kind"] == "session_end" and end["session_id"] == "s-1"
    assert end["reason"] == "prompt_input_exit" and end["claude_pid"] == 4242
    assert not (claude.c3home / "hook-errors.log").exists()


def test_hook_rows_drive_the_live_fallback(claude) -> None:
    proj = claude.project("app")
    # The claude the hook names must run: this test's own process stands in for it.
    run_hook(claude, payload("SessionStart", "s-live", proj, source="startup"), project=proj, pid=str(os.getpid()))
    proc = claude.run("live", "--project", proj, "--json")
    assert [(e["id"], e["source"], e["mcp_count"]) for e in json.loads(proc.stdout)] == [(sid("s-live"), "activity", 0)]
    run_hook(claude, payload("SessionEnd", "s-live", proj, reason="other"), project=proj)
    assert json.loads(claude.run("live", "--project", proj, "--json").stdout) == []


def test_project_falls_back_to_the_payload_cwd(claude) -> None:
    proj = claude.project("app")
    proc, _ = run_hook(claude, payload("SessionStart", "s-cwd", proj, source="startup"), project=None)
    assert proc.returncode == 0, proc.stderr
    assert [r["session_id"] for r in rows(proj)] == ["s-cwd"]


def test_clear_links_the_new_session_to_the_old(claude) -> None:
    proj = claude.project("app")
    folder = claude.folder(proj)
    old = simple_session(folder, proj, "Refactor the parser")
    new = simple_session(folder, proj, "Now the tests")
    me = str(os.getpid())  # the claude of both sessions: it must run for the new one to read live
    run_hook(claude, payload("SessionStart", old, proj, source="startup"), project=proj, pid=me)
    run_hook(claude, payload("SessionEnd", old, proj, reason="clear"), project=proj, pid=me)
    proc, _ = run_hook(claude, payload("SessionStart", new, proj, source="clear"), project=proj, pid=me)
    assert proc.returncode == 0, proc.stderr
    start = rows(proj)[-1]
    assert start["kind"] == "session_start" and start["session_id"] == new
    assert start["source"] == "clear" and start["predecessor"] == old

    row = claude.rows_by_id(proj)
    assert "ended by /clear" in row[old]["hints"]
    assert "ended by /clear" not in row[new]["hints"]
    assert row[new]["live"] is True and row[old]["live"] is False


def test_clear_in_another_claude_process_is_not_a_predecessor(claude) -> None:
    proj = claude.project("app")
    run_hook(claude, payload("SessionEnd", "old-a", proj, reason="clear"), project=proj, pid="6001")
    run_hook(claude, payload("SessionStart", "new-b", proj, source="clear"), project=proj, pid="6002")
    assert "predecessor" not in rows(proj)[-1]
    # Only a SessionStart with source=clear is linked.
    run_hook(claude, payload("SessionEnd", "old-c", proj, reason="clear"), project=proj, pid="6003")
    run_hook(claude, payload("SessionStart", "new-d", proj, source="startup"), project=proj, pid="6003")
    assert "predecessor" not in rows(proj)[-1]
    # A plain exit is not a /clear.
    run_hook(claude, payload("SessionEnd", "old-e", proj, reason="prompt_input_exit"), project=proj, pid="6004")
    run_hook(claude, payload("SessionStart", "new-f", proj, source="clear"), project=proj, pid="6004")
    assert "predecessor" not in rows(proj)[-1]


def test_two_processes_clearing_at_once_each_get_their_own_predecessor(claude) -> None:
    proj = claude.project("app")
    run_hook(claude, payload("SessionEnd", "old-a", proj, reason="clear"), project=proj, pid="8001")
    run_hook(claude, payload("SessionEnd", "old-b", proj, reason="clear"), project=proj, pid="8002")
    run_hook(claude, payload("SessionStart", "new-a", proj, source="clear"), project=proj, pid="8001")
    run_hook(claude, payload("SessionStart", "new-b", proj, source="clear"), project=proj, pid="8002")
    starts = {r["session_id"]: r.get("predecessor") for r in rows(proj) if r["kind"] == "session_start"}
    assert starts == {"new-a": "old-a", "new-b": "old-b"}


def test_clear_long_ago_is_not_a_predecessor(claude) -> None:
    proj = claude.project("app")
    path = Path(proj) / ".c3" / "activity.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps(
            {
                "ts": time.time() - 60,
                "kind": "session_end",
                "session_id": sid("long-ago"),
                "reason": "clear",
                "claude_pid": 7001,
            }
        )
        + "\n"
    )
    run_hook(claude, payload("SessionStart", "new", proj, source="clear"), project=proj, pid="7001")
    assert "predecessor" not in rows(proj)[-1]


def test_bad_input_never_fails_the_hook(claude) -> None:
    proj = claude.project("app")
    run_hook(claude, payload("SessionStart", "keep", proj, source="startup"), project=proj)
    log = Path(proj) / ".c3" / "activity.jsonl"
    before = log.read_bytes()
    errors = claude.c3home / "hook-errors.log"
    cases = {
        "garbage": b"this is not json {",
        "bad utf-8": b'{"session_id": "\xff\xfe"}',
        "empty": b"",
        "array": b'[{"session_id": "s", "hook_event_name": "SessionStart"}]',
        "no session_id": json.dumps({"hook_event_name": "SessionStart", "source": "startup", "cwd": proj}).encode(),
        "session_id not a string": json.dumps({"session_id": 12, "hook_event_name": "SessionEnd"}).encode(),
    }
    noted = 0
    for name, data in cases.items():
        proc, took = run_hook(claude, data, project=proj)
        assert proc.returncode == 0, (name, proc.stderr)
        assert proc.stdout == b"", name
        assert log.read_bytes() == before, name
        if name in ("garbage", "bad utf-8"):
            lines = errors.read_text().splitlines()
            assert len(lines) == noted + 1, (name, lines)
            noted += 1
        print(f"{name}: {took * 1000:.0f} ms")
    assert "JSONDecodeError" in errors.read_text().splitlines()[0]


def test_a_hook_with_nowhere_to_write_still_exits_zero(claude) -> None:
    proj = claude.project("app")
    (Path(proj) / ".c3").write_text("a file where the state folder should be")
    proc, _ = run_hook(claude, payload("SessionStart", "s", proj, source="startup"), project=proj)
    assert proc.returncode == 0 and proc.stdout == b""
    assert (claude.c3home / "hook-errors.log").read_text().strip()


def test_a_hook_run_is_quick(claude) -> None:
    proj = claude.project("app")
    times = []
    for i in range(3):
        proc, took = run_hook(claude, payload("SessionStart", f"q-{i}", proj, source="startup"), project=proj)
        assert proc.returncode == 0
        times.append(took)
    print("hook runs took " + ", ".join(f"{t * 1000:.0f} ms" for t in times))
    assert len(rows(proj)) == 3
    assert min(times) < 10  # generous: the point is that it completes, not a benchmark


# --- install-hooks ---------------------------------------------------------------------------


def ours(settings: dict, event: str) -> list[dict]:
    return [h for g in settings["hooks"][event] for h in g.get("hooks", []) if "c3async" in h.get("command", "")]


def test_install_hooks_creates_the_project_settings(claude) -> None:
    proj = claude.project("app")
    proc = claude.run("install-hooks", "--project", proj)
    assert proc.returncode == 0, proc.stderr
    path = Path(proj) / ".claude" / "settings.local.json"
    assert str(path) in proc.stdout
    settings = json.loads(path.read_text())
    for event in ("SessionStart", "SessionEnd"):
        [hook] = ours(settings, event)
        assert hook["type"] == "command"
        argv = shlex.split(hook["command"])
        assert argv[1:] == ["-P", "-m", "c3async", "hook"]
        assert os.path.samefile(argv[0], sys.executable)
    assert not (claude.config / "settings.json").exists()

    # The installed command really is a working hook.
    proc, _ = run_hook(
        claude,
        payload("SessionStart", "via-settings", proj, source="startup"),
        project=proj,
        command=ours(settings, "SessionStart")[0]["command"],
    )
    assert proc.returncode == 0, proc.stderr
    assert rows(proj)[-1]["session_id"] == "via-settings"


def test_install_hooks_is_idempotent(claude) -> None:
    proj = claude.project("app")
    assert claude.run("install-hooks", "--project", proj).returncode == 0
    path = Path(proj) / ".claude" / "settings.local.json"
    first = path.read_bytes()
    proc = claude.run("install-hooks", "--project", proj)
    assert proc.returncode == 0, proc.stderr
    assert "already" in proc.stdout
    assert path.read_bytes() == first
    settings = json.loads(first)
    assert len(ours(settings, "SessionStart")) == 1 and len(ours(settings, "SessionEnd")) == 1


def project_settings(claude, settings: dict) -> tuple[str, Path]:
    """A project "app" whose .claude/settings.local.json holds ``settings``: (project, file)."""
    proj = claude.project("app")
    path = Path(proj) / ".claude" / "settings.local.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(settings, indent=2))
    return proj, path


def test_install_hooks_keeps_other_settings_and_hooks(claude) -> None:
    original = {
        "model": "opus",
        "permissions": {"allow": ["Bash(ls:*)"], "deny": ["Read(./.env)"]},
        "env": {"FOO": "bar"},
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh", "timeout": 5}]}],
            "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "other-tool start"}]}],
        },
    }
    proj, path = project_settings(claude, original)
    proc = claude.run("install-hooks", "--project", proj)
    assert proc.returncode == 0, proc.stderr
    settings = json.loads(path.read_text())
    for key in ("model", "permissions", "env"):
        assert settings[key] == original[key]
    assert settings["hooks"]["PreToolUse"] == original["hooks"]["PreToolUse"]
    assert settings["hooks"]["SessionStart"][0] == original["hooks"]["SessionStart"][0]
    assert len(settings["hooks"]["SessionStart"]) == 2
    assert len(ours(settings, "SessionStart")) == 1 and len(ours(settings, "SessionEnd")) == 1
    assert set(settings["hooks"]) == {"PreToolUse", "SessionStart", "SessionEnd"}
    again = path.read_bytes()
    assert claude.run("install-hooks", "--project", proj).returncode == 0
    assert path.read_bytes() == again


def test_install_hooks_remove_takes_out_only_what_it_added(claude) -> None:
    original = {
        "model": "opus",
        "hooks": {
            "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "other-tool start"}]}],
            "SessionEnd": [{"hooks": [{"type": "command", "command": "notify 'c3async hook fired'"}]}],
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh"}]}],
        },
        "env": {"ANTHROPIC_API_KEY": "sk-private"},
    }
    proj, path = project_settings(claude, original)
    path.chmod(0o600)
    assert claude.run("install-hooks", "--project", proj).returncode == 0
    assert "-m c3async hook" in path.read_text()  # a hook that only mentions c3async is not ours
    assert (
        path.stat().st_mode & 0o777 == 0o600
        and path.with_name(path.name + ".c3async.bak").stat().st_mode & 0o777 == 0o600
    )
    removed = claude.run("install-hooks", "--project", proj, "--remove")
    assert removed.returncode == 0, removed.stderr
    assert "removed the SessionStart, SessionEnd hooks" in removed.stdout
    assert json.loads(path.read_text()) == original and path.stat().st_mode & 0o777 == 0o600
    again = claude.run("install-hooks", "--project", proj, "--remove")
    assert again.returncode == 0 and "no c3async hooks" in again.stdout
    # Installed into an empty file, removed: no hooks object is left behind, and a file that
    # held nothing else goes, with its backup and the folder it alone was in.
    path.write_text("{}")
    claude.run("install-hooks", "--project", proj)
    claude.run("install-hooks", "--project", proj, "--remove")
    assert not path.parent.exists()
    fresh = claude.project("fresh")
    (Path(fresh) / ".claude").mkdir()
    (Path(fresh) / ".claude" / "commands.md").write_text("mine")
    claude.run("install-hooks", "--project", fresh)
    claude.run("install-hooks", "--project", fresh, "--remove")
    assert os.listdir(Path(fresh) / ".claude") == ["commands.md"]  # the user's file, and only it
    bare = claude.project("bare")
    nothing = claude.run("install-hooks", "--project", bare, "--remove")
    assert nothing.returncode == 0 and not (Path(bare) / ".claude").exists()  # nothing created
    no_config = claude.root / "no-config-yet"
    user = claude.run("install-hooks", "--user", "--remove", env=claude.env(CLAUDE_CONFIG_DIR=str(no_config)))
    assert user.returncode == 0 and not no_config.exists()


def test_install_hooks_never_touches_a_backup_it_did_not_write(claude) -> None:
    """A person's own ``settings.local.json.bak`` survives an install and a removal byte for
    byte; our backup, once it holds something a person wrote, is not removed either."""
    proj, path = project_settings(claude, {})
    theirs = path.with_name(path.name + ".bak")
    theirs.write_bytes(b'{"model": "my old settings"}\n')
    assert claude.run("install-hooks", "--project", proj).returncode == 0
    assert claude.run("install-hooks", "--project", proj, "--remove").returncode == 0
    assert theirs.read_bytes() == b'{"model": "my old settings"}\n'
    assert sorted(os.listdir(path.parent)) == [theirs.name]  # ours went with the file that held only our hooks
    # Installed over settings a person then emptied by hand: the backup is their only copy.
    path.write_text(json.dumps({"model": "opus"}))
    assert claude.run("install-hooks", "--project", proj).returncode == 0
    path.write_text(json.dumps({"hooks": json.loads(path.read_text())["hooks"]}))
    assert claude.run("install-hooks", "--project", proj, "--remove").returncode == 0
    ours = path.with_name(path.name + ".c3async.bak")
    assert json.loads(ours.read_text()) == {"model": "opus"} and theirs.exists()


def test_install_hooks_completes_a_partial_install(claude) -> None:
    proj = claude.project("app")
    path = Path(proj) / ".claude" / "settings.local.json"
    path.parent.mkdir(parents=True)
    mine = {"type": "command", "command": HOOK_COMMAND, "timeout": 10}
    path.write_text(json.dumps({"hooks": {"SessionStart": [{"hooks": [mine]}]}}))
    proc = claude.run("install-hooks", "--project", proj)
    assert proc.returncode == 0, proc.stderr
    assert "SessionEnd" in proc.stdout and "SessionStart" not in proc.stdout
    settings = json.loads(path.read_text())
    assert settings["hooks"]["SessionStart"] == [{"hooks": [mine]}]
    assert len(ours(settings, "SessionEnd")) == 1


def test_install_hooks_refuses_a_broken_settings_file(claude) -> None:
    proj = claude.project("app")
    path = Path(proj) / ".claude" / "settings.local.json"
    path.parent.mkdir(parents=True)
    for broken in (
        b'{"model": "opus",, }',
        b'["not", "an", "object"]',
        b'{"hooks": {"SessionStart": "oops"}}',
        b'{"hooks": []}',
    ):
        path.write_bytes(broken)
        proc = claude.run("install-hooks", "--project", proj)
        assert proc.returncode == 1, (broken, proc.stdout, proc.stderr)
        assert str(path) in proc.stderr and "fix it" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
        assert path.read_bytes() == broken


def test_install_hooks_invalid_json_message(claude) -> None:
    proj = claude.project("app")
    path = Path(proj) / ".claude" / "settings.local.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"model": "opus",, }')
    proc = claude.run("install-hooks", "--project", proj)
    assert proc.returncode == 1
    assert proc.stderr.startswith("c3async: error:") and "not valid JSON" in proc.stderr
    assert proc.stdout == ""


def test_install_hooks_user_settings(claude) -> None:
    proj = claude.project("app")
    proc = claude.run("install-hooks", "--user", cwd=proj)
    assert proc.returncode == 0, proc.stderr
    path = claude.config / "settings.json"
    settings = json.loads(path.read_text())
    assert len(ours(settings, "SessionStart")) == 1 and len(ours(settings, "SessionEnd")) == 1
    assert not (Path(proj) / ".claude").exists()
    first = path.read_bytes()
    assert claude.run("install-hooks", "--user").returncode == 0
    assert path.read_bytes() == first


def test_a_replayed_event_keeps_the_time_it_fired_and_only_a_time_that_can_be(claude):
    """The plugin's launcher replays events kept during its build with C3_HOOK_EVENT_TIME: an
    event time in range and not in the future is the row's time; anything else is now."""
    project = claude.project("replayed")
    fired = time.time() - 3600
    cases = [
        ("s-past", f"{fired:.3f}"),
        ("s-future", f"{time.time() + 86400:.3f}"),
        ("s-nan", "nan"),
        ("s-words", "yesterday"),
        ("s-huge", "9" * 400),
    ]
    for name, when in cases:
        before = time.time()
        proc, _ = run_hook(
            claude, payload("SessionStart", name, project, source="startup"), project=project, C3_HOOK_EVENT_TIME=when
        )
        assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr
        (row,) = [r for r in rows(project) if r["session_id"] == name]
        if name == "s-past":
            assert row["ts"] == round(fired, 3)
        else:
            assert before - 0.001 <= row["ts"] <= time.time() + 0.001, (name, row["ts"])
