"""Claude Code's own rate-limit numbers, recorded: ``$C3_HOME/usage/rate_limits.jsonl``.

Claude Code keeps the account's 5-hour and weekly windows (used percent, reset time) in memory
only, and hands them to the status-line command (``rate_limits`` in its stdin JSON); a ``/usage``
snapshot may sit in ``.claude.json`` (``cachedUsageUtilization``, with per-model weeklies). Every
window's status line appends what it saw here, so the numbers outlive the processes.

One JSON object a line: ``{"t": unix seconds, "window": "five_hour" | "seven_day" | a model's
weekly key ("seven_day_opus"...), "used": percent 0-100, "resets_at": unix seconds}``. A line is
written only when a window's numbers differ from its last line (ten windows refreshing write
one), checked again under the log's lock, so processes appending at once never write the same
change twice; and never for older news (``stale``: an idle window still holding the percent of
its last response, below what another window has since seen). Past ``MAX_BYTES`` the log keeps its newest lines (``KEEP_BYTES``), rewritten
under the same lock (appenders open the file only once they hold it). 0600, like all of ours.

Values are Claude Code's, read as untrusted: a percent outside 0-100, a reset that is not in
the window's reach from now (a 5-hour reset 3,000 years away), a key that is no window's name,
are left out. The status line's path is light: ``json`` and ``ground.peek`` read (no
``pathlib``), ``ground.jsonl`` (msgspec) and ``safefs`` are imported only to write a change.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import namedtuple

from ..ground import peek
from ..ground.home import c3_folder, c3_home
from ..ground.peek import pread_all

TYPE_CHECKING = False  # typing itself costs the status line 2 ms
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, NamedTuple

__all__ = (
    "MAX_BYTES",
    "Sample",
    "current",
    "from_snapshot",
    "from_status",
    "is_window",
    "last_samples",
    "log_path",
    "read_samples",
    "record",
    "stale",
)

MAX_BYTES = 4 << 20  # ~50,000 lines: weeks of changes from every window
KEEP_BYTES = 2 << 20  # what a compaction keeps (the newest lines)
TAIL_BYTES = 16 * 1024  # enough of the log's end to hold each window's last line
READ_BYTES = 16 << 20  # what ``usage`` reads of the log's end: its writer keeps it far smaller
SNAPSHOT_KEY = b'"cachedUsageUtilization"'
MAX_SNAPSHOT = 32 << 20  # of a .claude.json (it grows with every project), what is searched for it
SNAPSHOT_BYTES = 64 << 10  # of the snapshot, what is decoded (the /api/oauth/usage body is ~1 KB)
CHUNK = 1 << 20
SPAN_S = {"five_hour": 5 * 3600.0}  # every other window is a week
WEEK_S = 7 * 86_400.0
SLACK_S = 3600.0  # clock skew, and a reset Claude Code has not yet rolled over
SAME_RESET_S = 300.0  # resets this close are one window (the reported time can move a little)
_WINDOW = re.compile(r"five_hour|seven_day(?:_[a-z0-9_]{1,40})?")


if TYPE_CHECKING:

    class Sample(NamedTuple):
        t: float  # when it was seen (unix seconds)
        window: str  # five_hour, seven_day, seven_day_opus...
        used: float  # percent, 0-100
        resets_at: float  # unix seconds

else:
    Sample = namedtuple("Sample", ("t", "window", "used", "resets_at"))  # as above, without typing


LOG = ("usage", "rate_limits.jsonl")  # below $C3_HOME


def log_path() -> Path:
    return c3_home().joinpath(*LOG)


def open_file(path: Path, flags: int) -> int:
    """``safefs.open_file``, imported when first needed: not on the status line's fast path."""
    from ..ground import safefs

    return safefs.open_file(path, flags)


def _open_log(path: Path | None) -> int:
    """The log opened for reading, nothing followed below ``$C3_HOME`` (OSError: none, or refused)."""
    return peek.open_below(c3_folder(), *LOG) if path is None else open_file(path, os.O_RDONLY)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int beyond any float
        return None
    return number if math.isfinite(number) else None


def is_window(value: Any) -> bool:
    """Whether ``value`` names a window Claude Code reports (five_hour, seven_day, seven_day_opus...)."""
    return isinstance(value, str) and _WINDOW.fullmatch(value) is not None


def sample(window: Any, used: Any, resets_at: Any, now: float, t: float | None = None) -> Sample | None:
    """A sample when every value is one a window can hold now, else None."""
    if not is_window(window):
        return None
    pct, reset = _number(used), _number(resets_at)
    if pct is None or reset is None or not 0.0 <= pct <= 100.0:
        return None
    if not now - SLACK_S < reset <= now + SPAN_S.get(window, WEEK_S) + SLACK_S:
        return None
    return Sample(round(now if t is None else t, 3), window, round(pct, 2), round(reset))


