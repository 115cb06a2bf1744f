"""The processes c3async starts in a folder it does not own never import from it: the hook
command ``install-hooks`` writes runs in the project's folder (a cloned repository), and the
background indexer in whatever folder the server or the Hub runs in. A repository that ships
``c3async/`` or ``msgspec.py`` must not run as the user: ``-P`` keeps the folder off the path.

Each plant is first shown to work (the same command without ``-P`` runs it), then shown not to.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from stress.transcripts import simple_session

pytestmark = pytest.mark.process

PLANTS = ("c3async/__init__.py", "msgspec.py")


def _cloned(claude, marker: Path) -> str:
    """A project whose folder ships modules that leave ``marker`` when imported."""
    project = claude.project("cloned")
    for name in PLANTS:
        path = Path(project, name)
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"open({str(marker)!r}, 'a').write({name!r} + '\\n')\n")
    return project


def _hooks(path: Path) -> list[str]:
    settings = json.loads(path.read_text())
    return [
        h["command"] for event in ("SessionStart", "SessionEnd") for g in settings["hooks"][event] for h in g["hooks"]
    ]


def _fire(claude, command: str, project: str, sid: str) -> subprocess.CompletedProcess:
    payload = json.dumps({"hook_event_name": "SessionStart", "session_id": sid, "source": "startup", "cwd": project})
    return subprocess.run(
        ["/bin/sh", "-c", command],
        input=payload,
        text=True,
        capture_output=True,
        cwd=project,
        env=claude.env(CLAUDE_PROJECT_DIR=project),
        timeout=60,
    )


def test_the_installed_hook_never_imports_from_the_project_folder(claude, tmp_path):
    marker = tmp_path / "ran"
    project = _cloned(claude, marker)
    installed = claude.run("install-hooks", "--project", project)
    assert installed.returncode == 0, installed.stderr
    commands = _hooks(Path(project, ".claude", "settings.local.json"))
    assert len(commands) == 2 and all(shlex.split(c)[1:] == ["-P", "-m", "c3async", "hook"] for c in commands)

    unsafe = commands[0].replace(" -P ", " ")
    _fire(claude, unsafe, project, "abcd1234-0000-4000-8000-000000000001")
    assert marker.read_text() == "c3async/__init__.py\n", "the plant would not have run: the test shows nothing"
    marker.unlink()

    sid = "abcd1234-0000-4000-8000-000000000002"
    fired = _fire(claude, commands[0], project, sid)
    assert fired.returncode == 0, fired.stderr
    assert not marker.exists()
    rows = [json.loads(x) for x in Path(project, ".c3", "activity.jsonl").read_text().splitlines()]
    assert [r["session_id"] for r in rows if r["kind"] == "session_start"] == [sid]


def test_a_hook_installed_before_gets_its_folder_off_the_path(claude):
    project = claude.project("upgraded")
    settings = Path(project, ".claude", "settings.local.json")
    settings.parent.mkdir()
    old = f"{shlex.quote(sys.executable)} -m c3async hook"
    mine = {"type": "command", "command": "notify 'c3async hook fired'"}
    settings.write_text(
        json.dumps(
            {
                "hooks": {
                    "SessionStart": [{"hooks": [mine, {"type": "command", "command": old}]}],
                    "SessionEnd": [{"hooks": [{"type": "command", "command": old}]}],
                }
            }
        )
    )
    first = claude.run("install-hooks", "--project", project)
    assert first.returncode == 0 and "SessionStart, SessionEnd" in first.stdout, first.stdout + first.stderr
    assert _hooks(settings) == [
        "notify 'c3async hook fired'",
        *[f"{shlex.quote(sys.executable)} -P -m c3async hook"] * 2,
    ]
    again = claude.run("install-hooks", "--project", project)
    assert again.returncode == 0 and "already" in again.stdout


def test_the_background_indexer_never_imports_from_the_folder_it_starts_in(claude, tmp_path, monkeypatch):
    from c3async.search import index

    marker = tmp_path / "ran"
    project = _cloned(claude, marker)
    simple_session(claude.folder(project), project, "Fix the flaky retry test")
    claude.activate(monkeypatch)
    monkeypatch.chdir(project)

    unsafe = subprocess.run(
        [sys.executable, "-m", "c3async", "index", "--quiet"], env=claude.env(), capture_output=True, timeout=120
    )
    assert marker.exists(), "the plant would not have run: the test shows nothing"
    assert unsafe.returncode != 0  # it imported the planted c3async, which has no __main__
    marker.unlink()

    index.stop_background()  # none left by an earlier test: this one starts its own
    index.update(inline_max=0)  # more to index than a door does itself: a process of its own
    assert len(index._spawned) == 1
    assert index._spawned[0].wait(timeout=120) == 0
    assert not marker.exists()
    found = claude.run("search", "flaky", "--project", project, "--json")
    assert found.returncode == 0 and json.loads(found.stdout)["results"], found.stdout + found.stderr
