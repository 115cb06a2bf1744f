"""Shared pieces of the stress suite (``python -m stress``): the sandbox, projects with real
transcripts (``stress.transcripts``), spawning this checkout's processes, raw (independent)
readers of the shared files, percentiles and the figures table.

Every process the suite starts runs THIS checkout (``PYTHONPATH`` = the repository root) inside a
throw-away sandbox: ``CLAUDE_CONFIG_DIR``, ``C3_HOME`` and ``CLAUDE_PROJECT_DIR`` all point into it,
and the suite's own process uses the same environment (it calls the library to read back).

The checks here never use c3async's readers: a mark file is split on ``\\n`` and each line goes
through ``json.loads``, so a bug in ``c3async.ground.jsonl`` cannot hide itself.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .transcripts import (
    ai_title_line,
    assistant_line,
    claude_slug,
    custom_title_line,
    render,
    tool_result_line,
    user_line,
)

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
# What another local account runs: the system's Python (ours may sit in a folder it cannot enter).
SYSTEM_PYTHON = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.access(p, os.X_OK)), None)


def as_nobody(code: str, *args: str, wait: bool = True, timeout: float = 60, **popen: Any) -> Any:
    """``SYSTEM_PYTHON -I -c CODE ARGS`` as the account ``nobody`` (root only), from ``/`` with a
    bare PATH: another local account. ``wait``: its CompletedProcess; else the running Popen."""
    import pwd

    nobody = pwd.getpwnam("nobody")
    argv = [SYSTEM_PYTHON or "python3", "-I", "-c", code, *args]
    ids: dict[str, Any] = dict(
        text=True, env={"PATH": "/usr/bin:/bin"}, user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[], cwd="/"
    )
    if not wait:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **ids, **popen)
    return subprocess.run(argv, capture_output=True, timeout=timeout, **ids, **popen)


# Variables a spawned process must not inherit from whoever runs the suite (a real Claude Code
# session runs us with its own ids and folders).
_SCRUB = ("CLAUDE_", "C3_")


# ----------------------------------------------------------------------------- results / table


class Result:
    """One scenario's figures and invariant breaks."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.rows: list[tuple[str, str]] = []
        self.breaks: list[str] = []
        self.notes: list[str] = []
        self.wall = 0.0

    def fig(self, label: str, value: Any) -> None:
        self.rows.append((label, str(value)))

    def check(self, ok: bool, invariant: str, detail: str = "") -> bool:
        """Record an invariant; a False ``ok`` is a break, printed and failing the run."""
        if not ok:
            self.breaks.append(f"{invariant}" + (f": {detail}" if detail else ""))
        return ok

    def note(self, text: str) -> None:
        self.notes.append(text)


def print_table(results: list[Result], mode: str, wall: float, out=sys.stdout) -> None:
    width = max([len(label) for r in results for label, _ in r.rows] + [30]) + 2
    lines = [f"c3async stress ({mode}; {os.cpu_count()} cores; python {sys.version.split()[0]})"]
    for r in results:
        lines.append("")
        lines.append(f"-- {r.name}  ({r.wall:.1f} s)  {'OK' if not r.breaks else 'BROKEN'}")
        for label, value in r.rows:
            lines.append(f"  {label:<{width}}{value}")
        for n in r.notes:
            lines.append(f"  note: {n}")
        for b in r.breaks:
            lines.append(f"  INVARIANT BROKEN: {b}")
    lines.append("")
    broken = sum(len(r.breaks) for r in results)
    lines.append(
        f"total wall time {wall:.1f} s; " + ("all invariants hold" if not broken else f"{broken} invariant break(s)")
    )
    out.write("\n".join(lines) + "\n")
    out.flush()


