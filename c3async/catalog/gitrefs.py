"""The branches of a project's repository, read from git's files once per listing (no git
process is spawned): loose refs under ``refs/heads`` and ``packed-refs``."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ("branches", "common_dir")


def common_dir(path: str) -> Path | None:
    """The repository's common git dir (shared by all worktrees), or None outside a checkout."""
    dot_git = Path(path) / ".git"
    try:
        if dot_git.is_dir():
            return dot_git
        if not dot_git.is_file():
            return None
        text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
        if not text.startswith("gitdir:"):
            return None
        gitdir = (Path(path) / text[len("gitdir:"):].strip()).resolve()
        commondir = gitdir / "commondir"
        if commondir.is_file():
            return (gitdir / commondir.read_text(encoding="utf-8").strip()).resolve()
        return gitdir
    except OSError:
        return None


def branches(path: str) -> set[str] | None:
    """Local branch names of the repository at ``path``; None when it is not a git checkout."""
    common = common_dir(path)
    if common is None:
        return None
    names: set[str] = set()
    heads = common / "refs" / "heads"
    for root, _dirs, files in os.walk(heads):
        for name in files:
            if name.endswith(".lock"):
                continue
            names.add(os.path.relpath(os.path.join(root, name), heads).replace(os.sep, "/"))
    try:
        with open(common / "packed-refs", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2 and parts[1].startswith("refs/heads/"):
                    names.add(parts[1][len("refs/heads/"):])
    except OSError:
        pass
    return names
