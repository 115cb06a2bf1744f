"""`c3async tasks`, as a person types it: one line per change, tables for the reads, JSON with
--json (what c3_task returns), errors in the CLI's own words, help per action, delete, and the
spellings of earlier versions still accepted."""

from __future__ import annotations

import json
import re

import pytest

from c3async.ground.project import resolve
from c3async.ground.schema import fields, name_of
from c3async.tasks import actions, store
from c3async.tasks.schema import ACTION_TYPES
from stress.transcripts import simple_session

pytestmark = pytest.mark.process

WHO = actions.Who(session=None, by="agent")


@pytest.fixture
def tasks(claude):
    """Run `c3async tasks ...` in a fresh project: (exit status, stdout, stderr)."""
    project = claude.project("app")

    def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
        proc = claude.run("tasks", *args, "--project", project, env=env)
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc.returncode, proc.stdout, proc.stderr

    run.project = project  # type: ignore[attr-defined]
    return run


def data(tasks, *args: str) -> dict:
    code, out, err = tasks(*args, "--json")
    assert code == 0 and err == "", err
    return json.loads(out)


def test_every_change_says_what_it_did_in_one_line(tasks, claude):
    code, out, err = tasks("add", "--title", "ship it", "--priority", "p1")
    assert code == 0 and err == "" and re.fullmatch(r'added task [0-9a-f]{8} "ship it"\n', out)
    tid = out.split()[2]
    said = {
        ("update", tid, "--status", "done"): f'task {tid} "ship it" is done',
        (
            "update",
            tid,
            "--priority",
            "p0",
            "--tags",
            "a,b",
            "--title",
            "ship it now",
        ): f'updated task {tid} "ship it now": title; priority p0; tags a, b',
        ("time_start", tid): f'started the timer of task {tid} "ship it now"',
        ("milestone_add", "--title", "v1", "--due", "2026-06-01"): "added milestone ",
        ("decide", "--text", "use SSE", "--task-id", tid): "recorded decision ",
    }
    for args, line in said.items():
        code, out, err = tasks(*args)
        assert code == 0 and err == "" and out.startswith(line) and out.count("\n") == 1, (args, out, err)
    code, out, _ = tasks("time_stop", tid)
    assert re.fullmatch(rf'stopped the timer of task {tid} "ship it now" \(\d+s tracked in all\)\n', out)
    sid = simple_session(claude.folder(tasks.project), tasks.project, "build it")
    code, out, err = tasks("link", tid, sid[:8])
    assert (code, out) == (0, f'linked task {tid} "ship it now" to session {sid[:8]}\n'), err
    host = claude.env(CLAUDE_CODE_SESSION_ID=sid)
    code, out, err = tasks("link", tid, env=host)  # no SESSION: the current one
    assert code == 0 and out.endswith(f"to session {sid[:8]}\n"), err
    code, out, _ = tasks("milestone_complete", "v1")
    assert re.fullmatch(r'milestone [0-9a-f]{8} "v1" is completed\n', out)
    code, out, _ = tasks("milestone_reopen", "v1")
    assert out.endswith('"v1" is open again\n')
    code, out, _ = tasks("delete", tid)
    assert out == f'deleted task {tid} "ship it now" (unlinked from 1 decision)\n'


def test_json_is_what_c3_task_returns(tasks):
    added = data(tasks, "add", "--title", "x", "--tags", "b,a")
    stored = actions.run(resolve(tasks.project), WHO, "get", task_id=added["id"])
    assert added == {k: v for k, v in stored.items() if k != "decisions"}  # a task is `id`, as everywhere
    assert (added["title"], added["tags"], added["status"]) == ("x", ["a", "b"], "backlog")
    got = data(tasks, "get", added["id"][:4])
    assert got == actions.run(resolve(tasks.project), WHO, "get", task_id=added["id"])
    assert data(tasks, "list") == actions.run(resolve(tasks.project), WHO, "list")
    assert data(tasks) == data(tasks, "list")  # `tasks` alone is `tasks list`, --json before or after
    _, out, _ = tasks("--json", "list")
    assert json.loads(out) == data(tasks, "list")


def test_reads_print_tables_and_empty_ones_say_so_on_stderr(tasks):
    for args, said in (
        (("list",), "no tasks"),
        ((), "no tasks"),
        (("board",), "no tasks"),
        (("decisions",), "no decisions"),
        (("history",), "no history"),
        (("time_report",), "no time tracked"),
        (("milestones",), "no open milestones"),
        (("milestones", "--status", "all"), "no milestones"),
        (("report",), "nothing is blocking, blocked or overdue"),
    ):
        assert tasks(*args) == (0, "", said + "\n"), args
    assert data(tasks, "list") == {"tasks": []} and data(tasks, "decisions") == {"decisions": []}
    a = data(tasks, "add", "--title", "API", "--priority", "p0", "--due", "2020-01-01")["id"]
    data(tasks, "add", "--title", "UI", "--blocked-by", a, "--status", "blocked")
    code, out, err = tasks()
    assert code == 0 and err == ""
    assert out.splitlines() == [
        f"{a[:8]}  p0  backlog      API due 2020-01-01",
        f"{out.splitlines()[1][:8]}  p2  blocked      UI",
    ]
    code, out, _ = tasks("report")
    assert "blocking:" in out and "still blocked:" in out and "overdue:" in out and f"waits on {a[:8]}" in out
    code, out, _ = tasks("show", a)
    assert out.splitlines()[0] == f"{a}  API" and "  priority   p0" in out
    code, out, _ = tasks("history", a)
    assert out.count("\n") == 1 and " add " in out and 'title "API"' in out