def from_status(payload: Any, now: float) -> list[Sample]:
    """The windows of a status-line JSON's ``rate_limits`` (``{five_hour: {used_percentage,
    resets_at}, seven_day: ...}``); none when it has none (an API key, or no response yet)."""
    limits = payload.get("rate_limits") if isinstance(payload, dict) else None
    if not isinstance(limits, dict):
        return []
    out = []
    for window, value in list(limits.items())[:16]:
        if isinstance(value, dict):
            found = sample(window, value.get("used_percentage"), value.get("resets_at"), now)
            if found is not None:
                out.append(found)
    return out


def from_snapshot(path: str, now: float) -> list[Sample]:
    """The windows of a ``/usage`` snapshot in ``.claude.json`` (``cachedUsageUtilization``:
    ``{fetchedAtMs, utilization: {five_hour: {utilization, resets_at: ISO}, seven_day_opus...}}``),
    each timed when it was fetched; none when absent, not one, or not in the file's first
    ``MAX_SNAPSHOT`` bytes. Only the snapshot is decoded, never the whole file."""
    try:
        data = _snapshot_bytes(path)
    except OSError:
        return []
    if data is None:
        return []
    from ..ground.clock import parse_iso

    try:
        cached, _ = json.JSONDecoder().raw_decode(data.decode("utf-8", "replace").lstrip())
    except (ValueError, RecursionError):  # not JSON, or longer than SNAPSHOT_BYTES
        return []
    if not isinstance(cached, dict) or not isinstance(cached.get("utilization"), dict):
        return []
    fetched = _number(cached.get("fetchedAtMs"))
    fetched = fetched / 1000 if fetched is not None and 0 < fetched / 1000 <= now + SLACK_S else None
    if fetched is None:
        return []
    out = []
    for window, value in list(cached["utilization"].items())[:32]:
        if isinstance(value, dict):
            found = sample(window, value.get("utilization"), parse_iso(value.get("resets_at")), now, fetched)
            if found is not None:
                out.append(found)
    return out


def _snapshot_bytes(path: str) -> bytes | None:
    """At most ``SNAPSHOT_BYTES`` of what follows the snapshot's key in ``path`` (the colon
    taken off), searched for a piece at a time; None when no key is followed by a colon. In
    JSON the key's text between two quotes, the first not escaped, then a colon, is a key:
    never a string's inside, where both quotes would be escaped."""
    fd = peek.open_regular(path)
    try:
        size = min(os.fstat(fd).st_size, MAX_SNAPSHOT)
        offset = 0
        while offset < size:
            chunk = pread_all(fd, offset, min(CHUNK, size - offset))
            at = chunk.find(SNAPSHOT_KEY)
            while at >= 0:
                after = pread_all(fd, offset + at + len(SNAPSHOT_KEY), SNAPSHOT_BYTES + 64).lstrip()
                escaped = offset + at > 0 and os.pread(fd, 1, offset + at - 1) == b"\\"
                if after.startswith(b":") and not escaped:
                    return after[1 : SNAPSHOT_BYTES + 1]
                at = chunk.find(SNAPSHOT_KEY, at + 1)
            if offset + len(chunk) >= size or len(chunk) < len(SNAPSHOT_KEY):
                return None
            offset += len(chunk) - len(SNAPSHOT_KEY) + 1  # a key across two pieces is found whole
        return None
    finally:
        os.close(fd)


def _decode(line: bytes, now: float) -> Sample | None:
    try:
        row = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(row, dict):
        return None
    t = _number(row.get("t"))
    if t is None or not 0 < t <= now + SLACK_S:
        return None
    # A line is range-checked against when it was seen: an old line's reset is past now.
    return sample(row.get("window"), row.get("used"), row.get("resets_at"), t, t)


def _lasts(data: bytes, now: float) -> dict[str, Sample]:
    """Each window's last sample in ``data`` (complete lines; a cut first line is skipped)."""
    out: dict[str, Sample] = {}
    for line in data.split(b"\n"):
        found = _decode(line, now) if line else None
        if found is not None:
            out[found.window] = found
    return out


def _tail(fd: int, size: int) -> bytes:
    start = max(0, size - TAIL_BYTES)
    data = pread_all(fd, start, size - start)
    return data[: data.rfind(b"\n") + 1]  # an unterminated last line is a write in flight


