"""How long Claude Code keeps a transcript: the effective ``cleanupPeriodDays``, read the way
Claude Code reads it.

At start-up Claude Code deletes every ``projects/*/*.jsonl`` whose mtime is older than
``cleanupPeriodDays`` (default 30, minimum 1). Settings come from the user's
``settings.json`` (in the config home), the project's ``.claude/settings.json`` and
``.claude/settings.local.json``, and the managed settings file, each overriding the one before.
When a settings file does not validate and ``cleanupPeriodDays`` is set explicitly, Claude Code
skips the cleanup: then nothing expires (``days`` is None). We cannot validate Claude Code's
whole schema; a file that is not a JSON object, or a ``cleanupPeriodDays`` that is not a whole
number of at least 1, counts as not validating.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import msgspec

from ..catalog.locate import config_home
from ..ground import memo, safefs
from ..ground.errors import DECODE_ERRORS

__all__ = ("DEFAULT_DAYS", "WARN_DAYS", "Retention", "days_left", "effective", "settings_files")

DEFAULT_DAYS = 30
WARN_DAYS = 7  # an unkept session this close to the cut-off gets the `expires in Nd` hint
MAX_BYTES = 1 << 20
DAY = 86_400
FOREVER_DAYS = 1_000_000  # a longer cleanup period never comes (about 2,700 years)


class Retention(msgspec.Struct):
    days: int | None  # None: Claude Code will not clean up (invalid settings, see above)
    source: str  # the file that set it, "default", or why there is no cleanup


def _managed() -> list[Path]:
    if sys.platform == "darwin":
        return [Path("/Library/Application Support/ClaudeCode/managed-settings.json")]
    if sys.platform == "win32":
        return [Path(os.environ.get("PROGRAMDATA", r"C:\ProgramData"), "ClaudeCode", "managed-settings.json")]
    return [Path("/etc/claude-code/managed-settings.json")]


def settings_files(cwd: str | None, root: str | None = None) -> list[Path]:
    """Claude Code's settings files, lowest precedence first (``root``: the config dir whose
    claude cleans the transcript up; None: the default one)."""
    files = [(Path(root) if root else config_home()) / "settings.json"]
    if cwd:
        files += [Path(cwd, ".claude", "settings.json"), Path(cwd, ".claude", "settings.local.json")]
    return files + _managed()


_memo: dict[tuple, Retention] = memo.kept({})


def effective(cwd: str | None, root: str | None = None) -> Retention:
    """The cleanup period Claude Code started in ``cwd`` (with the config dir ``root``) would use."""
    files = settings_files(cwd, root)
    key = tuple(_stamp(f) for f in files)
    hit = _memo.get(key)
    if hit is not None:
        return hit
    days: int | None = DEFAULT_DAYS
    source = "default"
    explicit = False
    invalid: str | None = None
    for f, stamp in zip(files, key, strict=True):
        if stamp is None:
            continue
        try:
            data = msgspec.json.decode(safefs.read_foreign(f, MAX_BYTES).encode())
        except (OSError, UnicodeError, *DECODE_ERRORS):
            invalid = invalid or f"{f} is not valid JSON"
            continue
        if not isinstance(data, dict):
            invalid = invalid or f"{f} is not a JSON object"
            continue
        if "cleanupPeriodDays" not in data:
            continue
        explicit = True
        value = data["cleanupPeriodDays"]
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # JSON.parse reads 10.0 as the number 10
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            invalid = invalid or f"{f} has an invalid cleanupPeriodDays ({value!r})"
            continue
        days, source = value, os.fspath(f)
    if invalid and explicit:
        days, source = None, f"no cleanup: {invalid}"
    result = Retention(days, source)
    if len(_memo) > 256:
        _memo.clear()
    _memo[key] = result
    return result


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def days_left(mtime: float, retention: Retention, now: float) -> int | None:
    """Whole days until a transcript last written at ``mtime`` is past the cut-off (0: the next
    start of Claude Code deletes it); None when nothing is cleaned up."""
    if retention.days is None or retention.days > FOREVER_DAYS:
        return None  # (a period of 10**400 days would also overflow a float)
    return max(0, math.ceil((mtime + retention.days * DAY - now) / DAY))
