"""``$C3_HOME/usage/runway.json`` as the status line reads it: the pace of each window that the
accounting last calibrated (``usage.runway`` writes it), turned into the time left at that pace.

On the status line's path: the standard library alone (``ground.peek``, ``ground.home``), as
``sessions/statusline`` is. The file is ours but read as untrusted: a link is not followed, it is
bounded, and every value is checked before it is used.
"""

from __future__ import annotations

import json
import math

from ..ground import peek
from ..ground.home import c3_folder

TYPE_CHECKING = False  # typing itself costs the status line 2 ms
if TYPE_CHECKING:
    from typing import TypeGuard

    from .ratelimits import Sample

__all__ = ("FRESH_S", "MAX_FILE", "NAME", "SAME_RESET_S", "VERSION", "left_at_pace")

NAME = ("usage", "runway.json")  # under $C3_HOME
VERSION = 1
MAX_FILE = 64 * 1024
FRESH_S = 600.0  # a runway.json older than this says nothing of the pace now
SAME_RESET_S = 300.0  # as ``limits``: resets this close are one window


def left_at_pace(window: Sample, now: float) -> float | None:
    """Seconds until ``window`` (the status line's binding one, as just reported) reaches 100 %
    at the pace ``runway.json`` holds for it; None when it holds none, is older than
    ``FRESH_S``, or the window resets first."""
    try:
        doc = json.loads(peek.read_below(MAX_FILE, c3_folder(), *NAME))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        return None
    computed = doc.get("computed")
    if not _finite(computed) or not -1.0 <= now - computed <= FRESH_S:
        return None
    rows = doc.get("runways")
    for row in rows[:16] if isinstance(rows, list) else []:
        if not isinstance(row, dict) or row.get("window") != window.window:
            continue
        reset, pace = row.get("resets_at"), row.get("pct_per_hour")
        if not _finite(reset) or not _finite(pace) or pace <= 0 or abs(reset - window.resets_at) > SAME_RESET_S:
            continue
        left = (100.0 - window.used) / pace * 3600.0
        return left if now + left < window.resets_at else None
    return None


def _finite(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
