"""The idle benchmark: what a Hub and an MCP server cost when nothing happens.

    python -m stress.bench_idle [--transcripts 10000] [--projects 50] [--seconds 60] [--runs 3]
                                [--big-project N] [--keep DIR]

Run from the repository root. It generates a corpus (``stress.corpus``, no big transcripts),
registers its projects with ``c3async sessions --project P --json`` (which also fills their
catalog caches), then, ``--runs`` times each:

- starts the real ``c3async hub --port 0``, waits until it is idle (every row listed, the search
  index built, the token accountant's first pass written in every project, and its CPU rate
  steady), and measures its CPU time (user + system, psutil) over ``--seconds`` of wall time;
- starts the real ``c3async serve`` in the first project through ``mcp.Client`` over stdio, as
  Claude Code does (``initialize``, then ``resources/list``, so the server watches the resources it
  listed), waits until it is idle the same way, and measures it the same way.

With ``--big-project N`` it also generates one project of N transcripts and measures a server
there. The window defaults to 60 s: the accountants run once a minute, so every window holds one
of their passes. It prints "% of one core" (median, with the min-max) against DESIGN's budget
(under 2%); it asserts nothing about time, and exits 1 only when a process does not start or
answer.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import psutil

from stress.bench_catalog import report_failures
from stress.bench_hub import BenchError, Hub, httpx
from stress.corpus import Corpus, MiB, generate
from stress.figures import Table, add_json_option

REPO = Path(__file__).resolve().parents[1]
BUDGET_PCT = 2.0
STEADY_WINDOW_S = 3.0  # CPU sampled over windows this long until two in a row agree
SETTLE_LIMIT_S = 900.0


def cpu_seconds(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def steady(proc: psutil.Process, limit: float = SETTLE_LIMIT_S) -> float:
    """Wait until the process's CPU rate holds still: two windows in a row within a point of a
    core or a quarter of each other (a busy start-up falls, an idle loop stays). Returns the
    seconds waited."""
    started = time.monotonic()
    last = None
    while time.monotonic() - started < limit:
        before = cpu_seconds(proc)
        time.sleep(STEADY_WINDOW_S)
        rate = (cpu_seconds(proc) - before) / STEADY_WINDOW_S * 100
        if last is not None and abs(rate - last) <= max(1.0, 0.25 * max(rate, last)):
            break
        last = rate
    return time.monotonic() - started


def measure(proc: psutil.Process, seconds: float) -> float:
    """The process's CPU time over ``seconds`` of wall time, as % of one core."""
    cpu0, wall0 = cpu_seconds(proc), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(proc) - cpu0) / (time.monotonic() - wall0) * 100


def waking_floor(seconds: float) -> float:
    """The CPU of a process that does nothing but wake four times a second (the watcher's
    cadence), as % of one core: what any poller pays here before its first stat."""
    proc = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.25)"])
    try:
        time.sleep(1.0)
        return measure(psutil.Process(proc.pid), seconds)
    finally:
        proc.kill()
        proc.wait()


def base_env(corpus: Corpus, c3home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "C3_"))}
    env.update(CLAUDE_CONFIG_DIR=corpus.config_dir, C3_HOME=str(c3home), PYTHONPATH=str(REPO))
    return env


def accounted(project: str) -> bool:
    """The token accountant's first pass over ``project`` is written."""
    return Path(project, ".c3", "cache", "usage.json").exists()


def hub_warm(hub: Hub, corpus: Corpus, limit: float = SETTLE_LIMIT_S) -> None:
    """Until every row is listed, the search index is built and every project is accounted."""
    deadline = time.monotonic() + limit
    with httpx.Client(base_url=hub.url, timeout=60, headers={"Authorization": f"Bearer {hub.token}"}) as c:
        while True:
            rows = c.get("/api/rows", params={"limit": "1"})
            search = c.get("/api/search/status")
            if rows.status_code != 200 or search.status_code != 200:
                raise BenchError(f"the hub answered {rows.status_code} / {search.status_code}")
            if (
                rows.json()["total"] == corpus.files
                and not search.json()["updating"]
                and all(accounted(p) for p in corpus.project_dirs)
            ):
                return
            if time.monotonic() > deadline or hub.proc.poll() is not None:
                raise BenchError(
                    "the hub did not list every row, index and account within the limit:\n" + "".join(hub.lines[-20:])
                )
            time.sleep(1.0)


