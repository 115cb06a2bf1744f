"""Tags and changed files in the Hub (Chromium against the real ``c3async hub``): the rail's tag
row narrows the list to a tag's sessions; a session's detail lists the files it changed, each a
link that lists the sessions that changed that file; the API answers the same (``/api/files``,
``tag=`` on ``/api/rows`` and ``/api/search``)."""

from __future__ import annotations

from browser import WAIT_MS, expect, hub_page, needs_chromium
from hubproc import Hub
from test_find import START, _session

from c3async.ground.project import resolve
from c3async.sessions import act

pytestmark = needs_chromium


def test_tag_row_and_changed_files(claude, browser, monkeypatch):
    from datetime import timedelta

    proj = claude.project("app")
    folder = claude.folder(proj)
    first = _session(folder, proj, "write the parser", edits=[("Write", f"{proj}/parser.py")])
    second = _session(
        folder, proj, "fix the <b>lexer</b>", start=START + timedelta(days=1), edits=[("Edit", f"{proj}/parser.py")]
    )
    third = _session(folder, proj, "docs", start=START + timedelta(days=2))
    claude.activate(monkeypatch)
    act.mark(resolve(proj), first, "tag", tags=["auth"])
    act.mark(resolve(proj), third, "tag", tags=["auth", "docs"])
    assert claude.run("index").returncode == 0  # built before: the Hub answers from it at once
    with Hub(claude) as hub:
        with hub.client() as c:
            rows = c.get("/api/rows", params={"tag": "AUTH"}).json()
            assert {r["id"] for r in rows["rows"]} == {first, third} and rows["tags"] == [["auth", 2], ["docs", 1]]
            assert c.get("/api/rows", params={"tag": "no tag"}).status_code == 400
            found = c.get("/api/files", params={"path": "parser.py", "project": proj}).json()
            assert [s["id"] for s in found["sessions"]] == [second, first]
            assert c.get("/api/files", params={"path": "parser.py"}).status_code == 400  # relative, no project
            hits = c.get("/api/search", params={"q": "docs", "tag": "docs"}).json()
            assert [(r["id"], r["fields"]) for r in hits["results"]] == [(third, ["tags", "conversation"])]
        with hub_page(browser, hub.login_url) as pg:
            expect(pg.locator("#progress")).to_have_text("3 sessions", timeout=WAIT_MS)
            tag = pg.locator('#tags button[data-tag="docs"]')
            expect(tag).to_have_text("#docs")
            tag.click()
            expect(pg.locator("#progress")).to_have_text("1 of 3 sessions", timeout=WAIT_MS)
            expect(pg.locator(f'#rows li[data-id="{third}"] .chip.tag')).to_have_text(["#auth", "#docs"])
            tag.click()
            expect(pg.locator("#progress")).to_have_text("3 sessions", timeout=WAIT_MS)
            row = pg.locator(f'#rows li[data-id="{second}"]')
            row.locator(".title").click()
            link = row.locator(".changed a")
            expect(link).to_have_text(f"{proj}/parser.py", timeout=WAIT_MS)
            link.click()
            listed = row.locator(".changed-by li")
            expect(listed).to_have_count(2, timeout=WAIT_MS)
            expect(listed.first).to_contain_text("1 change (Edit)")
            assert pg.locator("b", has_text="lexer").count() == 0  # transcript text stays text
