"""``c3async sessions``: the row shape, the resume command, --limit, --all, the table, exit codes."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from stress.transcripts import Conversation, set_mtime, simple_session, text, write_session

pytestmark = pytest.mark.process

T0 = 1_700_000_000

ROW_KEYS = {
    "id",
    "title",
    "title_source",
    "first_prompt",
    "first_prompt_truncated",
    "last_prompt",
    "last_prompt_truncated",
    "branch",
    "cwd",
    "project",
    "created_at",
    "last_activity",
    "mtime",
    "size",
    "user_turns",
    "user_turns_exact",
    "began_with_clear",
    "entrypoint",
    "path",
    "resume",
    "live",
    "mcp_count",
    "hints",
    "stale",
    "note",
    "links",
    "tokens",
    "cost_usd",
    "unpriced_models",
}
TOKEN_KEYS = {"input", "output", "cache_write", "cache_read", "total", "as_of"}


def test_row_has_every_key(claude):
    project = claude.project("app")
    simple_session(claude.folder(project), project)
    (row,) = claude.sessions(project)
    assert set(row) >= ROW_KEYS


def test_row_defaults_for_joins_with_nothing_to_say(claude):
    project = claude.project("app")
    simple_session(claude.folder(project), project)
    (row,) = claude.sessions(project)
    assert (row["live"], row["mcp_count"], row["stale"], row["note"]) == (False, 0, None, None)
    assert isinstance(row["hints"], list)
    assert row["links"] == {"tasks": [], "decisions": [], "snapshot": None}
    # never accounted (a listing never runs the accountant): present and null
    assert (row["tokens"], row["cost_usd"]) == (None, None)
    assert not (Path(project) / ".c3" / "session_stats.jsonl").exists()


def test_rows_and_show_carry_what_the_accountant_wrote(claude):
    """Three replies of tests/transcripts.py's usage (opus 4.5: $5 / $25 per million, cache writes
    1.25x and reads 0.1x the input rate), each written as two block lines that count once."""
    project = claude.project("app")
    c = Conversation(project)
    lines = [c.permission_mode()]
    for prompt in ("Fix the login form", "and the tests", "and the docs"):
        lines += [c.prompt(prompt), *c.reply(text("Looking."), text("Done."))]
    write_session(claude.folder(project), c.id, lines)
    assert claude.run("stats", "--project", project).returncode == 0
    (row,) = claude.sessions(project)
    assert set(row["tokens"]) == TOKEN_KEYS
    t = row["tokens"]
    assert (t["input"], t["output"], t["cache_write"], t["cache_read"]) == (9, 84, 9888, 33993)
    assert t["total"] == 9 + 84 + 9888 + 33993 and row["unpriced_models"] == [] and t["as_of"] > T0
    expected = 3 * (3 * 5 + 28 * 25 + 3296 * 6.25 + 11331 * 0.5) / 1e6
    assert abs(row["cost_usd"] - expected) < 1e-6
    show = claude.run("show", c.id, "--project", project)
    assert show.returncode == 0, show.stderr
    assert (
        "tokens: 43,974 (input 9, output 84, cache write 9,888, cache read 33,993); cost $0.08"
        in show.stdout.splitlines()
    )
    (detail,) = [json.loads(claude.run("show", c.id, "--project", project, "--json").stdout)]
    assert detail["row"]["tokens"] == t and detail["row"]["cost_usd"] == row["cost_usd"]


def test_row_values_describe_the_file_and_the_session(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    c = Conversation(project, branch="feature/login")
    lines = [c.permission_mode(), *c.exchange("Fix the login form"), *c.exchange("and the tests")]
    path = write_session(folder, c.id, lines)
    set_mtime(path, T0 + 0.123456)
    (row,) = claude.sessions(project)
    assert row["id"] == c.id
    assert row["path"] == str(path)
    assert row["size"] == path.stat().st_size
    assert row["mtime"] == "2023-11-14T22:13:20.123Z"
    assert (row["cwd"], row["project"], row["branch"], row["entrypoint"]) == (project, project, "feature/login", "cli")
    assert (row["title"], row["title_source"]) == ("Fix the login form", "first-prompt")
    assert (row["first_prompt"], row["last_prompt"]) == ("Fix the login form", "and the tests")
    assert (row["first_prompt_truncated"], row["last_prompt_truncated"]) == (False, False)
    assert (row["user_turns"], row["user_turns_exact"], row["began_with_clear"]) == (2, True, False)
    assert row["created_at"] == lines[2]["timestamp"]
    assert row["last_activity"] == lines[-1]["timestamp"]


def test_resume_command_quotes_a_cwd_with_a_space_and_a_quote(claude):
    project = claude.project("it's my app")
    sid = simple_session(claude.folder(project), project)
    (row,) = claude.sessions(project)
    assert row["resume"] == f"cd {shlex.quote(project)} && claude --resume {sid}"
    assert shlex.split(row["resume"]) == ["cd", project, "&&", "claude", "--resume", sid]


def test_resume_command_changes_into_the_directory(claude):
    project = claude.project("it's my app")
    simple_session(claude.folder(project), project)
    (row,) = claude.sessions(project)
    cd_part = row["resume"].split(" && ")[0]
    out = subprocess.run(["sh", "-c", f"{cd_part} && pwd -P"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == project


def test_limit_keeps_the_newest_rows(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    ids = [simple_session(folder, project, f"p{i}", mtime=T0 + i) for i in range(5)]
    assert [r["id"] for r in claude.sessions(project, "--limit", "2")] == [ids[4], ids[3]]


def test_limit_zero_prints_an_empty_array(claude):
    project = claude.project("app")
    simple_session(claude.folder(project), project)
    assert claude.sessions(project, "--limit", "0") == []


def test_all_lists_every_project_registered_by_earlier_listings(claude):
    a, b = claude.project("a"), claude.project("b")
    sa = simple_session(claude.folder(a), a, "in a", mtime=T0)
    sb = simple_session(claude.folder(b), b, "in b", mtime=T0 + 10)
    claude.sessions(a)
    claude.sessions(b)
    proc = claude.run("sessions", "--all", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [(r["id"], r["project"]) for r in rows] == [(sb, b), (sa, a)]


def test_all_with_project_adds_that_project(claude):
    a, b = claude.project("a"), claude.project("b")
    sa = simple_session(claude.folder(a), a, mtime=T0)
    sb = simple_session(claude.folder(b), b, mtime=T0 + 10)
    claude.sessions(a)
    proc = claude.run("sessions", "--all", "--project", b, "--json")
    assert proc.returncode == 0, proc.stderr
    assert {(r["id"], r["project"]) for r in json.loads(proc.stdout)} == {(sa, a), (sb, b)}


def test_table_output_has_a_header_and_one_line_per_row(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    c = Conversation(project, branch="feature")
    write_session(folder, c.id, [*c.exchange("Fix the\nflaky test")])
    proc = claude.run("sessions", "--project", project)
    assert proc.returncode == 0, proc.stderr
    header, *lines = proc.stdout.splitlines()
    assert header.split() == ["ID", "AGE", "SIZE", "BRANCH", "TITLE"]
    assert len(lines) == 1
    assert lines[0].startswith(c.id[:8])
    assert "feature" in lines[0] and "Fix the flaky test  [idle" in lines[0]  # hints follow the title


def test_normal_listing_exits_0_with_nothing_on_stderr(claude):
    project = claude.project("app")
    simple_session(claude.folder(project), project)
    proc = claude.run("sessions", "--project", project, "--json")
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.endswith("\n")


def test_project_without_a_transcript_folder_prints_an_empty_array(claude):
    project = claude.project("never-used")
    proc = claude.run("sessions", "--project", project, "--json")
    assert proc.returncode == 0
    assert json.loads(proc.stdout) == []
    assert project in proc.stderr


def test_default_project_is_the_current_directory(claude):
    project = claude.project("app")
    sid = simple_session(claude.folder(project), project)
    proc = claude.run("sessions", "--json", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert [r["id"] for r in json.loads(proc.stdout)] == [sid]


def test_bad_limit_is_a_usage_error_on_stderr(claude):
    project = claude.project("app")
    proc = claude.run("sessions", "--project", project, "--limit", "-1")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "--limit" in proc.stderr


def test_corrupt_registry_does_not_stop_a_project_listing(claude):
    project = claude.project("app")
    sid = simple_session(claude.folder(project), project)
    claude.c3home.mkdir(parents=True, exist_ok=True)
    (claude.c3home / "projects.json").write_text("{ not json")
    proc = claude.run("sessions", "--project", project, "--json")
    assert proc.returncode == 0
    assert [r["id"] for r in json.loads(proc.stdout)] == [sid]
    assert "projects.json" in proc.stderr


def test_corrupt_registry_with_all_is_an_error_on_stderr(claude):
    claude.c3home.mkdir(parents=True, exist_ok=True)
    (claude.c3home / "projects.json").write_text("{ not json")
    proc = claude.run("sessions", "--all", "--json")
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "projects.json" in proc.stderr and "Traceback" not in proc.stderr
    assert (claude.c3home / "projects.json").read_text() == "{ not json"
