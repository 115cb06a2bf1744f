"""``$C3_HOME``: c3async's own folder (default ``~/.c3``), read from the environment on each call
so a test or a door that sets it is seen at once. The lowest module: the safe file layer asks it
which folder is private."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ("c3_home",)

_held: tuple[str | None, str | None, Path] | None = None


def c3_home() -> Path:
    """The folder, made once per value of the variables it depends on (a listing asks thousands
    of times)."""
    global _held
    value, home = os.environ.get("C3_HOME"), os.environ.get("HOME")
    if _held is None or _held[0] != value or _held[1] != home:
        _held = (value, home, Path(value) if value else Path.home() / ".c3")
    return _held[2]
