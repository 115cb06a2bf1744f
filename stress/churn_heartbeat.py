"""Heartbeat churn: ``c3async serve`` processes (heartbeat every 0.5 s, TTL 2 s), each with its
own ``CLAUDE_CODE_SESSION_ID``, started and stopped at random: cleanly (stdin closed, SIGTERM,
SIGINT) or with SIGKILL, while a reader thread here polls ``live_sessions(project)`` every 50 ms.

Invariants, judged on the monotonic clock (the heartbeat's own clock):
- a cleanly stopped server is never reported live by a poll that began after its process exited;
- a killed server reads dead within TTL + one interval (+ 0.3 s of poll slack) of the kill;
- a running server (from its first heartbeat file until its stop began) is never reported dead.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from c3async.ground.project import resolve

from .harness import PY, Result, Sandbox, kill_all, ms, pct

INTERVAL = 0.5
TTL = 2.0
SLACK = 0.3
POLL = 0.05


@dataclass
class Server:
    host: str
    method: str  # eof | term | int | kill
    start_at: float
    lifetime: float
    proc: subprocess.Popen | None = None
    t_spawn: float = 0.0
    t_first: float | None = None  # first heartbeat file seen (watcher)
    hb_path: Path | None = None
    t_stop: float | None = None  # the stop began (just before the signal / stdin close)
    t_gone: float | None = None  # heartbeat file gone after a clean stop
    t_exit: float | None = None  # wait() returned
    rc: int | None = None
    error: str | None = None


class Churn:
    def __init__(self, sb: Sandbox, project: Path, quick: bool, seed: int) -> None:
        self.sb, self.project, self.rng = sb, project, random.Random(seed)
        n = 6 if quick else 24
        spacing = 0.9 if quick else 1.2
        kinds = ["eof", "term", "int", "kill"] * (n // 4 + 1)
        kinds = kinds[:n]
        self.rng.shuffle(kinds)
        self.servers = [
            Server(
                f"{seed:05d}-churn-4000-8000-{i:012d}",
                kinds[i],
                i * spacing + self.rng.uniform(0, spacing / 2),
                self.rng.uniform(2.5, 5.0),
            )
            for i in range(n)
        ]
        self.live_dir = project / ".c3" / "live"
        self.polls: list[tuple[float, float, frozenset]] = []
        self.stop_reader = threading.Event()
        self.stop_watcher = threading.Event()
        self.lock = threading.Lock()

    # -------------------------------------------------------------- threads

    def reader(self) -> None:
        from c3async.live.reader import live_sessions

        project = str(self.project)
        while not self.stop_reader.is_set():
            t0 = time.monotonic()
            try:
                live = live_sessions(resolve(project))
                seen = frozenset(h for h, e in live.items() if e.live)
            except Exception as exc:  # a reader must never fail
                seen = frozenset({f"!error {exc!r}"})
            t1 = time.monotonic()
            self.polls.append((t0, t1, seen))
            time.sleep(max(0.0, POLL - (t1 - t0)))

    def watcher(self) -> None:
        """When each server's heartbeat file first appears (read raw, never pruned)."""
        by_host = {s.host: s for s in self.servers}
        while not self.stop_watcher.is_set():
            try:
                names = os.listdir(self.live_dir)
            except OSError:
                names = []
            now = time.monotonic()
            for name in names:
                if name.startswith(".") or not name.endswith(".json"):
                    continue
                try:
                    hb = json.loads((self.live_dir / name).read_bytes())
                except (OSError, ValueError):
                    continue
                s = by_host.get(hb.get("host_session_id"))
                if s is not None and s.t_first is None:
                    s.hb_path = self.live_dir / name
                    s.t_first = now
            time.sleep(0.01)

    def lifecycle(self, s: Server, t_zero: float) -> None:
        time.sleep(max(0.0, t_zero + s.start_at - time.monotonic()))
        env = self.sb.env(
            self.project,
            CLAUDE_CODE_SESSION_ID=s.host,
            C3_HEARTBEAT_INTERVAL_S=str(INTERVAL),
            C3_HEARTBEAT_TTL_S=str(TTL),
        )
        s.t_spawn = time.monotonic()
        s.proc = subprocess.Popen(
            [PY, "-m", "c3async", "serve"],
            env=env,
            cwd=self.project,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=self.sb.log(f"churn-{s.host[-4:]}.log"),
        )
        deadline = time.monotonic() + 60
        while s.t_first is None:
            if s.proc.poll() is not None or time.monotonic() > deadline:
                s.error = f"no heartbeat file (exit {s.proc.poll()})"
                s.proc.kill()
                s.proc.wait()
                return
            time.sleep(0.01)
        time.sleep(max(0.0, s.t_first + s.lifetime - time.monotonic()))
        s.t_stop = time.monotonic()
        if s.method == "eof":
            s.proc.stdin.close()
        elif s.method == "term":
            s.proc.send_signal(signal.SIGTERM)
        elif s.method == "int":
            s.proc.send_signal(signal.SIGINT)
        else:
            s.proc.send_signal(signal.SIGKILL)
            s.t_stop = time.monotonic()  # the kill is done: age counts from here
        # watch the file and the process together (2 ms), so each time is its own
        limit = time.monotonic() + 15
        while True:
            now = time.monotonic()
            if s.method != "kill" and s.t_gone is None and not s.hb_path.exists():
                s.t_gone = now
            if s.t_exit is None and s.proc.poll() is not None:
                s.t_exit, s.rc = now, s.proc.returncode
            if s.t_exit is not None and (s.method == "kill" or s.t_gone is not None or now > s.t_exit + 5):
                break
            if now > limit:
                s.error = "did not exit within 15 s of a clean stop"
                s.proc.kill()
                s.rc = s.proc.wait()
                s.t_exit = time.monotonic()
                break
            time.sleep(0.002)
        if s.proc.stdin and not s.proc.stdin.closed:
            s.proc.stdin.close()

    def run(self) -> float:
        threads = [
            threading.Thread(target=self.reader, daemon=True),
            threading.Thread(target=self.watcher, daemon=True),
        ]
        for t in threads:
            t.start()
        t_zero = time.monotonic()
        life = [threading.Thread(target=self.lifecycle, args=(s, t_zero), daemon=True) for s in self.servers]
        for t in life:
            t.start()
        for t in life:
            t.join(timeout=180)
        time.sleep(TTL + INTERVAL + SLACK + 0.5)  # let the killed ones read dead
        self.stop_reader.set()
        self.stop_watcher.set()
        for t in threads:
            t.join(timeout=30)
        return time.monotonic() - t_zero


