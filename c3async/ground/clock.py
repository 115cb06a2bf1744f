"""Times read from outside, made values: one range, checked in one place.

Every time c3async reads from a file, a log, Claude Code's registry, a task store, a transcript
or the file system goes through a helper here before anything compares, stores, converts or
shows it. Then no reader can overflow SQLite's INTEGER (64 bits), ``datetime`` (years 1 to
9999), ``time.gmtime``/``localtime`` (the platform's ``time_t``) or nanosecond arithmetic,
whatever a file holds.

- An **event time**, when something happened (a mark, a heartbeat, a registry status, a task's
  change, a transcript line, a stats row), counts after 1970-01-01 and up to ``AHEAD_S`` past
  now (a year: a clock that was ahead by less is read as written; further ahead is no clock,
  and a time in the future would win every last-wins fold and read live for ever). Before
  1970 is what Windows' ``gmtime`` and ``localtime`` refuse, and 0 is the unknown time of
  c3async's own formats. A value outside that, not a finite number, or not a time at all is
  skipped (``None``), and said once per kind of time, naming the first place it was met.
  Absent (``None``, or ``0``) is not a problem and is not said.
- A **file's modification time** is the file system's to say: ext4 keeps times up to 2446 and
  before 1970, tmpfs any 64-bit nanosecond count. It is clamped to ``0 .. MAX_NS``
  (1970-01-01 .. 2262-04-11: what 64-bit nanoseconds and SQLite hold, and every platform's
  ``gmtime`` shows), said once.
"""

from __future__ import annotations

import math
import os
import time
import types

__all__ = (
    "AHEAD_S",
    "EARLIEST",
    "MAX_NS",
    "clamp_ns",
    "event",
    "event_iso",
    "file_ns",
    "iso_window",
    "latest",
    "parse_iso",
)

EARLIEST = 0.0  # 1970-01-01T00:00:00Z, itself excluded
AHEAD_S = 366 * 86_400.0
MAX_NS = 2**63 - 1  # 2262-04-11T23:47:16Z
_ISO_MAX = 64  # characters: an ISO 8601 time is ~30; a longer string is not one
_datetime: types.ModuleType | None = (
    None  # the module, imported at the first ISO time read (the status line reads none)
)


def latest(now: float | None = None) -> float:
    """The last event time read as one: a year past now."""
    return max(time.time() if now is None else now, EARLIEST) + AHEAD_S


def _shown(value: object) -> str:
    if isinstance(value, int) and value.bit_length() > 128:  # repr of 4,300+ digits raises
        return f"(a {value.bit_length()}-bit integer)"
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _said(what: str, value: object, where: object, key: str | None) -> None:
    from .paths import warn_once  # here: a time in range (the status line's) imports no logging

    day = time.strftime("%Y-%m-%d", time.gmtime(latest()))
    warn_once(
        f"{os.fspath(where) if isinstance(where, os.PathLike) else where}: ignoring {what} {_shown(value)}, "
        f"not a time from 1970-01-01 to {day} (times like it are ignored too)",
        key=f"time:{key or what}",
    )


def event(value: object, what: str, where: object, *, scale: float = 1.0, key: str | None = None) -> float | None:
    """``value`` (seconds since 1970, or units of ``scale`` seconds: 0.001 for milliseconds) as
    epoch seconds when it is an event time in range; None when absent or not one (said once
    per ``key``, by default ``what``, naming ``where``)."""
    if value is None or value == 0:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            seconds = float(value) * scale
        except OverflowError:  # an int beyond any float
            seconds = math.nan
        if EARLIEST < seconds <= latest():  # NaN fails both
            return seconds
    _said(what, value, where, key)
    return None


def parse_iso(text: object) -> float | None:
    """An ISO 8601 time as epoch seconds (a time without a zone is UTC, as transcripts write
    them); None when it is not one. Never raises, whatever ``text`` is; no range is checked."""
    if not isinstance(text, str) or not text or len(text) > _ISO_MAX:
        return None
    global _datetime
    if _datetime is None:
        import datetime

        _datetime = datetime

    try:
        dt = _datetime.datetime.fromisoformat(text)  # "Z" included (Python 3.11)
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=_datetime.UTC)
        return dt.timestamp()
    except (ValueError, OverflowError):
        return None


def event_iso(text: object, what: str, where: object, *, key: str | None = None) -> float | None:
    """An ISO 8601 time read from outside (a transcript's ``timestamp``) as epoch seconds, when
    it is an event time in range; None when absent, unreadable or out of range (said once per
    ``key``, by default ``what``)."""
    if text is None or text == "":
        return None
    seconds = parse_iso(text)
    if seconds is not None and EARLIEST < seconds <= latest():
        return seconds
    _said(what, text, where, key)
    return None


def iso_window(now: float | None = None) -> tuple[str, str]:
    """The event range as ISO 8601 UTC text, for a first test of many times written as
    transcripts write them (``2026-11-01T10:00:00.000Z``): compared as strings, a time in range
    lies after the first and not after the second; what fails is then read by ``event_iso``."""
    return "1970-01-01T00:00:00", time.strftime("%Y-%m-%dT%H:%M:%S.999Z", time.gmtime(latest(now)))


def clamp_ns(ns: int) -> int:
    """Nanoseconds since 1970 within ``0 .. MAX_NS``."""
    return 0 if ns < 0 else MAX_NS if ns > MAX_NS else ns


def file_ns(ns: int, where: object) -> int:
    """A file's ``st_mtime_ns`` as stored and shown: clamped to ``0 .. MAX_NS``, said once."""
    if 0 <= ns <= MAX_NS:
        return ns
    from .paths import warn_once

    how = (
        "is before 1970: read as 1970-01-01"
        if ns < 0
        else "is past 2262-04-11 (what 64-bit nanoseconds hold): read as that"
    )
    warn_once(
        f"{os.fspath(where) if isinstance(where, os.PathLike) else where}: its modification time {how} (files like it too)",
        key="time:mtime",
    )
    return clamp_ns(ns)
