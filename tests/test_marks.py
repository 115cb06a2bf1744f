"""Marks: validation, id resolution, last-wins fold, activity rows, and many writers at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from c3async.ground.errors import AmbiguousSession, BadArgument, UnknownSession
from c3async.ground.project import resolve
from c3async.sessions import act
from c3async.stores import marks
from c3async.stores.activity import read_rows
from stress.transcripts import Conversation, simple_session, write_session


@pytest.fixture
def project(claude, monkeypatch):
    """A project with three sessions, and this process pointed at the sandbox."""
    claude.activate(monkeypatch)
    proj = claude.project("app")
    folder = claude.folder(proj)
    ids = [
        simple_session(folder, proj, "first", session_id="aaaa1111-0000-4000-8000-000000000001"),
        simple_session(folder, proj, "second", session_id="aaaa2222-0000-4000-8000-000000000002"),
        simple_session(folder, proj, "third", session_id="bbbb3333-0000-4000-8000-000000000003"),
    ]
    return proj, ids


def test_stale_needs_a_reason(project) -> None:
    proj, ids = project
    with pytest.raises(BadArgument, match="reason"):
        act.mark(resolve(proj), ids[0], "stale")
    with pytest.raises(BadArgument, match="reason"):
        act.mark(resolve(proj), ids[0], "stale", reason="   ")


def test_unknown_op_and_by_are_refused(project) -> None:
    proj, ids = project
    with pytest.raises(BadArgument, match="stale, unstale, note, keep, unkeep"):
        act.mark(resolve(proj), ids[0], "delete")
    with pytest.raises(BadArgument, match="agent"):
        act.mark(resolve(proj), ids[0], "note", summary="x", by="robot")


def test_prefix_resolves_and_ambiguity_names_candidates(project) -> None:
    proj, ids = project
    mark, _ = act.mark(resolve(proj), "bbbb", "note", summary="done")
    assert mark.id == ids[2]
    with pytest.raises(AmbiguousSession) as err:
        act.mark(resolve(proj), "aaaa", "note", summary="x")
    assert ids[0] in str(err.value) and ids[1] in str(err.value)
    with pytest.raises(BadArgument, match="4 characters"):
        act.mark(resolve(proj), "aaa", "note", summary="x")


def test_unknown_id_and_foreign_transcript_are_refused(project, claude) -> None:
    proj, _ids = project
    with pytest.raises(UnknownSession):
        act.mark(resolve(proj), "cccc", "note", summary="x")
    # A session of a colliding directory (my_app vs my-app share a folder) is not this project's:
    # its mark goes to the project it ran in (found through the folder), never to this one.
    other = claude.project("app-x")
    mine = claude.project("app_x")
    foreign = simple_session(claude.folder(mine), other, "theirs")
    _written, found = act.mark(resolve(mine), foreign, "note", summary="x")
    assert found.project == resolve(other) and found.elsewhere
    assert not marks.marks_path(resolve(mine)).exists() and marks.marks_path(resolve(other)).exists()


def test_successor_must_be_a_known_session(project) -> None:
    proj, ids = project
    with pytest.raises(BadArgument, match="the successor: no session"):  # a bad argument of this mark
        act.mark(resolve(proj), ids[0], "stale", reason="superseded", successor="dddd")
    with pytest.raises(BadArgument, match="own successor"):
        act.mark(resolve(proj), ids[0], "stale", reason="superseded", successor=ids[0])
    mark, _ = act.mark(resolve(proj), ids[0], "stale", reason="superseded", successor="bbbb")
    assert mark.successor == ids[2]


def test_file_row_is_exactly_the_spec_row(project) -> None:
    proj, ids = project
    act.mark(resolve(proj), ids[0], "stale", reason="done", by="agent", host=ids[1])
    line = marks.marks_path(resolve(proj)).read_bytes().splitlines()[0]
    row = json.loads(line)
    assert list(row) == [
        "ts",
        "provider",
        "id",
        "op",
        "reason",
        "successor",
        "summary",
        "next_steps",
        "by",
        "by_session",
    ]
    assert row["op"] == "stale" and row["by"] == "agent" and row["by_session"] == ids[1]


def test_fold_is_last_wins_and_every_mark_has_an_activity_row(project) -> None:
    proj, ids = project
    act.mark(resolve(proj), ids[0], "stale", reason="one")
    act.mark(resolve(proj), ids[0], "note", summary="s1", next_steps="n1")
    act.mark(resolve(proj), ids[0], "stale", reason="two")
    act.mark(resolve(proj), ids[1], "stale", reason="x")
    act.mark(resolve(proj), ids[1], "unstale")
    act.mark(resolve(proj), ids[0], "note", summary="s2")
    book = marks.MarkBook(resolve(proj)).refresh()
    assert book.get(ids[0]).stale.reason == "two"
    assert book.get(ids[0]).note.summary == "s2" and book.get(ids[0]).note.next_steps is None
    assert book.get(ids[1]).stale is None
    assert book.get(ids[2]) is None
    kinds = [r.kind for r in read_rows(resolve(proj)).records]
    assert kinds.count("session_mark") == 6


def test_incremental_fold_reads_only_new_marks(project) -> None:
    proj, ids = project
    book = marks.MarkBook(resolve(proj))
    act.mark(resolve(proj), ids[0], "stale", reason="one")
    book.refresh()
    offset = book.fold.tail.offset
    act.mark(resolve(proj), ids[0], "unstale")
    book.refresh()
    assert book.fold.tail.offset > offset
    assert book.get(ids[0]).stale is None


def test_bad_lines_in_the_marks_file_are_skipped_and_counted(project) -> None:
    proj, ids = project
    path = marks.marks_path(resolve(proj))
    act.mark(resolve(proj), ids[0], "stale", reason="one")
    with open(path, "ab") as f:
        f.write(b"not json at all\n")
        f.write(b'{"ts":1,"provider":"claude-code","id":"x","op":"explode","by":"user"}\n')
        f.write(b"\xff\xfe\x00binary\n")
        f.write(b'{"ts":2,"provider":"claude-code","id":"')  # torn
    act.mark(resolve(proj), ids[1], "note", summary="after the junk")
    book = marks.MarkBook(resolve(proj)).refresh()
    assert book.skipped == 4
    assert book.get(ids[0]).stale.reason == "one"
    assert book.get(ids[1]).note.summary == "after the junk"


@pytest.mark.process
def test_cli_marks_show_up_in_rows_and_filters(claude) -> None:
    proj = claude.project("app")
    folder = claude.folder(proj)
    busy = Conversation(proj)
    lines = [busy.permission_mode()]
    for i in range(4):
        lines += busy.exchange(f"step {i}")
    write_session(folder, busy.id, lines)
    short = simple_session(folder, proj, "just one prompt")
    assert (
        claude.run(
            "mark", "stale", short[:8], "--project", proj, "--reason", "dead end", "--successor", busy.id
        ).returncode
        == 0
    )
    assert (
        claude.run(
            "mark", "note", busy.id, "--project", proj, "--summary", "Hub tab done", "--next", "Desk segment"
        ).returncode
        == 0
    )
    rows = claude.rows_by_id(proj)
    assert rows[short]["stale"]["reason"] == "dead end"
    assert rows[short]["stale"]["successor"] == busy.id
    assert rows[short]["stale"]["by"] == "user"
    assert rows[busy.id]["note"] == {
        "summary": "Hub tab done",
        "next_steps": "Desk segment",
        "ts": rows[busy.id]["note"]["ts"],
    }
    assert [r["id"] for r in claude.sessions(proj, "--filter", "stale")] == [short]
    # marked rows are never "likely"; an unstale leaves the row marked (a person decided)
    assert claude.sessions(proj, "--filter", "likely") == [] or all(
        r["id"] not in (short, busy.id) for r in claude.sessions(proj, "--filter", "likely")
    )
    assert claude.run("mark", "unstale", short, "--project", proj).returncode == 0
    assert claude.sessions(proj, "--filter", "stale") == []


@pytest.mark.process
def test_cli_errors_go_to_stderr_with_status_1(claude) -> None:
    proj = claude.project("app")
    simple_session(claude.folder(proj), proj, "x")
    proc = claude.run("mark", "stale", "zzzz", "--project", proj, "--reason", "r")
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "no session" in proc.stderr and "Traceback" not in proc.stderr
    proc = claude.run("mark", "note", "--project", proj, "--summary", "x")
    assert proc.returncode == 1 and "CLAUDE_CODE_SESSION_ID" in proc.stderr


MARKER = textwrap.dedent(
    """
    import os, sys
    from c3async.ground.project import resolve
    from c3async.stores.marks import write_mark
    proj, ids, w, n = resolve(sys.argv[1]), sys.argv[2].split(","), int(sys.argv[3]), int(sys.argv[4])
    ops = ["stale", "note", "unstale"]
    for i in range(n):
        op = ops[(w + i) % 3]
        sid = ids[(w * 7 + i) % len(ids)]
        write_mark(proj, sid, op, reason=f"w{w}-{i}" if op == "stale" else None,
                   # up to the summary limit (MAX_SUMMARY, 8,000); lines far bigger than a pipe
                   # buffer are appended concurrently in test_jsonl
                   summary=("s" * (100 + (i % 5) * 1950)) + f"w{w}-{i}" if op == "note" else None,
                   by="agent", by_session=f"{w}-{i}")  # a unique tag per mark
        print(f"{w}-{i}", flush=True)
    """
)


@pytest.mark.process
def test_concurrent_writers_lose_nothing_and_fold_is_last_wins_by_time(project) -> None:
    proj, ids = project
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", MARKER, proj, ",".join(ids), str(w), "10"],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for w in range(16)
    ]
    acked = set()
    for p in procs:
        out, _ = p.communicate(timeout=180)
        assert p.returncode == 0
        acked.update(out.split())
    assert len(acked) == 160
    raw = [json.loads(line) for line in marks.marks_path(resolve(proj)).read_bytes().splitlines()]
    assert len(raw) == 160
    # every acknowledged mark is in the file exactly once
    tags = [r["by_session"] for r in raw]
    assert sorted(tags) == sorted(acked)
    # last-wins oracle by time (the greatest ts; a tie goes to the later line): concurrent
    # writers take their ts before the lock, so file order and time order may differ a little
    oracle: dict[str, dict] = {}
    for r in raw:
        state = oracle.setdefault(r["id"], {"stale": None, "note": None, "stale_ts": -1.0, "note_ts": -1.0})
        kind = "note" if r["op"] == "note" else "stale"
        if r["ts"] < state[kind + "_ts"]:
            continue
        state[kind + "_ts"] = r["ts"]
        if r["op"] == "stale":
            state["stale"] = r["reason"]
        elif r["op"] == "unstale":
            state["stale"] = None
        else:
            state["note"] = r["summary"]
    book = marks.MarkBook(resolve(proj)).refresh()
    for sid, state in oracle.items():
        got = book.get(sid)
        assert (got.stale.reason if got.stale else None) == state["stale"]
        assert (got.note.summary if got.note else None) == state["note"]
    assert sum(1 for r in read_rows(resolve(proj)).records if r.kind == "session_mark") == 160
