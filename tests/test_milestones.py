"""c3_task milestones: the `milestones` read, the board's grouping by open milestone, and a
completed milestone leaving default listings and the board while its tasks keep their link."""

from __future__ import annotations

import json

import pytest

from c3async.ground.errors import BadArgument, C3Error
from c3async.ground.project import resolve
from c3async.tasks import actions, store

WHO = actions.Who(session="11111111-0000-4000-8000-000000000001", by="agent")


def run(project, action, who=WHO, **args):
    return actions.run(resolve(project), who, action, **args)


def names(result):
    return [m["name"] for m in result["milestones"]]


def world(tmp_path):
    """Four milestones: two open (one with a due date), one completed, one archived."""
    late = run(tmp_path, "milestone_add", milestone="later")  # no due date: sorts last
    v2 = run(tmp_path, "milestone_add", milestone="v2", due="2026-09-01")
    v1 = run(tmp_path, "milestone_add", milestone="v1", due="2026-06-01")
    old = run(tmp_path, "milestone_add", milestone="old", due="2025-01-01")
    a = run(tmp_path, "add", title="API", milestone="v1", priority="p0")
    b = run(tmp_path, "add", title="UI", milestone="v1", status="in_progress")
    c = run(tmp_path, "add", title="Docs", milestone="v1", status="done")
    shipped = run(tmp_path, "add", title="Shipped", milestone="v2")
    loose = run(tmp_path, "add", title="Loose end")
    junk = run(tmp_path, "add", title="Junk", milestone="old")
    run(tmp_path, "update", task_id=shipped["id"], status="done")
    run(tmp_path, "milestone_complete", milestone="v2")
    run(tmp_path, "milestone_archive", milestone="old")
    return {
        "later": late,
        "v1": v1,
        "v2": v2,
        "old": old,
        "a": a,
        "b": b,
        "c": c,
        "shipped": shipped,
        "loose": loose,
        "junk": junk,
    }


def test_milestones_lists_open_ones_by_default_sorted_by_due_then_name(tmp_path):
    assert run(tmp_path, "milestones") == {"milestones": []}
    w = world(tmp_path)
    run(tmp_path, "milestone_add", milestone="Alpha")  # no due date, sorts by name before "later"
    result = run(tmp_path, "milestones")
    assert names(result) == ["v1", "Alpha", "later"]
    assert run(tmp_path, "milestones", status="open") == result
    v1 = result["milestones"][0]
    assert set(v1) == {"id", "name", "status", "due", "created", "completed_at", "archived_at", "tasks", "open_tasks"}
    assert (v1["id"], v1["status"], v1["due"], v1["completed_at"], v1["archived_at"]) == (
        w["v1"]["id"],
        "open",
        "2026-06-01",
        None,
        None,
    )
    assert v1["created"] == w["v1"]["created"]
    assert v1["tasks"] == {"total": 3, "done": 1, "open": 2}
    assert v1["open_tasks"] == [  # p0 first
        {"id": w["a"]["id"], "title": "API", "status": "backlog", "priority": "p0"},
        {"id": w["b"]["id"], "title": "UI", "status": "in_progress", "priority": "p2"},
    ]
    assert result["milestones"][2]["tasks"] == {"total": 0, "done": 0, "open": 0}


def test_milestones_status_completed_archived_all(tmp_path):
    w = world(tmp_path)
    done = run(tmp_path, "milestones", status="completed")["milestones"]
    assert [m["name"] for m in done] == ["v2"]
    assert done[0]["status"] == "completed" and done[0]["completed_at"] and done[0]["archived_at"] is None
    assert done[0]["tasks"] == {"total": 1, "done": 1, "open": 0} and done[0]["open_tasks"] == []
    archived = run(tmp_path, "milestones", status="archived")["milestones"]
    assert [m["name"] for m in archived] == ["old"]
    assert archived[0]["archived_at"] and archived[0]["tasks"]["total"] == 0  # archiving detached "Junk"
    assert names(run(tmp_path, "milestones", status="all")) == ["old", "v1", "v2", "later"]
    assert names(run(tmp_path, "milestones", status=" Completed, open ")) == ["v1", "v2", "later"]
    assert run(tmp_path, "get", task_id=w["junk"]["id"])["milestone"] is None


