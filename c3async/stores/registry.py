"""The projects the Hub and ``sessions --all`` show: ``$C3_HOME/projects.json``.

A project is its state root (``paths.project_root``): a repository's worktrees are the
repository's project. Entries that earlier versions stored for worktrees fold into their root's
entry when read (the earliest ``added``, the latest ``last_seen``), and the next change to the
file stores it folded.

Only a directory that exists is registered, and only by ``register`` (the MCP server serving it,
or a person listing a directory that has sessions): a typo is never kept. ``forget`` and
``prune`` (the entries whose folder is gone) take entries out again.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import msgspec

from ..ground import clock, jsondoc, stateroot
from ..ground import project as ground_project  # its Project: this module has its own (an entry)
from ..ground.errors import BadArgument, NotFound
from ..ground.home import c3_home
from ..ground.paths import canonical

__all__ = (
    "Project",
    "Registry",
    "entries",
    "forget",
    "missing",
    "projects",
    "prune",
    "register",
    "remember_roots",
    "remembered_roots",
    "rename",
)


class Project(msgspec.Struct):
    path: str
    added: float
    last_seen: float = 0.0
    # the Claude Code roots (config dirs) its sessions were found in: a listing run without the
    # variable that named one still looks there
    roots: list[str] = msgspec.field(default_factory=list)


class Registry(msgspec.Struct):
    version: int = 1
    projects: list[Project] = msgspec.field(default_factory=list)


def path() -> Path:
    return c3_home() / "projects.json"


def entries() -> list[Project]:
    """Every registered project, each once by its root, in the order they were added. A
    corrupt registry raises."""
    return _folded(jsondoc.read(path(), Registry, Registry).projects)


def projects() -> list[str]:
    """Registered projects whose folder exists (see ``missing`` for the others)."""
    return [p.path for p in entries() if not missing(p.path)]


def missing(path: str) -> bool:
    """Is a registered project's folder gone (or no longer a folder)?"""
    try:
        return not os.path.isdir(path)
    except ValueError:  # a NUL in a hand-edited entry
        return True


def _folded(entries: list[Project]) -> list[Project]:
    """One entry per project root, where the first entry of that root stood; a time out of
    range (``ground.clock``) reads as unknown (0), said once."""
    out: dict[str, Project] = {}
    for entry in entries:
        root = ground_project.resolve(entry.path).root  # a hand-edited entry may name a worktree
        added = clock.event(entry.added, "a registered project's time", path()) or 0.0
        seen = clock.event(entry.last_seen, "a registered project's time", path()) or 0.0
        held = out.get(root)
        roots = [r for r in entry.roots if isinstance(r, str)][:MAX_REMEMBERED]
        if held is None:
            out[root] = Project(path=root, added=added, last_seen=seen, roots=roots)
        else:
            held.added = min(held.added, added) if held.added and added else held.added or added
            held.last_seen = max(held.last_seen, seen)
            held.roots += [r for r in roots if r not in held.roots]
    return list(out.values())


MAX_REMEMBERED = 16  # roots one project remembers


def remember_roots(project: ground_project.Project, roots: list[str]) -> None:
    """Note that a registered project's sessions were found in these Claude Code roots (a no-op
    when it knows them all, or is not registered)."""
    root = project.root
    held = next((p for p in entries() if p.path == root), None)
    if held is None or all(r in held.roots for r in roots):
        return

    def change(reg: Registry) -> None:
        reg.projects = _folded(reg.projects)
        for entry in reg.projects:
            if entry.path == root:
                entry.roots = (entry.roots + [r for r in roots if r not in entry.roots])[-MAX_REMEMBERED:]

    jsondoc.update(path(), Registry, Registry, change)


def remembered_roots() -> list[str]:
    """Every root a registered project remembers (see ``Project.roots``)."""
    out: dict[str, None] = {}
    for entry in entries():
        out.update(dict.fromkeys(entry.roots))
    return list(out)


def register(project: ground_project.Project) -> None:
    """Add the root of ``project`` to the registry (a no-op when it is there, seen within the
    last hour). A change stores the registry folded (one entry per root). A project whose folder
    is not an existing directory is refused (BadArgument)."""
    now = time.time()
    root = project.root
    if missing(root):
        raise BadArgument(f"{root} is not a directory: it is not registered")
    stateroot.adopt(root)  # its state is its own .c3 from now on

    def change(reg: Registry) -> None:
        reg.projects = _folded(reg.projects)
        for entry in reg.projects:
            if entry.path == root:
                if now - entry.last_seen > 3600:
                    entry.last_seen = now
                return
        reg.projects.append(Project(path=root, added=now, last_seen=now))

    current = jsondoc.read(path(), Registry, Registry)
    if any(p.path == root and now - p.last_seen <= 3600 for p in current.projects):
        return  # the common case costs one read, no lock
    jsondoc.update(path(), Registry, Registry, change)


def rename(old: str, new: str) -> bool:
    """A project's folder moved: the entry of ``old`` (as stored) becomes ``new``'s, keeping when
    it was added and the roots it remembers (folded into ``new``'s entry when both have one).
    False when ``old`` has no entry (nothing changed)."""
    root, gone = ground_project.resolve(new).root, _key(old)

    def change(reg: Registry) -> bool:
        reg.projects = _folded(reg.projects)
        held = next((e for e in reg.projects if e.path in (old, gone)), None)
        if held is None:
            return False
        held.path = root
        reg.projects = _folded(reg.projects)  # new's own entry, if any, folds with it
        return True

    if missing(root):
        raise BadArgument(f"{root} is not a directory: it is not registered")
    stateroot.adopt(root)
    return jsondoc.update(path(), Registry, Registry, change)


def _key(path: str) -> str:
    """What an entry for ``path`` is stored as: its root when the folder exists, else the path
    made absolute and canonical as far as it goes (a gone folder has no root left)."""
    try:
        return ground_project.resolve(path).root if not missing(path) else canonical(os.path.abspath(path))
    except ValueError:
        return path


def forget(paths: list[str]) -> list[str]:
    """Take these projects out of the registry; returns the entries removed. A path that is no
    entry is a NotFound (nothing is changed)."""
    wanted = {_key(p): p for p in paths}

    def change(reg: Registry) -> list[str]:
        reg.projects = _folded(reg.projects)
        held = {e.path for e in reg.projects}
        unknown = [given for key, given in wanted.items() if key not in held and given not in held]
        if unknown:
            raise NotFound(f"not a registered project: {', '.join(unknown)} (`c3async projects` lists them)")
        gone = [e.path for e in reg.projects if e.path in wanted or e.path in wanted.values()]
        reg.projects = [e for e in reg.projects if e.path not in gone]
        return gone

    return jsondoc.update(path(), Registry, Registry, change)


def prune() -> list[str]:
    """Take out every project whose folder is gone; returns them."""

    def change(reg: Registry) -> list[str]:
        reg.projects = _folded(reg.projects)
        gone = [e.path for e in reg.projects if missing(e.path)]
        reg.projects = [e for e in reg.projects if e.path not in gone]
        return gone

    if not any(missing(e.path) for e in entries()):
        return []
    return jsondoc.update(path(), Registry, Registry, change)
