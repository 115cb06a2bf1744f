"""Beside the resume command, the Hub's session detail opens the session where one works
(Chromium against the real ``c3async hub``): "Open in VS Code" is a ``vscode://`` link to Claude
Code's extension with the session's id, and "Open a terminal here" starts the terminal (a stand-in
named by ``C3_TERMINAL``) in the session's folder; where there is no terminal to open, no button."""

from __future__ import annotations

import time
from pathlib import Path

from browser import WAIT_MS, expect, hub_page, needs_chromium
from hubproc import Hub

from stress.transcripts import simple_session

pytestmark = needs_chromium

NO_DISPLAY = {"DISPLAY": "", "WAYLAND_DISPLAY": "", "TERMINAL": ""}


def _standin_terminal(tmp_path: Path) -> tuple[Path, Path]:
    """A terminal that writes the folder it was started in (then ends), as the real ones start
    their shell there."""
    out = tmp_path / "opened-in"
    script = tmp_path / "stand in terminal"
    script.write_text(f'#!/bin/sh\npwd > "{out}.tmp" && mv "{out}.tmp" "{out}"\n')
    script.chmod(0o755)
    return script, out


def _detail(pg, sid: str):
    li = pg.locator(f'#rows li[data-id="{sid}"]')
    expect(li).to_be_visible(timeout=WAIT_MS)
    li.locator(".title").click()
    expect(li.locator(".detail h3", has_text="Resume")).to_be_visible(timeout=WAIT_MS)
    return li


def test_open_in_vscode_and_a_terminal_in_the_sessions_folder(claude, browser, tmp_path):
    project = claude.project("app")
    sid = simple_session(claude.folder(project), project, "the one to open")
    assert claude.run("sessions", "--project", project).returncode == 0  # registered
    script, out = _standin_terminal(tmp_path)
    with Hub(claude, env={**NO_DISPLAY, "C3_TERMINAL": f"'{script}'"}) as hub, hub_page(browser, hub.login_url) as pg:
        li = _detail(pg, sid)
        link = li.locator(".open-here a.vscode")
        expect(link).to_have_text("Open in VS Code")
        expect(link).to_have_attribute("href", f"vscode://anthropic.claude-code/open?session={sid}")
        li.get_by_role("button", name="Open a terminal here").click()
        expect(li.locator(".open-here .counts")).to_have_text("terminal opened", timeout=WAIT_MS)
        deadline = time.monotonic() + 20
        while not out.exists():  # the stand-in has run once its file is there
            assert time.monotonic() < deadline, "the terminal never started"
            time.sleep(0.05)
        assert out.read_text().strip() == project
        with hub.client() as c:  # a script's request: no Origin, the token, the state-change header
            headers = {"X-C3-Request": "1"}
            bad = c.post("/api/sessions/not-a-uuid/terminal", json={}, headers=headers)
            assert bad.status_code == 400, bad.text
            unknown = c.post(
                "/api/sessions/00000000-0000-4000-8000-000000000000/terminal",
                json={"project": project},
                headers=headers,
            )
            assert unknown.status_code == 404, unknown.text
            elsewhere = c.post(f"/api/sessions/{sid}/terminal", json={"project": "/etc"}, headers=headers)
            assert elsewhere.status_code == 400 and "unknown project" in elsewhere.text


def test_no_terminal_button_where_none_can_be_opened(claude, browser):
    project = claude.project("app")
    sid = simple_session(claude.folder(project), project, "no display here")
    assert claude.run("sessions", "--project", project).returncode == 0
    with Hub(claude, env={**NO_DISPLAY, "C3_TERMINAL": ""}) as hub, hub_page(browser, hub.login_url) as pg:
        li = _detail(pg, sid)
        expect(li.locator(".open-here a.vscode")).to_be_visible()
        expect(li.locator(".open-here button")).to_have_count(0)
        with hub.client() as c:
            refused = c.post(f"/api/sessions/{sid}/terminal", json={}, headers={"X-C3-Request": "1"})
            assert refused.status_code >= 400 and "C3_TERMINAL" in refused.text, refused.text
