"""The Hub's Usage page in Chromium, against the real ``c3async hub``, at 760 and 1,400 px: both
charts drawn as SVG with a bar per bucket, a tooltip of the exact figures on focus and on hover,
the windows with their rule and "no runway", the live session's burn, no horizontal scroll, a
project named with markup shown as text, and #usage kept over a reload."""

from __future__ import annotations

import json
import os
import time

import pytest
from browser import WAIT_MS, expect, hub_page, needs_chromium
from hubproc import Hub
from test_hub_usage import HTML, NOW, _in, _iso
from test_usage import OTHER, SID, usage_line, write

pytestmark = needs_chromium  # the browser tier, and a skip without Chromium

PWNED = "<img src=x onerror=window.__pwned=1>"  # a project's name: it must stay text


@pytest.fixture(scope="module")
def world(module_claude):
    claude = module_claude
    alpha, hostile = claude.project("alpha"), claude.project(PWNED)
    write(claude.folder(alpha) / f"{SID}.jsonl", _in(alpha, [
        usage_line("m1", "r1", out=100, ts=_iso(NOW - 3 * 86400)),
        usage_line("m2", "r2", out=200, ts=_iso(NOW - 86400)),
        usage_line("m3", "r3", out=50, ts=_iso(NOW - 120)),
    ]))  # fmt: skip
    write(claude.folder(hostile) / f"{OTHER}.jsonl",
          _in(hostile, [usage_line("m4", "r4", out=1000, session=OTHER, ts=_iso(NOW - 2 * 86400))]))  # fmt: skip
    for p in (alpha, hostile):
        claude.sessions(p)
        assert claude.run("usage", "--project", p).returncode == 0
    live = os.path.join(alpha, ".c3", "live")
    os.makedirs(live, exist_ok=True)
    with open(os.path.join(live, "c3000000-0000-4000-8000-000000000009.json"), "w") as f:
        json.dump({"session_id": "c3000000-0000-4000-8000-000000000009", "host_session_id": SID,
                   "ide": "terminal", "pid": os.getpid(), "ts": time.time()}, f)  # fmt: skip
    return claude


@pytest.fixture(scope="module")
def hub(world):
    with Hub(world) as h:
        yield h


@pytest.mark.parametrize("width", [760, 1400])
def test_the_usage_page(hub, browser, width):
    with hub.client() as c:
        day = c.get("/api/usage", params={"by": "day", "since": "30d"}).json()
    assert HTML not in json.dumps(day)  # (this module's hostile name is its own)
    with hub_page(browser, hub.login_url + "#usage", width=width) as pg:
        expect(pg.locator("#usage")).to_be_visible(timeout=WAIT_MS)
        expect(pg.locator("#main")).to_be_hidden()
        day_bars = pg.locator("#chart-day svg .bar")
        expect(day_bars).to_have_count(len(day["buckets"]), timeout=WAIT_MS)
        assert len(day["buckets"]) == 4  # four days with usage
        expect(pg.locator("#chart-window svg .bar")).not_to_have_count(0)
        expect(pg.locator("#chart-day svg > title")).to_have_text("Cost (USD) per day, stacked by project")
        assert pg.evaluate("document.documentElement.scrollWidth <= innerWidth"), "a horizontal scroll"

        # the tooltip: the bar's exact figures, on focus and on hover
        last = day["buckets"][-1]
        day_bars.last.focus()
        tip = pg.locator("#usage-tip")
        expect(tip).to_be_visible()
        expect(tip).to_contain_text(f"{last['tokens']:,} tokens")
        expect(tip).to_contain_text(f"output {last['output']:,}")
        pg.keyboard.press("Escape")
        expect(tip).to_be_hidden()
        first = day["buckets"][0]
        day_bars.first.locator("rect").first.hover()
        expect(tip).to_contain_text(f"{first['tokens']:,} tokens")
        pg.locator("#usage-metric button[data-metric=tokens]").click()
        expect(pg.locator("#chart-day svg > title")).to_have_text("Tokens per day, stacked by project")

        # a project named with markup is text, in the legend and in the tooltip
        legend = pg.locator("#chart-day .legend-name")
        expect(legend).to_have_text(["<img src=x onerror=window.__pwned=1>", "alpha"])
        pwned = day_bars.nth(1)  # two days ago: the hostile project's
        pwned.focus()
        expect(tip).to_contain_text(PWNED)
        assert pg.locator("#usage img").count() == 0 and pg.evaluate("window.__pwned") is None

        # the windows (no sample recorded: by the rule, no runway) and the live session's burn
        five = pg.locator('#usage-windows [data-window="five_hour"]')
        expect(five).to_contain_text("used: not reported")
        expect(five).to_contain_text("no runway: no recorded samples")
        expect(five).to_contain_text("ccusage's rule")
        expect(pg.locator(f'#burn tr[data-id="{SID}"] td').nth(1)).to_have_text("alpha")

        pg.reload()  # the fragment keeps the page
        expect(pg.locator("#chart-day svg .bar")).to_have_count(4, timeout=WAIT_MS)
        # a chart is as wide as its box, and follows it when the window is resized
        fits = "[...document.querySelectorAll('.usage-chart .chart')].every(b => b.firstChild && b.firstChild.getAttribute('width') == Math.max(280, Math.round(b.getBoundingClientRect().width)))"
        assert pg.evaluate(f"() => {fits}")
        pg.set_viewport_size({"width": width + 150, "height": 900})
        pg.wait_for_function(f"() => {fits}", timeout=WAIT_MS)
        pg.set_viewport_size({"width": width, "height": 900})
        pg.wait_for_function(f"() => {fits}", timeout=WAIT_MS)
        pg.locator('#views a[data-view="sessions"]').click()
        expect(pg.locator("#rows li.row")).to_have_count(2, timeout=WAIT_MS)
        expect(pg.locator("#usage")).to_be_hidden()
