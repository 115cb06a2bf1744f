"""``$C3_HOME``: c3async's own folder (default ``~/.c3``), read from the environment on each call
so a test or a door that sets it is seen at once. The lowest module: the safe file layer asks it
which folder is private. And Claude Code's config home (``config_home``) and its state file
(``claude_json``): the status line asks for them in every window, without the catalog.

Each has a text form (``c3_folder``, ``config_folder``, ``claude_json_file``) for the status
line's fast path, which does not import ``pathlib``."""

from __future__ import annotations

import os
import unicodedata

TYPE_CHECKING = False  # typing itself costs the status line 2 ms
if TYPE_CHECKING:
    from pathlib import Path

__all__ = ("c3_folder", "c3_home", "claude_json", "claude_json_file", "config_folder", "config_home")

_held: tuple[str | None, str | None, Path] | None = None


def c3_folder() -> str:
    """``$C3_HOME`` (an empty value counts as unset), else ``~/.c3``."""
    return os.environ.get("C3_HOME") or os.path.join(os.path.expanduser("~"), ".c3")


def c3_home() -> Path:
    """The folder, made once per value of the variables it depends on (a listing asks thousands
    of times)."""
    from pathlib import Path

    global _held
    value, home = os.environ.get("C3_HOME"), os.environ.get("HOME")
    if _held is None or _held[0] != value or _held[1] != home:
        _held = (value, home, Path(c3_folder()))
    return _held[2]


def config_folder() -> str:
    """``$CLAUDE_CONFIG_DIR`` (an empty value counts as unset), else ``~/.claude``; NFC, as Claude Code."""
    value = os.environ.get("CLAUDE_CONFIG_DIR")
    if value:
        return unicodedata.normalize("NFC", value)
    return os.path.join(os.path.expanduser("~"), ".claude")


def config_home() -> Path:
    from pathlib import Path

    return Path(config_folder())


def claude_json_file(root: str | os.PathLike[str]) -> str:
    """Where a config dir's ``.claude.json`` is: inside it when it was named by
    ``CLAUDE_CONFIG_DIR``, beside the home folder for ``~/.claude`` itself."""
    home = os.path.expanduser("~")
    if os.path.normpath(root) == os.path.join(home, ".claude") and not os.environ.get("CLAUDE_CONFIG_DIR"):
        return os.path.join(home, ".claude.json")
    return os.path.join(root, ".claude.json")


def claude_json(root: str | os.PathLike[str]) -> Path:
    from pathlib import Path

    return Path(claude_json_file(root))
