"""Issue 13, checked the way it says: one project across a repository and its worktrees, from a
session's first turn, with the real Claude Code CLI.

One module-scoped world (built once, ~30 s): a git repository (main checkout on ``main``) with
two ``git worktree add`` worktrees on ``feat-a`` and ``feat-b``; ``claude mcp add c3 -- python -m
c3async serve`` in each checkout (as tests/test_claude_e2e.py does); the real ``claude -p`` run
offline against tests/fake_anthropic.py, several sessions at once:

- ten fresh sessions (3 in each checkout, plus the "linker" in the main checkout) whose model
  calls ``c3_session(action='note')`` on its very first turn; the linker then calls
  ``c3_task(action='add')`` and ``c3_task(action='link', link_type='session', ref=<the first
  8 characters of a feat-b session's id>)``;
- one more session in the feat-a worktree held mid-turn by the stand-in API (it stays live
  while every view is read, and is let go at the end);
- a stale mark written with ``c3async mark stale ... --project <feat-a worktree>`` on a session
  of the main checkout;
- before anything ran: state "written by the previous version" into the feat-a worktree's own
  ``.c3/`` (``session_marks.jsonl`` lines and ``pm/pm.json``, in the formats of c3async/marks.py
  ``Mark`` and c3async/tasks/store.py), about two older sessions whose transcripts are there too.

Then every view is read once: ``c3async sessions --project <checkout> --json`` for each checkout,
``sessions --all --json``, ``c3_session(action='list')`` from a ``c3async serve`` started in each
checkout (and ``show`` of every session from the main checkout), and the Hub's ``/api/sessions``.
The tests assert on those. The last test removes the feat-b worktree and reads again.

Skipped where no ``claude`` binary is installed (CI sets C3_CLAUDE). No timing assertions.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fake_api import FakeAPI, claude_cli, needs_claude

HERE = Path(__file__).resolve().parent


_claude = claude_cli
pytestmark = needs_claude

BRANCHES = {"main": "main", "wt-a": "feat-a", "wt-b": "feat-b"}
NOTES_PER_CHECKOUT = 3  # + the linker in the main checkout: ten first-turn notes
TOOLS = ("mcp__c3__c3_session", "mcp__c3__c3_task")
PARALLEL = 3  # claude sessions at once: more only adds contention on 2 cores
MCP_START_TIMEOUT = 60  # several servers importing at once on 2 cores: generous, not measured


# ------------------------------------------------------------------------------------ helpers


def _git(cwd: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.com",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.com",
    )
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False)
    if check:
        assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)  # the stand-in API re-reads the script on every request


def _marker(key: str) -> str:
    return f"[c3e2e:{key}]"


def _note_reply(key: str) -> dict:
    return {
        "tool_use": {
            "name": "mcp__c3__c3_session",
            "input": {"action": "note", "data": f"note of {key}", "reasoning": f"next for {key}"},
        }
    }


def _resume_tokens(resume: str) -> list[str] | None:
    try:
        return shlex.split(resume)
    except ValueError:
        return None


def _cds_into(resume: str, folder: str) -> bool:
    """``cd <folder> && ...`` first, as a POSIX shell reads it."""
    tokens = _resume_tokens(resume) or []
    return tokens[:3] == ["cd", folder, "&&"]


def _resumes(resume: str, sid: str) -> bool:
    tokens = _resume_tokens(resume) or []
    return any(tokens[i : i + 3] == ["claude", "--resume", sid] for i in range(len(tokens)))


def _blind_cd(resume: str, folder: str) -> bool:
    """Does the command ``cd`` into ``folder`` without first recreating it?"""
    tokens = _resume_tokens(resume)
    if tokens is None:
        return False
    for i in range(len(tokens) - 1):
        if tokens[i] == "cd" and tokens[i + 1] == folder:
            before = tokens[:i]
            recreated = ("worktree" in before and "add" in before) or "mkdir" in before
            if not recreated:
                return True
    return False


# ------------------------------------------------------------------------------------ the world


@dataclass
class Sess:
    key: str
    checkout: str  # "main", "wt-a", "wt-b"
    cwd: str
    id: str = ""
    first_turn_note: bool = True
    error: str = ""

    @property
    def note(self) -> tuple[str, str]:
        return f"note of {self.key}", f"next for {self.key}"


@dataclass
class Cmd:
    returncode: int
    stdout: str
    stderr: str

    def rows(self) -> list[dict]:
        assert self.returncode == 0, f"exit {self.returncode}: {self.stderr.strip()[-2000:]}"
        return json.loads(self.stdout)


@dataclass
class World:
    sandbox: object
    checkouts: dict[str, str]
    env: dict[str, str]
    log: Path
    sessions: list[Sess] = field(default_factory=list)
    held: Sess | None = None
    legacy: dict = field(default_factory=dict)
    marked: Sess | None = None  # marked stale from the feat-a worktree
    marked_reason: str = ""
    link_target: Sess | None = None
    linker: Sess | None = None
    task_id: str | None = None
    cli: dict[str, Cmd] = field(default_factory=dict)  # "main", "wt-a", "wt-b", "all"
    hub_rows: list[dict] | None = None
    hub_error: str = ""
    mcp: dict = field(default_factory=dict)
    hub: object = None

    @property
    def fresh(self) -> list[Sess]:
        """The ten sessions whose first turn calls the note."""
        return [s for s in self.sessions if s.first_turn_note]

    def expected(self) -> dict[str, tuple[str, str]]:
        """Every session of the project: id -> (its cwd, its branch)."""
        out = {s.id: (s.cwd, BRANCHES[s.checkout]) for s in self.sessions if s.id}
        if self.held is not None and self.held.id:
            out[self.held.id] = (self.held.cwd, BRANCHES["wt-a"])
        for sid in self.legacy.get("sessions", ()):
            out[sid] = (self.checkouts["wt-a"], BRANCHES["wt-a"])
        return out

    def describe(self, sid: str) -> str:
        for s in [*self.sessions, self.held]:
            if s is not None and s.id == sid:
                return f"{s.key} in {s.checkout}"
        if sid in self.legacy.get("sessions", ()):
            return "legacy session in wt-a"
        return "?"

    def cli_run(self, *args: str) -> Cmd:
        proc = self.sandbox.run(*args)
        return Cmd(proc.returncode, proc.stdout, proc.stderr)

    def tool_calls(self, key: str) -> list[tuple[str, dict, str, bool]]:
        """(tool, input, result text, is_error) of each tool call of one conversation, from the
        last request the stand-in API got for it (it carries the whole conversation)."""
        marker, last = _marker(key), None
        for line in self.log.read_text().splitlines():
            body = json.loads(line)
            if not body.get("tools"):
                continue
            first = next((m for m in body.get("messages") or [] if m.get("role") == "user"), None)
            if first is not None and marker in json.dumps(first.get("content")):
                last = body
        if last is None:
            return []
        calls: dict[str, tuple[str, dict]] = {}
        out = []
        for m in last["messages"]:
            content = m.get("content")
            if not isinstance(content, list):
                continue
            for b in content:
                if b.get("type") == "tool_use":
                    calls[b["id"]] = (b["name"], b.get("input") or {})
                elif b.get("type") == "tool_result" and b.get("tool_use_id") in calls:
                    inner = b.get("content")
                    text = (
                        inner
                        if isinstance(inner, str)
                        else "\n".join(x.get("text", "") for x in inner or [] if isinstance(x, dict))
                    )
                    out.append((*calls[b["tool_use_id"]], text, bool(b.get("is_error"))))
        return out


def _legacy_state(world: World, wt: str) -> None:
    """What the previous version left in a worktree: two older sessions (transcripts), their
    marks in ``<worktree>/.c3/session_marks.jsonl`` and a ``pm/pm.json`` linking them."""
    from stress.transcripts import Conversation, write_session

    folder = world.sandbox.folder(wt)
    start = datetime.now(UTC) - timedelta(days=3)
    old = []
    for i, prompt in enumerate(("Old: sketch the fold of worktree state", "Old: try a per-worktree cache")):
        conv = Conversation(wt, branch=BRANCHES["wt-a"], start=start + timedelta(hours=i), entrypoint="cli")
        lines = [conv.permission_mode(), *conv.exchange(prompt, "Sketched."), *conv.exchange("and then?", "Later.")]
        path = write_session(folder, conv.id, lines)
        when = (start + timedelta(hours=i, minutes=10)).timestamp()
        os.utime(path, (when, when))
        old.append(conv.id)
    base = start.timestamp() + 1800

    def mark(ts: float, sid: str, op: str, by: str, by_session: str | None, **fields: str | None) -> dict:
        # c3async/marks.py Mark, every field, in wire order (msgspec writes the Nones as null).
        row = {
            "ts": ts,
            "provider": "claude-code",
            "id": sid,
            "op": op,
            "reason": None,
            "successor": None,
            "summary": None,
            "next_steps": None,
            "by": by,
            "by_session": by_session,
        }
        row.update(fields)
        return row

    marks = [
        mark(base, old[0], "note", "agent", old[0], summary="legacy note one", next_steps="legacy next one"),
        mark(base + 60, old[1], "note", "agent", old[1], summary="legacy note two", next_steps=None),
        mark(base + 120, old[1], "stale", "user", None, reason="legacy: superseded by the fold"),
    ]
    task_full = uuid.uuid4().hex[:12]
    task_prefix = uuid.uuid4().hex[:12]
    decision = uuid.uuid4().hex[:12]

    def task(tid: str, title: str, sessions: list[str], ts: float) -> dict:
        # c3async/tasks/store.py Task, every field.
        return {
            "id": tid,
            "title": title,
            "description": "from the previous version",
            "status": "in_progress",
            "priority": "p1",
            "due": None,
            "tags": ["legacy"],
            "blocked_by": [],
            "milestone": None,
            "created": ts,
            "updated": ts,
            "sessions": sessions,
            "time": [],
        }

    pm = {
        "version": 1,
        "tasks": [
            task(task_full, "Legacy: fold worktree state", [old[0]], base),
            # An earlier version stored a typed prefix as is (issue 13): it must resolve when read.
            task(task_prefix, "Legacy: linked by a prefix", [old[1][:8]], base + 10),
        ],
        "milestones": [],
        "decisions": [
            {
                "id": decision,
                "text": "legacy decision: one state root",
                "reasoning": "worktrees",
                "task": task_full,
                "session": old[0],
                "ts": base + 20,
            }
        ],
        "events": [
            {
                "ts": base,
                "action": "add",
                "target": task_full,
                "session": old[0],
                "by": "agent",
                "changes": {"title": "Legacy: fold worktree state", "status": "in_progress", "priority": "p1"},
            },
            {
                "ts": base + 10,
                "action": "add",
                "target": task_prefix,
                "session": old[1],
                "by": "agent",
                "changes": {"title": "Legacy: linked by a prefix", "status": "in_progress", "priority": "p1"},
            },
            {
                "ts": base + 20,
                "action": "decide",
                "target": task_full,
                "session": old[0],
                "by": "agent",
                "changes": {"decision": decision},
            },
        ],
    }
    state = Path(wt, ".c3")
    (state / "pm").mkdir(parents=True)
    marks_text = "".join(json.dumps(m, separators=(",", ":")) + "\n" for m in marks)
    pm_text = json.dumps(pm, indent=1)
    (state / "session_marks.jsonl").write_text(marks_text)
    (state / "pm" / "pm.json").write_text(pm_text)
    world.legacy = {
        "sessions": old,
        "marks": marks,
        "marks_text": marks_text,
        "pm_text": pm_text,
        "task": task_full,
        "prefix_task": task_prefix,
        "decision": decision,
    }


def _run_claude(world: World, s: Sess, prompt: str) -> None:
    proc = subprocess.run(
        [_claude(), "-p", f"{_marker(s.key)} {prompt}", "--allowedTools", *TOOLS, "--output-format", "json"],
        cwd=s.cwd,
        env=world.env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    if proc.returncode != 0:
        s.error = f"claude exited {proc.returncode}: {proc.stderr.strip()[-1000:]} {proc.stdout.strip()[-500:]}"
        return
    try:
        s.id = json.loads(proc.stdout)["session_id"]
    except (ValueError, KeyError) as exc:
        s.error = f"no session id in claude's output ({exc}): {proc.stdout[-500:]}"


def _find_transcript_id(world: World, cwd: str, marker: str, timeout: float = 30) -> str:
    folder = Path(world.sandbox.folder(cwd))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in folder.glob("*.jsonl"):
            try:
                if marker in path.read_text(errors="replace"):
                    return path.stem
            except OSError:
                continue
        time.sleep(0.1)
    raise AssertionError(f"no transcript holding {marker} appeared in {folder}")


async def _mcp_views(world: World, errlogs: dict) -> dict:
    """``c3_session list`` from a server in each checkout; ``show`` of every session from the
    main checkout's server. Servers are started side by side (each imports for a while)."""
    import anyio
    from mcp import Client, StdioServerParameters, stdio_client

    def text_of(result) -> str:
        return "\n".join(getattr(b, "text", "") for b in result.content)

    out: dict = {"list": {}, "show": {}}
    ids = list(world.expected())

    async def one(name: str, path: str) -> None:
        env = world.sandbox.env(CLAUDE_PROJECT_DIR=path)
        params = StdioServerParameters(command=sys.executable, args=["-m", "c3async", "serve"], env=env, cwd=path)
        try:
            with anyio.fail_after(MCP_START_TIMEOUT + 60):
                async with Client(stdio_client(params, errlog=errlogs[name])) as c:
                    listed = await c.call_tool("c3_session", {"action": "list"})
                    out["list"][name] = (bool(listed.is_error), text_of(listed))
                    if name == "main":
                        for sid in ids:
                            shown = await c.call_tool("c3_session", {"action": "show", "target": sid})
                            out["show"][sid] = (bool(shown.is_error), text_of(shown))
        except Exception as exc:
            out["list"].setdefault(name, (True, f"the server in {path} failed: {exc!r}"))

    async with anyio.create_task_group() as tg:
        for name, path in world.checkouts.items():
            tg.start_soon(one, name, path)
    return out


