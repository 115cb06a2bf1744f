"""Debian's Chromium (``/usr/bin/chromium``) through Playwright, as ``stress.bench_hub`` and the
Hub's browser tests run it: headless, no sandbox (CI runs as root), nothing in the background."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ("ARGS", "CHROMIUM", "launched", "missing")

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def missing() -> str | None:
    """Why no browser can run here (None: one can)."""
    if not os.path.exists(CHROMIUM):
        return f"no Chromium at {CHROMIUM} (CI installs Debian's chromium package)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed"
    return None


@contextmanager
def launched() -> Iterator[Any]:
    """A running headless Chromium (a Playwright ``Browser``), closed on the way out."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()
