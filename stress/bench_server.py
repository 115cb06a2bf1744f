"""The MCP server benchmark: ``c3async serve`` over stdio on a project of 1,000 transcripts.

    python -m stress.bench_server [--transcripts N] [--runs R] [--calls C] [--starts S] [--keep DIR]

Run from the repository root. It generates one project's corpus (``stress.corpus``, no 20-60 MiB
files), then:

- S times, caches warm: spawns ``python -m c3async serve`` (this checkout, through
  ``PYTHONPATH``, its modules byte-compiled first as ``pip install`` does), writes one JSON-RPC ``initialize`` request on its stdin and times the spawn to
  the reply line (what an IDE waits on before it lists tools), with the server's CPU time by then;
- R times: starts a server the same way on deleted caches (so its warm scan reads the newest 200
  transcripts and its token accountant all 1,000), waits until it is idle (no tool call) and
  reads its RSS; then once more on the caches that server left (a start on warm caches);
- R times: deletes the caches, spawns the server with ``mcp.Client`` over stdio (the
  initialize handshake, as Claude Code speaks it), and measures

- start-up: spawn to the first successful ``list_tools``;
- the first ``c3_session(action='list')``: cold, caches deleted, racing the server's own warm scan;
- once the server is idle again (its CPU time stops moving): C warm ``list`` calls and C warm
  ``show`` calls, one after another, each a full round trip (request, work, reply).

It prints medians with the min-max (warm calls: median, p90 and max over every call of every
run). It asserts nothing about time (DESIGN's budgets: a warm ``list`` under 50 ms; start-up to
``initialize`` under 0.8 s and idle RSS under 80 MiB); it exits 1 only if a call fails, a server
does not answer ``initialize`` or ``list`` does not answer with the expected rows.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
import psutil
from mcp import Client, StdioServerParameters, stdio_client
from mcp.types import LATEST_PROTOCOL_VERSION

from stress.bench_catalog import median_range, report_failures
from stress.corpus import Corpus, KiB, MiB, generate
from stress.figures import Table, add_json_option
from stress.probe import initialize

REPO = Path(__file__).resolve().parents[1]
LIST_ROWS = 40  # what one `list` answer shows (session_actions.LIST_ROWS); the rest are counted
NEWEST = 200  # rows a project lists (catalog.scan.NEWEST)
BUDGET_WARM_LIST_MS = 50.0
BUDGET_STARTUP_MS = 800.0
BUDGET_IDLE_RSS_MIB = 80.0
INITIALIZE = initialize("bench_server", LATEST_PROTOCOL_VERSION).decode()
INITIALIZED = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def ms(values: list[float]) -> tuple[str, str]:
    return median_range(values, "ms", 1e-3, 1)


def spread(values: list[float]) -> tuple[str, str]:
    """median, with p90 and max, in ms."""
    return (
        f"{statistics.median(values) * 1e3:.1f} ms",
        f"[p90 {pct(values, 90) * 1e3:.1f}, max {pct(values, 100) * 1e3:.1f}, min {min(values) * 1e3:.1f}; "
        f"{len(values)} calls]",
    )


def server_env(corpus: Corpus, project: str, host: str, c3home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "C3_"))}
    env.update(
        CLAUDE_CONFIG_DIR=corpus.config_dir,
        C3_HOME=str(c3home),
        CLAUDE_PROJECT_DIR=project,
        CLAUDE_CODE_SESSION_ID=host,
        PYTHONPATH=str(REPO),
    )
    return env


def drop_caches(project: str, c3home: Path) -> None:
    shutil.rmtree(Path(project, ".c3", "cache"), ignore_errors=True)
    shutil.rmtree(c3home / "cache", ignore_errors=True)


def server_pid(project: str) -> int | None:
    """The server's pid, from its heartbeat file (the only one in the project)."""
    for path in Path(project, ".c3", "live").glob("*.json"):
        try:
            return int(json.loads(path.read_bytes())["pid"])
        except (OSError, ValueError, KeyError):
            continue
    return None


