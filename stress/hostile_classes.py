"""The other classes of hostile input, each a scenario of its own, through the doors a new user
or a neighbour reaches: the CLI (each probe a process with a time limit), a real ``c3async
serve`` over stdio, the hook, and the Hub.

- typos: a ``--project`` that is no directory (missing, a file, below a file), a wrong
  ``CLAUDE_PROJECT_DIR``, a hook for a folder that does not exist: a usage error (exit 2) naming
  it, and nothing registered or created anywhere;
- shipped state: a repository whose ``.c3`` logs name 50,000 folders, relative folders and
  another project's folder; a ``.git`` whose config moves the root to the parent; a ``.git``
  folder listing another project as its worktree; a ``.claude`` linked outside; folder names
  with a newline and ``;``: no other folder's session is served, the parent gets no ``.c3``,
  nothing is written through the link, and every resume command parses to its words;
- bad values: dates out of range at every door, wrong-typed settings and prices, a planted
  search database, a 50 GB sparse transcript (timed: ``show --turns`` and two ``stats``);
- check-then-use: a process swapping a session's folders for links while ``keep`` runs, a
  linked session folder in Claude Code's folder for ``resume``, ``resume --print``, an archive
  other accounts can write;
- real transcripts: a compaction's sub-agent, an orphaned sub-agent folder, a flat 2.0 agent
  file and a 1.0.x inline sidechain (their hits opened in the Hub's reader), parallel batches
  (every page of the reader holds each call with its result);
- any id: another registered project's session shown, marked, resumed and linked from here; a
  prefix two projects share.

Every probe: no traceback, no hang, exit 0, 1 or 2, and the expected outcome.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .harness import PY, REPO, Result, assistant_line, claude_slug, encode, tool_result_line, user_line

TIMEOUT_S = 120.0


@dataclass
class Probe:
    """One class's sandbox and its CLI runner."""

    res: Result
    root: Path
    env: dict[str, str] = field(default_factory=dict)
    runs: int = 0

    @property
    def config(self) -> Path:
        return self.root / "claude"

    @property
    def home(self) -> Path:
        return self.root / "c3home"

    def project(self, name: str) -> str:
        path = self.root / "work" / name
        path.mkdir(parents=True, exist_ok=True)
        return os.path.realpath(path)

    def session(self, project: str, prompt: str, sid: str | None = None, *, folder: str | None = None,
                lines: list[dict] | None = None) -> str:
        sid = sid or str(uuid.uuid4())
        dest = self.config / "projects" / (folder or claude_slug(project))
        dest.mkdir(parents=True, exist_ok=True)
        ts = time.time() - 3600
        u = user_line(sid, project, prompt, ts)
        body = [u, assistant_line(sid, project, f"on it: {prompt}", ts + 1, u["uuid"])] + (lines or [])
        (dest / f"{sid}.jsonl").write_bytes(b"".join(encode(x) for x in body))
        return sid

    def run(self, what: str, *args: str, cwd: str | None = None, env: dict[str, str] | None = None,
            expect: tuple[int, ...] = (0,), says: tuple[str, ...] = (), stdin: str = "") -> subprocess.CompletedProcess:
        self.runs += 1
        try:
            proc = subprocess.run([PY, "-m", "c3async", *args], capture_output=True, text=True, timeout=TIMEOUT_S,
                                  env=env or self.env, cwd=cwd or str(self.root), input=stdin)
        except subprocess.TimeoutExpired:
            self.res.check(False, "no hang", f"{what}: no answer in {TIMEOUT_S:.0f} s")
            return subprocess.CompletedProcess(args, -1, "", "")
        self.res.check("Traceback" not in proc.stderr + proc.stdout, "no traceback", f"{what}: {proc.stderr[-300:]!r}")
        self.res.check(proc.returncode in expect, "the expected exit status",
                       f"{what}: {proc.returncode}, wanted {expect}: {proc.stderr[-300:]!r}")
        for word in says:
            self.res.check(word in proc.stderr + proc.stdout, "a refusal names the problem",
                           f"{what}: {word!r} not said: {proc.stderr[-300:]!r}")
        return proc

    def rows(self, project: str) -> dict[str, dict]:
        proc = self.run(f"sessions --project {project}", "sessions", "--project", project, "--json")
        try:
            return {r["id"]: r for r in json.loads(proc.stdout or "[]")}
        except ValueError:
            return {}


