"""The branches of a project's repository, read from git's files once per listing (no git
process is spawned): loose refs under ``refs/heads``, ``packed-refs``, and the branch each
checkout's ``HEAD`` names.

Git's files are a stranger's input (a cloned repository ships whatever it likes), so every read
is bounded and nothing recurses on their shape:

- ``refs/heads`` is walked with a list of folders still to read, never deeper than
  MAX_REF_DEPTH folders, never past MAX_REFS entries (with the branch lines of ``packed-refs``),
  and a link in it is a name, never a folder to enter;
- ``packed-refs`` is read MiB by MiB, only up to MAX_PACKED_BYTES, keeping the branch lines;
- a ``HEAD`` is read up to MAX_HEAD_BYTES, and the HEADs of at most ``paths.MAX_WORKTREES``
  worktrees; links are followed by the kernel only (a loop ends in ELOOP) and only a regular
  file is opened (``HEAD -> /dev/zero`` is not);
- a name holding a control character is none git makes, and none here.

What cannot be read, or a bound reached, is said in ``Branches.unreadable`` (never raised): the
names are then incomplete, and the sessions view says so on the rows rather than judging which
branches are gone. A ``.git`` that is not there means no repository; one that is there but leads
to none git could read (a loop, a FIFO, a missing git dir, a ``commondir`` naming ``/``) is
unreadable.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ..ground.paths import MAX_WORKTREES, checkout_gitdir, git_common_dir, worktree_entries
from ..ground.safefs import open_regular, pread_all

__all__ = ("MAX_HEAD_BYTES", "MAX_PACKED_BYTES", "MAX_REFS", "MAX_REF_DEPTH", "Branches", "branches", "current_branch")

MAX_REF_DEPTH = 64  # folders in a branch's name (a/b/c is 3): people use a few
MAX_REFS = 100_000  # entries under refs/heads plus branch lines of packed-refs
MAX_PACKED_BYTES = 64 << 20  # a packed-refs of 100,000 refs with tags is ~10 MiB
MAX_HEAD_BYTES = 8 << 10  # "ref: refs/heads/<name>": a loose ref's path is at most 4 KiB
_CHUNK = 1 << 20
_HEAD_REF = "ref: refs/heads/"
_PACKED_HEAD = b" refs/heads/"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class Branches:
    """A repository's local branch names; ``unreadable`` says why they may be incomplete (a file
    of git's that could not be read, or a bound reached), naming the file."""

    names: frozenset[str]
    unreadable: str | None = None


class _Unreadable(Exception):
    """Why git's files could not be read, carried up to ``branches``, which never raises: it
    never leaves this module (so it is not in ``ground.errors``'s tree)."""


def branches(path: str) -> Branches | None:
    """The local branches of the repository at ``path`` (a checkout or a bare repository); None
    when it is not in git. Never raises: what goes wrong is ``unreadable``."""
    names: set[str] = set()
    try:
        common = git_common_dir(path)
        if common is None:
            if not os.path.lexists(os.path.join(path, ".git")):
                return None
            raise _Unreadable(f"{os.path.join(path, '.git')} leads to no git directory that can be read")
        names.update(_head_branches(common))
        _loose(os.path.join(common, "refs", "heads"), names)
        _packed(os.path.join(common, "packed-refs"), names)
    except _Unreadable as exc:
        return Branches(frozenset(names), str(exc))
    except (OSError, ValueError, RuntimeError) as exc:  # ValueError: a NUL; RuntimeError: a loop, a recursion
        return Branches(frozenset(names), f"git's files at {path} could not be read: {exc}")
    return Branches(frozenset(names))


def current_branch(path: str) -> str | None:
    """The branch checked out at ``path`` (None when detached, not a checkout, or unreadable)."""
    gitdir = checkout_gitdir(path)
    if gitdir is None:
        return None
    try:
        return _branch_of(_head_text(os.path.join(gitdir, "HEAD")))
    except (_Unreadable, OSError, ValueError):
        return None


def _open(path: str, limit: int) -> int | None:
    """A descriptor of one of git's files (links followed by the kernel, only a regular file
    opened, never one that would block); None when missing. Unreadable, or larger than
    ``limit``: _Unreadable."""
    try:
        fd, st = open_regular(path, follow=True, lstat_first=True)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise _Unreadable(f"{path} cannot be read: {exc.strerror or exc}") from None
    if st.st_size > limit:
        os.close(fd)
        raise _Unreadable(f"{path} is over {limit:,} bytes: larger than git writes it")
    return fd


