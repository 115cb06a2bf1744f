"""Catalog under writes: listings (``list_rows_sync`` in this process, and ``c3async sessions
--json`` processes) run over and over while writer processes append to the transcripts (new
prompts, replies, big tool results, ai-titles; a fifth of the lines in two ``write()`` calls with
a pause between, as a writer caught mid-line) and other processes append marks.

Invariants: every listing succeeds and returns every session exactly once; a row's title, last
prompt, stale reason and note are always ones that were written (writers log what they are
about to write before writing it); after the writers stop, the warm listing equals a cold one
(cache deleted) and the ground truth (ids, titles, last prompts, first prompts, stale, note), and
``c3async sessions --json`` agrees.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import threading
import time

from c3async.ground.project import resolve

from .harness import PY, Project, Result, Sandbox, c3async_cmd, kill_all, make_project, ms, oracle_fold, pct, read_raw

TRANSCRIPT_WRITER = r"""
import json, os, random, sys, time
from stress.transcripts import ai_title_line, assistant_line, render, tool_result_line, user_line
wid, seed, until, log_path = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
sessions = json.loads(sys.argv[5])  # [[sid, path, cwd], ...]
rng = random.Random(seed)
log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
WORDS = ("retry", "cache", "queue", "parser", "token", "worker", "schema", "router", "Über", "日本")
parents = {}
k = 0
while time.time() < until:
    sid, path, cwd = rng.choice(sessions)
    k += 1
    now = time.time()
    prompt = f"{wid} prompt {k}: {rng.choice(WORDS)} the {rng.choice(WORDS)}"
    u = user_line(sid, cwd, prompt, now, parents.get(sid))
    a = assistant_line(sid, cwd, f"answer {k}", now + 0.5, u["uuid"])
    parents[sid] = a["uuid"]
    lines = [("prompt", prompt, u), (None, None, a)]
    if rng.random() < 0.12:
        t = tool_result_line(sid, cwd, "out " * rng.randint(5_000, 40_000), now + 1, a["uuid"])
        parents[sid] = t["uuid"]
        lines.append((None, None, t))
    if rng.random() < 0.35:
        title = f"{wid} title {k} {rng.choice(WORDS)}"
        lines.append(("title", title, ai_title_line(sid, title)))
    for kind, value, line in lines:
        if kind:  # say what is about to be written, before writing it
            os.write(log, (json.dumps({"sid": sid, "kind": kind, "value": value}) + "\n").encode())
        data = render([line])
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            if rng.random() < 0.2:  # caught mid-line: two writes, a pause between
                cut = rng.randint(1, len(data) - 1)
                os.write(fd, data[:cut])
                time.sleep(rng.uniform(0.001, 0.03))
                os.write(fd, data[cut:])
            else:
                os.write(fd, data)
        finally:
            os.close(fd)
    time.sleep(rng.uniform(0.005, 0.04))