def current(now: float, path: Path | None = None) -> dict[str, Sample]:
    """Each window's last recorded sample whose reset is still ahead (a window that reset since
    is gone until Claude Code reports it again)."""
    return {w: s for w, s in last_samples(now, path).items() if s.resets_at > now}


def stale(s: Sample, last: Sample | None) -> bool:
    """Whether ``s`` is older news than ``last`` of its window: an earlier window, or the same
    one used less. Each Claude Code process holds the numbers of its own last response, so an
    idle window refreshing its line reports what a busier one has since outgrown; within a
    window the percent only grows."""
    if last is None:
        return False
    if s.resets_at < last.resets_at - SAME_RESET_S:
        return True
    return abs(s.resets_at - last.resets_at) <= SAME_RESET_S and s.used < last.used


def _changed(samples: list[Sample], lasts: dict[str, Sample]) -> list[Sample]:
    out = []
    for s in samples:
        last = lasts.get(s.window)
        if last is None or ((last.used, last.resets_at) != (s.used, s.resets_at) and not stale(s, last)):
            out.append(s)
    return out


def record(samples: list[Sample], now: float, path: Path | None = None) -> int:
    """Append the samples whose window changed since its last line; returns how many were
    written. Compared first without the lock (nothing changed: nothing imported, nothing
    locked), then again under it. Raises OSError (a full disk, a log that is a link)."""
    if not samples or not _changed(samples, last_samples(now, path)):
        return 0
    from ..ground import jsonl

    path = path or log_path()
    with jsonl.appending(path) as log:
        fresh = _changed(samples, _lasts(_tail(log.fd, log.size), now))
        if not fresh:
            return 0
        if log.size > MAX_BYTES:
            log.size = _compact(path, log.fd, log.size)
        log.write(b"".join(jsonl.encode_line(s._asdict()) for s in sorted(fresh)))
    return len(fresh)


def last_samples(now: float, path: Path | None = None) -> dict[str, Sample]:
    """Each window's last sample, past resets included (what a change is judged against);
    none when there is no log yet, or it is not a regular file of ours."""
    try:
        fd = _open_log(path)
    except OSError:
        return {}
    try:
        return _lasts(_tail(fd, os.fstat(fd).st_size), now)
    except OSError:
        return {}
    finally:
        os.close(fd)


def _compact(path: Path, fd: int, size: int) -> int:
    """Keep the log's newest ``KEEP_BYTES`` of whole lines (we hold its lock); returns its size."""
    from ..ground.safefs import write_atomic

    start = size - KEEP_BYTES
    data = pread_all(fd, start, KEEP_BYTES)
    data = data[data.find(b"\n") + 1 :]
    data = data[: data.rfind(b"\n") + 1]
    write_atomic(path, data, mode=0o600)
    # The descriptor held is the old file's: the caller's write must go to the new one.
    new = open_file(path, os.O_RDWR | os.O_APPEND)
    try:
        os.dup2(new, fd)
    finally:
        os.close(new)
    return len(data)


def read_samples(path: Path | None = None, now: float | None = None) -> list[Sample]:
    """Every sample in the log's last ``READ_BYTES`` (its writer keeps it smaller), oldest first:
    for ``usage`` and its windows. Tolerant: a line that does not decode or is out of range (a
    percent out of 0-100, a reset before its sample or beyond its window's reach) is skipped, a
    log that is a link or cannot be read reads as none; either is said once."""
    import time

    from ..ground.errors import UnsafeState
    from ..ground.paths import warn_once

    path = path or log_path()
    now = time.time() if now is None else now
    try:
        fd = open_file(path, os.O_RDONLY)
    except FileNotFoundError:
        return []
    except (UnsafeState, OSError) as exc:
        warn_once(f"{path}: not read ({exc})", key="usage:rate_limits:open")
        return []
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - READ_BYTES)
        data = pread_all(fd, start, size - start)
    except OSError as exc:
        warn_once(f"{path}: not read ({exc})", key="usage:rate_limits:open")
        return []
    finally:
        os.close(fd)
    lines = data[data.find(b"\n") + 1 if start else 0 : data.rfind(b"\n") + 1].split(b"\n")
    found = [s for line in lines if line and (s := _decode(line, now)) is not None]
    bad = sum(1 for line in lines if line) - len(found)
    if bad:
        warn_once(
            f"{path}: {bad} line(s) are not rate-limit samples (a time out of range, a percent out of 0-100, "
            "a reset before its sample or further ahead than its window): skipped",
            key="usage:rate_limits",
        )
    return sorted(found, key=lambda s: s.t)
