"""The cheap watch (``catalog.watch``, ``sessions.watch``, the Hub's feed) still notices every
kind of change: a new transcript, a hot one that grew, a cold one that grew (at the full pass,
driven here explicitly), a deleted or replaced one, a project's first folder, a mark, a
heartbeat that starts, stops or goes stale, a registry change.

Real files in a sandbox, passes driven in-process. A transcript folder's mtime is set into the
past before the cheap passes, so the folder counts as settled (a folder modified within
``SLACK_S`` is scanned at every pass): what a pass did is then read from ``scans`` and ``stats``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from c3async.catalog.listing import candidates
from c3async.catalog.locate import locate
from c3async.catalog.watch import TranscriptWatch
from c3async.ground.project import resolve
from c3async.live.heartbeat import HeartbeatWriter
from c3async.live.running import proc_start_ticks
from c3async.sessions.runtime import Feed as ChangeFeed
from c3async.sessions.watch import ProjectWatch
from c3async.stores import registry
from c3async.stores.marks import write_mark
from stress.transcripts import Conversation, append_lines, set_mtime, simple_session

DAY = 86400.0


@dataclass
class World:
    project: str
    folder: Path
    hot: str  # modified a minute ago
    cold: str  # three days ago


@pytest.fixture
def world(claude, monkeypatch) -> World:
    claude.activate(monkeypatch)
    project = claude.project("app")
    folder = claude.folder(project)
    hot = simple_session(folder, project, "the hot one", mtime=time.time() - 60)
    cold = simple_session(folder, project, "the cold one", mtime=time.time() - 3 * DAY)
    settle(folder)
    return World(project, folder, hot, cold)


def settle(folder: Path) -> None:
    """The folder last modified a minute ago: past the slack of a coarse file-system clock."""
    set_mtime(folder, time.time() - 60)


def listed(project: str) -> tuple:
    """What a fresh listing of the project's session files says now."""
    found = candidates([f for f, _ in locate(project).folders])
    return tuple((c.session_id, c.path, c.size, c.mtime_ns) for c in found)


def grow(world: World, sid: str, *, mtime: float | None = None) -> None:
    conv = Conversation(world.project, sid)
    append_lines(world.folder / f"{sid}.jsonl", conv.exchange("one more thing"), mtime=mtime)


def test_a_settled_pass_scans_no_folder_and_stats_only_the_hot_file(world):
    watch = TranscriptWatch(world.project)
    assert watch.poll(full=False) is True and watch.files == listed(world.project)
    scans, stats = watch.scans, watch.stats
    assert watch.poll(full=False) is False
    assert (watch.scans, watch.stats) == (scans, stats + 1)  # the world.hot file alone
    assert watch.poll(full=True) is False and watch.scans == scans + 1  # the full pass scans the world.folder


def test_a_new_transcript_appears_at_the_next_pass(world):
    watch = TranscriptWatch(world.project)
    watch.poll(full=False)
    new = simple_session(world.folder, world.project, "just started")
    assert watch.poll(full=False) is True
    assert new in watch.ids and watch.files == listed(world.project)


def test_a_hot_transcript_that_grows_is_seen_without_a_scan(world):
    watch = TranscriptWatch(world.project)
    watch.poll(full=False)
    scans = watch.scans
    grow(world, world.hot)
    assert watch.poll(full=False) is True
    assert watch.scans == scans and watch.files == listed(world.project)
    assert watch.files[0][0] == world.hot


def test_a_cold_transcript_that_grows_is_seen_at_the_full_pass(world):
    watch = TranscriptWatch(world.project)
    watch.poll(full=False)
    grow(world, world.cold)
    assert watch.poll(full=False) is False  # world.cold: not stat'ed by a cheap pass
    assert watch.poll(full=True) is True and watch.files == listed(world.project)
    assert watch.files[0][0] == world.cold
    grow(world, world.cold)  # modified now: hot from here on
    assert watch.poll(full=False) is True and watch.files == listed(world.project)


def test_a_cold_transcript_of_a_running_session_is_hot(world):
    watch = TranscriptWatch(world.project)
    watch.poll(full=False)
    grow(world, world.cold, mtime=time.time() - 2 * DAY)  # its claude writes with an old clock, say
    assert watch.poll(full=False, running={world.cold}) is True and watch.files == listed(world.project)


