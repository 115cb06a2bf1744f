"""The runway: when a window Claude Code reports reaches 100 % at the current pace.

Claude Code says how much of a window is used (a percent of the account's limit), not what a
percent costs. The calibration reads it off the record: between two samples of one window
(the same reset) at least ``MIN_GAP_S`` apart, the percent rose by dp while the transcripts
c3async reads spent dc (USD at the table of the moment: tokens weighted by what they cost, the
measure the limits are closest to); the least-squares line through the origin, dp = k * dc,
gives ``k``, percent points per USD. It rests on ``MIN_INTERVALS`` such intervals at least, with
a positive slope and a fit explaining ``MIN_FIT`` of the rises (usage this machine does not see,
another computer or claude.ai on the same account, breaks it); otherwise there is no runway, and
the reason says why. A percent that went backwards within one window is left out of the fit (more than one in ten
intervals: the record is not to be trusted, and there is no runway).

The runway of a window reported now: its percent brought forward from its last sample with
what was spent since (``k`` times it), and the pace of the last quarter hour (``burn.PACE_S``)
in points per hour; 100 % is reached ``(100 - used) / pace`` hours from now, unless the window
resets first.

``runway.json`` (``$C3_HOME/usage/``) keeps the last runways worked out (by ``usage --burn``,
``c3_status(view='usage')``, the Hub, and the servers' accounting every minute), so the status
line, which runs after every response, reads a few hundred bytes instead of the timelines: this
module imports nothing heavy at its top for that reason.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TypeGuard

from .pace import NAME, SAME_RESET_S, VERSION

if TYPE_CHECKING:
    from .burn import Spend, WindowBurn
    from .ratelimits import Sample

__all__ = ("Fit", "Runway", "calibrate", "runway", "save")

MIN_GAP_S = 900.0  # samples closer than a quarter hour: the timeline's rows cannot split them
MIN_INTERVALS = 3
MIN_FIT = 0.75  # of the rises' squares the line explains (half the usage unseen: 0.5)
MAX_INTERVALS = 2000  # the newest: weeks of use


class Fit(NamedTuple):
    """Percent points per USD (``per_usd``; None: no fit, ``reason`` says why), the samples
    and intervals it rests on, and the share of the rises it explains (``fit``, 0-1)."""

    per_usd: float | None
    samples: int
    intervals: int
    fit: float | None
    reason: str | None


class Runway(NamedTuple):
    """One reported window's runway: ``used`` now (estimated), the pace in points per hour,
    when it reaches 100 % (``hits_at``; None: not before its reset, or no pace), or why none."""

    window: str
    resets_at: float
    used: float
    pct_per_hour: float | None
    hits_at: float | None
    fit: Fit
    reason: str | None


def calibrate(samples: list[Sample], window: str, spend: Spend) -> Fit:
    """The fit of ``window``'s samples (oldest first) against ``spend`` (see the docstring)."""
    mine = [s for s in samples if s.window == window]
    pairs: list[tuple[Sample, Sample]] = []
    backwards = 0
    anchor: Sample | None = None
    for s in mine:
        if anchor is None or abs(s.resets_at - anchor.resets_at) > SAME_RESET_S or s.t < anchor.t:
            anchor = s  # another window (a reset) starts afresh
            continue
        if s.t - anchor.t < MIN_GAP_S:
            continue
        if s.used < anchor.used:
            backwards += 1
        else:
            pairs.append((anchor, s))
        anchor = s
    pairs = pairs[-MAX_INTERVALS:]
    sxy = sxx = syy = 0.0
    used = []
    rested: set[float] = set()
    for a, b in pairs:
        dc = spend.between(a.t, b.t)
        dp = b.used - a.used
        if dc <= 0 and dp <= 0:
            continue  # nothing spent, nothing risen: says nothing
        used.append((dc, dp))
        rested.update((a.t, b.t))
        sxy += dc * dp
        sxx += dc * dc
        syy += dp * dp
    n = len(used)
    if not mine:
        return Fit(None, 0, 0, None, "no samples of this window recorded")
    if n < MIN_INTERVALS:
        return Fit(
            None,
            len(rested),
            n,
            None,
            f"{n} interval(s) of {MIN_GAP_S / 60:.0f} minutes or more with usage between samples "
            f"(at least {MIN_INTERVALS} needed)" + (f"; {backwards} went backwards" if backwards else ""),
        )
    if backwards > max(1, n // 10):  # within one window the percent only rises: not Claude Code's record
        return Fit(None, len(rested), n, None, f"the percent went backwards {backwards} times within one window")
    k = sxy / sxx if sxx > 0 else 0.0
    fit = 1.0 - sum((dp - k * dc) ** 2 for dc, dp in used) / syy if syy > 0 else 0.0
    if not (k > 0 and math.isfinite(k)):
        return Fit(None, len(rested), n, None, "the percent did not rise with the usage counted here")
    if fit < MIN_FIT:
        return Fit(
            None,
            len(rested),
            n,
            round(max(fit, 0.0), 3),
            f"the percent follows the usage counted here too loosely (fit {max(fit, 0.0):.2f}): "
            "usage on another computer or claude.ai?",
        )
    return Fit(k, len(rested), n, round(fit, 3), None)


def runway(w: WindowBurn, fit: Fit, spend: Spend, now: float) -> Runway | None:
    """The runway of ``w`` when Claude Code reports it now (None when it does not: absent)."""
    if w.rule != "reported" or w.used is None or w.seen is None or w.end is None:
        return None
    k = fit.per_usd
    if k is None:
        return Runway(w.name, w.end, w.used, None, None, fit, fit.reason)
    used = min(100.0, w.used + k * spend.between(w.seen, now))
    pace = k * w.usd_per_h
    if pace <= 0:
        return Runway(w.name, w.end, round(used, 2), 0.0, None, fit, "no usage in the last 15 minutes")
    hits = now + (100.0 - used) / pace * 3600.0
    if hits >= w.end:
        return Runway(w.name, w.end, round(used, 2), pace, None, fit, "not before the reset at this pace")
    return Runway(w.name, w.end, round(used, 2), pace, hits, fit, None)


def binding(found: list[Runway]) -> Runway | None:
    """The runway that ends first; else the window nearest its limit."""
    hits = [r for r in found if r.hits_at is not None]
    if hits:
        return min(hits, key=lambda r: r.hits_at or 0.0)
    return max(found, key=lambda r: (r.used, r.resets_at), default=None)


def path() -> Path:
    from ..ground.home import c3_home

    return c3_home().joinpath(*NAME)


def save(found: list[Runway], now: float) -> None:
    """Keep the paces for the status line (a cache: a failure costs it the runway, said nowhere)."""
    from ..ground.safefs import write_atomic

    rows = [
        {"window": r.window, "resets_at": r.resets_at, "pct_per_hour": r.pct_per_hour, "samples": r.fit.samples}
        for r in found
        if r.pct_per_hour
    ]
    data = json.dumps({"version": VERSION, "computed": round(now, 3), "runways": rows}).encode()
    try:
        where = path()
        where.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomic(where, data, fsync=False)
    except OSError:
        pass


def _finite(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