def _probe(res: Result, sb, name: str) -> Probe:
    root = sb.root / f"class-{name}"
    root.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "C3_"))}
    env.update(CLAUDE_CONFIG_DIR=str(root / "claude"), C3_HOME=str(root / "c3home"), PYTHONPATH=str(REPO),
               HOME=str(root / "home"))
    (root / "home").mkdir()
    return Probe(res, root, env)


def _tree(root: Path) -> set[str]:
    return {os.path.relpath(os.path.join(d, n), root) for d, ds, fs in os.walk(root) for n in ds + fs}


def _mcp(p: Probe, project: str, calls: list[tuple[str, dict]]) -> list[tuple[bool, str]]:
    """(is_error, text) of each call to a real ``c3async serve`` started in ``project``."""
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=PY, args=["-m", "c3async", "serve"],
                                   env={**p.env, "CLAUDE_PROJECT_DIR": project}, cwd=project)

    async def main() -> list[tuple[bool, str]]:
        out = []
        with open(p.root / "serve.err", "a") as err:  # stdio_client needs a real file
            async with Client(stdio_client(params, errlog=err), mode="legacy", read_timeout_seconds=TIMEOUT_S) as c:
                for tool, args in calls:
                    r = await c.call_tool(tool, args)
                    out.append((bool(r.is_error), "".join(getattr(x, "text", "") for x in r.content or [])))
        return out

    answers = anyio.run(main)
    for (tool, args), (_, text) in zip(calls, answers):
        p.res.check("Traceback" not in text and "failed inside c3async" not in text, "every tool call gets a tool result",
                    f"{tool}({args}): {text[:300]!r}")
    return answers


# ------------------------------------------------------------------------------ typos


def typos(res: Result, sb, quick: bool) -> None:
    p = _probe(res, sb, "typos")
    real = p.project("real")
    sid = p.session(real, "a real session")
    (p.root / "work" / "notes.txt").write_text("not a project\n")
    before = _tree(p.root)
    targets = [str(p.root / "work" / "no-such-dir"), str(p.root / "work" / "notes.txt"),
               str(p.root / "work" / "notes.txt" / "below")]
    commands = [["sessions"], ["show", sid], ["mark", "note", sid, "--summary", "s"], ["keep", sid],
                ["resume", sid, "--print"], ["tasks", "add", "--title", "t"], ["live"], ["stats"], ["search", "x"],
                ["install-hooks"]]
    for target in targets:
        for args in commands:
            p.run(f"{args[0]} --project {target}", *args, "--project", target, expect=(2,), says=(target,))
    p.run("sessions with CLAUDE_PROJECT_DIR gone", "sessions", env={**p.env, "CLAUDE_PROJECT_DIR": targets[0]},
          expect=(2,), says=("CLAUDE_PROJECT_DIR",))
    hook = json.dumps({"hook_event_name": "SessionStart", "session_id": str(uuid.uuid4()), "cwd": targets[0]})
    p.run("a hook for a folder that does not exist", "hook", stdin=hook)  # exits 0, writes nothing there
    for folder in ("/", str(p.root / "work")):
        p.run(f"sessions in {folder} (no sessions)", "sessions", cwd=folder)
    after = _tree(p.root)
    made = sorted(after - before - {"c3home", "c3home/hook-errors.log"})
    res.check(not made, "nothing is registered or created for a typo", ", ".join(made[:6]))
    res.fig("probes", f"{p.runs} commands on {len(targets)} typo'd folders; {len(made)} files made")


# ------------------------------------------------------------------------------ shipped state


