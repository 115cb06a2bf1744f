"""The catalog benchmark: how long listing sessions takes, what it reads, and what it costs in memory.

    python -m stress.bench_catalog [--transcripts N] [--runs R] [--keep DIR] [--no-big]

Run from the repository root. It generates a realistic corpus once (``stress.corpus``; with
``--keep DIR`` it is generated into DIR, or reused from there), then measures and prints:

- cold and cached listings of every project, as a whole ``c3async sessions --all --json``
  process and in-process (``scan_projects``), medians of R runs with the min-max;
- bytes read per transcript, cold and cached (cached must read nothing);
- peak RSS of the whole process, and of listing a project whose one transcript is 2 GB;
- the same listing through Anthropic's Agent SDK (``claude_agent_sdk.list_sessions``), if
  installed, with ours/SDK ratios;
- how many of the corpus's ground-truth titles, first prompts and branches we got right.

It asserts nothing about time. It exits 1 only if one of our listings fails or returns the wrong
number of rows. The page cache stays warm throughout (the corpus was just written): the figures
measure CPU and system calls, not the disk.
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
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from c3async.ground.project import resolve
from stress.corpus import Corpus, GiB, KiB, MiB, generate, write_giant
from stress.figures import Table, add_json_option

SDK_NOTE = "the SDK reads only 64 KiB at each end of a file and keeps no cache"


@dataclass
class Run:
    wall: float
    maxrss: int  # bytes
    rc: int
    out: bytes
    err: bytes
    rchar: int = -1  # bytes the command read() (page cache or disk), -1 if unknown
    started: float = 0.0  # wall clock, for a correctness check's "now"
    ended: float = 0.0


# Peak RSS needs care: on Linux a child's ru_maxrss includes the high-water mark of the address
# space it had before exec, i.e. its parent's (fork and vfork alike). Measured straight from this
# benchmark process, which holds the SDK and the catalog in memory, every child would look as big
# as the benchmark. So each command runs under a fresh minimal Python (`-S`, only `os` imported)
# that spawns it, times it and reports wait4's rusage: that parent's ~10 MB is below any real
# figure, so it cannot inflate one.
# It also reads the child's /proc/<pid>/io before reaping it: rchar counts every byte the
# process read(), so what a file costs a command is the difference of two runs.
_WRAPPER = """
import os, sys, time
report, argv = sys.argv[1], sys.argv[2:]
started = time.perf_counter()
pid = os.posix_spawnp(argv[0], argv, os.environ)
os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
wall = time.perf_counter() - started
rchar = -1
try:
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                rchar = int(line.split()[1])
except OSError:
    pass
_, status, usage = os.wait4(pid, 0)
with open(report, "w") as f:
    f.write(f"{wall!r} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)} {rchar}")