def _head_text(path: str) -> str | None:
    """A HEAD's text; None when missing."""
    fd = _open(path, MAX_HEAD_BYTES)
    if fd is None:
        return None
    try:
        return pread_all(fd, 0, MAX_HEAD_BYTES).decode("utf-8", "replace")
    finally:
        os.close(fd)


def _branch_of(head: str | None) -> str | None:
    """The branch a HEAD's text names (None: detached, or not a name git makes)."""
    line = (head or "").split("\n", 1)[0].strip()
    if not line.startswith(_HEAD_REF):
        return None
    name = line[len(_HEAD_REF) :]
    return name if name and not _CONTROL.search(name) else None


def _head_branches(common: str) -> list[str]:
    """The branches the repository's HEAD and its worktrees' HEADs name: such a branch exists
    before its first commit (an unborn branch has no ref yet)."""
    main = _head_text(os.path.join(common, "HEAD"))
    if main is None:
        raise _Unreadable(f"{common} has no HEAD: it is not a repository")
    entries, more = worktree_entries(common)
    if more:
        raise _Unreadable(f"{os.path.join(common, 'worktrees')} holds more than {MAX_WORKTREES:,} worktrees")
    texts = [main, *(_head_text(os.path.join(common, "worktrees", e, "HEAD")) for e in entries)]
    return [b for b in map(_branch_of, texts) if b is not None]


def _loose(heads: str, names: set[str]) -> None:
    """Add the names of the files under ``heads`` (``refs/heads``), folder by folder, without
    recursion; a ``.lock`` is a branch being written, not a branch. ``refs`` or ``refs/heads``
    as a link could lead the walk anywhere (``/``, the home folder): not followed."""
    for folder in (os.path.dirname(heads), heads):
        if os.path.islink(folder):
            raise _Unreadable(f"{folder} is a symlink: not followed")
    todo: list[tuple[str, int]] = [("", 0)]  # (a folder's name relative to heads, its depth)
    seen = 0
    while todo:
        rel, depth = todo.pop()
        try:
            it = os.scandir(os.path.join(heads, rel) if rel else heads)
        except (FileNotFoundError, NotADirectoryError):
            continue  # none (every branch packed), or a folder deleted since it was listed
        with it:
            for entry in it:
                seen += 1
                if seen > MAX_REFS:
                    raise _Unreadable(f"{heads} holds more than {MAX_REFS:,} entries")
                name = f"{rel}/{entry.name}" if rel else entry.name
                if entry.is_dir(follow_symlinks=False):
                    if depth + 1 > MAX_REF_DEPTH:
                        raise _Unreadable(f"{heads} has branches more than {MAX_REF_DEPTH} folders deep")
                    todo.append((name, depth + 1))
                elif not entry.name.endswith(".lock") and not _CONTROL.search(name):
                    names.add(name)


def _packed(path: str, names: set[str]) -> None:
    """Add the branch lines of ``packed-refs`` (``<oid> refs/heads/<name>``), read a MiB at a
    time: a search for the few branch lines among the tags and remotes, no line split."""
    fd = _open(path, MAX_PACKED_BYTES)
    if fd is None:
        return
    try:
        offset, rest, budget = 0, b"", MAX_REFS - len(names)
        while offset < MAX_PACKED_BYTES:
            chunk = os.pread(fd, _CHUNK, offset)
            if not chunk:
                break
            offset += len(chunk)
            data = rest + chunk
            cut = data.rfind(b"\n") + 1
            data, rest = data[:cut], data[cut:]
            if len(rest) > MAX_HEAD_BYTES:
                raise _Unreadable(f"{path} has a line longer than a ref can be")
            budget -= _packed_lines(data, names)
            if budget < 0:
                raise _Unreadable(f"{path} names more than {MAX_REFS:,} branches")
        _packed_lines(rest + b"\n", names)  # a last line without its newline
    finally:
        os.close(fd)


def _packed_lines(data: bytes, names: set[str]) -> int:
    """Add the branches named in ``data`` (whole lines); how many lines named one."""
    found = 0
    i = data.find(_PACKED_HEAD)
    while i >= 0:
        start = data.rfind(b"\n", 0, i) + 1
        end = data.find(b"\n", i)
        if b" " not in data[start:i]:  # the oid, then the name: a peeled "^oid" line has no name
            name = data[i + len(_PACKED_HEAD) : end].decode("utf-8", "replace").rstrip("\r")
            if name and not _CONTROL.search(name):
                names.add(name)
                found += 1
        i = data.find(_PACKED_HEAD, end)
    return found