def shipped(res: Result, sb, quick: bool) -> None:
    p = _probe(res, sb, "shipped")
    victim = p.project("victim")
    secret = p.session(victim, "the victim's private prompt")
    repo = Path(p.project("shipped"))
    own = p.session(str(repo), "the shipped repository's own session")
    c3 = repo / ".c3"
    c3.mkdir()
    n = 20_000 if quick else 200_000
    rows = [json.dumps({"ts": i, "kind": "session_start", "session_id": str(uuid.UUID(int=i)), "cwd": f"{repo}/d{i}"})
            for i in range(n)]
    for cwd in ("..", "../victim", victim, f"{repo}/../victim", "victim"):
        rows.append(json.dumps({"ts": n, "kind": "session_start", "session_id": secret, "cwd": cwd}))
    (c3 / "activity.jsonl").write_text("\n".join(rows) + "\n")
    (c3 / "sessions").mkdir()
    (c3 / "sessions" / f"{uuid.uuid4()}.json").write_text(json.dumps(
        {"c3_session_id": str(uuid.uuid4()), "cwd": victim, "host_session_ids": [secret]}))
    t0 = time.perf_counter()
    listed = p.rows(str(repo))
    res.fig(f"listing with {n:,} shipped folders in its log", f"{time.perf_counter() - t0:.2f} s (whole process)")
    res.check(set(listed) == {own}, "a shipped log serves no other folder's sessions", f"listed {sorted(listed)}")
    found = p.run("search from the shipped repository", "search", "private", "--project", str(repo), "--json")
    res.check('"results":[]' in found.stdout.replace(" ", ""), "a shipped log brings no other folder into search",
              found.stdout[:200])
    answers = _mcp(p, str(repo), [("c3_session", {"action": "list"}), ("c3_session", {"action": "search",
                                                                                        "target": "private"})])
    res.check(all("private prompt" not in text for _, text in answers), "the MCP server serves no other folder",
              "; ".join(t[:120] for _, t in answers))
    # a .git whose config moves the root to the parent
    parent = Path(p.project("parent"))
    inner = parent / "cloned"
    fake = inner / ".fakegit" / "worktrees" / "w"
    fake.mkdir(parents=True)
    (inner / ".git").write_text("gitdir: .fakegit/worktrees/w\n")
    (fake / "commondir").write_text("../..\n")
    (fake / "gitdir").write_text(f"{inner}/.git\n")
    (inner / ".fakegit" / "config").write_text("[core]\n\tworktree = ../..\n\tbare = false\n")
    cloned = p.session(str(inner), "in the cloned folder")
    p.run("mark note in a folder whose .git names the parent", "mark", "note", cloned, "--summary", "here",
          "--project", str(inner))
    res.check(not (parent / ".c3").exists(), "a repository's own config never moves the root outside it",
              "the parent got a .c3")
    # a .claude linked outside
    outside = p.root / "outside"
    outside.mkdir()
    (repo / ".claude").symlink_to(outside)
    p.run("install-hooks through a linked .claude", "install-hooks", "--project", str(repo), expect=(1,),
          says=("symlink",))
    res.check(list(outside.iterdir()) == [], "nothing under .claude is written through a link",
              str(list(outside.iterdir())))
    # folder names that would run something when a resume command is pasted
    bad = 0
    for name in ("a\nrm -rf ~", "b; touch pwned #", "c $(id)", "d'\"q"):
        folder = p.project(name)
        sid = p.session(folder, "quoted")
        for row in p.rows(folder).values():
            ok = shlex.split(row["resume"]) == ["cd", folder, "&&", "claude", "--resume", sid]
            bad += not ok
            res.check(ok, "every printed or copied command quotes every part", repr(row["resume"]))
    res.fig("probes", f"{p.runs} commands, 1 MCP server; {bad} resume commands that parse wrong")


# ------------------------------------------------------------------------------ bad values


