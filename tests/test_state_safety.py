"""c3async's state is its own: a cloned repository's ``.c3/`` full of links and special files,
and JSON nested past the recursion limit, change nothing outside the sandbox and break nothing.

Every test builds a decoy folder (a stand-in for the user's home) and checks it byte for byte,
mode and mtime, before and after the real CLI runs against the hostile project."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from pathlib import Path

import pytest

from c3async.ground import jsondoc, jsonl, safefs
from c3async.ground.errors import C3Error
from c3async.ground.project import resolve
from c3async.tasks import actions, store
from stress.transcripts import simple_session

DEEP = b"[" * 100_000 + b"]" * 100_000


def decoy(root: Path) -> Path:
    """A folder like a home: dot-files and *.json files, all old enough to look dead."""
    home = root / "decoy"
    home.mkdir()
    old = time.time() - 3600
    for name, data in {
        ".bashrc": b"export PS1='$ '\n",
        ".profile": b"# profile\n",
        "settings.json": b'{"a": 1}\n',
        ".hidden.json": b"{}",
        "0b0d3c1e-1111-4222-8333-444455556666.json": b'{"session_id": "x"}',
    }.items():
        (home / name).write_bytes(data)
        os.utime(home / name, (old, old))
    return home


def snapshot(folder: Path) -> dict[str, tuple]:
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = Path(root, name)
            st = p.lstat()
            digest = hashlib.sha256(p.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else None
            out[str(p.relative_to(folder))] = (st.st_mode, st.st_mtime_ns, st.st_size, digest)
    return out


@pytest.fixture
def hostile(claude):
    """A project with one real session, and a decoy home beside it."""
    project = claude.project("repo")
    sid = simple_session(claude.folder(project), project, "Fix the parser")
    home = decoy(claude.root)
    return project, sid, home


def c3(project: str) -> Path:
    path = Path(project) / ".c3"
    path.mkdir(exist_ok=True)
    return path


@pytest.mark.process
def test_a_linked_live_folder_is_never_pruned_or_read(claude, hostile) -> None:
    project, sid, home = hostile
    before = snapshot(home)
    (c3(project) / "live").symlink_to(home)
    for args in (
        ("sessions", "--project", project, "--json"),
        ("live", "--project", project),
        ("live", "--project", project, "--json"),
    ):
        proc = claude.run(*args)
        assert proc.returncode == 0, proc.stderr
        assert "symlink" in proc.stderr and str(Path(project) / ".c3" / "live") in proc.stderr
    assert [r["id"] for r in claude.sessions(project)] == [sid]
    assert snapshot(home) == before


@pytest.mark.process
@pytest.mark.parametrize("name", ["session_marks.jsonl", "activity.jsonl"])
def test_a_linked_log_is_refused_and_its_target_untouched(claude, hostile, name) -> None:
    project, sid, home = hostile
    before = snapshot(home)
    (c3(project) / name).symlink_to(home / ".bashrc")
    proc = claude.run("mark", "note", sid, "--summary", "$(touch /tmp/pwned) done", "--project", project)
    # A refused marks file fails the mark; a refused activity log only loses the audit row (the
    # mark itself was written: reporting failure would invite a duplicate), with a warning.
    assert proc.returncode == (1 if name == "session_marks.jsonl" else 0)
    assert "symlink" in proc.stderr and name in proc.stderr and "Traceback" not in proc.stderr
    assert snapshot(home) == before
    # The listing still works (the linked log reads as absent) and says why.
    proc = claude.run("sessions", "--project", project, "--json")
    assert proc.returncode == 0 and [r["id"] for r in json.loads(proc.stdout)] == [sid]
    assert snapshot(home) == before


@pytest.mark.process
def test_a_linked_state_folder_is_refused_everywhere(claude, hostile) -> None:
    project, sid, home = hostile
    before = snapshot(home)
    (Path(project) / ".c3").symlink_to(home)
    mark = claude.run("mark", "stale", sid, "--reason", "x", "--project", project)
    task = claude.run("tasks", "add", "--title", "t", "--project", project)
    for proc in (mark, task):
        assert proc.returncode == 1 and "symlink" in proc.stderr and "Traceback" not in proc.stderr
    listing = claude.run("sessions", "--project", project, "--json")
    assert listing.returncode == 0 and [r["id"] for r in json.loads(listing.stdout)] == [sid]
    assert snapshot(home) == before


@pytest.mark.process
@pytest.mark.parametrize("name", ["pm", "sessions", "cache"])
def test_linked_subfolders_are_refused(claude, hostile, name) -> None:
    project, _sid, home = hostile
    before = snapshot(home)
    (c3(project) / name).symlink_to(home)
    assert claude.run("sessions", "--project", project, "--json").returncode == 0
    proc = claude.run("tasks", "add", "--title", "t", "--project", project)
    if name == "pm":
        assert proc.returncode == 1 and "symlink" in proc.stderr
    assert claude.run("tasks", "list", "--project", project).returncode in (0, 1)
    assert snapshot(home) == before


@pytest.mark.process
def test_a_fifo_log_never_blocks(claude, hostile) -> None:
    project, sid, _home = hostile
    os.mkfifo(c3(project) / "activity.jsonl")
    os.mkfifo(c3(project) / "session_marks.jsonl")
    start = time.monotonic()
    listing = claude.run("sessions", "--project", project, "--json")
    mark = claude.run("mark", "note", sid, "--summary", "s", "--project", project)
    assert time.monotonic() - start < 60
    assert listing.returncode == 0, listing.stderr
    assert mark.returncode == 1 and "FIFO" in mark.stderr


def test_appends_and_replaces_never_follow_links(tmp_path) -> None:
    state = tmp_path / "p" / ".c3"
    state.mkdir(parents=True)
    target = tmp_path / "target.txt"
    target.write_bytes(b"keep\n")
    (state / "log.jsonl").symlink_to(target)
    with pytest.raises(safefs.UnsafeState, match="symlink"):
        jsonl.append(state / "log.jsonl", {"a": 1})
    with pytest.raises(safefs.UnsafeState):
        safefs.read_bytes(state / "log.jsonl")
    # A lock file that is a link is refused too (it would create or lock the target).
    (state / "doc.json.lock").symlink_to(tmp_path / "elsewhere.lock")
    with pytest.raises(safefs.UnsafeState):
        jsondoc.update(state / "doc.json", dict, dict, lambda d: d.update(a=1))
    assert not (tmp_path / "elsewhere.lock").exists()
    # An atomic replace replaces a link as a name: the target is never written.
    (state / "rec.json").symlink_to(target)
    safefs.write_atomic(state / "rec.json", b"{}")
    assert target.read_bytes() == b"keep\n" and not (state / "rec.json").is_symlink()


def test_a_link_in_the_middle_of_the_chain_is_refused(tmp_path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    state = tmp_path / "p" / ".c3"
    state.mkdir(parents=True)
    (state / "pm").symlink_to(elsewhere)
    with pytest.raises(safefs.UnsafeState, match=r"pm.*symlink"):
        safefs.write_atomic(state / "pm" / "pm.json", b"{}")
    assert list(elsewhere.iterdir()) == []


# --- JSON nested past the recursion limit ------------------------------------------------------


def test_deep_lines_in_logs_are_skipped_and_counted(tmp_path) -> None:
    path = tmp_path / ".c3" / "log.jsonl"
    jsonl.append(path, {"ts": 1.0, "kind": "a"})
    jsonl.append(path, DEEP + b"\n")
    jsonl.append(path, {"ts": 2.0, "kind": "b"})
    batch = jsonl.read_all(path, dict)
    assert [r["kind"] for r in batch.records] == ["a", "b"] and batch.skipped == 1


@pytest.mark.process
def test_deep_state_never_breaks_a_listing(claude, hostile) -> None:
    project, sid, _home = hostile
    state = c3(project)
    (state / "config.json").write_bytes(b'{"idle_days": ' + DEEP + b"}")
    (state / "session_marks.jsonl").write_bytes(DEEP + b"\n")
    (state / "activity.jsonl").write_bytes(b'{"ts": 1, "kind": "session_start", "session_id": ' + DEEP + b"}\n")
    (state / "sessions").mkdir()
    (state / "sessions" / "x.json").write_bytes(DEEP)
    (state / "cache").mkdir()
    (state / "cache" / "session_catalog.json").write_bytes(DEEP)
    claude.c3home.mkdir(parents=True, exist_ok=True)
    (claude.c3home / "config.json").write_bytes(DEEP)
    proc = claude.run("sessions", "--project", project, "--json")
    assert proc.returncode == 0, proc.stderr
    assert [r["id"] for r in json.loads(proc.stdout)] == [sid]
    proc = claude.run("mark", "note", sid, "--summary", "still works", "--project", project)
    assert proc.returncode == 0, proc.stderr
    assert claude.rows_by_id(project)[sid]["note"]["summary"] == "still works"


@pytest.mark.process
def test_a_deep_registry_or_pm_file_is_a_clear_error(claude, hostile) -> None:
    project, _sid, _home = hostile
    claude.c3home.mkdir(parents=True, exist_ok=True)
    (claude.c3home / "projects.json").write_bytes(b'{"version": 1, "projects": ' + DEEP + b"}")
    proc = claude.run("sessions", "--all")
    assert proc.returncode == 1 and "projects.json" in proc.stderr and "does not parse" in proc.stderr
    assert "Traceback" not in proc.stderr
    (c3(project) / "pm").mkdir()
    (c3(project) / "pm" / "pm.json").write_bytes(DEEP)
    proc = claude.run("tasks", "add", "--title", "t", "--project", project)
    assert proc.returncode == 1 and "pm.json" in proc.stderr and "Traceback" not in proc.stderr
    assert (c3(project) / "pm" / "pm.json").read_bytes() == DEEP  # left untouched


@pytest.mark.process
def test_a_hook_never_records_what_breaks_a_reader(claude, hostile) -> None:
    import subprocess
    import sys

    project, sid, _home = hostile
    env = claude.env(CLAUDE_PROJECT_DIR=project)
    payloads = [
        b'{"hook_event_name": "SessionStart", "session_id": "' + sid.encode() + b'", "transcript_path": ' + DEEP + b"}",
        json.dumps(
            {
                "hook_event_name": "SessionStart",
                "session_id": sid,
                "source": {"x": [1]},
                "transcript_path": {"nested": [[[1]]]},
            }
        ).encode(),
        json.dumps({"hook_event_name": "SessionStart", "session_id": "not-a-uuid"}).encode(),
        json.dumps({"hook_event_name": "SessionStart", "session_id": sid + "\n"}).encode(),
        b'{"hook_event_name": "SessionEnd", "session_id": "\\ud800"}',
        b"\xff\xfe" * 1000,
        DEEP,
    ]
    for data in payloads:
        proc = subprocess.run(
            [sys.executable, "-m", "c3async", "hook"], input=data, env=env, capture_output=True, timeout=60
        )
        assert proc.returncode == 0 and proc.stdout == b"", proc.stderr
    rows = [json.loads(line) for line in (c3(project) / "activity.jsonl").read_bytes().splitlines()]
    # Only the well-formed session id was recorded, with the ill-typed fields left out.
    assert [r["session_id"] for r in rows] == [sid]
    assert "source" not in rows[0] and "transcript_path" not in rows[0]
    assert claude.run("sessions", "--project", project, "--json").returncode == 0


# --- forward compatibility ------------------------------------------------------------------


def test_pm_keeps_fields_it_does_not_know(tmp_path) -> None:
    project = str(tmp_path)
    who = actions.Who(session=None, by="user")
    task = actions.run(resolve(project), who, "add", title="first")
    path = store.file_path(resolve(project))
    doc = json.loads(path.read_bytes())
    doc["tasks"][0]["estimate"] = {"hours": 3}
    doc["sprints"] = [{"id": "s1", "name": "Sprint 1"}]
    doc["milestones"] = [{"id": "m1", "name": "v1", "color": "red"}]
    path.write_text(json.dumps(doc))
    actions.run(resolve(project), who, "update", task_id=task["id"], status="in_progress")
    actions.run(resolve(project), who, "add", title="second")
    after = json.loads(path.read_bytes())
    assert after["tasks"][0]["estimate"] == {"hours": 3} and after["tasks"][0]["status"] == "in_progress"
    assert after["sprints"] == [{"id": "s1", "name": "Sprint 1"}]
    assert after["milestones"][0]["color"] == "red"
    assert len(after["tasks"]) == 2
    backup = json.loads(jsondoc.backup_path(path).read_bytes())
    assert backup["sprints"] and backup["tasks"][0]["estimate"] == {"hours": 3}


def test_a_newer_pm_is_read_but_never_rewritten(tmp_path) -> None:
    project = str(tmp_path)
    who = actions.Who(session=None, by="user")
    actions.run(resolve(project), who, "add", title="first")
    path = store.file_path(resolve(project))
    doc = json.loads(path.read_bytes())
    doc["version"] = 99
    data = json.dumps(doc).encode()
    path.write_bytes(data)
    assert [t["title"] for t in actions.run(resolve(project), who, "list")["tasks"]] == ["first"]
    with pytest.raises(C3Error, match=r"newer c3async.*version 99.*Upgrade"):
        actions.run(resolve(project), who, "add", title="second")
    assert path.read_bytes() == data