async def wait_idle(
    project: str, window: float = 0.3, quiet: int = 2, limit: float = 60.0, pid: int | None = None
) -> tuple[float, int]:
    """Until the server's CPU time stays put for ``quiet`` windows in a row (its warm scan and
    first usage accounting are over). Returns (seconds waited, RSS in bytes)."""
    started = time.perf_counter()
    proc = psutil.Process(pid) if pid else None
    while proc is None and time.perf_counter() - started < limit:
        pid = server_pid(project)
        proc = psutil.Process(pid) if pid else None
        if proc is None:
            await anyio.sleep(0.05)
    if proc is None:
        return time.perf_counter() - started, 0
    before = sum(proc.cpu_times()[:2])
    calm = 0
    while time.perf_counter() - started < limit:
        await anyio.sleep(window)
        now = sum(proc.cpu_times()[:2])
        calm = calm + 1 if now - before < 0.05 * window else 0  # under 5% of a core: quiet
        if calm >= quiet:
            break
        before = now
    return time.perf_counter() - started, proc.memory_info().rss


WINDOW = 512 * 1024  # the tail a `show` reads for the last turns (sessions.detail.PREVIEW_WINDOW)
WINDOWS = 200
READERS = 8  # the catalog's limiter (catalog.scan.READERS)


def _tail_pread(path: str) -> int:
    """One window as c3async reads it today: in one worker thread, open, fstat, one pread."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - WINDOW)
        return len(os.pread(fd, size - start, start))
    finally:
        os.close(fd)


async def _windows_thread(paths: list[str], limiter: anyio.CapacityLimiter) -> int:
    total = 0

    async def one(path: str) -> None:
        nonlocal total
        total += await anyio.to_thread.run_sync(_tail_pread, path, limiter=limiter)

    async with anyio.create_task_group() as tg:
        for path in paths:
            tg.start_soon(one, path)
    return total


async def _windows_aiofiles(paths: list[str], limiter: anyio.CapacityLimiter) -> int:
    import aiofiles  # measured only where it is installed: c3async does not depend on it

    total = 0

    async def one(path: str) -> None:
        nonlocal total
        async with limiter, aiofiles.open(path, "rb") as f:  # each await below is a hop to a thread
            size = await f.seek(0, os.SEEK_END)
            await f.seek(max(0, size - WINDOW))
            total += len(await f.read(WINDOW))

    async with anyio.create_task_group() as tg:
        for path in paths:
            tg.start_soon(one, path)
    return total


async def window_reads(corpus: Corpus, rounds: int) -> dict[str, list[float]]:
    """200 tail windows (512 KiB) of the corpus's largest transcripts, all at once under one
    CapacityLimiter(8), page cache warm: anyio.to_thread + os.pread against aiofiles (each
    variant's rounds interleaved with the other's). Seconds per round of 200 windows."""
    paths = sorted((e["path"] for e in corpus.expected.values()), key=os.path.getsize, reverse=True)[:WINDOWS]
    variants = {"anyio.to_thread + os.pread": _windows_thread}
    try:
        import aiofiles  # noqa: F401

        variants["aiofiles (open, seek, read)"] = _windows_aiofiles
    except ImportError:
        pass
    out: dict[str, list[float]] = {name: [] for name in variants}
    limiter = anyio.CapacityLimiter(READERS)
    for fn in variants.values():  # warm the page cache and the thread pools
        await fn(paths, limiter)
    for _ in range(rounds):
        for name, fn in variants.items():
            t0 = time.perf_counter()
            await fn(paths, limiter)
            out[name].append(time.perf_counter() - t0)
    return out


class Start:
    def __init__(self) -> None:
        self.initialize = 0.0  # spawn to the initialize reply, s
        self.cpu = 0.0  # the server's CPU time by then, s
        self.idle_wait = 0.0
        self.rss = 0  # once idle, with no tool call (0: not waited for)


@asynccontextmanager
async def spawned(argv: list[str], env: dict[str, str], cwd: str, errlog) -> AsyncIterator[anyio.abc.Process]:
    """A server process, spawned as an IDE spawns it; on the way out its stdin is closed (EOF: it
    shuts down as it does for an IDE), then it is killed if it has not gone within 10 s."""
    proc = await anyio.open_process(argv, cwd=cwd, env=env, stderr=errlog)
    try:
        yield proc
    finally:
        with anyio.move_on_after(10, shield=True):
            if proc.stdin is not None:
                await proc.stdin.aclose()
            await proc.wait()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def initialize(proc: anyio.abc.Process) -> bytes:
    """Send ``initialize`` and return the server's first reply line (at most 60 s)."""
    assert proc.stdin is not None and proc.stdout is not None
    await proc.stdin.send(INITIALIZE.encode())
    reply = b""
    with anyio.fail_after(60):
        while b"\n" not in reply:
            reply += await proc.stdout.receive()
    return reply.split(b"\n", 1)[0]


