"""Sessions waiting for the user, in the Hub (Chromium against the real ``c3async hub``): the
running claudes are real processes with Claude Code's registry files. A waiting row has its
pill, the Waiting filter and the rail count it, the tab's title carries the count, and a
session that starts waiting shows up within the change stream's 2 s, with an opt-in desktop
notification (the browser's Notification, recorded)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from browser import WAIT_MS, expect, hub_page, needs_chromium
from hubproc import Hub
from test_live_registry import registry_file

from stress.transcripts import simple_session

pytestmark = needs_chromium

RECORD_NOTIFICATIONS = """
window.__notes = [];
window.Notification = class { constructor(title, opts) { window.__notes.push([title, opts.body]); }
  static get permission() { return "granted"; } static requestPermission() { return Promise.resolve("granted"); } };
"""


@pytest.fixture
def claudes():
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]) for _ in range(3)]
    yield procs
    for p in procs:
        p.kill()
        p.wait()


def test_waiting_sessions_stand_out_and_arrive_live(claude, browser, claudes):
    north, south = claude.project("north"), claude.project("south")
    now = time.time()
    asks = simple_session(claude.folder(north), north, "asks for a permission", mtime=now - 30)
    works = simple_session(claude.folder(north), north, "works away", mtime=now - 20)
    later = simple_session(claude.folder(south), south, "will ask later", mtime=now - 10)
    for p in (north, south):
        assert claude.run("sessions", "--project", p).returncode == 0
    registry_file(claude.config, claudes[0].pid, asks, north, status="waiting", since_ms=(now - 240) * 1000)
    registry_file(claude.config, claudes[1].pid, works, north, status="busy")
    registry_file(claude.config, claudes[2].pid, later, south, status="idle")
    with Hub(claude) as hub, hub_page(browser, hub.login_url, init_script=RECORD_NOTIFICATIONS) as pg:
        row = pg.locator(f'#rows li[data-id="{asks}"]')
        expect(row.locator(".state-pill")).to_have_text("waiting 4m", timeout=WAIT_MS)
        expect(pg.locator(f'#rows li[data-id="{works}"] .state-pill')).to_have_text("busy")
        expect(pg.locator(f'#rows li[data-id="{later}"] .state-pill')).to_be_hidden()  # idle: no pill
        expect(pg).to_have_title("(1) Sessions · c3async Hub")
        expect(pg.locator('#filters button[data-filter="waiting"] .filter-n')).to_have_text(" 1")
        expect(pg.locator("#projects .rail-waiting")).to_have_text(["1 waiting"], timeout=WAIT_MS)
        pg.locator("#notify").click()
        expect(pg.locator("#notify")).to_have_attribute("aria-pressed", "true")

        registry_file(claude.config, claudes[2].pid, later, south, status="waiting")
        t0 = time.monotonic()
        expect(pg.locator(f'#rows li[data-id="{later}"] .state-pill')).to_have_text("waiting 0s", timeout=WAIT_MS)
        arrived = time.monotonic() - t0
        expect(pg).to_have_title("(2) Sessions · c3async Hub")
        assert pg.evaluate("window.__notes") == [["A session waits for you", "will ask later (south)"]]
        assert arrived < 5, arrived  # the stream delivers it (about 1 s): a loose bound, not a budget

        pg.locator('#filters button[data-filter="waiting"]').click()
        expect(pg.locator("#progress")).to_have_text("2 of 3 sessions", timeout=WAIT_MS)
        ids = pg.evaluate("list.rows.map(r => r.id)")
        assert sorted(ids) == sorted([asks, later])
