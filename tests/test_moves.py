"""Moved and renamed folders, through the CLI: a git project moved (the same root commit) and a
folder renamed with its ``.c3`` (the same project id) are said "moved?"; ``projects --move OLD
NEW`` makes OLD's sessions NEW's (cwd, resume command, marks, notes and tasks), every door agrees,
and ``--move NEW OLD`` leaves Claude Code's folders byte for byte (names, inodes, contents) as
they were before. And what it refuses: NEW a symlink or the home folder, a file NEW's folder has
already, a ``moves.json`` that does not parse, moves at once (``stress/hostile_moves.py`` has the
rest: links in Claude Code's folders, forged records, thousands of sessions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stress.transcripts import claude_slug, simple_session

pytestmark = pytest.mark.process


def _git(path: str) -> None:
    subprocess.run(["git", "init", "-q", path], check=True)
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "start"],
        cwd=path,
        check=True,
    )


def _snapshot(root: Path) -> dict[str, object]:
    """Every name under ``root`` with its inode and bytes (folders: their names only)."""
    out: dict[str, object] = {}
    for here, dirs, files in os.walk(root):
        for name in dirs:
            out[os.path.relpath(os.path.join(here, name), root)] = "folder"
        for name in files:
            path = os.path.join(here, name)
            out[os.path.relpath(path, root)] = (os.lstat(path).st_ino, Path(path).read_bytes())
    return out


def _with_side_files(folder: Path, sid: str) -> None:
    """A sub-agent transcript and a tool result in the session's folder, as Claude Code keeps them."""
    (folder / sid / "subagents").mkdir(parents=True)
    (folder / sid / "subagents" / "agent-a1.jsonl").write_text('{"type":"user","isSidechain":true}\n')
    (folder / sid / "tool-results").mkdir()
    (folder / sid / "tool-results" / "toolu_01.txt").write_text("a long tool result\n")


def _projects(claude) -> dict[str, dict]:
    proc = claude.run("projects", "--json")
    assert proc.returncode == 0, proc.stderr
    return {p["path"]: p for p in json.loads(proc.stdout)}


def _moved(claude) -> list[dict]:
    path = claude.c3home / "moves.json"
    return json.loads(path.read_text())["moves"] if path.exists() else []


def test_a_git_project_moved_is_said_moved_then_its_sessions_are_the_new_folders_and_the_undo_is_exact(claude):
    old = claude.project("app")
    _git(old)
    folder = claude.folder(old)
    first, second = simple_session(folder, old, "wire the importer"), simple_session(folder, old, "test it")
    _with_side_files(folder, first)
    assert _projects(claude)[old]["moved_to"] is None  # seen while it exists: its root commit is kept
    new = os.path.join(os.path.dirname(old), "app-renamed")
    os.rename(old, new)
    third = simple_session(claude.folder(new), new, "carry on in the new folder")
    noted = claude.run("mark", "note", first[:8], "--summary", "halfway", "--next", "the tests")
    assert noted.returncode == 0, noted.stderr  # marked while its folder is gone: kept under $C3_HOME

    listed = _projects(claude)
    assert listed[old]["missing"] and listed[old]["moved_to"] == new
    assert listed[old]["moved_why"] == "the same git root commit"
    text = claude.run("projects").stdout
    assert f"moved? {old} \u2192 {new}" in text and f"--move {old} {new}" in text

    before = _snapshot(claude.projects_root)
    moved = claude.run("projects", "--move", old, new, "--json")
    assert moved.returncode == 0, moved.stderr
    done = json.loads(moved.stdout)
    assert (done["sessions"], done["linked"], done["copied"], done["undone"]) == (2, 4, 0, False)
    linked = claude.folder(new) / f"{first}.jsonl"
    assert linked.stat().st_ino == (folder / f"{first}.jsonl").stat().st_ino  # a second name, nothing copied
    assert (claude.folder(new) / first / "subagents" / "agent-a1.jsonl").exists()

    listed = _projects(claude)
    assert old not in listed and listed[new]["sessions"] == 3 and listed[new]["moved_from"] == [old]
    rows = claude.rows_by_id(new)
    assert set(rows) == {first, second, third}
    for sid in (first, second):
        assert rows[sid]["cwd"] == new and rows[sid]["resume"] == f"cd {new} && claude --resume {sid}"
    assert rows[first]["note"]["summary"] == "halfway" and rows[first]["note"]["next_steps"] == "the tests"
    everything = json.loads(claude.run("sessions", "--all", "--json").stdout)
    assert {r["project"] for r in everything if r["id"] in (first, second, third)} == {new}
    resumed = claude.run("resume", first[:8], "--print", cwd=new)
    assert resumed.returncode == 0 and resumed.stdout.strip() == f"cd {new} && claude --resume {first}", resumed.stderr
    shown = claude.run("show", first[:8], "--json", cwd=claude.project("elsewhere"))  # any id, from any folder
    assert shown.returncode == 0 and json.loads(shown.stdout)["row"]["cwd"] == new, shown.stderr

    undone = claude.run("projects", "--move", new, old)
    assert undone.returncode == 0 and "undone" in undone.stdout, undone.stderr
    assert _snapshot(claude.projects_root) == before  # names, inodes, contents: as before the move
    assert _moved(claude) == []
    listed = _projects(claude)
    assert listed[old]["missing"] and listed[old]["moved_to"] == new  # and it can be moved again


