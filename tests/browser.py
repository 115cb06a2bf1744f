"""What every browser test module starts with: its marker, a skip where Debian's Chromium or
Playwright is missing (``stress.chromium.missing`` says why), Playwright's ``expect``, and how
long it waits.

    from browser import WAIT_MS, expect, needs_chromium

    pytestmark = needs_chromium
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from stress.chromium import missing

__all__ = ("WAIT_MS", "expect", "hub_page", "needs_chromium")

needs_chromium = [pytest.mark.browser, pytest.mark.skipif(missing() is not None, reason=missing() or "")]
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect
WAIT_MS = 15_000


@contextmanager
def hub_page(
    browser, url: str, width: int = 1400, height: int = 900, init_script: str | None = None, **context_args
) -> Iterator:
    """A page of its own browser context at ``url`` (a Hub's login URL), closed afterwards;
    ``context_args`` go to the context (``timezone_id``, ``locale``)."""
    context = browser.new_context(viewport={"width": width, "height": height}, **context_args)
    try:
        page = context.new_page()
        if init_script:
            page.add_init_script(init_script)
        page.goto(url)
        yield page
    finally:
        context.close()