def one_hub(corpus: Corpus, env: dict[str, str], cwd: Path, seconds: float) -> tuple[float, float]:
    """A Hub started, left to warm up and measured: (% of one core, seconds until idle)."""
    started = time.monotonic()
    hub = Hub(env, cwd)
    try:
        hub_warm(hub, corpus)
        proc = psutil.Process(hub.proc.pid)
        steady(proc)
        waited = time.monotonic() - started
        return measure(proc, seconds), waited
    finally:
        hub.stop()


def server_pid(project: str, host: str) -> int | None:
    """The pid of the server serving ``host``, from its heartbeat file."""
    for path in Path(project, ".c3", "live").glob("*.json"):
        try:
            beat = json.loads(path.read_bytes())
        except (OSError, ValueError):
            continue
        if isinstance(beat, dict) and beat.get("host_session_id") == host and psutil.pid_exists(beat.get("pid", -1)):
            return int(beat["pid"])
    return None


def newest_session(corpus: Corpus, project: str) -> str:
    """The newest transcript of ``project``: the session a server there serves."""
    mine = [(os.stat(e["path"]).st_mtime_ns, sid) for sid, e in corpus.expected.items() if e["cwd"] == project]
    return max(mine)[1]


async def one_server(corpus: Corpus, project: str, c3home: Path, seconds: float, errlog) -> tuple[float, float]:
    """``c3async serve`` in ``project``, spoken to as Claude Code speaks (initialize, then
    resources/list), left to warm up and measured: (% of one core, seconds until idle)."""
    from mcp import Client, StdioServerParameters, stdio_client

    host = newest_session(corpus, project)
    env = base_env(corpus, c3home)
    env.update(CLAUDE_PROJECT_DIR=project, CLAUDE_CODE_SESSION_ID=host)
    params = StdioServerParameters(command=sys.executable, args=["-m", "c3async", "serve"], env=env, cwd=project)
    started = time.monotonic()
    async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
        listed = await client.list_resources()
        if not any(str(r.uri).startswith("c3://session/") for r in listed.resources):
            raise BenchError(f"resources/list listed no session: {listed.resources[:3]}")
        pid = None
        with anyio.fail_after(30):
            while pid is None:
                pid = server_pid(project, host)
                if pid is None:
                    await anyio.sleep(0.1)
        with anyio.fail_after(SETTLE_LIMIT_S):
            while not accounted(project):
                await anyio.sleep(0.5)
        proc = psutil.Process(pid)
        await anyio.to_thread.run_sync(steady, proc)
        waited = time.monotonic() - started
        return await anyio.to_thread.run_sync(measure, proc, seconds), waited