def test_a_renamed_folder_carries_its_c3_and_its_marks_notes_and_tasks_follow(claude):
    old = claude.project("notes")
    folder = claude.folder(old)
    sid = simple_session(folder, old, "draft the plan")
    assert claude.run("mark", "note", sid[:8], "--summary", "plan drafted", "--project", old).returncode == 0
    task = json.loads(claude.run("tasks", "add", "--title", "ship it", "--project", old, "--json").stdout)
    assert claude.run("tasks", "link", task["id"], sid[:8], "--project", old).returncode == 0
    assert Path(old, ".c3", "project.json").exists()  # made with its .c3
    added = json.loads((claude.c3home / "projects.json").read_text())["projects"][0]["added"]
    _projects(claude)
    new = os.path.join(os.path.dirname(old), "notes-2026")
    os.rename(old, new)
    simple_session(claude.folder(new), new, "go on")

    listed = _projects(claude)
    assert (listed[old]["moved_to"], listed[old]["moved_why"]) == (new, "the same project id")
    before = _snapshot(claude.projects_root)
    assert claude.run("projects", "--move", old, new).returncode == 0
    row = claude.rows_by_id(new)[sid]
    assert row["cwd"] == new and row["note"]["summary"] == "plan drafted"
    assert [t["title"] for t in row["links"]["tasks"]] == ["ship it"]
    registry = json.loads((claude.c3home / "projects.json").read_text())["projects"]
    assert [(p["path"], p["added"]) for p in registry] == [(new, added)]  # OLD's entry became NEW's

    assert claude.run("projects", "--move", new, old).returncode == 0
    assert _snapshot(claude.projects_root) == before


