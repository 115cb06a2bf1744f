"""Long histories for ``stress.bench_history``: a project's ``.c3/activity.jsonl`` and
``.c3/session_marks.jsonl`` written independently of c3async's writers, and the folds of them
computed independently of c3async's readers.

Nothing here imports c3async. The files are plain JSON lines in the shapes the formats document
(``c3async/activity.py``, ``c3async/marks.py``, ``c3async/live/hooks.py``, the server's
``tool_call`` rows): each record is ``json.dumps``-ed here and appended. The folds split the file
on ``\\n`` and put every line through ``json.loads``, so a bug in ``c3async.ground.jsonl`` or in an
incremental fold cannot hide itself:

- marks: per session, the stale/unstale mark and the note with the greatest ``ts`` (a tie goes to
  the later line);
- liveness (the activity fallback; no heartbeat is running when the benchmark checks): a
  ``session_start`` with no later ``session_end`` in file order, and some row of that session
  (any kind carrying ``session_id``) within 20 minutes of now;
- heartbeats, read raw, in case a server's file is still fresh.

The mix (about six months, most of it old, so few sessions read live):

- ``session_start`` / ``session_end`` hook rows for the project's sessions (around the times
  their transcripts were written) and for thousands of older phantom sessions (transcripts long
  deleted), some resumed (several pairs), some crashed (a start and no end), some begun by a
  ``/clear`` of another (``session_end`` reason ``clear`` then ``session_start`` source ``clear``
  with ``predecessor``), a few with the ``cwd`` of a since-removed worktree;
- ``tool_call`` rows (the bulk), ``hook`` rows of other events, ``c3_start``/``log``/
  ``snapshot``/``c3_end`` rows, and one ``session_mark`` row per mark;
- a handful of sessions active minutes ago without a ``session_end`` (they read live), a few
  ended minutes ago, a few that started recently but went quiet half an hour ago.

Marks: stale (with a successor now and then), unstale and note, over the project's sessions
(skewed: some have dozens, a quarter none) and many phantom ids; a few lines out of time order
(concurrent writers), exact ties, and lines far older than their place (a fold of older state).

Later, ``append_round`` appends batches as of now, and ``rewrite`` truncates, replaces or
rewrites the logs in place under a fold that has read them.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from stress.corpus import NOUNS
from stress.harness import raw_heartbeats

__all__ = (
    "REWRITES",
    "LogPlan",
    "append_round",
    "batch",
    "fold_live",
    "fold_marks",
    "fresh_heartbeats",
    "read_lines",
    "rewrite",
    "write_logs",
)

DAY = 86_400.0
SPAN_DAYS = 182
LIVE_WINDOW = 20 * 60  # the liveness fallback's window
WEEK = 7 * DAY
MB = 1_000_000
HEARTBEAT_TTL = 180.0
FUTURE_SLACK = 5.0

_WORDS = (
    *NOUNS,
    "the",
    "because",
    "instead",
    "already",
    "fails",
    "passes",
    "after",
    "before",
    "still",
    "flaky",
    "stale",
    "broken",
    "duplicate",
    "async",
    "legacy",
    "we",
    "it",
    "should",
    "when",
    "then",
    "test",
)  # the corpus's nouns, and the words of notes
_FILES = (
    "src/core/retry.py",
    "src/api/handlers.py",
    "tests/test_scheduler.py",
    "lib/client.ts",
    "cmd/main.go",
    "README.md",
    "pyproject.toml",
    "docs/architecture.md",
)
_SPICE = ("Übersicht", "naïve", "🚀", "«fix»", "日本語", 'the "quoted" bit', "C:\\work\\path", "tab\there")
_TOOLS = (
    ("c3_session", "list", 30),
    ("c3_session", "show", 14),
    ("c3_status", "sessions", 9),
    ("c3_status", "live", 6),
    ("c3_task", "list", 12),
    ("c3_task", "board", 6),
    ("c3_task", "add", 6),
    ("c3_task", "update", 6),
    ("c3_session", "note", 4),
    ("c3_session", "stale", 2),
    ("c3_session", "log", 3),
    ("c3_session", "snapshot", 2),
)
_HOOK_EVENTS = ("UserPromptSubmit", "Stop", "PreToolUse", "PostToolUse", "Notification", "PreCompact")
_END_REASONS = ("prompt_input_exit", "prompt_input_exit", "other", "logout", "clear")


_esc = json.encoder.encode_basestring  # a JSON string literal, non-ASCII kept as is


def _j(value) -> str:
    """A JSON value as text: a string literal, a number, or null (rows are f-strings of these:
    ``json.dumps`` per row would make writing the log the slowest part of the benchmark)."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return _esc(value)
    return repr(value)


