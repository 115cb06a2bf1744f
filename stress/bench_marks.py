"""Marks benchmark: fold time for 100,000 marks (full and incremental) and append latency with
1, 16 and 64 concurrent writer processes. Prints figures; asserts nothing about time, but exits
non-zero if a mark is lost, doubled or glued.

    python -m stress.bench_marks [--marks 100000] [--appends 200] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from c3async.ground import jsonl
from c3async.ground.project import resolve
from c3async.stores.marks import Mark, MarkBook, marks_path
from stress.figures import Table, add_json_option

WRITER = textwrap.dedent(
    """
    import os, sys, time, json
    from pathlib import Path
    from c3async.ground import jsonl
    from c3async.stores.marks import Mark
    path, w, n, go = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    while time.time() < go:   # all writers start together
        time.sleep(0.001)
    lat = []
    for i in range(n):
        m = Mark(ts=time.time(), id=f"{w:08x}-0000-4000-8000-{i:012x}", op="note",
                 summary="x" * (100 if i % 10 else 20000), by="agent", by_session=f"{w}-{i}")
        t0 = time.perf_counter()
        jsonl.append(path, m)
        lat.append(time.perf_counter() - t0)
    sys.stdout.write(json.dumps(lat))
    """
)


def _fmt(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e3:.1f} ms [{min(values) * 1e3:.1f}-{max(values) * 1e3:.1f}]"


def _pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


def bench_fold(t: Table, project: str, n: int, runs: int) -> None:
    path = marks_path(resolve(project))
    path.parent.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(1)
    ids = [f"{i:08x}-0000-4000-8000-000000000000" for i in range(2000)]
    ops = ["stale", "unstale", "note"]
    with open(path, "wb") as f:
        for i in range(n):
            op = rnd.choice(ops)
            f.write(
                jsonl.encode_line(
                    Mark(
                        ts=1.7e9 + i,
                        id=rnd.choice(ids),
                        op=op,
                        by="agent",  # type: ignore[arg-type]
                        reason="superseded by the next branch" if op == "stale" else None,
                        summary="Hub tab done" if op == "note" else None,
                        next_steps="Desk segment next" if op == "note" else None,
                        by_session=ids[0],
                    )
                )
            )
    size = path.stat().st_size
    full = []
    for _ in range(runs):
        t0 = time.perf_counter()
        book = MarkBook(resolve(project)).refresh()
        full.append(time.perf_counter() - t0)
    assert book.skipped == 0 and len(book.ids()) == len(set(ids))
    incr = []
    for r in range(runs):
        for i in range(100):
            jsonl.append(path, Mark(ts=1.7e9 + n + r * 100 + i, id=ids[i], op="unstale", by="user"))
        t0 = time.perf_counter()
        book.refresh()
        incr.append(time.perf_counter() - t0)
    t.add(f"fold {n:,} marks ({size / 1e6:.1f} MB), full", _fmt(full))
    t.add("fold incremental, 100 new marks on top", _fmt(incr))


def bench_appends(t: Table, tmp: Path, writers: int, per_writer: int) -> bool:
    path = tmp / f"appends-{writers}.jsonl"
    go = time.time() + 1.0 + writers * 0.03
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(w), str(per_writer), str(go)], stdout=subprocess.PIPE, env=env
        )
        for w in range(writers)
    ]
    lat: list[float] = []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        if p.returncode != 0:
            print(f"writer failed with status {p.returncode}")
            return False
        lat += json.loads(out)
    batch = jsonl.read_all(path, Mark)
    tags = [m.by_session for m in batch.records]
    ok = len(tags) == writers * per_writer == len(set(tags)) and batch.skipped == 0
    t.add(
        f"append, {writers} writer processes x {per_writer} marks",
        f"p50 {_pct(lat, 50) * 1e3:.2f} ms, p99 {_pct(lat, 99) * 1e3:.2f} ms, max {max(lat) * 1e3:.2f} ms",
        f"lost {writers * per_writer - len(set(tags))}, torn/skipped {batch.skipped}{'' if ok else '  <-- BROKEN'}",
    )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--marks", type=int, default=100_000)
    parser.add_argument("--appends", type=int, default=200, help="marks per writer process")
    parser.add_argument("--runs", type=int, default=5)
    add_json_option(parser)
    args = parser.parse_args()
    ok = True
    t = Table("bench_marks")
    t.section(f"marks ({os.cpu_count()} cores; 1 line in 10 is 20 KB)")
    with tempfile.TemporaryDirectory() as tmp:
        bench_fold(t, tmp, args.marks, args.runs)
        for writers in (1, 16, 64):
            ok &= bench_appends(t, Path(tmp), writers, args.appends)
    t.done(args.json)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
