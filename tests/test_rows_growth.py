"""Output grows with the rows, not their square: 2,000 sessions chained by ``/clear`` give rows
that each name their neighbours (``chain_prev``, ``chain_next``), the whole chain only in a
detail; titles of 300 KB are cut to 2,000 characters in every listing (``sessions --json``, the
Hub's ``/api/rows`` and ``/api/sessions``, MCP ``list`` and ``resources/list``) and whole in
``show``, the Hub's detail and MCP ``show``."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from stress.transcripts import Conversation, cleared_chain, write_session

pytestmark = pytest.mark.process

LINKS = 2000
TITLED = 40
BIG_TITLE = 300_000
ROW_BYTES = 3000  # a row of these sessions is about 1.5 KB, whatever the chain or the title


class World:
    def __init__(self, claude) -> None:
        self.claude = claude
        self.chained = claude.project("chained")
        self.chain = cleared_chain(claude.folder(self.chained), self.chained, LINKS)
        # what the hooks record of each /clear: a fact that reaches past the newest 200
        state = Path(self.chained, ".c3")
        state.mkdir(mode=0o700)
        (state / "activity.jsonl").write_text(
            "".join(
                json.dumps(
                    {
                        "ts": 1_777_000_000 + n,
                        "kind": "session_start",
                        "session_id": sid,
                        "source": "clear",
                        "predecessor": self.chain[n - 1],
                        "cwd": self.chained,
                    }
                )
                + "\n"
                for n, sid in enumerate(self.chain)
                if n
            )
        )
        self.titled = claude.project("titled")
        folder = claude.folder(self.titled)
        self.titles: dict[str, str] = {}
        for n in range(TITLED):
            conv = Conversation(self.titled)
            title = f"{n:02d} " + ("a long name " * (BIG_TITLE // 12))[: BIG_TITLE - 3]
            kind = conv.custom_title(title) if n % 2 else conv.ai_title(title)
            write_session(folder, conv.id, [conv.permission_mode(), *conv.exchange(f"work {n}"), kind])
            self.titles[conv.id] = title
        for p in (self.chained, self.titled):
            assert claude.run("sessions", "--project", p).returncode == 0  # registered


@pytest.fixture(scope="module")
def world(module_claude):
    return World(module_claude)


def _listing(world, project: str, *args: str) -> tuple[bytes, list[dict]]:
    proc = world.claude.run("sessions", "--project", project, "--json", *args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.encode(), json.loads(proc.stdout)


def test_a_long_chain_costs_each_row_its_neighbours_only(world):
    newest, rows = _listing(world, world.chained)
    everything, all_rows = _listing(world, world.chained, "--limit", str(LINKS))
    assert (len(rows), len(all_rows)) == (200, LINKS)
    by_id = {r["id"]: r for r in all_rows}
    chain = world.chain
    for i in (0, 1, LINKS // 2, LINKS - 1):
        row = by_id[chain[i]]
        assert row["chain_prev"] == chain[i - 1 : i] and row["chain_next"] == chain[i + 1 : i + 2]
        assert "chain" not in row
    assert max(len(json.dumps(r)) for r in all_rows) < ROW_BYTES
    per_row_200, per_row_all = len(newest) / len(rows), len(everything) / len(all_rows)
    assert per_row_all < 1.1 * per_row_200  # linear in the rows (it was 15 MiB for 200, 150 MiB for all)


def test_the_whole_chain_is_in_the_detail(world):
    chain = world.chain
    middle = chain[-100]
    shown = world.claude.run("show", middle, "--project", world.chained, "--json")
    assert shown.returncode == 0, shown.stderr
    d = json.loads(shown.stdout)
    # nearest first, to both ends: past the newest 200 listed, through what the hooks recorded
    assert d["chain"]["successors"] == chain[-99:]
    assert d["chain"]["predecessors"] == chain[-101::-1]
    assert (d["row"]["chain_prev"], d["row"]["chain_next"]) == ([chain[-101]], [chain[-99]])


def test_long_titles_are_cut_in_the_listing_and_whole_in_show(world):
    data, rows = _listing(world, world.titled)
    assert len(rows) == TITLED and len(data) < TITLED * ROW_BYTES * 2
    for row in rows:
        want = world.titles[row["id"]]
        assert (row["title"], row["title_truncated"]) == (want[:2000], True)
    sid = next(iter(world.titles))
    shown = json.loads(world.claude.run("show", sid, "--project", world.titled, "--json").stdout)
    assert (shown["row"]["title"], shown["row"]["title_truncated"]) == (world.titles[sid], False)
    text = world.claude.run("show", sid[:8], "--project", world.titled).stdout
    assert text.splitlines()[0] == f"{sid}  {world.titles[sid]}"
    table = world.claude.run("sessions", "--project", world.titled).stdout
    assert len(table) < TITLED * 400  # one terminal line a row


def test_the_hub_lists_cut_titles_and_neighbours_and_shows_them_whole(client, world):
    page = client.get("/api/rows", params={"project": world.titled, "limit": TITLED})
    assert page.status_code == 200, page.text
    assert len(page.content) < TITLED * ROW_BYTES * 2  # a 40-row page was 11 MiB
    assert {r["title"] for r in page.json()["rows"]} == {t[:2000] for t in world.titles.values()}
    assert all(r["title_truncated"] for r in page.json()["rows"])
    chained = client.get("/api/rows", params={"project": world.chained, "limit": 500}).json()["rows"]
    assert len(chained) == 200
    by_id = {r["id"]: r for r in chained}
    newest = world.chain[-1]
    assert (by_id[newest]["chain_prev"], by_id[newest]["chain_next"]) == ([world.chain[-2]], [])
    scripts = client.get("/api/sessions", params={"project": world.titled})
    assert scripts.status_code == 200 and len(scripts.content) < TITLED * ROW_BYTES * 2
    assert all(len(r["title"]) == 2000 and "chain" not in r for r in scripts.json()["rows"])
    sid = next(iter(world.titles))
    d = client.get(f"/api/sessions/{sid}", params={"project": world.titled}).json()
    assert d["row"]["title"] == world.titles[sid] and d["chain"] == {"predecessors": [], "successors": []}


def test_mcp_lists_short_titles_and_shows_the_whole_one(world, monkeypatch):
    from mcp import Client

    from c3async.serve import app as server

    for key, value in {**world.claude.env(), "CLAUDE_PROJECT_DIR": world.titled}.items():
        monkeypatch.setenv(key, value)
    sid = next(iter(world.titles))

    async def main() -> tuple[str, list, str]:
        async with Client(server.mcp) as c:
            listed = await c.call_tool("c3_session", {"action": "list"})
            resources = (await c.list_resources()).resources
            shown = await c.call_tool("c3_session", {"action": "show", "target": sid})
            assert not listed.is_error and not shown.is_error
            return listed.content[0].text, resources, shown.content[0].text

    listed, resources, shown = anyio.run(main)
    assert len(listed) < TITLED * 200
    sessions = [r for r in resources if str(r.uri).startswith("c3://session/")]
    assert len(sessions) == TITLED and all(len(r.name) <= 100 for r in sessions)
    assert shown.splitlines()[0] == f"{sid}  {world.titles[sid]}"
