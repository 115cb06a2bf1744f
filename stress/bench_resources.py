"""Sessions as MCP resources, and the plugin's start: ``c3async serve`` over stdio on a project
of 200 sessions, plus one transcript of 100 MiB.

    python -m stress.bench_resources [--transcripts N] [--calls C] [--starts S] [--big-mib M]

Run from the repository root. It generates one project's corpus (``stress.corpus``, no big
files) and adds one transcript of ``--big-mib`` MiB (edits near its start and its end, tool
output between), then, with one server spawned as Claude Code spawns it (``mcp.Client`` over
stdio, the initialize handshake) and left to go idle:

- C warm ``resources/list`` round trips (the newest 50 as concrete resources, and the tasks);
- C warm reads of ``c3://session/<id>``, over every listed session in turn (the brief: note,
  chain, files changed, last turns), with the largest brief's size;
- 5 reads of the big transcript's brief, with the bytes the server read for each (its
  ``/proc/<pid>/io`` ``rchar``), against the file's size;

and S alternating starts, spawn to the ``initialize`` reply, of ``python -m c3async serve`` and
of the plugin's ``python3 -I plugin/launch.py serve`` with its environment already built
(built first, into a temporary ``CLAUDE_PLUGIN_DATA``, and timed), byte code written for both;
then S first starts of the plugin (a fresh ``CLAUDE_PLUGIN_DATA`` each: the launcher answers from
its manifest while the environment builds; the build is cut short by a ``uv`` that fails, so
no download runs), on a quiet machine and with every core busy (one ``while True: pass`` each):
DESIGN's budget is within Claude Code's 30 s wait.

It prints medians with min-max (warm calls: median, p90, max). It asserts nothing about time
(DESIGN's budgets: ``resources/list`` warm < 20 ms, a brief < 50 ms and at most 8 KiB, the
plugin's later starts within 10% of ``c3async serve``, a 100 MiB brief reading only windows); it
exits 1 only if a call fails or answers what it should not.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters, stdio_client

from stress.bench_catalog import median_range
from stress.bench_server import initialize, newest_session, server_env, spawned, spread, wait_idle
from stress.corpus import MiB, generate
from stress.figures import Table, add_json_option
from stress.transcripts import claude_slug

REPO = Path(__file__).resolve().parents[1]
LAUNCHER = REPO / "plugin" / "launch.py"
BIG_ID = "b16b16b1-0000-4000-8000-000000000100"


def ms(values: list[float]) -> tuple[str, str]:
    return median_range(values, "ms", 1e-3, 1)


def write_big(project: str, config: str, size: int) -> Path:
    """A transcript of about ``size`` bytes: a prompt, an edit, tool rounds of output, a last edit
    and a last exchange. Its mtime is the newest, so it is among the listed sessions."""
    path = Path(config, "projects", claude_slug(project), f"{BIG_ID}.jsonl")
    rng = random.Random(5)
    ts = "2026-11-20T10:00:00.000Z"

    def line(kind: str, body: dict) -> bytes:
        base = {
            "type": kind,
            "sessionId": BIG_ID,
            "cwd": project,
            "gitBranch": "main",
            "timestamp": ts,
            "uuid": f"{rng.getrandbits(128):032x}",
            "version": "2.1.332",
            "isSidechain": False,
        }
        return (json.dumps({**base, **body}, separators=(",", ":")) + "\n").encode()  # compact, as Claude Code writes

    def edit(name: str) -> bytes:
        block = {
            "type": "tool_use",
            "id": f"toolu_{rng.getrandbits(64):x}",
            "name": "Edit",
            "input": {"file_path": f"{project}/src/{name}", "old_string": "a", "new_string": "b"},
        }
        return line(
            "assistant",
            {
                "message": {
                    "id": f"msg_{rng.getrandbits(64):x}",
                    "role": "assistant",
                    "model": "claude-opus-4-5",
                    "content": [block],
                }
            },
        )

    chunk = "x" * 60_000
    with open(path, "wb") as f:
        f.write(line("user", {"message": {"role": "user", "content": "Port the importer to the new API"}}))
        f.write(edit("early.py"))
        while f.tell() < size - 200_000:  # a Bash call and its 60 KB of output, again and again
            tid = f"toolu_{rng.getrandbits(64):x}"
            call = {"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": "pytest -q"}}
            f.write(
                line(
                    "assistant",
                    {
                        "message": {
                            "id": f"msg_{rng.getrandbits(64):x}",
                            "role": "assistant",
                            "model": "claude-opus-4-5",
                            "content": [call],
                        }
                    },
                )
            )
            f.write(
                line(
                    "user",
                    {
                        "message": {
                            "role": "user",
                            "content": [{"type": "tool_result", "tool_use_id": tid, "content": chunk}],
                        }
                    },
                )
            )
        f.write(edit("late.py"))
        f.write(line("user", {"message": {"role": "user", "content": "now run the whole suite"}}))
        f.write(
            line(
                "assistant",
                {
                    "message": {
                        "id": "msg_last",
                        "role": "assistant",
                        "model": "claude-opus-4-5",
                        "content": [{"type": "text", "text": "The suite passes."}],
                    }
                },
            )
        )
    now = time.time()
    os.utime(path, (now, now))
    return path


def rchar(pid: int) -> int:
    with open(f"/proc/{pid}/io") as f:
        return next(int(x.split()[1]) for x in f if x.startswith("rchar:"))


async def time_initialize(argv: list[str], env: dict[str, str], cwd: str) -> float:
    started = time.perf_counter()
    async with spawned(argv, env, cwd, subprocess.DEVNULL) as proc:
        reply = await initialize(proc)
        took = time.perf_counter() - started
    if b'"result"' not in reply:
        raise RuntimeError(f"initialize: {reply[:200]!r}")
    return took


async def bench(args: argparse.Namespace) -> int:
    root = Path(tempfile.mkdtemp(prefix="c3bench-resources-"))
    c3home = root / "c3home"
    data = root / "plugin-data"
    failures: list[str] = []
    t = Table("bench_resources")
    try:
        print(f"generating {args.transcripts} transcripts ...", file=sys.stderr)
        corpus = generate(root, transcripts=args.transcripts, projects=1, big_sizes=False)
        project = corpus.project_dirs[0]
        host = newest_session(corpus, project)
        big = write_big(project, corpus.config_dir, args.big_mib * MiB)
        env = server_env(corpus, project, host, c3home)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # byte code as a user's machine writes it

        params = StdioServerParameters(command=sys.executable, args=["-m", "c3async", "serve"], env=env, cwd=project)
        lists: list[float] = []
        reads: list[float] = []
        big_reads: list[float] = []
        big_bytes: list[int] = []
        largest = 0
        with open(os.devnull, "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), mode="legacy") as c:
                await c.list_resources()
                _waited, _rss = await wait_idle(project)
                for _ in range(args.calls):
                    t0 = time.perf_counter()
                    listed = (await c.list_resources()).resources
                    lists.append(time.perf_counter() - t0)
                uris = [str(r.uri) for r in listed if str(r.uri).startswith("c3://session/")]
                if len(uris) != 50 or not any(r.name for r in listed):
                    failures.append(f"resources/list: {len(uris)} sessions listed, expected 50")
                others = [u for u in uris if BIG_ID not in u]
                for i in range(args.calls):
                    uri = others[i % len(others)]
                    t0 = time.perf_counter()
                    text = (await c.read_resource(uri)).contents[0].text
                    reads.append(time.perf_counter() - t0)
                    largest = max(largest, len(text.encode()))
                    if not text.startswith("# "):
                        failures.append(f"read {uri}: {text[:200]!r}")
                pid = next(int(json.loads(p.read_bytes())["pid"]) for p in Path(project, ".c3", "live").glob("*.json"))
                for _ in range(5):
                    before = rchar(pid)
                    t0 = time.perf_counter()
                    text = (await c.read_resource(f"c3://session/{BIG_ID}")).contents[0].text
                    big_reads.append(time.perf_counter() - t0)
                    big_bytes.append(rchar(pid) - before)
                    if "src/late.py" not in text or "The suite passes." not in text:
                        failures.append(f"big brief: {text[:300]!r}")

        print("building the plugin's environment ...", file=sys.stderr)
        plugin_env = {**env, "CLAUDE_PLUGIN_DATA": str(data)}
        plugin_env.pop("PYTHONPATH", None)
        t0 = time.perf_counter()
        built = await anyio.run_process([sys.executable, "-I", str(LAUNCHER), "build"], env=plugin_env, check=False)
        build_s = time.perf_counter() - t0
        if built.returncode != 0:
            failures.append(f"plugin build: {built.stderr[-500:]!r}")
        serve_argv = [sys.executable, "-m", "c3async", "serve"]
        plugin_argv = [sys.executable, "-I", str(LAUNCHER), "serve"]
        serve_t: list[float] = []
        plugin_t: list[float] = []
        if built.returncode == 0:
            await time_initialize(serve_argv, env, project)  # unmeasured: byte code written, page cache warm
            await time_initialize(plugin_argv, plugin_env, project)
            for _ in range(args.starts):
                serve_t.append(await time_initialize(serve_argv, env, project))
                plugin_t.append(await time_initialize(plugin_argv, plugin_env, project))

        first_quiet = await first_starts(root, plugin_env, project, args.starts, busy=False)
        first_busy = await first_starts(root, plugin_env, project, args.starts, busy=True)

        t.section(f"corpus: {corpus.files} sessions in one project + one of {big.stat().st_size / MiB:.0f} MiB")
        t.section(f"one c3async serve over stdio, idle ({args.calls} calls of each)")
        t.add("resources/list, warm", *spread(lists))
        t.add("read c3://session/<id>, warm (every listed session in turn)", *spread(reads))
        t.add("  the largest brief", f"{largest} bytes", "(cap 8,192)")
        t.add(f"brief of the {big.stat().st_size / MiB:.0f} MiB transcript", *ms(big_reads))
        t.add(
            "  bytes the server read for it",
            f"{statistics.median(big_bytes) / MiB:.1f} MiB",
            f"[{min(big_bytes) / MiB:.1f}–{max(big_bytes) / MiB:.1f}] of {big.stat().st_size / MiB:.0f} MiB",
        )
        t.section(f"start-up, spawn to the initialize reply ({args.starts} alternating starts of each)")
        t.add(
            "the plugin's environment: first build",
            f"{build_s:.1f} s",
            "(uv)" if shutil.which("uv") else "(pip; the wheel cache as this machine has it)",
        )
        if serve_t and plugin_t:
            t.add("python -m c3async serve", *ms(serve_t))
            t.add("plugin: python3 -I plugin/launch.py serve", *ms(plugin_t))
            ratio = statistics.median(plugin_t) / statistics.median(serve_t)
            t.add("  ratio of the medians", f"{ratio:.2f}x", "(budget: within 1.10x)")
        t.add("plugin, first start (the environment building)", *ms(first_quiet))
        value, spread_ = ms(first_busy)
        t.add(f"  the same, {os.cpu_count()} cores busy (budget: within 30 s)", value, spread_)
        t.done(args.json)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for f in failures:
        print(f"FAILED: {f}", file=sys.stderr)
    return 1 if failures else 0


def burn() -> list[subprocess.Popen[bytes]]:
    """Every core busy: one ``while True: pass`` each (the caller kills them)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]


async def first_starts(root: Path, env: dict[str, str], project: str, starts: int, *, busy: bool) -> list[float]:
    """Spawn to ``initialize`` of the plugin's first start, ``starts`` times, each with a fresh
    data folder (its build fails at once: a ``uv`` first on PATH that exits 1)."""
    shim = root / "failing-uv" / "uv"
    shim.parent.mkdir(exist_ok=True)
    shim.write_text("#!/bin/sh\nexit 1\n")
    shim.chmod(0o755)
    env = {**env, "PATH": f"{shim.parent}{os.pathsep}{env.get('PATH', '')}"}
    burners = burn() if busy else []
    took = []
    try:
        for n in range(starts):
            took.append(
                await time_initialize(
                    [sys.executable, "-I", str(LAUNCHER), "serve"],
                    {**env, "CLAUDE_PLUGIN_DATA": str(root / f"first-{busy}-{n}")},
                    project,
                )
            )
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    return took


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stress.bench_resources", description=__doc__.split("\n")[0])
    ap.add_argument("--transcripts", type=int, default=200)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--starts", type=int, default=9)
    ap.add_argument("--big-mib", type=int, default=100)
    add_json_option(ap)
    return anyio.run(bench, ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
