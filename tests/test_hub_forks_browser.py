"""Forks in the Hub (Chromium against the real ``c3async hub``): a root's row says "+N forks"
and its forks are not listed beside it; expanding shows them under it, collapsing hides them; a
fork found on its own (a search that misses its root) is listed, saying whose fork it is; the
count says every session either way."""

from __future__ import annotations

from browser import WAIT_MS, expect, hub_page, needs_chromium
from hubproc import Hub
from test_forks import fork_of, parent_session

from stress.transcripts import Conversation, write_session

pytestmark = needs_chromium


def test_forks_sit_under_their_root(claude, browser):
    proj = claude.project("app")
    folder = claude.folder(proj)
    parent, lines, conv = parent_session(folder, proj)
    one = fork_of(folder, proj, lines, conv, minutes=10, prompt="the walrus way")
    two = fork_of(folder, proj, lines, conv, branch=True, minutes=20)
    other = Conversation(proj)
    write_session(folder, other.id, [other.permission_mode(), *other.exchange("unrelated work")])
    assert claude.run("sessions", "--project", proj).returncode == 0
    with Hub(claude) as hub:
        with hub.client() as c:
            data = c.get("/api/rows").json()
            assert data["total"] == 4 and {r["id"] for r in data["rows"]} == {parent, other.id}
            root = next(r for r in data["rows"] if r["id"] == parent)
            assert root["fork_count"] == 2 and root["root"] is None
            under = c.get("/api/rows", params={"forks_of": parent}).json()
            assert {r["id"] for r in under["rows"]} == {one, two} and all(r["root"] == parent for r in under["rows"])
        with hub_page(browser, hub.login_url) as pg:
            expect(pg.locator("#progress")).to_have_text("4 sessions", timeout=WAIT_MS)
            row = pg.locator(f'#rows li[data-id="{parent}"]')
            toggle = row.locator(".fork-toggle")
            expect(toggle).to_have_text("+2 forks")
            assert pg.locator(f'#rows li[data-id="{one}"]').count() == 0
            toggle.click()
            expect(toggle).to_have_text("−2 forks")
            ids = pg.eval_on_selector_all("#rows li", "els => els.map(e => e.dataset.id)")
            at = ids.index(parent)
            assert set(ids[at + 1 : at + 3]) == {one, two}
            expect(pg.locator(f'#rows li[data-id="{two}"]')).to_have_class("row fork-child")
            expect(pg.locator(f'#rows li[data-id="{two}"] .chip.fork')).to_have_text(f"fork of {parent[:8]}")
            toggle.click()
            expect(pg.locator(f'#rows li[data-id="{one}"]')).to_have_count(0)
            pg.fill("#search", "walrus")
            expect(pg.locator("#progress")).to_have_text("1 of 4 sessions", timeout=WAIT_MS)
            alone = pg.locator(f'#rows li[data-id="{one}"]')
            expect(alone.locator(".chip.fork")).to_have_text(f"fork of {parent[:8]}")
            expect(alone.locator(".fork-toggle")).to_be_hidden()
