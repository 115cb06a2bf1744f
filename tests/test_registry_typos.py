"""Nothing registered or created by accident: a ``--project`` that is no directory is a usage
error on every command, ``install-hooks`` never creates the folder, a task never lands in a
fallback state, and only a folder c3async serves or a person lists with sessions is registered.
``c3async projects`` lists the registry; ``--forget`` and ``--prune`` take entries out."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from c3async.ground.project import resolve
from stress.transcripts import simple_session

pytestmark = pytest.mark.process

SID = "5e551011-0000-4000-8000-000000000001"

# Every command that takes --project, with what else it needs.
COMMANDS = [
    ["sessions"],
    ["sessions", "--json"],
    ["show", SID],
    ["mark", "stale", SID, "--reason", "done"],
    ["mark", "note", SID, "--summary", "s"],
    ["mark", "keep", SID],
    ["keep", SID],
    ["resume", SID, "--print"],
    ["tasks", "add", "--title", "a task"],
    ["tasks", "list"],
    ["live"],
    ["stats"],
    ["search", "anything"],
    ["install-hooks"],
]


def _snapshot(root: Path) -> set[str]:
    return {os.path.relpath(os.path.join(d, n), root) for d, ds, fs in os.walk(root) for n in ds + fs}


@pytest.mark.parametrize("kind", ["missing", "a file", "missing below a file"])
def test_a_project_that_is_no_directory_is_a_usage_error_everywhere(claude, kind):
    real = claude.project("real")
    simple_session(claude.folder(real), real, "listed", session_id=SID)
    target = {
        "missing": claude.root / "work" / "no-such-dir",
        "a file": claude.root / "work" / "README.md",
        "missing below a file": claude.root / "work" / "README.md" / "sub",
    }[kind]
    (claude.root / "work" / "README.md").write_text("not a project\n")
    before = _snapshot(claude.root)
    for args in COMMANDS:
        proc = claude.run(*args, "--project", str(target))
        assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
        assert "--project" in proc.stderr and str(target) in proc.stderr, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
    assert _snapshot(claude.root) == before  # nothing made: no folder, no fallback state, no registry entry
    assert not (claude.c3home / "projects.json").exists()


def test_a_project_env_that_is_no_directory_is_a_usage_error(claude):
    proc = claude.run("sessions", env=claude.env(CLAUDE_PROJECT_DIR=str(claude.root / "gone")))
    assert proc.returncode == 2 and "CLAUDE_PROJECT_DIR" in proc.stderr, proc.stderr


@pytest.mark.skipif(
    (3, 13, 0) <= sys.version_info[:3] < (3, 13, 3),
    reason="CPython 3.13.0-3.13.2 raise SystemError on a module attribute missed while the current "
    "folder is gone (python/cpython#130932), before c3async can say anything",
)
def test_a_deleted_current_directory_is_a_usage_error(claude):
    import subprocess

    gone = claude.root / "work" / "gone"
    gone.mkdir(parents=True)
    code = (
        "import os, runpy, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); "
        "sys.argv = ['c3async', 'sessions']; runpy.run_module('c3async', run_name='__main__')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(gone)], capture_output=True, text=True, env=claude.env(), timeout=60
    )
    assert proc.returncode == 2 and "current directory no longer exists" in proc.stderr, proc.stderr


def test_only_a_folder_with_sessions_is_registered(claude):
    empty = claude.project("empty")
    busy = claude.project("busy")
    simple_session(claude.folder(busy), busy, "work")
    assert claude.run("sessions", "--project", empty).returncode == 0
    assert claude.run("sessions", cwd="/").returncode == 0  # running in / registers nothing either
    assert not (claude.c3home / "projects.json").exists()
    assert claude.run("sessions", "--project", busy).returncode == 0
    listed = json.loads(claude.run("projects", "--json").stdout)
    assert [(p["path"], p["sessions"], p["missing"]) for p in listed] == [(busy, 1, False)]
    assert listed[0]["last_activity"]


def test_projects_lists_forgets_and_prunes(claude):
    keep, gone = claude.project("keep"), claude.project("gone")
    for p in (keep, gone):
        simple_session(claude.folder(p), p, f"work in {os.path.basename(p)}")
        assert claude.run("sessions", "--project", p).returncode == 0
    shutil.rmtree(gone)  # its .c3 (the listing cached there) goes with it
    proc = claude.run("projects")
    assert proc.returncode == 0
    assert "missing" in proc.stdout and gone in proc.stdout and "1 session" in proc.stdout
    listing = claude.run("sessions", "--all", "--json")
    assert listing.returncode == 0 and gone in listing.stderr and "no longer exists" in listing.stderr
    assert {r["project"] for r in json.loads(listing.stdout)} == {keep, gone}  # a gone folder's sessions stay
    assert claude.run("projects", "--forget", str(claude.root / "never")).returncode == 1
    proc = claude.run("projects", "--prune", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout) == {"forgotten": [gone]}
    proc = claude.run("projects", "--forget", keep + "/")
    assert proc.returncode == 0 and keep in proc.stdout
    # Forgotten, both are still found through Claude Code's folders (the gone one as missing).
    listed = {p["path"]: (p["registered"], p["missing"]) for p in json.loads(claude.run("projects", "--json").stdout)}
    assert listed == {keep: (False, False), gone: (False, True)}


def test_a_missing_project_has_no_fallback_state(claude, monkeypatch):
    """In the library too: a write to a project folder that does not exist fails naming it; it
    never lands in $C3_HOME/state where the real project would never see it."""
    from c3async.ground import stateroot
    from c3async.tasks import actions

    claude.activate(monkeypatch)
    gone = str(claude.root / "work" / "typo")
    assert stateroot.project_state(gone) == Path(gone, ".c3")
    with pytest.raises(OSError):
        actions.run(resolve(gone), actions.Who(session=None, by="user"), "add", title="lost")
    assert not Path(gone).exists() and not (claude.c3home / "state").exists()
