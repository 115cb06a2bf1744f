"""The Hub's list in a real Chromium against the real ``c3async hub``, at a size that pages: 450
sessions in three projects (the page asks 100 at a time). Paging as one list, sortable column
headers, the "N of M" count, the keyboard, a row updated in place by the change stream (scroll
position, focus and an open row kept), and the layout at 760, 1,100, 1,400 and 2,560 px.
Screenshots go to pytest's tmp_path."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from browser import WAIT_MS, expect, hub_page, needs_chromium

from stress.transcripts import simple_session

pytestmark = needs_chromium
TOTAL = 450


class World:
    def __init__(self, claude) -> None:
        self.claude = claude
        now = time.time()
        self.projects = [claude.project(n) for n in ("north", "south", "east")]
        self.ids: list[str] = []
        for n in range(TOTAL):
            p = self.projects[n % 3]
            title = f"Session {n:03d} about {'parsers' if n % 5 == 0 else 'caches'} on a long descriptive title"
            self.ids.append(
                simple_session(
                    claude.folder(p), p, title, mtime=now - 60 * n, branch=f"feature/branch-with-a-long-name-{n % 7}"
                )
            )
        for p in self.projects:
            assert claude.run("sessions", "--project", p).returncode == 0


@pytest.fixture(scope="module")
def world(module_claude):
    return World(module_claude)


@pytest.fixture
def page(browser, hub):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=hub.url)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(hub.login_url)
    expect(pg.locator("#rows li").first).to_be_visible(timeout=WAIT_MS)
    yield pg
    context.close()
    assert errors == []


def shown(pg) -> list[str]:
    """The rows the page has loaded, in order (it draws only those in and near the window)."""
    return pg.evaluate("list.rows.map(r => r.id)")


def drawn(pg) -> list[str]:
    return pg.eval_on_selector_all("#rows li", "els => els.map(e => e.dataset.id)")


def scroll_to_end(pg, want: int) -> None:
    deadline = time.monotonic() + 60
    while len(shown(pg)) < want:
        assert time.monotonic() < deadline, len(shown(pg))
        pg.mouse.wheel(0, 4000)
        pg.wait_for_timeout(50)


def scroll_to_row(pg, sid: str) -> None:
    """Scroll from the top down, as a user does, until the row is drawn and in view."""
    pg.evaluate("window.scrollTo(0, 0)")
    li = pg.locator(f'#rows li[data-id="{sid}"]')
    deadline = time.monotonic() + 60
    while not (
        li.count()
        and li.evaluate("e => { const r = e.getBoundingClientRect(); return r.top > 120 && r.bottom < innerHeight; }")
    ):
        assert time.monotonic() < deadline
        pg.mouse.wheel(0, 300)
        pg.wait_for_timeout(30)


def test_the_list_pages_as_one_and_counts_n_of_m(page, world):
    expect(page.locator("#progress")).to_have_text(f"{TOTAL} sessions", timeout=WAIT_MS)
    assert len(shown(page)) == 100  # one page first
    scroll_to_end(page, TOTAL)
    ids = shown(page)
    assert len(ids) == len(set(ids)) == TOTAL and ids == world.ids  # newest first, each once
    page.mouse.wheel(0, 100_000)  # to the very end
    page.wait_for_function(  # the window drawn at the end: the last row, and fewer than a page
        "([last]) => { const els = document.querySelectorAll('#rows li');"
        " return els.length < 100 && els[els.length - 1]?.dataset.id === last; }",
        arg=[ids[-1]],
        timeout=WAIT_MS,
    )
    window = drawn(page)  # only the rows in and near the view are in the document, in order
    assert 10 < len(window) < 100 and window == ids[-len(window) :], window
    expect(page.locator(f'#rows li[data-id="{ids[-1]}"]')).to_be_in_viewport()
    page.fill("#search", "parsers")
    expect(page.locator("#progress")).to_have_text(f"90 of {TOTAL} sessions", timeout=WAIT_MS)
    page.wait_for_function("list.rows.length === 90", timeout=WAIT_MS)
    expect(page.locator("#rows li").first).to_have_attribute("data-id", world.ids[0])  # the new view from its top
    expect(page.locator("#rows li").first).to_be_in_viewport()


def test_an_open_row_keeps_what_is_typed_when_scrolled_away_and_back(page, world):
    first = page.locator(f'#rows li[data-id="{world.ids[0]}"]')
    first.locator(".title").click()
    summary = first.get_by_label("note summary")
    expect(summary).to_be_visible(timeout=WAIT_MS)
    summary.fill("still here")
    scroll_to_end(page, 300)
    expect(first).to_have_count(0, timeout=WAIT_MS)  # scrolled out of the window: not in the document
    page.evaluate("window.scrollTo(0, 0)")
    expect(summary).to_be_visible(timeout=WAIT_MS)
    assert summary.input_value() == "still here"
    assert drawn(page)[0] == world.ids[0]


def test_column_headers_sort_and_say_so(page, world):
    title = page.locator('#columns button[data-sort="title"]')
    title.click()
    expect(title).to_have_attribute("aria-sort", "ascending", timeout=WAIT_MS)
    expect(page.locator("#rows li .title").first).to_have_text(
        "Session 000 about parsers on a long descriptive title", timeout=WAIT_MS
    )
    title.click()
    expect(title).to_have_attribute("aria-sort", "descending", timeout=WAIT_MS)
    expect(page.locator("#rows li .title").first).to_have_text(
        "Session 449 about caches on a long descriptive title", timeout=WAIT_MS
    )
    assert page.locator('#columns button[data-sort="activity"]').get_attribute("aria-sort") == "none"


def test_the_keyboard_moves_opens_searches_and_copies(page, world):
    page.locator("body").click(position={"x": 5, "y": 300})
    page.keyboard.press("j")
    first = page.locator("#rows li").nth(0)
    expect(first.locator(".title")).to_be_focused()
    page.keyboard.press("j")
    page.keyboard.press("ArrowDown")
    third = page.locator("#rows li").nth(2)
    expect(third.locator(".title")).to_be_focused()
    page.keyboard.press("k")
    second = page.locator("#rows li").nth(1)
    expect(second.locator(".title")).to_be_focused()
    page.keyboard.press("Enter")
    expect(second.locator(".detail")).to_be_visible(timeout=WAIT_MS)
    outline = second.locator(".title").evaluate("e => getComputedStyle(e).outlineStyle")
    assert outline != "none"  # the focus is visible
    page.keyboard.press("c")
    expect(page.locator("#status")).to_have_text("resume command copied", timeout=WAIT_MS)
    assert page.evaluate("navigator.clipboard.readText()").endswith(f"claude --resume {world.ids[1]}")
    page.keyboard.press("/")
    expect(page.locator("#search")).to_be_focused()


def test_a_row_changes_in_place_and_the_page_keeps_its_place(page, world, module_claude):
    scroll_to_end(page, 200)
    target_index = 150
    target = world.ids[target_index]
    li = page.locator(f'#rows li[data-id="{target}"]')
    scroll_to_row(page, world.ids[148])
    open_one = page.locator(f'#rows li[data-id="{world.ids[148]}"]')
    open_one.locator(".title").click()
    summary = open_one.get_by_label("note summary")
    expect(summary).to_be_visible(timeout=WAIT_MS)
    summary.fill("typing while it changes")
    y = page.evaluate("scrollY")
    project = world.projects[target_index % 3]
    marked = module_claude.run("mark", "stale", target, "--reason", "replaced", "--project", project)
    assert marked.returncode == 0, marked.stderr
    expect(li.locator(".chip.stale")).to_have_text("stale: replaced", timeout=WAIT_MS)
    assert abs(page.evaluate("scrollY") - y) < 2
    assert open_one.get_by_label("note summary").input_value() == "typing while it changes"
    assert len(shown(page)) >= 200  # nothing reloaded from the top


@pytest.mark.parametrize("width", [760, 1100, 1400, 2560])
def test_every_width_keeps_titles_readable_and_nothing_cut_off(browser, hub, width, tmp_path):
    with hub_page(browser, hub.login_url, width) as pg:
        expect(pg.locator("#rows li").first).to_be_visible(timeout=WAIT_MS)
        pg.wait_for_function("document.querySelectorAll('#rows li .title').length >= 20", timeout=WAIT_MS)
        widths = pg.eval_on_selector_all(
            "#rows li .title", "els => els.slice(0, 20).map(e => e.getBoundingClientRect().width)"
        )
        assert min(widths) >= 110, widths
        assert pg.evaluate("document.documentElement.scrollWidth") <= width  # no sideways scroll
        box = pg.locator("#rows li .resume").first.bounding_box()
        assert box is not None and box["x"] + box["width"] <= width
        path = Path(tmp_path, f"hub-{width}.png")
        pg.screenshot(path=str(path))
        print(f"screenshot: {path}")
