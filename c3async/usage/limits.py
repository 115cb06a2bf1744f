"""The rate-limit windows Claude Code reported: ``$C3_HOME/usage/rate_limits.jsonl``.

Claude Code tells only its status-line command the account's windows (5-hour and weekly: the
used percentage and the reset time, ``claude-code-usage-facts.md``), and keeps them in memory.
``c3async statusline`` records each sample it sees, a JSON object a line: ``{"t": unix seconds,
"window": "five_hour" | "seven_day" | a per-model weekly key, "used": percent 0-100,
"resets_at": unix seconds}``. A window is then known as Claude Code drew it: it ends at the
reset and began its length before (a later window never reaches back over an earlier one).

The file and its samples are ``ratelimits``' (its writer and its tolerant reader); here, the
windows they draw.
"""

from __future__ import annotations

from typing import NamedTuple

from .ratelimits import Sample, read_samples

__all__ = ("FIVE_HOUR", "LENGTH_S", "SEVEN_DAY", "Sample", "Window", "samples", "windows")

FIVE_HOUR, SEVEN_DAY = "five_hour", "seven_day"
LENGTH_S = {FIVE_HOUR: 5 * 3600.0, SEVEN_DAY: 7 * 86400.0}
SAME_RESET_S = 300.0  # resets this close are one window (the reported time can move a little)


class Window(NamedTuple):
    """A window as Claude Code reported it: ``start`` to ``end`` (the reset), and the last
    sample of it (``used`` percent at ``seen``)."""

    name: str
    start: float
    end: float
    used: float
    seen: float


def samples() -> list[Sample]:
    """The recorded samples in range, oldest first (``ratelimits.read_samples``)."""
    return read_samples()


def windows(name: str, found: list[Sample]) -> list[Window]:
    """The windows ``name`` was reported in, oldest first: samples whose resets lie within
    ``SAME_RESET_S`` of each other are one window, which ends at the reset last reported."""
    length = LENGTH_S.get(name, LENGTH_S[SEVEN_DAY])
    mine = sorted((s for s in found if s.window == name), key=lambda s: (s.resets_at, s.t))
    groups: list[list[Sample]] = []
    for s in mine:
        if groups and s.resets_at - groups[-1][0].resets_at <= SAME_RESET_S:
            groups[-1].append(s)
        else:
            groups.append([s])
    out: list[Window] = []
    for group in groups:
        last = max(group, key=lambda s: s.t)
        start = last.resets_at - length
        if out and start < out[-1].end:
            start = out[-1].end
        out.append(Window(name, start, last.resets_at, last.used, last.t))
    return out
