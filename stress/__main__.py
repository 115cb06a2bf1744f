"""The stress and fault suite: many real processes on one project, nothing lost.

    python -m stress [--quick] [--only NAME[,NAME...]] [--seed N] [--keep]

Run from the repository root. ``--quick`` (under 2 minutes on 2 cores) is what CI runs; the
default full mode takes minutes. Scenarios (each with real OS processes):

  marks      marks storm: N `c3async serve` over stdio + CLI + Hub API + raw writers
  kill       kill storm: mark writers SIGKILLed mid-append, then a survivor appends
  heartbeat  heartbeat churn: servers started and stopped (cleanly and SIGKILL) under a reader
  pm         pm contention: many processes changing pm.json at once
  catalog    catalog under writes: listings while transcripts grow and marks are appended
  hostile    hostile input: trapped repositories, transcripts and documents through every door
             (CLI, hook, MCP server, Hub) with a decoy HOME checksummed before and after

Prints a table of figures; exits 1 if any invariant breaks (each break is named), 2 on usage.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback

from . import (
    catalog_under_writes,
    churn_heartbeat,
    contention_pm,
    hostile,
    storm_kill,
    storm_marks,
)
from .harness import Result, Sandbox, check_checkout, print_table

SCENARIOS = {
    "marks": storm_marks.run,
    "kill": storm_kill.run,
    "heartbeat": churn_heartbeat.run,
    "pm": contention_pm.run,
    "catalog": catalog_under_writes.run,
    "hostile": hostile.run,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stress", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the CI size: whole run under 2 minutes")
    ap.add_argument("--only", metavar="NAMES", help=f"comma-separated subset of {', '.join(SCENARIOS)}")
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: from the clock; printed)")
    ap.add_argument("--keep", action="store_true", help="keep the sandbox (its path is printed)")
    args = ap.parse_args(argv)
    names = list(SCENARIOS)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in SCENARIOS]
        if unknown:
            ap.error(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")
    seed = args.seed if args.seed is not None else int(time.time()) % 100000
    mode = "quick" if args.quick else "full"
    print(f"c3async stress, {mode} mode, seed {seed}: {', '.join(names)}", file=sys.stderr, flush=True)

    started = time.perf_counter()
    sb = Sandbox(keep=args.keep)
    results: list[Result] = []
    try:
        sb.activate()
        wrong = check_checkout(sb)
        if wrong is not None:
            r = Result("setup")
            r.check(False, "spawned processes run this checkout", f"they import {wrong}")
            results.append(r)
        else:
            for i, name in enumerate(names):
                t0 = time.perf_counter()
                print(f"[{name}] running ...", file=sys.stderr, flush=True)
                try:
                    got = SCENARIOS[name](sb, args.quick, seed + i)
                except Exception:
                    got = Result(name)
                    got.check(False, f"scenario {name} completes", traceback.format_exc(limit=8))
                parts = got if isinstance(got, list) else [got]  # a scenario may report in parts
                wall = time.perf_counter() - t0
                if len(parts) == 1:
                    parts[0].wall = wall
                broken = any(r.breaks for r in parts)
                print(f"[{name}] {wall:.1f} s, {'OK' if not broken else 'BROKEN'}", file=sys.stderr, flush=True)
                results.extend(parts)
    finally:
        sb.close()
    print_table(results, f"{mode}, seed {seed}", time.perf_counter() - started)
    if args.keep:
        print(f"sandbox kept: {sb.root}  (logs in {sb.logs})")
    return 1 if any(r.breaks for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
