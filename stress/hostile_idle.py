"""Idle is idle under a stuffed Claude Code folder: a projects folder with tens of thousands of
entries, a registry of running processes holding thousands of files that killed claudes left
behind (pids that no process has), and a project's transcript folder full of names that are no
session. A real Hub over the registered projects, left alone once it has listed them, must not
pay for the junk at every pass: its idle CPU stays under ``IDLE_PCT`` of one core (the budget at
10,000 ordinary sessions is 2 %, ``stress.bench_idle``), and it still shows a session started
meanwhile and a mark made from the CLI, each within ``NOTICE_S``.

Figures: the junk, the Hub's idle CPU (% of one core over the window), the time from a new
session's file, and from the mark command's end, to the row.
"""

from __future__ import annotations

import copy
import json
import os
import random
import re
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

from .harness import PY, REPO, Result, Sandbox, c3async_cmd, make_project, register
from .transcripts import assistant_line, render, user_line

CLASS = "idle under a stuffed Claude Code folder"
IDLE_PCT = 5.0  # a Hub that pays per junk entry at each pass is far above this
NOTICE_S = 10.0
PROJECTS = 3
SESSIONS = 20


def _junk(sb: Sandbox, folder: Path, n: int) -> None:
    """``n`` entries in Claude Code's projects folder, ``n`` leftover registry files of killed
    claudes, ``n`` files that are no session in a project's transcript folder."""
    root, registry = sb.config / "projects", sb.config / "sessions"
    registry.mkdir(exist_ok=True)
    for i in range(n):
        (root / f"-tmp-junk-{i}").touch()
        (folder / f"notes-{i}.txt").touch()
        pid = 4_200_000_000 + i  # beyond any pid_max: no process has it
        (registry / f"{pid}.json").write_text(
            json.dumps(
                {
                    "pid": pid,
                    "sessionId": str(uuid.uuid4()),
                    "cwd": str(sb.work),
                    "procStart": "12345",
                    "status": "idle",
                    "statusUpdatedAt": time.time() * 1000,
                }
            )
        )
    old = time.time() - 3600
    for path in [*registry.iterdir(), folder, root]:  # written long ago, as leftovers are
        os.utime(path, (old, old))


def _start(env: dict[str, str]) -> tuple[subprocess.Popen, str, str]:
    proc = subprocess.Popen(
        [PY, "-m", "c3async", "hub", "--port", "0"],
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stderr.readline() if proc.stderr is not None else ""
    m = re.search(r"(http://127\.0\.0\.1:\d+)/\?token=([A-Za-z0-9_-]+)", line)
    if m is None:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"the Hub did not start: {line!r}")
    return proc, m.group(1), m.group(2)


def _rows(url: str, token: str, **params: str) -> dict:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    req = urllib.request.Request(f"{url}/api/rows?{query}", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def _until(probe, limit: float) -> float | None:
    """Seconds until ``probe()`` holds (polled every 50 ms), or None after ``limit``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if probe():
            return time.monotonic() - t0
        time.sleep(0.05)
    return None


def _cpu(pid: int) -> float:
    import psutil

    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def _settle(pid: int, window: float, tries: int) -> None:
    """Until two windows in a row cost about the same (the start-up's work is over)."""
    last = None
    for _ in range(tries):
        before = _cpu(pid)
        time.sleep(window)
        rate = _cpu(pid) - before
        if last is not None and abs(rate - last) <= max(0.02 * window, 0.25 * max(rate, last)):
            return
        last = rate


def _new_session(project, ts: float) -> str:
    sid = str(uuid.uuid4())
    u = user_line(sid, project.path, "started while the Hub sat idle", ts)
    lines = [
        {"type": "permission-mode", "permissionMode": "default", "sessionId": sid},
        u,
        assistant_line(sid, project.path, "On it.", ts + 1, u["uuid"]),
    ]
    (project.folder / f"{sid}.jsonl").write_bytes(render(lines))
    return sid


def _own(sb: Sandbox) -> Sandbox:
    """A world of this scenario's own inside the sandbox: its Claude config, C3_HOME and
    projects, so the Hub lists these projects alone, whatever other scenarios registered."""
    own = copy.copy(sb)
    base = sb.root / "idle"
    own.config, own.c3home, own.work = base / "claude", base / "c3home", base / "work"
    for d in (own.config, own.c3home, own.work):
        d.mkdir(parents=True)
    return own


def check(res: Result, sb: Sandbox, quick: bool) -> None:
    sb = _own(sb)
    n = 5_000 if quick else 50_000
    rng = random.Random(29)
    projects = [make_project(sb, f"idle-{i}", SESSIONS, rng) for i in range(PROJECTS)]
    for p in projects:
        register(sb, p)
    _junk(sb, projects[0].folder, n)
    res.fig("junk", f"{n:,} entries in the projects folder, {n:,} leftover registry files, {n:,} non-session files")
    env = sb.env()
    hub, url, token = _start(env)
    try:
        total = PROJECTS * SESSIONS
        ready = _until(lambda: _rows(url, token)["total"] == total, 60)
        if not res.check(ready is not None, "the Hub lists every session over the junk", f"not {total} rows in 60 s"):
            return
        _settle(hub.pid, 1.5 if quick else 3.0, 6)
        window = 5.0 if quick else 30.0
        cpu0, t0 = _cpu(hub.pid), time.monotonic()
        time.sleep(window)
        pct = (_cpu(hub.pid) - cpu0) / (time.monotonic() - t0) * 100
        res.fig("the Hub's idle CPU", f"{pct:.2f} % of one core over {window:.0f} s")
        res.check(
            pct < IDLE_PCT, f"an idle Hub stays under {IDLE_PCT:.0f} % of a core whatever the junk", f"{pct:.1f} %"
        )

        sid = _new_session(projects[0], time.time())
        seen = _until(lambda: _rows(url, token)["total"] == total + 1, NOTICE_S)
        res.check(
            seen is not None, "a session started meanwhile reaches the Hub's rows", f"not within {NOTICE_S:.0f} s"
        )
        res.fig("a new session to its row", "-" if seen is None else f"{seen * 1e3:.0f} ms")
        mark = subprocess.run(
            c3async_cmd("mark", "stale", sid, "--reason", "idle check", "--project", projects[0].path),
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        res.check(mark.returncode == 0, "the mark is written", mark.stderr[-300:])
        marked = _until(lambda: _rows(url, token, filter="stale")["total"] == 1, NOTICE_S)
        res.check(marked is not None, "a mark from the CLI reaches the Hub's rows", f"not within {NOTICE_S:.0f} s")
        res.fig("a mark to its row", "-" if marked is None else f"{marked * 1e3:.0f} ms")
        res.check(hub.poll() is None, "the Hub is still up")
    finally:
        hub.terminate()
        try:
            hub.wait(10)
        except subprocess.TimeoutExpired:
            hub.kill()
            hub.wait()
        if hub.stderr is not None:
            err = hub.stderr.read()
            hub.stderr.close()
            res.check("Traceback" not in err, "no traceback from the Hub", err[-500:])
