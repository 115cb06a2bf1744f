"""Status-line benchmark: the whole ``c3async statusline`` process beside ``ccusage statusline``
on the same input, in one run, interleaved, with N sessions on disk and 10 live (3 of them
waiting, each a running process with Claude Code's registry file), the window's session noted.

    python -m stress.bench_statusline [--sessions 10000] [--runs 21] [--json FILE]

The status line is run as the command ``install-statusline`` writes (``python -I -S -c BOOT
statusline``, this checkout's c3async); its first run (the warm-up) records the rate limits
and reads the note, the runs measured are the common case. Transcripts are small (a prompt and
a reply with usage each): the status line reads none of them, ccusage reads them all. Also
prints ``python -c pass`` (the interpreter's own start-up here, site-packages included) and
``python -I -S -c pass`` (as the command starts it) for scale. Asserts nothing about time;
exits 1 if the status line fails or does not show the note, the waiting count and the window.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from c3async.live.statusline import statusline_command
from stress.figures import Table, add_json_option
from stress.transcripts import claude_slug, recent_sessions

REPO = Path(__file__).resolve().parent.parent
CCUSAGE = os.environ.get("C3_CCUSAGE") or shutil.which("ccusage")


def _transcripts(config: Path, cwd: Path, n: int) -> list[str]:
    return recent_sessions(config / "projects" / claude_slug(str(cwd)), str(cwd), n)


def _live(config: Path, work: Path, ids: list[str], waiting: int) -> list[subprocess.Popen]:
    procs = []
    registry = config / "sessions"
    registry.mkdir()
    now_ms = time.time() * 1000
    for k, sid in enumerate(ids):
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        procs.append(proc)
        data = Path(f"/proc/{proc.pid}/stat").read_bytes()
        ticks = data[data.rindex(b")") + 2 :].split()[19].decode()
        cwd = work / f"project-{k}"
        cwd.mkdir()
        (registry / f"{proc.pid}.json").write_text(
            json.dumps(
                {
                    "pid": proc.pid,
                    "sessionId": sid,
                    "cwd": str(cwd),
                    "procStart": ticks,
                    "startedAt": now_ms,
                    "status": "waiting" if k < waiting else "busy",
                    "statusUpdatedAt": now_ms - (k + 1) * 60_000,
                    "kind": "interactive",
                }
            )
        )
    return procs


def _time(cmd: list[str], data: bytes, env: dict[str, str], cwd: Path) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, input=data, env=env, cwd=cwd, capture_output=True, check=False)
    return time.perf_counter() - t0, proc.stdout if proc.returncode == 0 else b"rc=%d " % proc.returncode + proc.stderr


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stress.bench_statusline", description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=21)
    add_json_option(ap)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="c3-bench-statusline-") as tmp:
        root = Path(tmp)
        config, home, work = root / "config", root / "c3home", root / "work"
        project = work / "app"
        project.mkdir(parents=True)
        ids = _transcripts(config, project, args.sessions)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "C3_"))}
        env.update(CLAUDE_CONFIG_DIR=str(config), C3_HOME=str(home), PYTHONPATH=str(REPO), NO_COLOR="1")
        me = ids[0]
        subprocess.run(
            [
                sys.executable,
                "-m",
                "c3async",
                "mark",
                "note",
                me,
                "--summary",
                "wire the status line",
                "--project",
                str(project),
            ],
            env=env,
            check=True,
            capture_output=True,
        )
        procs = _live(config, work, ids[1:11], waiting=3)
        try:
            reset = int(time.time()) + 3 * 3600
            payload = {
                "session_id": me,
                "transcript_path": str(config / "projects" / "x" / f"{me}.jsonl"),
                "cwd": str(project),
                "hook_event_name": "Status",
                "version": "2.1.332",
                "model": {"id": "claude-sonnet-4-5", "display_name": "Sonnet 4.5"},
                "workspace": {"current_dir": str(project), "project_dir": str(project)},
                "cost": {"total_cost_usd": 0.42, "total_duration_ms": 60000},
                "rate_limits": {
                    "five_hour": {"used_percentage": 42, "resets_at": reset},
                    "seven_day": {"used_percentage": 12, "resets_at": reset + 86_400},
                },
            }
            data = json.dumps(payload).encode()
            # What install-statusline writes (this checkout's c3async), and for scale the interpreter
            # alone: with site-packages, and as that command starts it.
            ours_cmd = shlex.split(statusline_command())
            cmds = {
                "python -c pass": [sys.executable, "-c", "pass"],
                "python -I -S -c pass": [sys.executable, "-I", "-S", "-c", "pass"],
                "c3async statusline": ours_cmd,
            }
            if CCUSAGE:
                cmds["ccusage statusline"] = [CCUSAGE, "statusline", "--offline"]
            times: dict[str, list[float]] = {k: [] for k in cmds}
            shown: dict[str, bytes] = {}
            for name, cmd in cmds.items():  # one warm-up each (page cache, ccusage's own cache)
                shown[name] = _time(cmd, data, env, project)[1]
            for _ in range(args.runs):
                for name, cmd in cmds.items():  # interleaved: the machine's load falls on each alike
                    times[name].append(_time(cmd, data, env, project)[0])
        finally:
            for p in procs:
                p.kill()
                p.wait()
    ours = shown["c3async statusline"].decode("utf-8", "replace").strip()
    t = Table("bench_statusline")
    t.section(
        f"one status line, a whole process: {args.sessions:,} sessions, 10 live (3 waiting), {args.runs} runs "
        f"each, interleaved; {len(os.sched_getaffinity(0))} cores, load average {os.getloadavg()[0]:.1f}"
    )
    med = {name: statistics.median(ts) * 1e3 for name, ts in times.items()}
    for name, ts in times.items():
        budget = "; budget: under 60 ms" if name == "c3async statusline" else ""
        t.add(name, f"{med[name]:.1f} ms", f"[{min(ts) * 1e3:.1f}-{max(ts) * 1e3:.1f}]{budget}")
    if "ccusage statusline" in med:
        ratio = med["c3async statusline"] / med["ccusage statusline"]
        t.add("c3async / ccusage, medians", f"{ratio:.2f}", "budget: at most 0.5")
    t.add("what it printed", ours[:120])
    t.done(args.json)
    ok = "3 waiting" in ours and "5h 42%" in ours and "note: wire the status line" in ours
    if not ok:
        print("FAIL: the status line did not show the note, the waiting count and the window", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
