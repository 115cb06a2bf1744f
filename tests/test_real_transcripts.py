"""Real transcripts, as public repositories hold them from Claude Code 1.0.x to 2.1.x: a
compaction's sub-agent is not conversation, an orphaned sub-agent folder is no hit, a flat
2.0-layout ``agent-*.jsonl`` hit opens, and a 1.0.x sidechain hit opens on its own item."""

from __future__ import annotations

import json

import pytest
from hubproc import Hub, wait_for

from stress.transcripts import COMPACT_SUMMARY, Conversation, write_session

pytestmark = pytest.mark.process


@pytest.fixture
def project(claude) -> str:
    return claude.project("app")


def _search(claude, project: str, query: str) -> dict:
    proc = claude.run("search", query, "--project", project, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_compaction_sub_agent_is_not_searched(claude, project):
    folder = claude.folder(project)
    c = Conversation(project)
    lines = [c.permission_mode(), *c.exchange("fix the parser", "fixed"), c.compact_boundary(), c.compact_summary()]
    write_session(folder, c.id, lines)
    comp = Conversation(project, c.id, sidechain=True)
    prompt = "Your task is to create a detailed summary of the conversation so far, zanzibarquux"
    write_session(folder / c.id / "subagents", "agent-acompact-1a2b3c", [comp.prompt(prompt), *comp.reply()])
    assert _search(claude, project, "zanzibarquux")["results"] == []  # Claude Code's own prompt
    assert _search(claude, project, "parser")["results"][0]["id"] == c.id
    rows = claude.rows_by_id(project)
    assert list(rows) == [c.id]  # the compaction marks the session; its sub-agent is no row
    assert "continued from a previous conversation" in COMPACT_SUMMARY


def test_an_orphaned_sub_agent_folder_is_no_hit(claude, project):
    folder = claude.folder(project)
    gone = "0d0d0d0d-0000-4000-8000-00000000000d"
    side = Conversation(project, gone, sidechain=True)
    write_session(folder / gone / "subagents", "agent-left", [side.prompt("an orphaned flurbnik"), *side.reply()])
    live = Conversation(project)
    write_session(folder, live.id, [live.permission_mode(), *live.exchange("the flurbnik that is here")])
    found = _search(claude, project, "flurbnik")
    assert [r["id"] for r in found["results"]] == [live.id] and found["total"] == 1


def test_hits_in_flat_agent_files_and_inline_sidechains_open_on_their_item(claude, project):
    folder = claude.folder(project)
    # 2.0.x: the sub-agent's transcript is a flat agent-<id>.jsonl beside the sessions
    two = Conversation(project, version="2.0.30")
    write_session(folder, two.id, [two.permission_mode(), *two.exchange("start the audit")])
    flat = Conversation(project, two.id, sidechain=True, version="2.0.30")
    write_session(
        folder,
        "agent-5f6e7d8c",
        [flat.prompt("look into the quasarflux module"), *flat.reply({"type": "text", "text": "quasarflux is clean"})],
    )
    # 1.0.x: the sub-agent's lines are inline in the session's own file
    one = Conversation(project, version="1.0.85")
    lines = [
        *one.exchange("begin"),
        {**one.prompt("sub-task: the blorptangle check"), "isSidechain": True},
        *one.exchange("what did the agent find?", "nothing"),
    ]
    write_session(folder, one.id, lines)
    assert claude.run("sessions", "--project", project).returncode == 0  # registers it
    with Hub(claude) as hub, hub.client() as c:
        for query, sid in (("quasarflux", two.id), ("blorptangle", one.id)):
            # (the Hub indexes at start: a search made meanwhile may answer before that is done)
            found = wait_for(
                lambda q=query: c.get("/api/search", params={"q": q, "project": project}).json()["results"], timeout=30
            )
            (hit,) = found
            assert hit["id"] == sid
            sn = hit["snippets"][0]
            params = {"at": sn["offset"], "project": project}
            if sn.get("agent"):
                params["agent"] = sn["agent"]
            r = c.get(f"/api/sessions/{sid}/conversation", params=params)
            assert r.status_code == 200, r.text
            pg = r.json()
            target = next(i for i in pg["items"] if i["offset"] == pg["target"])
            assert query in target["text"] and sn["offset"] == target["offset"], (query, target)
            assert target.get("sidechain") or sn.get("agent")
