"""What every browser test module starts with: a skip where Debian's Chromium or Playwright is
missing (``stress.chromium.missing`` says why), Playwright's ``expect``, and how long it waits.

    from browser import WAIT_MS, expect, needs_chromium

    pytestmark = needs_chromium
"""

from __future__ import annotations

import pytest

from stress.chromium import missing

__all__ = ("WAIT_MS", "expect", "needs_chromium")

needs_chromium = pytest.mark.skipif(missing() is not None, reason=missing() or "")
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect
WAIT_MS = 15_000
