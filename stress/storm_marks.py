"""Marks storm: N real ``c3async serve`` processes on one project, driven over stdio by
``mcp.Client`` sessions, each calling ``c3_session`` stale/unstale/note in a tight loop, while
``c3async mark`` processes, the Hub's API and raw ``jsonl.append`` writer processes write marks too.

Every call carries a unique tag (the reason of a stale/unstale, the summary of a note). A mark is
acknowledged when its call returned without error. Then, read back independently:

- every acknowledged mark is in ``.c3/session_marks.jsonl`` exactly once, as it was sent;
- no torn or glued line (every line parses as one JSON object; the file ends in a newline);
- ``MarkBook(project).refresh()`` equals a last-wins fold by time written here;
- every mark has its ``session_mark`` activity row (same multiset of (session, op, by,
  by_session); per sequential writer, the same order), and every tool call its ``tool_call`` row.
"""

from __future__ import annotations

import bisect
import http.client
import json
import random
import re
import statistics
import subprocess
import threading
import time
from collections import Counter
from contextlib import AsyncExitStack
from pathlib import Path

import anyio

from c3async.ground.project import resolve

from .harness import (
    PY,
    Project,
    Result,
    Sandbox,
    c3async_cmd,
    check_activity,
    compare_fold,
    heartbeat_pids,
    kill_all,
    lat,
    make_project,
    mark_tag,
    ms,
    pct,
    per_writer_order,
    read_raw,
    register,
    rss_of,
)

RAW_WRITER = r"""
import os, sys, time, random
from c3async.ground import jsonl
from c3async.stores import activity
from c3async.ground.project import resolve
from c3async.stores.marks import Mark, marks_path
project, wid, n, go, seed = resolve(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
ids = sys.argv[6].split(",")
ack = os.open(sys.argv[7], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
rng = random.Random(seed)
path = marks_path(project)
while time.time() < go:
    time.sleep(0.002)
for k in range(n):
    sid = rng.choice(ids)
    op = rng.choice(("stale", "unstale", "note"))
    tag = f"{wid}-{k:05d}"
    if op == "note":
        m = Mark(ts=round(time.time(), 6), id=sid, op=op, summary=tag, next_steps="next " + tag,
                 by="agent", by_session=wid)
    else:
        m = Mark(ts=round(time.time(), 6), id=sid, op=op, reason=tag, by="agent", by_session=wid)
    t0 = time.perf_counter()
    jsonl.append(path, m)
    dt = time.perf_counter() - t0
    activity.record(project, "session_mark", target=sid, op=op, by="agent", by_session=wid,
                    reason=m.reason)
    os.write(ack, f"{tag} {op} {sid} {dt:.6f}\n".encode())
"""


