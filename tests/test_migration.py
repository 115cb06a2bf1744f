"""State that earlier versions wrote into a worktree's ``.c3`` folds into the repository's root
once: marks, activity, stats, C3 records, pm.json; idempotent, from several processes at once;
the old folder renamed aside, never deleted; a symlinked ``.c3`` left alone; marks by time."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest
from test_state_root import git, repo, worktree

from c3async.ground import jsonl, paths, safefs, stateroot
from c3async.ground.project import resolve
from c3async.stores import activity, marks, records
from c3async.tasks import store

A = "aaaa1111-0000-4000-8000-000000000001"
B = "bbbb2222-0000-4000-8000-000000000002"
C = "cccc3333-0000-4000-8000-000000000003"


@pytest.fixture
def world(claude, monkeypatch, tmp_path):
    claude.activate(monkeypatch)
    for module, name in ((paths, "_roots"), (stateroot, "_states"), (stateroot, "_resolved"), (paths, "_warned")):
        monkeypatch.setattr(module, name, type(getattr(module, name))())
    base = tmp_path / "w"
    base.mkdir()
    return Path(os.path.realpath(base))


def mark_line(sid: str, op: str, ts: float, **fields) -> bytes:
    defaults = {"reason": "r"} if op != "note" else {"summary": "s"}
    return jsonl.encode_line(marks.Mark(ts=ts, id=sid, op=op, by="user", **{**defaults, **fields}))


def row(ts: float, kind: str, **fields) -> bytes:
    return json.dumps({"ts": ts, "kind": kind, **fields}, separators=(",", ":")).encode() + b"\n"


def put(path: Path, data: bytes | str | dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, dict):
        data = json.dumps(data, indent=1)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def record(c3_id: str, host: str, cwd: str) -> dict:
    return {"version": 1, "c3_session_id": c3_id, "host_session_ids": [host], "cwd": cwd, "started": 1.0}


def task(tid: str, title: str, updated: float, sessions: list[str], **extra) -> dict:
    return {
        "id": tid,
        "title": title,
        "status": "backlog",
        "priority": "p2",
        "created": 1.0,
        "updated": updated,
        "sessions": sessions,
        **extra,
    }


def event(ts: float, action: str, target: str) -> dict:
    return {"ts": ts, "action": action, "target": target, "session": None, "by": "agent", "changes": {}}


SHARED_MARK = mark_line(C, "note", 50.0, summary="written in both places")


def build(world: Path) -> tuple[str, str, str]:
    """A repository with two worktrees, each holding state an earlier version wrote there, and
    state of its own in the main checkout."""
    main = repo(world)
    wt1 = worktree(main, "../wt1", "one")
    wt2 = worktree(main, "../wt2", "two")
    root, s1, s2 = Path(main, ".c3"), Path(wt1, ".c3"), Path(wt2, ".c3")
    put(root / "session_marks.jsonl", SHARED_MARK + mark_line(A, "stale", 200.0, reason="root, newest"))
    put(
        s1 / "session_marks.jsonl",
        SHARED_MARK
        + mark_line(A, "unstale", 100.0)
        + b"not json\n[1,2]\n"
        + mark_line(B, "stale", 120.0, reason="from wt1")
        + b'{"ts": 1, "torn',
    )
    put(s2 / "session_marks.jsonl", SHARED_MARK + mark_line(B, "note", 130.0, summary="from wt2"))
    put(root / "activity.jsonl", row(1.0, "session_start", session_id="root-1"))
    put(
        s1 / "activity.jsonl",
        row(2.0, "session_start", session_id="wt1-1") + row(3.0, "session_end", session_id="wt1-1"),
    )
    put(s2 / "activity.jsonl", row(4.0, "session_start", session_id="wt2-1"))
    put(s1 / "session_stats.jsonl", b'{"session_id":"wt1-1","ts":3.0,"input":10}\n')
    put(root / "sessions" / "c3-shared.json", record("c3-shared", "root-1", main))
    put(s1 / "sessions" / "c3-shared.json", record("c3-shared", "wt1-other", wt1))
    put(s1 / "sessions" / "c3-wt1.json", record("c3-wt1", "wt1-1", wt1))
    put(s2 / "sessions" / "c3-wt2.json", record("c3-wt2", "wt2-1", wt2))
    put(s1 / "config.json", {"idle_days": 3})
    put(s1 / "live" / "c3-wt1.json", {"session_id": "c3-wt1", "ts": time.time()})
    put(s1 / "cache" / "session_catalog.json", "{}")
    put(s1 / "session_marks.jsonl.lock", b"")
    put(
        root / "pm" / "pm.json",
        {
            "version": 1,
            "tasks": [task("t1", "old title", 10.0, ["s-root"])],
            "milestones": [],
            "decisions": [{"id": "d1", "text": "root decision", "ts": 1.0}],
            "events": [event(10.0, "create", "t1")],
        },
    )
    put(
        s1 / "pm" / "pm.json",
        {
            "version": 1,
            "tasks": [task("t1", "newer title", 20.0, ["s-wt1"], color="blue"), task("t2", "from wt1", 5.0, ["s-wt1"])],
            "milestones": [{"id": "m1", "name": "beta", "status": "open", "created": 3.0}],
            "decisions": [{"id": "d2", "text": "wt1 decision", "ts": 2.0, "session": "s-wt1"}],
            "events": [event(10.0, "create", "t1"), event(20.0, "update", "t1")],
        },
    )
    put(
        s2 / "pm" / "pm.json",
        {
            "version": 1,
            "tasks": [task("t1", "oldest title", 5.0, ["s-wt2", "s-root"]), task("t3", "from wt2", 6.0, [])],
            "decisions": [{"id": "d3", "text": "wt2 decision", "ts": 3.0}],
            "events": [event(5.0, "create", "t3")],
            "notes": [{"text": "a field a newer version keeps"}],
        },
    )
    return main, wt1, wt2


def snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def root_files(main: str) -> dict[str, bytes]:
    state = Path(main, ".c3")
    return {
        str(p.relative_to(state)): p.read_bytes()
        for p in sorted(state.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock")
    }


def check_folded(main: str, wt1: str, wt2: str, probes: int = 0) -> None:
    state = Path(main, ".c3")
    lines = (state / "session_marks.jsonl").read_bytes().splitlines(keepends=True)
    assert len(lines) == len(set(lines)) == 5
    assert lines.count(SHARED_MARK) == 1
    acts = activity.read_rows(resolve(main)).records
    assert sorted(r.session_id for r in acts if r.kind == "session_start") == ["root-1", "wt1-1", "wt2-1"]
    assert len(acts) == 4 + probes
    assert sum(r.kind == "probe" for r in acts) == probes
    assert (state / "session_stats.jsonl").read_bytes() == b'{"session_id":"wt1-1","ts":3.0,"input":10}\n'
    recs = {r.c3_session_id: r for r in records.load_all(resolve(main))}
    assert set(recs) == {"c3-shared", "c3-wt1", "c3-wt2"}
    assert recs["c3-shared"].host_session_ids == ["root-1"]  # the root's own copy stays
    assert json.loads((state / "config.json").read_text()) == {"idle_days": 3}
    assert not (state / "live").exists() and not (state / "cache").exists()
    pm = store.load(resolve(main))  # the merged document is one the store reads
    tasks = {t.id: t for t in pm.tasks}
    assert set(tasks) == {"t1", "t2", "t3"}
    assert tasks["t1"].title == "newer title" and tasks["t1"].updated == 20.0
    assert tasks["t1"].sessions[0] == "s-root"  # the root's links first, then the others'
    assert sorted(tasks["t1"].sessions) == ["s-root", "s-wt1", "s-wt2"]
    assert {d.id for d in pm.decisions} == {"d1", "d2", "d3"}
    assert [m.id for m in pm.milestones] == ["m1"]
    assert [(e.ts, e.action, e.target) for e in pm.events] == [
        (5.0, "create", "t3"),
        (10.0, "create", "t1"),
        (20.0, "update", "t1"),
    ]
    raw = json.loads((state / "pm" / "pm.json").read_text())
    assert raw["notes"] == [{"text": "a field a newer version keeps"}]
    assert next(t for t in raw["tasks"] if t["id"] == "t1")["color"] == "blue"
    for wt in (wt1, wt2):
        assert not Path(wt, ".c3").exists()
        aside = [p for p in Path(wt).iterdir() if p.name.startswith(".c3.folded-")]
        assert len(aside) == 1 and aside[0].is_dir()


def test_two_worktrees_fold_into_the_root_once(world, caplog):
    main, wt1, wt2 = build(world)
    before = {wt: snapshot(Path(wt, ".c3")) for wt in (wt1, wt2)}
    with caplog.at_level(logging.INFO, logger="c3async"):
        folds = stateroot.fold_worktrees(wt2)  # from any checkout
    assert sorted(str(f.source) for f in folds) == [str(Path(wt1, ".c3")), str(Path(wt2, ".c3"))]
    assert all(f.done and not f.problems for f in folds)
    check_folded(main, wt1, wt2)
    # Never deleted: the renamed folder holds exactly what it held, live/ and cache/ included.
    for wt in (wt1, wt2):
        aside = next(p for p in Path(wt).iterdir() if p.name.startswith(".c3.folded-"))
        kept = snapshot(aside)
        assert kept.pop(".gitignore")  # so that git does not list it, nor refuse to remove the worktree
        assert kept == before[wt]
    infos = [r.getMessage() for r in caplog.records if r.getMessage().startswith("folded ")]
    assert len(infos) == 2
    # Again: nothing to fold, nothing changes.
    after = root_files(main)
    assert stateroot.fold_worktrees(main) == []
    assert root_files(main) == after
    # `git worktree remove` needs no --force, and loses nothing.
    status = subprocess.run(["git", "status", "--porcelain"], cwd=wt1, capture_output=True, text=True, check=True)
    assert status.stdout == ""
    git("worktree", "remove", wt1, cwd=main)
    assert not Path(wt1).exists()
    assert root_files(main) == after


def test_a_fold_run_again_over_the_same_folder_adds_nothing(world, monkeypatch):
    main, wt1, wt2 = build(world)
    real_rename = safefs.rename

    def refuse(src, dst):
        raise PermissionError(13, "read-only worktree", str(src))

    monkeypatch.setattr(safefs, "rename", refuse)
    folds = stateroot.fold_worktrees(main)
    assert len(folds) == 2 and not any(f.done for f in folds)
    assert Path(wt1, ".c3").is_dir() and Path(wt2, ".c3").is_dir()  # left in place
    after = root_files(main)
    for _ in range(2):  # a later process tries again: the same rows, tasks and records
        stateroot._resolved.clear()
        folds = stateroot.fold_worktrees(main)
        assert root_files(main) == after
        assert all(sum(f.lines.values()) == 0 and f.records == 0 and f.pm_items == 0 for f in folds)
    monkeypatch.setattr(safefs, "rename", real_rename)
    assert all(f.done for f in stateroot.fold_worktrees(main))
    assert root_files(main) == after
    check_folded(main, wt1, wt2)


FOLDER = """
import sys, time
from pathlib import Path
start = Path(sys.argv[2])
Path(sys.argv[4]).touch()  # ready
while not start.exists():
    time.sleep(0.001)