@pytest.mark.parametrize("status", ["done", "closed", "open,bogus", "all,", "\u202eopen"])
def test_milestones_bad_status_says_what_is_allowed(tmp_path, status):
    with pytest.raises(BadArgument, match="open, completed, archived or all"):
        run(tmp_path, "milestones", status=status)


def test_milestones_is_a_read_action_that_never_writes(tmp_path):
    assert "milestones" in actions.READ_ACTIONS and "milestones" in actions.ACTIONS
    assert actions.validate(" Milestones ") == "milestones"
    assert run(tmp_path, "milestones") == {"milestones": []}
    assert not store.file_path(resolve(tmp_path)).exists()  # no pm.json: reading does not create one
    world(tmp_path)
    path = store.file_path(resolve(tmp_path))
    before = (path.read_bytes(), path.stat().st_mtime_ns, sorted(p.name for p in path.parent.iterdir()))
    for status in ("", "open", "completed", "archived", "all"):
        run(tmp_path, "milestones", status=status)
    run(tmp_path, "board")
    run(tmp_path, "list")
    assert (path.read_bytes(), path.stat().st_mtime_ns, sorted(p.name for p in path.parent.iterdir())) == before


def test_board_groups_open_milestones_and_keeps_its_columns(tmp_path):
    w = world(tmp_path)
    board = run(tmp_path, "board")
    assert list(board["columns"]) == list(actions.STATUSES)  # the shape the CLI prints
    ids = {s: [t["id"] for t in ts] for s, ts in board["columns"].items()}
    assert ids["backlog"] == [w["a"]["id"], w["junk"]["id"], w["loose"]["id"]]  # priority, then last changed
    assert ids["in_progress"] == [w["b"]["id"]]
    assert ids["done"] == [w["c"]["id"]]  # "Shipped" (completed v2) has left the board
    assert [m["name"] for m in board["milestones"]] == ["v1", "later"]  # open ones only
    v1 = board["milestones"][0]
    assert (v1["id"], v1["due"]) == (w["v1"]["id"], "2026-06-01")
    assert list(v1["columns"]) == list(actions.STATUSES)
    assert {s: [t["title"] for t in ts] for s, ts in v1["columns"].items()} == {
        "backlog": ["API"],
        "in_progress": ["UI"],
        "blocked": [],
        "done": ["Docs"],
    }
    assert v1["columns"]["backlog"][0] == {"id": w["a"]["id"], "title": "API", "priority": "p0"}
    assert board["milestones"][1]["columns"] == {s: [] for s in actions.STATUSES}


def test_completed_milestone_leaves_default_list_and_board_but_keeps_links(tmp_path):
    w = world(tmp_path)
    shipped, v2 = w["shipped"]["id"], w["v2"]["id"]
    default = [t["id"] for t in run(tmp_path, "list")["tasks"]]
    assert shipped not in default and w["c"]["id"] in default and len(default) == 5
    assert run(tmp_path, "get", task_id=shipped)["milestone"] == v2  # the link is kept
    # An explicit milestone or status filter still shows it.
    assert [t["id"] for t in run(tmp_path, "list", milestone="v2")["tasks"]] == [shipped]
    assert [t["id"] for t in run(tmp_path, "list", milestone=v2)["tasks"]] == [shipped]
    assert shipped in [t["id"] for t in run(tmp_path, "list", status="done")["tasks"]]
    everything = [t["id"] for t in run(tmp_path, "list", status="all")["tasks"]]
    assert shipped in everything and len(everything) == 6
    with pytest.raises(BadArgument, match="status must be one of backlog, in_progress, blocked, done, all"):
        run(tmp_path, "list", status="finished")
    # Reopening the milestone brings its tasks back to the default list and the board.
    run(tmp_path, "milestone_reopen", milestone="v2")
    assert shipped in [t["id"] for t in run(tmp_path, "list")["tasks"]]
    board = run(tmp_path, "board")
    assert shipped in [t["id"] for t in board["columns"]["done"]]
    v2_group = next(m for m in board["milestones"] if m["id"] == v2)
    assert [t["id"] for t in v2_group["columns"]["done"]] == [shipped]
    # Completing it again: gone from both again, link still there.
    run(tmp_path, "milestone_complete", milestone="v2")
    assert shipped not in [t["id"] for t in run(tmp_path, "list")["tasks"]]
    board = run(tmp_path, "board")
    assert shipped not in [t["id"] for ts in board["columns"].values() for t in ts]
    assert v2 not in [m["id"] for m in board["milestones"]]
    assert store.load(resolve(tmp_path)).tasks[3].milestone == v2


