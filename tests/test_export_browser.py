"""A session exported from the Hub's reader and opened in Chromium: the download comes through
the API with the token's header, as an attachment; the page it saves, full of hostile
transcript text, runs nothing and loads nothing (every request the page makes is counted)."""

from __future__ import annotations

from browser import WAIT_MS, expect, hub_page, needs_chromium
from hubproc import Hub
from test_export import HOSTILE, World

from c3async.sessions.export_html import CSP

pytestmark = needs_chromium


def test_the_readers_export_is_a_download_that_runs_and_loads_nothing(claude, browser, tmp_path):
    world = World(claude)
    assert claude.run("sessions", "--project", world.proj).returncode == 0  # registered: the Hub lists it
    with Hub(claude) as hub:
        path = f"/api/sessions/{world.id}/export"
        with hub.client() as c:
            r = c.get(path, params={"format": "html", "project": world.proj})
            assert r.status_code == 200, r.text
            assert r.headers["content-disposition"] == f'attachment; filename="{world.id}.html"'
            assert r.headers["x-content-type-options"] == "nosniff"
            assert r.headers["content-type"] == "text/html; charset=utf-8"
            policies = r.headers.get_list("content-security-policy")
            assert CSP in policies and len(policies) == 2  # its own beside the Hub's: both apply
            md = c.get(path, params={"project": world.proj})
            assert md.headers["content-type"] == "text/markdown; charset=utf-8"
            assert md.headers["content-disposition"] == f'attachment; filename="{world.id}.md"'
            assert c.get(path, params={"format": "pdf"}).status_code == 400
            assert c.get(f"/api/sessions/{'0' * 8}-0000-4000-8000-{'0' * 12}/export").status_code == 404
        with hub.client(auth=False) as c:
            assert c.get(path).status_code == 401
        with hub_page(browser, hub.login_url) as pg:
            li = pg.locator(f'#rows li[data-id="{world.id}"]')
            li.locator(".title").click()
            button = li.locator(".conv-export-html")
            expect(button).to_be_visible(timeout=WAIT_MS)
            with pg.expect_download(timeout=WAIT_MS) as got:
                button.click()
            download = got.value
            assert download.suggested_filename == f"{world.id}.html"
            saved = tmp_path / download.suggested_filename
            download.save_as(saved)
            expect(li.locator(".conv-export-status")).to_have_text(f"saved {world.id}.html")
    assert saved.read_bytes() == r.content

    context = browser.new_context()
    try:
        page = context.new_page()
        requests: list[str] = []
        dialogs: list[str] = []
        page.on("request", lambda req: requests.append(req.url))
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(saved.as_uri())
        page.wait_for_load_state("load")
        assert requests == [saved.as_uri()]  # the page itself, and nothing it names
        assert dialogs == [] and page.evaluate("window.pwned") is None
        assert page.locator("script, img, a, iframe, object, embed, form, link").count() == 0
        prompt = page.locator(".item.user pre").first
        expect(prompt).to_contain_text("<script>window.pwned=1</script><img src=x onerror=alert(1)>")
        expect(prompt).to_contain_text(HOSTILE.split("\n")[1])  # a run of backticks, as text
        # the style sheet applies (its hash is in the policy): a prompt has its border
        assert page.eval_on_selector(".item.user", "e => getComputedStyle(e).borderLeftStyle") == "solid"
        call = page.locator("details.tool").first
        assert not call.evaluate("e => e.open")  # tool calls folded
        call.locator("summary").click()
        expect(call.locator("section.agent pre").first).to_contain_text("Sub prompt <script>")
        assert requests == [saved.as_uri()] and dialogs == []
    finally:
        context.close()