class Storm:
    def __init__(self, sb: Sandbox, project: Project, quick: bool, seed: int) -> None:
        self.sb, self.project, self.quick, self.seed = sb, project, quick, seed
        self.servers = 8 if quick else 64
        self.calls = 25 if quick else 60
        self.start_parallel = 4 if quick else 6
        self.raw_writers, self.raw_n = (2, 150) if quick else (4, 400)
        self.cli_lanes, self.cli_n = (2, 4) if quick else (3, 10)
        self.hub_lanes, self.hub_n = (2, 20) if quick else (4, 60)
        self.acks: list[dict] = []  # {tag, src, op, id, by, by_session, successor}
        self.errors: list[str] = []
        self.tool_lat: list[float] = []
        self.hub_lat: list[float] = []
        self.cli_lat: list[float] = []
        self.raw_lat: list[float] = []
        self.startup: list[float] = []
        self.calls_by_host: Counter[str] = Counter()
        self.hosts: list[str] = []
        self.peak_rss = 0
        self.server_pids: set[int] = set()
        self.procs: list[subprocess.Popen] = []
        self.lock = threading.Lock()
        self.go = 0.0

    # ---------------------------------------------------------------- the Hub

    def start_hub(self) -> tuple[subprocess.Popen, int, str]:
        """``c3async hub --port 0``; its URL and token from the line it prints on stderr
        (``http://127.0.0.1:PORT/?token=T``). Tried three times: a Hub that dies before it listens
        is retried (its exit status is reported)."""
        problems = []
        for attempt in range(3):
            try:
                return self._start_hub(attempt)
            except RuntimeError as exc:
                problems.append(str(exc))
        raise RuntimeError("; ".join(problems))

    def _start_hub(self, attempt: int) -> tuple[subprocess.Popen, int, str]:
        log = self.sb.logs / f"hub-{attempt}.log"
        proc = subprocess.Popen(
            c3async_cmd("hub", "--port", "0"),
            env=self.sb.env(self.project.path),
            cwd=self.project.path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.sb.log(log.name),
        )
        self.procs.append(proc)
        deadline = time.monotonic() + 60
        port = token = None
        while port is None:
            m = re.search(rb"c3async Hub on http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]+)", log.read_bytes())
            if m:
                port, token = int(m.group(1)), m.group(2).decode()
            elif proc.poll() is not None or time.monotonic() > deadline:
                rc = proc.poll()
                if rc is None:
                    proc.kill()
                raise RuntimeError(f"the Hub did not start (exit status {rc}): {log.read_bytes()[-500:]!r}")
            else:
                time.sleep(0.05)
        while True:  # the line is printed just before uvicorn listens
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                conn.request("GET", "/api/projects", headers={"Authorization": f"Bearer {token}"})
                resp = conn.getresponse()
                resp.read()
                conn.close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        if resp.status != 200:
            raise RuntimeError(f"the Hub refused its own token: HTTP {resp.status}")
        return proc, port, token

    def hub_lane(self, lane: int, port: int, token: str) -> None:
        rng = random.Random(self.seed * 1000 + 500 + lane)
        ids = self.project.ids
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self._sleep_until_go()
        for k in range(self.hub_n):
            sid = rng.choice(ids)
            op = rng.choice(("stale", "unstale", "note"))
            tag = f"hub{lane}-{k:04d}"
            body: dict = {"op": op, "project": self.project.path}
            if op == "note":
                body.update(summary=tag, next_steps="next " + tag)
            else:
                body["reason"] = tag
            t0 = time.perf_counter()
            try:
                conn.request(
                    "POST",
                    f"/api/sessions/{sid}/marks",
                    body=json.dumps(body),
                    headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
                )
                resp = conn.getresponse()
                data = resp.read()
            except (OSError, http.client.HTTPException) as exc:
                self._error(f"hub lane {lane} call {k}: {exc!r}")
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                continue
            dt = time.perf_counter() - t0
            if resp.status != 201:
                self._error(f"hub lane {lane} call {k}: HTTP {resp.status} {data[:200]!r}")
                continue
            self._ack(
                dict(tag=tag, src="hub", op=op, id=sid, by="user", by_session=None, successor=None), self.hub_lat, dt
            )
        conn.close()

    # ---------------------------------------------------------------- the CLI

    def cli_lane(self, lane: int) -> None:
        rng = random.Random(self.seed * 1000 + 700 + lane)
        ids = self.project.ids
        who = f"cli-lane-{lane}"
        env = self.sb.env(self.project.path, CLAUDE_CODE_SESSION_ID=who)
        self._sleep_until_go()
        for k in range(self.cli_n):
            sid = rng.choice(ids)
            op = rng.choice(("stale", "unstale", "note"))
            tag = f"cli{lane}-{k:04d}"
            ref = sid if k % 2 else sid[:8]  # a unique prefix works too
            args = ["mark", op, ref, "--project", self.project.path, "--json"]
            args += ["--summary", tag, "--next", "next " + tag] if op == "note" else ["--reason", tag]
            t0 = time.perf_counter()
            out = subprocess.run(c3async_cmd(*args), env=env, cwd=self.project.path, capture_output=True, timeout=120)
            dt = time.perf_counter() - t0
            if out.returncode != 0:
                self._error(f"cli lane {lane} call {k}: rc {out.returncode}: {out.stderr[-300:]!r}")
                continue
            self._ack(
                dict(tag=tag, src="cli", op=op, id=sid, by="user", by_session=who, successor=None), self.cli_lat, dt
            )

    # ---------------------------------------------------------------- raw jsonl.append writers

    def spawn_raw(self) -> list[tuple[subprocess.Popen, Path, str]]:
        out = []
        for w in range(self.raw_writers):
            wid = f"raw{w}"
            ack = self.sb.logs / f"marks-ack-{wid}.txt"
            p = subprocess.Popen(
                [
                    PY,
                    "-c",
                    RAW_WRITER,
                    self.project.path,
                    wid,
                    str(self.raw_n),
                    repr(self.go),
                    str(self.seed * 1000 + w),
                    ",".join(self.project.ids),
                    str(ack),
                ],
                env=self.sb.env(self.project.path),
                cwd=self.project.path,
                stdout=subprocess.DEVNULL,
                stderr=self.sb.log(f"{wid}.log"),
            )
            self.procs.append(p)
            out.append((p, ack, wid))
        return out

    def collect_raw(self, raw: list[tuple[subprocess.Popen, Path, str]]) -> None:
        for p, ack, wid in raw:
            rc = p.wait(timeout=600)
            if rc != 0:
                self._error(f"raw writer {wid} exited {rc}")
            try:
                lines = ack.read_text().splitlines()
            except FileNotFoundError:
                lines = []
            for line in lines:
                tag, op, sid, dt = line.split()
                self._ack(
                    dict(tag=tag, src="raw", op=op, id=sid, by="agent", by_session=wid, successor=None),
                    self.raw_lat,
                    float(dt),
                )

    # ---------------------------------------------------------------- MCP servers

    async def server(self, i: int, sem: anyio.Semaphore, ready: list, go: anyio.Event) -> None:
        from mcp import Client, StdioServerParameters, stdio_client

        rng = random.Random(self.seed * 1000 + i)
        host = self.hosts[i]
        ids = self.project.ids
        params = StdioServerParameters(
            command=PY,
            args=["-m", "c3async", "serve"],
            env=self.sb.env(self.project.path, CLAUDE_CODE_SESSION_ID=host),
            cwd=self.project.path,
        )
        errlog = open(self.sb.logs / f"serve-{i:02d}.log", "w")
        try:
            async with AsyncExitStack() as stack:
                async with sem:
                    t0 = time.perf_counter()
                    try:
                        # no fail_after around entering: the client's own cancel scopes must
                        # close in order; its read timeout bounds the handshake instead
                        c = await stack.enter_async_context(
                            Client(stdio_client(params, errlog=errlog), mode="legacy", read_timeout_seconds=180)
                        )
                        await c.list_tools()
                    except Exception as exc:
                        self._error(f"server {i} did not start: {exc!r}")
                        ready.append(False)
                        return
                    self.startup.append(time.perf_counter() - t0)
                ready.append(True)
                await go.wait()
                for k in range(self.calls):
                    sid = rng.choice(ids)
                    ref = sid if rng.random() < 0.8 else sid[:8]
                    op = rng.choices(("stale", "unstale", "note"), (4, 2.5, 3.5))[0]
                    tag = f"mcp{i:02d}-{k:04d}"
                    successor = None
                    if op == "stale":
                        args = {"action": "stale", "target": ref, "reasoning": tag}
                        if rng.random() < 0.3:
                            successor = rng.choice([x for x in ids if x != sid])
                            args["data"] = successor
                    elif op == "unstale":
                        args = {"action": "unstale", "target": ref, "reasoning": tag}
                    else:
                        args = {"action": "note", "target": ref, "data": tag, "reasoning": "next " + tag}
                    self.calls_by_host[host] += 1
                    t0 = time.perf_counter()
                    try:
                        with anyio.fail_after(120):
                            r = await c.call_tool("c3_session", args)
                    except Exception as exc:
                        self._error(f"server {i} call {k} ({op}): {exc!r}")
                        continue
                    dt = time.perf_counter() - t0
                    if r.is_error:
                        self._error(f"server {i} call {k} ({op}): {r.content[0].text[:300]}")
                        continue
                    self._ack(
                        dict(tag=tag, src="mcp", op=op, id=sid, by="agent", by_session=host, successor=successor),
                        self.tool_lat,
                        dt,
                    )
        finally:
            errlog.close()

    async def sample_rss(self, stop: anyio.Event) -> None:
        while not stop.is_set():
            pids = heartbeat_pids(self.project)
            self.server_pids |= set(pids)
            sizes = await anyio.to_thread.run_sync(rss_of, list(pids))
            if sizes:
                self.peak_rss = max(self.peak_rss, max(sizes.values()))
            with anyio.move_on_after(0.5):
                await stop.wait()

    async def run_async(self, port: int, token: str) -> float:
        sem = anyio.Semaphore(self.start_parallel)
        ready: list[bool] = []
        go = anyio.Event()
        stop_sampler = anyio.Event()
        storm_wall = 0.0
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.sample_rss, stop_sampler)
            async with anyio.create_task_group() as servers:
                for i in range(self.servers):
                    servers.start_soon(self.server, i, sem, ready, go)
                while len(ready) < self.servers:
                    await anyio.sleep(0.05)
                self.go = time.time() + 1.0
                raw = self.spawn_raw()
                threads = [
                    threading.Thread(target=self.cli_lane, args=(j,), daemon=True) for j in range(self.cli_lanes)
                ]
                threads += [
                    threading.Thread(target=self.hub_lane, args=(j, port, token), daemon=True)
                    for j in range(self.hub_lanes)
                ]
                for t in threads:
                    t.start()
                await anyio.sleep(max(0.0, self.go - time.time()))
                t_go = time.perf_counter()
                go.set()
                for t in threads:
                    await anyio.to_thread.run_sync(t.join)
                await anyio.to_thread.run_sync(self.collect_raw, raw)
                # the servers' loops end on their own; their clients close stdin on exit
            storm_wall = time.perf_counter() - t_go
            stop_sampler.set()
        return storm_wall

    # ---------------------------------------------------------------- helpers

    def _sleep_until_go(self) -> None:
        time.sleep(max(0.0, self.go - time.time()))

    def _ack(self, ack: dict, lat_list: list[float], dt: float) -> None:
        if "t1" not in ack and ack["src"] != "raw":  # measured here: the call's interval
            ack["t1"] = time.perf_counter()
            ack["t0"] = ack["t1"] - dt
        with self.lock:
            self.acks.append(ack)
            lat_list.append(dt)

    def _error(self, text: str) -> None:
        with self.lock:
            self.errors.append(text)