def bad_values(res: Result, sb, quick: bool) -> None:
    p = _probe(res, sb, "bad-values")
    project = p.project("app")
    sid = p.session(project, "fix the retry budget")
    p.run("register", "sessions", "--project", project)
    for when in ("99999999999d", "9" * 5000 + "m", "0001-01-01", "9999-12-31T23:59:59-14:00"):
        for flag in ("--since", "--until"):
            p.run(f"search {flag} {when[:20]}", "search", "retry", "--project", project, flag, when, expect=(1, 2),
                  says=("out of range",))
    config = Path(project, ".c3", "config.json")
    for doc, key in (({"idle_days": "x"}, "idle_days"), ({"mcp_resources": "all"}, "mcp_resources"),
                     ({"idle_days": -1}, "idle_days")):
        config.write_text(json.dumps(doc))
        p.run(f"sessions with config {doc}", "sessions", "--project", project, expect=(1,), says=(key, "config.json"))
    config.unlink()
    prices = p.home / "prices.json"
    for doc in ({"m": {"input": "x", "output": 1}}, {"m": {"input": 1}}, [1], {"m": {"input": -1, "output": 1}}):
        prices.write_text(json.dumps(doc))
        p.run(f"stats with prices {doc}", "stats", "--project", project, expect=(1,), says=("prices.json",))
    prices.unlink()
    answers = _mcp(p, project, [("c3_session", {"action": "search", "target": "retry", "data": "since=99999999999d"})])
    res.check(answers[0][0] and "out of range" in answers[0][1], "the MCP server answers a bad date with a tool error",
              answers[0][1][:200])
    # a planted trigger in the search index
    import sqlite3

    p.run("index", "index", "--quiet")
    for db in (p.home / "search").glob("index-*.db"):
        conn = sqlite3.connect(db)
        conn.executescript("CREATE TRIGGER planted AFTER INSERT ON files BEGIN SELECT count(*) FROM (WITH RECURSIVE "
                           "c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c); END;")
        conn.close()
    p.session(project, "a newer retry prompt")
    p.run("search with a planted trigger", "search", "retry", "--project", project)
    # a 50 GB sparse transcript
    path = p.config / "projects" / claude_slug(project) / f"{sid}.jsonl"
    with open(path, "ab") as f:
        f.write(b'{"type":"user","message":{"content":"')
    os.truncate(path, 50 * 2**30)
    times = {}
    for what, args in (("show --turns 5", ["show", sid, "--project", project, "--turns", "5"]),
                       ("stats (first)", ["stats", "--project", project]),
                       ("stats (again)", ["stats", "--project", project])):
        t0 = time.perf_counter()
        p.run(f"{what} of a 50 GB sparse transcript", *args)
        times[what] = time.perf_counter() - t0
    res.fig("50 GB sparse transcript", ", ".join(f"{k} {v:.2f} s" for k, v in times.items()))
    res.fig("probes", f"{p.runs} commands, 1 MCP server")


# ------------------------------------------------------------------------------ check-then-use


@contextmanager
def swapping(folder: Path, foreign: Path) -> Iterator[None]:
    """While the block runs, another thread keeps swapping ``folder`` for a link to ``foreign``
    and back (the race a check-then-use loses); ``folder`` is back in place after."""
    real = folder.with_name(folder.name + ".real")
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            try:
                os.rename(folder, real)
                folder.symlink_to(foreign)
                folder.unlink()
                os.rename(real, folder)
            except OSError:
                pass

    t = threading.Thread(target=swap)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()
        if folder.is_symlink():
            folder.unlink()
        if not folder.exists():
            os.rename(real, folder)


def check_then_use(res: Result, sb, quick: bool) -> None:
    p = _probe(res, sb, "check-then-use")
    project = p.project("app")
    sid = p.session(project, "keep me")
    folder = p.config / "projects" / claude_slug(project)
    side = folder / sid / "subagents"
    side.mkdir(parents=True)
    (side / "agent-a.jsonl").write_bytes(encode(user_line(sid, project, "sub-agent work", time.time())))
    foreign = p.root / "foreign"
    foreign.mkdir()
    (foreign / "agent-a.jsonl").write_text('{"secret":"the foreign file"}\n')
    with swapping(side, foreign):
        for _ in range(6 if quick else 20):
            p.run("mark keep while its folders are swapped", "mark", "keep", sid, "--project", project, expect=(0, 1))
    foreign_ino = os.stat(foreign / "agent-a.jsonl").st_ino
    kept = [f for f in (p.home / "archive").rglob("*") if f.is_file()]
    res.check(all(os.lstat(f).st_ino != foreign_ino and b"foreign file" not in f.read_bytes() for f in kept),
              "keep never archives a file a swapped folder leads to", str(kept))
    (folder / f"{sid}.jsonl").unlink()
    shutil.rmtree(folder / sid)
    proc = p.run("resume --print", "resume", sid, "--print", "--project", project)
    res.check(not (folder / f"{sid}.jsonl").exists() and "would put back" in proc.stderr,
              "resume --print puts nothing back", proc.stderr[-200:])
    elsewhere = p.root / "elsewhere"
    elsewhere.mkdir()
    (folder / sid).symlink_to(elsewhere)
    p.run("resume through a linked session folder", "resume", sid, "--project", project, expect=(1,),
          says=("not followed",))
    res.check(list(elsewhere.iterdir()) == [], "resume never writes through a linked folder",
              str(list(elsewhere.iterdir())))
    (folder / sid).unlink()
    os.chmod(p.home, 0o777)
    try:
        proc = p.run("sessions with an archive others can write", "sessions", "--project", project, "--json",
                     says=("refusing the archive",))
        res.check(sid not in proc.stdout, "an archive others can write is not listed from", proc.stdout[:200])
        p.run("resume from an archive others can write", "resume", sid, "--project", project, expect=(1,))
        res.check(not (folder / f"{sid}.jsonl").exists(), "nothing is restored from an archive others can write")
    finally:
        os.chmod(p.home, 0o700)
    res.fig("probes", f"{p.runs} commands (keep raced by a folder swapper)")


