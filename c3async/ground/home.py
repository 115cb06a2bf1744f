"""``$C3_HOME``: c3async's own folder (default ``~/.c3``), read from the environment on each call
so a test or a door that sets it is seen at once. The lowest module: the safe file layer asks it
which folder is private. And Claude Code's config home (``config_home``) and its state file
(``claude_json``): the status line asks for them in every window, without the catalog."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

__all__ = ("c3_home", "claude_json", "config_home")

_held: tuple[str | None, str | None, Path] | None = None


def c3_home() -> Path:
    """The folder, made once per value of the variables it depends on (a listing asks thousands
    of times)."""
    global _held
    value, home = os.environ.get("C3_HOME"), os.environ.get("HOME")
    if _held is None or _held[0] != value or _held[1] != home:
        _held = (value, home, Path(value) if value else Path.home() / ".c3")
    return _held[2]


def config_home() -> Path:
    """``$CLAUDE_CONFIG_DIR`` (an empty value counts as unset), else ``~/.claude``; NFC, as Claude Code."""
    value = os.environ.get("CLAUDE_CONFIG_DIR")
    if value:
        return Path(unicodedata.normalize("NFC", value))
    return Path.home() / ".claude"


def claude_json(root: str | os.PathLike[str]) -> Path:
    """Where a config dir's ``.claude.json`` is: inside it when it was named by
    ``CLAUDE_CONFIG_DIR``, beside the home folder for ``~/.claude`` itself."""
    path = Path(root)
    if path == Path.home() / ".claude" and not os.environ.get("CLAUDE_CONFIG_DIR"):
        return Path.home() / ".claude.json"
    return path / ".claude.json"