"""

MARK_WRITER = r"""
import json, os, random, sys, time
from c3async.ground.project import resolve
from c3async.stores.marks import write_mark
project, wid, seed, until, log_path = resolve(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
ids = sys.argv[6].split(",")
rng = random.Random(seed)
log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
k = 0
while time.time() < until:
    k += 1
    sid, op, tag = rng.choice(ids), rng.choice(("stale", "unstale", "note")), f"{wid}-{k:05d}"
    os.write(log, (json.dumps({"sid": sid, "kind": op, "value": tag}) + "\n").encode())
    if op == "note":
        write_mark(project, sid, op, summary=tag, next_steps="next " + tag, by="user")
    else:
        write_mark(project, sid, op, reason=tag, by="user")
    time.sleep(rng.uniform(0.01, 0.06))
"""


def _state(value) -> dict | None:
    """A row's stale/note (a struct in-process, a dict from the CLI's JSON) as a plain dict."""
    if value is None:
        return None
    if isinstance(value, dict):
        d = dict(value)
    else:
        import msgspec

        d = msgspec.to_builtins(value)
    d.pop("ts", None)  # not compared: the same in both, but floats through JSON need no test
    return d


def view(row) -> dict:
    """What is compared between listings."""
    get = (lambda k: row.get(k)) if isinstance(row, dict) else (lambda k: getattr(row, k))
    return {
        "title": get("title"),
        "last_prompt": get("last_prompt"),
        "first_prompt": get("first_prompt"),
        "stale": _state(get("stale")),
        "note": _state(get("note")),
    }


class CatalogStorm:
    def __init__(self, sb: Sandbox, project: Project, quick: bool, seed: int) -> None:
        self.sb, self.project, self.seed = sb, project, seed
        self.duration = 10.0 if quick else 45.0
        self.t_writers = 2 if quick else 3
        self.m_writers = 1 if quick else 2
        self.listings: list[tuple[str, float, dict[str, dict] | None, str | None]] = []  # who, dt, rows, error
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.procs: list[subprocess.Popen] = []

    def lister_inprocess(self) -> None:
        from c3async.sessions.view import list_rows_sync

        while not self.stop.is_set():
            t0 = time.perf_counter()
            try:
                _, rows = list_rows_sync([resolve(self.project.path)])
                got, err = {r.id: view(r) for r in rows}, None
                if len(got) != len(rows):
                    err = f"{len(rows)} rows for {len(got)} ids"
            except Exception as exc:
                got, err = None, repr(exc)
            self._record("in-process", time.perf_counter() - t0, got, err)
            time.sleep(0.02)

    def lister_cli(self) -> None:
        env = self.sb.env(self.project.path)
        while not self.stop.is_set():
            t0 = time.perf_counter()
            out = subprocess.run(
                c3async_cmd("sessions", "--project", self.project.path, "--json"),
                env=env,
                cwd=self.project.path,
                capture_output=True,
                timeout=120,
            )
            dt = time.perf_counter() - t0
            got, err = None, None
            if out.returncode != 0:
                err = f"rc {out.returncode}: {out.stderr[-300:]!r}"
            else:
                try:
                    rows = json.loads(out.stdout)
                    got = {r["id"]: view(r) for r in rows}
                    if len(got) != len(rows):
                        err = f"{len(rows)} rows for {len(got)} ids"
                except ValueError as exc:
                    err = f"bad JSON: {exc}"
            self._record("cli", dt, got, err)

    def _record(self, who: str, dt: float, rows, err) -> None:
        with self.lock:
            self.listings.append((who, dt, rows, err))

    def run(self) -> float:
        until = time.time() + 1.0 + self.duration
        ids = self.project.ids
        env = self.sb.env(self.project.path)
        for w in range(self.t_writers):
            mine = [
                [sid, str(t.path), self.project.path]
                for i, (sid, t) in enumerate(self.project.sessions.items())
                if i % self.t_writers == w
            ]
            self.procs.append(
                subprocess.Popen(
                    [
                        PY,
                        "-c",
                        TRANSCRIPT_WRITER,
                        f"tw{w}",
                        str(self.seed * 10 + w),
                        repr(until),
                        str(self.sb.logs / f"catalog-tw{w}.jsonl"),
                        json.dumps(mine),
                    ],
                    env=env,
                    cwd=self.project.path,
                    stdout=subprocess.DEVNULL,
                    stderr=self.sb.log(f"catalog-tw{w}.log"),
                )
            )
        for w in range(self.m_writers):
            self.procs.append(
                subprocess.Popen(
                    [
                        PY,
                        "-c",
                        MARK_WRITER,
                        self.project.path,
                        f"mw{w}",
                        str(self.seed * 10 + 5 + w),
                        repr(until),
                        str(self.sb.logs / f"catalog-mw{w}.jsonl"),
                        ",".join(ids),
                    ],
                    env=env,
                    cwd=self.project.path,
                    stdout=subprocess.DEVNULL,
                    stderr=self.sb.log(f"catalog-mw{w}.log"),
                )
            )
        threads = [
            threading.Thread(target=self.lister_inprocess, daemon=True),
            threading.Thread(target=self.lister_cli, daemon=True),
        ]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        self.rc = [p.wait(timeout=self.duration + 300) for p in self.procs]
        self.stop.set()
        for t in threads:
            t.join(timeout=120)
        return time.perf_counter() - t0

    def intents(self) -> dict[str, dict[str, list[str]]]:
        """sid -> kind -> values, in the order written (one writer per session)."""
        out: dict[str, dict[str, list[str]]] = {}
        for path in sorted(self.sb.logs.glob("catalog-*.jsonl")):
            for line in path.read_bytes().splitlines():
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                out.setdefault(e["sid"], {}).setdefault(e["kind"], []).append(e["value"])
        return out


def run(sb: Sandbox, quick: bool, seed: int) -> Result:
    from c3async.catalog.extract import prompt_title
    from c3async.sessions.view import list_rows_sync

    res = Result("catalog under writes")
    rng = random.Random(seed)
    project = make_project(
        sb, "catalog-writes", 20 if quick else 40, rng, big_every=5, custom_every=7, untitled_every=6
    )
    cs = CatalogStorm(sb, project, quick, seed)
    try:
        wall = cs.run()
    finally:
        kill_all(cs.procs)
    res.check(all(rc == 0 for rc in cs.rc), "every writer process completes", f"exit codes {cs.rc}")

    # what was written, and what may therefore be seen
    intents = cs.intents()
    marks = read_raw(project.marks)
    tags_written = {v for d in intents.values() for k in ("stale", "unstale", "note") for v in d.get(k, [])}
    allowed: dict[str, dict[str, set]] = {}
    for sid, t in project.sessions.items():
        d = intents.get(sid, {})
        titles = (
            {t.custom_title}
            if t.custom_title
            else ({t.ai_title, prompt_title(t.first_prompt), sid[:8]} | set(d.get("title", [])))
        )
        allowed[sid] = {"title": titles - {None}, "last_prompt": {t.last_prompt} | set(d.get("prompt", []))}

    ids = set(project.ids)
    failed, wrong_count, bad_title, bad_prompt, bad_mark, bad_first = [], [], [], [], [], []
    unknown_prompt = 0
    for who, _dt, rows, err in cs.listings:
        if err is not None or rows is None:
            failed.append(f"{who}: {err}")
            continue
        if set(rows) != ids:
            wrong_count.append(f"{who}: {len(rows)} rows, missing {len(ids - set(rows))}, extra {len(set(rows) - ids)}")
            continue
        for sid, v in rows.items():
            if v["title"] not in allowed[sid]["title"]:
                bad_title.append(f"{who} {sid[:8]}: {v['title']!r}")
            if v["last_prompt"] is None:  # "unknown": the windows read held no prompt
                unknown_prompt += 1
            elif v["last_prompt"] not in allowed[sid]["last_prompt"]:
                bad_prompt.append(f"{who} {sid[:8]}: {v['last_prompt']!r}")
            if v["first_prompt"] != project.sessions[sid].first_prompt:
                bad_first.append(f"{who} {sid[:8]}: {v['first_prompt']!r}")
            for key, field in (("stale", "reason"), ("note", "summary")):
                if v[key] is not None and v[key].get(field) not in tags_written:
                    bad_mark.append(f"{who} {sid[:8]} {key}: {v[key]}")

    # after the writers stop: warm == cold == ground truth, and the CLI agrees
    _, warm_rows = list_rows_sync([resolve(project.path)])
    shutil.rmtree(project.c3 / "cache", ignore_errors=True)
    t0 = time.perf_counter()
    _, cold_rows = list_rows_sync([resolve(project.path)])
    cold_time = time.perf_counter() - t0
    warm = {r.id: view(r) for r in warm_rows}
    cold = {r.id: view(r) for r in cold_rows}
    out = subprocess.run(
        c3async_cmd("sessions", "--project", project.path, "--json"),
        env=sb.env(project.path),
        cwd=project.path,
        capture_output=True,
        timeout=120,
    )
    cli = {r["id"]: view(r) for r in json.loads(out.stdout)} if out.returncode == 0 else {}
    stale_o, note_o = oracle_fold(marks.records)
    truth = {}
    for sid, t in project.sessions.items():
        d = intents.get(sid, {})
        title = (
            t.custom_title or (d["title"][-1] if d.get("title") else None) or t.ai_title or prompt_title(t.first_prompt)
        )
        s, n = stale_o.get(sid), note_o.get(sid)
        truth[sid] = {
            "title": title,
            "last_prompt": d["prompt"][-1] if d.get("prompt") else t.last_prompt,
            "first_prompt": t.first_prompt,
            "stale": (
                {"reason": s["reason"], "successor": s.get("successor"), "by": s["by"]}
                if s is not None and s["op"] == "stale"
                else None
            ),
            "note": {"summary": n.get("summary"), "next_steps": n.get("next_steps")} if n is not None else None,
        }

    def diff(a: dict, b: dict) -> list[str]:
        out = [f"ids differ ({len(a)} vs {len(b)})"] if set(a) != set(b) else []
        for sid in sorted(set(a) & set(b)):
            for k in a[sid]:
                if a[sid][k] != b[sid][k]:
                    out.append(f"{sid[:8]} {k}: {a[sid][k]!r} vs {b[sid][k]!r}")
        return out

    d_warm_cold, d_cold_truth, d_cli = diff(warm, cold), diff(cold, truth), diff(cli, cold)

    inproc = [dt for who, dt, _, _ in cs.listings if who == "in-process"]
    clis = [dt for who, dt, _, _ in cs.listings if who == "cli"]
    grown = sum(t.path.stat().st_size for t in project.sessions.values())
    res.fig(
        "sessions",
        f"{len(ids)}  ({sum(1 for i in range(len(ids)) if i % 5 == 0)} over 320 KiB; "
        f"transcripts now {grown / 1e6:.1f} MB)",
    )
    res.fig("writers", f"{cs.t_writers} transcript writers, {cs.m_writers} mark writers, {wall:.1f} s")
    res.fig(
        "lines appended",
        f"prompts {sum(len(d.get('prompt', [])) for d in intents.values())}, "
        f"ai-titles {sum(len(d.get('title', [])) for d in intents.values())}, marks {len(marks.records)}",
    )
    res.fig(
        "listings",
        f"{len(cs.listings)}  (in-process {len(inproc)}, `c3async sessions --json` {len(clis)}; failed {len(failed)})",
    )
    res.fig("listing time under load, in-process", f"p50 {ms(pct(inproc, 50))}  max {ms(max(inproc, default=0))}")
    res.fig("listing time under load, CLI process", f"p50 {ms(pct(clis, 50))}  max {ms(max(clis, default=0))}")
    res.fig("cold listing after the writers", ms(cold_time))
    res.fig(
        "rows with last prompt unknown (None)",
        f"{unknown_prompt}  (of {sum(len(x[2] or {}) for x in cs.listings)} rows listed)",
    )

    res.check(not failed, "every listing succeeds", "; ".join(failed[:3]))
    res.check(not wrong_count, "every listing returns every session exactly once", "; ".join(wrong_count[:3]))
    res.check(not bad_title, "no row shows a title that was never written", f"{len(bad_title)}: {bad_title[:3]}")
    res.check(
        not bad_prompt, "no row shows a last prompt that was never written", f"{len(bad_prompt)}: {bad_prompt[:3]}"
    )
    res.check(not bad_first, "every row keeps its first prompt", f"{len(bad_first)}: {bad_first[:3]}")
    res.check(not bad_mark, "no row shows a mark that was never written", f"{len(bad_mark)}: {bad_mark[:3]}")
    res.check(
        not d_warm_cold,
        "the final listing equals a cold listing (cache deleted)",
        f"{len(d_warm_cold)} differences: {d_warm_cold[:4]}",
    )
    res.check(not d_cold_truth, "the cold listing equals what was written", f"{len(d_cold_truth)}: {d_cold_truth[:4]}")
    res.check(
        out.returncode == 0 and not d_cli,
        "`c3async sessions --json` agrees with the cold listing",
        f"rc {out.returncode}; {d_cli[:3]}",
    )
    return res