def test_a_folder_still_there_moves_too_and_its_state_is_folded_not_moved(claude):
    old, new = claude.project("copy-a"), claude.project("copy-b")
    sid = simple_session(claude.folder(old), old, "the original")
    assert claude.run("mark", "stale", sid[:8], "--reason", "superseded", "--project", old).returncode == 0
    marks = Path(old, ".c3", "session_marks.jsonl").read_bytes()
    proc = claude.run("projects", "--move", old, new, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["folded"] == [os.path.join(old, ".c3")]
    assert Path(old, ".c3", "session_marks.jsonl").read_bytes() == marks  # OLD's own state as it was
    assert claude.rows_by_id(new)[sid]["stale"]["reason"] == "superseded"
    assert claude.run("sessions", "--project", old).returncode == 0  # used again: registered again
    assert old not in _projects(claude)  # but its sessions are NEW's: it is not listed on its own
    again = json.loads(claude.run("projects", "--move", old, new, "--json").stdout)  # run again: nothing twice
    assert (again["linked"], again["present"]) == (0, 1)
    assert len(_moved(claude)) == 1


def test_a_file_the_new_folder_has_is_never_overwritten(claude):
    old, new = claude.project("mine"), claude.project("theirs")
    sid = simple_session(claude.folder(old), old, "ours")
    clash = claude.folder(new) / f"{sid}.jsonl"
    clash.write_text("their own bytes\n")
    proc = claude.run("projects", "--move", old, new)
    assert proc.returncode == 0 and f"kept {clash}" in proc.stderr, proc.stderr
    assert clash.read_text() == "their own bytes\n"
    assert claude.run("projects", "--move", new, old).returncode == 0
    assert clash.read_text() == "their own bytes\n"


def test_what_it_refuses_is_named(claude):
    old = claude.project("src")
    simple_session(claude.folder(old), old, "work")
    target = claude.project("dst")
    link = claude.root / "work" / "dst-link"
    link.symlink_to(target)
    home = claude.project("home")
    env = claude.env(HOME=home)
    empty = claude.project("empty")
    for args, word in (
        ((old, str(link)), "symlink"),
        ((old, home), "home folder"),
        ((old, str(claude.root / "work" / "nowhere")), "not a folder"),
        ((old, os.path.join(old, "sub")), "inside"),
        ((empty, target), "no sessions"),
        ((old, old), "same folder"),
        ((old, str(claude.config)), "not a project"),
    ):
        if word == "inside":
            os.makedirs(args[1], exist_ok=True)
        proc = claude.run("projects", "--move", *args, env=env)
        assert proc.returncode in (1, 2) and word in proc.stderr and "Traceback" not in proc.stderr, (args, proc.stderr)
    assert _moved(claude) == [] and not (claude.projects_root / claude.folder(target).name / "x").exists()
    assert not list(claude.folder(target).iterdir())  # nothing was put anywhere


def test_a_moves_file_that_does_not_parse_is_never_rewritten_and_listings_go_on(claude):
    old, new = claude.project("one"), claude.project("two")
    sid = simple_session(claude.folder(old), old, "work")
    moves = claude.c3home / "moves.json"
    moves.parent.mkdir(parents=True, exist_ok=True)
    moves.write_text("{not json")
    proc = claude.run("projects", "--move", old, new)
    assert proc.returncode == 1 and "moves.json" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert moves.read_text() == "{not json"  # never overwritten
    listed = claude.run("sessions", "--project", old, "--json")
    assert listed.returncode == 0 and sid in listed.stdout and "moves.json" in listed.stderr


def test_moves_at_once_make_one_record_and_link_each_file_once(claude):
    old, new = claude.project("busy"), claude.project("calm")
    ids = [simple_session(claude.folder(old), old, f"task {i}") for i in range(5)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "c3async", "projects", "--move", old, new, "--json"],
            env=claude.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outs = [(p.wait(timeout=120), p.stdout.read(), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    assert all(code == 0 for code, _, _ in outs), outs
    assert sum(json.loads(out)["linked"] for _, out, _ in outs) == 5
    records = _moved(claude)
    assert len(records) == 1 and len(records[0]["added"]) == 5
    assert set(claude.rows_by_id(new)) == set(ids)


def test_every_door_gives_the_moved_sessions_as_the_new_folders(claude):
    import anyio
    from hubproc import Hub
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    old = claude.project("door")
    sid = simple_session(claude.folder(old), old, "the moved one")
    new = os.path.join(os.path.dirname(old), "door-moved")
    os.rename(old, new)
    assert claude.run("projects", "--move", old, new).returncode == 0
    with Hub(claude) as h, h.client() as c:
        projects = {p["path"] for p in c.get("/api/projects").json()["projects"]}
        assert new in projects and old not in projects
        rows = c.get("/api/rows", params={"project": new}).json()["rows"]
        assert [(r["id"], r["cwd"], r["project"]) for r in rows] == [(sid, new, new)]
        detail = c.get(f"/api/sessions/{sid}", params={"project": new}).json()
        assert detail["row"]["resume"] == f"cd {new} && claude --resume {sid}"

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "c3async", "serve"], env=claude.env(CLAUDE_PROJECT_DIR=new), cwd=new
    )

    async def ask() -> list[str]:
        with open(claude.root / "serve.err", "w") as err:
            async with Client(stdio_client(params, errlog=err), mode="legacy") as mcp:
                out = []
                for args in ({"action": "list"}, {"action": "show", "target": sid[:8]}):
                    result = await mcp.call_tool("c3_session", args)
                    assert not result.is_error, result
                    out.append("".join(getattr(x, "text", "") for x in result.content or []))
                return out

    listed, shown = anyio.run(ask)
    assert sid[:8] in listed and "the moved one" in listed
    assert f"cd {new} && claude --resume {sid}" in shown


def test_a_session_on_another_device_is_copied_with_its_mtime_and_the_undo_keeps_a_copy_that_grew(claude):
    from stress.fulldisk import mounted

    with mounted(claude.root / "other-disk") as other:
        if other is None:
            pytest.skip("mounting a tmpfs needs root")
        old, new = claude.project("far"), claude.project("near")
        away = other / "far-sessions"  # Claude Code's folder of OLD, symlinked to another device
        away.mkdir()
        (claude.projects_root / claude_slug(old)).symlink_to(away)
        grown, untouched = simple_session(away, old, "will grow"), simple_session(away, old, "stays")
        before = _snapshot(claude.projects_root)
        proc = claude.run("projects", "--move", old, new, "--json")
        assert proc.returncode == 0, proc.stderr
        assert (json.loads(proc.stdout)["copied"], json.loads(proc.stdout)["linked"]) == (2, 0)
        for sid in (grown, untouched):
            copy, original = claude.folder(new) / f"{sid}.jsonl", away / f"{sid}.jsonl"
            assert copy.read_bytes() == original.read_bytes()
            assert copy.stat().st_mtime_ns == original.stat().st_mtime_ns  # Claude Code's cleanup goes by it
        assert set(claude.rows_by_id(new)) == {grown, untouched}
        with open(claude.folder(new) / f"{grown}.jsonl", "a") as f:  # resumed in NEW: the copy grew
            f.write('{"type":"last-prompt","lastPrompt":"more"}\n')
        proc = claude.run("projects", "--move", new, old)
        assert proc.returncode == 0 and "changed since it was copied" in proc.stderr, proc.stderr
        after = _snapshot(claude.projects_root)
        here = claude_slug(new)
        assert set(after) - set(before) == {here, os.path.join(here, f"{grown}.jsonl")}  # the grown copy stays


def test_a_move_cut_short_before_its_record_is_completed_by_running_it_again(claude):
    old, new = claude.project("cut-a"), claude.project("cut-b")
    ids = [simple_session(claude.folder(old), old, f"step {i}") for i in range(2)]
    before = _snapshot(claude.projects_root)
    # what a move stopped by Ctrl-C after its first link, before writing its record, leaves
    os.link(claude.folder(old) / f"{ids[0]}.jsonl", claude.folder(new) / f"{ids[0]}.jsonl")
    done = json.loads(claude.run("projects", "--move", old, new, "--json").stdout)
    assert (done["linked"], done["present"]) == (1, 1)
    assert sorted(os.path.basename(a["path"]) for a in _moved(claude)[0]["added"]) == sorted(f"{i}.jsonl" for i in ids)
    assert claude.run("projects", "--move", new, old).returncode == 0
    after = _snapshot(claude.projects_root)
    assert after.pop(claude_slug(new)) == "folder"  # made by the run cut short, unrecorded: empty, it stays
    assert after == before


@pytest.mark.parametrize("kind", ["git", "not git"])
def test_a_project_only_ever_listed_is_said_moved(claude, kind):
    """A person who listed the project (never ran ``projects``) before moving its folder: what it
    was is noted when it is registered, so ``projects`` still says where it went."""
    old = claude.project(f"listed-{kind.replace(' ', '-')}")
    if kind == "git":
        _git(old)
    simple_session(claude.folder(old), old, "work before the move")
    assert claude.run("sessions", "--project", old).returncode == 0  # registers it, as a user does
    new = old + "-moved"
    os.rename(old, new)
    simple_session(claude.folder(new), new, "work after the move")
    listed = _projects(claude)
    assert listed[old]["missing"] and listed[old]["moved_to"] == new, listed[old]
