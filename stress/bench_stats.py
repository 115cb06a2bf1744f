"""Token accounting benchmark: the first accounting and an incremental update on a generated
1,000-transcript corpus, and (when a ccusage binary is given) a comparison with ccusage's
per-session token totals and costs. Prints figures; asserts nothing about time.

    python -m stress.bench_stats [--transcripts 1000] [--runs 3] [--ccusage PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from stress.corpus import generate


def _med(xs: list[float]) -> str:
    return f"{statistics.median(xs):8.3f} s  [{min(xs):.3f}-{max(xs):.3f}]"


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m stress.bench_stats", description=__doc__.split("\n")[0])
    ap.add_argument("--transcripts", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ccusage", help="a ccusage executable (npm i ccusage) to compare against")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="c3stats-"))
    try:
        corpus = generate(root, transcripts=args.transcripts, projects=5, big_sizes=True)
        os.environ.update(CLAUDE_CONFIG_DIR=corpus.config_dir, C3_HOME=str(root / "c3home"))
        from c3async.usage.account import account

        def reset() -> None:
            for p in corpus.project_dirs:
                shutil.rmtree(Path(p, ".c3"), ignore_errors=True)

        first, incr, read_first, read_incr = [], [], 0, 0
        totals: dict[str, dict] = {}
        for _ in range(args.runs):
            reset()
            t0 = time.perf_counter()
            results = [account(p) for p in corpus.project_dirs]
            first.append(time.perf_counter() - t0)
            read_first = sum(r.bytes_read for r in results)
            totals = {sid: t for r in results for sid, t in r.totals.items()}
            # grow one transcript per project by a few responses, then account again
            grown = 0
            for p, r in zip(corpus.project_dirs, results):
                sid = next(iter(r.totals))
                path = next(Path(corpus.config_dir, "projects").glob(f"*/{sid}.jsonl"))
                line = json.dumps({"type": "assistant", "sessionId": sid, "requestId": f"req_{time.time_ns()}",
                                   "timestamp": "2026-11-29T10:00:00.000Z", "message": {
                                       "id": f"msg_{time.time_ns()}", "model": "claude-opus-4-5-20251101",
                                       "usage": {"input_tokens": 3, "output_tokens": 5}}}) + "\n"
                with open(path, "a") as f:
                    f.write(line)
                grown += len(line)
            t0 = time.perf_counter()
            results = [account(p) for p in corpus.project_dirs]
            incr.append(time.perf_counter() - t0)
            read_incr = sum(r.bytes_read for r in results)
        print(f"c3async token accounting ({corpus.files} transcripts, {corpus.total_bytes / 2**20:.0f} MiB, "
              f"{len(corpus.project_dirs)} projects; page cache warm)")
        print(f"first accounting, every project           {_med(first)}   read {read_first / 2**20:.0f} MiB")
        print(f"incremental, one response appended/project {_med(incr)}   read {read_incr} B (appended {grown} B)")
        print(f"sessions accounted                          {len(totals)}")
        if args.ccusage:
            env = dict(os.environ, HOME=str(root))
            t0 = time.perf_counter()
            out = subprocess.run([args.ccusage, "claude", "session", "--json", "--offline"], env=env,
                                 capture_output=True, text=True, check=True).stdout
            cc_time = time.perf_counter() - t0
            # ccusage reads the grown files too: account once more so both saw the same bytes
            totals = {sid: t for p in corpus.project_dirs for sid, t in account(p).totals.items()}
            cc = {s["sessionId"]: s for s in json.loads(out)["sessions"]}
            tok_bad = [s for s, c in cc.items() if s not in totals or (
                totals[s].input, totals[s].output, totals[s].cache_write_5m + totals[s].cache_write_1h,
                totals[s].cache_read) != (c["inputTokens"], c["outputTokens"], c["cacheCreationTokens"],
                                          c["cacheReadTokens"])]
            diffs = [abs(totals[s].cost_usd - c["totalCost"]) for s, c in cc.items() if s in totals]
            print(f"ccusage session --json (whole process)     {cc_time:8.3f} s")
            print(f"sessions: ccusage / ours                    {len(cc)} / {len(totals)}")
            print(f"token totals differing from ccusage         {len(tok_bad)}" + (f"  (e.g. {tok_bad[0]})" if tok_bad else ""))
            print(f"cost difference, max per session            ${max(diffs or [0]):.6f}  "
                  f"({sum(d > 0.01 for d in diffs)} sessions over a cent)")
            return 1 if tok_bad else 0
        print("ccusage comparison skipped (give --ccusage PATH)")
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
