"""The rate-limit windows Claude Code reported: ``$C3_HOME/usage/rate_limits.jsonl``.

Claude Code tells only its status-line command the account's windows (5-hour and weekly: the
used percentage and the reset time, ``claude-code-usage-facts.md``), and keeps them in memory.
``c3async statusline`` records each sample it sees, a JSON object a line: ``{"t": unix seconds,
"window": "five_hour" | "seven_day" | a per-model weekly key, "used": percent 0-100,
"resets_at": unix seconds}``. A window is then known as Claude Code drew it: it ends at the
reset and began its length before (a later window never reaches back over an earlier one).

A usage-limit refusal a transcript recorded is Claude Code's word too: the window it names is
full (the API refuses at 100 %) until the reset it gives. ``samples`` counts each as a sample
of 100 % at its time, so a window that refused is known (its reset, its percent) even where no
status line recorded it.

The file and its samples are ``ratelimits``' (its writer and its tolerant reader); here, the
windows they draw.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from .ratelimits import SAME_RESET_S, Sample, read_samples, sample
from .reader import Refusal

__all__ = ("FIVE_HOUR", "LENGTH_S", "SEVEN_DAY", "Sample", "Window", "samples", "windows")

FIVE_HOUR, SEVEN_DAY = "five_hour", "seven_day"
LENGTH_S = {FIVE_HOUR: 5 * 3600.0, SEVEN_DAY: 7 * 86400.0}


class Window(NamedTuple):
    """A window as Claude Code reported it: ``start`` to ``end`` (the reset), and the last
    sample of it (``used`` percent at ``seen``)."""

    name: str
    start: float
    end: float
    used: float
    seen: float


def samples(refused: Iterable[Refusal] = ()) -> list[Sample]:
    """The recorded samples in range (``ratelimits.read_samples``), with a sample of 100 % for
    each refusal of ``refused`` that names its window and reset, oldest first."""
    found = read_samples()
    full = [s for r in refused if (s := refused_sample(r)) is not None]
    return sorted(found + full, key=lambda s: s.t) if full else found


def refused_sample(r: Refusal) -> Sample | None:
    """A refusal as a sample: its window at 100 % at its time (None: it named no window or reset)."""
    if r.window is None or r.resets_at is None:
        return None
    return sample(r.window, 100.0, r.resets_at, r.t, r.t)


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