def test_errors_are_in_the_clis_words(tasks):
    cases = {
        ("add",): (2, "tasks add needs --title"),
        ("update", "ffff"): (1, "no task has the id 'ffff' (`c3async tasks list` shows them)"),
        ("get",): (2, "tasks get needs ID: a task id or a unique prefix of 4+ characters"),
        ("delete", "ab"): (2, "ID needs at least 4 characters of a task id, got 'ab'"),
        ("add", "--title", "x", "--due", "soon"): (2, "--due must be a date YYYY-MM-DD, got 'soon'"),
        ("add", "--title", "x", "--blocked-by", "zz"): (2, "--blocked-by needs at least 4 characters"),
        ("add", "--title", "x", "--status", "doing"): (2, "--status must be one of backlog, in_progress"),
        ("add", "--title", "t" * 501): (2, "--title is too long: 501 characters, the limit is 500"),
        ("decide",): (2, "tasks decide needs --text: the decision"),
        ("milestone_add",): (2, "tasks milestone_add needs --title: its name"),
        ("milestone_complete",): (2, "tasks milestone_complete needs MILESTONE: a milestone id"),
        ("milestone_archive", "v9"): (1, "no milestone 'v9' (`c3async tasks milestone_add --title ...` creates one)"),
        ("decision_delete", "abcd"): (1, "no decision has the id 'abcd' (`c3async tasks decisions` shows them)"),
        ("get", "abcd", "--task-id", "ef01"): (2, "tasks get takes ID once (got ID and --task-id)"),
        ("milestone_add", "--title", "a", "--milestone", "b"): (2, "tasks milestone_add takes --title once"),
    }
    for args, (status, message) in cases.items():
        code, out, err = tasks(*args)
        assert (code, out) == (status, ""), (args, err)
        assert err.startswith(f"c3async: error: {message}") and err.count("\n") == 1, (args, err)
        assert "c3_task" not in err and "task_id" not in err
    t = data(tasks, "add", "--title", "x")
    code, _, err = tasks("update", t["id"])
    assert code == 2 and err == (
        "c3async: error: tasks update changed nothing: give --title, --description, --status, --priority, "
        "--due, --tags, --milestone or --blocked-by\n"
    )
    assert not store.load(resolve(tasks.project)).milestones  # no refusal wrote anything


def test_help_lists_the_actions_and_each_takes_only_its_own(claude):
    proc = claude.run("tasks", "--help")
    assert proc.returncode == 0
    for action in ACTION_TYPES:
        name, line = name_of(action), action.__doc__
        assert re.search(rf"^\s+{name}( \(show\))?\s+{re.escape(line.split()[0])}", proc.stdout, re.M), name
    assert "\nExamples:\n  c3async tasks\n" in proc.stdout
    for action in ACTION_TYPES:
        name, example = name_of(action), action.example
        proc = claude.run("tasks", name, "--help")
        assert proc.returncode == 0, proc.stderr
        assert f"\nExample:\n  {example}\n" in proc.stdout and example.startswith(
            f"c3async tasks {name}".replace("tasks get", "tasks show")
        ), name
        flags = set(re.findall(r"^  (--[a-z-]+)", proc.stdout, re.M)) - {"--help", "--project", "--json"}
        wanted = {f.param.spelled(f.name)[0] for f in fields(action) if f.param.spelled(f.name)}
        assert flags == wanted, (name, flags)
        assert "--task-id" not in proc.stdout or name == "decide"  # old spellings work, unlisted


def test_old_spellings_still_work(tasks):
    t = data(tasks, "add", "--title", "x")
    assert data(tasks, "get", "--task-id", t["id"])["id"] == t["id"]
    assert data(tasks, "update", "--task-id", t["id"], "--status", "done")["status"] == "done"
    assert data(tasks, "milestone_add", "--milestone", "v1")["name"] == "v1"
    assert data(tasks, "milestone_add", "--name", "v2")["name"] == "v2"
    assert data(tasks, "milestone_add", "--title", "v3")["name"] == "v3"
    assert data(tasks, "milestone_complete", "--milestone", "v1")["status"] == "completed"
    assert data(tasks, "time_start", "--task-id", t["id"])["timer_running"] is True
    assert [e["action"] for e in data(tasks, "history", "--task-id", t["id"])["events"]] == [
        "add",
        "update",
        "time_start",
    ]


def test_delete_from_the_cli_leaves_no_link(tasks):
    a = data(tasks, "add", "--title", "A")
    b = data(tasks, "add", "--title", "B", "--blocked-by", a["id"])
    code, out, err = tasks("delete", a["id"][:6])
    assert code == 0 and out == f'deleted task {a["id"][:8]} "A" (it no longer blocks 1 task)\n', err
    assert data(tasks, "get", b["id"])["blocked_by"] == []
    assert [t["id"] for t in data(tasks, "list")["tasks"]] == [b["id"]]
    events = data(tasks, "history")["events"]
    assert events[-1]["action"] == "delete" and events[-1]["changes"]["task"]["title"] == "A"
    code, out, _ = tasks("history")
    assert out.splitlines()[-1].split()[2:4] == ["delete", a["id"][:8]]