def pct(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank); 0.0 for no values."""
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))]


def ms(value: float) -> str:
    return f"{value * 1e3:.1f} ms"


def lat(values: list[float]) -> str:
    """p50 / p99 / max of latencies in seconds, as milliseconds."""
    if not values:
        return "-"
    return f"p50 {ms(pct(values, 50))}  p99 {ms(pct(values, 99))}  max {ms(max(values))}  (n={len(values)})"


# ----------------------------------------------------------------------------- sandbox


class Sandbox:
    """A temp root holding the Claude config dir, C3_HOME, the projects and the logs."""

    def __init__(self, keep: bool = False) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="c3stress-")).resolve()
        self.config = self.root / "claude"
        self.c3home = self.root / "c3home"
        self.work = self.root / "work"
        self.logs = self.root / "logs"
        for d in (self.config, self.c3home, self.work, self.logs):
            d.mkdir(parents=True)
        self.keep = keep
        self._saved_env: dict[str, str] | None = None
        self._logs: list = []  # the log files handed to children, closed with the sandbox

    def env(self, project: str | Path | None = None, **extra: str) -> dict[str, str]:
        """The environment of a spawned process: this checkout, the sandbox, ``extra``."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUB)}
        env.update(
            PYTHONPATH=str(REPO),
            CLAUDE_CONFIG_DIR=str(self.config),
            C3_HOME=str(self.c3home),
            PYTHONDONTWRITEBYTECODE="1",
        )
        if project is not None:
            env["CLAUDE_PROJECT_DIR"] = str(project)
        env.update(extra)
        return env

    def activate(self) -> None:
        """Point this process (which calls the library to read back) at the sandbox too."""
        self._saved_env = dict(os.environ)
        for k in [k for k in os.environ if k.startswith(_SCRUB)]:
            del os.environ[k]
        os.environ.update(CLAUDE_CONFIG_DIR=str(self.config), C3_HOME=str(self.c3home))

    def close(self) -> None:
        for f in self._logs:
            f.close()
        if self._saved_env is not None:
            os.environ.clear()
            os.environ.update(self._saved_env)
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)

    def log(self, name: str):
        """A log file of ``logs/`` for a child's stderr (the child keeps its own descriptor; this
        one is closed with the sandbox)."""
        f = open(self.logs / name, "ab")
        self._logs.append(f)
        return f


def check_checkout(sb: Sandbox) -> str | None:
    """None when a spawned process imports this checkout's c3async; else what it imported."""
    out = subprocess.run(
        [PY, "-c", "import c3async; print(c3async.__file__)"],
        env=sb.env(),
        capture_output=True,
        text=True,
        cwd=sb.root,
        timeout=60,
    )
    path = out.stdout.strip()
    if out.returncode != 0 or not path.startswith(str(REPO / "c3async")):
        return path or out.stderr.strip()[-300:]
    return None


def c3async_cmd(*args: str) -> list[str]:
    return [PY, "-m", "c3async", *args]


# ----------------------------------------------------------------------------- projects


@dataclass
class SessionTruth:
    id: str
    path: Path
    first_prompt: str
    last_prompt: str
    ai_title: str | None = None
    custom_title: str | None = None


@dataclass
class Project:
    path: str
    folder: Path  # the transcripts folder
    sessions: dict[str, SessionTruth] = field(default_factory=dict)

    @property
    def ids(self) -> list[str]:
        return list(self.sessions)

    @property
    def c3(self) -> Path:
        return Path(self.path) / ".c3"

    @property
    def marks(self) -> Path:
        return self.c3 / "session_marks.jsonl"

    @property
    def activity(self) -> Path:
        return self.c3 / "activity.jsonl"


def make_project(
    sb: Sandbox,
    name: str,
    sessions: int,
    rng: random.Random,
    *,
    big_every: int = 0,
    custom_every: int = 0,
    untitled_every: int = 0,
) -> Project:
    """A project folder and ``sessions`` transcripts of it: a prompt, a reply, an ai-title
    (every ``custom_every``-th one a custom title instead; every ``untitled_every``-th none);
    every ``big_every``-th one padded with tool results past 320 KiB, so the catalog reads it in
    head and tail windows rather than whole."""
    project = sb.work / name
    project.mkdir(parents=True)
    folder = sb.config / "projects" / claude_slug(str(project))
    folder.mkdir(parents=True)
    proj = Project(str(project), folder)
    base = time.time() - 3 * 86400
    for i in range(sessions):
        sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        ts = base + i * 600
        cwd = str(project)
        prompt = f"{name} task {i}: fix the {rng.choice(('retry', 'cache', 'queue', 'parser'))} bug"
        lines = [{"type": "permission-mode", "permissionMode": "default", "sessionId": sid}]
        u = user_line(sid, cwd, prompt, ts)
        a = assistant_line(sid, cwd, f"Looking at {name} {i}.", ts + 1, u["uuid"])
        lines += [u, a]
        truth = SessionTruth(sid, folder / f"{sid}.jsonl", prompt, prompt)
        if big_every and i % big_every == 0:
            parent = a["uuid"]
            for k in range(8):
                t = tool_result_line(sid, cwd, f"chunk {k} " + "ok " * 16000, ts + 2 + k, parent)
                lines.append(t)
                parent = t["uuid"]
        if custom_every and i % custom_every == 1:
            truth.custom_title = f"custom {name} {i}"
            lines.append(custom_title_line(sid, truth.custom_title))
        elif not (untitled_every and i % untitled_every == 2):
            truth.ai_title = f"AI title {name} {i}"
            lines.append(ai_title_line(sid, truth.ai_title))
        truth.path.write_bytes(render(lines))
        os.utime(truth.path, (ts + 60, ts + 60))
        proj.sessions[sid] = truth
    return proj


