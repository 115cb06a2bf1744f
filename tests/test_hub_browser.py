"""The Hub page in a real Chromium (Playwright, sync API) against the real ``c3async hub``.

Chromium is Debian's (``/usr/bin/chromium``, which ``.ci/run``'s environment installs); the tests
skip, saying so, where it is missing. Screenshots go to pytest's tmp_path; their paths are printed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from browser import expect, needs_chromium
from hubproc import NOW, Hub, hub_session, sandbox_world, sessions_ids, wait_for

pytestmark = needs_chromium

OLD = NOW - timedelta(days=30)
XSS = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
# A prompt that *starts* with a lowercase tag is not a typed prompt (Claude Code skips those too).
PROMPT_XSS = "look at this: " + XSS
WAIT_MS = 10_000  # this module's own, shorter than browser.WAIT_MS


def _session(folder: Path, cwd: str, prompts: list[str], **kw) -> str:
    return hub_session(folder, cwd, prompts, answer=lambda i, p: f"answer {i}: {p[:40]}", **kw)


class World:
    def __init__(self, claude) -> None:
        self.claude = claude
        g = self.gamma = claude.project("gamma")
        fg = claude.folder(g)
        three = ["Add the endpoint", "Write its tests", "Update the docs"]
        self.long_prompts = (
            ["Rewrite the parser with error recovery"]
            + [f"Parser step {i}: handle the next construct" for i in range(2, 10)]
            + ["Now document the grammar"]
        )
        self.long = _session(fg, g, self.long_prompts, title="Parser rewrite")
        self.hinted = _session(fg, g, ["needle-browser: fix the flaky login test"], start=OLD)
        self.hinted2 = _session(
            fg, g, ["Tweak the CSS", "and the footer"], title="Old CSS tweaks", start=OLD - timedelta(days=1)
        )
        self.noted = _session(fg, g, ["Look at the cache"], title="Cache look", start=OLD - timedelta(days=2))
        self.xss_title = _session(
            fg, g, [PROMPT_XSS, "second prompt", "last " + XSS], title="title " + XSS, start=OLD - timedelta(days=3)
        )
        self.xss_prompt = _session(fg, g, [PROMPT_XSS], start=OLD - timedelta(days=4))
        self.xss_marked = _session(
            fg, g, ["Harmless prompt"], title="Marked with a payload", start=OLD - timedelta(days=5)
        )
        self.tomark = _session(fg, g, three, title="Session to mark stale in the page")
        self.fromcli = _session(fg, g, three, title="Session marked from the CLI")
        d = self.delta = claude.project("delta")
        fd = claude.folder(d)
        self.d1 = _session(fd, d, three, title="Delta feature work")
        self.d2 = _session(fd, d, ["Old delta idea"], start=OLD)
        claude.sessions(g)  # registers the projects
        claude.sessions(d)
        for args in (
            ("note", self.noted, "--summary", "looked, nothing to do"),
            ("stale", self.xss_marked, "--reason", "reason " + XSS),
            ("note", self.xss_marked, "--summary", "note " + XSS),
        ):
            proc = claude.run("mark", args[0], "--project", g, *args[1:])
            assert proc.returncode == 0, proc.stderr
        self.all_ids = {
            self.long,
            self.hinted,
            self.hinted2,
            self.noted,
            self.xss_title,
            self.xss_prompt,
            self.xss_marked,
            self.tomark,
            self.fromcli,
            self.d1,
            self.d2,
        }


@pytest.fixture(scope="module")
def world(module_claude) -> World:
    return World(module_claude)


class Page:
    """A fresh context and page, with console errors and page errors collected."""

    def __init__(self, browser, hub) -> None:
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page = self.context.new_page()
        self.hub = hub
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.listings: list[str] = []  # /api/rows responses (the listing's pages), in order
        self.page.on("response", lambda r: self.listings.append(r.url) if "/api/rows?" in r.url else None)

    def open(self) -> None:
        """Open the URL ``c3async hub`` printed, as a user does: the page keeps the token and
        leaves ``/`` in the address bar."""
        self.page.goto(self.hub.login_url)
        expect(self.page.locator("#rows li").first).to_be_visible(timeout=WAIT_MS)

    def row(self, sid: str):
        return self.page.locator(f'#rows li[data-id="{sid}"]')

    def ids(self) -> set[str]:
        return set(self.page.eval_on_selector_all("#rows li", "els => els.map(e => e.dataset.id)"))

    def wait_ids(self, want: set[str]) -> None:
        deadline = time.monotonic() + WAIT_MS / 1000
        while self.ids() != want:
            if time.monotonic() > deadline:
                assert self.ids() == want
            self.page.wait_for_timeout(50)

    def wait_listings(self, since: int, count: int) -> None:
        """Until ``count`` more listing responses came after the ``since``-th, then a render."""
        deadline = time.monotonic() + WAIT_MS / 1000
        while len(self.listings) < since + count:
            assert time.monotonic() < deadline, f"no reload: {self.listings[since:]}"
            self.page.wait_for_timeout(50)
        self.page.wait_for_timeout(300)

    def shot(self, tmp_path: Path, name: str, **kwargs) -> Path:
        path = tmp_path / f"{name}.png"
        self.page.screenshot(path=str(path), **kwargs)
        print(f"screenshot: {path}")
        return path


@pytest.fixture
def page(browser, hub):
    p = Page(browser, hub)
    try:
        yield p
    finally:
        p.context.close()


def _api_rows(hub, **params) -> list[dict]:
    with hub.client() as c:
        r = c.get("/api/sessions", params=params)
        assert r.status_code == 200, r.text
        return r.json()["rows"]


def test_page_loads_and_shows_one_row_per_session(page, hub, world, tmp_path):
    page.open()
    page.wait_ids(world.all_ids)
    rows = _api_rows(hub)
    assert page.ids() == sessions_ids(rows)
    # sorted by last activity, newest first, as the API says
    shown = page.page.eval_on_selector_all("#rows li", "els => els.map(e => e.dataset.id)")
    activity = {r["id"]: r["last_activity"] or r["mtime"] for r in rows}
    assert [activity[i] for i in shown] == sorted((activity[i] for i in shown), reverse=True)
    li = page.row(world.long)
    expect(li.locator(".title")).to_have_text("Parser rewrite")
    expect(li.locator(".project")).to_have_text("gamma")
    expect(li.locator(".resume")).to_be_visible()
    expect(page.page.locator("#progress")).to_have_text(f"{len(world.all_ids)} sessions")
    rail = page.page.locator("#projects button")
    expect(rail).to_have_text(["All projects", "gamma", "delta"])
    page.shot(tmp_path, "list")
    assert page.errors == []  # no CSP violation, no script error


TOKEN_KEY = "c3async-hub-token"


def _storage(pg) -> dict:
    return pg.evaluate(
        "(() => { const o = {}; for (let i = 0; i < localStorage.length; i++) "
        "o[localStorage.key(i)] = localStorage.getItem(localStorage.key(i)); return o; })()"
    )


def test_the_printed_url_lets_the_browser_in_and_leaves_no_token_behind(page, hub, world):
    page.open()
    page.wait_ids(world.all_ids)
    assert page.page.url == hub.url + "/"  # the token is gone from the address bar
    assert page.page.evaluate("window.history.length") == 2  # a blank tab, then "/" (replaced in place)
    assert hub.token not in page.page.content()
    assert page.page.evaluate("document.cookie") == "" and page.context.cookies() == []
    assert page.page.evaluate("document.querySelector('meta[name=\"c3-token\"]')") is None
    assert _storage(page.page) == {TOKEN_KEY: hub.token}  # this origin's storage: the port is part of it
    page.page.reload()  # the kept token is enough from now on
    page.wait_ids(world.all_ids)
    other = page.context.new_page()  # and so it is for a new tab on the bare address
    other.goto(hub.url + "/")
    expect(other.locator(f'#rows li[data-id="{world.long}"]')).to_be_visible(timeout=WAIT_MS)
    assert other.url == hub.url + "/"
    assert page.errors == []


def test_without_the_token_the_page_says_how_to_get_in(page, hub, world, tmp_path):
    page.page.goto(hub.url + "/")
    page.page.wait_for_url(hub.url + "/welcome", timeout=WAIT_MS)
    expect(page.page.locator("h1")).to_have_text("c3async Hub")
    text = page.page.locator("body").inner_text()
    assert "c3async hub" in text and "?token=" in text and "not this Hub" not in text
    assert page.page.locator("#rows").count() == 0 and page.page.locator("script").count() == 0
    for secret in (world.gamma, "gamma", "delta", "Parser rewrite", world.long):
        assert secret not in page.page.content()
    page.shot(tmp_path, "welcome")
    page.page.goto(hub.url + "/?token=not-the-token")
    expect(page.page.locator("body")).to_contain_text("not this Hub")
    assert page.context.cookies() == [] and _storage(page.page) == {}
    # the API answers nothing without the token, whatever the page's script tries (cookies included)
    status = page.page.evaluate("fetch('/api/sessions', {credentials: 'include'}).then(r => r.status)")
    assert status == 401
    # the only console errors are the refusals themselves (403 for the wrong token, 401 for the fetch)
    assert all("status of 401" in e or "status of 403" in e for e in page.errors), page.errors


def test_a_restarted_hub_asks_for_its_new_url(browser, world):
    """The token kept for a stopped Hub is not its successor's (each start makes a new one): the
    page forgets it and says how to get in; the new URL lets it in again."""
    first = Hub(world.claude).start()
    p = Page(browser, first)
    second = None
    try:
        p.open()
        port = first.port
        first.stop()
        second = Hub(world.claude, "--port", str(port)).start()  # the same origin, a new token
        assert second.port == port and second.token != first.token
        # the change stream, cut off, opens again with the old token: refused
        p.page.wait_for_url(f"{second.url}/welcome?refused=1", timeout=WAIT_MS)
        expect(p.page.locator("body")).to_contain_text("not this Hub")
        assert _storage(p.page) == {}
        p.hub = second
        p.open()
        p.wait_ids(world.all_ids)
        assert _storage(p.page) == {TOKEN_KEY: second.token}
    finally:
        p.context.close()
        first.stop()
        if second is not None:
            second.stop()


def test_a_page_of_another_port_gets_no_token(page, hub, world):
    """A page another server serves on another loopback port, visited directly and through a
    link from another site, while the Hub's page is open in the same browser: it receives no
    cookie and no token, reads none, and nothing it got opens the API
    (``stress/hostile_credential.py`` runs that server as another account)."""
    from stress.hostile_credential import Neighbour, received, replays, visit

    page.open()
    page.wait_ids(world.all_ids)
    neighbour = Neighbour(hub.url)
    try:
        visit(page.context.new_page(), neighbour)
    finally:
        requests = neighbour.stop()
    assert [r["path"] for r in requests if r["method"] == "GET" and r["path"] != "/favicon.ico"] == [
        "/",
        "/link",
        "/?via=link",
    ]
    reports = [json.loads(r["body"]) for r in requests if r["path"] == "/report"]
    assert reports == [{"cookie": "", "local": {}, "session": {}}] * 2
    assert [r for r in requests if any(k.lower() == "cookie" for k, _ in r["headers"])] == []
    values = received(requests)
    assert values and not [v for v in values if hub.token in v]
    tried, let_in = replays(hub.url, values, "Parser rewrite")
    assert tried and let_in == []
    page.page.get_by_role("button", name="Stale", exact=True).click()  # the Hub's page works on
    page.wait_ids({r["id"] for r in _api_rows(hub, filter="stale")})
    assert page.errors == []


def test_two_hubs_in_one_browser_keep_their_own_tokens(browser, world, hub):
    """Origins differ by port: each page keeps its own Hub's token, and neither sees the other's."""
    other = Hub(world.claude).start()
    p = Page(browser, hub)
    try:
        p.open()
        q = p.context.new_page()
        q.goto(other.login_url)
        expect(q.locator(f'#rows li[data-id="{world.long}"]')).to_be_visible(timeout=WAIT_MS)
        p.page.reload()
        p.wait_ids(world.all_ids)
        assert _storage(p.page) == {TOKEN_KEY: hub.token}
        assert _storage(q) == {TOKEN_KEY: other.token}
        assert p.context.cookies() == []
        assert p.errors == []
    finally:
        p.context.close()
        other.stop()


def test_open_logs_the_browser_in_through_its_private_file(browser, world, tmp_path):
    """``hub --open`` hands the browser a 0600 file that sends it on to the printed URL: the page
    keeps the token as from the URL itself, and the address bar ends at ``/``."""
    seen = tmp_path / "argv.txt"
    fake = tmp_path / "fake-browser"
    fake.write_text(f"#!{sys.executable}\nimport sys\nopen({str(seen)!r}, 'w').write(sys.argv[1])\n")
    fake.chmod(0o700)
    h = Hub(world.claude, "--open", env={"BROWSER": f"{fake} %s", "DISPLAY": ""}).start()
    p = Page(browser, h)
    try:
        uri = wait_for(lambda: seen.exists() and seen.read_text())
        assert uri.startswith("file://") and h.token not in uri
        p.page.goto(uri)
        p.page.wait_for_url(h.url + "/", timeout=WAIT_MS)
        p.wait_ids(world.all_ids)
        assert _storage(p.page) == {TOKEN_KEY: h.token} and p.context.cookies() == []
        assert p.errors == []
    finally:
        p.context.close()
        h.stop()


def test_rail_chooses_one_project(page, world):
    page.open()
    page.page.locator(f'#projects button[data-project="{world.delta}"]').click()
    page.wait_ids({world.d1, world.d2})
    expect(page.row(world.d1).locator(".project")).to_have_text("")
    page.page.locator('#projects button[data-project=""]').click()
    page.wait_ids(world.all_ids)


def test_rows_rail_and_detail_show_tokens_and_cost(page, world, tmp_path):
    """The Hub's own accountant counts every registered project at start: each reply here is
    14,658 tokens at $0.0269805 (tests/transcripts.py's usage, opus 4.5). The rows refresh when
    it writes, so the figures appear without a reload whenever the page was opened."""
    page.open()
    expect(page.row(world.d1).locator(".tokens")).to_have_text("44k", timeout=WAIT_MS)  # 3 replies
    expect(page.row(world.d1).locator(".cost")).to_have_text("$0.08")
    expect(page.row(world.long).locator(".tokens")).to_have_text("147k")  # 10 replies
    expect(page.row(world.long).locator(".cost")).to_have_text("$0.27")
    rail = page.page.locator("#projects li")
    expect(
        rail.filter(has=page.page.locator(f'button[data-project="{world.delta}"]')).locator(".rail-usage")
    ).to_have_text("59k tok · $0.11")  # d1 + d2: 4 replies
    expect(rail.filter(has=page.page.locator('button[data-project=""]')).locator(".rail-usage")).to_have_text(
        "425k tok · $0.78"
    )  # every session of both projects: 29 replies
    expect(page.page.locator("#projects button")).to_have_text(["All projects", "gamma", "delta"])
    li = page.row(world.d1)
    li.locator(".title").click()
    expect(li.locator(".detail h3", has_text="Tokens and cost")).to_be_visible(timeout=WAIT_MS)
    expect(li.locator(".usage-detail")).to_contain_text(
        "input 9 · output 84 · cache write 9,888 · cache read 33,993 · total 43,974 tokens · cost $0.08"
    )
    page.shot(tmp_path, "tokens-and-cost")
    assert page.errors == []


def test_likely_stale_filter_shows_only_hinted_unmarked_rows(page, hub, world, tmp_path):
    page.open()
    page.wait_ids(world.all_ids)
    page.page.get_by_role("button", name="Likely stale").click()
    want = {r["id"] for r in _api_rows(hub) if r["hints"] and not r["marked"]}
    assert {world.hinted, world.hinted2, world.d2} <= want
    assert not {world.long, world.noted, world.xss_marked, world.tomark} & want
    page.wait_ids(want)
    for sid in want:
        chips = page.row(sid).locator(".chip")
        assert chips.count() >= 1
        assert page.row(sid).locator(".chip.stale").count() == 0
    expect(page.page.locator('#filters button[data-filter="likely"]')).to_have_class("on")
    page.shot(tmp_path, "filter-likely")
    page.page.get_by_role("button", name="Stale", exact=True).click()
    page.wait_ids({r["id"] for r in _api_rows(hub, filter="stale")})
    page.page.get_by_role("button", name="All", exact=True).click()
    page.wait_ids(world.all_ids)


def test_typing_in_the_search_box_narrows_the_list(page, world):
    page.open()
    page.wait_ids(world.all_ids)
    box = page.page.locator("#search")
    box.press_sequentially("needle-brow", delay=20)
    page.wait_ids({world.hinted})
    box.fill("")
    box.press_sequentially("delta", delay=20)  # titles and prompts, not the project name
    page.wait_ids({world.d1, world.d2})
    box.fill(world.tomark[:12])  # ids too
    page.wait_ids({world.tomark})
    box.fill("")
    page.wait_ids(world.all_ids)


def test_expanding_a_row_shows_prompts_turns_and_resume(page, world, tmp_path):
    page.open()
    li = page.row(world.long)
    detail = li.locator(".detail")
    expect(detail).to_be_hidden()
    li.locator(".title").click()
    expect(detail).to_be_visible()
    expect(detail.locator("h3", has_text="Last turns")).to_be_visible(timeout=WAIT_MS)
    pres = detail.locator("pre")
    expect(pres.nth(0)).to_have_text(world.long_prompts[0])
    expect(pres.nth(1)).to_have_text(world.long_prompts[-1])
    turns = detail.locator(".turn")
    expect(turns).to_have_count(8)
    texts = turns.all_text_contents()
    assert texts[0] == "user" + world.long_prompts[6]
    assert texts[-1].startswith("assistant" + "answer 10")
    cmd = f"cd {shlex.quote(world.gamma)} && claude --resume {world.long}"
    expect(detail.locator("code.cmd")).to_have_text(cmd)
    page.shot(tmp_path, "expanded-row", full_page=True)
    li.locator(".title").click()  # collapses
    expect(detail).to_be_hidden()
    li.locator(".resume").click()  # the resume button opens the detail on the command
    expect(detail.locator("code.cmd")).to_have_text(cmd, timeout=WAIT_MS)
    li.scroll_into_view_if_needed()
    page.shot(tmp_path, "resume-command")
    assert page.errors == []


def test_marking_a_row_stale_in_the_page(page, world, tmp_path):
    page.open()
    li = page.row(world.tomark)
    li.locator(".title").click()
    reason = li.get_by_label("stale reason")
    expect(reason).to_be_visible(timeout=WAIT_MS)
    reason.fill("done in the page")
    li.get_by_role("button", name="Mark stale", exact=True).click()
    expect(li.locator(".chip.stale")).to_have_text("stale: done in the page", timeout=WAIT_MS)
    expect(li).to_have_class("row stale")
    page.shot(tmp_path, "marked-stale")
    row = world.claude.rows_by_id(world.gamma)[world.tomark]
    assert row["stale"]["reason"] == "done in the page"
    assert row["stale"]["by"] == "user"


def test_detail_offers_unstale_once_a_row_is_marked_stale(page, world):
    """After "Mark stale" the open detail is the detail of a stale session: it offers Unstale,
    not a second "Mark stale". (One project chosen in the rail, so the list reloads in one piece.)"""
    page.open()
    page.page.locator(f'#projects button[data-project="{world.gamma}"]').click()
    li = page.row(world.hinted2)
    expect(li.locator(".project")).to_have_text("", timeout=WAIT_MS)
    li.locator(".title").click()
    expect(li.get_by_label("stale reason")).to_be_visible(timeout=WAIT_MS)
    li.get_by_label("stale reason").fill("old styling")
    since = len(page.listings)
    li.get_by_role("button", name="Mark stale", exact=True).click()
    expect(li.locator(".chip.stale")).to_have_text("stale: old styling", timeout=WAIT_MS)
    page.wait_listings(since, 1)  # the change event's: the row comes back by id, the counts with it
    assert li.locator(".detail .error").count() == 0
    buttons = {name: li.get_by_role("button", name=name, exact=True).count() for name in ("Unstale", "Mark stale")}
    assert buttons == {"Unstale": 1, "Mark stale": 0}


def test_a_change_elsewhere_keeps_the_rows_and_what_is_typed(page, world):
    """A live update (here: a mark written on another row from a shell) refreshes the rows in
    place: no row drops out meanwhile, and an open detail keeps what the user is typing."""
    page.open()
    page.wait_ids(world.all_ids)
    li = page.row(world.long)
    li.locator(".title").click()
    summary = li.get_by_label("note summary")
    expect(summary).to_be_visible(timeout=WAIT_MS)
    summary.fill("half typed")
    page.page.evaluate("""() => {
        window.__minRows = document.querySelectorAll('#rows li').length;
        new MutationObserver(() => {
            window.__minRows = Math.min(window.__minRows, document.querySelectorAll('#rows li').length);
        }).observe(document.querySelector('#rows'), { childList: true });
    }""")
    since = len(page.listings)
    proc = world.claude.run("mark", "note", world.d1, "--project", world.delta, "--summary", "noted in a shell")
    assert proc.returncode == 0, proc.stderr
    page.wait_listings(since, 1)  # the change event's: the changed row in place, the counts asked again
    seen = {
        "fewest rows meanwhile": page.page.evaluate("window.__minRows"),
        "typed text": li.get_by_label("note summary").input_value(),
    }
    assert page.ids() == world.all_ids
    assert seen == {"fewest rows meanwhile": len(world.all_ids), "typed text": "half typed"}


def test_xss_payloads_render_as_text(page, hub, world, tmp_path):
    page.open()
    rows = {r["id"]: r for r in _api_rows(hub)}
    assert "<img src=x" in rows[world.xss_title]["title"] and "<img src=x" in rows[world.xss_prompt]["title"]
    for sid in (world.xss_title, world.xss_prompt, world.xss_marked):
        li = page.row(sid)
        expect(li.locator(".title")).to_have_text(rows[sid]["title"])
        li.locator(".title").click()
        expect(li.locator(".detail h3", has_text="Resume")).to_be_visible(timeout=WAIT_MS)
    expect(page.row(world.xss_marked).locator(".chip.stale")).to_have_text("stale: reason " + XSS)
    title_detail = page.row(world.xss_title).locator(".detail")
    expect(title_detail.locator("pre").nth(0)).to_have_text(PROMPT_XSS)
    expect(title_detail.locator("pre").nth(1)).to_have_text("last " + XSS)
    expect(title_detail.locator(".turn").first).to_have_text("user" + PROMPT_XSS)
    marked_detail = page.row(world.xss_marked).locator(".detail")
    expect(marked_detail.locator("pre").nth(2)).to_have_text("note " + XSS)
    page.page.wait_for_timeout(300)  # give a payload's onerror a chance to run
    assert page.page.evaluate("typeof window.__pwned") == "undefined"
    assert page.page.locator("img").count() == 0
    assert page.page.locator('img[src="x"]').count() == 0
    scripts = page.page.eval_on_selector_all("script", "els => els.map(e => e.getAttribute('src'))")
    assert scripts == ["/static/app.js", "/static/usage.js"]  # the page's own, nothing injected
    page.shot(tmp_path, "xss", full_page=True)
    assert page.errors == []


def test_a_mark_from_the_cli_appears_without_a_reload(page, world):
    page.open()
    li = page.row(world.fromcli)
    expect(li.locator(".chip.stale")).to_have_count(0)
    page.page.evaluate("window.__sameDocument = 1")
    proc = world.claude.run("mark", "stale", world.fromcli, "--project", world.gamma, "--reason", "marked in a shell")
    assert proc.returncode == 0, proc.stderr
    expect(li.locator(".chip.stale")).to_have_text("stale: marked in a shell", timeout=WAIT_MS)
    assert page.page.evaluate("window.__sameDocument") == 1


def test_the_conversation_reader_shows_text_as_text_and_opens_at_an_offset(browser, tmp_path_factory, tmp_path):
    """Its own sandbox and Hub (the world above is counted by other tests): a session with a
    prompt and a tool output full of HTML, a compaction, a /clear and 60 exchanges."""
    from conftest import Sandbox

    from stress.transcripts import Conversation, write_session

    claude = Sandbox(tmp_path_factory.mktemp("reader"))
    project = claude.project("reader")
    c = Conversation(project, start=NOW - timedelta(hours=2))
    lines: list = [c.permission_mode(), *c.exchange(PROMPT_XSS, "answer " + XSS)]
    lines += c.tool_round("output " + XSS, input={"command": "npm test", "description": "Run the tests"})
    lines += [c.compact_boundary(), c.compact_summary(), c.caveat(), c.clear(), c.local_stdout()]
    for n in range(60):
        lines += c.exchange(f"prompt {n}", f"answer {n}")
    write_session(claude.folder(project), c.id, lines)
    claude.sessions(project)
    hub = Hub(claude).start()
    page = Page(browser, hub)
    try:
        page.open()
        li = page.row(c.id)
        li.locator(".title").click()
        li.locator(".conv-open").click()
        items = li.locator(".conv-items > .conv-item")
        expect(items.first).to_be_visible(timeout=WAIT_MS)
        expect(items).to_have_count(50)
        expect(items.nth(0).locator(".conv-text")).to_have_text(PROMPT_XSS)
        expect(items.nth(1).locator(".conv-text")).to_have_text("answer " + XSS)
        tool = li.locator("details.conv-tool").first
        expect(tool.locator("summary")).to_have_text("Bash: npm test")
        expect(tool.locator(".conv-output")).to_be_hidden()  # collapsed to one line
        tool.locator("summary").click()
        expect(tool.locator(".conv-output")).to_have_text("output " + XSS)
        expect(li.locator(".conv-summary summary")).to_contain_text("compacted")
        expect(li.locator(".conv-clear")).to_have_text("/clear: the context was cleared here")
        li.locator(".conv-later").click()
        expect(items).to_have_count(100)
        li.locator(".conv-later").click()
        expect(items).to_have_count(2 + 1 + 2 + 120)  # everything: 2 + tool + markers + 60 exchanges
        expect(li.locator(".conv-later")).to_be_hidden()
        expect(items.last.locator(".conv-text")).to_have_text("answer 59")
        page.shot(tmp_path, "conversation", full_page=True)
        # a search feature's entry point: open at a byte offset, the item highlighted and in view
        with hub.client() as client:
            found = client.get(f"/api/sessions/{c.id}/conversation", params={"project": project, "limit": 200}).json()[
                "items"
            ]
        target = next(i for i in found if i.get("text") == "prompt 33")
        page.page.evaluate("([p, s, at]) => openConversation(p, s, { at })", [project, c.id, target["offset"] + 9])
        hit = li.locator(".conv-hit")
        expect(hit).to_have_count(1, timeout=WAIT_MS)
        expect(hit.locator(".conv-text")).to_have_text("prompt 33")
        expect(hit).to_be_in_viewport()
        expect(li.locator(".conv-earlier")).to_be_visible()
        page.page.wait_for_timeout(300)  # give a payload's onerror a chance to run
        assert page.page.evaluate("typeof window.__pwned") == "undefined"
        assert page.page.locator("img").count() == 0 and page.page.locator("script").count() == 2  # the page's own
        page.shot(tmp_path, "conversation-at")
        assert page.errors == []
    finally:
        page.context.close()
        hub.stop()


# --- the search mode "in conversations" ---------------------------------------------------------
# Its own sandbox and Hub: a planted phrase in a prompt (with HTML around it), in a sub-agent's
# reply, and in a tool's output (found only with "include tool output"); another project; and 21
# sessions sharing a word (more than the 20 results a search shows at first).

PHRASE = "zebra_quokka_budget"
SEARCH_XSS = '<img src=x onerror="window.__pwned=3">'
PLANTED = f"please look: {SEARCH_XSS} {PHRASE} and fix it"
FILLER = "common_walrus"


class SearchWorld:
    def __init__(self, claude) -> None:
        from stress.transcripts import Conversation, text, tool_use, write_session

        self.claude = claude
        a = self.a = claude.project("searchable")
        fa = claude.folder(a)
        self.prompted = _session(fa, a, ["warm up first", PLANTED, "and wrap up"], title="Budget in a prompt")
        c = Conversation(a, start=NOW - timedelta(hours=3))
        task = tool_use("Task", {"description": "Audit the costs", "prompt": "Audit", "subagent_type": "x"})
        lines: list = [c.permission_mode(), *c.exchange("audit the costs please", "starting an agent"), *c.reply(task)]
        result = c.tool_result(task["id"], "audited")
        result["toolUseResult"] = {"agentId": "5e5e5e", "totalTokens": 1}
        lines.append(result)
        write_session(fa, c.id, [*lines, c.custom_title("Cost audit with an agent")])
        self.agented = c.id
        sub = Conversation(a, c.id, sidechain=True, start=NOW - timedelta(hours=3))
        write_session(
            fa / c.id / "subagents",
            "agent-5e5e5e",
            [sub.prompt("Audit"), *sub.reply(text(f"the {PHRASE} is over by 3%"))],
        )
        self.fillers = {_session(fa, a, [f"{FILLER} number {i}"], start=OLD - timedelta(hours=i)) for i in range(21)}
        b = self.b = claude.project("toolish")
        t = Conversation(b, start=NOW - timedelta(hours=2))
        write_session(
            claude.folder(b),
            t.id,
            [
                t.permission_mode(),
                *t.exchange("run the checks", "running"),
                *t.tool_round(f"checks: {PHRASE} exceeded"),
                t.custom_title("Checks with tool output"),
            ],
        )
        self.tooled = t.id
        claude.sessions(a)  # registers both projects
        claude.sessions(b)


@pytest.fixture(scope="module")
def search_world(tmp_path_factory) -> SearchWorld:
    return sandbox_world(tmp_path_factory, "search", SearchWorld)


@pytest.fixture(scope="module")
def search_hub(search_world):
    with Hub(search_world.claude) as h:
        yield h.indexed()  # the index the Hub builds at start


@pytest.fixture
def search_page(browser, search_hub):
    p = Page(browser, search_hub)
    try:
        p.open()
        p.page.get_by_role("button", name="in conversations").click()
        yield p
    finally:
        p.context.close()


def _results(page) -> list[str]:
    return page.page.eval_on_selector_all("#results > li", "els => els.map(e => e.dataset.session)")


def _wait_results(page, want: set[str]) -> None:
    deadline = time.monotonic() + WAIT_MS / 1000
    while set(_results(page)) != want or page.page.locator("#search-panel.busy").count():
        if time.monotonic() > deadline:
            assert set(_results(page)) == want
        page.page.wait_for_timeout(50)


def test_search_in_conversations_marks_hits_as_text_and_opens_the_reader_there(search_page, search_world):
    page, w, pg = search_page, search_world, search_page.page
    expect(pg.locator("#rows")).to_be_hidden()
    expect(pg.locator("#search-summary")).to_contain_text("Type words")
    expect(pg.get_by_role("button", name="in conversations")).to_have_attribute("aria-pressed", "true")
    expect(pg.locator('#filters button[data-filter="live"]')).to_be_disabled()
    pg.locator("#search").press_sequentially(PHRASE, delay=10)
    _wait_results(page, {w.prompted, w.agented})  # not the tool output
    expect(pg.locator("#search-summary")).to_contain_text("2 sessions match")
    expect(pg.locator("#progress")).to_have_text(re.compile(r"^2 of \d+ sessions \(conversations\)$"))  # agrees
    hit = pg.locator(f'#results > li[data-session="{w.prompted}"]')
    expect(hit.locator(".title")).to_have_text("Budget in a prompt")
    expect(hit.locator(".project")).to_have_text("searchable")
    expect(hit.locator(".branch")).to_have_text("main")
    expect(hit.locator(".hits")).to_have_text("1 hit")
    expect(hit.locator(".age")).to_have_text(re.compile(r"^\d+[smhd] ago$"))
    snippet = hit.locator(".snippet")
    expect(snippet).to_have_count(1)
    expect(snippet.locator(".snip-role")).to_have_text("user")
    expect(snippet.locator("mark")).to_have_text([PHRASE])
    expect(snippet.locator(".snip-text")).to_have_text(PLANTED)  # the HTML as text
    sub = pg.locator(f'#results > li[data-session="{w.agented}"] .snippet')
    expect(sub.locator(".snip-role")).to_have_text("sub-agent assistant")
    expect(sub.locator("mark")).to_have_text([PHRASE])
    pg.wait_for_timeout(300)  # give a payload's onerror a chance to run
    assert pg.evaluate("typeof window.__pwned") == "undefined"
    assert pg.locator("img").count() == 0 and pg.locator("script").count() == 2  # the page's own

    pg.get_by_label("include tool output").check()
    _wait_results(page, {w.prompted, w.agented, w.tooled})
    tool = pg.locator(f'#results > li[data-session="{w.tooled}"]')
    expect(tool.locator(".snip-role")).to_have_text("tool")
    expect(tool.locator(".project")).to_have_text("toolish")
    expect(tool.locator("mark")).to_have_text([PHRASE])
    page.shot(Path("/tmp"), "hub-search")
    pg.locator("#search-role").select_option("user")
    _wait_results(page, {w.prompted})
    pg.locator("#search-role").select_option("")
    _wait_results(page, {w.prompted, w.agented, w.tooled})
    pg.locator(f'#projects button[data-project="{w.b}"]').click()  # the rail's project
    _wait_results(page, {w.tooled})
    pg.locator('#projects button[data-project=""]').click()
    _wait_results(page, {w.prompted, w.agented, w.tooled})

    hit.locator(".resume").click()  # the command, to copy (the clipboard may be refused headless)
    expect(hit.locator("code.cmd")).to_have_text(f"cd {shlex.quote(w.a)} && claude --resume {w.prompted}")
    snippet.click()  # the reader, at the hit
    reader = hit.locator(".result-reader")
    mark = reader.locator(".conv-hit")
    expect(mark).to_have_count(1, timeout=WAIT_MS)
    expect(mark.locator(".conv-text")).to_have_text(PLANTED)
    expect(mark.locator("mark.conv-word")).to_have_text([PHRASE])  # the hit words, marked in the reader
    expect(mark).to_be_in_viewport()
    expect(reader.locator(".conv-item").first.locator(".conv-text")).to_have_text("warm up first")
    page.shot(Path("/tmp"), "hub-search-reader")
    reader.locator(".conv-close").click()
    expect(reader.locator(".conv-item")).to_have_count(0)
    sub.click()  # a hit in a sub-agent's transcript opens that transcript
    reader = pg.locator(f'#results > li[data-session="{w.agented}"] .result-reader')
    expect(reader.locator(".conv-bar")).to_contain_text("sub-agent agent-5e5e5e", timeout=WAIT_MS)
    expect(reader.locator(".conv-hit .conv-text")).to_have_text(f"the {PHRASE} is over by 3%")
    pg.wait_for_timeout(300)
    assert pg.evaluate("typeof window.__pwned") == "undefined" and pg.locator("img").count() == 0
    assert page.errors == []


def test_search_says_what_it_found_and_what_is_wrong(search_page, search_world):
    page, w, pg = search_page, search_world, search_page.page
    box = pg.locator("#search")
    box.fill("!!!")
    box.press("Enter")
    expect(pg.locator("#search-error")).to_contain_text("nothing to search for", timeout=WAIT_MS)
    expect(pg.locator("#results > li")).to_have_count(0)
    box.fill("nosuchword_anywhere")
    box.press("Enter")
    expect(pg.locator("#search-summary")).to_contain_text("No session matches", timeout=WAIT_MS)
    expect(pg.locator("#search-error")).to_be_hidden()
    box.fill(FILLER)
    box.press("Enter")
    expect(pg.locator("#search-summary")).to_contain_text("21 sessions match, showing 20", timeout=WAIT_MS)
    expect(pg.locator("#results > li")).to_have_count(20)
    pg.locator("#search-summary .search-more").click()
    _wait_results(page, w.fillers)
    expect(pg.locator("#search-summary")).to_contain_text("21 sessions match")
    # back to the list: the same words search titles and prompts there
    pg.get_by_role("button", name="titles & notes").click()
    expect(pg.locator("#search-panel")).to_be_hidden()
    page.wait_ids(w.fillers)
    expect(pg.locator('#filters button[data-filter="live"]')).to_be_enabled()
    # the network errors of the refused query are the only console errors
    assert all("status of 400" in e for e in page.errors), page.errors


def test_search_shows_the_index_being_built_and_searches_again_when_done(search_page, search_world):
    """The Hub's answers are rewritten here (a first build is too quick to watch in a sandbox):
    the search says the index is being built (25%), the status says 50% twice, then done."""
    page, w, pg = search_page, search_world, search_page.page
    searches, statuses = [], []

    def on_search(route):
        searches.append(route.request.url)
        response = route.fetch()
        data = response.json()
        if len(searches) == 1:
            data["index"].update(updating=True, done_bytes=25, total_bytes=100)
            data["results"] = data["results"][:1]
            data["total"] = 1
            data["problems"] = ["the search index shard-3.db is damaged: <b>not bold</b>"]
        route.fulfill(response=response, json=data)

    def on_status(route):
        statuses.append(route.request.url)
        busy = len(statuses) <= 2
        route.fulfill(json={"updating": busy, "done_bytes": 50 if busy else 0, "total_bytes": 100 if busy else 0})

    pg.route(re.compile(r"/api/search\?"), on_search)
    pg.route(re.compile(r"/api/search/status$"), on_status)
    box = pg.locator("#search")
    box.fill(PHRASE)
    box.press("Enter")
    note = pg.locator("#search-index")
    expect(note).to_contain_text("Indexing conversations… 25%", timeout=WAIT_MS)
    expect(pg.locator("#results > li")).to_have_count(1)
    expect(pg.locator("#search-problems")).to_have_text(
        "Not everything could be searched: the search index shard-3.db is damaged: <b>not bold</b>"
    )
    expect(note).to_contain_text("Indexing conversations… 50%", timeout=WAIT_MS)
    expect(note).to_be_hidden(timeout=WAIT_MS)
    expect(pg.locator("#search-problems")).to_be_hidden()
    _wait_results(page, {w.prompted, w.agented})  # searched again, with the whole index
    assert len(statuses) == 3 and len(searches) == 2
    pg.wait_for_timeout(1500)
    assert len(statuses) == 3  # no more polling
    assert page.errors == []


# ---------------------------------------------------------------- keeping past Claude Code's cleanup

KEEP_TIP = "Keep past Claude Code's cleanup: the transcript is preserved in c3async's archive"
ARCHIVED_TIP = "Claude Code deleted this transcript; c3async kept it. Resume puts it back."
ORANGE = "rgb(211, 90, 0)"  # --expiring


class KeepWorld:
    """``kappa``: a session to keep in the page (then deleted, as Claude Code's cleanup does), one
    kept by the policy (it has a note), one last written 26 days ago (expires in 4 days), and
    one fresh and unkept."""

    def __init__(self, claude) -> None:
        self.claude = claude
        k = self.kappa = claude.project("kappa")
        self.folder = claude.folder(k)
        three = ["Add the endpoint", "Write its tests", "Update the docs"]
        self.tokeep = _session(self.folder, k, three, title="Design discussion worth keeping")
        self.noted = _session(self.folder, k, three, title="Noted, so kept by the policy")
        self.fresh = _session(self.folder, k, three, title="Fresh work, nothing to keep")
        self.old = _session(self.folder, k, ["Sketch the importer"], title="Old importer sketch")
        when = time.time() - 26 * 86_400
        os.utime(self.transcript(self.old), (when, when))
        claude.sessions(k)  # registers the project
        proc = claude.run("mark", "note", "--project", k, self.noted, "--summary", "the API shape, settled")
        assert proc.returncode == 0, proc.stderr

    def transcript(self, sid: str) -> Path:
        return self.folder / f"{sid}.jsonl"


@pytest.fixture(scope="module")
def keep_world(tmp_path_factory) -> KeepWorld:
    return sandbox_world(tmp_path_factory, "keep", KeepWorld)


@pytest.fixture(scope="module")
def keep_hub(keep_world):
    with Hub(keep_world.claude) as h:
        yield h


@pytest.fixture
def keep_page(browser, keep_hub):
    p = Page(browser, keep_hub)
    try:
        p.open()
        yield p
    finally:
        p.context.close()


def test_keep_in_the_page_then_the_row_comes_from_the_archive(keep_page, keep_world, tmp_path):
    page, w, pg = keep_page, keep_world, keep_page.page
    page.wait_ids({w.tokeep, w.noted, w.fresh, w.old})
    li = page.row(w.tokeep)
    expect(li.locator(".chip.kept")).to_have_count(0)
    noted = page.row(w.noted).locator(".chip.kept")  # the policy keeps what has a note
    expect(noted).to_have_text("kept")
    assert "policy: noted" in noted.get_attribute("title")
    li.locator(".title").click()
    keep = li.get_by_role("button", name="Keep", exact=True)
    expect(keep).to_be_visible(timeout=WAIT_MS)
    assert keep.get_attribute("title") == KEEP_TIP
    keep.click()
    kept = li.locator(".chip.kept")
    expect(kept).to_have_text("kept", timeout=WAIT_MS)
    assert "kept_by: mark" in kept.get_attribute("title")
    expect(li.get_by_role("button", name="Unkeep", exact=True)).to_be_visible(timeout=WAIT_MS)
    expect(li.locator(".kept-by")).to_have_text("kept by a keep mark")
    assert {r["id"]: r["kept_by"] for r in _api_rows(page.hub, project=w.kappa)}[w.tokeep] == "mark"

    w.transcript(w.tokeep).unlink()  # Claude Code's cleanup
    pg.reload()
    li = page.row(w.tokeep)
    chip = li.locator(".chip.archived")
    expect(chip).to_have_text("archived", timeout=WAIT_MS)
    assert chip.get_attribute("title") == ARCHIVED_TIP
    expect(li.locator(".chip.kept")).to_have_count(1)
    li.locator(".title").click()
    expect(li.locator(".detail code.cmd")).to_have_text(
        re.compile(rf"^cd .+ && c3async resume {w.tokeep}$"), timeout=WAIT_MS
    )
    expect(li.locator(".detail .archived-note")).to_contain_text("This command puts it back")
    expect(li.locator(".detail pre").first).to_have_text("Add the endpoint")  # read from the archive
    pg.screenshot(path="/tmp/hub-keep.png")
    # Unkeep of an archived row would delete the only copy left: it asks first (here: Cancel)
    asked: list[str] = []
    pg.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    li.get_by_role("button", name="Unkeep", exact=True).click()
    deadline = time.monotonic() + WAIT_MS / 1000
    while not asked and time.monotonic() < deadline:
        pg.wait_for_timeout(50)
    assert asked and "the only one left" in asked[0]
    archived = Path(w.claude.c3home) / "archive" / w.folder.name / f"{w.tokeep}.jsonl"
    assert archived.is_file()
    expect(li.locator(".chip.archived")).to_have_count(1)
    page.shot(tmp_path, "hub-keep")
    assert page.errors == []


def test_keep_expiring_filter_shows_the_old_session_with_its_orange_chip(keep_page, keep_world, tmp_path):
    page, w, pg = keep_page, keep_world, keep_page.page
    button = pg.locator('#filters button[data-filter="expiring"]')
    expect(button.locator("#expiring-count")).to_have_text("1", timeout=WAIT_MS)
    assert "1 session is deleted by Claude Code's cleanup within a week" in button.get_attribute("title")
    chip = page.row(w.old).locator(".chip.expiring")
    expect(chip).to_have_text("expires in 4d")
    button.click()
    page.wait_ids({w.old})
    expect(button).to_have_class(re.compile(r"\bon\b"))
    chip = page.row(w.old).locator(".chip.expiring")
    expect(chip).to_have_text("expires in 4d")
    assert chip.evaluate("e => getComputedStyle(e).color") == ORANGE
    assert "in 4 days" in chip.get_attribute("title")
    # another filter still counts the expiring rows (from a filter=expiring listing)
    pg.locator('#filters button[data-filter="live"]').click()
    page.wait_ids(set())
    expect(button.locator("#expiring-count")).to_have_text("1")
    pg.locator('#filters button[data-filter="expiring"]').click()
    page.wait_ids({w.old})
    pg.screenshot(path="/tmp/hub-keep-expiring.png")
    page.shot(tmp_path, "hub-keep-expiring")
    assert page.errors == []
