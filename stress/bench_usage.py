"""Usage over time benchmark: ``c3async usage --by day --all`` over a generated corpus of
10,000 sessions in 50 projects, as a whole process, warm (the accountant's state and
timelines written, nothing new: what a person typing it twice pays) and once cold (nothing
accounted yet), with the same in process, and the size of what the warm report reads.

    python -m stress.bench_usage [--transcripts 10000] [--projects 50] [--runs 7] [--json FILE]

The budget (DESIGN.md §7): warm, under 0.5 s. Prints the figures (medians of ``--runs``,
[min-max]) and the machine's load; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from c3async.ground.project import resolve
from stress.corpus import add_corpus_options, corpus_of
from stress.figures import Table, add_json_option

REPO = Path(__file__).resolve().parents[1]


def _med(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f} s"


def _range(xs: list[float]) -> str:
    return f"[{min(xs):.3f}-{max(xs):.3f}], {len(xs)} runs"


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m stress.bench_usage", description=__doc__.split("\n")[0])
    add_corpus_options(ap)
    add_json_option(ap)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="c3usage-"))
    try:
        corpus = corpus_of(args, root)
        os.environ.update(CLAUDE_CONFIG_DIR=corpus.config_dir, C3_HOME=str(root / "c3home"), HOME=str(root))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH")))))
        from c3async.stores import registry

        for p in corpus.project_dirs:  # what --all reads: the registered projects, nothing accounted
            shutil.rmtree(Path(p, ".c3"), ignore_errors=True)
            registry.register(resolve(p))
        command = [sys.executable, "-m", "c3async", "usage", "--by", "day", "--all"]

        def whole() -> float:
            t0 = time.perf_counter()
            subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=True)
            return time.perf_counter() - t0

        cold = whole()
        warm = [whole() for _ in range(args.runs)]
        from c3async.cli import main as cli

        inproc = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            cli(command[3:], out=io.StringIO(), err=sys.stderr, env=env)
            inproc.append(time.perf_counter() - t0)
        from c3async.usage import timeline

        lines = [timeline.load(resolve(p)) for p in corpus.project_dirs]
        slots = sum(len(t.slots) for t in lines if t is not None)
        kib = sum(timeline.path(resolve(p)).stat().st_size for p in corpus.project_dirs) / 1024
        state = sum(Path(p, ".c3", "cache", "usage.json").stat().st_size for p in corpus.project_dirs) / 2**20
        t = Table("bench_usage")
        t.section(
            f"c3async usage --by day --all: {corpus.files:,} sessions in {len(corpus.project_dirs)} projects, "
            f"{len(os.sched_getaffinity(0))} cores, load average {os.getloadavg()[0]:.1f}"
        )
        t.add("warm, whole process (median)", _med(warm), f"{_range(warm)}; budget: under 0.5 s")
        t.add("warm, in process (median)", _med(inproc), _range(inproc))
        t.add("cold, whole process (every transcript accounted)", f"{cold:.1f} s", "one run")
        t.add("what a warm report reads: timeline rows", f"{slots:,}", f"{kib:,.0f} KiB in {len(lines)} files")
        t.add("the accountant's state it does not read", f"{state:,.0f} MiB", "JSON, every response")
        t.done(args.json)
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
