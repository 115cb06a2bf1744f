"""The MCP server in process: ``mcp.Client(c3async.server.mcp)`` in both protocol eras.

``mode="auto"`` takes the 2026-07-28 direct path (no JSON-RPC framing), ``mode="legacy"`` the
initialize handshake over in-memory streams, which is what IDEs speak today. Every test that
takes the ``client`` fixture runs in both. The lifespan reads its environment when the client connects, so the ``world`` fixture sets
CLAUDE_CONFIG_DIR, C3_HOME, CLAUDE_PROJECT_DIR, CLAUDE_CODE_SESSION_ID and a short heartbeat
interval first. What the server wrote is checked where the other front ends read it: the
``c3async sessions --json`` rows (a subprocess on this checkout), the marks and activity logs,
the C3 session record and the heartbeat file.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the checkout under test, not an installed copy
    sys.path.insert(0, str(REPO))

from mcp import Client  # noqa: E402
from mcp.types import CallToolResult  # noqa: E402

import c3async  # noqa: E402
from c3async.serve import app as server  # noqa: E402
from c3async.serve import session_actions  # noqa: E402
from stress.transcripts import Conversation, simple_session, tool_use, write_session  # noqa: E402

HOST = "aaaa1111-0000-4000-8000-000000000001"  # the session the server serves (newest)
OLD = "aaaa2222-0000-4000-8000-000000000002"  # shares the prefix "aaaa" with HOST
DOCS = "bbbb3333-0000-4000-8000-000000000003"
ACTIONS = ("start", "log", "snapshot", "restore", "plan", "end", "list", "show", "stale", "unstale", "note")
PARAMS = ("action", "data", "reasoning", "description", "summary", "event_type", "target")


@pytest.fixture
def anyio_backend():
    return "asyncio"  # what `c3async serve` runs on (anyio.run's default)


def test_the_checkout_is_under_test():
    assert Path(c3async.__file__).resolve().parent == REPO / "c3async", c3async.__file__


# ------------------------------------------------------------------------------------ fixtures


@dataclass
class World:
    claude: object  # conftest.Sandbox
    project: str

    @property
    def state(self) -> Path:
        return Path(self.project, ".c3")

    def rows(self) -> dict[str, dict]:
        """The catalog as ``c3async sessions --project P --json`` prints it."""
        return self.claude.rows_by_id(self.project)

    def marks(self) -> list[dict]:
        return _jsonl(self.state / "session_marks.jsonl")

    def activity(self) -> list[dict]:
        return _jsonl(self.state / "activity.jsonl")

    def heartbeats(self) -> list[Path]:
        return sorted((self.state / "live").glob("*.json"))

    def records(self) -> list[Path]:
        return sorted((self.state / "sessions").glob("*.json"))


def _jsonl(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def _point_at(monkeypatch: pytest.MonkeyPatch, claude, **extra: str) -> None:
    """This process sees only the sandbox (nothing of a real Claude Code around the test run)."""
    for key in list(os.environ):
        if key.startswith(("CLAUDE", "C3_")):
            monkeypatch.delenv(key)
    for key, value in {**claude.env(), "C3_HEARTBEAT_INTERVAL_S": "0.2", **extra}.items():
        monkeypatch.setenv(key, value)


def _sessions(claude) -> str:
    """Three sessions: DOCS oldest, OLD, and the host session newest."""
    project = claude.project("app")
    folder = claude.folder(project)
    now = time.time()
    long_ago = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)  # every one is idle: hints
    simple_session(folder, project, "Document the parser API", session_id=DOCS, mtime=now - 300, start=long_ago)
    simple_session(folder, project, "Add the cache layer", session_id=OLD, mtime=now - 200, start=long_ago)
    simple_session(folder, project, "Fix the flaky retry test", session_id=HOST, mtime=now - 100, start=long_ago)
    return project


@pytest.fixture
def world(claude, monkeypatch) -> World:
    project = _sessions(claude)
    _point_at(monkeypatch, claude, CLAUDE_PROJECT_DIR=project, CLAUDE_CODE_SESSION_ID=HOST)
    return World(claude, project)


@pytest.fixture
def hostless(claude, monkeypatch) -> World:
    """The same project, but a server that cannot tell which host session it serves."""
    project = _sessions(claude)
    _point_at(monkeypatch, claude, CLAUDE_PROJECT_DIR=project)
    return World(claude, project)


async def _wait_for_heartbeat(w: World) -> Path:
    with anyio.fail_after(10):
        while not w.heartbeats():
            await anyio.sleep(0.01)
    (path,) = w.heartbeats()
    return path


@pytest.fixture(params=["auto", "legacy"])
async def client(request, world):
    async with Client(server.mcp, mode=request.param) as c:
        await _wait_for_heartbeat(world)
        yield c


@pytest.fixture(params=["auto", "legacy"])
async def hostless_client(request, hostless):
    async with Client(server.mcp, mode=request.param) as c:
        await _wait_for_heartbeat(hostless)
        yield c


async def session(c: Client, action: str, **args: str) -> CallToolResult:
    return await c.call_tool("c3_session", {"action": action, **args})


def ok(result: CallToolResult) -> str:
    text = "\n".join(b.text for b in result.content)
    assert not result.is_error, text
    return text


def err(result: CallToolResult) -> str:
    text = "\n".join(b.text for b in result.content)
    assert result.is_error, f"expected an error, got: {text}"
    assert "Traceback" not in text and "failed inside c3async" not in text, text
    return text


def lines_of(text: str) -> list[str]:
    return text.splitlines()


def ids_listed(text: str) -> list[str]:
    return [line.split()[0] for line in text.splitlines() if not line.startswith("...")]


# ------------------------------------------------------------------------------------ tools


async def test_tools_and_their_input_schema(client):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert {"c3_session", "c3_status"} <= set(tools)
    schema = tools["c3_session"].input_schema
    assert schema["required"] == ["action"]
    assert set(schema["properties"]) == set(PARAMS)
    for name in PARAMS[1:]:
        assert schema["properties"][name]["type"] == "string"
        assert schema["properties"][name]["default"] == ""
    assert tools["c3_session"].output_schema is None  # plain text results
    status = tools["c3_status"].input_schema
    assert not status.get("required")
    assert status["properties"]["view"]["default"] == "sessions"
    for action in ACTIONS:  # the description documents every action
        assert action in tools["c3_session"].description


async def test_missing_action_and_unknown_tool_are_errors_not_crashes(client):
    assert "Field required" in err(await client.call_tool("c3_session", {}))
    assert "c3_nope" in err(await client.call_tool("c3_nope", {}))


async def test_unknown_action_lists_the_valid_ones(client):
    text = err(await session(client, "bogus"))
    assert "unknown action 'bogus'" in text
    for action in ACTIONS:
        assert action in text
    # case and spaces do not matter for a valid one
    assert ids_listed(ok(await session(client, "  List ")))[0] == HOST[:8]


# ------------------------------------------------------------------------------------ list


async def test_list_all_is_newest_first_and_marks_this_live_session(client):
    text = ok(await session(client, "list"))
    assert ids_listed(text) == [HOST[:8], OLD[:8], DOCS[:8]]
    first = lines_of(text)[0]
    assert "LIVE" in first and "(this session)" in first and "Fix the flaky retry test" in first
    assert "LIVE" not in text.split("\n", 1)[1]
    assert ok(await session(client, "list", target="all")) == text


async def test_list_filters_likely_stale_live(client):
    # every session is months old: the others have hints; the live one gets none
    assert ids_listed(ok(await session(client, "list", target="likely"))) == [OLD[:8], DOCS[:8]]
    assert ids_listed(ok(await session(client, "list", target="live"))) == [HOST[:8]]
    assert ok(await session(client, "list", target="stale")) == "no stale sessions"

    ok(await session(client, "stale", target=OLD, reasoning="superseded by the docs work"))
    stale = ok(await session(client, "list", target="stale"))
    assert ids_listed(stale) == [OLD[:8]] and "[stale: superseded by the docs work]" in stale
    assert ids_listed(ok(await session(client, "list", target="likely"))) == [DOCS[:8]]  # marked: not likely
    ok(await session(client, "note", target=DOCS, data="docs half done"))
    assert ok(await session(client, "list", target="likely")) == "no likely sessions"


async def test_list_search_text(client):
    assert ids_listed(ok(await session(client, "list", target="parser"))) == [DOCS[:8]]
    assert ids_listed(ok(await session(client, "list", target="CACHE layer"))) == [OLD[:8]]
    assert ids_listed(ok(await session(client, "list", target="bbbb3333"))) == [DOCS[:8]]  # ids match too
    assert ok(await session(client, "list", target="no such words")) == "no sessions matching 'no such words'"


async def test_list_sees_sessions_written_after_start_and_caps_the_answer(client, world):
    folder = world.claude.folder(world.project)
    for i in range(45):
        simple_session(folder, world.project, f"batch prompt {i}")
    text = ok(await session(client, "list"))
    rows = lines_of(text)
    assert len(rows) == 41
    assert rows[-1].startswith("... 8 more; narrow with target='likely'")


# ------------------------------------------------------------------------------------ show


async def test_show_by_prefix(client, world):
    text = ok(await session(client, "show", target="bbbb"))
    lines = lines_of(text)
    assert lines[0] == f"{DOCS}  Document the parser API"
    assert "not live" in lines[1]
    assert f"resume: cd {world.project} && claude --resume {DOCS}" in lines
    assert "first prompt: Document the parser API" in lines
    assert "last turns:" in lines and "  [user] Document the parser API" in lines


async def test_show_without_target_is_the_current_session(client):
    text = ok(await session(client, "show"))
    assert lines_of(text)[0] == f"{HOST}  Fix the flaky retry test"
    assert "LIVE MCP×1" in lines_of(text)[1]


async def test_show_unknown_short_and_ambiguous_ids(client, world):
    text = err(await session(client, "show", target="cccc"))
    assert "'cccc'" in text and world.project in text and "unique prefix" in text
    assert "at least 4 characters" in err(await session(client, "show", target="aaa"))
    text = err(await session(client, "show", target="aaaa"))
    assert HOST in text and OLD in text and DOCS not in text
    assert "matches 2 sessions" in text and "Give more characters" in text


# ------------------------------------------------------------------------------------ stale / unstale


@pytest.mark.process
async def test_stale_argument_errors_write_nothing(client, world):
    assert "needs target" in err(await session(client, "stale", reasoning="done"))
    assert "needs reasoning" in err(await session(client, "stale", target=OLD))
    assert "needs reasoning" in err(await session(client, "stale", target=OLD, reasoning="   "))
    text = err(await session(client, "stale", target=OLD, reasoning="superseded", data="dddd"))
    assert "'dddd'" in text  # the unknown successor is named
    assert "own successor" in err(await session(client, "stale", target=OLD, reasoning="x", data=OLD[:8]))
    assert "'cccc'" in err(await session(client, "stale", target="cccc", reasoning="x"))
    assert "matches 2 sessions" in err(await session(client, "stale", target="aaaa", reasoning="x"))
    assert world.marks() == []
    assert world.rows()[OLD]["stale"] is None


@pytest.mark.process
async def test_stale_is_seen_by_the_cli_and_by_show(client, world):
    text = ok(await session(client, "stale", target="aaaa2", reasoning="superseded", data="bbbb"))
    assert text == f"stale {OLD} (successor {DOCS})"

    row = world.rows()[OLD]
    assert row["stale"]["reason"] == "superseded"
    assert row["stale"]["successor"] == DOCS
    assert row["stale"]["by"] == "agent"
    (mark,) = world.marks()
    assert (mark["id"], mark["op"], mark["by"], mark["by_session"]) == (OLD, "stale", "agent", HOST)
    audit = [r for r in world.activity() if r["kind"] == "session_mark"]
    assert [(r["target"], r["op"], r["by"], r["by_session"]) for r in audit] == [(OLD, "stale", "agent", HOST)]

    shown = ok(await session(client, "show", target=OLD))
    assert f"STALE (agent): superseded -> {DOCS}" in lines_of(shown)
    assert f"successors: {DOCS}" in lines_of(shown)
    assert f"predecessors: {OLD}" in lines_of(ok(await session(client, "show", target=DOCS)))


@pytest.mark.process
async def test_unstale_undoes_it(client, world):
    ok(await session(client, "stale", target=OLD, reasoning="finished"))
    assert "needs target" in err(await session(client, "unstale"))
    assert ok(await session(client, "unstale", target=OLD[:6], reasoning="not finished after all")) == f"unstale {OLD}"
    assert world.rows()[OLD]["stale"] is None
    assert ok(await session(client, "list", target="stale")) == "no stale sessions"
    assert [(m["op"], m["by"], m["by_session"]) for m in world.marks()] == [
        ("stale", "agent", HOST),
        ("unstale", "agent", HOST),
    ]


# ------------------------------------------------------------------------------------ note


@pytest.mark.process
async def test_note_defaults_to_the_current_host_session(client, world):
    assert ok(await session(client, "note", data="retry fixed", reasoning="add a regression test")) == f"note {HOST}"
    row = world.rows()[HOST]
    assert row["note"]["summary"] == "retry fixed"
    assert row["note"]["next_steps"] == "add a regression test"
    (mark,) = world.marks()
    assert (mark["id"], mark["by"], mark["by_session"]) == (HOST, "agent", HOST)
    assert "note: retry fixed; next: add a regression test" in lines_of(ok(await session(client, "show")))


@pytest.mark.process
async def test_note_on_another_session_and_its_errors(client, world):
    assert ok(await session(client, "note", target="bbbb", reasoning="only next steps")) == f"note {DOCS}"
    assert world.rows()[DOCS]["note"]["summary"] is None
    assert world.rows()[DOCS]["note"]["next_steps"] == "only next steps"
    assert "needs data" in err(await session(client, "note", target=DOCS))
    assert "matches 2 sessions" in err(await session(client, "note", target="aaaa", data="x"))
    # JSON-looking text is kept as text (the parameters are plain str)
    ok(await session(client, "note", target=DOCS, data='{"a": 1}', reasoning="[1, 2]"))
    note = world.rows()[DOCS]["note"]
    assert (note["summary"], note["next_steps"]) == ('{"a": 1}', "[1, 2]")


async def test_without_a_host_session_note_and_show_ask_for_a_target(hostless_client, hostless):
    c = hostless_client
    assert "pass target" in err(await session(c, "note", data="x"))
    assert "needs target" in err(await session(c, "show"))
    assert "(this session)" not in ok(await session(c, "list"))
    assert ok(await session(c, "start")).endswith("for host session (unknown)")
    assert json.loads(hostless.heartbeats()[0].read_text())["host_session_id"] is None
    assert ok(await session(c, "note", target=DOCS, data="x")) == f"note {DOCS}"
    assert hostless.marks()[-1]["by_session"] is None


def clear_to(world, session_id: str, *, dead: bool = False) -> None:
    """What Claude Code does on /clear: its ``sessions/<pid>.json`` (the test process's parent
    plays the claude process) names the new session. ``dead``: the file a dead claude left (its
    start time is not the running process's)."""
    ppid = os.getppid()
    stat = Path(f"/proc/{ppid}/stat").read_bytes()
    ticks = int(stat[stat.rindex(b")") + 2 :].split()[19])
    reg = Path(world.claude.config, "sessions", f"{ppid}.json")
    reg.parent.mkdir(parents=True, exist_ok=True)
    reg.write_text(json.dumps({"pid": ppid, "sessionId": session_id, "procStart": ticks + dead, "cwd": world.project}))


async def test_host_session_follows_the_registry_of_the_parent_process(client, world):
    """Claude Code keeps $CLAUDE_CONFIG_DIR/sessions/<its pid>.json and rewrites its sessionId
    on /clear; in process, the server's "parent" is the parent of the test process."""
    ok(await session(client, "start"))  # serving HOST (from the environment)
    clear_to(world, DOCS)
    assert ok(await session(client, "note", data="after /clear")) == f"note {DOCS}"
    assert world.marks()[-1]["by_session"] == DOCS
    ok(await session(client, "log", event_type="progress", data="now in DOCS"))
    (record,) = world.records()
    assert json.loads(record.read_text())["host_session_ids"] == [HOST, DOCS]
    assert "(this session)" in next(
        line for line in lines_of(ok(await session(client, "list"))) if line.startswith(DOCS[:8])
    )
    clear_to(world, OLD, dead=True)
    assert ok(await session(client, "note", data="back to env")) == f"note {HOST}"


# ------------------------------------------------------------------------------------ lifecycle


async def test_lifecycle_writes_the_record_and_the_activity_log(client, world):
    c3_id = world.heartbeats()[0].stem
    text = ok(await session(client, "start", description="fix retries"))
    assert text == f"started C3 session {c3_id[:8]} for host session {HOST}"
    (path,) = world.records()
    assert path.name == f"{c3_id}.json"
    rec = json.loads(path.read_text())
    assert (rec["c3_session_id"], rec["host_session_ids"], rec["description"]) == (c3_id, [HOST], "fix retries")
    assert (rec["cwd"], rec["pid"], rec["ended"]) == (world.project, os.getpid(), None)

    assert "needs event_type" in err(await session(client, "log", data="x"))
    assert "needs data" in err(await session(client, "log", event_type="decision"))
    assert (
        ok(await session(client, "log", event_type="decision", data="use backoff", reasoning="spiky load"))
        == "logged decision (1 events in this C3 session)"
    )

    assert "needs summary" in err(await session(client, "snapshot", data="x"))
    assert "no snapshot for" in err(await session(client, "restore"))
    assert (
        ok(await session(client, "snapshot", summary="half way", data="next: tests"))
        == "snapshot saved (1 in this C3 session)"
    )
    restored = ok(await session(client, "restore"))
    assert restored.startswith(f"snapshot of {HOST} at ") and restored.endswith("half way\n\nnext: tests")
    assert ok(await session(client, "restore", target="aaaa1")) == restored
    assert f"no snapshot for {DOCS}" in err(await session(client, "restore", target="bbbb"))
    assert "'cccc'" in err(await session(client, "restore", target="cccc"))

    assert ok(await session(client, "plan")).startswith("(no plan yet")
    assert ok(await session(client, "plan", data="1. test\n2. fix")).startswith("plan saved")
    assert ok(await session(client, "plan")) == "1. test\n2. fix"
    assert ok(await session(client, "end", summary="retries fixed")) == f"ended C3 session {c3_id[:8]}"

    rec = json.loads(path.read_text())
    assert [(e["event_type"], e["data"], e["reasoning"], e["host_session_id"]) for e in rec["events"]] == [
        ("decision", "use backoff", "spiky load", HOST)
    ]
    assert [(s["summary"], s["data"], s["host_session_id"]) for s in rec["snapshots"]] == [
        ("half way", "next: tests", HOST)
    ]
    assert (rec["plan"], rec["summary"]) == ("1. test\n2. fix", "retries fixed")
    assert rec["ended"] is not None and rec["ended"] >= rec["started"]

    rows = world.activity()
    kinds = [(r["kind"], r.get("session_id"), r.get("c3_session_id")) for r in rows if r["kind"] != "tool_call"]
    assert kinds == [
        ("c3_start", HOST, c3_id),
        ("log", HOST, c3_id),
        ("snapshot", HOST, c3_id),
        ("c3_end", HOST, c3_id),
    ]
    assert next(r for r in rows if r["kind"] == "c3_start")["description"] == "fix retries"
    calls = [r for r in rows if r["kind"] == "tool_call"]
    assert {(r["tool"], r["session_id"], r["c3_session_id"]) for r in calls} == {("c3_session", HOST, c3_id)}
    # the calls refused for a missing argument were refused before anything was logged
    assert [r["action"] for r in calls][:3] == ["start", "log", "snapshot"]


async def test_a_snapshot_shows_in_show_until_a_note_replaces_it(client):
    ok(await session(client, "snapshot", summary="tests green"))
    assert "last snapshot: tests green" in lines_of(ok(await session(client, "show")))
    ok(await session(client, "note", data="shipped"))
    shown = lines_of(ok(await session(client, "show")))
    assert "note: shipped; next: -" in shown and "last snapshot: tests green" not in shown


async def test_a_file_error_is_a_readable_tool_error(client, world):
    import shutil

    shutil.rmtree(world.state / "sessions", ignore_errors=True)  # the server saved its record already
    (world.state / "sessions").write_text("not a folder")
    text = err(await session(client, "start"))
    assert text.startswith("c3_session: could not read or write a file:")
    assert ids_listed(ok(await session(client, "list")))[0] == HOST[:8]  # other actions still work


async def test_an_unexpected_failure_is_a_generic_tool_error(client, monkeypatch):
    def broken(*_args, **_kwargs):
        raise RuntimeError("secret internal detail")

    monkeypatch.setitem(session_actions._HANDLERS, "plan", broken)
    result = await session(client, "plan")
    assert result.is_error
    text = result.content[0].text
    assert text == (
        "c3_session(action='plan') failed inside c3async; the server's stderr has the details. "
        "Other actions still work."
    )
    assert ids_listed(ok(await session(client, "list")))[0] == HOST[:8]


# ------------------------------------------------------------------------------------ c3_status


async def test_status_sessions_view_before_any_stats(claude, monkeypatch):
    project = claude.project("empty")  # no transcripts: nothing to account for
    _point_at(monkeypatch, claude, CLAUDE_PROJECT_DIR=project, CLAUDE_CODE_SESSION_ID=HOST)
    for mode in ("auto", "legacy"):
        async with Client(server.mcp, mode=mode) as c:
            assert ok(await c.call_tool("c3_status", {})).startswith("no stats yet")
            assert ok(await c.call_tool("c3_status", {"view": "sessions"})).startswith("no stats yet")
            assert ok(await session(c, "list")) == "no sessions"


async def _stats_table(client, sessions: int = 3) -> list[str]:
    """c3_status(view='sessions') once the server has accounted for every transcript (its
    background task appends one row per session)."""
    with anyio.fail_after(20):
        while len(lines := lines_of(ok(await client.call_tool("c3_status", {"view": "sessions"})))) < sessions + 2:
            await anyio.sleep(0.05)
    return lines


async def test_status_sessions_view(client, world):
    lines = await _stats_table(client)
    assert lines[0].split() == ["ID", "INPUT", "OUTPUT", "CACHE-W", "CACHE-R", "COST", "TITLE"]
    # each transcript holds one reply written as two lines (thinking, text): counted once
    by_id = {line.split()[0]: line.split() for line in lines[1:-1]}
    assert set(by_id) == {HOST[:8], OLD[:8], DOCS[:8]}
    for cols in by_id.values():
        assert cols[1:5] == ["3", "28", "3296", "11331"]
    assert lines[-1].split()[:5] == ["total", "9", "84", "9888", "33993"]

    # rows hold running totals: the last one of a session wins; a bad or torn line is skipped
    stats = world.state / "session_stats.jsonl"
    with stats.open("a") as f:
        f.write(
            json.dumps(
                {
                    "session_id": HOST,
                    "ts": time.time(),
                    "title": "retry",
                    "input": 100,
                    "output": 20,
                    "cache_write_5m": 3,
                    "cache_write_1h": 4,
                    "cache_read": 5,
                    "cost_usd": 1.5,
                    "unknown_models": ["claude-next"],
                }
            )
            + "\n"
        )
        f.write('not json\n{"session_id": "torn')
    lines = lines_of(ok(await client.call_tool("c3_status", {"view": "sessions"})))
    mine = next(line for line in lines if line.startswith(HOST[:8]))
    # a row written before rows kept tokens per model: the cost it stored, and "+" for the
    # usage of a model with no price, named in the footnote under the total (as the CLI shows it)
    assert mine.split()[:7] == [HOST[:8], "100", "20", "7", "5", "1.50+", "retry"]
    # 1.50 and the other two sessions' one opus reply each ($0.027)
    assert lines[-2].split()[:6] == ["total", "106", "76", "6599", "22667", "1.55+"]
    assert lines[-1].startswith("+ not in the cost: the usage of models with no price: claude-next.")
    assert "prices.json" in lines[-1]


@pytest.mark.process
async def test_status_sessions_view_titles_rows_accounted_before_the_catalog_knew_them(world):
    """`c3async stats` in a project never listed before accounts for the transcripts while no
    catalog cache exists, so its rows carry no title. Once the catalog is built (the server's
    warm scan, a `list`), the sessions view should show the titles, as `c3async stats` does."""
    stats = world.claude.run("stats", "--project", world.project)
    assert stats.returncode == 0, stats.stderr
    async with Client(server.mcp, mode="legacy") as c:
        ok(await session(c, "list"))  # the catalog (and its cache) now knows every title
        lines = await _stats_table(c)
        titles = {line.split()[0]: " ".join(line.split()[6:]) for line in lines[1:-1]}
        assert titles == {
            HOST[:8]: "Fix the flaky retry test",
            OLD[:8]: "Add the cache layer",
            DOCS[:8]: "Document the parser API",
        }, "\n".join(lines)


async def test_status_live_view_and_unknown_view(client):
    text = ok(await client.call_tool("c3_status", {"view": "live"}))
    assert text.startswith(f"live          {HOST}  ") and "[MCP×1 (" in text
    assert ok(await client.call_tool("c3_status", {"view": " LIVE "})) == text
    text = err(await client.call_tool("c3_status", {"view": "budget"}))
    assert "unknown view 'budget'" in text and "sessions" in text and "live" in text


# ------------------------------------------------------------------------------------ write less


def tool_rows(w: World) -> list[tuple[str, str, str | None]]:
    return [(r["tool"], r["action"], r.get("session_id")) for r in w.activity() if r["kind"] == "tool_call"]


async def test_reads_within_a_minute_log_one_tool_call_row(client, world):
    """Read-only calls (plan-mode safe) do not each append an activity row: the first read of
    a minute does, as this server's sign of life for the liveness fallback."""
    for _ in range(3):
        ok(await session(client, "list"))
        ok(await session(client, "show", target=DOCS))
        err(await session(client, "restore"))  # no snapshot yet: an error, and still a read
        ok(await session(client, "plan"))  # no data: reads the plan
        ok(await session(client, "plan", data="   "))  # blank data: still a read
        ok(await client.call_tool("c3_task", {"action": "list"}))
        ok(await client.call_tool("c3_task", {"action": "board"}))
        ok(await client.call_tool("c3_status", {"view": "live"}))
        ok(await client.call_tool("c3_status", {}))
    assert tool_rows(world) == [("c3_session", "list", HOST)]
    assert not (world.state / "pm" / "pm.json").exists()  # the task reads wrote nothing either


async def test_every_change_logs_its_row_and_reads_after_it_do_not(client, world):
    ok(await session(client, "note", target=DOCS, data="first"))
    ok(await session(client, "list"))  # the note's row was this minute's sign of life
    ok(await session(client, "note", target=DOCS, data="second"))
    ok(await session(client, "stale", target=OLD, reasoning="superseded"))
    ok(await session(client, "plan", data="1. fix"))  # plan with data writes the record
    ok(await session(client, "show"))
    ok(await client.call_tool("c3_task", {"action": "add", "title": "write less"}))
    ok(await client.call_tool("c3_task", {"action": "list"}))
    ok(await session(client, "log", event_type="progress", data="rows"))
    assert tool_rows(world) == [
        ("c3_session", "note", HOST),
        ("c3_session", "note", HOST),
        ("c3_session", "stale", HOST),
        ("c3_session", "plan", HOST),
        ("c3_task", "add", HOST),
        ("c3_session", "log", HOST),
    ]


async def test_c3_task_deletes_through_the_shared_actions_and_words_errors_its_way(client, world):
    task = json.loads(ok(await client.call_tool("c3_task", {"action": "add", "title": "doomed"})))
    gone = json.loads(ok(await client.call_tool("c3_task", {"action": "delete", "task_id": task["id"][:6]})))
    assert (gone["id"], gone["unlinked"]) == (task["id"], {"blocked_by": [], "decisions": []})
    assert json.loads(ok(await client.call_tool("c3_task", {"action": "list"}))) == {"tasks": []}
    m = json.loads(ok(await client.call_tool("c3_task", {"action": "milestone_add", "title": "v1"})))
    assert m["name"] == "v1"
    assert err(await client.call_tool("c3_task", {"action": "add"})) == "c3_task(action='add') needs title"
    text = err(await client.call_tool("c3_task", {"action": "delete", "task_id": task["id"]}))
    assert text == f"no task has the id {task['id']!r} (`c3_task(action='list')` shows them)"
    assert ("c3_task", "delete", HOST) in tool_rows(world)


async def test_unknown_actions_and_views_log_no_row(client, world):
    for tool, args in [
        ("c3_session", {"action": "bogus"}),
        ("c3_task", {"action": "bogus"}),
        ("c3_status", {"view": "bogus"}),
        ("c3_session", {"action": "list", "target": "x" * 501}),
    ]:
        err(await client.call_tool(tool, args))
    assert tool_rows(world) == []
    ok(await session(client, "list"))  # the first valid read still gets its row
    assert tool_rows(world) == [("c3_session", "list", HOST)]


async def test_a_read_logs_again_once_the_minute_is_over(client, world, monkeypatch):
    """The minute is made to pass by shortening it, not by sleeping: a slow machine taking more
    than a short window between two calls would otherwise see it pass early."""
    ok(await session(client, "list"))
    ok(await session(client, "list"))
    monkeypatch.setattr(server, "READ_ROW_EVERY_S", 0.0)  # the minute since the first row is over
    ok(await session(client, "show"))
    monkeypatch.setattr(server, "READ_ROW_EVERY_S", 3600.0)  # and a new one starts with that row
    ok(await session(client, "list"))
    assert tool_rows(world) == [("c3_session", "list", HOST), ("c3_session", "show", HOST)]


async def test_concurrent_reads_log_one_row(client, world):
    async with anyio.create_task_group() as tg:
        for _ in range(12):
            tg.start_soon(session, client, "list")
    assert tool_rows(world) == [("c3_session", "list", HOST)]


async def test_the_host_session_a_clear_starts_gets_its_own_row(client, world):
    """Rows are kept per host session: after a /clear the new session's first read is logged
    at once (its liveness fallback has nothing else from this server)."""
    ok(await session(client, "list"))
    clear_to(world, DOCS)
    ok(await session(client, "list"))
    ok(await session(client, "list"))
    assert tool_rows(world) == [("c3_session", "list", HOST), ("c3_session", "list", DOCS)]


# ------------------------------------------------------------------------------------ heartbeat


@pytest.mark.process
async def test_heartbeat_is_rewritten_and_removed_on_disconnect(world):
    for mode in ("auto", "legacy"):
        async with Client(server.mcp, mode=mode):
            path = await _wait_for_heartbeat(world)
            first = json.loads(path.read_bytes())
            assert (first["session_id"], first["host_session_id"], first["pid"]) == (path.stem, HOST, os.getpid())
            assert first["project"] == world.project and first["ide"]
            with anyio.fail_after(10):  # interval 0.2 s: the next beat comes
                while json.loads(path.read_bytes())["ts"] == first["ts"]:
                    await anyio.sleep(0.02)
            row = world.rows()[HOST]
            assert (row["live"], row["mcp_count"]) == (True, 1)
        assert world.heartbeats() == [], mode
        assert world.rows()[HOST]["live"] is False


async def test_the_project_is_registered_for_the_hub(client, world):
    doc = json.loads(Path(world.claude.c3home, "projects.json").read_text())
    assert [p["path"] for p in doc["projects"]] == [world.project]


async def test_concurrent_calls_lose_nothing(client, world):
    async def log(i: int) -> None:
        ok(await session(client, "log", event_type="progress", data=f"step {i}"))

    async def note(sid: str, i: int) -> None:
        ok(await session(client, "note", target=sid, data=f"note {i}"))

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(log, i)
            tg.start_soon(note, (HOST, OLD, DOCS)[i % 3], i)
    (record,) = world.records()
    events = json.loads(record.read_text())["events"]
    assert sorted(e["data"] for e in events) == sorted(f"step {i}" for i in range(20))
    assert sorted(m["summary"] for m in world.marks()) == sorted(f"note {i}" for i in range(20))


async def test_project_defaults_to_the_cwd(claude, monkeypatch):
    project = _sessions(claude)
    _point_at(monkeypatch, claude, CLAUDE_CODE_SESSION_ID=HOST)
    monkeypatch.chdir(project)
    w = World(claude, project)
    async with Client(server.mcp, mode="legacy") as c:
        beat = json.loads((await _wait_for_heartbeat(w)).read_text())
        assert beat["project"] == project
        assert ids_listed(ok(await session(c, "list"))) == [HOST[:8], OLD[:8], DOCS[:8]]


@pytest.mark.process
async def test_a_cleanly_stopped_server_leaves_its_session_not_live(world):
    """The heartbeat is deleted on a clean shutdown so that the session stops reading live at
    once. `start` also writes a c3_start activity row, which the liveness fallback (for
    hosts with no heartbeat) must not turn back into LIVE once the heartbeat is gone."""
    async with Client(server.mcp, mode="legacy") as c:
        await _wait_for_heartbeat(world)
        ok(await session(c, "start", description="then the IDE closes"))
        assert world.rows()[HOST]["live"] is True
    assert world.heartbeats() == []
    live = world.claude.run("live", "--project", world.project, "--json")
    assert json.loads(live.stdout) == [], "a stopped server's host session still reads live: " + live.stdout
    row = world.rows()[HOST]
    assert (row["live"], row["mcp_count"]) == (False, 0)


async def test_tag_list_by_tag_search_fields_and_files(client, world):
    ok(await session(client, "tag", target=DOCS[:8], data="Parser docs-v2"))
    ok(await session(client, "tag", data="current"))  # no target: this session
    assert ids_listed(ok(await session(client, "list", data="tag=PARSER"))) == [DOCS[:8]]
    assert ids_listed(ok(await session(client, "list", data="tag=current"))) == [HOST[:8]]
    assert "#docs-v2" in ok(await session(client, "list", target="all"))
    ok(await session(client, "untag", target=DOCS[:8], data="parser"))
    assert ok(await session(client, "list", data="tag=parser")) == "no sessions tagged 'parser'"
    assert "is not a tag" in err(await session(client, "tag", target=DOCS[:8], data="<b>"))
    assert "unknown option" in err(await session(client, "list", data="tags=x"))
    assert [m["tags"] for m in world.marks()] == [["parser", "docs-v2"], ["current"], ["parser"]]
    # search says which field matched: the tag, above the conversation
    found = ok(await session(client, "search", target="docs-v2"))
    assert DOCS[:8] in found and "matched tags" in found
    # files: a session that edited one
    conv = Conversation(world.project, start=datetime(2025, 2, 1, tzinfo=UTC))
    edit = tool_use("Edit", {"file_path": f"{world.project}/src/parse.py", "old_string": "a", "new_string": "b"})
    write_session(world.claude.folder(world.project), conv.id, [conv.prompt("edit it"), *conv.reply(edit)])
    text = ok(await session(client, "files", target="src/parse.py"))
    assert conv.id[:8] in text and "1 change(s): Edit" in text and "(no longer on disk)" in text
    assert "no such file or folder" in err(await session(client, "files", target="src/prase.py"))
