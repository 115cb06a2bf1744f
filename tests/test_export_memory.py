"""``c3async export`` of a 200 MiB transcript holds what a page holds: its peak RSS, read from
the kernel for the export's own process (``stress/bench_export.py`` measures 1 GiB the same way)."""

from __future__ import annotations

import pytest

from stress.bench_export import MiB, export_once, write_big

pytestmark = pytest.mark.process  # about 4 s: 200 MiB written, then exported


def test_a_big_export_stays_within_a_page_of_memory(claude, tmp_path):
    proj = claude.project("app")
    sid, size = write_big(claude.folder(proj), proj, 200 * MiB)
    env = {**claude.env(), "C3_PROJECT": proj}
    rss, _, written = export_once(env, sid, "md", tmp_path / "out.md")
    assert size >= 200 * MiB and written > 10 * MiB
    assert rss < 100 * MiB, f"peak RSS {rss / MiB:.0f} MiB exporting {size / MiB:.0f} MiB"