"""


def run_child(argv: list[str], env: dict[str, str], cwd: str | None = None) -> Run:
    """Run a command to completion (in ``cwd``): its wall time (spawn to exit) and its own peak RSS."""
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile("r", suffix=".txt") as report,
    ):
        t0 = time.time()
        wrapper = subprocess.run(
            [sys.executable, "-S", "-c", _WRAPPER, report.name, *argv],
            stdout=out,
            stderr=err,
            env=env,
            cwd=cwd,
            check=False,
        )
        t1 = time.time()
        out.seek(0)
        err.seek(0)
        try:
            wall, maxrss, rc, rchar = report.read().split()
        except ValueError:  # the wrapper itself failed (the command could not be spawned)
            return Run(0.0, 0, wrapper.returncode or 1, out.read(), err.read(), -1, t0, t1)
        return Run(float(wall), int(maxrss) * 1024, int(rc), out.read(), err.read(), int(rchar), t0, t1)


def json_rows(run, what: str, failures: list[str], want: int | None = None) -> list[dict] | None:
    """The rows a ``--json`` listing printed (any run with ``rc``, ``out``, ``err``); a failed
    run, output that is not JSON, or a wrong row count is added to ``failures``."""
    if run.rc != 0:
        failures.append(f"{what}: exit {run.rc}: {run.err.decode(errors='replace')[-2000:]}")
        return None
    try:
        rows = json.loads(run.out)
    except ValueError as exc:
        failures.append(f"{what}: output is not JSON ({exc})")
        return None
    if want is not None and len(rows) != want:
        failures.append(f"{what}: {len(rows)} rows, expected {want}")
    return rows


def report_failures(failures: list[str], server_stderr: str = "") -> int:
    """Print the failures (and a server's stderr tail, if any failed) on stderr; the exit status."""
    for failure in failures:
        print(f"FAILED: {failure}", file=sys.stderr)
    if failures and server_stderr.strip():
        print("server stderr (tail):\n" + server_stderr[-3000:], file=sys.stderr)
    return 1 if failures else 0


def median_range(values: list[float], unit: str = "s", scale: float = 1.0, digits: int = 3) -> tuple[str, str]:
    v = [x / scale for x in values]
    med = statistics.median(v)
    if len(v) == 1:
        return f"{med:.{digits}f} {unit}", ""
    return f"{med:.{digits}f} {unit}", f"[{min(v):.{digits}f}–{max(v):.{digits}f}]"


def c3async_command() -> list[str]:
    """The installed console script beside this interpreter (what a user runs; a shim on PATH,
    such as pyenv's, would add its own start-up to every figure)."""
    exe = Path(sys.executable).with_name("c3async")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "c3async"]