def test_a_deleted_or_replaced_transcript_is_seen_at_the_next_pass(world):
    watch = TranscriptWatch(world.project)
    watch.poll(full=False)
    (world.folder / f"{world.cold}.jsonl").unlink()
    assert watch.poll(full=False) is True and world.cold not in watch.ids
    settle(world.folder)
    # the hot file replaced by a link of the same name, the folder's mtime put back: the hot
    # file's stat finds it is no longer the file scanned, and the folder is scanned again
    path = world.folder / f"{world.hot}.jsonl"
    target = path.with_name("elsewhere.txt")
    path.rename(target)
    path.symlink_to(target)
    settle(world.folder)
    assert watch.poll(full=False) is True and world.hot not in watch.ids and watch.files == listed(world.project)


def test_a_projects_first_folder_is_found_without_a_full_pass(claude, monkeypatch):
    claude.activate(monkeypatch)
    project = claude.project("fresh")
    watch = TranscriptWatch(project)
    assert watch.poll(full=False) is False and watch.files == ()
    folder = claude.folder(project)  # Claude Code makes the folder with the first session
    sid = simple_session(folder, project, "first words")
    assert watch.poll(full=False) is True and watch.ids == {sid}


def registry_file(config: Path, pid: int, sid: str, cwd: str, status: str) -> Path:
    folder = config / "sessions"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{pid}.json"
    path.write_text(
        json.dumps(
            {
                "pid": pid,
                "sessionId": sid,
                "cwd": cwd,
                "procStart": str(proc_start_ticks(pid)),
                "status": status,
                "statusUpdatedAt": time.time() * 1000,
            }
        )
    )
    return path


@pytest.mark.process
def test_a_project_position_moves_with_marks_heartbeats_and_the_registry(world, claude, sleeper):
    watch = ProjectWatch(resolve(world.project))
    idle = watch.poll(full=False)
    assert watch.poll(full=False) == idle  # nothing moved, nothing moves

    write_mark(resolve(world.project), world.cold, "note", summary="look again", by="user")
    marked = watch.poll(full=False)
    assert marked != idle

    beat = HeartbeatWriter(resolve(world.project), "c3-session-1", "vscode", lambda: world.hot)
    beat.beat()
    beating = watch.poll(full=False)
    assert beating != marked
    beat.beat()  # a live server's next beat: nothing a row shows moved
    assert watch.poll(full=False) == beating
    stale = time.time() - 3600
    os.utime(beat.path, (stale, stale))  # its server stopped beating an hour ago
    assert watch.poll(full=False) != beating
    beat.remove()
    assert watch.poll(full=False) == marked

    if proc_start_ticks(sleeper.pid) is not None:  # /proc: the registry's start-time check
        reg = registry_file(claude.config, sleeper.pid, world.cold, world.project, "busy")
        running = watch.poll(full=False)
        assert running != marked
        reg.write_text(reg.read_text().replace('"busy"', '"waiting"'))
        assert watch.poll(full=False) != running
        reg.unlink()
        assert watch.poll(full=False) == marked


def test_the_hubs_feed_moves_only_the_project_that_changed(claude, monkeypatch):
    claude.activate(monkeypatch)
    folders = [claude.project(name) for name in ("one", "two")]
    for p in folders:
        simple_session(claude.folder(p), p, f"work in {os.path.basename(p)}", mtime=time.time() - 600)
        settle(claude.folder(p))
        registry.register(resolve(p))
    projects = [resolve(p) for p in folders]
    feed = ChangeFeed(lambda: [resolve(p) for p in registry.projects()])
    feed.poll()
    feed.primed.set()  # the baseline is taken
    assert feed.poll(full=False) == [] and feed.poll(full=False, quick=True) == []
    simple_session(claude.folder(folders[1]), folders[1], "a second session")
    assert feed.poll(full=False, quick=True) == []  # a quick poll: the marks, activity and registry alone
    assert feed.poll(full=False) == [projects[1]]
    write_mark(projects[0], feed.watches[projects[0]].transcripts.files[0][0], "stale", reason="done", by="user")
    assert feed.poll(full=False, quick=True) == [projects[0]]
    assert feed.poll(full=False) == []
    write_mark(projects[1], feed.watches[projects[1]].transcripts.files[0][0], "note", summary="later", by="user")
    assert feed.poll(full=False) == [projects[1]]  # a whole poll too