def register(sb: Sandbox, project: Project) -> None:
    """``c3async sessions --project P`` registers P (the Hub serves registered projects only)."""
    out = subprocess.run(
        c3async_cmd("sessions", "--project", project.path, "--json"),
        env=sb.env(project.path),
        cwd=project.path,
        capture_output=True,
        timeout=120,
    )
    if out.returncode != 0:
        raise RuntimeError(f"c3async sessions failed: {out.stderr.decode()[-500:]}")


# ----------------------------------------------------------------------------- raw readers


@dataclass
class RawLog:
    records: list[dict]  # every line that parses as one JSON object, in file order
    offsets: list[int]  # where each record's line starts
    bad: list[tuple[int, bytes]]  # (offset, line) of lines that do not parse as one object
    size: int
    ends_with_newline: bool
    data: bytes = b""


def read_raw(path: Path, keep_data: bool = False) -> RawLog:
    """Split on ``\\n``; each line through ``json.loads``. An unterminated tail is a bad line."""
    try:  # not a FIFO a trap planted: it would block
        data = path.read_bytes() if path.is_file() else b""
    except OSError:
        data = b""
    records, offsets, bad = [], [], []
    pos = 0
    for line in data.split(b"\n"):
        start = pos
        pos += len(line) + 1
        if not line:
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: a line nested too deep (a trap's)
            bad.append((start, line))
            continue
        if not isinstance(obj, dict):
            bad.append((start, line))
            continue
        records.append(obj)
        offsets.append(start)
    return RawLog(records, offsets, bad, len(data), data.endswith(b"\n") or not data, data if keep_data else b"")


def mark_tag(rec: dict) -> str | None:
    """The tag a scenario put in a mark: the summary of a note, else the reason."""
    return rec.get("summary") if rec.get("op") == "note" else rec.get("reason")


def oracle_fold(records: list[dict]) -> tuple[dict[str, dict], dict[str, dict]]:
    """Last-wins fold by time (the greatest ``ts``; a tie goes to the later line), written
    independently of ``MarkBook``. Concurrent writers take their ``ts`` before the lock, so
    file order and time order can differ by a few milliseconds; the later decision wins."""
    stale: dict[str, dict] = {}
    note: dict[str, dict] = {}
    for rec in records:
        book = note if rec.get("op") == "note" else stale
        held = book.get(rec["id"])
        if held is None or rec["ts"] >= held["ts"]:
            book[rec["id"]] = rec
    return stale, note


def compare_fold(book, records: list[dict]) -> list[str]:
    """Differences between a refreshed ``MarkBook`` and the oracle fold of ``records``."""
    stale, note = oracle_fold(records)
    problems = []
    ids = set(stale) | set(note)
    if book.ids() != ids:
        problems.append(
            f"ids differ: book-only {sorted(book.ids() - ids)[:3]}, oracle-only {sorted(ids - book.ids())[:3]}"
        )
    for sid in sorted(ids):
        got = book.get(sid)
        s, n = stale.get(sid), note.get(sid)
        want_stale = (
            (s["reason"], s.get("successor"), s["by"], s["ts"]) if s is not None and s["op"] == "stale" else None
        )
        want_note = (n.get("summary"), n.get("next_steps"), n["ts"]) if n is not None else None
        got_stale = (
            (got.stale.reason, got.stale.successor, got.stale.by, got.stale.ts)
            if got is not None and got.stale is not None
            else None
        )
        got_note = (
            (got.note.summary, got.note.next_steps, got.note.ts) if got is not None and got.note is not None else None
        )
        if got_stale != want_stale or got_note != want_note:
            short = lambda v: tuple(x[:40] if isinstance(x, str) else x for x in v) if v else v  # noqa: E731
            problems.append(
                f"{sid}: book stale={short(got_stale)} note={short(got_note)}, "
                f"oracle stale={short(want_stale)} note={short(want_note)}"
            )
        if len(problems) > 5:
            break
    return problems


def check_activity(res: Result, marks: list[dict], acts: list[dict], *, strict_equal: bool = True) -> None:
    """Every mark has its ``session_mark`` activity row: the multisets of (session, op, by,
    by_session) agree (equal, or with ``strict_equal=False`` the marks' contained in the rows'),
    and each writer's marks and rows come in the same order."""
    rows = [a for a in acts if a.get("kind") == "session_mark"]
    key_m = Counter((m["id"], m["op"], m["by"], m.get("by_session")) for m in marks)
    key_a = Counter((a.get("target"), a.get("op"), a.get("by"), a.get("by_session")) for a in rows)
    missing = key_m - key_a
    extra = key_a - key_m
    res.check(
        not missing,
        "every mark has its session_mark activity row",
        f"{sum(missing.values())} marks without a row, e.g. {list(missing)[:2]}",
    )
    if strict_equal:
        res.check(
            not extra,
            "every session_mark activity row has its mark",
            f"{sum(extra.values())} rows without a mark, e.g. {list(extra)[:2]}",
        )


def per_writer_order(marks: list[dict], acts: list[dict], writers: set[str]) -> list[str]:
    """For each sequential writer (its by_session), the activity rows must follow the marks'
    order: row k is about mark k. Returns the writers where that fails."""
    seq_m: dict[str, list[tuple]] = {w: [] for w in writers}
    seq_a: dict[str, list[tuple]] = {w: [] for w in writers}
    for m in marks:
        if m.get("by_session") in seq_m:
            seq_m[m["by_session"]].append((m["id"], m["op"]))
    for a in acts:
        if a.get("kind") == "session_mark" and a.get("by_session") in seq_a:
            seq_a[a["by_session"]].append((a.get("target"), a.get("op")))
    return [w for w in writers if seq_m[w] != seq_a[w]]


# ----------------------------------------------------------------------------- processes


def rss_of(pids: list[int]) -> dict[int, int]:
    import psutil

    out = {}
    for pid in pids:
        try:
            out[pid] = psutil.Process(pid).memory_info().rss
        except Exception:
            pass
    return out


def raw_heartbeats(folder: Path) -> list[dict]:
    """Every heartbeat file in ``folder`` that parses as a JSON object, read raw (json.loads:
    the checks never trust c3async's own reader)."""
    out = []
    try:
        names = os.listdir(folder)
    except OSError:
        return out
    for name in names:
        if name.startswith(".") or not name.endswith(".json"):
            continue
        try:
            hb = json.loads((folder / name).read_bytes())
        except (OSError, ValueError):
            continue
        if isinstance(hb, dict):
            out.append(hb)
    return out


def heartbeat_pids(project: Project) -> dict[int, str | None]:
    """pid -> host session of each heartbeat file in the project (read raw)."""
    out = {}
    for hb in raw_heartbeats(project.c3 / "live"):
        try:
            out[int(hb["pid"])] = hb.get("host_session_id")
        except (KeyError, TypeError, ValueError):
            continue
    return out


def wait_go(go: float) -> str:
    """Python source: sleep until wall-clock ``go`` (so writer processes start together)."""
    return f"import time as _t\nwhile _t.time() < {go!r}: _t.sleep(0.002)\n"


def kill_all(procs: list[subprocess.Popen]) -> None:
    """SIGKILL the suite's own leftover children (by pid), then reap them."""
    for p in procs:
        if p.poll() is None:
            try:
                p.kill()
            except OSError:
                pass
    for p in procs:
        try:
            p.wait(timeout=10)
        except Exception:
            pass
