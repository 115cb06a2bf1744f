"""Checkpointed folds: a listing reads only what was appended since, and whatever happens to the
log or the checkpoint (replaced, truncated, rotated, garbage, another version, two writers), the
fold equals a fold from scratch."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest

from c3async.ground import folds, jsonl
from c3async.ground.project import resolve
from c3async.ground.stateroot import project_state
from c3async.stores import activity, marks

IDS = [f"{i:08x}-0000-4000-8000-000000000000" for i in range(40)]


@pytest.fixture
def proj(tmp_path, monkeypatch):
    monkeypatch.setenv("C3_HOME", str(tmp_path / "c3home"))
    monkeypatch.setattr(folds, "SAVE_EVERY", 1)  # checkpoint on every refresh: the hard case
    folds._folds.clear()
    (tmp_path / "p").mkdir()
    yield str(tmp_path / "p")
    folds._folds.clear()


def fresh_process() -> None:
    """What a new process sees: no fold in memory, only the checkpoints on disk."""
    folds._folds.clear()


def mark_line(rng: random.Random, ts: float) -> dict:
    op = rng.choice(["stale", "unstale", "note"])
    sid = rng.choice(IDS)
    row = {"ts": ts, "provider": "claude-code", "id": sid, "op": op, "by": "agent"}
    row.update({"summary": f"s{ts}"} if op == "note" else {"reason": f"r{ts}"})
    return row


def activity_line(rng: random.Random, ts: float) -> dict:
    kind = rng.choice(["session_start", "session_end", "tool_call", "session_mark", "c3_start"])
    row = {"ts": ts, "kind": kind, "session_id": rng.choice(IDS)}
    if kind == "session_start" and rng.random() < 0.3:
        row.update(predecessor=rng.choice(IDS), cwd=f"/work/wt{rng.randrange(3)}")
    if kind == "session_end" and rng.random() < 0.5:
        row["reason"] = "clear"
    return row


def scratch_marks(path: Path) -> marks.Folded:
    return marks._apply(marks.Folded(), jsonl.Tail(path, marks.Mark, spans=True).poll())


def scratch_facts(path: Path) -> activity.Facts:
    return activity._apply(activity.Facts(), jsonl.read_all(path, activity.ActivityRow).records)


def append(path: Path, rows: list[dict]) -> None:
    for row in rows:
        jsonl.append(path, row)


@pytest.mark.parametrize("seed", range(6))
def test_folds_equal_a_fold_from_scratch_whatever_happens_to_the_log(proj, seed) -> None:
    rng = random.Random(seed)
    mpath, apath = marks.marks_path(resolve(proj)), activity.activity_path(resolve(proj))
    ts = 1_000_000.0
    for step in range(40):
        what = rng.random()
        if what < 0.6:
            n = rng.randrange(1, 30)
            append(mpath, [mark_line(rng, ts + i) for i in range(n)])
            append(apath, [activity_line(rng, ts + i) for i in range(n)])
            ts += n
        elif what < 0.7 and mpath.exists():  # truncated, possibly mid-line
            for path in (mpath, apath):
                size = path.stat().st_size
                with open(path, "r+b") as f:
                    f.truncate(rng.randrange(0, size + 1))
        elif what < 0.8 and mpath.exists():  # rotated by hand: moved away, a new file begins
            for path in (mpath, apath):
                path.rename(path.with_name(path.name + ".1"))
            append(mpath, [mark_line(rng, ts)])
            append(apath, [activity_line(rng, ts)])
            ts += 1
        elif what < 0.9 and mpath.exists() and mpath.stat().st_size:  # rewritten in place (same inode)
            for path in (mpath, apath):  # from its first line on, as an editor saving in place does
                first, _, rest = path.read_bytes().partition(b"\n")
                try:
                    row = json.loads(first)
                except ValueError:
                    continue
                row["ts"] = row["ts"] + 0.5
                path.write_bytes(json.dumps(row, separators=(",", ":")).encode() + b"\n" + rest)
        else:
            fresh_process()
        book = marks.MarkBook(resolve(proj)).refresh()
        want = scratch_marks(mpath)
        assert (book._state.stale, book._state.note) == (want.stale, want.note), step
        got = activity.facts(resolve(proj))
        want_facts = scratch_facts(apath)
        assert (got.open, got.cleared, got.pairs, got.cwds) == (
            want_facts.open,
            want_facts.cleared,
            want_facts.pairs,
            want_facts.cwds,
        ), step


def test_a_new_process_reads_only_what_was_appended(proj) -> None:
    rng = random.Random(1)
    path = marks.marks_path(resolve(proj))
    append(path, [mark_line(rng, 1000.0 + i) for i in range(500)])
    marks.MarkBook(resolve(proj)).refresh()  # folds all and writes the checkpoint
    assert (project_state(proj) / "cache" / "marks.fold").exists()
    append(path, [mark_line(rng, 2000.0 + i) for i in range(7)])
    fresh_process()
    book = marks.MarkBook(resolve(proj))
    seen: list[int] = []
    apply = marks._apply
    book.fold.apply = lambda state, batch: seen.append(len(batch.records)) or apply(state, batch)
    book.refresh()
    assert book.fold.loaded_from_checkpoint and seen == [7]
    assert book._state == scratch_marks(path)


@pytest.mark.parametrize(
    "damage", ["garbage", "deep", "other-version", "other-file", "empty", "truncated", "huge", "fifo", "symlink"]
)
def test_a_damaged_checkpoint_costs_one_full_fold_never_a_wrong_answer(proj, damage) -> None:
    rng = random.Random(2)
    path = marks.marks_path(resolve(proj))
    append(path, [mark_line(rng, 1000.0 + i) for i in range(200)])
    marks.MarkBook(resolve(proj)).refresh()
    cp = project_state(proj) / "cache" / "marks.fold"
    doc = msgspec.msgpack.decode(cp.read_bytes())
    if damage == "garbage":
        cp.write_bytes(b"\x00\xff not json")
    elif damage == "deep":
        cp.write_bytes(b"[" * 100_000 + b"]" * 100_000)
    elif damage == "other-version":
        doc["version"] = 999
        cp.write_bytes(msgspec.msgpack.encode(doc))
    elif damage == "other-file":  # the checkpoint of another log with the same offset
        path.write_bytes(path.read_bytes()[::-1].replace(b"\n", b" ")[: doc["offset"] - 1] + b"\n")
        append(path, [mark_line(rng, 5000.0)])
    elif damage == "empty":
        cp.write_bytes(b"")
    elif damage == "huge":  # a cloned repository's "checkpoint": never read whole
        with open(cp, "r+b") as f:
            f.truncate(folds.MAX_CHECKPOINT + 10)
    elif damage == "fifo":
        cp.unlink()
        os.mkfifo(cp)
    elif damage == "symlink":
        cp.unlink()
        cp.symlink_to(path)
    else:
        cp.write_bytes(cp.read_bytes()[: len(cp.read_bytes()) // 2])
    log_bytes = path.read_bytes()
    fresh_process()
    assert marks.MarkBook(resolve(proj)).refresh()._state == scratch_marks(path)
    assert path.read_bytes() == log_bytes  # a linked checkpoint is replaced as a name, never written through


def test_a_log_that_grows_while_it_is_folded(proj, monkeypatch) -> None:
    rng = random.Random(3)
    path = activity.activity_path(resolve(proj))
    append(path, [activity_line(rng, 1000.0 + i) for i in range(300)])
    monkeypatch.setattr(jsonl.Tail, "CHUNK", 4096)  # several chunks, and an append between them
    fold = activity.log_fold(resolve(proj))
    original = fold.apply
    appended = []

    def apply(state, batch):
        if not appended:
            appended.append(1)
            append(path, [activity_line(rng, 9000.0)])
        return original(state, batch)

    fold.apply = apply
    fold.refresh()
    fold.apply = original
    facts = fold.refresh()
    assert facts == scratch_facts(path)


WRITER = """
import random, sys
from c3async.ground import folds
from c3async.ground.project import resolve
from c3async.stores import activity, marks
folds.SAVE_EVERY = 1
proj, seed = resolve(sys.argv[1]), int(sys.argv[2])
rng = random.Random(seed)
for i in range(30):
    folds._folds.clear()  # each round a new process's view: load the checkpoint, tail, save
    marks.MarkBook(proj).refresh()
    activity.facts(proj)
