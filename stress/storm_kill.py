"""Kill storm: plain writer processes call ``c3async.stores.marks.write_mark`` in a loop (summaries,
next steps and reasons of random size, 100 B up to the mark limits, so a line spans pages) and are SIGKILLed at random moments; a killed writer is
replaced at once. Each writer acknowledges a mark by appending its tag to its own ack file (one
``os.write``) after ``write_mark`` returned. At the end every writer is killed at once, and a
survivor process appends one more mark.

Invariants: every acknowledged mark is in the file exactly once and whole (never glued to a
fragment); torn fragments (lines that do not parse) are skipped by the reader, counted, and never
more than the kills; the fold equals an independent last-wins fold by time; every acknowledged mark has its
activity row; the survivor's line is intact, on its own line.
"""

from __future__ import annotations

import os
import random
import re
import signal
import statistics
import subprocess
import time
from pathlib import Path

from c3async.ground.project import resolve

from .harness import PY, Project, Result, Sandbox, compare_fold, kill_all, lat, make_project, mark_tag, ms, read_raw

WRITER = r"""
import math, os, random, sys, time
from c3async.ground.project import resolve
from c3async.stores.marks import write_mark
project, wid, seed, ids, ack_path, mode = resolve(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4].split(","), sys.argv[5], sys.argv[6]
ack = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
rng = random.Random(seed)
FILL = "abcdefghijklmnopqrstuvwxyz0123456789" * 300
from c3async.stores.marks import MAX_REASON, MAX_SUMMARY
if mode.startswith("big:"):  # ready (the ack file exists): wait for the go file, then write
    while not os.path.exists(mode[4:]):
        time.sleep(0.0005)
    mode = "big"
k = 0
while True:
    sid = rng.choice(ids)
    op = rng.choices(("note", "stale", "unstale"), (6, 3, 1))[0]
    if mode == "big":  # the largest line a mark can be: two full fields
        op, size = "note", MAX_SUMMARY
    else:
        size = int(math.exp(rng.uniform(math.log(100), math.log(MAX_SUMMARY))))
    if op == "stale":
        size = min(size, MAX_REASON)
    tag = f"{wid}-{k:05d}"
    body = tag + " " + FILL[: max(0, size - len(tag) - 1)]
    t0 = time.perf_counter()
    if op == "note":
        write_mark(project, sid, "note", summary=body, next_steps=("next " + tag + " " + body)[:MAX_SUMMARY],
                   by="agent", by_session=wid)
    elif op == "stale":
        write_mark(project, sid, "stale", reason=body, by="agent", by_session=wid)
    else:
        write_mark(project, sid, "unstale", reason=tag, by="agent", by_session=wid)
    dt = time.perf_counter() - t0
    os.write(ack, f"{tag} {op} {sid} {dt:.6f}\n".encode())
    k += 1
    if mode == "mixed":
        time.sleep(rng.uniform(0, 0.04))  # keep the file to tens of MB, not hundreds
    if mode == "once":
        break
"""

_TAG_IN_LINE = re.compile(rb'"(?:reason|summary)":"(k\d+-\d{5}|survivor-\d{5})')


def tag_of(rec: dict) -> str:
    return (mark_tag(rec) or "").split(" ", 1)[0]


class Writers:
    def __init__(self, sb: Sandbox, project: Project, seed: int) -> None:
        self.sb, self.project, self.seed = sb, project, seed
        self.procs: dict[str, subprocess.Popen] = {}
        self.all: list[subprocess.Popen] = []
        self.n = 0
        self.killed: set[str] = set()

    def spawn(self, mode: str = "mixed", wid: str | None = None) -> str:
        wid = wid or f"k{self.n:03d}"
        self.n += 1
        p = subprocess.Popen(
            [
                PY,
                "-c",
                WRITER,
                self.project.path,
                wid,
                str(self.seed * 1000 + self.n),
                ",".join(self.project.ids),
                str(self.ack(wid)),
                mode,
            ],
            env=self.sb.env(self.project.path),
            cwd=self.project.path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.sb.log(f"kill-{wid}.log"),
        )
        self.procs[wid] = p
        self.all.append(p)
        return wid

    def ack(self, wid: str) -> Path:
        return self.sb.logs / f"kill-ack-{wid}.txt"

    def kill_many(self, wids: list[str]) -> None:
        procs = [(wid, self.procs.pop(wid)) for wid in wids]
        for wid, p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                self.killed.add(wid)
        for _, p in procs:
            p.wait()

    def kill(self, wid: str) -> None:
        p = self.procs.pop(wid)
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
            self.killed.add(wid)
        p.wait()


def ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        if f.tell() == 0:
            return True
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def read_acks(path: Path) -> list[tuple[str, str, str, float]]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for line in data.split(b"\n")[:-1]:  # an unterminated last ack is not an ack
        parts = line.decode().split()
        if len(parts) == 4:
            out.append((parts[0], parts[1], parts[2], float(parts[3])))
    return out


def run(sb: Sandbox, quick: bool, seed: int) -> Result:
    from c3async.stores.marks import MarkBook

    res = Result("kill storm")
    rng = random.Random(seed)
    project = make_project(sb, "kill-storm", 20, rng)
    concurrent = 6 if quick else 10
    duration = 6.0 if quick else 20.0
    tail_tries = 5 if quick else 12  # rounds of 4 big writers
    w = Writers(sb, project, seed)
    crashed: list[str] = []
    kills = 0
    try:
        for _ in range(concurrent):
            w.spawn()
        time.sleep(0.5)  # let them import and start writing
        end = time.monotonic() + duration
        while time.monotonic() < end:
            time.sleep(rng.uniform(0.03, 0.3))
            for wid, p in list(w.procs.items()):  # a writer that died by itself is a failure
                if p.poll() is not None:
                    crashed.append(
                        f"{wid} exited {p.returncode}: {(sb.logs / f'kill-{wid}.log').read_bytes()[-300:]!r}"
                    )
                    w.procs.pop(wid)
                    w.spawn()
            victim = rng.choice(list(w.procs))
            w.kill(victim)
            kills += 1
            w.spawn()
        # the end: every writer killed at once, wherever it is
        kills += len(w.procs)
        w.kill_many(list(w.procs))
        # Aim for a torn tail before the survivor appends: rounds of four writers of the largest
        # notes (16 KB lines), started together and killed together a few ms later, until the
        # file ends mid-line (or we give up).
        tries = 0
        while ends_with_newline(project.marks) and tries < tail_tries:
            tries += 1
            go = sb.logs / f"kill-go-{tries}"
            wids = [w.spawn(f"big:{go}") for _ in range(4)]
            started = time.monotonic()
            while not all(w.ack(x).exists() for x in wids) and time.monotonic() - started < 30:
                time.sleep(0.002)  # an ack file appears once its writer has imported
            go.touch()  # all four start writing now, contending for the lock
            time.sleep(rng.uniform(0.005, 0.04))
            w.kill_many(wids)  # at one moment: whoever holds the lock may be mid-write()
            kills += len(wids)
        before = read_raw(project.marks)
        torn_tail = not before.ends_with_newline
        # the survivor: one more append after all that
        surv = subprocess.run(
            [
                PY,
                "-c",
                WRITER,
                project.path,
                "survivor",
                str(seed),
                ",".join(project.ids),
                str(w.ack("survivor")),
                "once",
            ],
            env=sb.env(project.path),
            cwd=project.path,
            capture_output=True,
            timeout=120,
        )
        res.check(surv.returncode == 0, "the survivor's append succeeds", surv.stderr.decode()[-300:])
    finally:
        kill_all(w.all)

    # ------------------------------------------------------------------ read back
    raw = read_raw(project.marks, keep_data=True)
    acts = read_raw(project.activity)
    acks: list[tuple[str, str, str, str, float]] = []  # wid, tag, op, sid, dt
    for i in range(w.n):
        wid = f"k{i:03d}"
        acks += [(wid, *a) for a in read_acks(w.ack(wid))]
    surv_acks = read_acks(w.ack("survivor"))
    acks += [("survivor", *a) for a in surv_acks]

    found: dict[str, list[int]] = {}
    for idx, rec in enumerate(raw.records):
        found.setdefault(tag_of(rec), []).append(idx)
    lost, doubled, wrong = [], [], []
    for wid, tag, op, sid, _ in acks:
        where = found.get(tag, [])
        if not where:
            lost.append(tag)
        elif len(where) > 1:
            doubled.append(tag)
        else:
            rec = raw.records[where[0]]
            if (rec["id"], rec["op"], rec.get("by_session")) != (sid, op, wid):
                wrong.append(f"{tag}: {(rec['id'], rec['op'], rec.get('by_session'))}")
    acked = {a[1] for a in acks}
    glued = [
        m.group(1).decode() for _, line in raw.bad for m in _TAG_IN_LINE.finditer(line) if m.group(1).decode() in acked
    ]
    fragments = len(raw.bad)

    res.fig(
        "writer processes", f"{w.n}  ({concurrent} at a time, {duration:.0f} s; crashed on their own: {len(crashed)})"
    )
    res.fig("SIGKILLs", kills)
    res.fig("marks acknowledged", len(acks))
    res.fig("marks in the file", f"{len(raw.records)}  ({raw.size / 1e6:.1f} MB)")
    res.fig("lost (must be 0)", len(lost))
    res.fig("torn fragments skipped (marks)", fragments)
    res.fig("torn fragments skipped (activity)", len(acts.bad))
    res.fig(
        "torn tail before the survivor",
        f"{'yes' if torn_tail else 'no'}  (after {tries} extra rounds of killing 4 writers of 16 KB lines)",
    )
    res.fig("write_mark latency (100 B-16 KB)", lat([a[4] for a in acks]))

    res.check(not crashed, "writers die only when killed", "; ".join(crashed[:2]))
    res.check(not lost, "every acknowledged mark is in the file", f"{len(lost)} lost, e.g. {lost[:3]}")
    res.check(not doubled, "every acknowledged mark is in the file exactly once", f"e.g. {doubled[:3]}")
    res.check(not wrong, "every acknowledged mark is in the file as it was sent", "; ".join(wrong[:3]))
    res.check(not glued, "no acknowledged mark is glued to a torn fragment", f"e.g. {glued[:3]}")
    res.check(
        fragments <= kills, "torn fragments come only from killed writers", f"{fragments} fragments, {kills} kills"
    )
    res.check(raw.ends_with_newline, "the file ends with a newline after the survivor's append")

    # the survivor's line: whole, and on a line of its own
    if surv_acks:
        tag = surv_acks[0][0]
        where = found.get(tag, [])
        ok = len(where) == 1
        if ok:
            off = raw.offsets[where[0]]
            ok = off == 0 or raw.data[off - 1 : off] == b"\n"
        res.check(
            ok,
            "the survivor's line is intact on its own line",
            f"found {len(where)} times" + (f" at offset {raw.offsets[where[0]]}" if where else ""),
        )

    # the fold, and what the production reader skipped
    book = MarkBook(resolve(project.path)).refresh()
    problems = compare_fold(book, raw.records)
    res.check(not problems, "the fold equals an independent last-wins fold by time", "; ".join(problems[:3]))
    res.check(
        book.skipped == fragments,
        "the reader skips and counts exactly the torn fragments",
        f"MarkBook skipped {book.skipped}, raw reader found {fragments}",
    )
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        MarkBook(resolve(project.path)).refresh()
        times.append(time.perf_counter() - t0)
    res.fig(
        "fold time of the result",
        f"{ms(statistics.median(times))}  ({len(raw.records)} marks, {raw.size / 1e6:.1f} MB)",
    )

    # activity rows: per writer, its session_mark rows are a prefix of its marks (a writer killed
    # between the two appends leaves one mark without a row), and cover every acknowledged mark
    seq_m: dict[str, list[tuple]] = {}
    seq_a: dict[str, list[tuple]] = {}
    for rec in raw.records:
        seq_m.setdefault(rec.get("by_session"), []).append((rec["id"], rec["op"], tag_of(rec)))
    for a in acts.records:
        if a.get("kind") == "session_mark":
            seq_a.setdefault(a.get("by_session"), []).append((a.get("target"), a.get("op")))
    bad_rows, missing_rows = [], []
    for wid in set(seq_m) | set(seq_a):
        ms_, as_ = seq_m.get(wid, []), seq_a.get(wid, [])
        if (
            [x[:2] for x in ms_[: len(as_)]] != as_
            or len(ms_) - len(as_) > 1
            or (wid not in w.killed and wid != "survivor" and len(ms_) != len(as_))
        ):
            bad_rows.append(f"{wid}: {len(ms_)} marks, {len(as_)} rows")
        covered = {x[2] for x in ms_[: len(as_)]}
        missing_rows += [a[1] for a in acks if a[0] == wid and a[1] not in covered]
    res.check(not bad_rows, "each writer's session_mark rows follow its marks in order", "; ".join(bad_rows[:3]))
    res.check(
        not missing_rows,
        "every acknowledged mark has its activity row",
        f"{len(missing_rows)} without, e.g. {missing_rows[:3]}",
    )
    return res
