"""User settings: ``<project>/.c3/config.json`` over ``$C3_HOME/config.json`` over defaults.

A file that is missing, a link, a special file, not JSON, nested too deep or not an object is
ignored (a cloned repository's ``.c3/config.json`` must not break anything), with one warning.
A value of the wrong type or out of range is an error (``ConfigError``) naming the file and the
key: a setting someone wrote must not be silently replaced by its default. A key that is no
setting (a misspelling) is ignored, and named once in a warning with the setting it most likely
means.

``keep`` is the exception to the rule on wrong values: a keep policy that is not one is named in
a warning (with the policy it most likely means) and read as the default, ``marked``, which keeps
more than ``none`` and less than ``all``: an error there would stop the listings, the server and
the hooks from preserving anything, and a typo would then cost what Claude Code deletes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from ..ground import safefs
from ..ground.errors import DECODE_ERRORS, ConfigError, UnsafeState, unknown_keys
from ..ground.home import c3_home
from ..ground.project import Project

MAX_BYTES = 1 << 20
MAX_IDLE_DAYS = 36_500  # a hundred years
# The keep policy (sessions/keep.py applies it): ``marked`` keeps every session someone said
# something about (a note, a stale or unstale mark, a linked task or decision, a snapshot).
KEEP_POLICIES = ("marked", "all", "none")
DEFAULT_KEEP = "marked"
# The list an earlier version took: ``[]`` is ``none``, one holding ``all`` is ``all``, any other
# is ``marked`` (which covers each of these terms).
OLD_KEEP_TERMS = ("noted", "linked", "snapshot", "all")

__all__ = ("KEEP_POLICIES", "Config", "keep_policy", "load")


class Config(msgspec.Struct, forbid_unknown_fields=False):
    idle_days: int = 7  # a session with no activity for this long gets the `idle Nd` hint
    # which sessions are kept past Claude Code's cleanup without a keep mark (sessions/keep.py):
    # always one of KEEP_POLICIES once loaded (``keep_value`` reads what a file says)
    keep: str = DEFAULT_KEEP
    # the MCP server: how many recent sessions `resources/list` offers (Claude Code's `@` menu),
    # and the most bytes of one session's brief
    mcp_resources: int = 50
    brief_bytes: int = 8192
    # more Claude Code config dirs to read (stores/claude_dirs.py); honoured in $C3_HOME/config.json only
    claude_dirs: list[str] = msgspec.field(default_factory=list)


def _read(path: Path) -> dict:
    """A config file's object; a missing, linked, special, malformed or too deep one counts as
    empty (warned once when it exists)."""
    try:
        data = msgspec.json.decode(safefs.read_bytes(path, limit=MAX_BYTES))
    except FileNotFoundError:
        return {}
    except UnsafeState as exc:
        safefs.warn_once(exc)
        return {}
    except (OSError, *DECODE_ERRORS) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        safefs.warn_once(f"ignoring {path}: it is not readable JSON ({why})")
        return {}
    if not isinstance(data, dict):
        safefs.warn_once(f"ignoring {path}: it is not a JSON object")
        return {}
    return data


def _checked(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """The file's settings, each of the right type and range (ConfigError names the first that
    is not); keys that are no setting are named in a warning (once)."""
    if "keep" in data:
        data = {**data, "keep": keep_value(path, data["keep"])}
    strange = unknown_keys(data, Config.__struct_fields__)
    if strange:
        settings = ", ".join(Config.__struct_fields__)
        safefs.warn_once(f"{path}: ignoring {strange}: not a setting (the settings are {settings})")
    try:
        msgspec.convert(data, Config)
    except msgspec.ValidationError as exc:
        text = str(exc)
        where = text.rsplit(" - at `$.", 1)
        key = where[1].rstrip("`").split("[", 1)[0].split(".", 1)[0] if len(where) == 2 else "a setting"
        raise ConfigError(path, key, f"has the wrong type ({where[0]})") from None
    idle = data.get("idle_days")
    if idle is not None and not 1 <= idle <= MAX_IDLE_DAYS:
        raise ConfigError(path, "idle_days", f"must be a whole number of days from 1 to {MAX_IDLE_DAYS}, not {idle}")
    for key, low, high in (("mcp_resources", 0, 1000), ("brief_bytes", 1024, 1 << 20)):
        value = data.get(key)
        if value is not None and not low <= value <= high:
            raise ConfigError(path, key, f"must be a whole number from {low} to {high}, not {value}")
    dirs = data.get("claude_dirs") or ()
    for folder in dirs:
        if not folder or "\x00" in folder or not Path(folder).is_absolute():
            raise ConfigError(
                path, "claude_dirs", f"holds {folder[:80]!r}; give absolute paths of Claude Code config dirs"
            )
    return data


HOME_ONLY = ("claude_dirs",)  # where c3async reads transcripts from: a cloned repository's .c3 has no say


def keep_value(path: Path, value: Any) -> str:
    """The keep policy a file's ``keep`` says: one of KEEP_POLICIES, or the list an earlier
    version took (mapped: see OLD_KEEP_TERMS). Anything else is named in a warning (once) and
    read as the default."""
    if isinstance(value, list) and all(isinstance(term, str) for term in value):
        strange = unknown_keys(value, OLD_KEEP_TERMS)
        if strange:
            safefs.warn_once(
                f"{path}: keep: ignoring {strange}: not a term of the list (the list of an earlier "
                f"version reads as a policy; the policies are {', '.join(KEEP_POLICIES)})"
            )
        known = [term for term in value if term in OLD_KEEP_TERMS]
        if not value:
            return "none"
        return "all" if "all" in known else DEFAULT_KEEP
    if isinstance(value, str) and value in KEEP_POLICIES:
        return value
    if isinstance(value, str):
        shown = unknown_keys([value], KEEP_POLICIES)
    else:  # a number, null, an object, a list holding something else than words
        shown = f"the {type(value).__name__} {msgspec.json.encode(value)[:60].decode('utf-8', 'replace')}"
    safefs.warn_once(
        f"{path}: keep is {shown}, not a policy (the policies are {', '.join(KEEP_POLICIES)}); "
        f"keeping what is {DEFAULT_KEEP}, the default"
    )
    return DEFAULT_KEEP


def keep_policy(project: Project | None = None) -> str:
    """The keep policy alone, never an error: a background pass preserving sessions must not
    stop at a wrong value of another setting."""
    policy = DEFAULT_KEEP
    files = [c3_home() / "config.json"] + ([project.state / "config.json"] if project else [])
    for path in files:
        data = _read(path)
        if "keep" in data:
            policy = keep_value(path, data["keep"])
    return policy


def load(project: Project | None = None) -> Config:
    home = c3_home() / "config.json"
    merged = _checked(home, _read(home))
    if project:
        own = project.state / "config.json"
        theirs = _checked(own, _read(own))
        for key in HOME_ONLY:
            if key in theirs:
                del theirs[key]
                safefs.warn_once(f"{own}: ignoring {key}: it is read from {home} only")
        merged = {**merged, **theirs}
    return msgspec.convert(merged, Config)
