"""What a long chain and long titles cost a listing: output bytes, per row.

    python -m stress.bench_chain [--links 2000] [--titled 40] [--title-kb 300] [--checkout DIR]

Run from the repository root. It writes one project of ``--links`` sessions chained by
``/clear`` (each began with ``/clear`` a moment after the one before it ended, and the hooks
recorded each pair in its activity log) and one of
``--titled`` sessions whose custom or ai titles are ``--title-kb`` KB long, then prints:

- ``c3async sessions --json`` of the chained project: its size for the newest 200 rows and for
  every row (``--limit``), bytes per row and the largest row, and its wall time;
- the same of the titled project, and the Hub's ``/api/rows`` page of it and of the chain's
  first 100 rows;
- ``show --json`` of the chain's newest session (the whole chain is a detail's).

``--checkout DIR`` measures another checkout's code (``PYTHONPATH=DIR``: the figures before a
change, say). It asserts nothing; it exits 1 only when a command fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

from stress.figures import Table, add_json_option
from stress.harness import REPO
from stress.transcripts import claude_slug, clear_hooks, cleared_chain, titled_sessions

KiB, MiB = 1024, 1024 * 1024


def _size(n: int) -> str:
    return f"{n / MiB:.2f} MiB" if n >= MiB else f"{n / KiB:.1f} KiB"


def _run(env: dict[str, str], *args: str) -> tuple[bytes, float]:
    t0 = time.perf_counter()
    # run from the sandbox: ``python -m`` puts the working folder first on the path
    proc = subprocess.run(
        [sys.executable, "-m", "c3async", *args], env=env, capture_output=True, timeout=600, cwd=env["C3_HOME"]
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"c3async {' '.join(args)} failed: {proc.stderr.decode(errors='replace')[-500:]}")
    return proc.stdout, wall


def _hub_page(env: dict[str, str], queries: list[str]) -> list[int]:
    """The size of each ``/api/rows?QUERY`` answer of a real ``c3async hub``."""
    import re

    hub = subprocess.Popen(
        [sys.executable, "-m", "c3async", "hub", "--port", "0"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        cwd=env["C3_HOME"],  # not this checkout: ``python -m`` puts the working folder first on the path
    )
    try:
        line = hub.stderr.readline() if hub.stderr is not None else ""
        m = re.search(r"127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]+)", line)
        if m is None:
            raise SystemExit(f"the Hub did not start: {line!r}")
        out = []
        for q in queries:
            req = urllib.request.Request(
                f"http://127.0.0.1:{m.group(1)}/api/rows?{q}", headers={"Authorization": f"Bearer {m.group(2)}"}
            )
            with urllib.request.urlopen(req, timeout=120) as r:
                out.append(len(r.read()))
        return out
    finally:
        hub.terminate()
        hub.wait(10)
        if hub.stderr is not None:
            hub.stderr.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stress.bench_chain", description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--links", type=int, default=2000)
    ap.add_argument("--titled", type=int, default=40)
    ap.add_argument("--title-kb", type=int, default=300)
    ap.add_argument("--checkout", metavar="DIR", default=str(REPO), help="the code to measure (default: this one)")
    add_json_option(ap)
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="c3bench-chain-")).resolve()
    try:
        config, home = root / "claude", root / "c3home"
        chained, titled = root / "work" / "chained", root / "work" / "titled"
        for d in (chained, titled, home):
            d.mkdir(parents=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "C3_"))}
        env.update(CLAUDE_CONFIG_DIR=str(config), C3_HOME=str(home), PYTHONPATH=args.checkout)
        start = datetime.now(UTC) - timedelta(days=30)
        chain = cleared_chain(config / "projects" / claude_slug(str(chained)), str(chained), args.links, start=start)
        clear_hooks(str(chained), chain)  # a fact that reaches past the newest 200
        titled_sessions(
            config / "projects" / claude_slug(str(titled)), str(titled), args.titled, args.title_kb * 1000, start=start
        )
        rows = []
        for p in (chained, titled):
            _run(
                env, "sessions", "--project", str(p), "--json", "--limit", str(max(args.links, args.titled))
            )  # registers, fills the cache
        newest, wall_200 = _run(env, "sessions", "--project", str(chained), "--json")
        every, wall_all = _run(env, "sessions", "--project", str(chained), "--json", "--limit", str(args.links))
        listed, listed_all = json.loads(newest), json.loads(every)
        biggest = max(len(json.dumps(r, ensure_ascii=False).encode()) for r in listed_all)
        rows.append(
            (
                f"sessions --json, {len(listed)} rows of a {args.links:,}-link chain",
                f"{_size(len(newest))} ({len(newest) / max(1, len(listed)):,.0f} B a row), {wall_200:.2f} s",
            )
        )
        rows.append(
            (
                f"sessions --json, all {len(listed_all):,} rows",
                f"{_size(len(every))} ({len(every) / max(1, len(listed_all)):,.0f} B a row, "
                f"largest {_size(biggest)}), {wall_all:.2f} s",
            )
        )
        shown, _ = _run(env, "show", chain[-1], "--project", str(chained), "--json")
        rows.append(("show --json of the newest link", _size(len(shown))))
        titles, wall_t = _run(env, "sessions", "--project", str(titled), "--json")
        rows.append(
            (
                f"sessions --json, {args.titled} rows with {args.title_kb} KB titles",
                f"{_size(len(titles))}, {wall_t:.2f} s",
            )
        )
        pages = _hub_page(env, [f"project={titled}&limit={args.titled}", f"project={chained}&limit=100"])
        rows.append((f"Hub /api/rows, the {args.titled} titled rows", _size(pages[0])))
        rows.append(("Hub /api/rows, 100 rows of the chain", _size(pages[1])))
        used = subprocess.run(
            [sys.executable, "-c", "import c3async; print(c3async.__path__[0])"],
            env=env,
            capture_output=True,
            text=True,
            cwd=home,
        ).stdout.strip()
        t = Table("bench_chain")
        t.section(f"a long chain and long titles (the code of {used})")
        for label, value in rows:
            t.add(label, value)
        t.done(args.json)
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