def corpus_in(root: Path, transcripts: int, projects: int) -> tuple[Corpus, bool]:
    """The corpus kept in ``root`` when it matches, else a new one there. (corpus, reused)"""
    corpus = Corpus.load(root)
    if corpus and corpus.files == transcripts and len(corpus.project_dirs) == projects and not corpus.big_sizes:
        return corpus, True
    for sub in ("config", "work"):
        shutil.rmtree(root / sub, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    print(f"generating {transcripts} transcripts in {projects} projects into {root} ...", file=sys.stderr)
    return generate(root, transcripts=transcripts, projects=projects, big_sizes=False), False


def register(corpus: Corpus, env: dict[str, str], cwd: Path) -> None:
    for p in corpus.project_dirs:
        proc = subprocess.run(
            [sys.executable, "-m", "c3async", "sessions", "--project", p, "--json"],
            env=env,
            cwd=str(cwd),
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise BenchError(f"registering {p} failed: {proc.stderr}")


def pct_range(values: list[float]) -> tuple[str, str]:
    if not values:
        return "-", "(no run)"
    over = "within" if statistics.median(values) < BUDGET_PCT else "OVER"
    return (
        f"{statistics.median(values):.2f} %",
        f"[{min(values):.2f}–{max(values):.2f}; {len(values)} runs] {over} the budget (reported, not asserted)",
    )


def servers(
    corpus: Corpus, project: str, c3home: Path, runs: int, seconds: float, failures: list[str], errlog
) -> tuple[list[float], list[float]]:
    rates, waits = [], []
    for i in range(runs):
        print(f"server {i + 1}/{runs} in {project} ...", file=sys.stderr)
        try:
            rate, waited = anyio.run(one_server, corpus, project, c3home, seconds, errlog)
            rates.append(rate)
            waits.append(waited)
        except Exception as exc:
            failures.append(f"server {i + 1}: {type(exc).__name__}: {exc}")
    return rates, waits


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stress.bench_idle", description=__doc__.split("\n")[0])
    ap.add_argument("--transcripts", type=int, default=10000)
    ap.add_argument("--projects", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60.0, help="the measured window, once idle")
    ap.add_argument("--runs", type=int, default=3, help="processes started and measured, of each kind")
    ap.add_argument(
        "--big-project", type=int, default=0, metavar="N", help="also measure a server in one project of N transcripts"
    )
    ap.add_argument("--no-hub", action="store_true", help="measure the servers only")
    ap.add_argument(
        "--keep", metavar="DIR", help="generate the corpora into DIR and keep them (reused when they match)"
    )
    add_json_option(ap)
    args = ap.parse_args(argv)

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="c3bench-idle-"))
    failures: list[str] = []
    t = Table("bench_idle")
    try:
        corpus, reused = corpus_in(root / "many", args.transcripts, args.projects)
        big = corpus_in(root / "big", args.big_project, 1)[0] if args.big_project else None
        c3home = Path(tempfile.mkdtemp(prefix="c3bench-idle-home-"))
        env = base_env(corpus, c3home)
        load_before = os.getloadavg()[0]
        with tempfile.TemporaryFile("w+") as errlog:
            try:
                register(corpus, env, root)
            except BenchError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
            hub_rates, hub_waits = [], []
            for i in range(0 if args.no_hub else args.runs):
                print(f"hub {i + 1}/{args.runs} ...", file=sys.stderr)
                try:
                    rate, waited = one_hub(corpus, env, root, args.seconds)
                    hub_rates.append(rate)
                    hub_waits.append(waited)
                except BenchError as exc:
                    failures.append(f"hub {i + 1}: {exc}")
            srv_rates, srv_waits = servers(
                corpus, corpus.project_dirs[0], c3home, args.runs, args.seconds, failures, errlog
            )
            big_rates: list[float] = []
            if big is not None:
                big_rates, _ = servers(big, big.project_dirs[0], c3home, args.runs, args.seconds, failures, errlog)
            floor = waking_floor(args.seconds)
            errlog.seek(0)
            stderr = errlog.read()

        t.section("corpus")
        t.add(
            "transcripts / projects",
            f"{corpus.files} / {len(corpus.project_dirs)}",
            f"({corpus.total_bytes / MiB:.0f} MiB; {'reused' if reused else f'generated in {corpus.seconds:.0f} s'})",
        )
        if big is not None:
            t.add("the big project", f"{big.files} / 1", f"({big.total_bytes / MiB:.0f} MiB)")
        t.section(
            f"idle CPU, % of one core over {args.seconds:.0f} s of wall time, once warm (budget under "
            f"{BUDGET_PCT:.0f} %)"
        )
        if not args.no_hub:
            t.add(f"c3async hub, {corpus.files} sessions in {len(corpus.project_dirs)} projects", *pct_range(hub_rates))
            if hub_waits:
                t.add("  start to idle", f"{statistics.median(hub_waits):.0f} s")
        per = corpus.files // max(1, len(corpus.project_dirs))
        t.add(f"c3async serve, a project of {per} sessions (resources listed)", *pct_range(srv_rates))
        if srv_waits:
            t.add("  start to idle", f"{statistics.median(srv_waits):.0f} s")
        if big is not None:
            t.add(f"c3async serve, a project of {big.files} sessions (resources listed)", *pct_range(big_rates))
        t.section("notes")
        t.add(
            "this machine's floor: a Python process that only wakes four times a second",
            f"{floor:.2f} %",
            "(what the watcher's polls cost before any work: a wake-up costs most on a shared or virtual machine)",
        )
        t.add(
            "machine",
            f"{os.cpu_count()} cores",
            f"(1-minute load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after)",
        )
        t.done(args.json)
        return report_failures(failures, stderr)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        if "c3home" in locals():
            shutil.rmtree(c3home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
