"""Every project c3async can list, from the first command: the registered ones (c3async serves
them, or a person listed or marked them) and those Claude Code has sessions of that nobody
registered, found from the cwd the sessions of each transcript folder recorded
(``catalog.discover``, in every Claude Code root). A found project is listed, never written to:
what a listing keeps of it lives under ``$C3_HOME/state`` (``stateroot.found_only``) until c3async
is used there. A project whose folder is gone is listed as missing, its sessions still shown.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from ..catalog import discover, moves
from ..catalog.locate import ClaudeRoot
from ..catalog.scan import ProjectScan, scan_projects_sync
from ..ground import memo, safefs, stateroot
from ..ground.errors import C3Error
from ..ground.paths import canonical
from ..ground.project import Project, resolve
from ..ground.safefs import stamp
from ..stores import checkouts, claude_dirs, registry

__all__ = (
    "KnownProject",
    "ProjectOverview",
    "known_projects",
    "learn_from",
    "listed_projects",
    "other_projects",
    "project_overview",
    "projects_signature",
)


class KnownProject(msgspec.Struct):
    path: str
    registered: bool  # in ``$C3_HOME/projects.json`` (else found through Claude Code's folders)
    missing: bool  # its folder is gone: its sessions are still listed
    folders: list[str] = msgspec.field(default_factory=list)  # Claude Code's folders that named it


_roots_of: dict[tuple[str, bool], str] = memo.kept({})  # (cwd, whether it was a folder) -> its project


def _project_of(cwd: str) -> tuple[str, bool]:
    """(the project a session cwd belongs to, whether that folder is gone)."""
    here = os.path.isdir(cwd)
    key = (cwd, here)
    root = _roots_of.get(key)
    if root is None:
        try:
            root = resolve(cwd).root if here else canonical(cwd)
        except (OSError, ValueError):
            root = cwd
        if len(_roots_of) > 4096:
            _roots_of.clear()
        _roots_of[key] = root
    return root, not here


def known_projects(roots: tuple[ClaudeRoot, ...] | None = None, *, save: bool = True) -> list[KnownProject]:
    """The registered projects (in the order they were added), then the found ones (by path).
    ``save``: keep what discovery learnt (see ``discover.cwds_of_folders``)."""
    moved = bool(moves.load())
    # an entry of a folder a person moved (``projects --move``) is the new folder's project now
    entries = [e for e in registry.entries() if not (moved and moves.renamed(e.path))]
    out = {e.path: KnownProject(e.path, True, registry.missing(e.path)) for e in entries}
    # A gone worktree of a registered project is that project's (its sessions are listed there).
    covered = {w: e.path for e in entries for w in checkouts.remembered(e.path)}
    found: dict[str, KnownProject] = {}
    for folder, cwds in discover.cwds_of_folders(claude_dirs.roots() if roots is None else roots, save=save).items():
        for cwd in cwds:
            path, gone = _project_of((moves.renamed(cwd) or cwd) if moved else cwd)  # a folder a person moved
            if gone:
                owner = covered.get(cwd) or next((p for p in out if cwd.startswith(p.rstrip(os.sep) + os.sep)), None)
                path = owner or path
            held = out.get(path) or found.get(path)
            if held is None:
                held = found[path] = KnownProject(path, False, gone and not os.path.isdir(path))
            if str(folder) not in held.folders:
                held.folders.append(str(folder))
    stateroot.found_only(p.path for p in found.values())
    return [*out.values(), *sorted(found.values(), key=lambda p: p.path)]


def projects_signature() -> tuple:
    """What moves when a project is registered, forgotten or moved, or Claude Code makes a
    folder for a new cwd, cheaply (a few stats): a watcher lists the projects again when it
    moved. It misses what listings learn on the way (a remembered worktree, a cwd discovered in
    a folder that already existed): a watcher lists again now and then for those."""
    roots = claude_dirs.roots()
    return (
        stamp(registry.path()),
        stamp(moves.path()),
        tuple((str(r.path), stamp(r.projects, follow=True)) for r in roots),
    )


def _names_a_folder(path: str) -> bool:
    """An absolute path that could name a folder (a hand-edited registry entry may hold a NUL)."""
    return "\x00" not in path and os.path.isabs(path)


def listed_projects() -> list[Project]:
    """What ``--all`` and the Hub list: every known project, missing ones included (their
    sessions stay), but not a registry entry whose path can name no folder."""
    return [Project(p.path) for p in known_projects() if _names_a_folder(p.path)]


def other_projects(project: Project | None = None) -> list[Project]:
    """The listed projects but ``project``, for a command about one project that looks at the
    others too (its burn's share of the account's window, an id searched elsewhere): a registry
    that cannot be read is said once and leaves the others out, never failing that command."""
    try:
        return [p for p in listed_projects() if p != project]
    except C3Error as exc:
        safefs.warn_once(exc)
        return []


def learn_from(scans: list[ProjectScan]) -> None:
    """Tell discovery about the other directories' sessions a listing met in its folders."""
    seen: dict[Path, set[str]] = {}
    for scan in scans:
        for folder, cwds in scan.other_cwds.items():
            seen.setdefault(folder, set()).update(cwds)
    if seen:
        discover.learn(seen)


class ProjectOverview(msgspec.Struct):
    """A project as ``c3async projects`` shows it: ``registered`` (else found through Claude
    Code's folders), ``missing`` (its folder is gone; its sessions are still listed), how many
    sessions the catalog lists and when the newest was active."""

    path: str
    name: str
    registered: bool
    missing: bool
    sessions: int
    last_activity: str | None
    added: float | None  # registered projects: when they were added, and last seen
    last_seen: float | None
    # a missing project: the existing one it plausibly moved to (the same project id or git root
    # commit), and why; ``c3async projects --move path moved_to`` makes its sessions that one's
    moved_to: str | None = None
    moved_why: str | None = None
    moved_from: list[str] = msgspec.field(default_factory=list)  # folders moved into it (--move)


def project_overview() -> list[ProjectOverview]:
    """Every known project with its counts (from the catalog's cache: no joins), and where each
    missing one plausibly moved (``moves.suggestions``)."""
    from . import moves as moved
    from .view import extra_cwds

    known = known_projects()
    entries = {e.path: e for e in registry.entries()}
    paths = [p.path for p in known if _names_a_folder(p.path)]
    gone = {p.path for p in known if p.missing}
    guesses = moved.suggestions([p for p in paths if p not in gone], [p for p in paths if p in gone])
    roots = claude_dirs.roots()
    listed = [Project(p) for p in paths]
    scans = {
        s.project.root: s
        for s in scan_projects_sync(listed, processes=False, roots=roots, extra_cwds={p: extra_cwds(p) for p in listed})
    }
    out = []
    for p in known:
        scan = scans.get(p.path)
        sessions = scan.sessions if scan is not None else []
        newest = max((s.record.last_activity or "" for s in sessions), default="")
        entry = entries.get(p.path)
        guess = guesses.get(p.path)
        out.append(
            ProjectOverview(
                path=p.path,
                name=os.path.basename(p.path.rstrip("/")) or p.path,
                registered=p.registered,
                missing=p.missing,
                sessions=len(sessions),
                last_activity=newest or None,
                added=entry.added if entry is not None else None,
                last_seen=entry.last_seen if entry is not None else None,
                moved_to=guess.new if guess is not None else None,
                moved_why=guess.why if guess is not None else None,
                moved_from=list(moves.moved_into(p.path)),
            )
        )
    return out
