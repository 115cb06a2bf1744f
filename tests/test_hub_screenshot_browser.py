"""The picture of the Hub in the README, ``docs/hub.png``: the real ``c3async hub`` in Chromium at
1280x800, over sessions that read like a week of work in three projects (one waiting for the
user, one busy, one marked stale with its successor, one with a note, idle and short ones, a
``/clear`` pair).

The picture goes to ``docs/hub.png`` only when ``C3_WRITE_DOCS=1`` (else to pytest's tmp_path),
so a test run leaves the checkout as it was. The README's sample output comes from the same
``DemoWorld`` (``tests/demo_world.py``).
"""

from __future__ import annotations

import os
from pathlib import Path

from browser import WAIT_MS, expect, needs_chromium
from demo_world import DemoWorld
from hubproc import Hub

pytestmark = needs_chromium

DOCS = Path(__file__).resolve().parents[1] / "docs"
VIEWPORT = {"width": 1280, "height": 800}


def test_the_readme_picture_of_the_hub(claude, browser, sleepers, tmp_path):
    world = DemoWorld(claude, sleepers)
    out = DOCS / "hub.png" if os.environ.get("C3_WRITE_DOCS") == "1" else tmp_path / "hub.png"
    with Hub(claude) as hub:
        context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
        try:
            pg = context.new_page()
            errors: list[str] = []
            pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            pg.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
            pg.goto(hub.login_url)
            expect(pg.locator("#progress")).to_have_text(f"{len(world.ids)} sessions", timeout=WAIT_MS)
            expect(pg.locator(f'#rows li[data-id="{world.waiting}"] .state-pill')).to_have_text("waiting 4m")
            expect(pg.locator(f'#rows li[data-id="{world.busy}"] .state-pill')).to_have_text("busy")
            expect(pg.locator(f'#rows li[data-id="{world.stale}"]')).to_contain_text("an index fixes the cause")
            expect(pg.locator(f'#rows li[data-id="{world.idle}"]')).to_contain_text("idle 12d")
            expect(pg.locator(f'#rows li[data-id="{world.flaky}"]')).to_contain_text("ended by /clear")
            expect(pg.locator("#projects button")).to_contain_text(
                ["All projects", "billing-api", "web-app", "deploy"], timeout=WAIT_MS
            )
            drawn = set(pg.eval_on_selector_all("#rows li", "els => els.map(e => e.dataset.id)"))
            assert drawn == world.ids
            width = pg.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
            assert width[0] <= width[1], f"the page scrolls sideways at 1280 px: {width}"
            for sid in world.ids:  # every title on one line, whole or cut with an ellipsis, never wrapped
                title = pg.locator(f'#rows li[data-id="{sid}"] .title')
                box = title.bounding_box()
                assert box is not None and box["height"] < 30, (sid, box)
            out.parent.mkdir(parents=True, exist_ok=True)
            pg.screenshot(path=str(out))
            print(f"screenshot: {out}")
            assert errors == []
        finally:
            context.close()
