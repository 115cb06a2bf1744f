"""c3async as a Claude Code plugin, end to end with the real CLI offline (a stand-in Messages
API): validate, a marketplace added from a local path (a clean copy of this checkout, as a
clone would be), install into a fresh config dir, `mcp list` Connected, a `-p` session that
fires the plugin's hooks and calls its tools, `/mcp__plugin_c3async_c3__continue <prefix>`
putting the earlier session's note, next steps and last prompt into the request the API gets,
an interactive `@plugin:c3async:c3:c3://session/<id>` putting its brief there, and the plugin
beside a server added by hand (one row per session, one MCP count, one hook row per event).

One install per module: the first connect builds the plugin's environment under
``${CLAUDE_PLUGIN_DATA}`` (pip, from the registry or its cache; uv where installed); the server
answers from its manifest meanwhile. Then the first session of fresh installs: with the build held
past Claude Code's 30 s wait, a `-p` session's tool call is answered by the real server once the
build is done, its SessionStart hook (fired during the build) recorded with its own time, and no
failed connect remembered in ``mcp-needs-auth-cache.json``; an interactive first session @-mentions
an earlier session once the server has listed them; and a first session with both cores busy and
an empty package cache (a real build, from the registry) has the tools too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from claude_pty import Terminal, trust
from fake_api import FakeAPI, claude_cli, needs_claude
from plugin_build import Gate, wait_for

from stress.transcripts import simple_session

REPO = Path(__file__).resolve().parents[1]
PLUGIN = "c3async@c3async"
SERVER = "plugin_c3async_c3"  # Claude Code's name for the plugin's server `c3` in tool and prompt names
MENTION = "plugin:c3async:c3"  # ... and in @ mentions

pytestmark = needs_claude


def _clean_copy(dest: Path) -> Path:
    """The files a clone of this checkout holds (tracked and new, nothing ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=False,
    )
    if listed.returncode != 0:  # not a git checkout: everything but caches
        shutil.copytree(REPO, dest, ignore=shutil.ignore_patterns("__pycache__", ".git", "*.egg-info"))
        return dest
    for name in filter(None, listed.stdout.decode().split("\0")):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


