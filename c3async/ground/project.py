"""A project as a value: resolved once, at a door, and handed down to the floors below.

A door turns the folder it was given (``--project``, the cwd, a Hub query, a hook's input) into
a ``Project`` with ``resolve`` (``paths.project_root``: one state root for a repository and its
worktrees); a room below takes what it needs from the value (``root``, ``state``) and never
resolves a path into a project again. A root already resolved (a registry entry, a project of a
listing) becomes a value with ``Project(root)``, which touches nothing on disk.

``state`` is decided by ``stateroot`` where it is read, not frozen at ``resolve``: a root that
becomes writable, or a project found only through Claude Code's folders that c3async starts to
use (``stateroot.adopt``), moves its state folder while a Hub or an MCP server runs, and the first
use of a root in a process folds older state into it (``stateroot``'s docstring). Each read costs
an ``lstat`` of the root and a dictionary look-up.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from . import stateroot
from .paths import project_root

__all__ = ("Project", "resolve")


@dataclass(frozen=True, order=True, slots=True)
class Project:
    """A project: its state root (canonical), the folder its main checkout or only folder is."""

    root: str

    @property
    def state(self) -> Path:
        """Its state folder: ``<root>/.c3``, or its fallback under ``$C3_HOME/state``."""
        return stateroot.state_of(self.root)

    def __str__(self) -> str:
        return self.root  # every message names a project by its root, as before it was a value


def resolve(path: str | os.PathLike[str]) -> Project:
    """The project the folder ``path`` belongs to (a worktree's is its main checkout's)."""
    return Project(project_root(path))
