"""Hints: idle, ended by /clear, branch gone, short. They suggest a look and never hide a row."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta

import pytest

from c3async.ground.project import resolve
from c3async.stores import activity
from stress.transcripts import Conversation, write_session

pytestmark = pytest.mark.process

NOW = datetime.now(UTC)


def _session(folder, cwd, prompts, *, start, branch="main", first=None, mtime=None):
    conv = Conversation(cwd, branch=branch, start=start)
    lines = [conv.permission_mode()]
    if first == "clear":
        lines += [conv.caveat(), conv.clear(), conv.local_stdout()]
    for p in prompts:
        lines += conv.exchange(p)
    end = conv.clock
    write_session(folder, conv.id, lines, mtime=mtime if mtime is not None else end.timestamp())
    return conv.id, end


def _git(cwd, *args):
    subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
            "PATH": "/usr/bin:/bin",
            "HOME": str(cwd),
        },
    )


def test_idle_uses_the_configured_days(claude) -> None:
    proj = claude.project("app")
    folder = claude.folder(proj)
    old, _ = _session(folder, proj, ["a", "b", "c"], start=NOW - timedelta(days=9, hours=1))
    fresh, _ = _session(folder, proj, ["a", "b", "c"], start=NOW - timedelta(hours=2))
    rows = claude.rows_by_id(proj)
    assert rows[old]["hints"] == ["idle 9d"]
    assert rows[fresh]["hints"] == []
    (claude.c3home).mkdir(exist_ok=True)
    (claude.c3home / "config.json").write_text(json.dumps({"idle_days": 30}))
    assert claude.rows_by_id(proj)[old]["hints"] == []
    (claude.root / "work" / "app" / ".c3" / "config.json").write_text(json.dumps({"idle_days": 1}))
    rows = claude.rows_by_id(proj)
    assert rows[old]["hints"] == ["idle 9d"]


def test_short_sessions(claude) -> None:
    proj = claude.project("app")
    folder = claude.folder(proj)
    short, _ = _session(folder, proj, ["only", "two"], start=NOW - timedelta(hours=1))
    longer, _ = _session(folder, proj, ["a", "b", "c"], start=NOW - timedelta(hours=1))
    rows = claude.rows_by_id(proj)
    assert rows[short]["hints"] == ["short"]
    assert rows[longer]["hints"] == []


def test_ended_by_clear_heuristic_pairs_old_and_new_files(claude) -> None:
    proj = claude.project("app")
    folder = claude.folder(proj)
    start = NOW - timedelta(hours=3)
    old, end = _session(folder, proj, ["a", "b", "c"], start=start)
    new, _ = _session(folder, proj, ["d", "e", "f"], start=end + timedelta(seconds=0.1), first="clear")
    # a third session that began with /clear an hour later is no one's successor
    unrelated, _ = _session(folder, proj, ["g", "h", "i"], start=start - timedelta(hours=5))
    rows = claude.rows_by_id(proj)
    assert rows[old]["hints"] == ["ended by /clear"]
    assert rows[new]["began_with_clear"] is True
    assert rows[new]["hints"] == []
    assert rows[unrelated]["hints"] == []


def test_ended_by_clear_from_the_activity_log(claude, monkeypatch) -> None:
    proj = claude.project("app")
    folder = claude.folder(proj)
    sid, _ = _session(folder, proj, ["a", "b", "c"], start=NOW - timedelta(hours=1))
    monkeypatch.setenv("C3_HOME", str(claude.c3home))
    activity.record(resolve(proj), "session_end", session_id=sid, reason="clear")
    assert claude.rows_by_id(proj)[sid]["hints"] == ["ended by /clear"]


def test_branch_gone_reads_loose_and_packed_refs(claude) -> None:
    proj = claude.project("repo")
    _git(proj, "init", "-q", "-b", "main")
    _git(proj, "commit", "-q", "--allow-empty", "-m", "init")
    _git(proj, "branch", "kept")
    _git(proj, "branch", "feature/packed")
    _git(proj, "pack-refs", "--all")
    _git(proj, "branch", "doomed")
    _git(proj, "branch", "-D", "doomed")
    folder = claude.folder(proj)
    start = NOW - timedelta(hours=1)
    ids = {
        b: _session(folder, proj, ["a", "b", "c"], start=start, branch=b)[0]
        for b in ("main", "kept", "feature/packed", "doomed", "HEAD")
    }
    rows = claude.rows_by_id(proj)
    assert rows[ids["doomed"]]["hints"] == ["branch gone"]
    for b in ("main", "kept", "feature/packed", "HEAD"):
        assert rows[ids[b]]["hints"] == [], b


def test_no_branch_hints_outside_a_repository(claude) -> None:
    proj = claude.project("plain")
    sid, _ = _session(claude.folder(proj), proj, ["a", "b", "c"], start=NOW - timedelta(hours=1), branch="whatever")
    assert claude.rows_by_id(proj)[sid]["hints"] == []


def test_likely_is_unmarked_rows_with_hints_and_hints_never_hide(claude) -> None:
    proj = claude.project("app")
    folder = claude.folder(proj)
    start = NOW - timedelta(days=20)
    idle_a, _ = _session(folder, proj, ["a", "b", "c"], start=start)
    idle_b, _ = _session(folder, proj, ["a", "b", "c"], start=start)
    fine, _ = _session(folder, proj, ["a", "b", "c"], start=NOW - timedelta(minutes=5))
    assert claude.run("mark", "note", idle_b, "--project", proj, "--summary", "keep").returncode == 0
    all_ids = {r["id"] for r in claude.sessions(proj)}
    assert all_ids == {idle_a, idle_b, fine}
    assert [r["id"] for r in claude.sessions(proj, "--filter", "likely")] == [idle_a]