def _read_views(world: World) -> None:
    from hubproc import Hub

    targets = {name: ("sessions", "--project", path, "--json") for name, path in world.checkouts.items()}
    targets["all"] = ("sessions", "--all", "--json")
    with ThreadPoolExecutor(4) as pool:
        futures = {name: pool.submit(world.cli_run, *args) for name, args in targets.items()}
        world.cli = {name: f.result() for name, f in futures.items()}
    world.hub = Hub(world.sandbox).start()
    world.hub_rows, world.hub_error = _hub_rows(world)
    import anyio

    with ExitStack() as stack:  # each server's stderr, kept for a failure's post-mortem
        errlogs = {
            name: stack.enter_context(open(Path(world.sandbox.root, f"mcp-{name}.stderr"), "w"))
            for name in world.checkouts
        }
        world.mcp = anyio.run(_mcp_views, world, errlogs)


def _hub_rows(world: World) -> tuple[list[dict] | None, str]:
    with world.hub.client() as c:
        r = c.get("/api/sessions")
    if r.status_code != 200:
        return None, f"/api/sessions answered {r.status_code}: {r.text[:500]}"
    return r.json()["rows"], ""


@pytest.fixture(scope="module")
def world(module_claude):
    sb = module_claude
    work = Path(sb.root, "work")
    main = sb.project("repo")
    _git(main, "init", "-q", "-b", "main")
    Path(main, "README.md").write_text("a repository with two worktrees\n")
    _git(main, "add", "README.md")
    _git(main, "commit", "-q", "-m", "first")
    checkouts = {"main": main}
    for name, branch in (("wt-a", "feat-a"), ("wt-b", "feat-b")):
        path = str(work / f"repo-{branch}")
        _git(main, "worktree", "add", "-q", "-b", branch, path)
        checkouts[name] = os.path.realpath(path)

    script, log = Path(sb.root, "script.json"), Path(sb.root, "api.jsonl")
    _write_atomic(script, json.dumps({"conversations": {}}))
    api = FakeAPI(script, log)
    env = api.env(sb)
    w = World(sandbox=sb, checkouts=checkouts, env=env, log=log)
    release = Path(sb.root, "release-held")
    held_proc: subprocess.Popen | None = None
    try:
        _legacy_state(w, checkouts["wt-a"])  # before the new version ever runs
        api.wait_ready()
        for name, path in checkouts.items():  # as test_claude_e2e.py registers the server
            added = subprocess.run(
                [_claude(), "mcp", "add", "c3", "--", sys.executable, "-m", "c3async", "serve"],
                cwd=path,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            # Claude Code keys its local config by the repository, so a worktree already has it.
            assert added.returncode == 0 or (name != "main" and "already exists" in added.stderr), (
                f"claude mcp add in {name}: {added.stderr}"
            )

        # Phase 1: nine note sessions side by side, and the held one in the feat-a worktree.
        for name, path in checkouts.items():
            w.sessions += [Sess(f"{name}-{i}", name, path) for i in range(1, NOTES_PER_CHECKOUT + 1)]
        w.held = Sess("held", "wt-a", checkouts["wt-a"], first_turn_note=False)
        conversations = {_marker(s.key): [_note_reply(s.key), {"text": "Noted."}] for s in w.sessions}
        conversations[_marker("held")] = [
            {"tool_use": {"name": "mcp__c3__c3_session", "input": {"action": "list"}}},
            {"hold": str(release), "then": {"text": "Done."}, "hold_s": 600},
        ]
        _write_atomic(script, json.dumps({"conversations": conversations}))
        with open(Path(sb.root, "held.out"), "w") as held_out:
            held_proc = subprocess.Popen(
                [_claude(), "-p", f"{_marker('held')} keep working on the fold", "--allowedTools", *TOOLS],
                cwd=w.held.cwd,
                env=env,
                stdout=held_out,
                stderr=subprocess.STDOUT,
            )
        with ThreadPoolExecutor(PARALLEL) as pool:
            list(pool.map(lambda s: _run_claude(w, s, f"leave a note in {s.checkout}"), w.sessions))
        broken = [f"{s.key}: {s.error}" for s in w.sessions if s.error]
        assert not broken, "claude sessions failed:\n" + "\n".join(broken)

        # Phase 2: the linker, in the main checkout: note first, then add a task and link it to a
        # feat-b session by an 8-character prefix of its id.
        w.link_target = next(s for s in w.sessions if s.checkout == "wt-b")
        w.linker = Sess("linker", "main", checkouts["main"])
        conversations[_marker("linker")] = [
            _note_reply("linker"),
            {"tool_use": {"name": "mcp__c3__c3_task", "input": {"action": "add", "title": "Fold the worktree state"}}},
            {
                "tool_use": {
                    "name": "mcp__c3__c3_task",
                    "input": {"action": "link", "link_type": "session", "ref": w.link_target.id[:8]},
                },
                "fill": {"task_id": "id"},
            },
            {"text": "Linked."},
        ]
        _write_atomic(script, json.dumps({"conversations": conversations}))
        _run_claude(w, w.linker, "track the fold as a task")
        assert not w.linker.error, w.linker.error
        w.sessions.append(w.linker)
        added = [t for name, _i, t, err in w.tool_calls("linker") if name.endswith("c3_task") and not err]
        if added:
            try:
                w.task_id = json.loads(added[0])["id"]
            except (ValueError, KeyError):
                pass

        # The held session: mid-turn (so live) once the API holds its second request.
        held_flag = Path(str(release) + ".held")
        deadline = time.monotonic() + 60
        while not held_flag.exists():
            assert held_proc.poll() is None, f"the held session exited: {Path(sb.root, 'held.out').read_text()}"
            assert time.monotonic() < deadline, "the held session never reached its second turn"
            time.sleep(0.05)
        w.held.id = _find_transcript_id(w, w.held.cwd, _marker("held"))

        # A mark written from the feat-a worktree about a session of the main checkout.
        w.marked = next(s for s in w.sessions if s.checkout == "main" and s is not w.linker)
        w.marked_reason = "superseded (marked from the feat-a worktree)"
        marked = w.cli_run("mark", "stale", w.marked.id, "--reason", w.marked_reason, "--project", checkouts["wt-a"])
        assert marked.returncode == 0, f"mark stale from the worktree failed: {marked.stderr}"

        _read_views(w)
        yield w
    finally:
        release.touch()
        if held_proc is not None:
            try:
                held_proc.wait(60)
            except subprocess.TimeoutExpired:
                held_proc.kill()
                held_proc.wait(10)
        if w.hub is not None:
            w.hub.stop()
        api.stop()


def _problems(problems: list[str], what: str) -> None:
    assert not problems, f"{len(problems)} problem(s) {what}:\n" + "\n".join(problems)


def _once(rows: list[dict], world: World, view: str) -> tuple[dict[str, dict], list[str]]:
    """The rows by id, and what is wrong with "each session once, nothing else"."""
    counts = Counter(r["id"] for r in rows)
    expected = world.expected()
    problems = [
        f"{view}: {sid} ({world.describe(sid)}) listed {n} times"
        for sid, n in counts.items()
        if n != 1 and sid in expected
    ]
    problems += [f"{view}: {sid} ({world.describe(sid)}) missing" for sid in expected if sid not in counts]
    problems += [
        f"{view}: unexpected row {sid} (cwd {next(r['cwd'] for r in rows if r['id'] == sid)})"
        for sid in counts
        if sid not in expected
    ]
    return {r["id"]: r for r in rows}, problems


def _place_problems(row: dict, world: World, view: str) -> list[str]:
    cwd, branch = world.expected()[row["id"]]
    tag = f"{view}: {row['id'][:8]} ({world.describe(row['id'])})"
    out = []
    if row.get("cwd") != cwd:
        out.append(f"{tag}: cwd {row.get('cwd')!r}, want {cwd!r}")
    if row.get("branch") != branch:
        out.append(f"{tag}: branch {row.get('branch')!r}, want {branch!r}")
    resume = row.get("resume") or ""
    if not (_cds_into(resume, cwd) and _resumes(resume, row["id"])):
        out.append(f"{tag}: resume {resume!r} does not cd into {cwd}")
    return out


# ------------------------------------------------------------------------------------ first turn


def test_ten_fresh_sessions_get_their_first_turn_note_on_their_own_row(world):
    assert len(world.fresh) == 10
    problems = []
    lines = []
    for path in world.checkouts.values():
        marks = Path(path, ".c3", "session_marks.jsonl")
        if marks.exists():
            lines += [json.loads(x) for x in marks.read_text().splitlines() if x.strip()]
    for s in world.fresh:
        tag = f"{s.key} ({s.id[:8]})"
        calls = world.tool_calls(s.key)
        note_calls = [c for c in calls if c[0].endswith("c3_session") and c[1].get("action") == "note"]
        if not note_calls:
            problems.append(f"{tag}: the model's note call never reached the server")
        elif note_calls[0][3]:
            problems.append(f"{tag}: the first-turn note call answered {note_calls[0][2][:200]!r}")
        rows = [r for r in world.cli[s.checkout].rows() if r["id"] == s.id]
        if not rows:
            problems.append(f"{tag}: no row in its own checkout's listing")
            continue
        note = rows[0].get("note") or {}
        if (note.get("summary"), note.get("next_steps")) != s.note:
            problems.append(f"{tag}: row note {note or None!r}, want {s.note}")
        mine = [m for m in lines if m.get("op") == "note" and m.get("id") == s.id]
        if not mine:
            problems.append(f"{tag}: no note mark for it in any checkout's .c3/session_marks.jsonl")
        elif any(m.get("by_session") != s.id or m.get("by") != "agent" for m in mine):
            problems.append(f"{tag}: note mark by {[(m.get('by'), m.get('by_session')) for m in mine]}")
        others = [m for m in lines if m.get("op") == "note" and m.get("summary") == s.note[0] and m.get("id") != s.id]
        if others:
            problems.append(f"{tag}: its note landed on {[m.get('id') for m in others]}")
    _problems(problems, f"with the ten first-turn notes ({sum(1 for p in problems if 'answered' in p)} refused)")


def test_state_lives_in_the_main_checkout(world):
    """Marks and heartbeats of sessions run in any checkout are in the main checkout's .c3;
    no worktree has a .c3 of its own (the old one was renamed aside)."""
    problems = []
    marks = Path(world.checkouts["main"], ".c3", "session_marks.jsonl")
    ids = {json.loads(x).get("id") for x in marks.read_text().splitlines() if x.strip()} if marks.exists() else set()
    for s in world.fresh:
        if s.id not in ids:
            problems.append(f"{s.key} ({s.checkout}): its note is not in {marks}")
    for name in ("wt-a", "wt-b"):
        state = Path(world.checkouts[name], ".c3")
        if state.exists():
            problems.append(f"{name} has its own {state}: {sorted(p.name for p in state.iterdir())}")
    beats = []
    for path in Path(world.checkouts["main"], ".c3", "live").glob("*.json"):
        try:
            beats.append(json.loads(path.read_text()).get("host_session_id"))
        except (OSError, ValueError):
            pass
    if world.held.id not in beats:
        problems.append(f"the held feat-a session's heartbeat is not in the main checkout's .c3/live ({beats})")
    _problems(problems, "with where state lives")


# ------------------------------------------------------------------------------------ each session once


@pytest.mark.parametrize("view", ["main", "wt-a", "wt-b", "all"])
def test_cli_lists_each_session_once_with_its_own_place(world, view):
    rows = world.cli[view].rows()
    by_id, problems = _once(rows, world, f"sessions {view}")
    for sid in world.expected():
        if sid in by_id:
            problems += _place_problems(by_id[sid], world, f"sessions {view}")
    _problems(problems, f"in `c3async sessions {'--all' if view == 'all' else '--project ' + view} --json`")


@pytest.mark.parametrize("view", ["main", "wt-a", "wt-b"])
def test_mcp_list_shows_each_session_once(world, view):
    error, text = world.mcp["list"].get(view, (True, "no answer"))
    assert not error, text
    prefixes = Counter(line.split()[0] for line in text.splitlines() if re.match(r"[0-9a-f]{8}\s", line))
    problems = [
        f"{sid[:8]} ({world.describe(sid)}) listed {prefixes.get(sid[:8], 0)} times"
        for sid in world.expected()
        if prefixes.get(sid[:8], 0) != 1
    ]
    known = {sid[:8] for sid in world.expected()}
    problems += [f"unexpected line for {p}" for p in prefixes if p not in known]
    _problems(problems, f"in c3_session(action='list') from the {view} checkout:\n{text}")


def test_mcp_show_gives_each_session_its_own_cwd_and_resume(world):
    problems = []
    for sid, (cwd, _branch) in world.expected().items():
        error, text = world.mcp["show"].get(sid, (True, "not asked"))
        tag = f"{sid[:8]} ({world.describe(sid)})"
        if error:
            problems.append(f"{tag}: show failed: {text[:300]}")
            continue
        m = re.search(r"\bcwd (\S+)", text)
        if not m or m.group(1) != cwd:
            problems.append(f"{tag}: show says cwd {m.group(1) if m else None!r}, want {cwd!r}")
        r = re.search(r"^resume: (.+)$", text, re.MULTILINE)
        if not r or not (_cds_into(r.group(1), cwd) and _resumes(r.group(1), sid)):
            problems.append(f"{tag}: show's resume {r.group(1) if r else None!r} does not cd into {cwd}")
    _problems(problems, "in c3_session(action='show') from the main checkout")


def test_hub_api_lists_each_session_once_with_its_own_place(world):
    assert world.hub_rows is not None, world.hub_error
    by_id, problems = _once(world.hub_rows, world, "hub")
    for sid in world.expected():
        if sid in by_id:
            problems += _place_problems(by_id[sid], world, "hub")
    _problems(problems, "in the Hub's /api/sessions")


# ------------------------------------------------------------------------------------ live


def test_a_live_worktree_session_is_live_in_every_view_and_gets_no_hints(world):
    held = world.held.id
    problems = []
    views = {f"sessions {name}": cmd.rows() for name, cmd in world.cli.items()}
    if world.hub_rows is not None:
        views["hub"] = world.hub_rows
    for view, rows in views.items():
        mine = [r for r in rows if r["id"] == held]
        if not mine:
            problems.append(f"{view}: the held session has no row")
        for r in mine:
            if not r.get("live") or r.get("hints"):
                problems.append(f"{view}: the held session reads live={r.get('live')} hints={r.get('hints')}")
        finished = [r["id"][:8] for r in rows if r["id"] != held and r.get("live")]
        if finished:
            problems.append(f"{view}: finished sessions read live: {finished}")
    for view, (_error, text) in world.mcp["list"].items():
        line = next((x for x in text.splitlines() if x.startswith(held[:8])), None)
        if line is None or "LIVE" not in line or re.search(r"  \[[^\]]*\]$", line):
            problems.append(f"mcp list {view}: the held session's line is {line!r}")
    _problems(problems, "with the live feat-a session")


# ------------------------------------------------------------------------------------ marks


def test_a_mark_written_from_a_worktree_shows_in_every_view(world):
    sid, reason = world.marked.id, world.marked_reason
    problems = []
    views = {f"sessions {name}": cmd.rows() for name, cmd in world.cli.items()}
    if world.hub_rows is not None:
        views["hub"] = world.hub_rows
    for view, rows in views.items():
        for r in [r for r in rows if r["id"] == sid] or [{}]:
            stale = r.get("stale") or {}
            if stale.get("reason") != reason:
                problems.append(f"{view}: {sid[:8]} (main checkout) stale = {stale or None!r}")
    for view, (_error, text) in world.mcp["list"].items():
        line = next((x for x in text.splitlines() if x.startswith(sid[:8])), None)
        if line is None or f"stale: {reason}" not in line:
            problems.append(f"mcp list {view}: {line!r}")
    error, text = world.mcp["show"].get(sid, (True, ""))
    if error or reason not in text:
        problems.append(f"mcp show: {text[:300]!r}")
    _problems(problems, "with the stale mark written from the feat-a worktree")


# ------------------------------------------------------------------------------------ links


def test_a_task_linked_by_prefix_shows_on_the_linked_sessions_row(world):
    target = world.link_target
    calls = world.tool_calls("linker")
    tasks = [c for c in calls if c[0].endswith("c3_task")]
    assert [c[1].get("action") for c in tasks] == ["add", "link"], f"the linker's task calls: {tasks}"
    add, link = tasks
    assert not add[3], f"c3_task add failed: {add[2]}"
    assert world.task_id, f"no task id in {add[2]!r}"
    assert link[1]["ref"] == target.id[:8] and len(link[1]["ref"]) == 8
    problems = []
    if link[3]:
        problems.append(f"c3_task link ref={link[1]['ref']!r} answered: {link[2][:300]}")
    got = world.cli_run("tasks", "get", "--task-id", world.task_id, "--project", world.checkouts["main"], "--json")
    if got.returncode != 0:
        problems.append(f"tasks get: {got.stderr.strip()}")
    else:
        doc = json.loads(got.stdout)
        stored = (doc.get("task") or doc).get("sessions")
        if stored is None or Counter(stored).get(target.id) != 1 or target.id[:8] in stored:
            problems.append(f"the task's sessions are {stored}, want the full id {target.id} once")
    views = {f"sessions {name}": cmd.rows() for name, cmd in world.cli.items()}
    if world.hub_rows is not None:
        views["hub"] = world.hub_rows
    for view, rows in views.items():
        row = next((r for r in rows if r["id"] == target.id), None)
        linked = [t.get("id") for t in (row or {}).get("links", {}).get("tasks", [])]
        if linked.count(world.task_id) != 1:
            problems.append(f"{view}: {target.key} ({target.id[:8]}) links.tasks = {linked}")
    _problems(problems, f"with the task linked by the prefix {target.id[:8]}")


def test_a_link_an_earlier_version_stored_as_a_prefix_resolves(world):
    old = world.legacy["sessions"][1]
    rows = world.cli["main"].rows()
    row = next((r for r in rows if r["id"] == old), None)
    assert row is not None, f"the legacy session {old} is not listed from the main checkout"
    linked = [t.get("id") for t in row["links"]["tasks"]]
    assert linked.count(world.legacy["prefix_task"]) == 1, f"links.tasks = {linked}"


# ------------------------------------------------------------------------------------ upgrade


def test_state_the_previous_version_left_in_a_worktree_is_found_once_from_the_main_checkout(world):
    legacy, main, wt = world.legacy, world.checkouts["main"], world.checkouts["wt-a"]
    old1, old2 = legacy["sessions"]
    problems = []
    rows = world.cli["main"].rows()
    counts = Counter(r["id"] for r in rows)
    by_id = {r["id"]: r for r in rows}
    for sid in (old1, old2):
        if counts.get(sid) != 1:
            problems.append(f"legacy session {sid[:8]} listed {counts.get(sid, 0)} times from the main checkout")
    note1 = (by_id.get(old1) or {}).get("note") or {}
    if (note1.get("summary"), note1.get("next_steps")) != ("legacy note one", "legacy next one"):
        problems.append(f"legacy note on {old1[:8]}: {note1 or None!r}")
    stale2 = (by_id.get(old2) or {}).get("stale") or {}
    if stale2.get("reason") != "legacy: superseded by the fold":
        problems.append(f"legacy stale mark on {old2[:8]}: {stale2 or None!r}")
    linked = [t.get("id") for t in (by_id.get(old1) or {}).get("links", {}).get("tasks", [])]
    if linked.count(legacy["task"]) != 1:
        problems.append(f"legacy task on {old1[:8]}: links.tasks = {linked}")
    # In the main checkout's state, once each, however many processes started since.
    root_marks = Path(main, ".c3", "session_marks.jsonl")
    have = [json.loads(x) for x in root_marks.read_text().splitlines() if x.strip()] if root_marks.exists() else []
    for m in legacy["marks"]:
        n = sum(1 for h in have if (h.get("id"), h.get("op"), h.get("ts")) == (m["id"], m["op"], m["ts"]))
        if n != 1:
            problems.append(f"legacy {m['op']} mark on {m['id'][:8]} is in {root_marks} {n} times")
    listed = world.cli_run("tasks", "list", "--project", main, "--json")
    if listed.returncode != 0:
        problems.append(f"tasks list from the main checkout: {listed.stderr.strip()}")
    else:
        ids = Counter(t["id"] for t in json.loads(listed.stdout)["tasks"])
        for tid, what in (
            (legacy["task"], "legacy task"),
            (legacy["prefix_task"], "legacy prefix task"),
            (world.task_id, "the linker's new task"),
        ):
            if tid and ids.get(tid) != 1:
                problems.append(f"{what} {tid} is listed {ids.get(tid, 0)} times from the main checkout")
    decisions = world.cli_run("tasks", "decisions", "--project", main, "--json")
    if decisions.returncode != 0 or json.dumps(json.loads(decisions.stdout)).count(legacy["decision"]) != 1:
        problems.append(f"legacy decision from the main checkout: {decisions.stdout.strip()[:300] or decisions.stderr}")
    # The worktree's own copy: renamed aside, whole, not deleted.
    aside = sorted(Path(wt).glob(".c3.folded-*"))
    if not aside:
        problems.append(f"no {wt}/.c3.folded-* (the worktree holds {sorted(p.name for p in Path(wt).iterdir())})")
    else:
        kept = aside[0]
        if (
            not (kept / "session_marks.jsonl").exists()
            or (kept / "session_marks.jsonl").read_text() != legacy["marks_text"]
        ):
            problems.append(f"{kept}/session_marks.jsonl is not the old file")
        if not (kept / "pm" / "pm.json").exists() or (kept / "pm" / "pm.json").read_text() != legacy["pm_text"]:
            problems.append(f"{kept}/pm/pm.json is not the old file")
    old_marks = Path(wt, ".c3", "session_marks.jsonl")
    if old_marks.exists() and legacy["marks_text"] in old_marks.read_text():
        problems.append(f"the old marks are still in {old_marks} (not folded)")
    _problems(problems, "with the previous version's state in the feat-a worktree")


# ------------------------------------------------------------------------------------ worktree removed


def test_removing_a_worktree_loses_nothing(world):
    """Last: it removes the feat-b worktree. Its sessions stay listed from the main checkout, from
    --all and in the Hub, with a ``worktree gone`` hint, a resume that does not cd blindly into
    the missing folder, their notes, a stale mark written there and the task linked to one."""
    gone = world.checkouts["wt-b"]
    mine = [s for s in world.sessions if s.checkout == "wt-b"]
    doomed = next(s for s in mine if s is not world.link_target)
    reason = "abandoned before the worktree went"
    marked = world.cli_run("mark", "stale", doomed.id, "--reason", reason, "--project", gone)
    assert marked.returncode == 0, marked.stderr
    removed = _git(world.checkouts["main"], "worktree", "remove", gone, check=False)
    note = ""
    if removed.returncode != 0:  # files in it (our own state?) keep git from removing it
        note = f" (plain `git worktree remove` refused: {removed.stderr.strip()}; removed with --force)"
        _git(world.checkouts["main"], "worktree", "remove", "--force", gone)
    assert not os.path.exists(gone)
    views = {
        "sessions main": world.cli_run("sessions", "--project", world.checkouts["main"], "--json").rows(),
        "sessions all": world.cli_run("sessions", "--all", "--json").rows(),
    }
    rows, error = _hub_rows(world)
    views["hub"] = rows if rows is not None else []
    problems = [f"hub: {error}"] if error else []
    for view, listed in views.items():
        by_id, found = _once(listed, world, view)
        problems += found
        for s in mine:
            row = by_id.get(s.id)
            if row is None:
                continue
            tag = f"{view}: {s.key} ({s.id[:8]})"
            if row.get("cwd") != gone:
                problems.append(f"{tag}: cwd {row.get('cwd')!r}, want its own {gone!r}")
            if "worktree gone" not in (row.get("hints") or []):
                problems.append(f"{tag}: hints {row.get('hints')}, want 'worktree gone'")
            resume = row.get("resume") or ""
            if _blind_cd(resume, gone) or s.id not in resume:
                problems.append(f"{tag}: resume {resume!r}")
            if ((row.get("note") or {}).get("summary"), (row.get("note") or {}).get("next_steps")) != s.note:
                problems.append(f"{tag}: note {row.get('note')!r}")
            if s is doomed and (row.get("stale") or {}).get("reason") != reason:
                problems.append(f"{tag}: the stale mark written in the worktree: {row.get('stale')!r}")
            if s is world.link_target:
                linked = [t.get("id") for t in row.get("links", {}).get("tasks", [])]
                if linked.count(world.task_id) != 1:
                    problems.append(f"{tag}: links.tasks = {linked}")
    _problems(problems, f"after `git worktree remove {gone}`{note}")