# ------------------------------------------------------------------------------ real transcripts


def real_transcripts(res: Result, sb, quick: bool) -> None:
    from .hostile_neighbour import start_hub

    p = _probe(res, sb, "real")
    project = p.project("app")
    folder = p.config / "projects" / claude_slug(project)
    now = time.time() - 600
    compacted = p.session(project, "compacted work")
    comp = folder / compacted / "subagents"
    comp.mkdir(parents=True)
    (comp / "agent-acompact-9f8e.jsonl").write_bytes(
        encode({**user_line(compacted, project, "Create a detailed summary, quodlibetzz", now), "isSidechain": True}))
    orphan = str(uuid.uuid4())
    (folder / orphan / "subagents").mkdir(parents=True)
    (folder / orphan / "subagents" / "agent-x.jsonl").write_bytes(
        encode({**user_line(orphan, project, "an orphaned frobnicatezz", now), "isSidechain": True}))
    flat_parent = p.session(project, "start the audit")
    (folder / "agent-5f6e7d8c.jsonl").write_bytes(
        encode({**user_line(flat_parent, project, "look into the quasarfluxzz module", now), "isSidechain": True}))
    inline = p.session(project, "begin", lines=[{**user_line(str(uuid.uuid4()), project, "sub-task blorptanglezz",
                                                              now + 2), "sessionId": None, "isSidechain": True}])
    # parallel batches: calls in one line, results one line each
    batch_sid = str(uuid.uuid4())
    calls = [{"type": "tool_use", "id": f"toolu_{i:04d}", "name": "Bash", "input": {"command": f"c{i}"}}
             for i in range(12)]
    lines = [user_line(batch_sid, project, "run them all", now)]
    a = assistant_line(batch_sid, project, "", now + 1, lines[0]["uuid"])
    a["message"]["content"] = calls
    lines.append(a)
    for i, c in enumerate(calls):
        r = tool_result_line(batch_sid, project, f"out {i}", now + 2, a["uuid"])
        r["message"]["content"][0]["tool_use_id"] = c["id"]
        lines.append(r)
    lines.append(user_line(batch_sid, project, "and then", now + 3))
    (folder / f"{batch_sid}.jsonl").write_bytes(b"".join(encode(x) for x in lines))
    p.run("register", "sessions", "--project", project)
    found = json.loads(p.run("search compaction", "search", "quodlibetzz", "--project", project, "--json").stdout)
    res.check(found["results"] == [], "a compaction's sub-agent is not searched", str(found["results"])[:200])
    found = json.loads(p.run("search orphan", "search", "frobnicatezz", "--project", project, "--json").stdout)
    res.check(found["results"] == [], "an orphaned sub-agent folder is no hit", str(found["results"])[:200])
    hub, port, token = start_hub(p.env)
    opened = pages = split = 0
    try:
        import urllib.parse
        import urllib.request

        def get(path: str, **q: object) -> dict:
            url = f"http://127.0.0.1:{port}{path}?" + urllib.parse.urlencode({k: v for k, v in q.items() if v is not None})
            req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read())

        for word, sid in (("quasarfluxzz", flat_parent), ("blorptanglezz", inline)):
            results = get("/api/search", q=word, project=project)["results"]
            ok = len(results) == 1 and results[0]["id"] == sid
            res.check(ok, "a hit names its session", f"{word}: {results}")
            if not ok:
                continue
            sn = results[0]["snippets"][0]
            pg = get(f"/api/sessions/{sid}/conversation", at=sn["offset"], agent=sn.get("agent"), project=project)
            target = next((i for i in pg["items"] if i["offset"] == pg["target"]), {})
            opened += word in (target.get("text") or "")
            res.check(word in (target.get("text") or ""), "a hit opens the reader on its own item", f"{word}: {target}")
        for limit in (1, 3, 5):
            nxt: int | None = 0
            while nxt is not None:
                pg = get(f"/api/sessions/{batch_sid}/conversation", after=nxt, limit=limit, project=project)
                pages += 1
                for it in pg["items"]:
                    if it["kind"] == "tool" and not (it.get("name") and it.get("output") is not None
                                                     and pg["start"] <= it["result_offset"] < pg["end"]):
                        split += 1
                nxt = pg["next"]
    finally:
        hub.terminate()
        hub.wait(10)
        if hub.stderr is not None:
            hub.stderr.close()
    res.check(split == 0, "a reader page never separates a tool call from its result", f"{split} split")
    res.fig("probes", f"{p.runs} commands; {opened} hits opened on their item; {pages} reader pages, {split} split")