def _line(fields: dict) -> bytes:
    return ("{" + ",".join(f'"{k}":{_j(v)}' for k, v in fields.items()) + "}\n").encode()


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


class _Text:
    """Cheap varied prose: a pool of sentences, joined."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.pool = []
        for _ in range(3000):
            words = rng.choices(_WORDS, k=rng.randint(5, 16))
            if rng.random() < 0.2:
                words.insert(rng.randrange(len(words)), f"`{rng.choice(_FILES)}`")
            if rng.random() < 0.04:
                words.insert(rng.randrange(len(words)), rng.choice(_SPICE))
            self.pool.append(" ".join(words).capitalize() + rng.choice((".", ".", "?", ":")))

    def __call__(self, lo: int, hi: int) -> str:
        target = self.rng.randint(lo, hi)
        out, n = [], 0
        while n < target:
            s = self.rng.choice(self.pool)
            out.append(s)
            n += len(s) + 1
        text = " ".join(out)
        if self.rng.random() < 0.1:
            text = text.replace(". ", ".\n", 1)
        return text


@dataclass
class _Sess:
    sid: str
    start: float
    end: float | None  # None: never ended (crashed, or running now)
    last: float  # the time of its last row
    project: bool
    pairs: list[tuple[float, float | None]] = field(default_factory=list)
    c3: list[str] = field(default_factory=list)
    cwd: str = ""
    clear_from: str | None = None  # begun by a /clear of this session


@dataclass
class LogPlan:
    """What was written, for the report (the check recomputes everything from the files)."""

    now: float
    rows: int = 0
    marks: int = 0
    activity_bytes: int = 0
    marks_bytes: int = 0
    phantoms: int = 0
    live_planned: list[str] = field(default_factory=list)  # expected live at `now`
    seconds: float = 0.0
    kinds: dict[str, int] = field(default_factory=dict)


def write_logs(
    project: str,
    config_dir: str,
    sessions: dict[str, float],
    *,
    rows: int,
    marks: int,
    seed: int = 7,
    now: float | None = None,
) -> LogPlan:
    """Write ``<project>/.c3/activity.jsonl`` (``rows`` rows) and ``.c3/session_marks.jsonl``
    (``marks`` marks). ``sessions``: the project's session ids -> when their transcript was last
    written (epoch seconds)."""
    started = time.perf_counter()
    now = time.time() if now is None else now
    rng = random.Random(seed)
    text = _Text(random.Random(seed + 1))
    plan = LogPlan(now=now)
    slug = "".join(ch if ch.isascii() and ch.isalnum() else "-" for ch in project)
    tfolder = os.path.join(config_dir, "projects", slug)
    worktrees = [f"{project}-wt/{b}" for b in ("feature-retry", "fix-auth", "spike-queue", "perf", "docs")]

    # ---- sessions and their hook rows
    ids = sorted(sessions)
    sess: list[_Sess] = []
    for sid in ids:
        end = min(sessions[sid], now - 3600)
        start = end - rng.uniform(600, 5 * 3600)
        sess.append(_Sess(sid, start, end, end, True))
    n_ph = max(50, rows // 75)  # 4,000 phantom sessions for 300,000 rows
    plan.phantoms = n_ph
    for _ in range(n_ph):
        start = now - rng.uniform(1.5 * DAY, SPAN_DAYS * DAY)
        dur = min(2 * DAY, rng.lognormvariate(8.0, 1.0))  # median ~50 minutes
        sess.append(_Sess(_uuid(rng), start, start + dur, start + dur, False))

    # The recent few: live now (a start, no end, a row minutes ago), ended minutes ago, quiet.
    proj, ph = [s for s in sess if s.project], [s for s in sess if not s.project]
    rng.shuffle(proj)
    rng.shuffle(ph)
    live = proj[:6] + ph[:3]
    ended = proj[6:9] + ph[3:5]
    quiet = proj[9:12] + ph[5:8]
    for s in live:
        s.start, s.end, s.last = now - rng.uniform(1800, 3 * 3600), None, now - rng.uniform(60, 480)
    for s in ended:
        s.start, s.end = now - rng.uniform(1800, 3600), now - rng.uniform(120, 420)
        s.last = s.end
    for s in quiet:
        s.start, s.end, s.last = now - rng.uniform(3 * 3600, 5 * 3600), None, now - rng.uniform(35 * 60, 2 * 3600)
    plan.live_planned = [s.sid for s in live]
    special = {s.sid for s in live + ended + quiet}
    for s in sess:
        if s.sid not in special and rng.random() < 0.05:
            s.end = None  # crashed long ago: a start and no end, quiet for months
    # Resumed sessions: two or three start/end pairs inside their span.
    for s in sess:
        end = s.end if s.end is not None else s.last
        k = 1 if s.sid in special or rng.random() < 0.75 else rng.randint(2, 3)
        cuts = sorted(rng.uniform(s.start, end) for _ in range(2 * (k - 1)))
        bounds = [s.start, *cuts, end]
        s.pairs = [(bounds[2 * i], bounds[2 * i + 1]) for i in range(k)]
        if s.end is None:
            s.pairs[-1] = (s.pairs[-1][0], None)
        s.c3 = [_uuid(rng) for _ in range(rng.randint(1, 2))]
        s.cwd = rng.choice(worktrees) if rng.random() < 0.02 else project
    # /clear chains: 8% of the old sessions began with a /clear of a session that ended then.
    old = [s for s in sess if s.sid not in special and s.end is not None]
    for s in rng.sample(old, len(old) * 8 // 100):
        if len(s.pairs) == 1:
            pred = rng.choice(old)
            if pred is not s and pred.end is not None and pred.end < s.start:
                s.clear_from = pred.sid

    out: list[tuple[float, bytes]] = []
    kinds: dict[str, int] = {}

    def add(ts: float, row: dict) -> None:
        row = {"ts": round(ts, 3), **row}
        out.append((row["ts"], _line(row)))
        kinds[row["kind"]] = kinds.get(row["kind"], 0) + 1

    by_id = {s.sid: s for s in sess}
    for s in sess:
        # A session still open names a claude that runs (pid 1 has run since boot: the fallback
        # believes it); an ended one, a random pid (gone, or reused since: either way not it).
        pid = 1 if s.end is None else rng.randint(1000, 4_000_000)
        tpath = os.path.join(tfolder, f"{s.sid}.jsonl")
        for i, (a, b) in enumerate(s.pairs):
            opened: dict = {
                "kind": "session_start",
                "session_id": s.sid,
                "source": "startup" if i == 0 else "resume",
                "claude_pid": pid,
            }
            if i == 0 and s.clear_from:
                pred = by_id[s.clear_from]
                add(
                    s.start - 0.1, {"kind": "session_end", "session_id": pred.sid, "reason": "clear", "claude_pid": pid}
                )
                opened["source"], opened["predecessor"] = "clear", pred.sid
            opened["cwd"] = s.cwd
            opened["transcript_path"] = tpath
            add(a, opened)
            if b is not None:
                reason = rng.choice(_END_REASONS[:-1])
                add(b, {"kind": "session_end", "session_id": s.sid, "reason": reason, "claude_pid": pid})
        if s.end is None and s.last > s.start:  # its last sign of life
            add(
                s.last,
                {
                    "kind": "tool_call",
                    "session_id": s.sid,
                    "c3_session_id": s.c3[0],
                    "tool": "c3_session",
                    "action": "list",
                },
            )

    # ---- marks (each with its session_mark row)
    mark_lines, mark_rows = _marks(rng, text, marks, [s.sid for s in proj], [s.sid for s in ph], now)
    n_mark_rows = min(len(mark_rows), rows // 5)
    for ts, row in rng.sample(mark_rows, n_mark_rows) if n_mark_rows < len(mark_rows) else mark_rows:
        add(ts, row)

    # ---- the bulk: tool calls, other hook events, C3 lifecycle rows, spread over sessions
    fill = max(0, rows - len(out))
    weights = [max(60.0, ((s.end if s.end is not None else s.last) - s.start)) ** 0.7 for s in sess]
    tools, tool_w = [(t, a) for t, a, _ in _TOOLS], [w for _, _, w in _TOOLS]
    picks = rng.choices(tools, tool_w, k=fill)
    uniform, rand = rng.uniform, rng.random
    n_calls = 0
    for s, (tool, action) in zip(rng.choices(sess, weights, k=fill), picks):
        hi = s.end if s.end is not None else s.last
        ts = uniform(s.start + 0.5, max(s.start + 1.0, hi - 0.5))
        c3 = s.c3[0] if len(s.c3) == 1 or rand() < 0.5 else s.c3[1]
        r = rand()
        if r < 0.84:  # the bulk, written directly (the same bytes _line would write)
            ts = round(ts, 3)
            out.append(
                (
                    ts,
                    (
                        f'{{"ts":{ts!r},"kind":"tool_call","session_id":"{s.sid}","c3_session_id":"{c3}",'
                        f'"tool":"{tool}","action":"{action}"}}\n'
                    ).encode(),
                )
            )
            n_calls += 1
        elif r < 0.91:
            add(
                ts,
                {
                    "kind": "hook",
                    "session_id": s.sid,
                    "event": _HOOK_EVENTS[int(rand() * len(_HOOK_EVENTS))],
                    "claude_pid": 1000 + int(rand() * 4_000_000),
                },
            )
        elif r < 0.95:
            add(
                ts,
                {
                    "kind": "log",
                    "session_id": s.sid,
                    "c3_session_id": c3,
                    "event_type": ("decision", "discovery", "blocker", "progress")[int(rand() * 4)],
                },
            )
        elif r < 0.975:
            add(ts, {"kind": "snapshot", "session_id": s.sid, "c3_session_id": c3})
        elif r < 0.99:
            lifecycle: dict = {"kind": "c3_start", "session_id": s.sid, "c3_session_id": c3}
            if rand() < 0.5:
                lifecycle["description"] = text(20, 160)
            add(ts, lifecycle)
        else:
            add(ts, {"kind": "c3_end", "session_id": s.sid, "c3_session_id": c3})

    kinds["tool_call"] = kinds.get("tool_call", 0) + n_calls
    out.sort(key=lambda item: item[0])  # one file, in time order (a /clear end before its start)
    state = Path(project, ".c3")
    state.mkdir(parents=True, exist_ok=True)
    data = b"".join(line for _, line in out)
    Path(state, "activity.jsonl").write_bytes(data)
    mdata = b"".join(mark_lines)
    Path(state, "session_marks.jsonl").write_bytes(mdata)
    plan.rows, plan.marks = len(out), len(mark_lines)
    plan.activity_bytes, plan.marks_bytes = len(data), len(mdata)
    plan.kinds = dict(sorted(kinds.items(), key=lambda kv: -kv[1]))
    plan.seconds = time.perf_counter() - started
    return plan


def _mark(
    rng: random.Random, text: _Text, ts: float, sid: str, successors: list[str], op: str | None = None
) -> tuple[bytes, dict]:
    """One mark line (every field, nulls included, as the spec's row) and its activity row."""
    op = op or rng.choices(("stale", "unstale", "note"), (45, 15, 40))[0]
    reason = successor = summary = next_steps = None
    if op == "stale":
        reason = text(30, 260)
        if rng.random() < 0.3:
            successor = rng.choice(successors)
            if successor == sid:
                successor = None
    elif op == "unstale":
        reason = text(20, 200) if rng.random() < 0.5 else None
    else:
        summary = text(60, 520)
        next_steps = text(30, 300) if rng.random() < 0.5 else None
    by = "agent" if rng.random() < 0.7 else "user"
    by_session = str(uuid.UUID(int=rng.getrandbits(128), version=4)) if rng.random() < 0.8 else None
    mark = {
        "ts": round(ts, 6),
        "provider": "claude-code",
        "id": sid,
        "op": op,
        "reason": reason,
        "successor": successor,
        "summary": summary,
        "next_steps": next_steps,
        "by": by,
        "by_session": by_session,
    }
    row: dict = {"kind": "session_mark", "target": sid, "op": op, "by": by}
    if by_session:
        row["by_session"] = by_session
    if reason:
        row["reason"] = reason[:200]
    if successor:
        row["successor"] = successor
    return _line(mark), row


def _marks(
    rng: random.Random, text: _Text, n: int, project_ids: list[str], phantom_hooks: list[str], now: float
) -> tuple[list[bytes], list[tuple[float, dict]]]:
    if n <= 0:
        return [], []
    # Targets: 6% on the project's sessions (skewed; a quarter of them never marked), the rest on
    # phantom ids: the hook phantoms and many more seen only here.
    marked = project_ids[: max(1, len(project_ids) * 3 // 4)]
    cum = list(itertools.accumulate(1.0 / (1 + i) ** 0.8 for i in range(len(marked))))
    phantoms = phantom_hooks + [_uuid(rng) for _ in range(max(100, n // 6))]
    times = sorted(now - rng.uniform(10 * 60, SPAN_DAYS * DAY) for _ in range(n))
    lines: list[bytes] = []
    rows: list[tuple[float, dict]] = []
    i = 0
    while len(lines) < n:
        ts = times[i] if i < len(times) else times[-1]
        i += 1
        r = rng.random()
        if r < 0.01 and rows:  # concurrent writers: this line's ts a few ms before the last's
            ts = rows[-1][0] - rng.uniform(0, 0.005)
        elif r < 0.015:  # a fold of older state: a line far older than its place
            ts -= rng.uniform(DAY, 40 * DAY)
        if rng.random() < 0.06:
            sid, successors = rng.choices(marked, cum_weights=cum)[0], project_ids
        else:
            sid, successors = rng.choice(phantoms), phantoms
        line, row = _mark(rng, text, ts, sid, successors)
        lines.append(line)
        rows.append((ts, row))
        if rng.random() < 0.004 and len(lines) < n:  # an exact tie: same id, same book, same ts
            again = json.loads(line)
            op = "note" if again["op"] == "note" else rng.choice(("stale", "unstale"))
            line2, row2 = _mark(rng, text, again["ts"], sid, successors, op)
            lines.append(line2)
            rows.append((again["ts"], row2))
    return lines, rows


# ------------------------------------------------------------------------------------ appends


def batch(
    project: str, ids: list[str], rng: random.Random, *, rows: int = 1000, marks: int = 100, text: _Text | None = None
) -> tuple[bytes, bytes]:
    """``rows`` activity rows (``marks`` of them the session_mark rows of the ``marks`` marks
    returned too) as of now: tool calls of a few active sessions, hook events, a couple of session
    starts and an end. Returns (activity bytes, marks bytes)."""
    text = text or _Text(rng)
    now = time.time()
    active = rng.sample(ids, min(4, len(ids)))
    phantoms = [_uuid(rng) for _ in range(3)]
    act: list[bytes] = []
    mk: list[bytes] = []
    step = 1e-3
    t = now - rows * step
    # The sessions active in this batch were (re)started by a hook first, as Claude Code does on
    # a resume; one more session starts and one ends.
    structural = [
        {"kind": "session_start", "session_id": sid, "source": "resume", "claude_pid": 4242, "cwd": project}
        for sid in active
    ]
    structural += [
        {"kind": "session_start", "session_id": phantoms[0], "source": "startup", "claude_pid": 4343, "cwd": project},
        {"kind": "session_end", "session_id": rng.choice(ids), "reason": "prompt_input_exit", "claude_pid": 4444},
    ]
    for row in structural:
        act.append(_line({"ts": round(t, 3), **row}))
        t += step
    mark_at = set(rng.sample(range(len(act), rows), min(marks, rows - len(act))))
    while len(act) < rows:
        ts = round(t, 3)
        if len(act) in mark_at:
            sid = rng.choice(ids) if rng.random() < 0.5 else rng.choice(phantoms)
            mts = ts if rng.random() < 0.95 else ts - rng.uniform(DAY, 30 * DAY)  # older state, now and then
            line, row = _mark(rng, text, mts, sid, ids)
            mk.append(line)
            act.append(_line({"ts": ts, **row}))
        elif rng.random() < 0.9:
            sid = rng.choice(active + phantoms)
            tool, action = rng.choice(_TOOLS)[:2]
            act.append(
                _line(
                    {
                        "ts": ts,
                        "kind": "tool_call",
                        "session_id": sid,
                        "c3_session_id": sid[::-1],
                        "tool": tool,
                        "action": action,
                    }
                )
            )
        else:
            act.append(
                _line(
                    {
                        "ts": ts,
                        "kind": "hook",
                        "session_id": rng.choice(active),
                        "event": rng.choice(_HOOK_EVENTS),
                        "claude_pid": 4242,
                    }
                )
            )
        t += step
    return b"".join(act), b"".join(mk)


def append_round(
    project: str, ids: list[str], rng: random.Random, *, rows: int = 1000, marks: int = 100
) -> tuple[int, int]:
    """Append a ``batch`` to the project's logs. Returns the bytes appended to (activity, marks)."""
    a, m = batch(project, ids, rng, rows=rows, marks=marks)
    state = Path(project, ".c3")
    state.mkdir(parents=True, exist_ok=True)
    with open(state / "activity.jsonl", "ab") as f:
        f.write(a)
    with open(state / "session_marks.jsonl", "ab") as f:
        f.write(m)
    return len(a), len(m)


REWRITES = ("truncated", "replaced", "rewritten")


def rewrite(project: str, ids: list[str], rng: random.Random, how: str) -> str:
    """Change both logs the way an append-only reader must notice, then add new rows:

    - ``truncated``: cut in place at a line boundary at 60% (the file ends up shorter than any
      offset a fold had reached), then a 1,000-row batch appended;
    - ``replaced``: a new file renamed over it (another inode): the first 97% of the lines, then a
      batch large enough that the new file is longer than the old one (its size alone says
      nothing);
    - ``rewritten``: the same, written in place (same inode, longer): only the bytes before a
      fold's offset tell.

    Returns what was done, for the report."""
    state = Path(project, ".c3")
    done = []
    for name, is_marks in (("activity.jsonl", False), ("session_marks.jsonl", True)):
        path = state / name
        data = path.read_bytes()
        cut = data.rfind(b"\n", 0, int(len(data) * (0.6 if how == "truncated" else 0.97))) + 1
        if how == "truncated":
            a, m = batch(project, ids, rng)
            os.truncate(path, cut)
            with open(path, "ab") as f:
                f.write(m if is_marks else a)
            done.append(f"{name} {len(data) / MB:.1f} -> {cut / MB:.1f} MB + {len(m if is_marks else a) / 1e3:.0f} KB")
            continue
        need = len(data) - cut
        new = b""
        while len(new) <= need:  # marks lines are ~500 B, activity rows ~200 B
            a, m = batch(project, ids, rng, rows=max(1000, need // 150), marks=max(100, need // 400))
            new += m if is_marks else a
        body = data[:cut] + new
        if how == "replaced":
            tmp = path.with_name(f".{name}.bench-{os.getpid()}")
            tmp.write_bytes(body)
            os.replace(tmp, path)
        else:
            with open(path, "r+b") as f:
                f.seek(cut)
                f.write(new)
                f.truncate()
        done.append(
            f"{name} {len(data) / MB:.1f} -> {len(body) / MB:.1f} MB (new bytes from {100 * cut / len(data):.0f}%)"
        )
    return f"{how}: " + "; ".join(done)


# ------------------------------------------------------------------------------------ folds


def read_lines(path: Path) -> list[dict]:
    """Every line of the file that parses as one JSON object, in file order."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for line in data.split(b"\n"):
        if not line:
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def _num(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def fold_marks(records: list[dict]) -> dict[str, dict]:
    """id -> {"stale": (reason, successor, by, ts) or None, "note": (summary, next_steps, ts) or
    None, "marked": True}: last wins by ``ts``, a tie to the later line."""
    stale: dict[str, dict] = {}
    note: dict[str, dict] = {}
    for rec in records:
        sid, op, ts = rec.get("id"), rec.get("op"), rec.get("ts")
        if not isinstance(sid, str) or op not in ("stale", "unstale", "note") or not _num(ts):
            continue
        book = note if op == "note" else stale
        held = book.get(sid)
        if held is None or ts >= held["ts"]:
            book[sid] = rec
    out = {}
    for sid in stale.keys() | note.keys():
        s, n = stale.get(sid), note.get(sid)
        out[sid] = {
            "stale": (s.get("reason"), s.get("successor"), s.get("by"), s["ts"]) if s and s["op"] == "stale" else None,
            "note": (n.get("summary"), n.get("next_steps"), n["ts"]) if n else None,
            "marked": True,
        }
    return out


def fold_live(records: list[dict], now: float) -> tuple[dict[str, float], dict[str, float], set[str]]:
    """(live, near, woken): host session -> its last row's ts, for sessions the activity
    fallback reads live at ``now``; ``near`` holds those within a minute of the window's edge
    (either answer is defensible while the clock moves, so the check skips them). ``woken``: open
    sessions (started, not ended) with a row after more than a week of silence and no new
    ``session_start`` (Claude Code writes one on every resume, so real logs hardly hold these; a
    fold may fairly forget a session that quiet, so the check reports them apart)."""
    started: dict[str, float] = {}
    holder: dict[str, tuple[int, float]] = {}  # the claude a session_start named, and when
    last: dict[str, float] = {}
    woken: set[str] = set()
    for rec in records:
        sid, ts = rec.get("session_id"), rec.get("ts")
        if not isinstance(sid, str) or not sid or not isinstance(ts, (int, float)) or isinstance(ts, bool):
            continue
        kind = rec.get("kind")
        if kind == "session_start":
            started[sid] = ts
            pid = rec.get("claude_pid")
            if isinstance(pid, int) and not isinstance(pid, bool) and 0 < pid < 1 << 31:
                holder[sid] = (pid, ts)
            else:
                holder.pop(sid, None)
            woken.discard(sid)
        elif kind == "session_end":
            started.pop(sid, None)
            woken.discard(sid)
        elif sid in started and ts - last.get(sid, ts) > WEEK:
            woken.add(sid)
        last[sid] = max(last.get(sid, 0.0), ts)
    live, near = {}, {}
    for sid in started:
        if sid in holder and not _claude_runs(*holder[sid]):
            continue  # the claude its hook named is gone (or its pid was reused since)
        age = now - last[sid]
        if abs(age - LIVE_WINDOW) < 60:
            near[sid] = last[sid]
        elif age <= LIVE_WINDOW:
            live[sid] = last[sid]
    return live, near, woken & set(live)


def _claude_runs(pid: int, hooked_at: float) -> bool:
    """A process with that pid runs, started before the hook named it (2 s of slack)."""
    import psutil

    try:
        proc = psutil.Process(pid)
        return proc.create_time() <= hooked_at + 2 and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True


def fresh_heartbeats(project: str, now: float) -> set[str]:
    """Host sessions with a fresh heartbeat file (a server running, or one just gone)."""
    return {
        hb["host_session_id"]
        for hb in raw_heartbeats(Path(project, ".c3", "live"))
        if _num(hb.get("ts"))
        and -FUTURE_SLACK <= now - hb["ts"] <= HEARTBEAT_TTL
        and isinstance(hb.get("host_session_id"), str)
    }