class World:
    def __init__(self, sandbox, tmp: Path) -> None:
        self.sandbox = sandbox
        self.tmp = tmp
        self.root = _clean_copy(tmp / "c3async-checkout")
        self.before = _files(self.root)
        self.script, self.log = tmp / "script.json", tmp / "api.jsonl"
        self.script.write_text("[]")
        self.api = FakeAPI(self.script, self.log).wait_ready()
        self.env = self.api.env(sandbox)
        self.env.pop("PYTHONPATH", None)  # the plugin runs its own copy, as for a user

    def claude(self, *args: str, cwd: str | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
        return subprocess.run(
            [claude_cli(), *args],
            cwd=cwd or str(self.tmp),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def project(self, name: str) -> str:
        """A git repository whose folder is trusted (2.1.337 checks a plugin's server only there)."""
        path = self.sandbox.project(name)
        subprocess.run(["git", "init", "-q", path], check=True)
        trust(self.sandbox.config, path, self.env["ANTHROPIC_API_KEY"])
        return path

    def install(self) -> World:
        added = self.claude("plugin", "marketplace", "add", str(self.root))
        assert added.returncode == 0, added.stdout + added.stderr
        installed = self.claude("plugin", "install", PLUGIN)
        assert installed.returncode == 0, installed.stdout + installed.stderr
        return self

    @property
    def data(self) -> Path:
        """The plugin's data folder (``${CLAUDE_PLUGIN_DATA}``)."""
        return self.sandbox.config / "plugins" / "data" / "c3async-c3async"

    def built(self) -> bool:
        return bool(list(self.data.glob("env-*/.c3async-ready")))

    def tool_results(self) -> list[dict]:
        """Every tool_result block the API received."""
        return [
            block
            for body in self.requests()
            for m in body.get("messages") or []
            if isinstance(m.get("content"), list)
            for block in m["content"]
            if isinstance(block, dict) and block.get("type") == "tool_result"
        ]

    def failed_connects(self) -> str:
        """What Claude Code remembers as a failed connect (2.1.337), as text."""
        path = self.sandbox.config / "mcp-needs-auth-cache.json"
        return path.read_text() if path.exists() else ""

    def requests(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    def sent_text(self) -> str:
        """Every text block of every request the API received, joined."""
        out = []
        for body in self.requests():
            for m in body.get("messages") or []:
                content = m.get("content")
                if isinstance(content, str):
                    out.append(content)
                    continue
                for block in content or []:
                    if isinstance(block, dict):
                        out.append(block.get("text") or "")
                        inner = block.get("content")
                        if isinstance(inner, list):
                            out += [b.get("text") or "" for b in inner if isinstance(b, dict)]
                        elif isinstance(inner, str):
                            out.append(inner)
        return "\n".join(out)

    def noted_session(self, name: str, prompt: str, summary: str, next_steps: str) -> tuple[str, dict]:
        """A project with one `-p` session, noted from the CLI: (project, its row)."""
        proj = self.project(name)
        first = self.claude("-p", prompt, cwd=proj)
        assert first.returncode == 0, first.stderr
        (row,) = self.sandbox.sessions(proj)
        noted = self.sandbox.run(
            "mark", "note", row["id"], "--summary", summary, "--next", next_steps, "--project", proj
        )
        assert noted.returncode == 0, noted.stderr
        return proj, row

    def mention(
        self, term: Terminal, proj: str, sid: str, question: str, needle: str, start_within: float = 60
    ) -> None:
        """In the interactive CLI: once the plugin's server runs (its heartbeat) and Claude Code
        has listed its resources, @-mention session ``sid``: ``needle`` of its brief reaches the API."""
        deadline = time.monotonic() + start_within
        while not list(Path(proj, ".c3", "live").glob("*.json")):
            assert time.monotonic() < deadline, "the plugin's server never started"
            term.pump(0.1)
        term.pump(3)  # Claude Code lists the resources (again, when the launcher said they changed)
        self.log.write_text("")
        term.type(f"@{MENTION}:c3://session/{sid} {question}")
        term.pump(1)
        term.type("\r")
        term.wait_for("Read MCP resource", timeout=60)
        deadline = time.monotonic() + 30
        while needle not in self.sent_text():
            assert time.monotonic() < deadline, self.sent_text()[-2000:]
            time.sleep(0.2)

    def activity(self, project: str) -> list[dict]:
        path = Path(project, ".c3", "activity.jsonl")
        return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def world(module_claude, tmp_path_factory):
    w = World(module_claude, tmp_path_factory.mktemp("plugin")).install()
    yield w
    w.api.stop()


@pytest.fixture
def fresh(claude, tmp_path):
    """The plugin just installed in a config dir of its own: its environment not built yet."""
    w = World(claude, tmp_path).install()
    yield w
    w.api.stop()


def test_the_checkout_validates_as_a_plugin_with_no_warning(world):
    out = world.claude("plugin", "validate", str(world.root))
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout + out.stderr
    assert "Validation passed" in text and "warning" not in text.lower() and "\u26a0" not in text, text


def test_mcp_list_shows_the_plugin_server_connected_and_its_env_is_its_own(world):
    started = time.monotonic()
    out = world.claude("mcp", "list", cwd=world.project("listed"))
    took = time.monotonic() - started
    assert out.returncode == 0, out.stderr
    line = next((x for x in out.stdout.splitlines() if f"{MENTION}:" in x), "")
    assert "Connected" in line, out.stdout  # at once: the manifest answers while the build runs
    print(f"first mcp list: {took:.1f} s")
    wait_for("the environment built", world.built, 300)
    assert len(list(world.data.glob("env-*/.c3async-ready"))) == 1, list(world.data.rglob("*"))[:20]


def test_a_p_session_fires_the_plugins_hooks_and_calls_its_tools(world, module_claude):
    proj = world.project("hooked")
    world.script.write_text(
        json.dumps(
            {
                "conversations": {
                    "rewrite the parser": [
                        {
                            "tool_use": {
                                "name": f"mcp__{SERVER}__c3_session",
                                "input": {
                                    "action": "note",
                                    "data": "parser rewrite half done",
                                    "reasoning": "port the tokenizer tests next",
                                },
                            }
                        },
                        {"text": "Noted."},
                    ]
                }
            }
        )
    )
    out = world.claude("-p", "rewrite the parser", "--allowedTools", f"mcp__{SERVER}__c3_session", cwd=proj)
    assert out.returncode == 0, out.stderr
    (row,) = module_claude.sessions(proj)
    assert row["note"]["summary"] == "parser rewrite half done", row
    _both_hooks_once(world, proj, row["id"])


def test_continue_by_prefix_puts_the_note_next_steps_and_last_prompt_in_the_request(world):
    proj, row = world.noted_session(
        "continued", "wire the billing webhook", "webhook receives events", "verify the signature header"
    )
    world.log.write_text("")
    out = world.claude("-p", f"/mcp__{SERVER}__continue {row['id'][:8]}", cwd=proj)
    assert out.returncode == 0, out.stderr
    sent = world.sent_text()
    assert "<session-brief-" in sent, sent[-2000:]
    for needle in ("webhook receives events", "verify the signature header", "> wire the billing webhook", row["id"]):
        assert needle in sent, needle


def test_an_at_mention_in_the_interactive_cli_puts_the_brief_in_the_request(world):
    proj, row = world.noted_session(
        "mentioned", "profile the slow importer", "importer spends 80% in json", "try msgspec"
    )
    term = Terminal([claude_cli()], proj, world.env)
    try:
        term.wait_for("for agents", timeout=60)  # the prompt line's footer: ready for input
        world.mention(term, proj, row["id"], "what did we find", "importer spends 80% in json")
    finally:
        term.close()
    sent = world.sent_text()
    assert "# profile the slow importer" in sent and "try msgspec" in sent


def test_resources_list_from_an_mcp_client_shows_the_sessions_by_title(world, module_claude):
    proj = world.project("listed-by-title")
    out = world.claude("-p", "migrate the settings page", cwd=proj)
    assert out.returncode == 0, out.stderr
    (row,) = module_claude.sessions(proj)
    code = (
        "import json, os, sys\n"
        "import anyio\n"
        "from mcp import Client, StdioServerParameters\n"
        "async def main():\n"
        "    params = StdioServerParameters(command=sys.argv[1], args=sys.argv[2:], env=dict(os.environ))\n"
        "    async with Client(params) as c:\n"
        "        rs = (await c.list_resources()).resources\n"
        "        print(json.dumps([[str(r.uri), r.name, r.description] for r in rs]))\n"
        "anyio.run(main)\n"
    )
    data = next(world.sandbox.config.glob("plugins/data/*"))
    env = {**world.env, "CLAUDE_PLUGIN_DATA": str(data), "CLAUDE_PROJECT_DIR": proj}
    listed = subprocess.run(
        [sys.executable, "-c", code, "python3", "-I", str(world.root / "plugin" / "launch.py"), "serve"],
        cwd=proj,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    resources = json.loads(listed.stdout)
    assert [f"c3://session/{row['id']}", "migrate the settings page"] == resources[0][:2], resources
    assert resources[0][2].startswith("migrate the settings page · ")
    assert resources[-1][0] == "c3://tasks/open"


def test_beside_a_server_added_by_hand_one_row_one_mcp_count_one_hook_row(world, module_claude):
    proj = world.project("both")
    added = world.claude("mcp", "add", "c3", "--", sys.executable, "-m", "c3async", "serve", cwd=proj)
    assert added.returncode == 0, added.stderr
    world.env["PYTHONPATH"] = str(REPO)  # the server added by hand runs this checkout
    try:
        hooks = module_claude.run("install-hooks", "--project", proj)
        assert hooks.returncode == 0, hooks.stderr
        held = world.tmp / "release"
        world.script.write_text(json.dumps({"conversations": {"two servers, one window": [{"hold": str(held)}]}}))
        session = subprocess.Popen(
            [claude_cli(), "-p", "two servers, one window"],
            cwd=proj,
            env=world.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 90
            while not Path(str(held) + ".held").exists():
                assert time.monotonic() < deadline and session.poll() is None, "the session never reached the API"
                time.sleep(0.1)
            deadline = time.monotonic() + 30
            while len(list(Path(proj, ".c3", "live").glob("*.json"))) < 2:
                assert time.monotonic() < deadline, (
                    "two servers were expected to run (the plugin's and the hand-added one)"
                )
                time.sleep(0.1)
            deadline = time.monotonic() + 30
            while not (rows := module_claude.sessions(proj)):  # Claude Code writes its transcript a moment later
                assert time.monotonic() < deadline, "the session's transcript never appeared"
                time.sleep(0.2)
            assert len(rows) == 1, rows
            assert rows[0]["live"] and rows[0]["mcp_count"] == 1, rows[0]
        finally:
            held.write_text("go")
            _out, err = session.communicate(timeout=120)
        assert session.returncode == 0, err
        sid = rows[0]["id"]
        _both_hooks_once(world, proj, sid)
    finally:
        world.env.pop("PYTHONPATH", None)
        world.script.write_text("[]")
        world.claude("mcp", "remove", "c3", cwd=proj)


def test_nothing_was_written_under_the_plugin_root(world):
    assert _files(world.root) == world.before, set(_files(world.root)) ^ set(world.before)
    assert os.path.isdir(world.root / "plugin")


def _listing_session(world: World, proj: str, prompt: str, **popen) -> subprocess.Popen:
    """A `-p` session whose model lists this project's sessions with the plugin's tool."""
    world.script.write_text(
        json.dumps(
            {
                "conversations": {
                    prompt: [
                        {"tool_use": {"name": f"mcp__{SERVER}__c3_session", "input": {"action": "list"}}},
                        {"text": "Listed."},
                    ]
                }
            }
        )
    )
    return subprocess.Popen(
        [claude_cli(), "-p", prompt, "--allowedTools", f"mcp__{SERVER}__c3_session", "--debug"],
        cwd=proj,
        env=world.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def _answered_by_the_server(world: World, session: subprocess.Popen, timeout: float = 300) -> str:
    """The session ends well and its tool call got the real server's answer: that answer."""
    _out, err = session.communicate(timeout=timeout)
    assert session.returncode == 0, err[-2000:]
    (result,) = world.tool_results()
    content = result.get("content")
    text = content if isinstance(content, str) else "".join(b.get("text", "") for b in content or [])
    assert not result.get("is_error") and "built" not in text, text
    assert "c3async" not in world.failed_connects(), world.failed_connects()
    return text


def _both_hooks_once(world: World, proj: str, sid: str) -> None:
    """SessionStart and SessionEnd recorded once each; the end is replayed by a detached process
    (Claude Code cancels SessionEnd hooks 1.5 s into its exit), so it may land after claude ended."""

    def kinds() -> list[tuple[str, str | None]]:
        return [(r["kind"], r.get("session_id")) for r in world.activity(proj)]

    wait_for("the session's end recorded", lambda: ("session_end", sid) in kinds())
    assert kinds().count(("session_start", sid)) == 1 and kinds().count(("session_end", sid)) == 1, kinds()


def _connected_after(world: World) -> str:
    """How long Claude Code took to connect to the plugin's server, as its debug log says."""
    for path in world.sandbox.config.glob("debug/*.txt"):
        for line in path.read_text().splitlines():
            if "plugin:c3async:c3" in line and "connected" in line.lower():
                return line.split("]", 1)[-1].strip()[:160]
    return "(not in the debug log)"


def test_the_first_session_has_the_tools_while_the_build_is_held_past_claude_codes_wait(fresh, tmp_path):
    gate = Gate(tmp_path)
    fresh.env = gate.env(fresh.env)
    proj = fresh.project("first")
    session = _listing_session(fresh, proj, "what did we do here before")
    gate.wait_held()
    opened: list[float] = []

    def release() -> None:
        opened.append(time.time())
        gate.open()

    releaser = threading.Timer(40, release)  # longer than Claude Code's 30 s wait for a server
    releaser.start()
    try:
        text = _answered_by_the_server(fresh, session)
    finally:
        releaser.join()
    (row,) = fresh.sandbox.sessions(proj)
    assert row["id"][:8] in text, text

    def hooked() -> list[dict]:
        return [r for r in fresh.activity(proj) if r["kind"] in ("session_start", "session_end")]

    wait_for("both hooks recorded", lambda: len(hooked()) == 2)
    (start, end), call = hooked(), next(r for r in fresh.activity(proj) if r["kind"] == "tool_call")
    assert (start["kind"], start["session_id"], end["kind"]) == ("session_start", row["id"], "session_end")
    assert start["ts"] < opened[0] < call["ts"] < end["ts"]  # saved during the build, replayed with its time
    wait_for("the replayed events removed", lambda: not list((fresh.data / "pending-hooks").iterdir()))
    print(f"connect: {_connected_after(fresh)}")


def test_an_interactive_first_session_mentions_an_earlier_session_once_the_server_lists_them(fresh, tmp_path):
    gate = Gate(tmp_path)
    fresh.env = gate.env(fresh.env)
    proj = fresh.project("interactive")
    earlier = simple_session(fresh.sandbox.folder(proj), proj, "tune the cache eviction")
    term = Terminal([claude_cli()], proj, fresh.env)
    try:
        term.wait_for("for agents", timeout=60)
        gate.wait_held()
        gate.open()  # the session lists the sessions once the server does (list_changed)
        fresh.mention(term, proj, earlier, "what was this", "tune the cache eviction", start_within=120)
    finally:
        term.close()
    assert "c3async" not in fresh.failed_connects()


def _registry_reachable(tmp: Path) -> bool:
    """Whether pip can download from the package registry (a cold build needs it)."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "-q", "-d", str(tmp), "msgspec"],
        capture_output=True,
        timeout=120,
        check=False,
    )
    return out.returncode == 0


def test_the_first_session_on_two_busy_cores_with_a_cold_package_cache(fresh, tmp_path):
    if not _registry_reachable(tmp_path / "probe"):
        pytest.skip("the package registry cannot be reached: a cold build needs it")
    fresh.env["PIP_CACHE_DIR"] = str(tmp_path / "empty-pip-cache")
    fresh.env.pop("PIP_NO_INDEX", None)
    proj = fresh.project("busy")
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        started = time.monotonic()
        session = _listing_session(fresh, proj, "busy machine first session")
        _answered_by_the_server(fresh, session, timeout=900)
        took = time.monotonic() - started
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    build = [x for x in (fresh.data / "build.log").read_text().splitlines() if "ready in" in x]
    print(
        f"first session with {len(burners)} cores busy, cold cache: {took:.1f} s; build: {build}; "
        f"connect: {_connected_after(fresh)}"
    )
