"""A disk is finite (``c3async/ground/disk.py``): a full one is said as such at every door, with
nothing half-written, and the temp files of writes killed halfway go at the next write of their
file. Real file systems: a small tmpfs filled to the brim (root only; skipped elsewhere), real
processes killed with SIGKILL in the middle of a write."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import anyio
import pytest

from c3async.ground import disk, safefs
from stress.fulldisk import fill, free_up, killed_halfway, mounted
from stress.transcripts import simple_session

pytestmark = pytest.mark.process

HOUR = 3600


def temps(root: Path) -> list[str]:
    return sorted(os.path.join(d, n) for d, _, names in os.walk(root) for n in names if n.endswith(".tmp"))


def planted(path: Path, age: float, data: bytes = b"x") -> Path:
    """A file written ``age`` seconds ago."""
    path.write_bytes(data)
    return aged(path, age)


def aged(path: Path, age: float) -> Path:
    when = time.time() - age
    os.utime(path, (when, when), follow_symlinks=False)
    return path


@pytest.fixture
def small_disk(claude):
    """An 8 MiB tmpfs holding C3_HOME and a project (its ``.c3`` too); Claude Code's folders stay
    on the sandbox's disk. Yields (disk, project, env)."""
    with mounted(claude.root / "small-disk") as small:
        if small is None:
            pytest.skip("mounting a tmpfs needs root")
        project = small / "work" / "app"
        project.mkdir(parents=True)
        yield small, str(project), claude.env(C3_HOME=str(small / "c3home"))


# ------------------------------------------------------------------ a full disk at the doors


def test_a_full_disk_is_one_line_at_the_cli_with_nothing_half_written(claude, small_disk):
    small, project, env = small_disk
    folder = claude.folder(project)
    sid = simple_session(folder, project, "the okapi prompt")
    assert claude.run("tasks", "add", "--title", "before", "--project", project, env=env).returncode == 0
    assert claude.run("mark", "note", sid, "--summary", "before", "--project", project, env=env).returncode == 0
    state = Path(project, ".c3")
    marks, pm = state / "session_marks.jsonl", state / "pm" / "pm.json"
    before = {p: p.read_bytes() for p in (marks, pm)}
    fill(small)
    for args in (  # a note longer than a page: the slack of the log's last page does not hold it
        ["mark", "note", sid, "--summary", "after " * 1300, "--next", "then " * 1500, "--project", project],
        ["tasks", "add", "--title", "after", "--project", project],
    ):
        done = claude.run(*args, env=env)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        assert "is full" in done.stderr and "bytes free; free space and run again" in done.stderr, done.stderr
    assert {p: p.read_bytes() for p in (marks, pm)} == before
    assert temps(small) == []
    listed = claude.run("sessions", "--project", project, "--json", env=env)  # reads: still answers
    assert listed.returncode == 0 and [r["id"] for r in json.loads(listed.stdout)] == [sid]
    free_up(small)
    assert claude.run("tasks", "add", "--title", "after", "--project", project, env=env).returncode == 0


def test_a_full_disk_is_a_tool_error_over_mcp(claude, small_disk, monkeypatch):
    from mcp import Client

    from c3async.serve import app as server

    small, project, env = small_disk
    sid = simple_session(claude.folder(project), project, "the quokka prompt")
    for key, value in {**env, "CLAUDE_PROJECT_DIR": project}.items():
        monkeypatch.setenv(key, value)

    async def main() -> list[tuple[bool, str]]:
        out = []
        async with Client(server.mcp) as c:
            await anyio.to_thread.run_sync(fill, small)
            for tool, args in (
                ("c3_session", {"action": "note", "target": sid, "data": "after " * 1300, "reasoning": "then " * 1500}),
                ("c3_task", {"action": "add", "title": "after"}),
            ):
                r = await c.call_tool(tool, args)
                out.append((r.is_error, r.content[0].text))
        return out

    for is_error, text in anyio.run(main):
        assert is_error and "is full" in text and "bytes free" in text and "failed inside" not in text, text
    # A job the closed server abandoned (the warm scan writing its cache) ends in its worker
    # thread, as a real process waits for it at exit: only then is a temp file stray.
    for thread in threading.enumerate():
        if thread.name == "AnyIO worker thread":
            thread.join(60)
    assert temps(small) == []


# ------------------------------------------------------------------ temp files of killed writes


def test_a_write_killed_halfway_leaves_a_temp_file_the_next_write_removes(claude):
    """SIGKILL during ``tasks add``: pm.json is as it was and its temp file stays; an hour on,
    the next write of pm.json removes it. A young temp file (a live writer's), another file's
    temp, and a link or a folder named like a temp file are left as they are."""
    project = claude.project("app")
    assert claude.run("tasks", "add", "--title", "first", "--project", project).returncode == 0
    pm = Path(project, ".c3", "pm", "pm.json")
    before = pm.read_bytes()
    assert killed_halfway(["tasks", "add", "--title", "halfway", "--project", project], claude.env())
    assert pm.read_bytes() == before
    [left] = [Path(p) for p in temps(pm.parent) if Path(p).name.startswith(".pm.json.")]
    assert safefs.TEMP_NAME.fullmatch(left.name) and b"halfway" in left.read_bytes()
    aged(left, HOUR + 60)
    young = planted(pm.parent / f".pm.json.{'0' * 16}.tmp", 0)
    other = planted(pm.parent / f".notes.json.{'1' * 16}.tmp", 2 * HOUR)
    decoy = claude.root / "decoy"
    decoy.write_bytes(b"not ours")
    link = pm.parent / f".pm.json.{'2' * 16}.tmp"
    link.symlink_to(decoy)
    aged(link, 2 * HOUR)
    folder = pm.parent / f".pm.json.{'3' * 16}.tmp"
    folder.mkdir()
    aged(folder, 2 * HOUR)

    assert claude.run("tasks", "add", "--title", "second", "--project", project).returncode == 0
    assert not left.exists()
    assert young.exists() and other.exists() and link.is_symlink() and folder.is_dir()
    assert decoy.read_bytes() == b"not ours"
    titles = [t["title"] for t in json.loads(pm.read_text())["tasks"]]
    assert titles == ["first", "second"]


def test_the_hubs_token_write_removes_the_temp_files_a_killed_hub_left(claude, monkeypatch):
    from c3async.hub.server import HubFiles

    claude.activate(monkeypatch)
    files = HubFiles(7000, "http://127.0.0.1:7000/", "t" * 32)
    files._open_dir()
    old = planted(files.dir / f".{files.name}.{'a' * 16}.tmp", 2 * HOUR)
    young = planted(files.dir / f".{files.name}.{'b' * 16}.tmp", 0)
    files.write_token()
    assert not old.exists() and young.exists() and json.loads(files.path.read_text())["port"] == 7000


def test_stale_temps_are_only_our_names_and_only_old_ones(tmp_path):
    (tmp_path / "doc.json").write_bytes(b"{}")
    names = {
        f".doc.json.{'a' * 16}.tmp": True,  # ours, old: removed
        f".doc.json.{'A' * 16}.tmp": False,  # not our hex
        f".doc.json.{'a' * 15}.tmp": False,
        f".doc.json.x.{'a' * 16}.tmp": False,  # another name's
        f".doc.json.{'a' * 16}.tmp.bak": False,
        f"doc.json.{'a' * 16}.tmp": False,
    }
    for name in names:
        planted(tmp_path / name, 2 * HOUR)
    assert disk.clear_stale_temps(tmp_path, "doc.json") == 1
    assert {n: not (tmp_path / n).exists() for n in names} == names