async def one_start(
    corpus: Corpus, project: str, host: str, c3home: Path, idle: bool, failures: list[str], errlog
) -> Start:
    """A server spawned as an IDE spawns it, timed from spawn to its ``initialize`` reply; with
    ``idle``, then left alone until its background work is over, and its RSS read."""
    res = Start()
    started = time.perf_counter()
    async with spawned(
        [sys.executable, "-m", "c3async", "serve"], server_env(corpus, project, host, c3home), project, errlog
    ) as proc:
        reply = await initialize(proc)
        res.initialize = time.perf_counter() - started
        cpu = psutil.Process(proc.pid).cpu_times()
        res.cpu = cpu.user + cpu.system
        if b'"result"' not in reply:
            failures.append(f"initialize: unexpected reply {reply[:300]!r}")
            return res
        assert proc.stdin is not None
        await proc.stdin.send(INITIALIZED.encode())
        if idle:
            res.idle_wait, res.rss = await wait_idle(project, pid=proc.pid)
    return res


class Run:
    def __init__(self) -> None:
        self.startup = 0.0
        self.cold = 0.0
        self.idle_wait = 0.0
        self.rss = 0
        self.warm_list: list[float] = []
        self.warm_show: list[float] = []


async def one_run(
    corpus: Corpus, project: str, host: str, c3home: Path, calls: int, failures: list[str], errlog
) -> Run:
    run = Run()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "c3async", "serve"],
        env=server_env(corpus, project, host, c3home),
        cwd=project,
    )
    want_more = min(NEWEST, corpus.files) - LIST_ROWS

    def check_list(text: str, what: str) -> None:
        lines = text.splitlines()
        if len(lines) != LIST_ROWS + 1 or not lines[-1].startswith(f"... {want_more} more"):
            failures.append(f"{what}: unexpected answer ({len(lines)} lines): {text[:300]!r}")

    started = time.perf_counter()
    async with Client(stdio_client(params, errlog=errlog), mode="legacy") as c:
        tools = await c.list_tools()
        run.startup = time.perf_counter() - started
        if "c3_session" not in {t.name for t in tools.tools}:
            failures.append("list_tools: no c3_session tool")
            return run

        t0 = time.perf_counter()
        r = await c.call_tool("c3_session", {"action": "list"})
        run.cold = time.perf_counter() - t0
        text = "\n".join(b.text for b in r.content)
        if r.is_error:
            failures.append(f"cold list: {text}")
            return run
        check_list(text, "cold list")

        run.idle_wait, run.rss = await wait_idle(project)

        for i in range(calls):
            t0 = time.perf_counter()
            r = await c.call_tool("c3_session", {"action": "list"})
            run.warm_list.append(time.perf_counter() - t0)
            if r.is_error:
                failures.append(f"warm list {i}: {r.content[0].text}")
                break
            if i == 0:
                check_list(r.content[0].text, "warm list")
        for i in range(calls):
            t0 = time.perf_counter()
            r = await c.call_tool("c3_session", {"action": "show", "target": host})
            run.warm_show.append(time.perf_counter() - t0)
            if r.is_error or not r.content[0].text.startswith(host):
                failures.append(f"warm show {i}: {r.content[0].text[:300]}")
                break
    return run


