"""The Hub's age column says what the list is sorted by (Chromium against the real ``c3async
hub``): last activity by default, the session's creation once sorted by Created."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from browser import WAIT_MS, expect, hub_page, needs_chromium
from hubproc import Hub

from stress.transcripts import Conversation, write_session

pytestmark = needs_chromium


def test_the_age_follows_the_sort_order(claude, browser):
    proj = claude.project("app")
    now = datetime.now(UTC)
    conv = Conversation(proj, start=now - timedelta(days=5, hours=12))  # mid-day: no rounding edge
    lines = [conv.permission_mode(), *conv.exchange("started five days ago")]
    conv.clock = now - timedelta(hours=30)  # picked up again yesterday
    lines += conv.exchange("and carried on today")
    write_session(claude.folder(proj), conv.id, lines, mtime=conv.clock.timestamp())
    assert claude.run("sessions", "--project", proj).returncode == 0
    with Hub(claude) as hub, hub_page(browser, hub.login_url) as pg:
        cell = pg.locator(f'#rows li[data-id="{conv.id}"] .age')
        expect(cell).to_have_text("1d ago", timeout=WAIT_MS)
        pg.click('#columns button[data-sort="created"]')
        expect(cell).to_have_text("5d ago", timeout=WAIT_MS)
        pg.click('#columns button[data-sort="activity"]')
        expect(cell).to_have_text("1d ago", timeout=WAIT_MS)
