"""Hostile input: a generated world of booby-trapped repositories, transcripts and documents
(``hostile_corpus.py``), driven through every door: the CLI, the hook, a real ``c3async serve``
over stdio, and the Hub. Each step is its own process with a timeout; HOME is a decoy folder.

Invariants, each a named check (a break names the step, the command and what was seen, with
control characters escaped by repr()):

- the decoy HOME is byte-for-byte unchanged (files, modes, mtimes, symlink targets, listings);
- no hang (a step past its timeout is killed and named), no traceback, exit status 0, 1 or 2,
  and the one expected where it matters: a write through a symlinked ``.c3`` or log is refused
  (1 or 2) with a message naming it; a read of one says so on stderr;
- no raw ESC, C0/C1 control, DEL or bidi control in any output that is not JSON; every JSON
  output parses; no decoy file's text is ever shown;
- the hostile sessions are still listed (a bad line costs that line), special files and links
  never are; documents c3async cannot read, or from a newer version, are never rewritten; fields
  it does not know survive a rewrite;
- the MCP server answers hostile calls with tool results (never a hang or a traceback) and exits
  by itself once stdin closes;
- the Hub refuses every API request without the token and leaks no transcript text, answers
  hostile bodies with 4xx (never 500), and sends a Content-Security-Policy on every response;
- a mark is in its file exactly when the door reported it written (once; never when refused);
  ``--json`` gives hostile text back as it is, escaped by JSON only;
- afterwards the clean project lists all its sessions and its marks fold last-wins (read back
  with ``json.loads`` per line, independently of c3async).

Phases: the CLI and the hook (independent lanes in parallel, one lane per door of each trap
repository), the MCP servers, the Hub, final listings, then two sub-steps on their own so that
what they blind does not hide the rest: ``$C3_HOME/projects.json`` and ``config.json`` nested
100,000 deep and then symlinked into the decoy, and a symlink loop, a FIFO and a file in
``$CLAUDE_CONFIG_DIR/projects``. Every step's command, exit status, stdout and stderr (cut to
64 KiB) are in ``logs/hostile-steps/`` (kept with ``--keep``).
"""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar
from urllib.parse import quote

import anyio

from c3async.ground.project import resolve

from . import hostile_corpus as hc
from .harness import PY, Result, Sandbox, c3async_cmd, compare_fold, mark_tag, oracle_fold, read_raw

MAX_LINE = 2 << 20  # no line of a log may be longer: "logged strings are bounded" (12 MB was accepted)
BIG_ARG = 120_000  # the longest argv string Linux passes (MAX_ARG_STRLEN is 128 KiB)
HUGE = 12 << 20  # the 12 MB note of the issue (over MCP and HTTP: argv cannot carry it)
UNKNOWN_ACTION = f"{hc.OSC0}{hc.SHELL}unknown-action" + "A" * 10_000

SERVE_WRAPPER = r"""
import json, os, subprocess, sys, time
record, plant = sys.argv[1], sys.argv[2]
if plant != "-":  # Claude Code's pid file for this (the server's parent) process, booby-trapped
    folder = os.path.join(os.environ["CLAUDE_CONFIG_DIR"], "sessions")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{os.getpid()}.json")
    with open(record + ".plant", "w") as f:
        f.write(path)
    if plant == "fifo":
        os.mkfifo(path)
    else:
        with open(path, "w") as f:
            f.write('{"pid":%d,"sessionId":%s}' % (os.getpid(), "[" * 100000 + "]" * 100000))
p = subprocess.Popen([sys.executable, "-m", "c3async", "serve"])
rc = p.wait()
with open(record, "w") as f:
    f.write(json.dumps({"rc": rc, "t": time.time()}))
sys.exit(rc if rc >= 0 else 128 - rc)
"""


# ----------------------------------------------------------------------------- showing things


def show(value: str | bytes | None, limit: int = 160) -> str:
    """``value`` cut to ``limit`` and repr()'d: control characters come out escaped."""
    if value is None:
        return "None"
    cut = value[:limit]
    text = repr(cut)
    if len(value) > limit:
        text += f"...(+{len(value) - limit})"
    return text


def gist(data: bytes) -> str:
    """Where a traceback in ``data`` ends up: its last ``File`` line and the exception."""
    text = data.decode("utf-8", "replace")
    at = text.find("Traceback (most recent call last):")
    if at < 0:
        return tail(data)
    before = text[:at].rstrip().splitlines()[-1:]  # a log line naming what failed, if any
    where, what = "", ""
    for line in text[at:].splitlines()[1:]:
        if line.startswith("  File "):
            where = line.strip()
        elif not line.startswith(" "):
            what = line
            break
    lead = f"after {show(before[0], 100)}: " if before else ""
    return f"{lead}{show(where, 120)} -> {show(what, 200)}"


def tail(data: bytes, limit: int = 240) -> str:
    data = data.strip()
    return show(data[-limit:] if len(data) > limit else data, limit)


# ----------------------------------------------------------------------------- steps


@dataclass
class Step:
    name: str
    args: list[str | bytes]
    project: Path | str | None = None  # CLAUDE_PROJECT_DIR and the cwd
    expect: str = "ok"  # ok | refuse | warn | any
    names: tuple[str, ...] = ()  # a refusal (or a warning) must mention one of these
    json: bool = False
    stdin: bytes | None = None
    env: dict[str, str] = field(default_factory=dict)
    ack: tuple[str, str, str] | None = None  # (tag, op, session id) of a mark this step writes


@dataclass
class Outcome:
    step: Step
    rc: int | None
    out: bytes
    err: bytes
    wall: float
    hung: bool


@dataclass
class Call:
    """One MCP tool call and what it must give."""

    tool: str
    args: dict
    expect: str = "ok"  # ok | error | any
    names: tuple[str, ...] = ()
    ack: tuple[str, str, str] | None = None