def run(sb: Sandbox, quick: bool, seed: int) -> Result:
    res = Result("marks storm")
    rng = random.Random(seed)
    project = make_project(sb, "marks-storm", 20, rng)
    register(sb, project)
    st = Storm(sb, project, quick, seed)
    st.hosts = [f"{rng.getrandbits(32):08x}-host-4000-8000-{i:012d}" for i in range(st.servers)]
    hub = None
    try:
        hub, port, token = st.start_hub()
        storm_wall = anyio.run(st.run_async, port, token)
    finally:
        if hub is not None:
            hub.terminate()
            try:
                hub.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        kill_all(st.procs)
    verify(res, st, project, storm_wall)
    return res


def verify(res: Result, st: Storm, project: Project, storm_wall: float) -> None:
    from c3async.stores.marks import MarkBook

    raw = read_raw(project.marks)
    acts = read_raw(project.activity)
    ops = st.servers * st.calls + st.raw_writers * st.raw_n + st.cli_lanes * st.cli_n + st.hub_lanes * st.hub_n
    by_src = Counter(a["src"] for a in st.acks)

    tags = Counter(mark_tag(r) for r in raw.records)
    by_tag = {mark_tag(r): r for r in raw.records}
    lost = [a for a in st.acks if tags[a["tag"]] == 0]
    doubled = [a for a in st.acks if tags[a["tag"]] > 1]
    wrong = []
    for a in st.acks:
        r = by_tag.get(a["tag"])
        if r is None:
            continue
        got = (r["id"], r["op"], r["by"], r.get("by_session"), r.get("successor"))
        want = (a["id"], a["op"], a["by"], a["by_session"], a["successor"])
        if got != want:
            wrong.append(f"{a['tag']}: file {got}, sent {want}")
    acked_tags = {a["tag"] for a in st.acks}
    # real-time order: a mark whose call returned before another's call began precedes it
    pos = {mark_tag(r): i for i, r in enumerate(raw.records)}
    timed = sorted((a for a in st.acks if "t1" in a and a["tag"] in pos), key=lambda a: a["t1"])
    ends = [a["t1"] for a in timed]
    prefix_max, best = [], -1
    for a in timed:
        best = max(best, pos[a["tag"]])
        prefix_max.append(best)
    order_bad = []
    for b in timed:
        k = bisect.bisect_left(ends, b["t0"])
        if k and prefix_max[k - 1] > pos[b["tag"]]:
            order_bad.append(b["tag"])
    unacked = [t for t in tags if t not in acked_tags]

    res.fig(
        "servers (c3async serve)",
        f"{st.servers}  (started {len(st.startup)}, "
        f"{st.start_parallel} at a time; start p50 {ms(pct(st.startup, 50))}, max {ms(max(st.startup, default=0))})",
    )
    res.fig(
        "writers besides",
        f"{st.raw_writers} raw jsonl.append procs, {st.cli_lanes} CLI lanes "
        f"(`c3async mark` processes), {st.hub_lanes} Hub API lanes",
    )
    res.fig(
        "operations",
        f"{ops}  (mcp {st.servers * st.calls}, raw {st.raw_writers * st.raw_n}, "
        f"cli {st.cli_lanes * st.cli_n}, hub {st.hub_lanes * st.hub_n})",
    )
    res.fig("acknowledged", f"{len(st.acks)}  ({', '.join(f'{k} {v}' for k, v in sorted(by_src.items()))})")
    res.fig("failed calls", len(st.errors))
    res.fig("lost (must be 0)", len(lost))
    res.fig("duplicated", len(doubled))
    res.fig("marks in the file", f"{len(raw.records)}  ({raw.size / 1e6:.2f} MB; unacknowledged {len(unacked)})")
    res.fig("torn/glued lines", len(raw.bad))
    res.fig("storm wall time", f"{storm_wall:.1f} s  ({len(st.acks) / max(storm_wall, 1e-9):.0f} acked marks/s)")
    res.fig("c3_session round trip", lat(st.tool_lat))
    res.fig("raw jsonl.append (marks)", lat(st.raw_lat))
    res.fig("Hub POST .../marks", lat(st.hub_lat))
    res.fig("`c3async mark` process", lat(st.cli_lat))

    res.check(not st.errors, "every well-formed mark call succeeds", f"{len(st.errors)} failed, e.g. {st.errors[:3]}")
    res.check(not lost, "every acknowledged mark is in the file", f"{len(lost)} lost, e.g. {lost[:3]}")
    res.check(
        not doubled,
        "every acknowledged mark is in the file exactly once",
        f"{len(doubled)} doubled, e.g. {doubled[:3]}",
    )
    res.check(not wrong, "every acknowledged mark is in the file as it was sent", "; ".join(wrong[:3]))
    res.check(
        not order_bad,
        "marks are in real-time order (a call that returned first is earlier in the file)",
        f"{len(order_bad)} out of order, e.g. {order_bad[:3]}",
    )
    res.check(
        not raw.bad and raw.ends_with_newline,
        "no torn or glued line in session_marks.jsonl",
        f"{len(raw.bad)} bad lines, e.g. {[b[1][:120] for b in raw.bad[:2]]}; "
        f"ends with newline: {raw.ends_with_newline}",
    )
    res.check(
        not acts.bad and acts.ends_with_newline,
        "no torn or glued line in activity.jsonl",
        f"{len(acts.bad)} bad lines, e.g. {[b[1][:120] for b in acts.bad[:2]]}",
    )

    # the fold
    book = MarkBook(resolve(project.path)).refresh()
    problems = compare_fold(book, raw.records)
    res.check(not problems, "the fold equals an independent last-wins fold by time", "; ".join(problems[:3]))
    res.check(
        book.skipped == len(raw.bad),
        "the fold skips exactly the bad lines",
        f"MarkBook skipped {book.skipped}, raw reader found {len(raw.bad)}",
    )
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        MarkBook(resolve(project.path)).refresh()
        times.append(time.perf_counter() - t0)
    res.fig("fold time of the result", f"{ms(statistics.median(times))}  ({len(raw.records)} marks)")

    # activity rows
    check_activity(res, raw.records, acts.records)
    writers = (
        set(st.hosts) | {f"raw{w}" for w in range(st.raw_writers)} | {f"cli-lane-{j}" for j in range(st.cli_lanes)}
    )
    bad_order = per_writer_order(raw.records, acts.records, writers)
    res.check(
        not bad_order,
        "each writer's session_mark rows follow its marks in order",
        f"{len(bad_order)} writers differ, e.g. {bad_order[:3]}",
    )
    reasons = Counter(a.get("reason") for a in acts.records if a.get("kind") == "session_mark")
    no_row = [a["tag"] for a in st.acks if a["op"] != "note" and reasons[a["tag"]] != 1]
    res.check(
        not no_row,
        "every acknowledged stale/unstale has exactly one activity row with its reason",
        f"{len(no_row)}, e.g. {no_row[:3]}",
    )
    tool_rows = Counter(
        a.get("session_id") for a in acts.records if a.get("kind") == "tool_call" and a.get("tool") == "c3_session"
    )
    short = {h: (tool_rows[h], n) for h, n in st.calls_by_host.items() if tool_rows[h] != n}
    res.check(
        not short,
        "every c3_session call has its tool_call activity row",
        f"(rows, calls) per server differ: {list(short.items())[:3]}",
    )
    res.fig(
        "activity rows",
        f"{len(acts.records)}  ({sum(1 for a in acts.records if a.get('kind') == 'session_mark')} session_mark)",
    )
    res.fig("peak RSS of a server", f"{st.peak_rss / 2**20:.1f} MB  (sampled on {len(st.server_pids)} server pids)")
