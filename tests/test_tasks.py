"""c3_task's store and actions: every action and refusal, corrupt files, many writers at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from c3async.ground.errors import AmbiguousSession, BadArgument, C3Error, TaskArgError, TaskError
from c3async.ground.project import resolve
from c3async.tasks import actions, store
from stress.transcripts import simple_session

WHO = actions.Who(session="11111111-0000-4000-8000-000000000001", by="agent")


def run(project, action, who=WHO, **args):
    return actions.run(resolve(project), who, action, **args)


def test_add_get_update_and_prefix_ids(tmp_path):
    t = run(tmp_path, "add", title="Build the hub", priority="p1", tags="UI, hub", due="2026-12-24")
    assert (t["status"], t["priority"], t["tags"], t["due"]) == ("backlog", "p1", ["hub", "ui"], "2026-12-24")
    assert t["sessions"] == [WHO.session]  # linked to the session that created it
    got = run(tmp_path, "get", task_id=t["id"][:4])
    assert got["title"] == "Build the hub"
    up = run(tmp_path, "update", task_id=t["id"][:6], status="in_progress", title="Build the Hub")
    assert (up["status"], up["title"]) == ("in_progress", "Build the Hub")


def test_bad_arguments_say_what_to_fix(tmp_path):
    with pytest.raises(BadArgument, match="title"):
        run(tmp_path, "add")
    with pytest.raises(BadArgument, match="status must be one of"):
        run(tmp_path, "add", title="x", status="doing")
    with pytest.raises(BadArgument, match="priority"):
        run(tmp_path, "add", title="x", priority="urgent")
    with pytest.raises(BadArgument, match="YYYY-MM-DD"):
        run(tmp_path, "add", title="x", due="tomorrow")
    with pytest.raises(BadArgument, match="real date"):
        run(tmp_path, "add", title="x", due="2026-02-30")
    t = run(tmp_path, "add", title="x")
    with pytest.raises(BadArgument, match="changed nothing"):
        run(tmp_path, "update", task_id=t["id"])
    with pytest.raises(BadArgument, match="4 characters"):
        run(tmp_path, "get", task_id=t["id"][:3])
    with pytest.raises(C3Error, match="no task"):
        run(tmp_path, "get", task_id="ffffffff")
    with pytest.raises(BadArgument, match="unknown action"):
        run(tmp_path, "explode")


def test_ambiguous_prefix_names_the_candidates(tmp_path):
    pm = store.TaskFile(tasks=[store.Task(id="abcd11111111", title="one"), store.Task(id="abcd22222222", title="two")])
    store.file_path(resolve(tmp_path)).parent.mkdir(parents=True)
    store.file_path(resolve(tmp_path)).write_bytes(
        json.dumps({"tasks": [{"id": t.id, "title": t.title} for t in pm.tasks]}).encode()
    )
    with pytest.raises(AmbiguousSession) as err:
        run(tmp_path, "get", task_id="abcd")
    assert "abcd11111111" in str(err.value) and "abcd22222222" in str(err.value)


def test_list_filters_board_and_report(tmp_path):
    a = run(tmp_path, "add", title="API", priority="p0", tags="backend")
    b = run(tmp_path, "add", title="UI", tags="frontend", blocked_by=a["id"][:5], status="blocked")
    run(tmp_path, "add", title="Docs", due="2020-01-01")
    assert [t["title"] for t in run(tmp_path, "list", tags="backend")["tasks"]] == ["API"]
    assert [t["title"] for t in run(tmp_path, "list", priority="p0")["tasks"]] == ["API"]
    assert [t["title"] for t in run(tmp_path, "list", status="blocked")["tasks"]] == ["UI"]
    assert [t["title"] for t in run(tmp_path, "list", due="2021-01-01")["tasks"]] == ["Docs"]
    board = run(tmp_path, "board")["columns"]
    assert [t["title"] for t in board["blocked"]] == ["UI"] and len(board["backlog"]) == 2
    rep = run(tmp_path, "report")
    assert rep["blocking"][0]["id"] == a["id"] and rep["blocking"][0]["blocks"] == [b["id"]]
    assert rep["overdue"][0]["title"] == "Docs"
    run(tmp_path, "update", task_id=a["id"], status="done")
    rep = run(tmp_path, "report")
    assert [t["id"] for t in rep["ready_to_unblock"]] == [b["id"]] and rep["blocking"] == []


def test_milestones_complete_refuses_open_tasks_and_archive_detaches(tmp_path):
    run(tmp_path, "milestone_add", milestone="v2.145")
    with pytest.raises(C3Error, match="exists already"):
        run(tmp_path, "milestone_add", milestone="V2.145")
    t = run(tmp_path, "add", title="ship it", milestone="v2.145")
    with pytest.raises(C3Error, match="ship it"):
        run(tmp_path, "milestone_complete", milestone="v2.145")
    run(tmp_path, "update", task_id=t["id"], status="done")
    m = run(tmp_path, "milestone_complete", milestone="v2.145")
    assert m["status"] == "completed" and m["completed_at"]
    assert run(tmp_path, "get", task_id=t["id"])["milestone"] == m["id"]  # completing keeps the link
    run(tmp_path, "milestone_add", milestone="v3")
    with pytest.raises(C3Error, match="only a completed one"):
        run(tmp_path, "milestone_reopen", milestone="v3")
    assert run(tmp_path, "milestone_reopen", milestone=m["id"])["status"] == "open"
    archived = run(tmp_path, "milestone_archive", milestone="v2.145")
    assert archived["detached"] == [t["id"]]
    assert run(tmp_path, "get", task_id=t["id"])["milestone"] is None
    with pytest.raises(C3Error, match="no milestone"):
        run(tmp_path, "milestone_complete", milestone="v9")


def test_link_decide_time_and_history(tmp_path):
    t = run(tmp_path, "add", title="x")
    other = "22222222-0000-4000-8000-000000000002"
    linked = run(tmp_path, "link", task_id=t["id"], link_type="session", ref=other)
    assert linked["sessions"] == [WHO.session, other]
    assert run(tmp_path, "link", task_id=t["id"], ref="current")["sessions"] == [WHO.session, other]
    with pytest.raises(BadArgument, match="current"):
        run(tmp_path, "link", who=actions.Who(session=None), task_id=t["id"], ref="current")
    d = run(tmp_path, "decide", text="Use SSE", reasoning="simpler than websockets", task_id=t["id"])
    assert d["session"] == WHO.session and d["task"] == t["id"]
    assert [x["text"] for x in run(tmp_path, "decisions", task_id=t["id"])["decisions"]] == ["Use SSE"]
    run(tmp_path, "time_start", task_id=t["id"])
    with pytest.raises(C3Error, match="already running"):
        run(tmp_path, "time_start", task_id=t["id"])
    run(tmp_path, "time_stop", task_id=t["id"])
    with pytest.raises(C3Error, match="no timer"):
        run(tmp_path, "time_stop", task_id=t["id"])
    assert run(tmp_path, "time_report")["tasks"][0]["id"] == t["id"]
    events = run(tmp_path, "history", task_id=t["id"])["events"]
    assert [e["action"] for e in events] == ["add", "link", "link", "time_start", "time_stop"]
    assert all(e["session"] == WHO.session for e in events)


def test_delete_leaves_no_dangling_link_and_the_log_keeps_the_task(tmp_path):
    m = run(tmp_path, "milestone_add", milestone="v1")
    gone = run(tmp_path, "add", title="API", milestone="v1", tags="backend")
    other = run(tmp_path, "add", title="other")
    waits = run(tmp_path, "add", title="UI", blocked_by=f"{gone['id']},{other['id']}", status="blocked")
    d = run(tmp_path, "decide", text="REST", task_id=gone["id"])
    run(tmp_path, "time_start", task_id=gone["id"])
    out = run(tmp_path, "delete", task_id=gone["id"][:5])
    assert (out["id"], out["title"]) == (gone["id"], "API")
    assert out["unlinked"] == {"blocked_by": [waits["id"]], "decisions": [d["id"]]}
    pm = store.load(resolve(tmp_path))
    assert gone["id"] not in {t.id for t in pm.tasks}
    assert next(t for t in pm.tasks if t.id == waits["id"]).blocked_by == [other["id"]]
    assert [(x.id, x.text, x.task) for x in pm.decisions] == [(d["id"], "REST", None)]  # the note stays
    assert run(tmp_path, "milestones")["milestones"][0]["tasks"]["total"] == 0
    run(tmp_path, "milestone_complete", milestone=m["id"])  # nothing of it is left open
    event = next(e for e in pm.events if e.action == "delete")
    assert (event.target, event.session, event.changes["title"]) == (gone["id"], WHO.session, "API")
    kept = event.changes["task"]
    assert (kept["title"], kept["milestone"], kept["tags"], kept["time"][0]["end"]) == (
        "API",
        m["id"],
        ["backend"],
        None,
    )
    assert [r["id"] for r in run(tmp_path, "report")["still_blocked"]] == [waits["id"]]  # waits on `other` only
    with pytest.raises(C3Error, match="no task has the id"):
        run(tmp_path, "delete", task_id=gone["id"])
    with pytest.raises(BadArgument, match=r"c3_task\(action='delete'\) needs task_id"):
        run(tmp_path, "delete")


def test_milestone_and_decision_delete(tmp_path):
    m = run(tmp_path, "milestone_add", milestone="v1", due="2026-01-01")
    t = run(tmp_path, "add", title="x", milestone="v1", status="done")
    run(tmp_path, "milestone_complete", milestone="v1")
    out = run(tmp_path, "milestone_delete", milestone="V1")  # by name, any status
    assert (out["id"], out["status"], out["detached"]) == (m["id"], "completed", [t["id"]])
    assert run(tmp_path, "get", task_id=t["id"])["milestone"] is None
    assert run(tmp_path, "milestones", status="all")["milestones"] == []
    run(tmp_path, "milestone_add", milestone="v1")  # the name is free again
    d = run(tmp_path, "decide", text="keep it simple", reasoning="fewer parts")
    assert run(tmp_path, "decision_delete", ref=d["id"][:4])["text"] == "keep it simple"
    assert run(tmp_path, "decisions")["decisions"] == []
    with pytest.raises(C3Error, match=r"no decision has the id .*c3_task\(action='decisions'\)"):
        run(tmp_path, "decision_delete", ref=d["id"])
    events = {e.action: e for e in store.load(resolve(tmp_path)).events}
    assert events["milestone_delete"].changes["milestone"]["due"] == "2026-01-01"
    assert events["decision_delete"].changes["decision"]["reasoning"] == "fewer parts"


def test_milestone_add_takes_its_name_as_title_too(tmp_path):
    assert run(tmp_path, "milestone_add", title="v1")["name"] == "v1"
    assert run(tmp_path, "milestone_add", title="v2", milestone="v2")["name"] == "v2"
    with pytest.raises(BadArgument, match="takes one name: give milestone or title, not both"):
        run(tmp_path, "milestone_add", title="v3", milestone="v4")
    with pytest.raises(BadArgument, match=r"^title is too long: 201 characters, the limit is 200"):
        run(tmp_path, "milestone_add", title="m" * 201)  # a milestone's limit, not a task title's
    with pytest.raises(BadArgument, match=r"^c3_task\(action='milestone_add'\) needs milestone: its name$"):
        run(tmp_path, "milestone_add")


class Flags:
    """A door of our own: arguments as --flags, actions as commands."""

    def action(self, action):
        return f"do {action}"

    def arg(self, action, name):
        return "--" + name

    def call(self, action, args=()):
        return " ".join(["do", action, *(f"--{k} {v}" for k, v in args)])


def test_a_refusal_is_written_once_and_each_door_words_it(tmp_path):
    with pytest.raises(TaskArgError) as e:
        run(tmp_path, "add")
    assert str(e.value) == "c3_task(action='add') needs title"  # the MCP tool's words, as before
    assert (e.value.action, e.value.worded(Flags())) == ("add", "do add needs --title")
    with pytest.raises(TaskArgError) as e:
        run(tmp_path, "add", title="x", tags="ok," + "{t}" * 30)  # braces from a caller stay text
    assert e.value.worded(Flags()).startswith("--tags: the tag '{t}{t}")
    with pytest.raises(TaskArgError) as e:
        run(tmp_path, "update", task_id="ab")
    assert e.value.worded(Flags()) == "--task_id needs at least 4 characters of a task id, got 'ab'"
    with pytest.raises(TaskError) as e:
        run(tmp_path, "milestone_complete", milestone="v9")
    assert not isinstance(e.value, BadArgument)  # not an argument's fault: the CLI exits 1
    assert str(e.value) == "no milestone 'v9' (`c3_task(action='milestone_add', milestone='...')` creates one)"
    assert e.value.worded(Flags()) == "no milestone 'v9' (`do milestone_add --milestone ...` creates one)"
    with pytest.raises(TaskArgError) as e:
        actions.validate("add", title="t" * 501)
    assert e.value.worded(Flags()).startswith("--title is too long: 501 characters")


def test_reads_never_write(tmp_path):
    run(tmp_path, "add", title="x")
    path = store.file_path(resolve(tmp_path))
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    for action in actions.READ_ACTIONS:
        try:
            run(tmp_path, action)
        except BadArgument:
            pass  # get without a task id
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_corrupt_pm_json_is_refused_and_left_untouched(tmp_path):
    run(tmp_path, "add", title="good")
    run(tmp_path, "add", title="also good")
    path = store.file_path(resolve(tmp_path))
    path.write_bytes(b'{"tasks": [ {"id": "x"')
    with pytest.raises(store.TaskFileCorrupt) as err:
        run(tmp_path, "add", title="lost?")
    assert str(path) in str(err.value) and "pm.json.bak" in str(err.value)
    assert path.read_bytes() == b'{"tasks": [ {"id": "x"'
    with pytest.raises(store.TaskFileCorrupt):
        run(tmp_path, "list")
    good = json.loads(path.with_name("pm.json.bak").read_bytes())
    assert [t["title"] for t in good["tasks"]] == ["good"]


@pytest.mark.process
def test_links_show_up_on_session_rows(claude):
    proj = claude.project("app")
    sid = simple_session(claude.folder(proj), proj, "build it")
    env = claude.env(CLAUDE_CODE_SESSION_ID=sid)
    proc = claude.run("tasks", "add", "--project", proj, "--title", "Hub tab", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    task = json.loads(proc.stdout)
    assert claude.run("tasks", "decide", "--project", proj, "--text", "SSE", env=env).returncode == 0
    row = claude.rows_by_id(proj)[sid]
    assert row["links"]["tasks"] == [{"id": task["id"], "title": "Hub tab", "status": "backlog"}]
    assert [d["text"] for d in row["links"]["decisions"]] == ["SSE"]


@pytest.mark.process
def test_cli_errors_exit_1_on_stderr(claude):
    proj = claude.project("app")
    proc = claude.run("tasks", "get", "--project", proj, "--task-id", "zzzz")
    assert proc.returncode == 1 and "no task" in proc.stderr and proc.stdout == ""
    proc = claude.run("tasks", "explode", "--project", proj)  # the actions are argparse's choices now
    assert proc.returncode == 2 and "invalid choice: 'explode'" in proc.stderr


WRITER = textwrap.dedent(
    """
    import sys
    from c3async.ground.project import resolve
    from c3async.tasks import actions
    project, w, n = resolve(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    who = actions.Who(session=f"w{w}", by="agent")
    mine = []
    for i in range(n):
        kind = i % 5
        if kind in (0, 1) or not mine:
            mine.append(actions.run(project, who, "add", title=f"w{w}-t{i}")["id"])
        elif kind == 2:
            actions.run(project, who, "update", task_id=mine[-1], description=f"w{w}-d{i}")
        elif kind == 3:
            actions.run(project, who, "decide", text=f"w{w}-x{i}")
        else:
            actions.run(project, who, "update", task_id=mine[0], tags=f"w{w},i{i}")
        print(i, flush=True)
    """
)


@pytest.mark.process
@pytest.mark.slow
def test_32_processes_x_50_changes_lose_nothing(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path), str(w), "50"], stdout=subprocess.PIPE, text=True, env=env
        )
        for w in range(32)
    ]
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0
        assert len(out.split()) == 50
    pm = store.load(resolve(tmp_path))
    assert len(pm.events) == 32 * 50  # every change, exactly once
    titles = {t.title for t in pm.tasks}
    decisions = {d.text for d in pm.decisions}
    for w in range(32):
        for i in range(50):
            kind = i % 5
            if kind in (0, 1):
                assert f"w{w}-t{i}" in titles
            elif kind == 3:
                assert f"w{w}-x{i}" in decisions
        last_desc = max(i for i in range(50) if i % 5 == 2)
        assert any(t.description == f"w{w}-d{last_desc}" for t in pm.tasks)