def run(sb: Sandbox, quick: bool, seed: int) -> Result:
    res = Result("heartbeat churn")
    project = sb.work / "heartbeat-churn"
    project.mkdir()
    saved = {k: os.environ.get(k) for k in ("C3_HEARTBEAT_INTERVAL_S", "C3_HEARTBEAT_TTL_S")}
    os.environ.update(C3_HEARTBEAT_INTERVAL_S=str(INTERVAL), C3_HEARTBEAT_TTL_S=str(TTL))
    ch = Churn(sb, project, quick, seed)
    try:
        wall = ch.run()
    finally:
        kill_all([s.proc for s in ch.servers if s.proc is not None])
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    polls = ch.polls
    errors = [f"{s.host[-4:]} ({s.method}): {s.error}" for s in ch.servers if s.error]
    reader_errors = [p for p in polls if any(h and h.startswith("!error") for h in p[2] if isinstance(h, str))]
    stale_live, late_dead, running_dead, not_removed, bad_rc = [], [], [], [], []
    ttd, gone, exits = [], [], []
    bound = TTL + INTERVAL + SLACK
    for s in ch.servers:
        if s.t_first is None or s.t_stop is None or s.t_exit is None:
            continue
        # running: from the first heartbeat file until the stop began, always live
        for t0, t1, seen in polls:
            if t0 >= s.t_first and t1 <= s.t_stop and s.host not in seen:
                running_dead.append(f"{s.host[-4:]} at +{t0 - s.t_first:.2f} s after its first heartbeat")
                break
        if s.method == "kill":
            after = [(t0, t1, s.host in seen) for t0, t1, seen in polls if t1 > s.t_stop]
            last_live = max((t1 for t0, t1, live in after if live), default=None)
            first_dead = next(
                (t1 for t0, t1, live in after if not live and (last_live is None or t0 > last_live)), None
            )
            if first_dead is not None:
                ttd.append(first_dead - s.t_stop)
            for t0, _t1, live in after:
                if live and t0 > s.t_stop + bound:
                    late_dead.append(f"{s.host[-4:]} still live {t0 - s.t_stop:.2f} s after SIGKILL")
                    break
        else:
            if s.t_gone is None or s.t_gone > s.t_exit:
                not_removed.append(
                    f"{s.host[-4:]} ({s.method}): "
                    + ("file still there" if s.t_gone is None else f"gone {s.t_gone - s.t_exit:.2f} s after exit")
                )
            else:
                gone.append(s.t_gone - s.t_stop)
            exits.append(s.t_exit - s.t_stop)
            if s.rc != 0:
                bad_rc.append(f"{s.host[-4:]} ({s.method}) exit {s.rc}")
            for t0, _t1, seen in polls:
                if t0 > s.t_exit and s.host in seen:
                    stale_live.append(f"{s.host[-4:]} ({s.method}) live {t0 - s.t_exit:.2f} s after exit")
                    break

    kinds = {k: sum(1 for s in ch.servers if s.method == k) for k in ("eof", "term", "int", "kill")}
    first = [s.t_first - s.t_spawn for s in ch.servers if s.t_first is not None]
    res.fig(
        "servers started",
        f"{len(ch.servers)}  (interval {INTERVAL} s, TTL {TTL} s; spawn to first "
        f"heartbeat p50 {ms(pct(first, 50))}, max {ms(max(first, default=0))})",
    )
    res.fig(
        "clean stops",
        f"{len(ch.servers) - kinds['kill']}  (stdin EOF {kinds['eof']}, SIGTERM {kinds['term']}, "
        f"SIGINT {kinds['int']})",
    )
    res.fig("kills (SIGKILL)", kinds["kill"])
    res.fig(
        "reader polls",
        f"{len(polls)}  (every {POLL * 1e3:.0f} ms over {wall:.1f} s; poll time p50 "
        f"{ms(pct([p[1] - p[0] for p in polls], 50))}, max {ms(max((p[1] - p[0] for p in polls), default=0))})",
    )
    res.fig(
        "time to dead after SIGKILL",
        f"max {max(ttd, default=0):.2f} s  min {min(ttd, default=0):.2f} s  "
        f"(bound TTL + interval + slack = {bound:.1f} s)",
    )
    res.fig("signal to heartbeat file gone", f"max {ms(max(gone, default=0))}  p50 {ms(pct(gone, 50))}  (clean stops)")
    res.fig("signal to process exit", f"max {ms(max(exits, default=0))}  p50 {ms(pct(exits, 50))}  (clean stops)")

    res.check(not errors, "every server starts and stops as told", "; ".join(errors[:3]))
    res.check(not reader_errors, "live_sessions never fails", f"{len(reader_errors)} polls failed")
    res.check(
        not stale_live,
        "a cleanly stopped server is never reported live once its process has exited",
        "; ".join(stale_live[:3]),
    )
    res.check(not late_dead, "a killed server reads dead within TTL + one interval", "; ".join(late_dead[:3]))
    res.check(not running_dead, "a running server is never reported dead", "; ".join(running_dead[:3]))
    res.check(
        not not_removed, "a clean stop removes the heartbeat file before the process exits", "; ".join(not_removed[:3])
    )
    res.check(not bad_rc, "a clean stop exits with status 0", "; ".join(bad_rc[:3]))
    return res
