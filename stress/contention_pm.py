"""PM contention: many processes at once, each making a series of mixed ``c3_task`` changes
(add, update, decide, link) through ``c3async.tasks.actions.run``: the lock + read-modify-write +
atomic replace of ``.c3/pm/pm.json``.

No lost update: every acknowledged change has its event in pm.json's ``events`` (and no event is
extra), every added task and decision is there, and each task carries the title its owner set
last. Meanwhile a reader process loads pm.json in a loop and must never see a broken file.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections import Counter

from .harness import PY, Result, Sandbox, kill_all, lat

WRITER = r"""
import json, random, sys, time, uuid
from c3async.ground.project import resolve
from c3async.tasks import actions
project, wid, n, go, seed = resolve(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
rng = random.Random(seed)
who = actions.Who(session=str(uuid.uuid5(uuid.NAMESPACE_URL, f"pm-{wid}")), by="agent")
out, mine = [], []
while time.time() < go:
    time.sleep(0.002)
for k in range(n):
    tag = f"{wid}-{k:04d}"
    action = "add" if not mine else rng.choices(("add", "update", "decide", "link"), (3, 3, 2, 2))[0]
    args = {}
    if action == "add":
        args = dict(title=tag, priority=rng.choice(("p0", "p1", "p2", "p3")), tags="stress," + wid)
    elif action == "update":
        args = dict(task_id=rng.choice(mine), title=tag, status=rng.choice(("backlog", "in_progress", "blocked", "done")))
    elif action == "decide":
        args = dict(text=tag, reasoning="because " + tag, task_id=rng.choice(mine) if rng.random() < 0.5 else "")
    else:
        tag = str(uuid.uuid5(uuid.NAMESPACE_URL, tag))  # a link names a session: a UUID
        args = dict(task_id=rng.choice(mine), link_type="session", ref=tag)
    t0 = time.perf_counter()
    try:
        r = actions.run(project, who, action, **args)
    except Exception as exc:
        out.append({"tag": tag, "action": action, "error": repr(exc)})
        continue
    dt = time.perf_counter() - t0
    target = r["id"]
    if action == "add":
        mine.append(target)
    out.append({"tag": tag, "action": action, "target": target, "task": args.get("task_id") or None, "dt": dt})
sys.stdout.write(json.dumps(out))
"""

READER = r"""
import json, os, sys, time
from pathlib import Path
path, stop = Path(sys.argv[1]), sys.argv[2]
reads = bad = 0
while not os.path.exists(stop):
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        time.sleep(0.005)
        continue
    reads += 1
    try:
        json.loads(data)
    except ValueError:
        bad += 1
    time.sleep(0.005)
sys.stdout.write(json.dumps({"reads": reads, "bad": bad}))
"""


def run(sb: Sandbox, quick: bool, seed: int) -> Result:
    res = Result("pm contention")
    procs_n, changes = (16, 25) if quick else (32, 50)
    project = sb.work / "pm-contention"
    project.mkdir()
    pm_path = project / ".c3" / "pm" / "pm.json"
    go = time.time() + 1.5 + procs_n * 0.08
    env = sb.env(project)
    procs = [
        subprocess.Popen(
            [PY, "-c", WRITER, str(project), f"w{w:02d}", str(changes), repr(go), str(seed * 100 + w)],
            env=env,
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=sb.log(f"pm-w{w:02d}.log"),
        )
        for w in range(procs_n)
    ]
    stop = sb.logs / "pm-reader.stop"
    reader = subprocess.Popen(
        [PY, "-c", READER, str(pm_path), str(stop)],
        env=env,
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=sb.log("pm-reader.log"),
    )
    results: list[dict] = []
    failed: list[str] = []
    try:
        for w, p in enumerate(procs):
            out, _ = p.communicate(timeout=900)
            if p.returncode != 0:
                failed.append(f"w{w:02d} exited {p.returncode}")
                continue
            for r in json.loads(out):
                r["wid"] = f"w{w:02d}"
                results.append(r)
        wall = time.time() - go
        stop.touch()
        out, _ = reader.communicate(timeout=60)
    finally:
        kill_all([*procs, reader])
    try:
        reads = json.loads(out)
    except ValueError:
        reads = None

    errors = [r for r in results if "error" in r]
    acked = [r for r in results if "error" not in r]
    try:
        doc = json.loads(pm_path.read_bytes())
    except (OSError, ValueError) as exc:
        res.check(False, "pm.json parses after the storm", repr(exc))
        return res
    events = doc.get("events", [])
    tasks = {t["id"]: t for t in doc.get("tasks", [])}
    decisions = {d["id"]: d for d in doc.get("decisions", [])}

    # match each acknowledged change with its event
    pool: dict[tuple, list[dict]] = {}
    for e in events:
        pool.setdefault((e.get("action"), e.get("target"), e.get("session")), []).append(e)
    lost_events = []
    for r in acked:
        cands = pool.get((r["action"], r["target"], str(uuid.uuid5(uuid.NAMESPACE_URL, f"pm-{r['wid']}"))), [])
        ch = lambda e: e.get("changes") or {}  # noqa: E731
        if r["action"] in ("add", "update"):
            match = next((e for e in cands if ch(e).get("title") == r["tag"]), None)
        elif r["action"] == "link":
            match = next((e for e in cands if ch(e).get("session") == r["tag"]), None)
        else:
            match = cands[0] if cands else None
        if match is None:
            lost_events.append(f"{r['tag']} {r['action']}")
        else:
            cands.remove(match)
    extra_events = sum(len(v) for v in pool.values())

    lost_tasks, lost_decisions, wrong_title, lost_links = [], [], [], []
    last_title: dict[str, str] = {}
    links: dict[str, set] = {}
    for r in acked:  # each writer's results are in its own order; tasks are changed by their owner only
        if r["action"] in ("add", "update"):
            last_title[r["target"]] = r["tag"]
        if r["action"] == "add" and r["target"] not in tasks:
            lost_tasks.append(r["tag"])
        if r["action"] == "decide":
            d = decisions.get(r["target"])
            if d is None or d.get("text") != r["tag"]:
                lost_decisions.append(r["tag"])
        if r["action"] == "link":
            links.setdefault(r["target"], set()).add(r["tag"])
    for tid, title in last_title.items():
        if tid in tasks and tasks[tid]["title"] != title:
            wrong_title.append(f"{tid}: {tasks[tid]['title']!r}, last set {title!r}")
    for tid, tags in links.items():
        if tid in tasks and not tags <= set(tasks[tid].get("sessions", [])):
            lost_links.append(f"{tid}: {len(tags - set(tasks[tid].get('sessions', [])))} links missing")
    lost = len(lost_events) + len(lost_tasks) + len(lost_decisions) + len(wrong_title) + len(lost_links)

    kinds = Counter(r["action"] for r in acked)
    res.fig(
        "processes x changes", f"{procs_n} x {changes}  ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))})"
    )
    res.fig(
        "changes acknowledged",
        f"{len(acked)}  (failed {len(errors)}; wall {wall:.1f} s, {len(acked) / max(wall, 1e-9):.0f} changes/s)",
    )
    res.fig("events in pm.json", f"{len(events)}  (extra {extra_events})")
    res.fig("lost (must be 0)", lost)
    res.fig("tasks / decisions", f"{len(tasks)} / {len(decisions)}  (pm.json {pm_path.stat().st_size / 1e3:.0f} KB)")
    res.fig("change latency", lat([r["dt"] for r in acked]))
    res.fig(
        "reads of pm.json by a reader process",
        "-" if reads is None else f"{reads['reads']}  (that did not parse: {reads['bad']})",
    )

    res.check(not failed, "every writer process completes", "; ".join(failed[:3]))
    res.check(
        reads is not None and reads["bad"] == 0,
        "a reader never sees a broken pm.json",
        "no report from the reader" if reads is None else f"{reads['bad']} of {reads['reads']} reads",
    )
    res.check(not errors, "every change succeeds", f"{len(errors)}, e.g. {errors[:2]}")
    res.check(len(acked) == procs_n * changes, "every change is acknowledged", f"{len(acked)} of {procs_n * changes}")
    res.check(
        not lost_events, "every acknowledged change has its event", f"{len(lost_events)} lost, e.g. {lost_events[:3]}"
    )
    res.check(extra_events == 0, "no event without an acknowledged change", f"{extra_events} extra")
    res.check(not lost_tasks, "every added task is present", f"{len(lost_tasks)} lost, e.g. {lost_tasks[:3]}")
    res.check(not lost_decisions, "every decision is present", f"{len(lost_decisions)} lost, e.g. {lost_decisions[:3]}")
    res.check(not wrong_title, "every task has the title its owner set last", "; ".join(wrong_title[:3]))
    res.check(not lost_links, "every session link is kept", "; ".join(lost_links[:3]))
    return res
