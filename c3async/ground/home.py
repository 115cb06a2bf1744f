"""``$C3_HOME``: c3async's own folder (default ``~/.c3``), read from the environment on each call
so a test or a door that sets it is seen at once. The lowest module: the safe file layer asks it
which folder is private."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ("c3_home",)


def c3_home() -> Path:
    value = os.environ.get("C3_HOME")
    return Path(value) if value else Path.home() / ".c3"
