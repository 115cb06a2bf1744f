"""Token accounting benchmark: the first accounting and an incremental update on a generated
1,000-transcript corpus spread over several projects, and (when a ccusage binary is given)
ccusage on the same files, run by run side by side (so both see the same load), with a
comparison of the per-session token totals and costs. Prints figures (medians of ``--runs``,
[min-max]); asserts nothing about time.

    python -m stress.bench_stats [--transcripts 1000] [--projects 5] [--runs 5] [--ccusage PATH]

The budget (DESIGN.md §7): one cold ``c3async stats --all --json`` process, which accounts every
registered project in one pass, no slower than one ``ccusage session --json`` process, which
reads every project too. Figures: that whole process cold (no state: every byte read) and warm
(state kept, nothing new: a stat per file), each with its ratio to ccusage, run by run; the first
accounting in-process, with worker processes (the CLI's way) and in this process only (the MCP
server's way: it owns threads, so it never forks); an incremental pass after one response is
appended per project, in-process and as a whole process; bytes read and decoded; CPU seconds
(user + system, workers included) and the largest process's peak RSS, which say what the wall
times mean on a loaded machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from c3async.ground.project import resolve
from stress.corpus import generate
from stress.figures import Table, add_json_option

REPO = Path(__file__).resolve().parents[1]


def _med(xs: list[float], unit: str = "s") -> str:
    return f"{statistics.median(xs):.3f} {unit} [{min(xs):.3f}-{max(xs):.3f}]"


def _cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def _run(cmd: list[str], env: dict[str, str], out: Path) -> tuple[float, float, int]:
    """Run ``cmd`` to completion, stdout to ``out``: (wall s, CPU s, peak RSS KiB of the largest
    process in its tree, from wait4)."""
    with open(out, "wb") as f:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.PIPE)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode:
        raise SystemExit(f"{cmd[0]} failed ({proc.returncode}): {err[-2000:]}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m stress.bench_stats", description=__doc__.split("\n")[0])
    ap.add_argument("--transcripts", type=int, default=1000)
    ap.add_argument("--projects", type=int, default=5)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--ccusage", help="a ccusage executable (npm i ccusage) to compare against")
    add_json_option(ap)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="c3stats-"))
    try:
        corpus = generate(root, transcripts=args.transcripts, projects=args.projects, big_sizes=True)
        os.environ.update(CLAUDE_CONFIG_DIR=corpus.config_dir, C3_HOME=str(root / "c3home"))
        from c3async.stores import registry
        from c3async.usage.account import account_projects

        env = dict(
            os.environ,
            HOME=str(root),
            PYTHONPATH=os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH")))),
        )
        out = root / "out.json"
        projects = corpus.project_dirs
        for p in projects:  # what `stats --all` reads: the registered projects
            registry.register(resolve(p))

        def reset() -> None:
            for p in projects:
                shutil.rmtree(Path(p, ".c3"), ignore_errors=True)

        def stats_all() -> tuple[float, float, int]:
            return _run([sys.executable, "-m", "c3async", "stats", "--all", "--json"], env, out)

        def ccusage() -> tuple[float, float, int]:
            assert args.ccusage
            return _run([args.ccusage, "claude", "session", "--json", "--offline"], env, out)

        fig: dict[str, list[float]] = {}

        def note(name: str, value: float) -> None:
            fig.setdefault(name, []).append(value)

        workers = read_first = decoded = read_incr = grown = sessions = 0
        for _ in range(args.runs):
            # ours in-process, worker processes allowed (as the CLI runs it)
            reset()
            c0, t0 = _cpu(), time.perf_counter()
            results = account_projects([resolve(p) for p in projects])
            note("first", time.perf_counter() - t0)
            note("first_cpu", _cpu() - c0)
            workers = max(r.workers for r in results)
            read_first = sum(r.bytes_read for r in results)
            decoded = sum(r.bytes_decoded for r in results)
            # ours in-process, this process only (as the MCP server runs it)
            reset()
            c0, t0 = _cpu(), time.perf_counter()
            account_projects([resolve(p) for p in projects], processes=False)
            note("first_alone", time.perf_counter() - t0)
            note("first_alone_cpu", _cpu() - c0)
            # ours, one whole `stats --all` process: cold, then warm (its state kept, nothing new)
            reset()
            w, c, r = stats_all()
            sessions = len(json.loads(out.read_bytes()))
            note("cli", w)
            note("cli_cpu", c)
            note("cli_rss", r / 1024)
            w, c, _ = stats_all()
            note("cli_warm", w)
            note("cli_warm_cpu", c)
            # ccusage, whole process, on the same files
            if args.ccusage:
                w, c, r = ccusage()
                note("cc", w)
                note("cc_cpu", c)
                note("cc_rss", r / 1024)
                note("ratio_first", fig["first"][-1] / w)
                note("ratio_cli", fig["cli"][-1] / w)
                note("ratio_cli_warm", fig["cli_warm"][-1] / w)
            # grow one transcript per project by one response, then account again
            results = account_projects([resolve(p) for p in projects])
            grown = 0
            for res in results:
                sid = next(iter(res.totals))
                path = next(Path(corpus.config_dir, "projects").glob(f"*/{sid}.jsonl"))
                line = (
                    json.dumps(
                        {
                            "type": "assistant",
                            "sessionId": sid,
                            "requestId": f"req_{time.time_ns()}",
                            "timestamp": "2026-11-29T10:00:00.000Z",
                            "message": {
                                "id": f"msg_{time.time_ns()}",
                                "model": "claude-opus-4-5-20251101",
                                "usage": {"input_tokens": 3, "output_tokens": 5},
                            },
                        },
                        separators=(",", ":"),
                    )
                    + "\n"
                )
                with open(path, "a") as f:
                    f.write(line)
                grown += len(line)
            t0 = time.perf_counter()
            results = account_projects([resolve(p) for p in projects])
            note("incr", time.perf_counter() - t0)
            read_incr = sum(r.bytes_read for r in results)
            with open(path, "a") as f:  # and once more, as a whole process
                f.write(line.replace('"req_', '"req_x'))
            note("cli_incr", stats_all()[0])

        mib = 2**20
        n = len(projects)
        t = Table("bench_stats")
        t.section(
            f"token accounting ({corpus.files} transcripts, {corpus.total_bytes / mib:.0f} MiB, {n} "
            f"project{'s' * (n > 1)}, {sessions} sessions; {len(os.sched_getaffinity(0))} cores; page cache "
            f"warm; medians of {args.runs} runs [min-max])"
        )
        t.add(
            "`c3async stats --all --json`, cold, whole process",
            _med(fig["cli"]),
            f"CPU {statistics.median(fig['cli_cpu']):.2f} s, peak RSS {statistics.median(fig['cli_rss']):.0f} MiB",
        )
        t.add(
            "`c3async stats --all --json`, warm, whole process",
            _med(fig["cli_warm"]),
            f"CPU {statistics.median(fig['cli_warm_cpu']):.2f} s",
        )
        t.add(
            f"first accounting, in-process, {workers} worker processes",
            _med(fig["first"]),
            f"CPU {statistics.median(fig['first_cpu']):.2f} s",
        )
        t.add(
            "first accounting, in-process, this process only",
            _med(fig["first_alone"]),
            f"CPU {statistics.median(fig['first_alone_cpu']):.2f} s",
        )
        t.add("  read / decoded (the lines holding usage)", f"{read_first / mib:.0f} MiB / {decoded / mib:.0f} MiB")
        t.add(
            "incremental, one response appended/project, in-process",
            _med(fig["incr"]),
            f"read {read_incr} B (appended {grown} B)",
        )
        t.add("incremental, whole `c3async stats --all` process", _med(fig["cli_incr"]))
        if not args.ccusage:
            t.add("ccusage comparison", "skipped", "(give --ccusage PATH)")
            t.done(args.json)
            return 0
        t.add(
            "ccusage session --json, whole process",
            _med(fig["cc"]),
            f"CPU {statistics.median(fig['cc_cpu']):.2f} s, peak RSS {statistics.median(fig['cc_rss']):.0f} MiB",
        )
        t.add("ratio `stats --all` cold / ccusage, per run", _med(fig["ratio_cli"], "x"), "(budget: <= 1)")
        t.add("ratio `stats --all` warm / ccusage, per run", _med(fig["ratio_cli_warm"], "x"))
        t.add("ratio first in-process / ccusage, per run", _med(fig["ratio_first"], "x"))
        # ccusage's last run read the files as the last in-process pass did (the append after
        # it was for the whole-process pass): account once more so both saw the same bytes
        ccusage()
        cc_out = out.read_text()
        totals = {sid: t for r in account_projects([resolve(p) for p in projects]) for sid, t in r.priced().items()}
        cc = {s["sessionId"]: s for s in json.loads(cc_out)["sessions"]}
        tok_bad = [
            s
            for s, c in cc.items()
            if s not in totals
            or (
                totals[s].input,
                totals[s].output,
                totals[s].cache_write_5m + totals[s].cache_write_1h,
                totals[s].cache_read,
            )
            != (c["inputTokens"], c["outputTokens"], c["cacheCreationTokens"], c["cacheReadTokens"])
        ]
        diffs = [abs(totals[s].cost_usd - c["totalCost"]) for s, c in cc.items() if s in totals]
        t.add("sessions: ccusage / ours", f"{len(cc)} / {len(totals)}")
        t.add("token totals differing from ccusage", str(len(tok_bad)), f"(e.g. {tok_bad[0]})" if tok_bad else "")
        t.add(
            "cost difference, max per session",
            f"${max(diffs or [0]):.6f}",
            f"({sum(d > 0.01 for d in diffs)} sessions over a cent)",
        )
        t.done(args.json)
        return 1 if tok_bad or len(cc) != len(totals) else 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