"""


@pytest.mark.process
def test_two_processes_updating_one_checkpoint(proj) -> None:
    rng = random.Random(4)
    mpath, apath = marks.marks_path(resolve(proj)), activity.activity_path(resolve(proj))
    append(mpath, [mark_line(rng, 1000.0 + i) for i in range(100)])
    append(apath, [activity_line(rng, 1000.0 + i) for i in range(100)])
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, proj, str(s)], env=env, stderr=subprocess.PIPE)
        for s in range(3)
    ]
    ts = 2000.0
    while any(p.poll() is None for p in procs):
        append(mpath, [mark_line(rng, ts)])
        append(apath, [activity_line(rng, ts)])
        ts += 1
        time.sleep(0.005)
    for p in procs:
        _, err = p.communicate()
        assert p.returncode == 0, err.decode()
    fresh_process()
    assert marks.MarkBook(resolve(proj)).refresh()._state == scratch_marks(mpath)
    assert activity.facts(resolve(proj)) == scratch_facts(apath)


def test_a_killed_session_leaves_the_liveness_fold_after_a_week(proj) -> None:
    path = activity.activity_path(resolve(proj))
    append(
        path,
        [
            {"ts": 1000.0, "kind": "session_start", "session_id": IDS[0]},
            {"ts": 1000.0 + 8 * 86400, "kind": "session_start", "session_id": IDS[1]},
        ],
    )
    assert set(activity.facts(resolve(proj)).open) == {IDS[1]}


def test_marks_are_read_back_from_where_the_fold_says(proj) -> None:
    """The fold keeps where each session's marks are; what ``get`` reads there is the mark an
    independent last-wins fold (by time) finds, junk and torn lines notwithstanding."""
    rng = random.Random(5)
    path = marks.marks_path(resolve(proj))
    want: dict[str, dict] = {}
    for i in range(300):
        row = mark_line(rng, 1000.0 + rng.randrange(0, 50))  # ties and out-of-order times
        jsonl.append(path, row)
        if i % 37 == 0:
            with open(path, "ab") as f:
                f.write(b"{not json at all}\n\n")
        key = (row["id"], "note" if row["op"] == "note" else "stale")
        if key not in want or row["ts"] >= want[key]["ts"]:
            want[key] = row
    book = marks.MarkBook(resolve(proj)).refresh()
    for sid in IDS:
        got = book.get(sid)
        stale, note = want.get((sid, "stale")), want.get((sid, "note"))
        if stale is None and note is None:
            assert got is None
            continue
        assert got is not None
        assert (got.stale.reason if got.stale else None) == (
            stale["reason"] if stale and stale["op"] == "stale" else None
        )
        assert (got.note.summary if got.note else None) == (note["summary"] if note else None)