if sys.argv[3] == "explicit":
    from c3async.ground import stateroot
    stateroot.fold_worktrees(sys.argv[1])
else:  # the first resolution of the root in this process folds
    from c3async.stores import activity
    from c3async.ground.project import resolve
    activity.record(resolve(sys.argv[1]), "probe")
"""


@pytest.mark.process
def test_many_processes_fold_at_once_without_duplicates(world, claude):
    main, wt1, wt2 = build(world)
    start = world / "go"
    ready = [world / f"ready-{n}" for n in range(6)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", FOLDER, target, str(start), how, str(mark)],
            env=claude.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for mark, (target, how) in zip(
            ready,
            [
                (main, "explicit"),
                (wt1, "explicit"),
                (wt2, "first-use"),
                (main, "first-use"),
                (wt1, "first-use"),
                (wt2, "explicit"),
            ],
        )
    ]
    deadline = time.monotonic() + 60
    while not all(r.exists() for r in ready):  # all six wait at the start line
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "the folders did not start"
        time.sleep(0.01)
    start.touch()
    for proc in procs:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        assert b"Traceback" not in err, err.decode()
    check_folded(main, wt1, wt2, probes=3)


@pytest.mark.process
def test_the_first_resolution_in_a_new_process_folds(world, claude):
    main, wt1, wt2 = build(world)
    code = (
        "from c3async.ground.project import resolve; from c3async.stores import activity; "
        f"activity.record(resolve({wt1!r}), 'session_start', session_id='after-upgrade')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=claude.env(), capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert not Path(wt1, ".c3").exists() and not Path(wt2, ".c3").exists()
    ids = [r.session_id for r in activity.read_rows(resolve(main)).records]
    assert ids[-1] == "after-upgrade" and {"wt1-1", "wt2-1", "root-1"} <= set(ids)


def test_a_symlinked_worktree_state_is_left_alone(world, caplog):
    main = repo(world)
    wt = worktree(main, "../wt", "feature")
    elsewhere = world / "elsewhere"
    put(elsewhere / "session_marks.jsonl", mark_line(A, "stale", 1.0))
    Path(wt, ".c3").symlink_to(elsewhere)
    before = snapshot(elsewhere)
    with caplog.at_level(logging.WARNING, logger="c3async"):
        assert stateroot.fold_worktrees(main) == []
    assert Path(wt, ".c3").is_symlink() and snapshot(elsewhere) == before
    assert not Path(main, ".c3", "session_marks.jsonl").exists()
    assert any("symlink" in r.getMessage() and wt in r.getMessage() for r in caplog.records)


def test_links_and_special_files_inside_a_worktree_state_are_not_followed(world, caplog):
    main = repo(world)
    wt = worktree(main, "../wt", "feature")
    decoy = world / "decoy.jsonl"
    decoy.write_bytes(row(1.0, "decoy"))
    state = Path(wt, ".c3")
    state.mkdir()
    (state / "activity.jsonl").symlink_to(decoy)
    os.mkfifo(state / "session_marks.jsonl")
    put(state / "session_stats.jsonl", b'{"session_id":"x","ts":1.0}\n')
    with caplog.at_level(logging.WARNING, logger="c3async"):
        folds = stateroot.fold_worktrees(main)
    assert [f.done for f in folds] == [True]
    assert not Path(main, ".c3", "activity.jsonl").exists()
    assert not Path(main, ".c3", "session_marks.jsonl").exists()
    assert Path(main, ".c3", "session_stats.jsonl").read_bytes() == b'{"session_id":"x","ts":1.0}\n'
    assert decoy.read_bytes() == row(1.0, "decoy")


def test_a_corrupt_worktree_pm_leaves_the_folder_in_place_until_repaired(world, caplog):
    main, wt1, wt2 = build(world)
    good = Path(wt1, ".c3", "pm", "pm.json").read_bytes()
    Path(wt1, ".c3", "pm", "pm.json").write_bytes(b'{"tasks": [')
    with caplog.at_level(logging.WARNING, logger="c3async"):
        folds = {str(f.source): f for f in stateroot.fold_worktrees(main)}
    assert not folds[str(Path(wt1, ".c3"))].done and folds[str(Path(wt2, ".c3"))].done
    assert Path(wt1, ".c3").is_dir()
    assert any("does not parse" in r.getMessage() and wt1 in r.getMessage() for r in caplog.records)
    assert {t.id for t in store.load(resolve(main)).tasks} == {"t1", "t3"}
    Path(wt1, ".c3", "pm", "pm.json").write_bytes(good)
    stateroot._resolved.clear()
    assert [f.done for f in stateroot.fold_worktrees(main)] == [True]
    check_folded(main, wt1, wt2)


def test_a_corrupt_root_pm_is_never_overwritten(world):
    main, wt1, wt2 = build(world)
    Path(main, ".c3", "pm", "pm.json").write_bytes(b"{broken")
    folds = stateroot.fold_worktrees(main)
    assert not any(f.done for f in folds)
    assert Path(main, ".c3", "pm", "pm.json").read_bytes() == b"{broken"
    assert Path(wt1, ".c3").is_dir() and Path(wt2, ".c3").is_dir()


def test_marks_fold_by_time_across_folded_lines(world):
    main = repo(world)
    wt = worktree(main, "../wt", "feature")
    put(
        Path(main, ".c3", "session_marks.jsonl"),
        mark_line(A, "stale", 200.0, reason="newest, in the root") + mark_line(A, "note", 120.0, summary="older note"),
    )
    put(
        Path(wt, ".c3", "session_marks.jsonl"),
        mark_line(A, "unstale", 100.0, reason="older, in the worktree")
        + mark_line(A, "note", 150.0, summary="newer note"),
    )
    stateroot.fold_worktrees(main)
    lines = Path(main, ".c3", "session_marks.jsonl").read_bytes().splitlines()
    assert b"unstale" in lines[-2]  # the older mark landed after the newer one
    state = marks.MarkBook(resolve(main)).refresh().get(A)
    assert state is not None and state.stale is not None and state.stale.reason == "newest, in the root"
    assert state.note is not None and state.note.summary == "newer note"
    # Equal times: the later line wins.
    jsonl.append(marks.marks_path(resolve(main)), msgspec.json.decode(mark_line(A, "unstale", 200.0), type=marks.Mark))
    state = marks.MarkBook(resolve(main)).refresh().get(A)
    assert state is not None and state.stale is None


def test_merge_pm_is_idempotent_and_keeps_both_sides(world):
    ours = {
        "version": 1,
        "tasks": [task("t", "a", 1.0, ["x"], time=[{"start": 1.0, "end": None, "session": "x"}])],
        "events": [event(2.0, "a", "t")],
    }
    theirs = {
        "version": 1,
        "tasks": [
            task(
                "t",
                "b",
                1.0,
                ["y"],
                time=[{"start": 1.0, "end": 5.0, "session": "x"}, {"start": 7.0, "end": 8.0, "session": "y"}],
            )
        ],
        "events": [event(1.0, "b", "t"), event(2.0, "a", "t")],
    }
    assert stateroot.merge_pm(ours, theirs) > 0
    once = msgspec.json.encode(ours)
    t = ours["tasks"][0]
    assert t["title"] == "a"  # a tie goes to the root
    assert t["sessions"] == ["x", "y"]
    assert t["time"] == [{"start": 1.0, "end": 5.0, "session": "x"}, {"start": 7.0, "end": 8.0, "session": "y"}]
    assert [e["ts"] for e in ours["events"]] == [1.0, 2.0]
    assert stateroot.merge_pm(ours, theirs) == 0
    assert msgspec.json.encode(ours) == once


def test_a_listed_worktree_that_belongs_elsewhere_is_never_touched(world):
    """A ``worktrees/<name>/gitdir`` naming some other folder (a hand-edited or hostile
    repository): that folder's ``.c3`` is another project's, and stays exactly as it is."""
    main = repo(world)
    other = repo(world, "other")
    put(Path(other, ".c3", "session_marks.jsonl"), mark_line(A, "stale", 1.0))
    plain = world / "plain"
    put(plain / ".c3" / "activity.jsonl", row(1.0, "session_start"))
    for name, target in (("evil", other), ("plain", str(plain))):
        admin = Path(main, ".git", "worktrees", name)
        admin.mkdir(parents=True)
        (admin / "gitdir").write_text(f"{target}/.git\n")
        (admin / "commondir").write_text("../..\n")
    before = snapshot(Path(other, ".c3")), snapshot(plain / ".c3")
    assert stateroot.fold_worktrees(main) == []
    assert (snapshot(Path(other, ".c3")), snapshot(plain / ".c3")) == before
    assert not Path(main, ".c3").exists()
