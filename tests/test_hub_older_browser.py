"""A project with more sessions than a listing's newest 200: the Hub's rail offers its older
sessions, and choosing that lists them (Chromium against the real ``c3async hub``)."""

from __future__ import annotations

import time

from browser import WAIT_MS, expect, hub_page, needs_chromium
from hubproc import Hub

from stress.transcripts import simple_session

pytestmark = needs_chromium


def test_the_rail_offers_a_projects_older_sessions(claude, browser):
    project = claude.project("deep")
    now = time.time()
    ids = [
        simple_session(claude.folder(project), project, f"deep session {n:03d}", mtime=now - 60 * n) for n in range(230)
    ]
    assert claude.run("sessions", "--project", project).returncode == 0
    with Hub(claude) as hub, hub_page(browser, hub.login_url) as pg:
        expect(pg.locator("#progress")).to_have_text("200 sessions", timeout=WAIT_MS)
        pg.locator(f'#projects button[data-project="{project}"]').click()
        older = pg.get_by_role("button", name="older sessions (200 listed)")
        expect(older).to_be_visible(timeout=WAIT_MS)
        older.click()
        expect(pg.locator("#progress")).to_have_text("230 sessions", timeout=WAIT_MS)
        deadline = time.monotonic() + 30
        while pg.evaluate("list.rows.length") < 230:
            assert time.monotonic() < deadline
            pg.mouse.wheel(0, 4000)
            pg.wait_for_timeout(50)
        shown = pg.evaluate("list.rows.map(r => r.id)")  # the rows loaded (those in view are drawn)
        assert shown == ids  # the oldest 30 too, newest first
        expect(older).to_have_count(0)  # nothing older left
