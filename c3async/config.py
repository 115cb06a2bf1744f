"""User settings: ``<project>/.c3/config.json`` over ``$C3_HOME/config.json`` over defaults."""

from __future__ import annotations

from pathlib import Path

import msgspec

from .paths import c3_home, project_state

__all__ = ("Config", "load")


class Config(msgspec.Struct, forbid_unknown_fields=False):
    idle_days: int = 7  # a session with no activity for this long gets the `idle Nd` hint


def _read(path: Path) -> dict:
    try:
        data = msgspec.json.decode(path.read_bytes())
    except (OSError, msgspec.DecodeError):
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
