"""Several Claude Code config dirs (a work and a personal account, ``CLAUDE_CONFIG_DIR`` per shell
alias): every row says its root (and its login), sessions of a root other than the default resume
with ``CLAUDE_CONFIG_DIR`` set, a registered project remembers its roots so a listing without the
variable still finds them, and an empty listing says which roots it searched."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from stress.transcripts import claude_slug, encode, simple_session

pytestmark = pytest.mark.process

ACCOUNT = "0a1b2c3d-1111-4222-8333-444455556666"


def second_root(claude, name: str = "work-claude") -> Path:
    root = claude.root / name
    (root / "projects").mkdir(parents=True, exist_ok=True)
    return root


def folder_in(root: Path, project: str) -> Path:
    folder = root / "projects" / claude_slug(project)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_rows_of_two_roots_say_their_root_and_resume_with_it(claude) -> None:
    project = claude.project("app")
    work = second_root(claude)
    home_sid = simple_session(claude.folder(project), project, "personal: tidy the readme")
    work_sid = simple_session(folder_in(work, project), project, "work: fix the billing job")
    env = claude.env(CLAUDE_CONFIG_DIRS=str(work))
    rows = {r["id"]: r for r in claude.sessions(project, env=env)}
    assert set(rows) == {home_sid, work_sid}
    assert rows[home_sid]["root"] == str(claude.config) and rows[work_sid]["root"] == str(work)
    assert "CLAUDE_CONFIG_DIR" not in rows[home_sid]["resume"]
    assert shlex.split(rows[work_sid]["resume"])[3:6] == [f"CLAUDE_CONFIG_DIR={work}", "claude", "--resume"]
    printed = claude.run("resume", work_sid, "--project", project, "--print", env=env)
    assert printed.returncode == 0 and f"CLAUDE_CONFIG_DIR={work}" in printed.stdout, printed.stderr
    shown = claude.run("show", work_sid, "--project", project, "--json", env=env)
    assert json.loads(shown.stdout)["row"]["resume"] == rows[work_sid]["resume"]


def test_a_registered_project_remembers_its_roots(claude) -> None:
    project = claude.project("app")
    work = second_root(claude)
    work_sid = simple_session(folder_in(work, project), project, "work: fix the billing job")
    simple_session(claude.folder(project), project, "personal")
    assert work_sid in {r["id"] for r in claude.sessions(project, env=claude.env(CLAUDE_CONFIG_DIRS=str(work)))}
    # The next shell has no CLAUDE_CONFIG_DIRS: the project's entry still names the work root.
    again = claude.rows_by_id(project)
    assert work_sid in again and again[work_sid]["root"] == str(work)
    entry = json.loads((claude.c3home / "projects.json").read_text())["projects"][0]
    assert entry["roots"] == [str(work)]


def test_claude_dirs_in_the_home_config_and_not_in_a_project_config(claude) -> None:
    project = claude.project("app")
    work = second_root(claude)
    other = second_root(claude, "other")
    work_sid = simple_session(folder_in(work, project), project, "work")
    other_sid = simple_session(folder_in(other, project), project, "other")
    claude.c3home.mkdir(parents=True, exist_ok=True)
    (claude.c3home / "config.json").write_text(json.dumps({"claude_dirs": [str(work)]}))
    state = Path(project, ".c3")
    state.mkdir()
    (state / "config.json").write_text(json.dumps({"claude_dirs": [str(other)]}))  # a cloned repository's say
    proc = claude.run("sessions", "--project", project, "--json")
    assert proc.returncode == 0, proc.stderr
    ids = {r["id"] for r in json.loads(proc.stdout)}
    assert work_sid in ids and other_sid not in ids
    assert "ignoring claude_dirs" in proc.stderr
    (claude.c3home / "config.json").write_text(json.dumps({"claude_dirs": ["relative/dir"]}))
    bad = claude.run("sessions", "--project", project)
    assert bad.returncode == 1 and "claude_dirs" in bad.stderr and "absolute" in bad.stderr


def test_a_row_names_the_login_it_ran_under(claude) -> None:
    project = claude.project("app")
    work = second_root(claude)
    folder = folder_in(work, project)
    sid = simple_session(folder, project, "work, signed in")
    path = folder / f"{sid}.jsonl"
    owner = {"type": "session-owner", "accountUuid": ACCOUNT, "organizationUuid": ACCOUNT, "sessionId": sid}
    path.write_bytes(encode(owner) + b"\n" + path.read_bytes())
    env = claude.env(CLAUDE_CONFIG_DIRS=str(work))
    assert claude.rows_by_id(project, env=env)[sid]["account"] == ACCOUNT  # no login recorded: the uuid
    (work / ".claude.json").write_text(
        json.dumps({"oauthAccount": {"accountUuid": ACCOUNT, "emailAddress": "dev@work.example"}})
    )
    assert claude.rows_by_id(project, env=env)[sid]["account"] == "dev@work.example"


def test_a_running_session_of_another_root_is_live(claude) -> None:
    project = claude.project("app")
    work = second_root(claude)
    sid = simple_session(folder_in(work, project), project, "running under the work login")
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        import psutil

        start = psutil.Process(proc.pid).create_time()
        (work / "sessions").mkdir()
        (work / "sessions" / f"{proc.pid}.json").write_text(
            json.dumps(
                {
                    "pid": proc.pid,
                    "sessionId": sid,
                    "cwd": project,
                    "startedAt": int(start * 1000),
                    "status": "waiting",
                    "waitingFor": "permission prompt",
                }
            )
        )
        env = claude.env(CLAUDE_CONFIG_DIRS=str(work))
        assert claude.rows_by_id(project, env=env)[sid]["state"] == "waiting"
        live = json.loads(claude.run("live", "--project", project, "--json", env=env).stdout)
        assert [(e["id"], e["state"]) for e in live] == [(sid, "waiting")]
    finally:
        proc.stdin.close()
        proc.wait()


def test_search_reads_every_root(claude) -> None:
    project = claude.project("app")
    work = second_root(claude)
    sid = simple_session(folder_in(work, project), project, "the quixotic heron in the work root")
    proc = claude.run(
        "search", "quixotic", "--project", project, "--json", env=claude.env(CLAUDE_CONFIG_DIRS=str(work))
    )
    assert proc.returncode == 0, proc.stderr
    hits = json.loads(proc.stdout)["results"]
    assert [h["id"] for h in hits] == [sid] and f"CLAUDE_CONFIG_DIR={work}" in hits[0]["resume"]


def test_an_empty_listing_says_which_roots_it_searched(claude) -> None:
    project = claude.project("app")
    work = second_root(claude)
    proc = claude.run("sessions", "--project", project, env=claude.env(CLAUDE_CONFIG_DIRS=str(work)))
    assert proc.returncode == 0
    assert str(claude.config) in proc.stderr and str(work) in proc.stderr, proc.stderr
    assert os.path.basename(project) in proc.stderr
