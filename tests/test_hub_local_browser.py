"""The Hub in the reader's own place (Chromium against the real ``c3async hub``): times shown in
the browser's time zone and locale, though the API sends them in UTC; and the rail's box, which
narrows the projects as you type (by name or path, every word), keeping the chosen one."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from browser import WAIT_MS, expect, hub_page, needs_chromium
from hubproc import Hub

from stress.transcripts import Conversation, write_session

pytestmark = needs_chromium


def test_times_are_the_browsers_local_time(claude, browser):
    proj = claude.project("app")
    conv = Conversation(proj, start=datetime(2026, 5, 1, 10, 0, 0, tzinfo=UTC))
    write_session(claude.folder(proj), conv.id, [conv.permission_mode(), *conv.exchange("started at ten UTC")])
    assert claude.run("sessions", "--project", proj).returncode == 0
    with (
        Hub(claude) as hub,
        hub_page(browser, hub.login_url, timezone_id="Asia/Tokyo", locale="en-GB") as pg,
    ):
        li = pg.locator(f'#rows li[data-id="{conv.id}"]')
        # 10:00 UTC is 19:00 in Tokyo, written the British way
        tokyo = re.compile(r"^last activity 1 May 2026, 19:00:\d\d; created 1 May 2026, 19:00:\d\d$")
        expect(li.locator(".age")).to_have_attribute("title", tokyo, timeout=WAIT_MS)
        li.locator(".title").click()
        where = li.locator(".where")
        expect(where).to_contain_text(re.compile(r"created 1 May 2026, 19:00:\d\d"), timeout=WAIT_MS)
        assert "T10:00" not in where.inner_text() and "2026-05-01" not in where.inner_text()


def test_the_rails_box_narrows_the_projects_as_you_type(claude, browser):
    names = ["billing-api", "billing-web", "docs-site"]
    for name in names:
        proj = claude.project(name)
        conv = Conversation(proj)
        write_session(claude.folder(proj), conv.id, [conv.permission_mode(), *conv.exchange(f"work on {name}")])
        assert claude.run("sessions", "--project", proj).returncode == 0
    with Hub(claude) as hub, hub_page(browser, hub.login_url) as pg:
        rail = pg.locator("#projects > li > button[data-project]")
        expect(rail).to_have_count(4, timeout=WAIT_MS)  # all projects, then each
        box = pg.locator("#rail-filter")
        box.type("bill")
        expect(rail).to_have_text(["All projects", "billing-api", "billing-web"], timeout=WAIT_MS)
        box.type(" web")
        expect(rail).to_have_text(["All projects", "billing-web"], timeout=WAIT_MS)
        rail.nth(1).click()  # chosen: it stays whatever is typed
        box.fill("docs")
        expect(rail).to_have_text(["All projects", "billing-web", "docs-site"], timeout=WAIT_MS)
        box.fill("<img src=x onerror=alert(1)>")
        expect(rail).to_have_text(["All projects", "billing-web"], timeout=WAIT_MS)
        box.fill("")
        expect(rail).to_have_count(4, timeout=WAIT_MS)
