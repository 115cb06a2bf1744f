"""The rate-limit windows Claude Code reported: ``$C3_HOME/usage/rate_limits.jsonl``.

Claude Code tells only its status-line command the account's windows (5-hour and weekly: the
used percentage and the reset time, ``claude-code-usage-facts.md``), and keeps them in memory.
``c3async statusline`` records each sample it sees, a JSON object a line: ``{"t": unix seconds,
"window": "five_hour" | "seven_day" | a per-model weekly key, "used": percent 0-100,
"resets_at": unix seconds}``. A window is then known as Claude Code drew it: it ends at the
reset and began its length before (a later window never reaches back over an earlier one).

The file is read from its end (``TAIL_BYTES``: its writer keeps it smaller), tolerant: a line
that does not decode, a percent out of 0-100, a time out of range (``ground.clock``), a reset
before its sample or further ahead than the window is long is skipped, and said once.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, NamedTuple

import msgspec

from ..ground import clock, jsonl
from ..ground.home import c3_home
from ..ground.paths import warn_once

__all__ = ("FIVE_HOUR", "LENGTH_S", "SEVEN_DAY", "Sample", "Window", "path", "samples", "windows")

FIVE_HOUR, SEVEN_DAY = "five_hour", "seven_day"
LENGTH_S = {FIVE_HOUR: 5 * 3600.0, SEVEN_DAY: 7 * 86400.0}
TAIL_BYTES = 16 << 20  # about 200,000 samples; the writer rotates long before
SAME_RESET_S = 300.0  # resets this close are one window (the reported time can move a little)


class Sample(msgspec.Struct):
    t: float
    window: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    used: Annotated[float, msgspec.Meta(ge=0, le=100)]
    resets_at: float


class Window(NamedTuple):
    """A window as Claude Code reported it: ``start`` to ``end`` (the reset), and the last
    sample of it (``used`` percent at ``seen``)."""

    name: str
    start: float
    end: float
    used: float
    seen: float


def path() -> Path:
    return c3_home() / "usage" / "rate_limits.jsonl"


def samples() -> list[Sample]:
    """The recorded samples in range, oldest first."""
    where = path()
    batch = jsonl.read_tail(where, Sample, TAIL_BYTES)
    out, bad = [], batch.skipped
    for s in batch.records:
        t = clock.event(s.t, "a rate-limit sample's time", where)
        reset = clock.event(s.resets_at, "a rate-limit reset time", where)
        length = LENGTH_S.get(s.window, LENGTH_S[SEVEN_DAY])  # a per-model weekly: a week
        if t is None or reset is None or not math.isfinite(s.used) or not t - 60 <= reset <= t + length + 60:
            bad += 1
            continue
        out.append(s)
    if bad:
        warn_once(
            f"{where}: {bad} line(s) are not rate-limit samples (a time out of range, a percent out of 0-100, "
            "a reset before its sample or further ahead than its window): skipped",
            key="usage:rate_limits",
        )
    out.sort(key=lambda s: s.t)
    return out


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
