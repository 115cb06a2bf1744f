"""The git worktrees c3async has seen of each project: ``$C3_HOME/checkouts.json``.

A session run in a worktree keeps its transcripts after ``git worktree remove``, but git no
longer lists the folder, and the folder names a project's sessions only if something vouches
for it. The project's own ``.c3`` cannot (a cloned repository can ship one that names any
folder), so what vouches is this file in the user's own home: each worktree git's files listed
(checked both ways, ``paths.linked_worktrees``) while it existed, remembered per project root.
"""

from __future__ import annotations

import msgspec

from ..ground import jsondoc
from ..ground.errors import CorruptDocument
from ..ground.home import c3_home

__all__ = ("remember", "remembered")

MAX_PER_ROOT = 1000  # worktrees remembered for one project (the oldest are forgotten first)


class _Checkouts(msgspec.Struct):
    version: int = 1
    roots: dict[str, list[str]] = msgspec.field(default_factory=dict)


def _path():
    return c3_home() / "checkouts.json"


def remembered(root: str) -> list[str]:
    """The worktrees of ``root`` seen so far (a corrupt file counts as none: it is a memory of
    folders, and the listing goes on without it)."""
    try:
        return list(jsondoc.read(_path(), _Checkouts, _Checkouts).roots.get(root, ()))
    except (OSError, CorruptDocument):
        return []


def remember(root: str, worktrees: list[str]) -> None:
    """Add ``worktrees`` (seen now, verified) to what ``root`` is known to have had."""

    def change(doc: _Checkouts) -> None:
        held = doc.roots.setdefault(root, [])
        held.extend(w for w in worktrees if w not in held)
        del held[:-MAX_PER_ROOT]

    try:
        jsondoc.update(_path(), _Checkouts, _Checkouts, change)
    except (OSError, CorruptDocument):
        pass  # a memory: the next listing tries again
