"""A keystroke stops it: one or two Ctrl-C in a real pseudo-terminal, and SIGINT or SIGTERM
from a script, to the commands that do a big first pass with worker processes (a cold
``sessions``, ``stats``, ``index`` and ``search``), at several moments of their work.

Each run is a real ``c3async`` process on a generated corpus; its worker processes are read
from the process tree just before the signal. Invariants: the command ends within a second
(``LIMIT_S``), with no traceback, and none of its workers is left; afterwards ``c3async index``
carries on and the index passes SQLite's integrity check and finds what the corpus holds.
Figures: the exit times (median and slowest) per way of stopping.
"""

from __future__ import annotations

import os
import pty
import select
import shutil
import signal
import sqlite3
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .harness import PY, REPO, Result

CLASS = "Ctrl-C and SIGTERM"

LIMIT_S = 1.0
WAIT_S = 15.0  # a hang guard: a run still there after this is killed and counted as a hang


@dataclass
class Stop:
    command: str
    how: str  # "ctrl-c", "ctrl-c twice", "SIGINT", "SIGTERM"
    delay: float
    seconds: float | None  # None: it did not end within WAIT_S
    status: int | None
    traceback: bool
    workers: int  # worker processes it had when the signal came
    left: list[int]  # of those, the ones still running after it ended
    output: bytes


def _children(pid: int) -> list[int]:
    import psutil

    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def handles_sigterm(pid: int) -> bool:
    """Whether ``pid`` catches SIGTERM: Python leaves it at the default, so it does once
    ``c3async/__main__.py``'s first statement has run (the ready handshake of a stop: before
    that, the interpreter's own start-up, a signal is Python's and no command has begun)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            caught = next((line.split()[1] for line in f if line.startswith("SigCgt:")), "0")
    except OSError:
        return True  # gone already (or no /proc): nothing to wait for
    return bool(int(caught, 16) >> (signal.SIGTERM - 1) & 1)


def stop(
    args: list[str], env: dict[str, str], delay: float, how: str, cwd: str | None = None, workers: bool = False
) -> Stop:
    """Run ``c3async ARGS`` in a pseudo-terminal, stop it ``delay`` seconds in, ``how``;
    ``workers``: then, at the moment it first has worker processes (if it gets any in 5 s).
    Never before its own start-up has begun (``handles_sigterm``), however loaded the machine."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session of its own with the pty as its terminal
        try:
            if cwd:
                os.chdir(cwd)
            os.execve(PY, [PY, "-m", "c3async", *args], env)
        finally:
            os._exit(127)
    out = bytearray()

    def drain(until: float) -> None:
        while time.monotonic() < until:
            ready, _, _ = select.select([fd], [], [], 0.01)
            if ready:
                try:
                    out.extend(os.read(fd, 65536))
                except OSError:
                    return

    drain(time.monotonic() + delay)
    while not handles_sigterm(pid) and os.waitpid(pid, os.WNOHANG) == (0, 0):
        drain(time.monotonic() + 0.002)
    kids = _children(pid)
    until = time.monotonic() + 5.0
    while workers and not kids and time.monotonic() < until and os.waitpid(pid, os.WNOHANG) == (0, 0):
        drain(time.monotonic() + 0.002)
        kids = _children(pid)
    sent = time.monotonic()
    if how.startswith("ctrl-c"):
        os.write(fd, b"\x03")  # the terminal sends SIGINT to the foreground process group
        if how == "ctrl-c twice":
            time.sleep(0.05)
            os.write(fd, b"\x03")
    else:
        os.kill(pid, signal.SIGINT if how == "SIGINT" else signal.SIGTERM)
    status = seconds = None
    while time.monotonic() - sent < WAIT_S:
        drain(time.monotonic() + 0.01)
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            seconds, status = time.monotonic() - sent, st
            break
    if status is None:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    drain(time.monotonic() + 0.05)
    os.close(fd)
    deadline = time.monotonic() + 1.0  # a killed worker is reaped by init in a moment
    while time.monotonic() < deadline and any(_alive(k) for k in kids):
        time.sleep(0.02)
    left = [k for k in kids if _alive(k)]
    for k in left:
        try:
            os.kill(k, signal.SIGKILL)
        except OSError:
            pass
    return Stop(" ".join(args), how, delay, seconds, status, b"Traceback" in out, len(kids), left, bytes(out))


