"""The projects the Hub and ``sessions --all`` show: ``$C3_HOME/projects.json``.

A project is its state root (``paths.project_root``): a repository's worktrees are the
repository's project. Entries that earlier versions stored for worktrees fold into their root's
entry when read (the earliest ``added``, the latest ``last_seen``), and the next change to the
file stores it folded."""

from __future__ import annotations

import time

import msgspec

from . import jsondoc
from .paths import c3_home, project_root

__all__ = ("Project", "Registry", "projects", "register")


class Project(msgspec.Struct):
    path: str
    added: float
    last_seen: float = 0.0


class Registry(msgspec.Struct):
    version: int = 1
    projects: list[Project] = msgspec.field(default_factory=list)


def _path():
    return c3_home() / "projects.json"


def projects() -> list[str]:
    """Registered projects, each once by its root, in the order they were added. A corrupt
    registry raises."""
    return [p.path for p in _folded(jsondoc.read(_path(), Registry, Registry).projects)]


def _folded(entries: list[Project]) -> list[Project]:
    """One entry per project root, where the first entry of that root stood."""
    out: dict[str, Project] = {}
    for entry in entries:
        root = project_root(entry.path)
        held = out.get(root)
        if held is None:
            out[root] = Project(path=root, added=entry.added, last_seen=entry.last_seen)
        else:
            held.added = min(held.added, entry.added)
            held.last_seen = max(held.last_seen, entry.last_seen)
    return list(out.values())


def register(project: str) -> None:
    """Add the root of ``project`` to the registry (a no-op when it is there, seen within the
    last hour). A change stores the registry folded (one entry per root)."""
    now = time.time()
    root = project_root(project)

    def change(reg: Registry) -> None:
        reg.projects = _folded(reg.projects)
        for entry in reg.projects:
            if entry.path == root:
                if now - entry.last_seen > 3600:
                    entry.last_seen = now
                return
        reg.projects.append(Project(path=root, added=now, last_seen=now))

    current = jsondoc.read(_path(), Registry, Registry)
    if any(p.path == root and now - p.last_seen <= 3600 for p in current.projects):
        return  # the common case costs one read, no lock
    jsondoc.update(_path(), Registry, Registry, change)