def installed_copy_differs() -> str | None:
    """The whole-process figures measure the installed package: say so when it is not this
    checkout's code (run `pip install .` again after a change)."""
    repo = Path(__file__).resolve().parents[1] / "c3async"
    out = subprocess.run(
        [sys.executable, "-c", "import c3async, os; print(os.path.dirname(c3async.__file__))"],
        capture_output=True,
        text=True,
        cwd="/",
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    installed = Path(out.stdout.strip())
    if not out.stdout.strip() or installed.resolve() == repo.resolve():
        return None
    for src in repo.rglob("*.py"):
        other = installed / src.relative_to(repo)
        if not other.exists() or other.read_bytes() != src.read_bytes():
            return f"the installed c3async ({installed}) differs from this checkout at {src.relative_to(repo)}"
    return None


def drop_caches(projects: list[str]) -> None:
    """Delete our catalog caches (not the OS page cache: this benchmark keeps that warm)."""
    for p in projects:
        shutil.rmtree(Path(p, ".c3", "cache"), ignore_errors=True)


def load_or_generate(args: argparse.Namespace) -> tuple[Corpus, Path, bool]:
    """(corpus, root, reused?)"""
    if args.keep:
        root = Path(args.keep)
        corpus = Corpus.load(root)
        if corpus and corpus.files == args.transcripts and corpus.big_sizes == (not args.no_big):
            return corpus, root, True
        for sub in ("config", "work"):
            shutil.rmtree(root / sub, ignore_errors=True)
        root.mkdir(parents=True, exist_ok=True)
    else:
        root = Path(tempfile.mkdtemp(prefix="c3bench-"))
    print(f"generating {args.transcripts} transcripts into {root} ...", file=sys.stderr)
    return generate(root, transcripts=args.transcripts, big_sizes=not args.no_big), root, False


def corpus_args(prog: str, doc: str | None, argv: list[str] | None) -> argparse.Namespace:
    """The options of a benchmark over the standard corpus (``load_or_generate`` takes them)."""
    ap = argparse.ArgumentParser(prog=f"python -m {prog}", description=(doc or "").split("\n")[0])
    ap.add_argument("--transcripts", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", metavar="DIR", help="generate the corpus into DIR and keep it (reused when it matches)")
    ap.add_argument("--no-big", action="store_true", help="no 20-60 MiB transcripts in the corpus")
    add_json_option(ap)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = corpus_args("stress.bench_catalog", __doc__, argv)
    R = max(1, args.runs)

    corpus, root, reused = load_or_generate(args)
    c3home = Path(tempfile.mkdtemp(prefix="c3bench-home-"))
    try:
        return bench(corpus, root, reused, c3home, R, args.json)
    finally:
        shutil.rmtree(c3home, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def bench(corpus: Corpus, root: Path, reused: bool, c3home: Path, R: int, json_out: str | None) -> int:
    import anyio

    from c3async.catalog import NEWEST, scan_projects  # the import warm-up for in-process runs
    from c3async.sessions.view import list_rows_sync

    projects = corpus.project_dirs
    env = dict(os.environ, CLAUDE_CONFIG_DIR=corpus.config_dir, C3_HOME=str(c3home))
    env.pop("CLAUDE_PROJECT_DIR", None)
    os.environ.update(CLAUDE_CONFIG_DIR=corpus.config_dir, C3_HOME=str(c3home))  # in-process runs
    os.environ.pop("CLAUDE_PROJECT_DIR", None)
    cmd = c3async_command()
    per_project = Counter(e["project"] for e in corpus.expected.values())
    want_rows = sum(min(NEWEST, per_project[p]) for p in projects)
    failures: list[str] = []

    def check(run: Run, what: str, rows_wanted: int) -> list[dict] | None:
        return json_rows(run, what, failures, rows_wanted)

    t = Table("bench_catalog")
    sizes = sorted(e["size"] for e in corpus.expected.values())
    t.section("corpus")
    t.add("transcripts / projects", f"{corpus.files} / {len(projects)}")
    t.add(
        "total size",
        f"{corpus.total_bytes / MiB:.1f} MiB",
        f"[median {sizes[len(sizes) // 2] / KiB:.0f} KiB, largest {sizes[-1] / MiB:.1f} MiB, "
        f"{sum(e['big'] for e in corpus.expected.values())} of 20-60 MiB]",
    )
    t.add("corpus generation", "reused" if reused else f"{corpus.seconds:.1f} s", f"({root})")
    t.add("command", " ".join(os.path.basename(c) for c in cmd) + " sessions --all --json")
    stale = installed_copy_differs()
    if stale:
        t.add("WARNING", "stale install", f"{stale}: whole-process figures are not this checkout's")

    # Register every project, the way a user would (this also warms the page cache).
    print("registering projects ...", file=sys.stderr)
    for p in projects:
        check(
            run_child([*cmd, "sessions", "--project", p, "--json"], env), f"register {p}", min(NEWEST, per_project[p])
        )

    # ---- whole process
    print("whole-process listings ...", file=sys.stderr)
    listing = [*cmd, "sessions", "--all", "--json"]
    cold: list[Run] = []
    first_rows = None
    for i in range(R):
        drop_caches(projects)
        run = run_child(listing, env)
        rows = check(run, f"cold run {i + 1}", want_rows)
        first_rows = first_rows or rows
        cold.append(run)
    cached: list[Run] = []
    for i in range(R):
        run = run_child(listing, env)
        check(run, f"cached run {i + 1}", want_rows)
        cached.append(run)

    # ---- in-process
    print("in-process listings ...", file=sys.stderr)
    cold_in, cached_in = [], []
    cold_read = cold_bytes = cold_examined = 0
    cached_read = cached_bytes = 0
    for _ in range(R):
        drop_caches(projects)
        started = time.perf_counter()
        scans, _rows = list_rows_sync([resolve(p) for p in projects])
        cold_in.append(time.perf_counter() - started)
        cold_read = sum(s.read for s in scans)
        cold_bytes = sum(s.bytes_read for s in scans)
        cold_examined = sum(s.examined for s in scans)
    cold_async = []
    for _ in range(R):
        drop_caches(projects)
        started = time.perf_counter()
        anyio.run(scan_projects, [resolve(p) for p in projects])
        cold_async.append(time.perf_counter() - started)
    for _ in range(R):
        started = time.perf_counter()
        scans, _rows = list_rows_sync([resolve(p) for p in projects])
        cached_in.append(time.perf_counter() - started)
        cached_read = sum(s.read for s in scans)
        cached_bytes = sum(s.bytes_read for s in scans)
        if cached_bytes or cached_read:
            failures.append(f"cached in-process listing read {cached_bytes} bytes from {cached_read} files")

    t.section("our listing (caches deleted before each cold run; page cache warm)")
    t.add("cold listing, whole process (c3async sessions --all --json)", *median_range([r.wall for r in cold]))
    t.add("cached listing, whole process", *median_range([r.wall for r in cached]))
    t.add("cold listing, in-process (list_rows_sync: rows with marks and hints)", *median_range(cold_in))
    t.add("cold scan, in-process, threads only (async scan_projects, as the server)", *median_range(cold_async))
    t.add("cached listing, in-process (list_rows_sync)", *median_range(cached_in))
    t.add("peak RSS, cold whole process", *median_range([r.maxrss for r in cold], "MiB", MiB, 1))
    t.add("peak RSS, cached whole process", *median_range([r.maxrss for r in cached], "MiB", MiB, 1))
    t.add(
        "bytes read per transcript opened, cold",
        f"{cold_bytes / max(1, cold_read) / KiB:.1f} KiB",
        f"[{cold_read} of {cold_examined} files opened, {cold_bytes / MiB:.1f} MiB of "
        f"{corpus.total_bytes / MiB:.1f} MiB = {100 * cold_bytes / corpus.total_bytes:.1f}%]",
    )
    t.add("bytes read, cached", f"{cached_bytes} B", f"[{cached_read} files opened]")

    # ---- ground truth
    rows = first_rows or []
    truth = corpus.expected
    titled = [r for r in rows if r["id"] in truth and truth[r["id"]]["title"] is not None]
    title_ok = [r for r in titled if r["title"] == truth[r["id"]]["title"]]
    untitled = [r for r in rows if r["id"] in truth and truth[r["id"]]["title"] is None]
    prompt_titled = [r for r in untitled if r.get("title_source") == "first-prompt"]
    fp_ok = [r for r in rows if r["id"] in truth and (r["first_prompt"] or "")[:200] == truth[r["id"]]["first_prompt"]]
    br_ok = [r for r in rows if r["id"] in truth and r["branch"] == truth[r["id"]]["branch"]]
    unknown = [r["id"] for r in rows if r["id"] not in truth]
    t.section("correctness (first cold whole-process run vs the corpus's ground truth)")
    t.add("rows listed by us", f"{len(rows)}", f"(expected {want_rows})")
    t.add("titles right (title line present)", f"{len(title_ok)}/{len(titled)}")
    t.add("titles from the first prompt (no title line)", f"{len(prompt_titled)}/{len(untitled)}")
    t.add("first prompts right (first 200 chars)", f"{len(fp_ok)}/{len(rows)}")
    t.add("branches right (last gitBranch)", f"{len(br_ok)}/{len(rows)}")
    right = {r["id"] for r in title_ok}
    mismatches = [
        (r["id"], r["title"], truth[r["id"]]["title"], truth[r["id"]]["kind"]) for r in titled if r["id"] not in right
    ]
    if unknown:
        mismatches += [(sid, "?", "(not in the corpus)", "") for sid in unknown[:3]]

    # ---- the Agent SDK
    sdk_lines = []
    try:
        import claude_agent_sdk
    except ImportError:
        claude_agent_sdk = None
    t.section(f"Anthropic Agent SDK list_sessions(directory=P) per project ({SDK_NOTE})")
    if claude_agent_sdk is None:
        t.add("comparison with the Agent SDK", "skipped", "(claude_agent_sdk is not importable)")
    else:
        print("Agent SDK listings ...", file=sys.stderr)
        script = (
            "import sys, claude_agent_sdk as s\nprint(sum(len(s.list_sessions(directory=p)) for p in sys.argv[1:]))"
        )
        sdk_runs = [run_child([sys.executable, "-c", script, *projects], env) for _ in range(R)]
        sdk_import = [run_child([sys.executable, "-c", "import claude_agent_sdk"], env).wall for _ in range(R)]
        sdk_in, sdk_infos = [], []
        for _ in range(R):
            started = time.perf_counter()
            sdk_infos = [i for p in projects for i in claude_agent_sdk.list_sessions(directory=p)]
            sdk_in.append(time.perf_counter() - started)
        sdk_wall = [r.wall for r in sdk_runs]
        sdk_ok = [r for r in sdk_runs if r.rc == 0]
        sdk_rows = int(sdk_ok[0].out.strip()) if sdk_ok else -1
        by_id = {i.session_id: i for i in sdk_infos}
        # Over the sessions we listed (the same set unless a project has more than NEWEST).
        sdk_titles = sum(
            1 for r in titled if r["id"] in by_id and by_id[r["id"]].custom_title == truth[r["id"]]["title"]
        )
        sdk_missing = [r["id"] for r in rows if r["id"] not in by_id]
        med = statistics.median
        t.add("SDK listing, whole process (python -c 'import claude_agent_sdk ...')", *median_range(sdk_wall))
        t.add("  of which starting Python and importing claude_agent_sdk", *median_range(sdk_import))
        t.add("SDK listing, in-process", *median_range(sdk_in))
        t.add("peak RSS, SDK whole process", *median_range([r.maxrss for r in sdk_runs], "MiB", MiB, 1))
        t.add("rows listed: ours / SDK", f"{len(rows)} / {sdk_rows}")
        t.add("titles right: ours / SDK (custom_title)", f"{len(title_ok)} / {sdk_titles}", f"(of {len(titled)})")
        if sdk_missing:
            t.add("sessions we list that the SDK drops", f"{len(sdk_missing)}", f"(e.g. {sdk_missing[0]})")
        t.add("ratio ours/SDK, cold, whole process", f"{med([r.wall for r in cold]) / med(sdk_wall):.2f}x")
        t.add("ratio ours/SDK, cached, whole process", f"{med([r.wall for r in cached]) / med(sdk_wall):.2f}x")
        t.add("ratio ours/SDK, cold, in-process", f"{med(cold_in) / med(sdk_in):.2f}x")
        t.add("ratio ours/SDK, cached, in-process", f"{med(cached_in) / med(sdk_in):.2f}x")
        if any(r.rc for r in sdk_runs):
            sdk_lines.append("SDK whole-process run failed: " + sdk_runs[0].err.decode(errors="replace")[-500:])

    # ---- one project with a 2 GB transcript
    print("2 GB transcript ...", file=sys.stderr)
    giant_root = root / "giant"
    try:
        gproject, gpath, gtruth = write_giant(giant_root, size=2 * GiB)
        genv = dict(env, CLAUDE_CONFIG_DIR=str(giant_root / "config"), C3_HOME=str(c3home / "giant"))
        allocated = os.stat(gpath).st_blocks * 512
        giant_runs = []
        for i in range(R):
            drop_caches([gproject])
            run = run_child([*cmd, "sessions", "--project", gproject, "--json"], genv)
            grows = check(run, f"2 GB transcript run {i + 1}", 1)
            if grows and grows[0]["title"] != gtruth["title"]:
                mismatches.append((grows[0]["id"], grows[0]["title"], gtruth["title"], "2 GB"))
            giant_runs.append(run)
        t.section(
            f"one project, one 2 GB transcript ({os.stat(gpath).st_size / GiB:.2f} GiB, "
            f"{allocated / MiB:.1f} MiB allocated: a zero-filled hole between a real head and tail)"
        )
        t.add(
            "cold listing, whole process (c3async sessions --project P --json)",
            *median_range([r.wall for r in giant_runs]),
        )
        t.add("peak RSS, cold whole process", *median_range([r.maxrss for r in giant_runs], "MiB", MiB, 1))
    finally:
        shutil.rmtree(giant_root, ignore_errors=True)  # the 2 GB file goes, kept corpus or not

    t.section("notes")
    t.add("figures are medians of R runs [min–max]; R", str(R))
    t.add("page cache", "warm", "(files were just written/read: this measures CPU and syscalls, not disk)")
    t.done(json_out)
    for sid, got, want, kind in mismatches[:10]:
        print(f"title mismatch: {sid} ({kind}): printed {got!r}, expected {want!r}")
    for line in sdk_lines:
        print(line)
    for failure in failures:
        print(f"FAILED: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