# ------------------------------------------------------------------------------ any id


def any_id(res: Result, sb, quick: bool) -> None:
    p = _probe(res, sb, "any-id")
    here, there = p.project("here"), p.project("there")
    mine = p.session(here, "this project's")
    theirs = p.session(there, "the other project's", "eeee0001-0000-4000-8000-000000000001")
    p.session(there, "a twin", "ffff0001-0000-4000-8000-000000000001")
    p.session(here, "another twin", "ffff0002-0000-4000-8000-000000000002")
    for proj in (here, there):
        p.run("register", "sessions", "--project", proj)
    proc = p.run("show another project's session", "show", theirs[:8], "--project", here, says=(there,))
    res.check("the other project's" in proc.stdout, "show finds an id of any registered project", proc.stdout[:200])
    p.run("mark it", "mark", "note", theirs[:8], "--summary", "from here", "--project", here, says=(there,))
    marks = Path(there, ".c3", "session_marks.jsonl")
    res.check(marks.exists() and theirs in marks.read_text(), "a mark is written in the session's own project")
    proc = p.run("resume it", "resume", theirs[:8], "--print", "--project", here)
    res.check(shlex.split(proc.stdout)[:2] == ["cd", there], "resume runs in the session's own folder", proc.stdout)
    elsewhere = p.project("elsewhere")
    p.run("a prefix two projects share", "show", "ffff", "--project", elsewhere, expect=(1,), says=(here, there))
    answers = _mcp(p, here, [("c3_session", {"action": "show", "target": theirs[:8]})])
    res.check(not answers[0][0] and there in answers[0][1], "the MCP server shows another project's session",
              answers[0][1][:200])
    assert mine
    res.fig("probes", f"{p.runs} commands, 1 MCP server")


SCENARIOS = {
    "typos": typos,
    "shipped .c3 and .git": shipped,
    "bad values": bad_values,
    "check-then-use": check_then_use,
    "real transcripts": real_transcripts,
    "any id, any project": any_id,
}


if __name__ == "__main__":  # pragma: no cover - one class by hand: python -m stress.hostile_classes typos
    from .harness import Sandbox, print_table

    sb = Sandbox()
    try:
        results = []
        for name, fn in SCENARIOS.items():
            if len(sys.argv) > 1 and sys.argv[1] not in name:
                continue
            r = Result(f"hostile: {name}")
            t0 = time.perf_counter()
            fn(r, sb, True)
            r.wall = time.perf_counter() - t0
            results.append(r)
        print_table(results, "by hand", 0.0)
    finally:
        sb.close()
