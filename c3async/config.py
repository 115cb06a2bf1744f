"""User settings: ``<project>/.c3/config.json`` over ``$C3_HOME/config.json`` over defaults."""

from __future__ import annotations

from pathlib import Path

import msgspec

from . import safefs
from .errors import DECODE_ERRORS
from .paths import c3_home, project_state

MAX_BYTES = 1 << 20

__all__ = ("Config", "load")


class Config(msgspec.Struct, forbid_unknown_fields=False):
    idle_days: int = 7  # a session with no activity for this long gets the `idle Nd` hint
    # which sessions are kept past Claude Code's cleanup without a keep mark (sessions/keep.py)
    keep: list[str] = msgspec.field(default_factory=lambda: ["noted", "linked"])


def _read(path: Path) -> dict:
    """A config file's object; a missing, linked, special, malformed or too deep one counts as
    empty (a cloned repository's ``.c3/config.json`` must not break anything)."""
    try:
        data = msgspec.json.decode(safefs.read_bytes(path, limit=MAX_BYTES))
    except safefs.UnsafeState as exc:
        safefs.warn_once(exc)
        return {}
    except (OSError, *DECODE_ERRORS):
        return {}
    return data if isinstance(data, dict) else {}


def load(project: str | None = None) -> Config:
    merged = _read(c3_home() / "config.json")
    if project:
        merged.update(_read(project_state(project) / "config.json"))
    try:
        return msgspec.convert(merged, Config)
    except msgspec.ValidationError:
        return Config()
