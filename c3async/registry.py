"""The projects the Hub and ``sessions --all`` show: ``$C3_HOME/projects.json``."""

from __future__ import annotations

import time

import msgspec

from . import jsondoc
from .paths import c3_home

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
    """Registered project paths, in the order they were added. A corrupt registry raises."""
    return [p.path for p in jsondoc.read(_path(), Registry, Registry).projects]


def register(project: str) -> None:
    """Add ``project`` to the registry (a no-op when it is there, seen within the last hour)."""
    now = time.time()

    def change(reg: Registry) -> None:
        for entry in reg.projects:
            if entry.path == project:
                if now - entry.last_seen > 3600:
                    entry.last_seen = now
                return
        reg.projects.append(Project(path=project, added=now, last_seen=now))

    current = jsondoc.read(_path(), Registry, Registry)
    if any(p.path == project and now - p.last_seen <= 3600 for p in current.projects):
        return  # the common case costs one read, no lock
    jsondoc.update(_path(), Registry, Registry, change)
