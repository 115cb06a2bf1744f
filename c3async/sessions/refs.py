"""What a person or an agent typed, turned into one session.

A ref is a full session id or a unique prefix of 4+ characters, found first among the project's
transcripts (every checkout's, removed worktrees' too), then among every other registered
project's, and (for ``show`` and ``resume``, with ``anywhere``) in every folder of Claude Code's
projects folder: ``find`` says which project holds it, and the doors say so when it is not the
one asked for. A prefix that more than one project's sessions start with lists them with their
projects. The session a tool call comes from (the host session) needs no transcript: on its
first turn Claude Code may not have written one yet, and the host identity (the verified
``sessions/<pid>.json`` of the claude ancestor, else ``CLAUDE_CODE_SESSION_ID``) is proof
enough. A session a C3 record says it served counts too.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from ..catalog.listing import is_session_id
from ..catalog.resolve import anywhere as anywhere_matches
from ..catalog.resolve import check_ref, matches
from ..catalog.resolve import resolve as resolve_session
from ..ground.errors import AmbiguousSession, BadArgument, UnknownSession
from ..ground.project import Project, resolve
from ..stores import archive, claude_dirs, records
from .projects import other_projects
from .view import extra_cwds

__all__ = ("CURRENT", "Found", "find", "resolve_ref")

CURRENT = "current"


class Found(NamedTuple):
    """A session a ref names: its full ``id``, the ``project`` it belongs to, and whether that
    is another project than the one asked for (a door says where it was found)."""

    id: str
    project: Project
    elsewhere: bool = False
    listed: bool = True  # a project c3async lists (False: found only in Claude Code's folders)

    def where(self) -> str:
        """What a door says about it: nothing, or which project holds it."""
        return f"session {self.id} is in the project {self.project}" if self.elsewhere else ""


def _cwd_project(cwd: str) -> Project:
    try:
        return resolve(cwd) if os.path.isdir(cwd) else Project(cwd)
    except ValueError:
        return Project(cwd)


def _elsewhere(project: Project, ref: str, anywhere: bool) -> tuple[list[Found], list[str]]:
    """(the sessions other registered projects (and, ``anywhere``, Claude Code's projects
    folder) hold whose id starts with ``ref``, the other registered projects searched)."""
    found: dict[str, Found] = {}
    searched = []
    roots = claude_dirs.roots()
    for other in other_projects(project):
        where, cands = matches(other.root, ref, extra_cwds(other), archive.usable(), roots)
        searched.append(where)
        for c in cands:
            found.setdefault(c.session_id, Found(c.session_id, other, True))
    if anywhere and not found:  # Claude Code's folders, then the archive (kept, deleted there)
        kept = archive.usable()
        for cand, rec in [
            *anywhere_matches(ref, roots=roots),
            *(anywhere_matches(ref, kept) if kept is not None else []),
        ]:
            found.setdefault(cand.session_id, Found(cand.session_id, _cwd_project(rec.cwd or ""), True, False))
    return sorted(found.values()), searched


def find(project: Project, ref: str | None, *, host: str | None = None, anywhere: bool = False) -> Found:
    """The session ``ref`` names, and its project. Empty or ``current``: the host session.
    Raises a C3Error (unknown, ambiguous, malformed) naming what to do."""
    ref = (ref or "").strip(" \t")
    if not ref or ref.lower() == CURRENT:
        if host and is_session_id(host):
            return Found(host.lower(), project)
        raise BadArgument(
            "this call does not come from a Claude Code session that c3async can "
            "identify: give a session id (`c3async sessions` lists them)"
        )
    try:
        return Found(
            resolve_session(project.root, ref, extra_cwds(project), archive.usable(), claude_dirs.roots()).session_id,
            project,
        )
    except UnknownSession as unknown:
        low = check_ref(ref)
        if host and is_session_id(host) and host.lower().startswith(low):
            return Found(host.lower(), project)  # the first turn: no transcript yet, but it is this session
        served = {h for rec in records.load_all(project) for h in rec.host_session_ids if h.startswith(low)}
        if len(served) == 1:
            return Found(served.pop(), project)
        if len(served) > 1:
            raise AmbiguousSession(low, sorted(served)) from None
        others, searched = _elsewhere(project, low, anywhere)
        if len(others) == 1:
            return others[0]
        if others:
            raise AmbiguousSession(low, [f"{f.id} (in {f.project})" for f in others]) from None
        # Say where it was looked for: a typo and a session of an unregistered project read alike.
        folder = ", ".join(str(r.projects) for r in claude_dirs.roots()) if anywhere else None
        raise UnknownSession(low, unknown.project, others=searched, folder=folder) from None


def resolve_ref(project: Project, ref: str | None, *, host: str | None = None) -> str:
    """The full id ``ref`` names in ``project`` (see ``find``; an id only another project holds
    is not this one's, so it is unknown here)."""
    found = find(project, ref, host=host)
    if found.elsewhere:
        raise UnknownSession((ref or "").strip(), project.root, [found.where()])
    return found.id