def test_an_open_task_of_a_completed_milestone_is_never_hidden(tmp_path):
    run(tmp_path, "milestone_add", milestone="v1")
    t = run(tmp_path, "add", title="fix", milestone="v1", status="done")
    run(tmp_path, "milestone_complete", milestone="v1")
    assert run(tmp_path, "list")["tasks"] == []
    run(tmp_path, "update", task_id=t["id"], status="in_progress")  # work reopened after the release
    assert [x["id"] for x in run(tmp_path, "list")["tasks"]] == [t["id"]]
    assert [x["id"] for x in run(tmp_path, "board")["columns"]["in_progress"]] == [t["id"]]
    assert run(tmp_path, "milestones", status="completed")["milestones"][0]["open_tasks"][0]["id"] == t["id"]


def test_complete_refuses_open_tasks_reopen_undoes_it(tmp_path):
    run(tmp_path, "milestone_add", milestone="v1")
    t = run(tmp_path, "add", title="last bit", milestone="v1")
    with pytest.raises(C3Error, match="still has 1 open task"):
        run(tmp_path, "milestone_complete", milestone="v1")
    assert run(tmp_path, "milestones")["milestones"][0]["status"] == "open"  # the refusal changed nothing
    run(tmp_path, "update", task_id=t["id"], status="done")
    m = run(tmp_path, "milestone_complete", milestone="v1")
    assert run(tmp_path, "milestones") == {"milestones": []}
    listed = run(tmp_path, "milestones", status="completed")["milestones"][0]
    assert (listed["id"], listed["completed_at"], listed["tasks"]["total"]) == (m["id"], m["completed_at"], 1)
    with pytest.raises(C3Error, match="completed, not open"):
        run(tmp_path, "milestone_complete", milestone="v1")
    back = run(tmp_path, "milestone_reopen", milestone="v1")
    assert (back["status"], back["completed_at"]) == ("open", None)
    again = run(tmp_path, "milestones")["milestones"]
    assert [m["id"] for m in again] == [m["id"]] and again[0]["tasks"] == {"total": 1, "done": 1, "open": 0}
    assert run(tmp_path, "get", task_id=t["id"])["milestone"] == m["id"]


@pytest.mark.process
def test_cli_tasks_milestones_json(claude):
    proj = claude.project("app")
    for args in (
        ("milestone_add", "--milestone", "v1", "--due", "2026-06-01"),
        ("milestone_add", "--milestone", "v0"),
        ("add", "--title", "ship", "--milestone", "v0", "--status", "done"),
        ("milestone_complete", "--milestone", "v0"),
    ):
        proc = claude.run("tasks", *args, "--project", proj)
        assert proc.returncode == 0, proc.stderr
    path = store.file_path(resolve(proj))
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    proc = claude.run("tasks", "milestones", "--project", proj, "--json")
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)["milestones"]
    assert [(m["name"], m["status"], m["due"]) for m in shown] == [("v1", "open", "2026-06-01")]
    proc = claude.run("tasks", "milestones", "--project", proj, "--status", "all", "--json")
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)["milestones"]
    assert [(m["name"], m["status"]) for m in shown] == [("v1", "open"), ("v0", "completed")]
    assert shown[1]["tasks"] == {"total": 1, "done": 1, "open": 0}
    proc = claude.run("tasks", "milestones", "--project", proj, "--status", "nope")
    # a bad argument is a usage error (2), worded with the CLI's flag
    assert (
        proc.returncode == 2
        and "--status for milestones must be one of open, completed, archived or all" in (proc.stderr)
        and proc.stdout == ""
    )
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
