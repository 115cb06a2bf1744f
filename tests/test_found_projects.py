"""Everything Claude Code has, from the first command: on a machine whose Claude Code already holds
projects c3async never saw, ``sessions --all``, ``projects``, ``live --all``, ``search`` and the Hub
list them all, found from the cwd each transcript folder's sessions recorded; nothing is written
into a found project's folder; a folder that is gone is listed as missing with its sessions; a
mistyped ``--project`` is still a usage error; a folder with no sessions says where they are."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hubproc import Hub

from stress.transcripts import claude_slug, simple_session

pytestmark = pytest.mark.process


def machine(claude, names=("alpha", "beta", "gamma")) -> dict[str, tuple[str, list[str]]]:
    """Projects with two sessions each in Claude Code's folder, none of them registered."""
    out = {}
    for name in names:
        project = claude.project(name)
        folder = claude.folder(project)
        out[name] = (project, [simple_session(folder, project, f"{name} work {i}") for i in range(2)])
    return out


def test_a_fresh_install_lists_every_project_and_writes_into_none(claude) -> None:
    world = machine(claude)
    proc = claude.run("sessions", "--all", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert {r["id"] for r in rows} == {sid for _, ids in world.values() for sid in ids}
    assert {r["project"] for r in rows} == {p for p, _ in world.values()}
    for project, _ in world.values():
        assert not Path(project, ".c3").exists()  # found, not registered: left alone
    listed = json.loads(claude.run("projects", "--json").stdout)
    assert [(p["path"], p["registered"], p["missing"], p["sessions"]) for p in listed] == sorted(
        (p, False, False, 2) for p, _ in world.values()
    )
    assert not (claude.c3home / "projects.json").exists()  # nobody registered anything
    warm = claude.run("sessions", "--all", "--json")  # from the caches kept under $C3_HOME
    assert json.loads(warm.stdout) == rows


def test_a_gone_folder_is_missing_and_its_sessions_stay(claude) -> None:
    world = machine(claude)
    gone, ids = world["beta"]
    shutil.rmtree(gone)
    proc = claude.run("sessions", "--all", "--json")
    assert proc.returncode == 0 and gone in proc.stderr, proc.stderr
    assert set(ids) <= {r["id"] for r in json.loads(proc.stdout)}
    listed = {p["path"]: p for p in json.loads(claude.run("projects", "--json").stdout)}
    assert listed[gone]["missing"] and listed[gone]["sessions"] == 2
    text = claude.run("projects").stdout
    assert "missing" in text and "found" in text


def test_a_mistyped_project_stays_a_usage_error(claude) -> None:
    machine(claude)
    proc = claude.run("sessions", "--all", "--project", str(claude.root / "work" / "alpah"))
    assert proc.returncode == 2 and "alpah" in proc.stderr


def test_a_folder_without_sessions_says_where_they_are(claude) -> None:
    machine(claude)
    empty = claude.project("checkout")
    proc = claude.run("sessions", cwd=empty)
    assert proc.returncode == 0 and proc.stdout == ""
    assert "6 sessions of 3 other projects" in proc.stderr and "sessions --all" in proc.stderr, proc.stderr


def test_two_paths_that_share_a_folder_are_two_projects(claude) -> None:
    """``a-b`` and ``a_b`` have one slug: Claude Code keeps both in one folder; both are listed."""
    dash, under = claude.project("a-b"), claude.project("a_b")
    folder = claude.folder(dash)
    assert claude.folder(under) == folder
    one = simple_session(folder, dash, "the dash one")
    other = simple_session(folder, under, "the underscore one")
    rows = json.loads(claude.run("sessions", "--all", "--json").stdout)
    assert {(r["id"], r["project"]) for r in rows} == {(one, dash), (other, under)}


def test_found_across_config_dirs_and_live(claude) -> None:
    work = claude.root / "work-claude"
    project = claude.project("billing")
    folder = work / "projects" / claude_slug(project)
    folder.mkdir(parents=True)
    sid = simple_session(folder, project, "work account: the billing job")
    env = claude.env(CLAUDE_CONFIG_DIRS=str(work))
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        import psutil

        (work / "sessions").mkdir()
        (work / "sessions" / f"{proc.pid}.json").write_text(
            json.dumps(
                {
                    "pid": proc.pid,
                    "sessionId": sid,
                    "cwd": project,
                    "startedAt": int(psutil.Process(proc.pid).create_time() * 1000),
                    "status": "busy",
                }
            )
        )
        live = json.loads(claude.run("live", "--all", "--json", env=env).stdout)
        assert [(e["id"], e["state"]) for e in live] == [(sid, "busy")]
    finally:
        proc.stdin.close()
        proc.wait()
    rows = json.loads(claude.run("sessions", "--all", "--json", env=env).stdout)
    assert [(r["id"], r["root"]) for r in rows] == [(sid, str(work))]


def test_the_hub_lists_found_projects(claude) -> None:
    world = machine(claude, ("alpha", "beta"))
    registered, _ = world["alpha"]
    assert claude.run("sessions", "--project", registered).returncode == 0  # listing a folder registers it
    with Hub(claude) as h, h.client() as c:
        projects = {p["path"]: p for p in c.get("/api/projects").json()["projects"]}
        assert {p: (e["registered"], e["missing"]) for p, e in projects.items()} == {
            registered: (True, False),
            world["beta"][0]: (False, False),
        }
        rows = c.get("/api/rows").json()["rows"]
        assert {r["id"] for r in rows} == {sid for _, ids in world.values() for sid in ids}
    assert not Path(world["beta"][0], ".c3").exists()


def test_marking_a_found_projects_session_registers_it(claude) -> None:
    world = machine(claude, ("alpha", "beta"))
    here, _ = world["alpha"]
    there, ids = world["beta"]
    assert claude.run("sessions", "--all").returncode == 0
    proc = claude.run("mark", "note", ids[0][:8], "--summary", "picked up", "--project", here)
    assert proc.returncode == 0 and there in proc.stderr, proc.stderr
    assert (Path(there, ".c3") / "session_marks.jsonl").exists()
    entries = json.loads((claude.c3home / "projects.json").read_text())["projects"]
    assert [e["path"] for e in entries] == [there]
    rows = {r["id"]: r for r in claude.sessions(there)}
    assert rows[ids[0]]["note"]["summary"] == "picked up"
    assert os.listdir(Path(there, ".c3"))  # its own state from now on