class Hostile:
    def __init__(self, sb: Sandbox, world: hc.World, quick: bool, seed: int) -> None:
        self.sb, self.w, self.quick, self.seed = sb, world, quick, seed
        self.res = Result("hostile input")
        self.timeout = 15.0 if quick else 30.0
        self.lock = threading.Lock()
        self.outcomes: list[Outcome] = []
        self.acks: list[tuple[str, str, str, str]] = []  # (door, tag, op, id)
        self.refused: list[tuple[str, str]] = []  # (door, tag) of mark calls that reported failure
        self.mcp = {"servers": 0, "calls": 0, "errors": 0, "hangs": 0, "exited": 0, "wall": 0.0}
        self.hub = {"requests": 0, "4xx": 0, "5xx": 0, "wall": 0.0}
        self.breaks_by: dict[str, int] = {}
        self.listings: dict[str, object] = {}  # step name -> parsed --json output
        self.tool_texts: list[str] = []
        self.root = str(sb.root)
        self.steps_dir = sb.logs / "hostile-steps"
        self.steps_dir.mkdir(exist_ok=True)

    # ---------------------------------------------------------------- checks

    def check(self, ok: bool, invariant: str, detail: str = "") -> bool:
        with self.lock:
            if not ok:
                self.breaks_by[invariant] = self.breaks_by.get(invariant, 0) + 1
            return self.res.check(ok, invariant, detail)

    def fmt(self, args: list[str | bytes]) -> str:
        parts = ["c3async"]
        for a in args:
            if isinstance(a, bytes):
                parts.append(show(a, 40))
                continue
            a = a.replace(self.root, "$SB")
            parts.append(a if a.isprintable() and " " not in a and len(a) <= 60 else show(a, 40))
        return " ".join(parts)

    # ---------------------------------------------------------------- one CLI process

    def run_step(self, step: Step) -> Outcome:
        env = self.sb.env(step.project, HOME=str(self.w.home), **step.env)
        if step.project is None:
            env.pop("CLAUDE_PROJECT_DIR", None)
        cwd = str(step.project) if step.project and Path(step.project).is_dir() else self.root
        t0 = time.perf_counter()
        p = subprocess.Popen(
            [PY, "-m", "c3async", *step.args],
            env=env,
            cwd=cwd,
            stdin=subprocess.PIPE if step.stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        hung = False
        try:
            out, err = p.communicate(step.stdin, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            hung = True
            try:
                os.killpg(p.pid, signal.SIGKILL)  # its own session: only what this step started
            except OSError:
                pass
            out, err = p.communicate()
        o = Outcome(step, None if hung else p.returncode, out, err, time.perf_counter() - t0, hung)
        # each step's output, cut to 64 KiB, for whoever reads a break (``--keep`` keeps them)
        with self.lock:
            self.outcomes.append(o)
            k = len(self.outcomes)
            with open(self.steps_dir / "index.txt", "a", encoding="utf-8") as f:
                f.write(f"{k:03d}  exit {o.rc}  {o.wall:5.1f} s  [{step.name}]  {self.fmt(step.args)}\n")
        (self.steps_dir / f"{k:03d}.out").write_bytes(out[:65536])
        (self.steps_dir / f"{k:03d}.err").write_bytes(err[:65536])
        self.judge(o)
        return o

    def judge(self, o: Outcome) -> None:
        s = o.step
        label = f"[{s.name}] `{self.fmt(s.args)}`"
        if self.w.secret.encode() in o.out + o.err:
            self.check(False, "no decoy file's text is ever shown", f"{label}: output holds the decoy secret")
        if o.hung:
            self.check(
                False, "no hang", f"{label}: still running after {self.timeout:.0f} s (killed); stderr {tail(o.err)}"
            )
            return
        rc = o.rc
        self.check(rc in (0, 1, 2), "exit status is 0, 1 or 2", f"{label}: exit {rc}; stderr {tail(o.err)}")
        self.check(b"Traceback" not in o.err, "no traceback", f"{label}: exit {rc}; {gist(o.err)}")
        for stream, data in (("stdout", o.out), ("stderr", o.err)):
            if stream == "stdout" and s.json:
                continue
            hits = hc.control_hits(data)
            self.check(
                not hits,
                "text on a terminal is inert (no raw ESC, C0/C1, DEL, bidi)",
                f"{label}: {stream} holds {'; '.join(hits)}",
            )
        if s.json and (rc == 0 or o.out.strip()):
            try:
                parsed = json.loads(o.out)
                with self.lock:
                    self.listings[s.name] = parsed
            except ValueError as exc:
                self.check(False, "every --json output parses", f"{label}: exit {rc}, {exc}: {show(o.out, 120)}")
        if s.expect == "ok":
            self.check(
                rc == 0, "the expected outcome: success", f"{label}: expected exit 0, got {rc}; stderr {tail(o.err)}"
            )
        elif s.expect == "refuse":
            self.check(
                rc in (1, 2),
                "the expected outcome: a refusal (exit 1 or 2)",
                f"{label}: expected a refusal, got exit {rc}; stdout {show(o.out, 120)}",
            )
        if rc not in (0, None) or s.expect in ("refuse", "warn"):
            if rc not in (0, None) or s.expect == "refuse":
                self.check(
                    bool(o.err.strip()),
                    "every refusal is a clear message (stderr not empty)",
                    f"{label}: exit {rc} with nothing on stderr",
                )
            if s.names:
                low = o.err.decode("utf-8", "replace").lower()
                self.check(
                    any(n.lower() in low for n in s.names),
                    "a refusal or warning names the problem",
                    f"{label}: exit {rc}, stderr mentions none of {list(s.names)}: {tail(o.err)}",
                )
        if s.ack is not None:
            with self.lock:
                if rc == 0:
                    self.acks.append(("cli", *s.ack))
                else:
                    self.refused.append(("cli", s.ack[0]))

    def lane(self, steps: list[Step]) -> list[Outcome]:
        return [self.run_step(s) for s in steps]

    # ---------------------------------------------------------------- the CLI lanes

    def clean_lane(self) -> list[Step]:
        P = self.w.clean.path
        ids = list(self.w.clean.sessions)
        H = hc.HOSTILE
        proj = ["--project", P]

        def mark(name, op, sid, *rest, expect="ok", tag=None, ack_id=None, json_out=True):
            args = ["mark", op, sid, *proj, *rest] + (["--json"] if json_out else [])
            return Step(name, args, P, expect, json=json_out, ack=(tag, op, ack_id or sid) if tag else None)

        return [
            Step("clean: sessions --json", ["sessions", *proj, "--json"], P, json=True),
            mark(
                "clean: mark note, hostile text",
                "note",
                ids[0],
                "--summary",
                f"cli1 {H}",
                "--next",
                f"next {H}",
                tag="cli1",
            ),
            mark("clean: mark stale, hostile reason", "stale", ids[1], "--reason", f"cli2 {H}", tag="cli2"),
            mark(
                "clean: mark stale with successor",
                "stale",
                ids[2],
                "--reason",
                "cli3",
                "--successor",
                ids[3],
                tag="cli3",
            ),
            mark("clean: mark unstale", "unstale", ids[2], "--reason", "cli4", tag="cli4"),
            mark("clean: mark stale by id prefix", "stale", ids[4][:8], "--reason", "cli5", tag="cli5", ack_id=ids[4]),
            mark(
                "clean: mark note 120 KB",
                "note",
                ids[3],
                "--summary",
                "cli6 " + "x" * BIG_ARG,
                expect="any",
                tag="cli6",
            ),
            Step(
                "clean: mark note, summary bytes \\xff",
                [
                    b"mark",
                    b"note",
                    ids[5].encode(),
                    b"--project",
                    P.encode(),
                    b"--summary",
                    b"cli7 \xff\xfe not utf-8",
                    b"--json",
                ],
                P,
                "any",
                json=True,
                ack=("cli7", "note", ids[5]),
            ),
            mark(
                "clean: mark stale, hostile successor",
                "stale",
                ids[5],
                "--reason",
                "cli8",
                "--successor",
                hc.OSC52 + "succ",
                expect="any",
                tag="cli8",
            ),
            Step(
                "clean: mark stale, id bytes \\xff",
                [b"mark", b"stale", b"\xff\xfe", b"--project", P.encode(), b"--reason", b"x"],
                P,
                "refuse",
            ),
            mark(
                "clean: mark stale, id with a trailing newline",
                "stale",
                ids[0] + "\n",
                "--reason",
                "cli9",
                expect="refuse",
                json_out=False,
            ),
            mark(
                "clean: mark stale, id of escapes",
                "stale",
                hc.OSC52 + hc.CSI_CLEAR,
                "--reason",
                "x",
                expect="refuse",
                json_out=False,
            ),
            Step(
                "clean: mark note, hostile CLAUDE_CODE_SESSION_ID",
                ["mark", "note", *proj, "--summary", "x"],
                P,
                "refuse",
                env={"CLAUDE_CODE_SESSION_ID": hc.OSC52 + hc.BIDI},
            ),
            Step(
                "clean: tasks add, hostile title",
                [
                    "tasks",
                    "add",
                    *proj,
                    "--title",
                    f"task {H}",
                    "--description",
                    H,
                    "--tags",
                    f"a,{hc.CSI_CLEAR}b",
                    "--json",
                ],
                P,
                json=True,
            ),
            Step(
                "clean: tasks add, 120 KB title",
                ["tasks", "add", *proj, "--title", "t" * BIG_ARG, "--json"],
                P,
                "any",
                json=True,
            ),
            Step(
                "clean: tasks add, title bytes \\xff",
                [b"tasks", b"add", b"--project", P.encode(), b"--title", b"bad \xff\xfe title", b"--json"],
                P,
                "any",
                json=True,
            ),
            Step("clean: tasks, hostile action", ["tasks", hc.OSC0 + "nope", *proj], P, "refuse"),
            Step("clean: tasks list", ["tasks", "list", *proj], P),
            Step("clean: tasks board", ["tasks", "board", *proj], P),
            Step("clean: tasks list --json", ["tasks", "list", *proj, "--json"], P, json=True),
            Step("clean: sessions", ["sessions", *proj], P),
            Step("clean: sessions --search escapes", ["sessions", *proj, "--search", hc.OSC52], P),
            Step("clean: sessions --filter stale", ["sessions", *proj, "--filter", "stale"], P),
            Step("clean: live", ["live", *proj], P),
            Step("clean: live --json", ["live", *proj, "--json"], P, json=True),
            Step("clean: stats", ["stats", *proj], P),
            Step("clean: stats --json", ["stats", *proj, "--json"], P, json=True),
            Step("hub --port 99999", ["hub", "--port", "99999"], None, "refuse", ("port", "99999")),
            Step(
                "hub --host 0.0.0.0",
                ["hub", "--host", "0.0.0.0", "--port", "0"],
                None,
                "refuse",
                ("loopback", "0.0.0.0"),
            ),
            Step(
                "sessions --project a file (~/.bashrc)",
                ["sessions", "--project", str(self.w.home / ".bashrc"), "--json"],
                None,
                "any",
                json=True,
            ),
            Step(
                "sessions --project a path of escapes",
                ["sessions", "--project", f"/nonexistent/{hc.OSC0}"],
                None,
                "any",
            ),
        ]

    def hostile_lane(self) -> list[Step]:
        r = self.w.hostile
        P = str(r.path)
        proj = ["--project", P]
        return [
            Step("hostile: sessions --json", ["sessions", *proj, "--json"], P, json=True),
            Step("hostile: sessions", ["sessions", *proj], P),
            Step("hostile: sessions --search HTML", ["sessions", *proj, "--search", "<img"], P),
            Step("hostile: sessions --filter likely", ["sessions", *proj, "--filter", "likely"], P),
            Step(
                "hostile: mark note on the NUL session",
                ["mark", "note", self.w.hostile_listed["nul"], *proj, "--summary", "ok", "--json"],
                P,
                json=True,
            ),
            Step("hostile: live", ["live", *proj], P),
            Step("hostile: stats (a FIFO sub-agent file)", ["stats", *proj], P),
            Step("hostile: stats --json", ["stats", *proj, "--json"], P, json=True),
        ]

    # What each trap repository must give, per door (default "any": whatever it answers, it
    # answers cleanly). A door listed in "named" (default: every door) must, when it refuses or
    # warns, mention one of the repository's names for its trap.
    EXPECT: ClassVar[dict[str, dict]] = {
        "trap-live": {"sessions": "warn", "live": "warn"},
        "trap-logs": {"sessions": "warn", "mark": "refuse"},
        "trap-c3link": {
            "sessions": "warn",
            "live": "warn",
            "mark": "refuse",
            "tasks-add": "refuse",
            "tasks-list": "warn",
        },
        "trap-pmdir": {"tasks-add": "refuse", "named": ("tasks-add", "tasks-list")},
        "trap-pmfile": {"tasks-add": "refuse", "named": ("tasks-add", "tasks-list")},
        "trap-deepcfg": {"*": "ok"},
        "trap-deepdata": {
            "sessions": "ok",
            "live": "ok",
            "mark": "ok",
            "tasks-add": "refuse",
            "named": ("tasks-add", "tasks-list"),
        },
        "trap-pmfuture": {"sessions": "ok", "mark": "ok", "tasks-add": "refuse", "named": ("tasks-add",)},
        "trap-pmunknown": {"*": "ok"},
        "trap-gitfifo": {"*": "ok"},
    }

    def trap_lanes(self, repo: hc.Repo) -> list[list[Step]]:
        """The doors of one trap repository, as independent lanes (a hang in one door does not
        hold up the others)."""
        P = str(repo.path)
        proj = ["--project", P]
        rules = self.EXPECT.get(repo.name, {})

        def step(name: str, door: str, args: list[str], json_out: bool = False, expect: str | None = None) -> Step:
            named = rules.get("named")
            names = repo.names if named is None or door in named else ()
            return Step(
                f"{repo.name}: {name}", args, P, expect or rules.get(door, rules.get("*", "any")), names, json=json_out
            )

        n = repo.name
        lanes = [
            [
                step("sessions --json", "sessions", ["sessions", *proj, "--json"], True),
                step("sessions", "sessions", ["sessions", *proj]),
            ],
            [step("live", "live", ["live", *proj])],
            # sessions[2]: [0] carries trap-deepdata's own marks (checked after), [1] trap-logs' stale
            [
                step(
                    "mark note",
                    "mark",
                    ["mark", "note", repo.sessions[2], *proj, "--summary", f"{n} {hc.HOSTILE}", "--json"],
                    True,
                )
            ],
            [
                step("tasks add", "tasks-add", ["tasks", "add", *proj, "--title", f"{n} {hc.HOSTILE}", "--json"], True),
                step("tasks list", "tasks-list", ["tasks", "list", *proj]),
            ],
        ]
        if n in ("trap-pmfuture", "trap-pmdir", "trap-pmfile", "trap-specials", "trap-deepdata"):
            lanes[-1].append(step("tasks board", "tasks-list", ["tasks", "board", *proj]))
        if n in ("trap-specials", "trap-fifo", "trap-gitfifo"):
            lanes.append([step("stats", "stats", ["stats", *proj])])
        if n == "trap-logs" and repo.worktree is not None:
            W = str(repo.worktree)
            lanes.append(
                [
                    step(
                        "mark stale",
                        "mark",
                        ["mark", "stale", repo.sessions[1], *proj, "--reason", "x", "--json"],
                        True,
                    ),
                    step(
                        "mark a worktree session from the main checkout",
                        "mark",
                        ["mark", "note", repo.worktree_sessions[0], *proj, "--summary", "wt", "--json"],
                        True,
                    ),
                ]
            )
            # a worktree's state root is its main checkout's .c3 (DESIGN.md section 1); where the
            # code does not do that yet, these run against the worktree's own (empty) .c3
            lanes.append(
                [
                    Step(
                        f"{n}-wt: sessions --json (worktree)",
                        ["sessions", "--project", W, "--json"],
                        W,
                        "any",
                        repo.names,
                        json=True,
                    ),
                    Step(
                        f"{n}-wt: mark note (worktree)",
                        ["mark", "note", repo.worktree_sessions[0], "--project", W, "--summary", "wt", "--json"],
                        W,
                        "any",
                        repo.names,
                        json=True,
                    ),
                ]
            )
        return lanes

    def hook_lane(self) -> list[Step]:
        C = self.w.clean.path
        rng = random.Random(self.seed * 7 + 1)

        def payload(**kw) -> dict:
            base = {
                "hook_event_name": "SessionStart",
                "session_id": hc._sid(rng),
                "cwd": C,
                "source": "startup",
                "transcript_path": "/dev/null",
            }
            base.update(kw)
            return base

        def raw(prefix: dict, key: str, value: str) -> bytes:
            text = json.dumps(prefix)
            return (text[:-1] + f', "{key}": {value}}}').encode()

        def hook(name: str, data: bytes, project: str | None = C) -> Step:
            return Step(f"hook: {name}", ["hook"], project, "ok", stdin=data)

        steps = [
            hook("input nested 100,000 deep", hc.deep_array().encode()),
            hook("transcript_path nested 2,000 deep", raw(payload(), "transcript_path", hc.deep_array(2000))),
            hook("transcript_path nested 100,000 deep", raw(payload(), "transcript_path", hc.deep_array())),
            hook("session_id nested 2,000 deep", raw(payload(), "session_id", hc.deep_object(2000))),
            hook("cwd nested 2,000 deep, no CLAUDE_PROJECT_DIR", raw(payload(), "cwd", hc.deep_array(2000)), None),
            hook("16 MB input", json.dumps(payload(pad="A" * (16 << 20))).encode()),
            hook("binary input", rng.randbytes(65536)),
            hook("session_id of escapes", json.dumps(payload(session_id=hc.OSC52 + hc.CSI_CLEAR + hc.BIDI)).encode()),
            hook(
                "session_id with a lone surrogate",
                json.dumps(payload(session_id="SURR")).replace("SURR", "\\ud800abc").encode(),
            ),
            hook("a JSON array", b"[1, 2, 3]"),
            hook("NaN", b"NaN"),
            hook("hook_event_name of escapes", json.dumps(payload(hook_event_name=hc.OSC0 + "SessionStart")).encode()),
        ]
        for name in ("trap-logs", "trap-fifo", "trap-c3link", "trap-live"):
            repo = self.w.repos[name]
            steps.append(
                hook(f"SessionStart in {name}", json.dumps(payload(cwd=str(repo.path))).encode(), str(repo.path))
            )
        steps.append(
            hook(
                "SessionEnd (clear) in the clean project",
                json.dumps(payload(hook_event_name="SessionEnd", reason="clear")).encode(),
            )
        )
        # what the hooks recorded must not break any later reader
        steps += [
            Step("after hooks: clean sessions --json", ["sessions", "--project", C, "--json"], C, json=True),
            Step("after hooks: clean live", ["live", "--project", C], C),
            Step("after hooks: clean live --json", ["live", "--project", C, "--json"], C, json=True),
        ]
        return steps

    def run_cli(self) -> None:
        lanes = [self.clean_lane(), self.hostile_lane(), self.hook_lane()]
        for r in self.w.repos.values():
            lanes += self.trap_lanes(r)
        # the clean lane registers first, so the Hub and --all see it however the lanes interleave
        first = lanes[0].pop(0)
        self.run_step(first)
        workers = max(6, (os.cpu_count() or 2) * 3)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(self.lane, lanes))

    # ---------------------------------------------------------------- the MCP server

    def server_specs(self) -> list[tuple[str, str, str, list[Call]]]:
        w = self.w
        ids = list(w.clean.sessions)
        H = hc.HOSTILE
        clean = [
            Call("c3_session", {"action": "list", "target": "all"}),
            Call("c3_session", {"action": "list", "target": hc.OSC52 + "needle"}),
            Call("c3_session", {"action": "show", "target": ids[0]}),
            Call("c3_session", {"action": "show", "target": hc.OSC52 + hc.CSI_CLEAR}, "error"),
            Call("c3_session", {"action": "show", "target": "../../../../etc/passwd"}, "error"),
            Call("c3_session", {"action": "show", "target": ids[1] + "\n"}, "error"),
            Call("c3_session", {"action": "stale", "target": hc.OSC52 + ids[2][:8], "reasoning": H}, "error"),
            Call("c3_session", {"action": "note", "target": f"{ids[2][:8]}{hc.NUL}{hc.BIDI}", "data": H}, "error"),
            Call(
                "c3_session",
                {"action": "note", "target": ids[0], "data": f"mcp1 {H}", "reasoning": H},
                ack=("mcp1", "note", ids[0]),
            ),
            Call(
                "c3_session",
                {"action": "stale", "target": ids[3], "reasoning": f"mcp2 {H}"},
                ack=("mcp2", "stale", ids[3]),
            ),
            Call(
                "c3_session",
                {"action": "note", "target": ids[4], "data": "mcp3 " + hc.NUL + " nul"},
                "any",
                ack=("mcp3", "note", ids[4]),
            ),
            Call("c3_session", {"action": "note", "target": ids[5], "data": "mcp4 " + "x" * HUGE}, "error"),
            Call("c3_session", {"action": UNKNOWN_ACTION, "target": ids[0], "data": H}, "error"),
            Call("c3_task", {"action": "add", "title": f"task {H}", "description": H}),
            Call("c3_task", {"action": "add", "title": "t" * HUGE}, "error"),
            Call("c3_task", {"action": UNKNOWN_ACTION}, "error"),
            Call("c3_task", {"action": "list"}),
            Call("c3_task", {"action": "board"}),
            Call("c3_status", {"view": "live"}),
            Call("c3_status", {"view": "sessions"}),
            Call("c3_status", {"view": hc.OSC0 + "bogus"}, "error"),
        ]
        hl = w.hostile_listed
        hostile = [
            Call("c3_session", {"action": "list", "target": "all"}),
            Call("c3_session", {"action": "show", "target": hl["osc52"]}),
            Call("c3_session", {"action": "show", "target": hl["deep"]}),
            Call("c3_session", {"action": "show", "target": hl["surrogate"]}),
            Call("c3_session", {"action": "show", "target": w.hostile_never["symlink"]}, "error"),
            Call("c3_session", {"action": "show", "target": w.hostile_never["fifo"]}, "error"),
            Call("c3_status", {"view": "sessions"}),
        ]

        def trap(name: str) -> tuple[str, hc.Repo]:
            return name, w.repos[name]

        specs = [
            ("clean", w.clean.path, "-", clean),
            ("hostile", str(w.hostile.path), "-", hostile),
            # Claude Code's pid file of the server's parent (read to learn the host session)
            # is a FIFO: it must cost the identity lookup only
            (
                "pidfile-fifo",
                w.clean.path,
                "fifo",
                [Call("c3_session", {"action": "list"}), Call("c3_status", {"view": "live"})],
            ),
        ]
        n, r = trap("trap-logs")
        specs.append(
            (
                n,
                str(r.path),
                "-",
                [
                    Call("c3_session", {"action": "list"}, "any", r.names),
                    Call("c3_session", {"action": "note", "target": r.sessions[0], "data": H}, "error", r.names),
                    Call("c3_session", {"action": "stale", "target": r.sessions[1], "reasoning": H}, "error", r.names),
                    Call("c3_session", {"action": UNKNOWN_ACTION}, "error"),
                    Call("c3_task", {"action": "add", "title": H}, "any", r.names),
                    Call("c3_status", {"view": "live"}, "any", r.names),
                ],
            )
        )
        n, r = trap("trap-live")
        specs.append(
            (
                n,
                str(r.path),
                "-",
                [
                    Call("c3_session", {"action": "list"}, "any", r.names),
                    Call("c3_status", {"view": "live"}, "any", r.names),
                    Call("c3_session", {"action": "list", "target": "live"}, "any", r.names),
                ],
            )
        )
        n, r = trap("trap-c3link")
        specs.append(
            (
                n,
                str(r.path),
                "-",
                [
                    Call("c3_session", {"action": "list"}, "any", r.names),
                    Call("c3_session", {"action": "note", "target": r.sessions[0], "data": H}, "error", r.names),
                    Call("c3_task", {"action": "add", "title": H}, "error", r.names),
                ],
            )
        )
        n, r = trap("trap-fifo")
        specs.append(
            (
                n,
                str(r.path),
                "-",
                [
                    Call("c3_session", {"action": "list"}, "any", r.names),
                    Call("c3_session", {"action": "note", "target": r.sessions[0], "data": "x"}, "any", r.names),
                ],
            )
        )
        n, r = trap("trap-sessions")
        specs.append(
            (
                n,
                str(r.path),
                "-",
                [
                    Call("c3_session", {"action": "start", "description": H}, "any", r.names),
                    Call("c3_session", {"action": "snapshot", "summary": H, "data": H}, "any", r.names),
                    Call("c3_session", {"action": "list"}, "any", r.names),
                ],
            )
        )
        n, r = trap("trap-deepdata")
        specs.append(
            (
                n,
                str(r.path),
                "deep",
                [
                    Call("c3_session", {"action": "list"}),
                    Call("c3_session", {"action": "show", "target": r.sessions[0]}),
                    Call("c3_status", {"view": "live"}),
                    Call("c3_task", {"action": "add", "title": "x"}, "error", r.names),
                ],
            )
        )
        n, r = trap("trap-pmfuture")
        specs.append(
            (
                n,
                str(r.path),
                "-",
                [
                    Call("c3_task", {"action": "add", "title": "x"}, "error", r.names),
                    Call("c3_task", {"action": "list"}, "any", r.names),
                ],
            )
        )
        more = () if self.quick else ("trap-cache", "trap-pmdir", "trap-gitfifo")
        for name in ("trap-specials", *more):
            n, r = trap(name)
            specs.append(
                (
                    n,
                    str(r.path),
                    "-",
                    [
                        Call("c3_session", {"action": "list"}, "any", r.names),
                        Call("c3_status", {"view": "live"}, "any", r.names),
                        Call("c3_status", {"view": "sessions"}, "any", r.names),
                        Call("c3_task", {"action": "list"}, "any", r.names),
                    ],
                )
            )
        return specs

    async def drive_server(self, name: str, project: str, plant: str, calls: list[Call], sem: anyio.Semaphore) -> None:
        from mcp import Client, StdioServerParameters, stdio_client

        record = self.sb.logs / f"hostile-serve-{name}.exit"
        errpath = self.sb.logs / f"hostile-serve-{name}.log"
        host = hc._sid(random.Random(f"{self.seed}-{name}"))
        params = StdioServerParameters(
            command=PY,
            args=["-c", SERVE_WRAPPER, str(record), plant],
            env=self.sb.env(project, HOME=str(self.w.home), CLAUDE_CODE_SESSION_ID=host),
            cwd=project,
        )
        label = f"[serve {name}]"
        async with sem:
            self.mcp["servers"] += 1
            errlog = open(errpath, "w")  # stdio_client needs a real file
            close_wall = None
            try:
                stack = AsyncExitStack()
                try:
                    c = await stack.enter_async_context(
                        Client(stdio_client(params, errlog=errlog), mode="legacy", read_timeout_seconds=self.timeout)
                    )
                    await c.list_tools()
                except Exception as exc:  # whatever it is, it is the finding
                    self.check(False, "the MCP server starts and answers", f"{label}: {show(repr(exc), 300)}")
                    await stack.aclose()
                    return
                hung = False
                for call in calls:
                    if hung:
                        break
                    self.mcp["calls"] += 1
                    what = f"{label} {call.tool}({self._args(call.args)})"
                    try:
                        with anyio.fail_after(self.timeout + 5):
                            r = await c.call_tool(call.tool, call.args)
                    except TimeoutError:
                        hung = True
                        self.mcp["hangs"] += 1
                        self.check(False, "no hang", f"{what}: no answer in {self.timeout:.0f} s")
                        continue
                    except Exception as exc:  # whatever it is, it is the finding
                        if "timed out" in str(exc).lower() or "timeout" in type(exc).__name__.lower():
                            hung = True
                            self.mcp["hangs"] += 1
                            self.check(
                                False, "no hang", f"{what}: no answer in {self.timeout:.0f} s ({show(repr(exc))})"
                            )
                        else:
                            self.check(False, "every tool call gets a tool result", f"{what}: {show(repr(exc), 300)}")
                        continue
                    self.judge_call(what, call, r)
                t0 = time.perf_counter()
                await stack.aclose()  # closes stdin; the SDK kills the server after a 2 s grace
                close_wall = time.perf_counter() - t0
            finally:
                errlog.close()
        self.judge_server(label, record, errpath, close_wall)

    def _args(self, args: dict) -> str:
        return ", ".join(f"{k}={show(v, 40)}" for k, v in args.items())

    def judge_call(self, what: str, call: Call, r) -> None:
        text = "".join(getattr(c, "text", "") for c in (r.content or []))
        with self.lock:
            self.tool_texts.append(text)
        if r.is_error:
            self.mcp["errors"] += 1
        self.check("Traceback" not in text, "no traceback", f"{what}: the tool result holds one: {show(text, 300)}")
        if self.w.secret in text:
            self.check(False, "no decoy file's text is ever shown", f"{what}: the tool result holds the decoy secret")
        if call.expect == "ok":
            self.check(not r.is_error, "the expected outcome: success", f"{what}: tool error {show(text, 300)}")
        elif call.expect == "error":
            self.check(
                r.is_error, "the expected outcome: a refusal (tool error)", f"{what}: succeeded: {show(text, 200)}"
            )
        if r.is_error and call.ack is not None:
            with self.lock:
                self.refused.append(("mcp", call.ack[0]))
        if r.is_error:
            self.check(bool(text.strip()), "every refusal is a clear message", f"{what}: an empty tool error")
            if call.names:
                self.check(
                    any(n.lower() in text.lower() for n in call.names),
                    "a refusal or warning names the problem",
                    f"{what}: the tool error mentions none of {list(call.names)}: {show(text, 240)}",
                )
        elif call.ack is not None:
            with self.lock:
                self.acks.append(("mcp", *call.ack))

    def judge_server(self, label: str, record: Path, errpath: Path, close_wall: float | None) -> None:
        err = errpath.read_bytes() if errpath.exists() else b""
        self.check(b"Traceback" not in err, "no traceback", f"{label}: stderr: {gist(err)}")
        hits = hc.control_hits(err)
        self.check(
            not hits,
            "text on a terminal is inert (no raw ESC, C0/C1, DEL, bidi)",
            f"{label}: stderr holds {'; '.join(hits)}",
        )
        if self.w.secret.encode() in err:
            self.check(False, "no decoy file's text is ever shown", f"{label}: stderr holds the decoy secret")
        if close_wall is None:
            return
        try:
            rc = json.loads(record.read_text())["rc"]
        except (OSError, ValueError, KeyError):
            rc = None
        if rc is None:
            self.check(
                False,
                "c3async serve exits by itself when stdin closes",
                f"{label}: still running 2 s after stdin closed (the client killed it; close took {close_wall:.1f} s)",
            )
        else:
            self.mcp["exited"] += 1
            self.check(rc in (0, 1, 2), "exit status is 0, 1 or 2", f"{label}: c3async serve exited {rc}")

    async def run_servers(self) -> None:
        sem = anyio.Semaphore(3 if self.quick else 4)
        async with anyio.create_task_group() as tg:
            for name, project, plant, calls in self.server_specs():
                tg.start_soon(self.drive_server, name, project, plant, calls, sem)

    # ---------------------------------------------------------------- the Hub

    def hub_request(
        self,
        port: int,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict | None = None,
        read: bool = True,
    ) -> tuple[int, dict, list, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=self.timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            data = resp.read() if read else b""
            raw = resp.getheaders()
            return resp.status, {k.lower(): v for k, v in raw}, raw, data
        finally:
            conn.close()

    def run_hub(self) -> None:
        log = self.sb.logs / "hostile-hub.log"
        env = self.sb.env(None, HOME=str(self.w.home))
        env.pop("CLAUDE_PROJECT_DIR", None)
        t_start = time.perf_counter()
        with open(log, "ab") as errf:  # the child keeps its own descriptor
            proc = subprocess.Popen(
                c3async_cmd("hub", "--port", "0"),
                env=env,
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=errf,
                start_new_session=True,
            )
        try:
            self._hub(proc, log)
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.check(False, "the Hub stops on SIGTERM", "still running 10 s after SIGTERM (killed)")
                    proc.kill()
                    proc.wait(10)
            err = log.read_bytes()
            self.check(b"Traceback" not in err, "no traceback", f"[hub] stderr: {gist(err)}")
            hits = hc.control_hits(err)
            self.check(
                not hits,
                "text on a terminal is inert (no raw ESC, C0/C1, DEL, bidi)",
                f"[hub] stderr holds {'; '.join(hits)}",
            )
            self.hub["wall"] = time.perf_counter() - t_start

    def _hub(self, proc: subprocess.Popen, log: Path) -> None:
        deadline = time.monotonic() + max(30.0, self.timeout)
        m = None
        while m is None:
            m = re.search(rb"c3async Hub on (http://127\.0\.0\.1:(\d+)/\S*)", log.read_bytes())
            if m is None:
                if proc.poll() is not None or time.monotonic() > deadline:
                    self.check(False, "the Hub starts", f"exit {proc.poll()}; stderr {tail(log.read_bytes(), 400)}")
                    return
                time.sleep(0.05)
        url, port = m.group(1).decode(), int(m.group(2))
        tm = re.search(r"[?&#]token=([A-Za-z0-9_.~%-]+)", url)
        token = tm.group(1) if tm else None
        self.check(
            token is not None,
            "the Hub prints its URL with ?token=",
            f"[hub] the announced URL carries no token: {show(url)}",
        )
        while True:  # the line is printed just before uvicorn listens
            try:
                st, hd, raw, page = self.hub_request(port, "GET", "/")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    self.check(False, "the Hub starts", f"no answer on port {port}; stderr {tail(log.read_bytes())}")
                    return
                time.sleep(0.05)
        secrets_seen = [self.w.canary]
        self._hub_common("GET / (no token)", st, hd, page)
        meta = re.search(rb'name="c3-token" content="([^"]+)"', page)
        self.check(
            meta is None and (token is None or token.encode() not in page),
            "GET / without the token does not hand it out",
            f"[hub] GET / answered {st} with the token in the page",
        )
        if token is None and meta is not None:
            token = meta.group(1).decode()  # the old way, so the rest can still be probed
        sid = next(iter(self.w.clean.sessions))
        # --- no token: every /api/* is refused and shows nothing
        for path in (
            "/api/sessions",
            "/api/projects",
            f"/api/sessions/{sid}",
            f"/api/sessions?project={quote(self.w.clean.path, safe='')}",
            "/api/events",
        ):
            try:
                st, hd, raw, body = self.hub_request(port, "GET", path, read=path != "/api/events")
            except (OSError, http.client.HTTPException) as exc:
                self.check(
                    False,
                    "no hang" if isinstance(exc, TimeoutError) else "the Hub answers every request",
                    f"[hub] GET {path} (no token): {show(repr(exc))}",
                )
                continue
            self._hub_common(f"GET {path} (no token)", st, hd, body)
            self.check(
                st in (401, 403),
                "the Hub's API needs the token (reads included)",
                f"[hub] GET {path} without the token answered {st}: {show(body, 160)}",
            )
            leaked = [s for s in secrets_seen if s.encode() in body]
            self.check(
                not leaked,
                "no transcript text without the token",
                f"[hub] GET {path} without the token shows transcript text ({len(body)} bytes)",
            )
        if token is None:
            self.check(
                False,
                "the Hub's token can be learned by its owner",
                "[hub] no token printed nor in the page: the authenticated probes were skipped",
            )
            return
        # --- the URL the Hub printed serves the page (its script keeps the token): no cookie holds it
        st, hd, raw, body = self.hub_request(port, "GET", f"/?token={quote(token, safe='')}")
        self._hub_common("GET /?token=...", st, hd, body)
        cookies = [v for k, v in raw if k.lower() == "set-cookie"]
        self.check(
            st == 200 and not cookies and token.encode() not in body,
            "the printed URL sets no cookie and the page holds no token (cookies reach every port)",
            f"[hub] GET /?token=... answered {st} with Set-Cookie {show(' | '.join(cookies), 200)}",
        )
        # the cookie that held the token in earlier versions, the real token in it: no credential
        jar = {"Cookie": f"c3async-hub-{port}={token}"}
        self._hub_case(
            port,
            "GET /api/sessions with the old cookie alone",
            "GET",
            "/api/sessions",
            None,
            dict(jar, **{"Sec-Fetch-Site": "same-origin"}),
            "4xx",
        )
        self._hub_case(
            port,
            "POST with the old cookie alone",
            "POST",
            f"/api/sessions/{sid}/marks",
            json.dumps({"op": "note", "summary": "csrf", "project": self.w.clean.path}).encode(),
            dict(
                jar, **{"Content-Type": "application/json", "Origin": f"http://127.0.0.1:{port}", "X-C3-Request": "1"}
            ),
            "4xx",
        )
        self._hub_case(
            port,
            "POST from a browser with the token but no X-C3-Request",
            "POST",
            f"/api/sessions/{sid}/marks",
            json.dumps({"op": "note", "summary": "csrf", "project": self.w.clean.path}).encode(),
            {"X-C3-Token": token, "Content-Type": "application/json", "Origin": f"http://127.0.0.1:{port}"},
            "4xx",
        )
        # wherever the Hub keeps its token on disk, only its owner may read it
        loose = []
        for path in self.sb.c3home.rglob("*"):
            try:
                mine = path.is_file() and not path.is_symlink() and token.encode() in path.read_bytes()
                if mine and path.stat().st_mode & 0o077:
                    loose.append(f"{path.relative_to(self.sb.c3home)} {oct(path.stat().st_mode & 0o777)}")
            except OSError:
                continue
        self.check(not loose, "the Hub's token file is readable by its owner only", f"[hub] {loose[:3]}")
        auth = {"Authorization": f"Bearer {token}", "X-C3-Token": token}
        post = dict(
            auth, **{"Content-Type": "application/json", "Origin": f"http://127.0.0.1:{port}", "X-C3-Request": "1"}
        )
        clean = self.w.clean.path
        hostile = str(self.w.hostile.path)
        hl = self.w.hostile_listed
        gets = [
            ("GET /api/sessions", "/api/sessions", "ok"),
            ("GET /api/sessions?project=clean", f"/api/sessions?project={quote(clean, safe='')}", "ok"),
            ("GET /api/sessions?project=hostile", f"/api/sessions?project={quote(hostile, safe='')}", "ok"),
            ("GET /api/sessions?project=%00", "/api/sessions?project=%00", "4xx"),
            ("GET /api/sessions?project=%ff%fe", "/api/sessions?project=%ff%fe", "4xx"),
            ("GET /api/sessions?filter=<ESC>", "/api/sessions?filter=%1b%5b2J", "4xx"),
            ("GET /api/sessions?q=<OSC 52>", f"/api/sessions?q={quote(hc.OSC52)}", "ok"),
            ("GET a hostile session", f"/api/sessions/{hl['osc52']}?project={quote(hostile, safe='')}", "ok"),
            ("GET the deep session", f"/api/sessions/{hl['deep']}?project={quote(hostile, safe='')}", "ok"),
            ("GET the surrogate session", f"/api/sessions/{hl['surrogate']}?project={quote(hostile, safe='')}", "ok"),
            ("GET the symlinked transcript", f"/api/sessions/{self.w.hostile_never['symlink']}", "4xx"),
            ("GET an id with a trailing newline", f"/api/sessions/{sid}%0A", "4xx"),
        ]
        for name, path, want in gets:
            self._hub_case(port, name, "GET", path, None, auth, want)
        self._hub_case(
            port, "GET /api/events?project=%00", "GET", "/api/events?project=%00", None, auth, "4xx", read=False
        )
        for rname in ("trap-live", "trap-c3link", "trap-fifo", "trap-specials", "trap-deepdata"):
            rp = str(self.w.repos[rname].path)
            self._hub_case(
                port,
                f"GET /api/sessions?project={rname}",
                "GET",
                f"/api/sessions?project={quote(rp, safe='')}",
                None,
                auth,
                "not5xx",
            )
        self._hub_case(
            port, "GET with a foreign Host", "GET", "/api/sessions", None, dict(auth, Host="evil.example"), "4xx"
        )
        ids = list(self.w.clean.sessions)
        mark_path = f"/api/sessions/{ids[1]}/marks"
        note = {"op": "note", "summary": f"hub1 {hc.HOSTILE}", "next_steps": hc.HOSTILE, "project": clean}
        if (
            self._hub_case(
                port, "POST a note of hostile text", "POST", mark_path, json.dumps(note).encode(), post, "201"
            )
            == 201
        ):
            self.acks.append(("hub", "hub1", "note", ids[1]))
        bodies = [
            ("POST a body nested 100,000 deep", hc.deep_array().encode()),
            (
                "POST a summary nested 100,000 deep",
                ('{"op":"note","project":' + json.dumps(clean) + ',"summary":' + hc.deep_array() + "}").encode(),
            ),
            (
                "POST a project nested 2,000 deep",
                ('{"op":"note","summary":"x","project":' + hc.deep_array(2000) + "}").encode(),
            ),
            (
                "POST a lone surrogate",
                ('{"op":"note","summary":"hub2 \\ud800","project":' + json.dumps(clean) + "}").encode(),
            ),
            (
                "POST a 12 MB summary",
                json.dumps({"op": "note", "summary": "hub3 " + "x" * HUGE, "project": clean}).encode(),
            ),
            ("POST bytes that are not UTF-8", b'{"op":"note","summary":"\xff\xfe"}'),
            ("POST an op of escapes", json.dumps({"op": hc.OSC52, "project": clean}).encode()),
            ("POST a project of %00", json.dumps({"op": "note", "summary": "x", "project": "\x00"}).encode()),
        ]
        for name, body in bodies:
            self._hub_case(port, name, "POST", mark_path, body, post, "4xx")
        self._hub_case(
            port,
            "POST from a loopback Origin on another port",
            "POST",
            mark_path,
            json.dumps({"op": "note", "summary": "hub4", "project": clean}).encode(),
            dict(post, Origin="http://127.0.0.1:1"),
            "4xx",
        )
        logs = self.w.repos["trap-logs"]
        self._hub_case(
            port,
            "POST a note into trap-logs (marks -> ~/.bashrc)",
            "POST",
            f"/api/sessions/{logs.sessions[0]}/marks",
            json.dumps({"op": "note", "summary": hc.HOSTILE, "project": str(logs.path)}).encode(),
            post,
            "4xx",
            logs.names,
        )

    def _hub_common(self, name: str, status: int, headers: dict, body: bytes) -> None:
        self.hub["requests"] += 1
        if 400 <= status < 500:
            self.hub["4xx"] += 1
        if status >= 500:
            self.hub["5xx"] += 1
        self.check(
            "content-security-policy" in headers,
            "every Hub response carries a Content-Security-Policy",
            f"[hub] {name} answered {status} without one",
        )
        self.check(status < 500, "the Hub answers no 500", f"[hub] {name} answered {status}: {show(body, 200)}")
        self.check(b"Traceback" not in body, "no traceback", f"[hub] {name}: the body holds one")
        if self.w.secret.encode() in body:
            self.check(False, "no decoy file's text is ever shown", f"[hub] {name}: the body holds the decoy secret")

    def _hub_case(
        self,
        port: int,
        name: str,
        method: str,
        path: str,
        body: bytes | None,
        headers: dict,
        want: str,
        names: tuple[str, ...] = (),
        read: bool = True,
    ) -> int | None:
        try:
            st, hd, _raw, data = self.hub_request(port, method, path, body, headers, read=read)
        except (OSError, http.client.HTTPException) as exc:
            if isinstance(exc, TimeoutError):
                self.check(False, "no hang", f"[hub] {name}: no answer in {self.timeout:.0f} s")
                return None
            if want == "4xx" and body is not None and len(body) > (1 << 20):
                self.hub["requests"] += 1  # closed on a huge body without reading it: a refusal
                return None
            self.check(False, "the Hub answers every request", f"[hub] {name}: {show(repr(exc))}")
            return None
        self._hub_common(name, st, hd, data)
        if want == "ok":
            self.check(st == 200, "the expected outcome: success", f"[hub] {name}: {st} {show(data, 200)}")
            if st == 200 and "json" in hd.get("content-type", ""):
                try:
                    json.loads(data)
                except ValueError as exc:
                    self.check(False, "every --json output parses", f"[hub] {name}: {exc}")
        elif want == "201":
            self.check(st == 201, "the expected outcome: success", f"[hub] {name}: {st} {show(data, 200)}")
        elif want == "4xx":
            self.check(
                400 <= st < 500,
                "the Hub refuses hostile requests with 4xx",
                f"[hub] {name}: answered {st}: {show(data, 200)}",
            )
        if names and 400 <= st < 500:
            low = data.decode("utf-8", "replace").lower()
            self.check(
                any(n.lower() in low for n in names),
                "a refusal or warning names the problem",
                f"[hub] {name}: {st} mentions none of {list(names)}: {show(data, 200)}",
            )
        return st

    # ---------------------------------------------------------------- $C3_HOME documents

    def run_c3home(self) -> None:
        home = self.sb.c3home
        docs = {name: home / name for name in ("projects.json", "config.json")}
        saved = {n: (p.read_bytes() if p.exists() and not p.is_symlink() else None) for n, p in docs.items()}
        C = self.w.clean.path
        names = ("projects.json", "config.json", "symlink", "symbolic link")
        try:
            deep = {
                "projects.json": '{"version":1,"projects":' + hc.deep_array() + "}",
                "config.json": hc.deep_object(),
            }
            for n, p in docs.items():
                p.unlink(missing_ok=True)
                p.write_text(deep[n])
            kept = {n: p.read_bytes() for n, p in docs.items()}
            self.lane(
                [
                    Step(
                        "$C3_HOME deep: sessions --all --json",
                        ["sessions", "--all", "--json"],
                        C,
                        "any",
                        names,
                        json=True,
                    ),
                    Step(
                        "$C3_HOME deep: sessions --project clean --json",
                        ["sessions", "--project", C, "--json"],
                        C,
                        json=True,
                    ),
                    Step("$C3_HOME deep: live", ["live", "--project", C], C),
                    Step("$C3_HOME deep: tasks list", ["tasks", "list", "--project", C], C),
                    Step(
                        "$C3_HOME deep: hook",
                        ["hook"],
                        C,
                        stdin=json.dumps(
                            {
                                "hook_event_name": "SessionStart",
                                "session_id": hc._sid(random.Random(self.seed)),
                                "cwd": C,
                                "source": "startup",
                            }
                        ).encode(),
                    ),
                ]
            )
            for n, p in docs.items():
                now = p.read_bytes() if p.exists() else None
                self.check(
                    now == kept[n],
                    "a document that does not parse is never rewritten",
                    f"$C3_HOME/{n} (nested 100,000 deep) was " + ("removed" if now is None else "rewritten"),
                )
            # the same documents as symlinks into the decoy home
            for p in docs.values():
                p.unlink(missing_ok=True)
            os.symlink(self.w.home / "settings.json", docs["projects.json"])
            os.symlink(self.w.home / "notes.json", docs["config.json"])
            self.lane(
                [
                    Step(
                        "$C3_HOME symlinked: sessions --project clean --json",
                        ["sessions", "--project", C, "--json"],
                        C,
                        "any",
                        names,
                        json=True,
                    ),
                    Step(
                        "$C3_HOME symlinked: sessions --all --json",
                        ["sessions", "--all", "--json"],
                        C,
                        "any",
                        names,
                        json=True,
                    ),
                ]
            )
        finally:
            for n, p in docs.items():
                if p.is_symlink() or p.exists():
                    p.unlink()
                if saved[n] is not None:
                    p.write_bytes(saved[n])

    # ---------------------------------------------------------------- the projects root

    def run_projects_root(self) -> None:
        """A symlink loop, a FIFO and a file among the transcript folders: each costs only
        itself. (On their own, so that a listing they blind does not hide every other finding.)"""
        made = hc.projects_root_traps(self.sb)
        C, Hp = self.w.clean.path, str(self.w.hostile.path)
        try:
            self.lane(
                [
                    Step(
                        "projects-root traps: clean sessions --json",
                        ["sessions", "--project", C, "--json"],
                        C,
                        json=True,
                    ),
                    Step(
                        "projects-root traps: hostile sessions --json",
                        ["sessions", "--project", Hp, "--json"],
                        Hp,
                        json=True,
                    ),
                    Step("projects-root traps: sessions --all", ["sessions", "--all"], C),
                    Step("projects-root traps: stats", ["stats", "--project", C], C),
                ]
            )
        finally:
            for path in made:
                path.unlink(missing_ok=True)
        listing = self.listings.get("projects-root traps: clean sessions --json")
        ids = {r.get("id") for r in listing if isinstance(r, dict)} if isinstance(listing, list) else set()
        missing = set(self.w.clean.sessions) - ids
        self.check(
            not missing,
            "a symlink loop, a FIFO or a file in the projects root costs only itself",
            f"with them, the clean listing misses {len(missing)} of {len(self.w.clean.sessions)} sessions",
        )

    # ---------------------------------------------------------------- after the run

    def verify(self) -> None:
        w = self.w
        # the clean project, read back independently
        listing = self.listings.get("final: clean sessions --json")
        truth = set(w.clean.sessions)
        raw = read_raw(w.clean.marks)
        if isinstance(listing, list):
            rows = {r.get("id"): r for r in listing if isinstance(r, dict)}
            self.check(
                set(rows) == truth,
                "the clean project still lists all its sessions (and only them)",
                f"missing {sorted(truth - set(rows))[:3]}, extra {sorted(set(rows) - truth)[:3]}",
            )
            records = [
                r for r in raw.records if isinstance(r.get("id"), str) and r.get("op") in ("stale", "unstale", "note")
            ]
            stale, note = oracle_fold(records)
            wrong = []
            for sid in sorted(truth & set(rows)):
                row = rows[sid]
                s, n = stale.get(sid), note.get(sid)
                want_s = (s.get("reason"), s.get("successor")) if s is not None and s["op"] == "stale" else None
                got_s = row.get("stale")
                got_s = (got_s.get("reason"), got_s.get("successor")) if isinstance(got_s, dict) else got_s
                want_n = (n.get("summary"), n.get("next_steps")) if n is not None else None
                got_n = row.get("note")
                got_n = (got_n.get("summary"), got_n.get("next_steps")) if isinstance(got_n, dict) else got_n
                if got_s != want_s or got_n != want_n:
                    wrong.append(
                        f"{sid[:8]}: listed stale={show(str(got_s), 60)} note={show(str(got_n), 60)}, "
                        f"file says stale={show(str(want_s), 60)} note={show(str(want_n), 60)}"
                    )
            self.check(
                not wrong, "the clean project's marks fold last-wins (listing vs the file)", "; ".join(wrong[:3])
            )
        else:
            self.check(
                False,
                "the clean project still lists all its sessions (and only them)",
                "the final `c3async sessions --project clean --json` gave no listing",
            )
        self.check(
            not raw.bad and raw.ends_with_newline,
            "no torn or glued line in the clean marks file",
            f"{len(raw.bad)} bad lines, e.g. {[show(b[1], 80) for b in raw.bad[:2]]}",
        )
        try:
            from c3async.stores.marks import MarkBook

            problems = compare_fold(MarkBook(resolve(w.clean.path)).refresh(), raw.records)
            self.check(not problems, "MarkBook's fold of the clean project equals last-wins", "; ".join(problems[:3]))
        except Exception as exc:  # a crash of the library here is a finding too
            self.check(False, "MarkBook's fold of the clean project equals last-wins", show(repr(exc), 300))
        tags: dict[str, int] = {}
        for rec in raw.records:
            t = mark_tag(rec)
            if isinstance(t, str):
                tags[t.split(" ", 1)[0]] = tags.get(t.split(" ", 1)[0], 0) + 1
        missing = [f"{door}:{tag} x{tags.get(tag, 0)}" for door, tag, _op, _sid in self.acks if tags.get(tag, 0) != 1]
        self.check(
            not missing,
            "a mark is written exactly when it is reported written",
            f"clean project: {len(missing)} acknowledged marks not in the file once: {missing[:5]}",
        )
        ghosts = [f"{door}:{tag}" for door, tag in self.refused if tags.get(tag, 0)]
        self.check(
            not ghosts,
            "a mark is written exactly when it is reported written",
            f"clean project: {len(ghosts)} marks reported as failed are in the file: {ghosts[:5]}",
        )
        for name, repo in w.repos.items():  # the trap repositories' own marks files
            o = next((o for o in self.outcomes if o.step.name == f"{name}: mark note"), None)
            state = repo.path / ".c3"
            marks = state / "session_marks.jsonl"
            if o is None or o.hung or state.is_symlink() or marks.is_symlink():
                continue  # a symlinked log is the decoy's: the checksum covers it
            n = sum(
                1
                for r in read_raw(marks).records
                if isinstance(r.get("summary"), str) and r["summary"].startswith(f"{name} ")
            )
            self.check(
                n == (1 if o.rc == 0 else 0),
                "a mark is written exactly when it is reported written",
                f"[{name}: mark note] exit {o.rc}, and the mark is in its file {n} time(s)",
            )
        # logs are bounded, and an invalid call is refused before it is logged
        for path in (w.clean.marks, w.clean.activity):
            long_lines = [len(line) for line in _lines(path) if len(line) > MAX_LINE]
            self.check(
                not long_lines,
                "logged strings are bounded",
                f"{path.name} has {len(long_lines)} lines over {MAX_LINE >> 20} MiB (longest {max(long_lines, default=0):,} B)",
            )
        probe = UNKNOWN_ACTION[:40].encode()
        logged = [
            line
            for line in _lines(w.clean.activity)
            if probe in line or json.dumps(UNKNOWN_ACTION[:40])[1:-1].encode() in line
        ]
        self.check(
            not logged,
            "an unknown action is refused before it is logged",
            f"{len(logged)} activity rows carry it, e.g. {show(logged[0] if logged else b'', 120)}",
        )
        # the hostile transcripts: each costs only its bad lines; special files never become rows
        for step in (
            "hostile: sessions --json",
            "final: hostile sessions --json",
            "projects-root traps: hostile sessions --json",
        ):
            listing = self.listings.get(step)
            if not isinstance(listing, list):
                continue
            ids = {r.get("id") for r in listing if isinstance(r, dict)}
            missing = [label for label, sid in w.hostile_listed.items() if sid not in ids]
            self.check(
                not missing,
                "a hostile transcript costs only its bad lines (still listed)",
                f"[{step}] not listed: {missing}",
            )
            shown = [label for label, sid in w.hostile_never.items() if sid in ids]
            self.check(not shown, "only regular files are read as transcripts", f"[{step}] listed: {shown}")
            rows = {r.get("id"): r for r in listing if isinstance(r, dict)}
            changed = [
                f"{label}: {show(rows[w.hostile_listed[label]].get('title'), 60)}"
                for label, title in w.hostile_titles.items()
                if w.hostile_listed[label] in rows and rows[w.hostile_listed[label]].get("title") != title
            ]
            self.check(
                not changed,
                "--json keeps the text as it is (escaped by JSON only)",
                f"[{step}] titles differ from the transcripts': {changed[:3]}",
            )
        # trap repositories: when a listing succeeds, it lists the repo's own sessions
        for name, repo in w.repos.items():
            listing = self.listings.get(f"{name}: sessions --json")
            if not isinstance(listing, list):
                continue
            ids = {r.get("id") for r in listing if isinstance(r, dict)}
            missing = [s for s in repo.sessions + repo.worktree_sessions if s not in ids]
            self.check(
                not missing,
                "a trap costs only itself (the repo's sessions are listed)",
                f"[{name}: sessions --json] {len(missing)} of {len(repo.sessions + repo.worktree_sessions)} "
                "sessions missing",
            )
            if name == "trap-deepdata":
                row = next((r for r in listing if isinstance(r, dict) and r.get("id") == repo.sessions[0]), None)
                got = (row or {}).get("note")
                got = got.get("summary") if isinstance(got, dict) else got
                self.check(
                    got == "after-deep",
                    "a deep line costs only that line (the next mark counts)",
                    f"[{name}] the note after the deep lines reads {show(str(got), 60)}",
                )
        # documents c3async must never rewrite
        for path, before in w.files_to_keep.items():
            now = path.read_bytes() if path.exists() else None
            self.check(
                now == before,
                "a document that does not parse, or is newer, is never rewritten",
                f"{str(path).replace(self.root, '$SB')} was " + ("removed" if now is None else "rewritten"),
            )
        if w.pm_unknown is not None:
            for path in (w.pm_unknown, w.pm_unknown.with_name("pm.json.bak")):
                if not path.exists():
                    continue
                try:
                    doc = json.loads(path.read_bytes())
                    task = next(t for t in doc["tasks"] if t.get("id") == "a0000001")
                    kept = "x_sprints" in doc and task.get("x_color") == "teal" and "x_estimate" in task
                except (ValueError, KeyError, TypeError, StopIteration) as exc:
                    kept, doc = False, exc
                self.check(
                    kept,
                    "fields this version does not know survive a rewrite",
                    f"{path.name} of trap-pmunknown lost them: {show(str(doc), 160)}",
                )

    def phase(self, name: str, fn, *args) -> None:
        """Run one phase; if the suite itself fails in it, say so and go on with the next."""
        try:
            fn(*args)
        except Exception:  # reported as a break, with where it happened
            import traceback

            self.check(False, f"the {name} phase of the suite completes", gist(traceback.format_exc().encode()))

    def run(self) -> None:
        t0 = time.perf_counter()
        before = hc.checksum(self.w.home)
        self.res.fig("decoy HOME entries checksummed", len(before))
        self.phase("CLI and hook", self.run_cli)
        t_cli = time.perf_counter()
        self.phase("MCP server", anyio.run, self.run_servers)
        for plant in self.sb.logs.glob("hostile-serve-*.exit.plant"):  # later steps must not meet them
            Path(plant.read_text()).unlink(missing_ok=True)
        t_mcp = time.perf_counter()
        self.mcp["wall"] = t_mcp - t_cli
        self.phase("Hub", self.run_hub)
        t_hub = time.perf_counter()
        C, Hp = self.w.clean.path, str(self.w.hostile.path)
        self.phase(
            "final listings",
            self.lane,
            [
                Step("final: sessions --all --json", ["sessions", "--all", "--json"], C, json=True),
                Step("final: sessions --all", ["sessions", "--all"], C),
                Step("final: hostile sessions --json", ["sessions", "--project", Hp, "--json"], Hp, json=True),
            ],
        )
        self.phase("$C3_HOME documents", self.run_c3home)
        self.phase("projects root", self.run_projects_root)
        self.phase(
            "final listings",
            self.lane,
            [Step("final: clean sessions --json", ["sessions", "--project", C, "--json"], C, json=True)],
        )
        after = hc.checksum(self.w.home)
        changes = hc.diff(before, after)
        self.check(
            not changes,
            "the decoy HOME is unchanged (nothing outside the sandbox is touched)",
            f"{len(changes)} change(s): " + "; ".join(changes[:6]),
        )
        self.phase("verification", self.verify)
        wall = time.perf_counter() - t0
        self.figures(changes, t_cli - t0, t_hub - t_mcp, wall)

    def figures(self, changes: list[str], cli_wall: float, hub_wall: float, wall: float) -> None:
        outs = self.outcomes
        refusals = sum(1 for o in outs if o.rc in (1, 2))
        hangs = sum(1 for o in outs if o.hung)
        hooks = sum(1 for o in outs if o.step.args[:1] == ["hook"])
        w = self.w
        self.res.fig(
            "world",
            f"{w.counts.get('repositories', 0)} repositories (1 clean, 1 worktree), "
            f"{w.counts.get('transcripts', 0)} transcripts, {w.counts.get('special files', 0)} special "
            f"files, {w.counts.get('symlinks', 0)} symlinks, {w.counts.get('deep documents', 0)} deep docs",
        )
        self.res.fig("CLI processes (steps)", f"{len(outs)}  ({hooks} hook calls; first pass {cli_wall:.1f} s)")
        self.res.fig("refusals (exit 1 or 2)", refusals)
        self.res.fig("hangs (killed at the timeout)", f"{hangs}  (timeout {self.timeout:.0f} s)")
        slow = max(outs, key=lambda o: o.wall) if outs else None
        if slow is not None:
            self.res.fig("slowest step", f"{slow.wall:.1f} s  [{slow.step.name}]")
        m = self.mcp
        self.res.fig(
            "MCP servers / tool calls",
            f"{m['servers']} / {m['calls']}  ({m['errors']} tool errors, "
            f"{m['hangs']} hangs; {m['exited']} exited by themselves; {m['wall']:.1f} s)",
        )
        h = self.hub
        self.res.fig("Hub requests", f"{h['requests']}  ({h['4xx']} 4xx, {h['5xx']} 5xx; {hub_wall:.1f} s)")
        self.res.fig("marks in the clean project", f"{len(self.acks)} acknowledged, {len(self.refused)} refused")
        self.res.fig("decoy HOME changes", len(changes))
        if self.breaks_by:
            worst = sorted(self.breaks_by.items(), key=lambda kv: -kv[1])
            self.res.fig("breaks by invariant", "; ".join(f"{k}: {v}" for k, v in worst))
        self.res.fig("hostile wall time", f"{wall:.1f} s")


def _lines(path: Path) -> list[bytes]:
    try:
        if not path.is_file():
            return []
        return path.read_bytes().split(b"\n")
    except OSError:
        return []


def part(mod, sb: Sandbox, quick: bool) -> Result:
    """One class of hostile input (a ``class_modules`` module), as its own section of the table."""
    res = Result(f"hostile: {mod.CLASS}")
    t0 = time.perf_counter()
    try:
        mod.check(res, sb, quick)
    except Exception:  # reported as a break, with where it happened
        import traceback

        res.check(False, f"the {mod.CLASS} scenario completes", gist(traceback.format_exc().encode()))
    res.wall = time.perf_counter() - t0
    return res


def run(sb: Sandbox, quick: bool, seed: int) -> Result:
    """The hostile world through every door (the classes are scenarios of their own)."""
    rng = random.Random(seed)
    t0 = time.perf_counter()
    world = hc.build_world(sb, rng, quick=quick)
    h = Hostile(sb, world, quick, seed)
    h.res.fig("world built in", f"{time.perf_counter() - t0:.1f} s")
    h.run()
    h.res.wall = time.perf_counter() - t0
    return h.res


def class_modules() -> list:
    """The classes of hostile input: every ``stress/hostile_*.py`` that names its class
    (``CLASS``, the title in the table) and checks it (``check(res, sb, quick)``), in name
    order. A new class is a new module; nothing here changes."""
    import importlib
    import pkgutil

    here = Path(__file__).resolve().parent
    found = []
    for info in sorted(pkgutil.iter_modules([str(here)]), key=lambda i: i.name):
        if not info.name.startswith("hostile_"):
            continue
        mod = importlib.import_module(f"{__package__}.{info.name}")
        if isinstance(getattr(mod, "CLASS", None), str) and callable(getattr(mod, "check", None)):
            found.append(mod)
    return found


if __name__ == "__main__":  # pragma: no cover - classes by hand: python -m stress.hostile [--full] NAME...
    import sys

    from .__main__ import main

    names = [f"hostile:{a}" for a in sys.argv[1:] if not a.startswith("--")] or ["hostile:"]
    sys.exit(main([*([] if "--full" in sys.argv else ["--quick"]), "--only", ",".join(names)]))
