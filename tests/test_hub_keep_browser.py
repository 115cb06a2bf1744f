"""The Hub warns of the sessions Claude Code's cleanup deletes within a week (Chromium against
the real ``c3async hub``): a banner with the numbers the CLI says, for the projects shown (older
sessions than the rows listed count too), and its "Keep them all" keeps them, after which the
banner goes."""

from __future__ import annotations

import time
from pathlib import Path

from browser import WAIT_MS, expect, hub_page, needs_chromium
from hubproc import Hub

from stress.transcripts import simple_session

pytestmark = needs_chromium

DAY = 86_400


def test_the_banner_counts_the_expiring_and_keeps_them_all(claude, browser):
    north, south = claude.project("north"), claude.project("south")
    now = time.time()
    old = [simple_session(claude.folder(north), north, f"old {i}", mtime=now - 27 * DAY) for i in range(2)]
    noted = simple_session(claude.folder(north), north, "noted", mtime=now - 26 * DAY)
    far = simple_session(claude.folder(south), south, "old in the south", mtime=now - 25 * DAY)
    assert claude.run("mark", "note", noted, "--summary", "kept by the policy", "--project", north).returncode == 0
    for p in (north, south):
        assert claude.run("sessions", "--project", p).returncode == 0
    archive = Path(claude.c3home, "archive")
    with Hub(claude) as hub, hub_page(browser, hub.login_url) as pg:
        banner = pg.locator("#expiring-banner")
        expect(banner).to_be_visible(timeout=WAIT_MS)
        expect(pg.locator("#expiring-text")).to_have_text(
            "4 sessions expire within 7 days (1 kept): Claude Code deletes the 3 others, the first in 3 days."
        )
        pg.locator("#projects button", has_text="south").click()
        expect(pg.locator("#expiring-text")).to_have_text(
            "1 session expires within 7 days (0 kept): Claude Code deletes it, the first in 5 days.",
            timeout=WAIT_MS,
        )
        pg.locator("#projects button", has_text="north").click()
        expect(pg.locator("#expiring-text")).to_contain_text("deletes the 2 others", timeout=WAIT_MS)
        pg.locator("#keep-all").click()
        expect(pg.locator("#status")).to_have_text("kept 2 sessions past Claude Code's cleanup", timeout=WAIT_MS)
        expect(banner).to_be_hidden(timeout=WAIT_MS)
        assert all((archive / claude.folder(north).name / f"{sid}.jsonl").is_file() for sid in old)
        assert not (archive / claude.folder(south).name / f"{far}.jsonl").exists(), "only the project shown"
        pg.locator("#projects button", has_text="All projects").click()
        expect(pg.locator("#expiring-text")).to_contain_text("(3 kept)", timeout=WAIT_MS)
