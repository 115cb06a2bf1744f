"""Everything from the first command: what ``c3async sessions --all`` costs on a fresh install of a
machine whose Claude Code already holds many projects (none registered, no cache: every project
is found from Claude Code's folders), against the cold listing of the same transcripts with every
project registered, and warm.

    python -m stress.bench_found [--transcripts N] [--projects P] [--runs R] [--keep DIR]

Budgets (DESIGN §7): the fresh install's first ``--all`` at most 1.1x the registered cold listing;
a warm ``--all`` under 0.5 s (50 projects, 4,000 transcripts, 2 cores). Prints medians [min-max]
of R whole-process runs and the ratio; with ``--json FILE`` also writes them. Asserts nothing
about time; exits 1 if a listing fails or lists the wrong number of rows.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path

from stress.bench_catalog import c3async_command, json_rows, median_range, report_failures, run_child
from stress.corpus import Corpus, generate
from stress.figures import Table, add_json_option


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stress.bench_found", description=__doc__.split("\n")[0])
    ap.add_argument("--transcripts", type=int, default=4000)
    ap.add_argument("--projects", type=int, default=50)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", metavar="DIR", help="generate the corpus into DIR and keep it (reused when it matches)")
    add_json_option(ap)
    args = ap.parse_args(argv)
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="c3found-"))
    corpus = Corpus.load(root) if args.keep else None
    if corpus is None or corpus.files != args.transcripts or len(corpus.project_dirs) != args.projects:
        print(f"generating {args.transcripts} transcripts in {args.projects} projects into {root} ...", file=sys.stderr)
        corpus = generate(root, transcripts=args.transcripts, projects=args.projects, big_sizes=False)
    try:
        return bench(corpus, root, args.runs, args.json)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def bench(corpus: Corpus, root: Path, runs: int, json_out: str | None) -> int:
    from c3async.catalog import NEWEST

    per_project = Counter(e["project"] for e in corpus.expected.values())
    want = sum(min(NEWEST, n) for n in per_project.values())
    cmd = [*c3async_command(), "sessions", "--all", "--json"]
    failures: list[str] = []

    def env(home: Path) -> dict[str, str]:
        out = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "C3_"))}
        out.update(CLAUDE_CONFIG_DIR=corpus.config_dir, C3_HOME=str(home))
        return out

    def fresh(tag: str) -> Path:
        home = root / f"home-{tag}"
        shutil.rmtree(home, ignore_errors=True)
        for p in corpus.project_dirs:
            shutil.rmtree(Path(p, ".c3"), ignore_errors=True)
        return home

    # The baseline: every project registered (as a user who listed each one), caches deleted.
    registered: list[float] = []
    for i in range(runs):
        home = fresh("registered")
        home.mkdir(parents=True)
        (home / "projects.json").write_text(
            json.dumps({"version": 1, "projects": [{"path": p, "added": 1.0} for p in corpus.project_dirs]})
        )
        run = run_child(cmd, env(home))
        json_rows(run, f"registered cold run {i + 1}", failures, want)
        registered.append(run.wall)
    # The fresh install: nothing registered, no cache of any kind.
    first: list[float] = []
    warm: list[float] = []
    for i in range(runs):
        home = fresh("fresh")
        run = run_child(cmd, env(home))
        json_rows(run, f"fresh install, first run {i + 1}", failures, want)
        first.append(run.wall)
        run = run_child(cmd, env(home))
        json_rows(run, f"fresh install, warm run {i + 1}", failures, want)
        warm.append(run.wall)
    written = [p for p in corpus.project_dirs if Path(p, ".c3").exists()]
    if written:
        failures.append(f"a found project's folder was written to: {written[:3]}")

    ratio = statistics.median(first) / statistics.median(registered)
    t = Table("bench_found")
    t.section(
        f"sessions --all over {len(corpus.project_dirs)} projects, {corpus.files} transcripts "
        f"({corpus.total_bytes / (1 << 20):.0f} MiB; {os.cpu_count()} cores; page cache warm)"
    )
    t.add("cold, every project registered (the baseline)", *median_range(registered))
    t.add("fresh install, first run (every project found)", *median_range(first))
    t.add("ratio, fresh first run / registered cold", f"{ratio:.2f}x", "(budget: at most 1.1x)")
    t.add(
        "fresh install, warm",
        *median_range(warm),
    )
    t.add("budget, warm", "0.5 s", "within" if statistics.median(warm) < 0.5 else "OVER")
    t.add("rows", str(want), "(the newest 200 per project)")
    t.done(json_out)
    return report_failures(failures)


if __name__ == "__main__":
    sys.exit(main())
