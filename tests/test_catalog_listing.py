"""Stage 2: which files are sessions, their order, the newest-200 cut and the files skipped."""

from __future__ import annotations

import pytest

from stress.transcripts import Conversation, new_id, set_mtime, simple_session, write_session

pytestmark = pytest.mark.process

T0 = 1_700_000_000


def test_only_uuid_jsonl_files_directly_in_the_folder_are_sessions(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    sid = simple_session(folder, project, "the real session")
    # Clutter that Claude Code leaves next to sessions, each holding a valid transcript.
    conv = Conversation(project, sid, sidechain=True)
    agent_lines = [conv.prompt("Search the codebase for retry logic"), *conv.reply()]
    write_session(folder, "agent-a1b2c3d4", agent_lines)
    write_session(folder / sid / "subagents", "agent-a1b2c3d4e5f6a7b8c", agent_lines)
    (folder / sid / "subagents" / "agent-a1b2c3d4e5f6a7b8c.meta.json").write_text('{"agentType":"general-purpose"}')
    write_session(folder / sid / "subagents" / "workflows" / "wf_1", "journal", [{"type": "started"}])
    (folder / sid / "tool-results").mkdir(parents=True)
    (folder / sid / "tool-results" / "x.txt").write_text("big output")
    simple_session(folder, project, "notes, not a session", session_id="notes")
    simple_session(folder, project, "a uuid with a suffix", session_id=new_id() + ".bak")
    simple_session(folder / new_id(), project, "a session one level down")
    (folder / "sessions-index.json").write_text('{"version":1,"entries":[]}')
    (folder / "memory").mkdir()
    (folder / "memory" / "MEMORY.md").write_text("# notes")
    rows = claude.sessions(project)
    assert [r["id"] for r in rows] == [sid]


def test_rows_are_newest_first_by_file_mtime_not_by_content_time(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    # Content timestamps run the other way round from the mtimes.
    a = simple_session(folder, project, "a", mtime=T0 + 300, start=Conversation(project).clock.replace(day=1))
    b = simple_session(folder, project, "b", mtime=T0 + 200, start=Conversation(project).clock.replace(day=2))
    c = simple_session(folder, project, "c", mtime=T0 + 100, start=Conversation(project).clock.replace(day=3))
    assert [r["id"] for r in claude.sessions(project)] == [a, b, c]


def test_mtime_ties_are_broken_by_session_id_descending(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    ids = [f"{n}0000000-0000-4000-8000-000000000000" for n in (3, 9, 1, 5)]
    for sid in ids:
        simple_session(folder, project, sid, session_id=sid, mtime=T0)
    newer = simple_session(folder, project, "newer", mtime=T0 + 1)
    assert [r["id"] for r in claude.sessions(project)] == [newer, *sorted(ids, reverse=True)]


def test_rows_within_one_millisecond_keep_exact_mtime_order(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    base_ns = T0 * 1_000_000_000
    # The newer file has the smaller id; the two mtimes differ by 200 ns.
    newer = "10000000-0000-4000-8000-000000000000"
    older = "f0000000-0000-4000-8000-000000000000"
    simple_session(folder, project, "newer", session_id=newer)
    simple_session(folder, project, "older", session_id=older)
    set_mtime(folder / f"{newer}.jsonl", base_ns + 400, ns=True)
    set_mtime(folder / f"{older}.jsonl", base_ns + 200, ns=True)
    assert [r["id"] for r in claude.sessions(project)] == [newer, older]
    assert [r["id"] for r in claude.sessions(project, "--limit", "1")] == [newer]


def test_the_200_newest_sessions_are_listed_and_skipped_files_make_room(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    valid = []
    for i in range(210):
        sid = f"{i:08x}-0000-4000-8000-000000000000"
        conv = Conversation(project, sid)
        write_session(folder, sid, [*conv.exchange(f"prompt {i}")], mtime=T0 + i)
        valid.append(sid)
    # Five files newer than all of them that are not sessions: they must not take a place.
    ghost = Conversation(project)
    write_session(folder, new_id(), [ghost.summary("Redis caching")], mtime=T0 + 1000)
    write_session(folder, new_id(), [ghost.bridge_status(), ghost.snapshot()], mtime=T0 + 1001)
    write_session(folder, new_id(), [ghost.permission_mode(), ghost.last_prompt("hello")], mtime=T0 + 1002)
    write_session(folder, new_id(), [], mtime=T0 + 1003)
    side = Conversation(project, sidechain=True)
    write_session(folder, new_id(), [side.prompt("delegated task"), *side.reply()], mtime=T0 + 1004)
    rows = claude.sessions(project)
    assert [r["id"] for r in rows] == list(reversed(valid))[:200]


def test_sidechain_file_is_not_listed(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    sid = simple_session(folder, project)
    side = Conversation(project, sid, sidechain=True)
    lines = [side.prompt("Find every caller of retry()"), *side.reply(), side.prompt("follow up")]
    for line in lines:
        line["agentId"] = "a1b2c3d4e5f6a7b8c"
    write_session(folder, new_id(), lines)
    assert [r["id"] for r in claude.sessions(project)] == [sid]


def test_sidechain_detection_uses_the_first_conversation_line_not_the_first_line(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    side = Conversation(project, sidechain=True)
    write_session(folder, side.id, [side.permission_mode(), side.snapshot(), side.prompt("delegated"), *side.reply()])
    assert claude.sessions(project) == []


def test_metadata_only_files_are_not_listed(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    sid = simple_session(folder, project, mtime=T0)
    conv = Conversation(project)
    ghosts = [
        [conv.summary("Redis Caching Implementation"), conv.summary("Fix flaky test")],
        [conv.bridge_status(), conv.snapshot(), conv.snapshot()],
        [conv.permission_mode(), conv.last_prompt("look at this repo")],
        [conv.custom_title("named but empty"), conv.agent_name("named but empty"), conv.mode()],
        [conv.queue("enqueue", "look at this repo"), conv.queue("dequeue")],
    ]
    for i, lines in enumerate(ghosts):
        write_session(folder, new_id(), lines, mtime=T0 + 10 + i)
    assert [r["id"] for r in claude.sessions(project)] == [sid]


def test_empty_file_is_not_listed(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    sid = simple_session(folder, project, mtime=T0)
    empty = folder / f"{new_id()}.jsonl"
    empty.write_bytes(b"")
    set_mtime(empty, T0 + 10)
    assert [r["id"] for r in claude.sessions(project)] == [sid]


def test_file_of_another_directory_in_the_folder_is_skipped_and_makes_room(claude):
    project = claude.project("my_app")
    other = claude.project("my-app")
    folder = claude.folder(project)
    mine = [simple_session(folder, project, f"mine {i}", mtime=T0 + i) for i in range(3)]
    for i in range(3):
        simple_session(folder, other, f"other {i}", mtime=T0 + 100 + i)
    rows = claude.sessions(project, "--limit", "3")
    assert [r["id"] for r in rows] == list(reversed(mine))