def duration(args: list[str], env: dict[str, str]) -> tuple[float, tuple[float, float] | None]:
    """How long the command takes when let run (its caches cold, by the caller), and when in
    that run it had worker processes (first and last moment seen; None: it never had any)."""
    t0 = time.monotonic()
    proc = subprocess.Popen([PY, "-m", "c3async", *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen: list[float] = []
    while proc.poll() is None:
        if _children(proc.pid):
            seen.append(time.monotonic() - t0)
        time.sleep(0.005)
    return time.monotonic() - t0, (seen[0], seen[-1]) if seen else None


def moments(
    args: list[str], env: dict[str, str], c3home: Path, projects: list[str], fractions: list[float]
) -> list[float]:
    """When to stop the command: these fractions of the part of its cold run that has worker
    processes (of the whole run where it has none), so a stop lands while they run whatever the
    machine's speed (``stop`` waits for the command's start-up in any case)."""
    cold(c3home, projects)
    whole, workers = duration(args, env)
    start, length = (workers[0], workers[1] - workers[0]) if workers else (0.0, whole)
    return [start + length * f for f in fractions]


def make_corpus(root: Path, transcripts: int) -> tuple[Path, Path, list[str]]:
    """A generated corpus (``stress.corpus``): (its config dir, its C3_HOME, its projects)."""
    subprocess.run(
        [PY, "-m", "stress.corpus", str(root), "--transcripts", str(transcripts), "--projects", "2", "--no-big"],
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=300,
    )
    projects = sorted(str(p) for p in (root / "work").iterdir())
    return root / "config", root / "c3home", projects


def cold(c3home: Path, projects: list[str]) -> None:
    """Every cache and index gone: the next command does its whole first pass again."""
    shutil.rmtree(c3home, ignore_errors=True)
    for p in projects:
        shutil.rmtree(Path(p, ".c3"), ignore_errors=True)


def index_is_sound(env: dict[str, str], c3home: Path) -> str | None:
    """None when, after interruptions, ``c3async index`` finishes and every shard passes
    SQLite's integrity check; else what is wrong."""
    proc = subprocess.run(
        [PY, "-m", "c3async", "index", "--json"], env=env, capture_output=True, text=True, timeout=300
    )
    if proc.returncode != 0:
        return f"index after the interruptions: rc {proc.returncode}: {proc.stderr[-300:]}"
    for db in sorted((c3home / "search").glob("index-*.db")):
        conn = sqlite3.connect(db)
        try:
            check = conn.execute("PRAGMA integrity_check").fetchone()[0]
        finally:
            conn.close()
        if check != "ok":
            return f"{db.name}: {check}"
    return None


def check(res: Result, sb, quick: bool) -> None:
    config, c3home, projects = make_corpus(sb.root / "interrupt", 320 if quick else 600)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "C3_"))}
    env.update(CLAUDE_CONFIG_DIR=str(config), C3_HOME=str(c3home), PYTHONPATH=str(REPO))
    commands = [
        ["sessions", "--project", projects[0]],
        ["stats", "--project", projects[0]],
        ["index"],
        ["search", "retry", "--all"],
    ]
    hows = ["ctrl-c", "ctrl-c twice", "SIGINT", "SIGTERM"]
    fractions = [0.4, 0.75] if quick else [0.2, 0.4, 0.6, 0.8, 0.95]
    stops: list[Stop] = []
    for args in commands:
        delays = moments(args, env, c3home, projects, fractions)
        for how in hows:
            for delay in delays:
                cold(c3home, projects)
                s = stop(args, env, delay, how)
                stops.append(s)
                what = f"{s.command} ({how} at {delay:.2f} s)"
                res.check(
                    s.seconds is not None, "a stopped command ends", f"{what}: still running after {WAIT_S:.0f} s"
                )
                if s.seconds is not None:
                    res.check(
                        s.seconds <= LIMIT_S, "a stopped command ends within a second", f"{what}: {s.seconds:.2f} s"
                    )
                res.check(
                    not s.traceback,
                    "a stopped command prints no traceback",
                    f"{what}: {s.output[-300:].decode('utf-8', 'replace')!r}",
                )
                res.check(not s.left, "no worker outlives a stopped command", f"{what}: {s.left} of {s.workers}")
        if args[0] == "index":
            problem = index_is_sound(env, c3home)
            res.check(problem is None, "after interruptions the index carries on and is consistent", problem or "")
    for how in hows:
        times = [s.seconds for s in stops if s.how == how and s.seconds is not None]
        if times:
            res.fig(
                f"exit after {how}",
                f"median {statistics.median(times) * 1e3:.0f} ms, slowest "
                f"{max(times) * 1e3:.0f} ms ({len(times)} runs)",
            )
    with_workers = sum(1 for s in stops if s.workers)
    res.fig("runs stopped while worker processes ran", f"{with_workers} of {len(stops)}")