def newest_session(corpus: Corpus, project: str) -> str:
    """The newest transcript of the project: the session a server there would serve."""
    best = max(
        (e for e in corpus.expected.items() if e[1]["cwd"] == project),
        key=lambda item: os.stat(item[1]["path"]).st_mtime_ns,
    )
    return best[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stress.bench_server", description=__doc__.split("\n")[0])
    ap.add_argument("--transcripts", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3, help="servers started, each on deleted caches")
    ap.add_argument("--calls", type=int, default=50, help="warm calls of each kind per server")
    ap.add_argument("--starts", type=int, default=9, help="servers started to time `initialize` (caches warm)")
    ap.add_argument(
        "--windows",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="also time ROUNDS rounds of 200 tail-window reads: worker thread + pread vs aiofiles",
    )
    ap.add_argument("--keep", metavar="DIR", help="generate the corpus into DIR and keep it (reused when it matches)")
    add_json_option(ap)
    args = ap.parse_args(argv)

    reused = False
    if args.keep:
        root = Path(args.keep)
        corpus = Corpus.load(root)
        reused = bool(
            corpus and corpus.files == args.transcripts and len(corpus.project_dirs) == 1 and not corpus.big_sizes
        )
        if not reused:
            for sub in ("config", "work"):
                shutil.rmtree(root / sub, ignore_errors=True)
            root.mkdir(parents=True, exist_ok=True)
    else:
        root = Path(tempfile.mkdtemp(prefix="c3bench-server-"))
    if not reused:
        print(f"generating {args.transcripts} transcripts into {root} ...", file=sys.stderr)
        corpus = generate(root, transcripts=args.transcripts, projects=1, big_sizes=False)
    c3home = Path(tempfile.mkdtemp(prefix="c3bench-home-"))
    try:
        return anyio.run(
            bench,
            corpus,
            root,
            reused,
            c3home,
            max(1, args.runs),
            max(1, args.calls),
            max(1, args.starts),
            max(0, args.windows),
            args.json,
        )
    finally:
        shutil.rmtree(c3home, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


async def bench(
    corpus: Corpus,
    root: Path,
    reused: bool,
    c3home: Path,
    runs: int,
    calls: int,
    starts: int,
    window_rounds: int = 0,
    json_out: str | None = None,
) -> int:
    project = corpus.project_dirs[0]
    host = newest_session(corpus, project)
    failures: list[str] = []
    results: list[Run] = []
    timed: list[Start] = []
    cold_idle: list[Start] = []
    warm_idle: list[Start] = []
    # As an installed copy has them (pip compiles at install): with PYTHONDONTWRITEBYTECODE set,
    # a checkout's server would otherwise compile every changed module at each start.
    compiled = compileall.compile_dir(str(REPO / "c3async"), quiet=1)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryFile("w+") as errlog:
        print(f"{starts} server starts to time initialize, {runs} x 2 to wait idle ...", file=sys.stderr)
        # one start first, unmeasured, so that the caches exist and the page cache holds the code
        for i in range(starts + 1):
            try:
                start = await one_start(corpus, project, host, c3home, i == 0, failures, errlog)
                if i:
                    timed.append(start)
            except Exception as exc:
                failures.append(f"start {i}: {type(exc).__name__}: {exc}")
        for i in range(runs):
            try:
                drop_caches(project, c3home)
                cold_idle.append(await one_start(corpus, project, host, c3home, True, failures, errlog))
                warm_idle.append(await one_start(corpus, project, host, c3home, True, failures, errlog))
            except Exception as exc:
                failures.append(f"idle start {i}: {type(exc).__name__}: {exc}")
        for i in range(runs):
            print(f"server {i + 1}/{runs} ...", file=sys.stderr)
            drop_caches(project, c3home)
            try:
                results.append(await one_run(corpus, project, host, c3home, calls, failures, errlog))
            except Exception as exc:  # a server that would not start or answer
                failures.append(f"server {i + 1}: {type(exc).__name__}: {exc}")
        errlog.seek(0)
        stderr = errlog.read()
    windows = await window_reads(corpus, window_rounds) if window_rounds else {}

    t = Table("bench_server")
    sizes = sorted(e["size"] for e in corpus.expected.values())
    t.section("corpus")
    t.add(
        "transcripts / projects",
        f"{corpus.files} / {len(corpus.project_dirs)}",
        f"(a project lists its newest {NEWEST}; `list` shows {LIST_ROWS} and counts the rest)",
    )
    t.add(
        "total size",
        f"{corpus.total_bytes / MiB:.1f} MiB",
        f"[median {sizes[len(sizes) // 2] / KiB:.0f} KiB, largest {sizes[-1] / MiB:.1f} MiB]",
    )
    t.add("corpus generation", "reused" if reused else f"{corpus.seconds:.1f} s", f"({root})")
    t.add("server", "python -m c3async serve", f"(PYTHONPATH={REPO}; stdio, initialize handshake)")
    t.add(
        "bytecode",
        "compiled first" if compiled else "NOT all compiled",
        "(c3async's .pyc written before the servers start, as `pip install` does: start-up is not timed "
        "with compilation)",
    )

    if timed:
        t.section(
            f"start-up and idle memory ({len(timed)} starts on warm caches; {len(cold_idle)} + {len(warm_idle)} "
            "left idle, no tool call)"
        )
        t.add("spawn to the initialize reply, caches warm", *ms([s.initialize for s in timed]))
        t.add("  the server's CPU time by then", *ms([s.cpu for s in timed]))
    if cold_idle and warm_idle:
        t.add(
            "RSS idle after a cold start (warm scan of 200, tokens of 1,000)",
            *median_range([s.rss for s in cold_idle], "MiB", MiB, 1),
        )
        t.add("  until idle", *ms([s.idle_wait for s in cold_idle]))
        t.add("RSS idle after a start on warm caches", *median_range([s.rss for s in warm_idle], "MiB", MiB, 1))

    done = [r for r in results if r.warm_list]
    t.section(f"c3async serve over stdio ({len(results)} servers, caches deleted before each; page cache warm)")
    if results:
        t.add("start-up: spawn to first successful list_tools", *ms([r.startup for r in results]))
        t.add("first list, cold (racing the server's warm scan)", *ms([r.cold for r in results]))
        t.add("until the server is idle after that", *ms([r.idle_wait for r in results]))
    if done:
        warm_list = [x for r in done for x in r.warm_list]
        warm_show = [x for r in done for x in r.warm_show]
        t.add(f"list, warm ({calls} calls per server)", *spread(warm_list))
        t.add("  per-server medians", *ms([statistics.median(r.warm_list) for r in done]))
        if warm_show:
            t.add(f"show <id>, warm ({calls} calls per server)", *spread(warm_show))
        t.add("server RSS when idle", *median_range([r.rss for r in done], "MiB", MiB, 1))
        med = statistics.median(warm_list) * 1e3
        t.section("budget (DESIGN.md: `c3_session list` round trip over stdio, 1,000 sessions, warm)")
        t.add(
            "under 50 ms",
            f"{med:.1f} ms",
            "median warm list: "
            + ("within" if med < BUDGET_WARM_LIST_MS else "OVER")
            + " the budget (reported, not asserted)",
        )
    if windows:
        t.section(
            f"tail windows: {WINDOWS} x {WINDOW // KiB} KiB at once under CapacityLimiter({READERS}), "
            f"{window_rounds} rounds each, interleaved"
        )
        for name, values in windows.items():
            t.add(name, *ms(values))
        if len(windows) == 1:
            t.add("aiofiles", "not installed", "(c3async does not depend on it)")
    if timed and cold_idle:
        start_ms = statistics.median(s.initialize for s in timed) * 1e3
        rss_mib = max(statistics.median(s.rss for s in cold_idle), statistics.median(s.rss for s in warm_idle)) / MiB
        t.section("budget (DESIGN.md: `c3async serve` start to `initialize` / idle RSS, 1,000 transcripts)")
        t.add(
            "under 0.8 s",
            f"{start_ms:.0f} ms",
            "median start-up to initialize: "
            + ("within" if start_ms < BUDGET_STARTUP_MS else "OVER")
            + " the budget (reported, not asserted)",
        )
        t.add(
            "under 80 MiB",
            f"{rss_mib:.1f} MiB",
            "median idle RSS, the worse of cold and warm starts: "
            + ("within" if rss_mib < BUDGET_IDLE_RSS_MIB else "OVER")
            + " the budget (reported, not asserted)",
        )
    t.section("notes")
    t.add("figures", "median", "[min–max] unless marked; warm calls pooled over every server")
    t.add(
        "machine",
        f"{os.cpu_count()} cores",
        f"(1-minute load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after: other work skews the tail)",
    )
    t.done(json_out)
    return report_failures(failures, stderr)


if __name__ == "__main__":
    sys.exit(main())
