"""Validate before you log: argument checks come before any activity row, logged strings are
bounded, marks and task text have size limits, ids are matched whole (no trailing newline), and
a mark that was written is never reported as failed."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from mcp import Client
from test_server_inprocess import (
    DOCS,
    HOST,
    OLD,
    World,
    _point_at,
    _sessions,
    _wait_for_heartbeat,
    err,
    ok,
    session,
)

from c3async.catalog.listing import candidates, is_session_id
from c3async.catalog.resolve import resolve as find_session
from c3async.ground.errors import BadArgument, C3Error, check_text, clip
from c3async.ground.project import resolve
from c3async.serve import app as server
from c3async.serve.session_actions import LIMITS
from c3async.sessions import act
from c3async.stores import marks
from c3async.tasks import actions
from stress.transcripts import simple_session

IDS = (
    "aaaa1111-0000-4000-8000-000000000001",
    "aaaa2222-0000-4000-8000-000000000002",
    "bbbb3333-0000-4000-8000-000000000003",
)
WHO = actions.Who(session="11111111-0000-4000-8000-000000000001", by="agent")


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def project(claude, monkeypatch):
    """A project with three sessions, and this process pointed at the sandbox."""
    claude.activate(monkeypatch)
    proj = claude.project("app")
    folder = claude.folder(proj)
    for i, sid in enumerate(IDS):
        simple_session(folder, proj, f"prompt {i}", session_id=sid)
    return proj


def state(project: str) -> Path:
    return Path(project) / ".c3"


def jsonl_rows(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def nothing_written(project: str) -> None:
    assert jsonl_rows(state(project) / "session_marks.jsonl") == []
    assert jsonl_rows(state(project) / "activity.jsonl") == []


# ------------------------------------------------------------------------ the text checks


def test_check_text_names_the_field_the_limit_and_the_length():
    check_text("x" * 10, "summary", 10)
    with pytest.raises(BadArgument) as e:
        check_text("x" * 12_345, "summary", 8_000)
    assert str(e.value).startswith("summary is too long: 12,345 characters, the limit is 8,000.")
    with pytest.raises(BadArgument, match="summary holds a NUL character"):
        check_text("a\x00b", "summary", 100)
    with pytest.raises(BadArgument, match="lone surrogate"):
        check_text("caf\udce9", "summary", 100)  # what a Latin-1 argv becomes under surrogateescape
    with pytest.raises(BadArgument, match="lone surrogate"):
        check_text(json.loads('"\\ud800"'), "summary", 100)
    check_text("emoji 😀 and \u2028 are text", "summary", 100)


def test_clip_bounds_a_logged_string():
    assert clip("short") == "short"
    cut = clip("y" * 5000)
    assert len(cut) == 200 and cut.endswith("\u2026")


# ------------------------------------------------------------------------ marks


@pytest.mark.parametrize(
    ("field", "limit"),
    [("reason", marks.MAX_REASON), ("summary", marks.MAX_SUMMARY), ("next_steps", marks.MAX_NEXT_STEPS)],
)
def test_mark_text_over_its_limit_is_refused_and_nothing_written(project, field, limit):
    op = "stale" if field == "reason" else "note"
    args = {"reason": "why"} if op == "stale" else {}
    with pytest.raises(BadArgument) as e:
        act.mark(resolve(project), IDS[2], op, **{**args, field: "z" * (limit + 1)})
    assert field in str(e.value) and f"{limit:,}" in str(e.value) and f"{limit + 1:,}" in str(e.value)
    nothing_written(project)
    mark, _ = act.mark(resolve(project), IDS[2], op, **{**args, field: "z" * limit})  # the limit itself is fine
    assert getattr(mark, field) == "z" * limit


def test_the_limits_are_the_documented_numbers():
    assert (marks.MAX_REASON, marks.MAX_SUMMARY, marks.MAX_NEXT_STEPS) == (2_000, 8_000, 8_000)
    assert (
        actions.MAX_TITLE,
        actions.MAX_DESCRIPTION,
        actions.MAX_DECISION_TEXT,
        actions.MAX_DECISION_REASONING,
        actions.MAX_TAGS,
        actions.MAX_TAG,
    ) == (500, 20_000, 8_000, 8_000, 50, 64)
    assert LIMITS[("note", "data")] == marks.MAX_SUMMARY and LIMITS[("stale", "reasoning")] == marks.MAX_REASON


def test_a_12_mb_note_is_refused(project):
    with pytest.raises(BadArgument, match="summary is too long: 12,582,912 characters"):
        act.mark(resolve(project), IDS[2], "note", summary="n" * (12 * 1024 * 1024))
    nothing_written(project)


@pytest.mark.parametrize("bad", ["a NUL \x00 inside", "a lone surrogate \ud800", "argv \udcff"])
def test_mark_text_with_nul_or_lone_surrogate_is_refused(project, bad):
    with pytest.raises(BadArgument) as e:
        act.mark(resolve(project), IDS[2], "note", summary="fine", next_steps=bad)
    assert "next_steps holds" in str(e.value)
    with pytest.raises(BadArgument, match="reason holds"):
        act.mark(resolve(project), IDS[2], "stale", reason=bad)
    nothing_written(project)


def test_a_mark_whose_activity_row_fails_still_succeeds_and_is_written_once(project, caplog):
    (state(project) / "activity.jsonl").mkdir(parents=True)  # the activity log cannot be appended to
    with caplog.at_level(logging.WARNING, logger="c3async"):
        mark, _ = act.mark(resolve(project), IDS[2], "note", summary="written once")
    assert mark.summary == "written once"
    (row,) = jsonl_rows(state(project) / "session_marks.jsonl")
    assert (row["id"], row["op"], row["summary"]) == (IDS[2], "note", "written once")
    assert any("activity row was not" in r.getMessage() for r in caplog.records)
    assert marks.MarkBook(resolve(project)).refresh().get(IDS[2]).note.summary == "written once"


def test_the_activity_row_of_a_mark_bounds_its_strings(project):
    act.mark(resolve(project), IDS[2], "stale", reason="r" * marks.MAX_REASON)
    (mark,) = jsonl_rows(state(project) / "session_marks.jsonl")
    assert mark["reason"] == "r" * marks.MAX_REASON  # the mark keeps it all
    (row,) = [r for r in jsonl_rows(state(project) / "activity.jsonl") if r["kind"] == "session_mark"]
    assert len(row["reason"]) == 200 and row["reason"].endswith("\u2026")


# ------------------------------------------------------------------------ ids matched whole


def test_session_ids_with_a_trailing_newline_are_not_ids():
    assert is_session_id(IDS[0])
    for bad in (IDS[0] + "\n", "\n" + IDS[0], IDS[0] + "\r\n", IDS[0] + " ", IDS[0] + "\x00", IDS[0][:-1]):
        assert not is_session_id(bad), repr(bad)


@pytest.mark.parametrize("ref", [IDS[2] + "\n", "bbbb\n", "bbbb3333\r", "bbbb\x00", "\nbbbb", "bb bb", "bbbb\tx"])
def test_a_session_ref_with_a_newline_or_control_character_is_refused(project, ref):
    with pytest.raises(C3Error) as e:
        find_session(project, ref)
    assert isinstance(e.value, BadArgument) and "not a session id" in str(e.value)
    with pytest.raises(C3Error):
        act.mark(resolve(project), ref, "note", summary="x")
    with pytest.raises(C3Error):
        act.mark(resolve(project), IDS[0], "stale", reason="x", successor=ref)
    nothing_written(project)
    assert find_session(project, f"  {IDS[2][:6]} ").session_id == IDS[2]  # spaces around a pasted id are fine


def test_a_file_named_like_a_session_plus_a_newline_is_not_listed(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    sid = simple_session(folder, project, "real")
    (folder / f"{IDS[0]}.jsonl\n").write_bytes((folder / f"{sid}.jsonl").read_bytes())
    assert [c.session_id for c in candidates([folder])] == [sid]


def test_task_refs_with_a_trailing_newline_are_refused(tmp_path):
    t = actions.run(resolve(tmp_path), WHO, "add", title="a task")
    assert actions.run(resolve(tmp_path), WHO, "get", task_id=t["id"][:6])["id"] == t["id"]
    for bad in (t["id"] + "\n", t["id"][:6] + "\n", t["id"][:6] + "\x00", "\n" + t["id"][:6], t["id"][:6] + "\r"):
        with pytest.raises(BadArgument, match=r"not a task id|task_id holds a NUL"):
            actions.run(resolve(tmp_path), WHO, "get", task_id=bad)
    with pytest.raises(BadArgument, match=r"not a session id|full session id"):
        actions.run(resolve(tmp_path), WHO, "link", task_id=t["id"], ref=IDS[0] + "\n")
    with pytest.raises(BadArgument, match=r"not a session id|full session id"):
        actions.run(resolve(tmp_path), WHO, "link", task_id=t["id"], ref="not-a-session")
    linked = actions.run(resolve(tmp_path), WHO, "link", task_id=t["id"], ref=IDS[0].upper())
    assert linked["sessions"] == [WHO.session, IDS[0]]


# ------------------------------------------------------------------------ tasks


def _pm(tmp_path: Path) -> bytes | None:
    path = tmp_path / ".c3" / "pm" / "pm.json"
    return path.read_bytes() if path.exists() else None


@pytest.mark.parametrize(
    ("action", "args", "field", "limit"),
    [
        ("add", {"title": "t" * 501}, "title", 500),
        ("add", {"title": "ok", "description": "d" * 20_001}, "description", 20_000),
        ("decide", {"text": "x" * 8_001}, "text", 8_000),
        ("decide", {"text": "ok", "reasoning": "r" * 8_001}, "reasoning", 8_000),
        ("milestone_add", {"milestone": "m" * 201}, "milestone", 200),
    ],
)
def test_task_text_over_its_limit_is_refused_and_nothing_written(tmp_path, action, args, field, limit):
    with pytest.raises(BadArgument) as e:
        actions.run(resolve(tmp_path), WHO, action, **args)
    text = str(e.value)
    assert text.startswith(f"{field} is too long: {limit + 1:,} characters, the limit is {limit:,}")
    assert _pm(tmp_path) is None


def test_task_update_over_the_limit_leaves_pm_json_as_it_was(tmp_path):
    t = actions.run(resolve(tmp_path), WHO, "add", title="x" * 500, description="d" * 20_000)
    before = _pm(tmp_path)
    with pytest.raises(BadArgument, match="title is too long"):
        actions.run(resolve(tmp_path), WHO, "update", task_id=t["id"], title="y" * 501)
    with pytest.raises(BadArgument, match="description holds a NUL"):
        actions.run(resolve(tmp_path), WHO, "update", task_id=t["id"], description="a\x00b")
    with pytest.raises(BadArgument, match="lone surrogate"):
        actions.run(resolve(tmp_path), WHO, "update", task_id=t["id"], title="caf\udce9")
    assert _pm(tmp_path) == before


def test_tag_count_and_length_limits(tmp_path):
    with pytest.raises(BadArgument, match="tags: 51 given, the limit is 50"):
        actions.run(resolve(tmp_path), WHO, "add", title="t", tags=",".join(f"t{i}" for i in range(51)))
    with pytest.raises(BadArgument, match="65 characters long, the limit is 64"):
        actions.run(resolve(tmp_path), WHO, "add", title="t", tags="ok," + "g" * 65)
    assert _pm(tmp_path) is None
    t = actions.run(resolve(tmp_path), WHO, "add", title="t", tags=",".join(f"t{i}" for i in range(50)))
    assert len(t["tags"]) == 50


# ------------------------------------------------------------------------ the MCP server


@pytest.fixture
def world(claude, monkeypatch) -> World:
    project = _sessions(claude)
    _point_at(monkeypatch, claude, CLAUDE_PROJECT_DIR=project, CLAUDE_CODE_SESSION_ID=HOST)
    return World(claude, project)


@pytest.fixture(params=["auto", "legacy"])
async def client(request, world):
    async with Client(server.mcp, mode=request.param) as c:
        await _wait_for_heartbeat(world)
        yield c


HOSTILE = "$(touch /tmp/pwned)\n`id`\x1b]52;c;AAAA\x07" + "A" * 10_000


@pytest.mark.anyio
async def test_unknown_actions_write_no_activity_row(client, world):
    for tool, args in [
        ("c3_session", {"action": HOSTILE}),
        ("c3_session", {"action": "bogus"}),
        ("c3_task", {"action": HOSTILE}),
        ("c3_status", {"view": HOSTILE}),
    ]:
        text = err(await client.call_tool(tool, args))
        assert "unknown" in text and len(text) < 1_000, text[:300]
    assert world.activity() == []
    ok(await session(client, "  List "))  # a valid call is logged, with the action's own name
    (row,) = world.activity()
    assert (row["kind"], row["tool"], row["action"]) == ("tool_call", "c3_session", "list")


@pytest.mark.anyio
async def test_over_limit_text_is_refused_before_anything_is_logged(client, world):
    text = err(await session(client, "note", target=DOCS, data="n" * 8_001))
    assert "data" in text and "8,000" in text and "8,001" in text
    text = err(await session(client, "stale", target=OLD, reasoning="r" * 2_001))
    assert "reasoning" in text and "2,000" in text
    assert "NUL" in err(await session(client, "note", target=DOCS, data="a\x00b"))
    assert "too long" in err(await session(client, "list", target="s" * 501))
    assert "too long" in err(await session(client, "plan", data="p" * 20_001))
    text = err(await client.call_tool("c3_task", {"action": "add", "title": "t" * 501}))
    assert "title is too long" in text
    assert world.marks() == [] and world.activity() == []
    assert not (world.state / "pm" / "pm.json").exists()


@pytest.mark.anyio
async def test_a_lone_surrogate_from_json_is_refused(client, world):
    result = await session(client, "note", target=DOCS, data=json.loads('"bad \\ud800 text"'))
    assert "lone surrogate" in err(result)
    assert world.marks() == [] and world.activity() == []


@pytest.mark.anyio
async def test_a_note_whose_activity_rows_fail_still_succeeds_once(client, world):
    (world.state / "activity.jsonl").mkdir()  # neither the tool_call row nor the mark's can be written
    assert ok(await session(client, "note", target=DOCS, data="only once")) == f"note {DOCS}"
    (mark,) = world.marks()
    assert (mark["id"], mark["summary"]) == (DOCS, "only once")


@pytest.mark.anyio
async def test_ids_with_a_trailing_newline_are_refused_by_the_tools(client, world):
    assert "not a session id" in err(await session(client, "stale", target=OLD + "\n", reasoning="x"))
    assert "not a session id" in err(await session(client, "note", target="bbbb\n", data="x"))
    assert world.marks() == []
