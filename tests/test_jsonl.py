"""The shared append-only log: one write per line, healing after torn writes, tolerant reads."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import msgspec
import pytest

from c3async import jsonl


class Rec(msgspec.Struct):
    w: int
    n: int
    pad: str = ""


def test_append_and_read_back(tmp_path: Path) -> None:
    log = tmp_path / "a.jsonl"
    for i in range(5):
        jsonl.append(log, {"w": 0, "n": i})
    batch = jsonl.read_all(log, Rec)
    assert [r.n for r in batch.records] == [0, 1, 2, 3, 4]
    assert batch.skipped == 0
    assert batch.end == log.stat().st_size


def test_torn_tail_is_healed_before_the_next_line(tmp_path: Path) -> None:
    log = tmp_path / "a.jsonl"
    jsonl.append(log, {"w": 0, "n": 1})
    with open(log, "ab") as f:
        f.write(b'{"w":0,"n":2,"pad":"cut he')  # a writer killed mid-line
    jsonl.append(log, {"w": 0, "n": 3})
    lines = log.read_bytes().split(b"\n")
    assert lines[2] == b'{"w":0,"n":3}'
    batch = jsonl.read_all(log, Rec)
    assert [r.n for r in batch.records] == [1, 3]
    assert batch.skipped == 1


def test_reader_skips_garbage_and_unterminated_lines(tmp_path: Path) -> None:
    log = tmp_path / "a.jsonl"
    log.write_bytes(
        b'{"w":1,"n":1}\n'
        b"\x00\xff binary junk\n"
        b'{"w":1,"n":"not a number"}\n'
        b'{"w":1,"n":2},{"w":1,"n":3}\n'  # two values glued on one line
        b"\n"
        b'{"w":1,"n":4}\n'
        b'{"w":1,"n":5'  # still being written
    )
    batch = jsonl.read_all(log, Rec)
    assert [r.n for r in batch.records] == [1, 4]
    assert batch.skipped == 3
    assert batch.end == log.stat().st_size - len(b'{"w":1,"n":5')


def test_tail_reads_only_new_bytes_and_resumes_after_a_partial_line(tmp_path: Path) -> None:
    log = tmp_path / "a.jsonl"
    tail = jsonl.Tail(log, Rec)
    assert tail.poll().records == []  # no file yet
    jsonl.append(log, {"w": 0, "n": 1})
    assert [r.n for r in tail.poll().records] == [1]
    with open(log, "ab") as f:
        f.write(b'{"w":0,"n":2')
    assert tail.poll().records == []
    with open(log, "ab") as f:
        f.write(b"}\n")
    assert [r.n for r in tail.poll().records] == [2]
    assert tail.offset == log.stat().st_size


def test_tail_starts_over_when_the_file_is_replaced(tmp_path: Path) -> None:
    log = tmp_path / "a.jsonl"
    jsonl.append(log, {"w": 0, "n": 1})
    jsonl.append(log, {"w": 0, "n": 2})
    tail = jsonl.Tail(log, Rec)
    tail.poll()
    replacement = tmp_path / "b.jsonl"
    jsonl.append(replacement, {"w": 0, "n": 9})
    os.replace(replacement, log)
    batch = tail.poll()
    assert tail.reset
    assert [r.n for r in batch.records] == [9]


def test_a_record_must_be_one_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        jsonl.append(tmp_path / "a.jsonl", b'{"a":1}\n{"b":2}\n')


def test_failed_write_leaves_nothing_behind(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root can write to a read-only folder")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    with pytest.raises(OSError):
        jsonl.append(folder / "a.jsonl", {"w": 0, "n": 1})


def test_full_disk_error_is_clear_and_leaves_no_half_line(tmp_path: Path) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    # /dev/full fails every write with ENOSPC: the append must raise, not half-succeed.
    link = tmp_path / "full.jsonl"
    link.symlink_to("/dev/full")
    with pytest.raises(OSError) as err:
        jsonl.append(link, {"w": 0, "n": 1})
    assert err.value.errno == 28


WRITER = textwrap.dedent(
    """
    import os, sys, random
    from pathlib import Path
    from c3async import jsonl
    log, ack, w, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rnd = random.Random(w)
    ack_fd = os.open(ack, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    for i in range(n):
        pad = "x" * rnd.choice([50, 500, 5000, 60000, 200000])
        jsonl.append(log, {"w": w, "n": i, "pad": pad})
        os.write(ack_fd, b"%d\\n" % i)   # acknowledged only after append returned
    """
)


def _spawn(log: Path, ack: Path, w: int, n: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.Popen([sys.executable, "-c", WRITER, str(log), str(ack), str(w), str(n)], env=env)


def _check(log: Path, acks: dict[int, Path]) -> tuple[list[Rec], int]:
    data = log.read_bytes()
    batch = jsonl.read_all(log, Rec)
    seen: dict[tuple[int, int], int] = {}
    per_writer: dict[int, list[int]] = {}
    for r in batch.records:
        seen[(r.w, r.n)] = seen.get((r.w, r.n), 0) + 1
        per_writer.setdefault(r.w, []).append(r.n)
    assert all(count == 1 for count in seen.values()), "a line was written twice"
    for w, ns in per_writer.items():
        assert ns == sorted(ns), f"writer {w}'s lines are out of order"
    for w, ack in acks.items():
        acked = [int(x) for x in ack.read_text().split()] if ack.exists() else []
        for i in acked:
            assert (w, i) in seen, f"acknowledged line {w}/{i} is lost"
    # every good line is exactly one record: nothing glued
    for line in data.split(b"\n")[:-1]:
        assert line.count(b'{"w":') <= 1, "two records glued on one line"
    return batch.records, batch.skipped


def test_64_processes_append_at_once_nothing_lost_or_glued(tmp_path: Path) -> None:
    log = tmp_path / "marks.jsonl"
    acks = {w: tmp_path / f"ack{w}" for w in range(64)}
    procs = [_spawn(log, acks[w], w, 12) for w in range(64)]
    for p in procs:
        assert p.wait(timeout=120) == 0
    records, skipped = _check(log, acks)
    assert len(records) == 64 * 12
    assert skipped == 0


def test_writers_killed_mid_append_lose_only_unacknowledged_lines(tmp_path: Path) -> None:
    log = tmp_path / "marks.jsonl"
    acks = {w: tmp_path / f"ack{w}" for w in range(16)}
    procs = {w: _spawn(log, acks[w], w, 400) for w in range(16)}
    rnd = random.Random(7)
    time.sleep(0.5)
    for w in rnd.sample(sorted(procs), 10):
        time.sleep(rnd.uniform(0, 0.2))
        procs[w].send_signal(signal.SIGKILL)
    for p in procs.values():
        p.wait(timeout=120)
    # A survivor appends after the kills: its line must land on its own line.
    jsonl.append(log, {"w": 99, "n": 0})
    acks[99] = tmp_path / "ack99"
    acks[99].write_text("0\n")
    records, _skipped = _check(log, acks)
    assert records[-1].w == 99
