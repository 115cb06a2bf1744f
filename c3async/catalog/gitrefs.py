"""The branches of a project's repository, read from git's files once per listing (no git
process is spawned): loose refs under ``refs/heads`` and ``packed-refs``."""

from __future__ import annotations

import os
from pathlib import Path

from ..ground.safefs import read_foreign

__all__ = ("branches", "common_dir", "current_branch")


def common_dir(path: str) -> Path | None:
    """The repository's common git dir (shared by all worktrees), or None outside a checkout."""
    dot_git = Path(path) / ".git"
    try:
        if dot_git.is_dir():
            return dot_git
        if not dot_git.is_file():
            # A bare repository (the project of its worktrees) is its own common dir.
            bare = Path(path)
            return bare if (bare / "HEAD").is_file() and (bare / "objects").is_dir() else None
        text = read_foreign(dot_git).strip()
        if not text.startswith("gitdir:"):
            return None
        gitdir = (Path(path) / text[len("gitdir:") :].strip()).resolve()
        commondir = gitdir / "commondir"
        if commondir.is_file():
            return (gitdir / read_foreign(commondir).strip()).resolve()
        return gitdir
    except (OSError, ValueError):  # ValueError: a NUL in a hostile gitdir line
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
    # The branch HEAD names exists even before its first commit (an unborn branch has no ref
    # file yet), in the main checkout and in every worktree.
    for head in [common / "HEAD", *(common / "worktrees").glob("*/HEAD")]:
        try:
            text = read_foreign(head).strip()
        except OSError:
            continue
        if text.startswith("ref: refs/heads/"):
            names.add(text[len("ref: refs/heads/") :])
    try:
        packed = read_foreign(common / "packed-refs", limit=64 << 20)
    except OSError:
        packed = ""
    for line in packed.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].startswith("refs/heads/"):
            names.add(parts[1][len("refs/heads/") :])
    return names


def current_branch(path: str) -> str | None:
    """The branch checked out at ``path`` (None when detached or not a checkout)."""
    dot_git = Path(path) / ".git"
    try:
        if dot_git.is_file():
            text = read_foreign(dot_git).strip()
            head = (Path(path) / text[len("gitdir:") :].strip()).resolve() / "HEAD"
        else:
            head = dot_git / "HEAD"
        ref = read_foreign(head).strip()
    except (OSError, ValueError):  # ValueError: a NUL in a hostile gitdir line
        return None
    return ref[len("ref: refs/heads/") :] if ref.startswith("ref: refs/heads/") else None
