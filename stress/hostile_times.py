"""Times and numbers out of range, through every door: a transcript whose mtime is past 2262 (what
64-bit nanoseconds and SQLite's INTEGER hold) and one whose timestamps say the year 99999,
Claude Code's registry files with ``statusUpdatedAt`` -1, 1e30 and "x" for running processes, a
shared ``pm.json`` whose every time is 1e19, a mark, an activity row, a heartbeat and a stats row
from the year 300 billion, usage lines of -5 and 1e12 tokens and a cost of -5 USD, and misspelt
keys in ``prices.json`` and ``config.json``.

Each through the CLI (each command a process with a time limit), a real ``c3async serve`` over
stdio (``c3_session list``, ``c3_task``, ``c3_status``) and the Hub. Invariants: no traceback, exit
0, 1 or 2 (0 here: every bad value is skipped or clamped, never fatal); the project is listed
everywhere (the Hub's ``/api/rows`` used to drop it); each problem said once per process, naming
its file; costs never negative; a misspelt key named with the key it most likely means.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

from c3async.live.running import proc_start_ticks

from .harness import Result
from .probe import mcp, probe
from .transcripts import assistant_line, claude_slug, render, user_line

CLASS = "times and numbers out of range"
YEAR_2300 = 10_413_792_000
FAR = 1e19  # seconds: the year 300 billion


def _usage(sid: str, project: str, ts: float, **usage: object) -> dict:
    line = assistant_line(sid, project, "counted", ts)
    line["message"]["usage"] = {"input_tokens": 3, "output_tokens": 28, **usage}
    return line


def check(res: Result, sb, quick: bool) -> None:
    p = probe(res, sb, "times")
    project = p.project("app")
    folder = p.config / "projects" / claude_slug(project)
    now = time.time() - 3600
    future = p.session(project, "a transcript from the year 2300")
    os.utime(folder / f"{future}.jsonl", (YEAR_2300, YEAR_2300))
    beyond = os.stat(folder / f"{future}.jsonl").st_mtime_ns > 2**63 - 1
    nowhen = str(uuid.uuid4())
    lines = [user_line(nowhen, project, "a session from nowhen", now), assistant_line(nowhen, project, "ok", now)]
    for line in lines:
        line["timestamp"] = "99999-01-01T00:00:00.000Z"
    (folder / f"{nowhen}.jsonl").write_bytes(render(lines))
    spent = p.session(
        project,
        "count my tokens",
        lines=[
            _usage(str(uuid.uuid4()), project, now, input_tokens=-5),
            _usage(str(uuid.uuid4()), project, now, output_tokens=10**12),
            {**_usage(str(uuid.uuid4()), project, now), "costUSD": -5.0},
        ],
    )
    first = p.run("register", "sessions", "--project", project)
    told = first.stderr.count("ignoring a transcript's timestamp '99999-01-01T00:00:00.000Z'")
    res.check(told == 1, "each problem said once, naming its file", f"the first listing: {first.stderr[-400:]!r}")

    # Claude Code's registry: running processes whose status time is out of range
    sleepers = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]) for _ in range(3)]
    registry = p.config / "sessions"
    registry.mkdir(parents=True)
    held = [p.session(project, f"held by a running claude {i}") for i in range(3)]
    for proc, sid, since in zip(sleepers, held, (-1, 1e30, "x")):
        (registry / f"{proc.pid}.json").write_text(
            json.dumps(
                {
                    "pid": proc.pid,
                    "sessionId": sid,
                    "cwd": project,
                    "procStart": str(proc_start_ticks(proc.pid)),
                    "status": "waiting",
                    "statusUpdatedAt": since,
                    "startedAt": since,
                }
            )
        )
    # c3async's own files as a cloned repository or a hand could leave them
    state = Path(project, ".c3")
    task = json.loads(p.run("add a task", "tasks", "add", "--title", "ship", "--project", project, "--json").stdout)[
        "id"
    ]
    p.run("decide", "tasks", "decide", "--text", "we go", "--task", task, "--project", project)
    pm = state / "pm" / "pm.json"
    doc = json.loads(pm.read_text())
    for t in doc["tasks"]:
        t.update(created=FAR, updated=-FAR, due="2026-02-30", time=[{"start": FAR, "end": None}])
    for item in (*doc["decisions"], *doc["events"]):
        item["ts"] = FAR
    pm.write_text(json.dumps(doc))
    with open(state / "session_marks.jsonl", "a") as f:
        f.write(
            json.dumps(
                {"ts": FAR, "provider": "claude-code", "id": held[0], "op": "stale", "reason": "planted", "by": "user"}
            )
            + "\n"
        )
    with open(state / "activity.jsonl", "a") as f:
        f.write(json.dumps({"ts": FAR, "kind": "session_start", "session_id": nowhen}) + "\n")
    (state / "live").mkdir(exist_ok=True)
    (state / "live" / f"{uuid.uuid4()}.json").write_text(
        json.dumps({"session_id": "c3", "host_session_id": nowhen, "ide": "x", "pid": 1, "ts": FAR})
    )
    with open(state / "session_stats.jsonl", "a") as f:
        f.write(json.dumps({"session_id": nowhen, "ts": FAR, "input": 5}) + "\n")
        f.write(json.dumps({"session_id": future, "ts": now, "input": -5, "cost_usd": -9.0}) + "\n")
    (p.home / "prices.json").write_text(json.dumps({"claude-x": {"input": 1, "output": 2, "cache_reed": 3}}))
    (state / "config.json").write_text(json.dumps({"idle_dayz": 3}))

    said = {  # what each command says once, by the files it reads
        "mtime": (f"{future}.jsonl", "past 2262-04-11"),
        "registry": (str(registry), "ignoring a registry time"),
        "pm": (str(pm), "ignoring a task store's"),
        "mark": ("ignoring a mark's ts",),
        "activity": ("ignoring an activity row's ts",),
        "usage": (f"{spent}.jsonl", "not counted"),
        "prices": ("'cache_reed' (did you mean 'cache_read'?)",),
        "config": ("'idle_dayz' (did you mean 'idle_days'?)",),
    }
    runs = [
        ("sessions", ["sessions"], ("mtime", "registry", "pm", "mark", "activity", "config")),
        ("sessions --json", ["sessions", "--json"], ("mtime", "registry", "pm", "mark")),
        ("live", ["live"], ("registry", "usage")),  # its burn brings the usage up to date first
        ("live --json", ["live", "--json"], ("registry",)),
        ("show", ["show", held[1]], ("registry",)),
        ("search", ["search", "tokens", "--json"], ("mtime",)),
        ("search again", ["search", "retry"], ("mtime",)),
        ("stats", ["stats"], ("prices",)),  # the usage was read (and said) by `live`
        ("stats --json", ["stats", "--json"], ("prices",)),
        ("tasks get", ["tasks", "get", task], ("pm",)),
        ("tasks decisions", ["tasks", "decisions"], ("pm",)),
        ("tasks history", ["tasks", "history", task], ("pm",)),
    ]
    if not beyond:
        said.pop("mtime")
        res.note("this file system cannot hold a time past 2262: the mtime probe is not run")
    outputs: dict[str, str] = {}
    try:
        for what, args, expected in runs:
            proc = p.run(what, *args, "--project", project)
            outputs[what] = proc.stdout
            for name in expected:
                if name not in said:
                    continue
                n = sum(all(w in line for w in said[name]) for line in proc.stderr.splitlines())
                told += n == 1
                res.check(
                    n == 1,
                    "each problem said once, naming its file",
                    f"{what}: {name} said {n} times: {proc.stderr[-400:]!r}",
                )
        rows = {r["id"]: r for r in json.loads(outputs["sessions --json"] or "[]")}
        res.check({future, nowhen, spent, *held} <= set(rows), "every session is listed", f"listed {sorted(rows)}")
        res.check(
            all(rows.get(s, {}).get("live") for s in held),
            "a registry file with a bad time still counts",
            str([rows.get(s, {}).get("state_since") for s in held]),
        )
        res.check(
            rows.get(held[0], {}).get("stale") is None, "a mark from the future never wins", str(rows.get(held[0]))
        )
        res.check(
            not rows.get(nowhen, {}).get("live"),
            "a heartbeat or activity row of no time is not live",
            str(rows.get(nowhen)),
        )
        stats = json.loads(outputs["stats --json"] or "[]")
        res.check(
            all(r["cost_usd"] >= 0 and r["input"] >= 0 for r in stats),
            "costs and counts never negative",
            str([(r["id"][:8], r["input"], r["cost_usd"]) for r in stats]),
        )
        res.check(
            any(r["id"] == spent and r["responses"] == 1 for r in stats),
            "only the sane responses are counted",
            str([(r["id"][:8], r["responses"]) for r in stats]),
        )
        # the MCP server: its tools answer, and it logs each problem once
        answers = mcp(
            p,
            project,
            [
                ("c3_session", {"action": "list"}),
                ("c3_task", {"action": "get", "task_id": task}),
                ("c3_task", {"action": "history"}),
                ("c3_task", {"action": "decisions"}),
                ("c3_status", {"view": "sessions"}),
                ("c3_status", {"view": "live"}),
            ],
        )
        res.check(
            all(not error for error, _ in answers),
            "the MCP tools answer bad values with results",
            "; ".join(t[:120] for e, t in answers if e),
        )
        logged = (p.root / "serve.err").read_text()
        for name in ("registry", "pm", "prices", "config"):
            n = sum(all(w in line for w in said[name]) for line in logged.splitlines())
            res.check(n == 1, "the MCP server logs each problem once", f"{name} logged {n} times: {logged[-400:]!r}")
        # the Hub
        from .hostile_neighbour import start_hub

        hub, port, token = start_hub(p.env)
        try:

            def get(path: str) -> tuple[int, dict]:
                req = urllib.request.Request(
                    f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"Bearer {token}"}
                )
                try:
                    with urllib.request.urlopen(req, timeout=60) as r:
                        return r.status, json.loads(r.read())
                except urllib.error.HTTPError as exc:
                    return exc.code, {}

            status, listing = get("/api/rows")
            ids = {r["id"] for r in listing.get("rows", [])}
            res.check(
                status == 200 and {future, nowhen, spent, *held} <= ids,
                "the Hub lists the project",
                f"{status}: {sorted(ids)}",
            )
            for path in ("/api/projects", f"/api/sessions/{held[1]}", f"/api/sessions/{future}"):
                status, _ = get(path)
                res.check(status == 200, "the Hub answers every read", f"{path}: {status}")
        finally:
            hub.terminate()
            hub.wait(10)
            if hub.stderr is not None:
                hub.stderr.close()
    finally:
        for proc in sleepers:
            proc.kill()
            proc.wait()
    res.fig("probes", f"{p.runs} commands, 1 MCP server, 1 Hub; {told} problems said once where read")
    res.fig("mtime past 2262", "held by this file system" if beyond else "not held (clamped by the file system)")
