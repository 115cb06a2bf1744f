"""The stress and fault suite: many real processes on one project, nothing lost.

    python -m stress [--quick] [--only NAME[,NAME...]] [--seed N] [--keep]

Run from the repository root. ``--quick`` is what the tests run (``python -m pytest -m
fault``: one test a scenario, the same code); the default full mode takes minutes. The
scenarios are in ``stress/suite.py``; ``--only hostile:`` runs every class of hostile input.

Prints a table of figures; exits 1 if any invariant breaks (each break is named), 2 on usage.
"""

from __future__ import annotations

import argparse
import sys
import time

from . import suite
from .figures import Table, add_json_option
from .harness import print_table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stress", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the size the tests run")
    ap.add_argument("--only", metavar="NAMES", help=f"comma-separated subset of {', '.join(suite.SCENARIOS)}")
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: from the clock; printed)")
    ap.add_argument("--keep", action="store_true", help="keep each scenario's sandbox (its path is printed)")
    add_json_option(ap)
    args = ap.parse_args(argv)
    names = list(suite.SCENARIOS)
    if args.only:
        names, unknown = suite.select([n.strip() for n in args.only.split(",") if n.strip()])
        if unknown:
            ap.error(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(suite.SCENARIOS)}")
    seed = args.seed if args.seed is not None else int(time.time()) % 100000
    mode = "quick" if args.quick else "full"
    print(f"c3async stress, {mode} mode, seed {seed}: {', '.join(names)}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    results = []
    for name in names:
        print(f"[{name}] running ...", file=sys.stderr, flush=True)
        res = suite.run(name, args.quick, seed, keep=args.keep)
        print(f"[{name}] {res.wall:.1f} s, {'BROKEN' if res.breaks else 'OK'}", file=sys.stderr, flush=True)
        results.append(res)
    print_table(results, f"{mode}, seed {seed}", time.perf_counter() - started)
    if args.json:
        figures = Table("")  # the command is python -m stress itself
        for res in results:
            figures.section(res.name)
            for label, value in res.rows:
                figures.add(label, value)
        figures.save(args.json)
    return 1 if any(r.breaks for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
