"""The shared append-only log: one write per line, healing after torn writes, tolerant reads."""

from __future__ import annotations

import errno
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

from c3async.ground import jsonl


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


class _ShortThenFull:
    """Stands in for the ``os`` module inside ``c3async.ground.jsonl``: its first ``write`` writes only
    half of the bytes (a short write, as a filling disk gives), every later one fails with
    ENOSPC. Everything else is the real ``os``."""

    def __init__(self, fail_at_once: bool = False) -> None:
        self.calls = 0
        self.fail_at_once = fail_at_once

    def __getattr__(self, name: str):
        return getattr(os, name)

    def write(self, fd: int, data) -> int:
        self.calls += 1
        if self.calls == 1 and not self.fail_at_once:
            return os.write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _two_good_lines(log: Path) -> bytes:
    jsonl.append(log, {"w": 0, "n": 1})
    jsonl.append(log, {"w": 0, "n": 2, "pad": "x" * 100})
    return log.read_bytes()


def _next_append_works(log: Path, before: bytes) -> None:
    jsonl.append(log, {"w": 0, "n": 3})
    assert log.read_bytes() == before + b'{"w":0,"n":3}\n'
    batch = jsonl.read_all(log, Rec)
    assert [r.n for r in batch.records] == [1, 2, 3]
    assert batch.skipped == 0


def test_failed_write_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that gets part of the line out and then fails (a disk filling up) is cut back:
    the file holds exactly the earlier complete lines, and the next append lands whole."""
    log = tmp_path / "a.jsonl"
    before = _two_good_lines(log)
    fake = _ShortThenFull()
    with monkeypatch.context() as m, pytest.raises(OSError) as err:
        m.setattr(jsonl, "os", fake)
        jsonl.append(log, {"w": 0, "n": 99, "pad": "y" * 5000})
    assert fake.calls >= 2, "the injected short write was never reached: the test checks nothing"
    assert err.value.errno == errno.ENOSPC
    assert log.read_bytes() == before  # the half line written first is gone
    _next_append_works(log, before)


def test_failed_write_after_a_torn_tail_leaves_the_torn_tail_only(tmp_path: Path, monkeypatch) -> None:
    """The heal (a newline written before the line) and the line fail together: the rollback
    returns the file to what it was, the torn fragment included, which the next append heals."""
    log = tmp_path / "a.jsonl"
    _two_good_lines(log)
    with open(log, "ab") as f:
        f.write(b'{"w":0,"n":7,"pad":"cut')  # a writer killed mid-line
    before = log.read_bytes()
    with monkeypatch.context() as m, pytest.raises(OSError):
        m.setattr(jsonl, "os", _ShortThenFull())
        jsonl.append(log, {"w": 0, "n": 99, "pad": "y" * 5000})
    assert log.read_bytes() == before
    jsonl.append(log, {"w": 0, "n": 3})
    batch = jsonl.read_all(log, Rec)
    assert [r.n for r in batch.records] == [1, 2, 3]
    assert batch.skipped == 1  # the torn fragment, on a line of its own


@pytest.fixture
def small_disk(tmp_path: Path):
    """A real 64 KiB tmpfs, where this machine lets us mount one (root, CAP_SYS_ADMIN)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root on Linux")
    try:
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30, check=False)


def _fill(folder: Path, leave: int) -> Path:
    """Fill the file system of ``folder`` to the last byte, then free ``leave`` bytes."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        block = b"\0" * 4096
        while True:
            try:
                if os.write(fd, block) < len(block):
                    break
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
        size = os.fstat(fd).st_size
        os.ftruncate(fd, max(0, size - leave))
    finally:
        os.close(fd)
    return filler


def test_append_cut_short_by_a_full_disk_is_rolled_back(small_disk: Path) -> None:
    """On a real file system that fills up mid-line: the part that fitted is cut back off."""
    log = small_disk / "a.jsonl"
    before = _two_good_lines(log)
    filler = _fill(small_disk, leave=8192)  # room for part of the next line only
    with pytest.raises(OSError) as err:
        jsonl.append(log, {"w": 0, "n": 99, "pad": "y" * 30000})
    assert err.value.errno == errno.ENOSPC
    assert log.read_bytes() == before
    filler.unlink()
    _next_append_works(log, before)


def test_full_disk_error_is_clear_and_leaves_no_half_line(tmp_path: Path, monkeypatch, request) -> None:
    """A disk with no room at all: the append raises ENOSPC (errno 28) and writes nothing. On a
    real full tmpfs where one can be mounted, else with every write failing with ENOSPC."""
    try:
        folder = request.getfixturevalue("small_disk")
    except pytest.skip.Exception:
        folder = None
    log = (folder or tmp_path) / "a.jsonl"
    before = _two_good_lines(log)
    filler = _fill(folder, leave=0) if folder is not None else None
    with monkeypatch.context() as m, pytest.raises(OSError) as err:
        if folder is None:
            m.setattr(jsonl, "os", _ShortThenFull(fail_at_once=True))
        jsonl.append(log, {"w": 0, "n": 99, "pad": "z" * 9000})  # more than the log's last page holds
    assert err.value.errno == errno.ENOSPC == 28
    assert log.read_bytes() == before
    if filler is not None:
        filler.unlink()
    _next_append_works(log, before)


WRITER = textwrap.dedent(
    """
    import os, sys, random
    from pathlib import Path
    from c3async.ground import jsonl
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


@pytest.mark.process
def test_64_processes_append_at_once_nothing_lost_or_glued(tmp_path: Path) -> None:
    log = tmp_path / "marks.jsonl"
    acks = {w: tmp_path / f"ack{w}" for w in range(64)}
    procs = [_spawn(log, acks[w], w, 12) for w in range(64)]
    for p in procs:
        assert p.wait(timeout=120) == 0
    records, skipped = _check(log, acks)
    assert len(records) == 64 * 12
    assert skipped == 0


@pytest.mark.process
def test_writers_killed_mid_append_lose_only_unacknowledged_lines(tmp_path: Path) -> None:
    log = tmp_path / "marks.jsonl"
    acks = {w: tmp_path / f"ack{w}" for w in range(16)}
    procs = {w: _spawn(log, acks[w], w, 400) for w in range(16)}
    rnd = random.Random(7)
    deadline = time.monotonic() + 60
    while not all(a.exists() and a.stat().st_size for a in acks.values()):  # every writer is appending
        assert time.monotonic() < deadline, "the writers did not start"
        time.sleep(0.01)
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
