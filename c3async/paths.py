"""Where c3async keeps its files: ``$C3_HOME`` (default ``~/.c3``) and ``<project>/.c3``."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ("c3_home", "default_project", "project_state")


def c3_home() -> Path:
    value = os.environ.get("C3_HOME")
    return Path(value) if value else Path.home() / ".c3"


def default_project() -> str:
    """``CLAUDE_PROJECT_DIR`` (set by Claude Code for MCP servers and hooks), else the cwd."""
    return os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()


def project_state(project: str | os.PathLike[str]) -> Path:
    return Path(project) / ".c3"
