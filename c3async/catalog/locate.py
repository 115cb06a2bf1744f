"""Stage 1: find the Claude Code transcript folders that belong to a project.

Claude Code names a project's folder after the session's cwd: every UTF-16 code unit outside
``[A-Za-z0-9]`` becomes ``-`` (an emoji gives two); a name over 200 units is cut to 200 and a
``-<hash>`` is appended, and that hash differs between the CLI (Bun) and the SDK (Node), so long
names are matched on the 200-unit prefix. Nothing else is accepted: a folder that merely contains
the project's name would resume another project's session.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..ground.home import config_home
from ..ground.paths import canonical, git_common_dir, linked_worktrees
from ..ground.project import resolve
from . import moves

__all__ = (
    "MAX_SLUG_LENGTH",
    "ClaudeRoot",
    "ProjectDirs",
    "claude_roots",
    "config_home",
    "folders_of",
    "locate",
    "project_dirs",
    "projects_root",
    "root_of",
    "same_path",
    "slug",
)

MAX_SLUG_LENGTH = 200
_WINDOWS_ABS = re.compile(r"[A-Za-z]:[\\/]")  # .match: a prefix
_HASH_SUFFIX = re.compile(r"-[0-9a-z]+")  # .fullmatch
_NON_ALNUM = re.compile(r"[^A-Za-z0-9]")


def projects_root() -> Path:
    return config_home() / "projects"


@dataclass(frozen=True, slots=True)
class ClaudeRoot:
    """One of Claude Code's config dirs (what ``CLAUDE_CONFIG_DIR`` names): its transcripts are
    in ``projects/``, its running processes in ``sessions/``. ``default``: the one Claude Code
    uses here when nothing else is said (``$CLAUDE_CONFIG_DIR``, else ``~/.claude``): a session of
    another root resumes with ``CLAUDE_CONFIG_DIR`` set to it."""

    path: Path
    default: bool = False

    @property
    def projects(self) -> Path:
        return self.path / "projects"

    @property
    def sessions(self) -> Path:
        return self.path / "sessions"


MAX_ROOTS = 64  # config dirs read at once: more is a mistake (a list pasted twice, a glob)


def claude_roots(extra: Iterable[str | os.PathLike[str]] = ()) -> tuple[ClaudeRoot, ...]:
    """The default root first, then ``$CLAUDE_CONFIG_DIRS`` (colon-separated), then ``extra``
    (the caller's: settings, roots remembered), each once (by its canonical path), absolute
    paths only, at most MAX_ROOTS. A root that does not exist is kept: it simply holds nothing."""
    default = config_home()
    named = [str(default)]
    named += os.environ.get("CLAUDE_CONFIG_DIRS", "").split(os.pathsep)
    named += [os.fspath(p) for p in extra]
    out: list[ClaudeRoot] = []
    seen: set[str] = set()
    for i, value in enumerate(named):
        if not value or "\x00" in value or not os.path.isabs(value) or len(out) >= MAX_ROOTS:
            continue
        value = unicodedata.normalize("NFC", value)
        try:
            key = canonical(value)
        except (OSError, ValueError):
            continue
        if key not in seen:
            seen.add(key)
            out.append(ClaudeRoot(Path(value), default=i == 0))
    return tuple(out)


def root_of(transcript: str | os.PathLike[str], roots: Iterable[ClaudeRoot]) -> ClaudeRoot | None:
    """The root whose ``projects/<folder>/`` holds ``transcript`` (None: none of them, e.g. the
    archive)."""
    folder = Path(transcript).parent.parent
    return next((r for r in roots if r.projects == folder), None)


def slug(path: str) -> str:
    """Claude Code's folder name for a cwd (before the long-path hash)."""
    path = unicodedata.normalize("NFC", path)
    # Per UTF-16 code unit: a character outside the BMP is two units, so two dashes.
    return "".join(ch if ch.isascii() and ch.isalnum() else ("--" if ord(ch) > 0xFFFF else "-") for ch in path)


def is_windows_path(path: str) -> bool:
    return bool(_WINDOWS_ABS.match(path))


def same_path(recorded: str, wanted: str) -> bool:
    """Is a transcript's recorded cwd this directory? Windows paths compare case-insensitively."""
    if recorded == wanted:
        return True
    if is_windows_path(recorded) or is_windows_path(wanted):
        norm = lambda p: p.replace("/", "\\").rstrip("\\").casefold()  # noqa: E731
        return norm(recorded) == norm(wanted)
    recorded = unicodedata.normalize("NFC", recorded).rstrip("/") or "/"
    if recorded == wanted:
        return True
    try:
        return canonical(recorded) == wanted
    except ValueError:  # a NUL in a transcript's cwd: no folder has that name
        return False


def worktrees(root: str) -> list[str]:
    """Every checkout of the git repository whose state root is ``root`` (the main one first),
    read from git's own files, so that no process is spawned. Only checkouts whose root is
    ``root`` count (each linked worktree is checked both ways, ``paths.linked_worktrees``): a
    ``.git`` a folder ships cannot add another project's folders. Empty outside git."""
    common = git_common_dir(root)
    if common is None:
        return []
    found = [os.path.dirname(common)] if os.path.basename(common) == ".git" else []
    found += linked_worktrees(common)
    return [p for p in found if resolve(p).root == root]


@dataclass(frozen=True, slots=True)
class ProjectDirs:
    """A project's working directories (itself and its worktrees) and the transcript folders found."""

    project: str
    cwds: tuple[str, ...]
    folders: tuple[tuple[Path, str], ...]  # (transcript folder, the cwd it was matched for)


def project_dirs(project: str, extra_cwds: tuple[str, ...] = ()) -> tuple[str, tuple[str, ...]]:
    """The canonical project path and every cwd whose sessions belong to it: its checkouts, the
    folders a person moved into it (``moves``), and ``extra_cwds``."""
    root = canonical(project)
    cwds = [root]
    if not is_windows_path(root):
        for wt in worktrees(root):
            if wt not in cwds:
                cwds.append(wt)
    held = set(cwds)
    moved = [old for cwd in cwds for old in moves.moved_into(cwd)] if moves.load() else []
    for extra in (*moved, *extra_cwds):
        extra = canonical(extra)
        if extra not in held:
            held.add(extra)
            cwds.append(extra)
    return root, tuple(cwds)


def _folders(root: Path, wanted: list[tuple[str, str]], follow: bool = True) -> list[tuple[Path, str]]:
    """(folder, cwd) for each folder in ``root`` whose name is the slug of one of the ``wanted``
    cwds. A symlinked folder is followed (people symlink their Claude config to a dotfiles
    repository); an entry that cannot be examined (a symlink loop, EACCES, a name that vanished)
    costs that entry only, never the whole listing. Only matching names are examined. Each name
    is looked up, not compared with every cwd: time grows with folders plus cwds, not their product."""
    found: list[tuple[Path, str]] = []
    try:
        with os.scandir(root) as it:
            entries = list(it)
    except OSError:
        return found  # no projects root (nothing recorded yet), or not a folder
    short: dict[str, str] = {}  # a slug -> the first cwd wanting it (a name matches by its alphanumeric form)
    long: dict[str, str] = {}  # the 200-unit prefix of a long slug -> its cwd
    for want, wanted_cwd in wanted:
        table = long if len(want) > MAX_SLUG_LENGTH else short
        table.setdefault(want[:MAX_SLUG_LENGTH] if table is long else want, wanted_cwd)
    for entry in sorted(entries, key=lambda e: e.name):
        name = entry.name
        cwd: str | None
        # "the exact slug, or an exact alphanumeric match" (another build's separators): a slug
        # holds only letters, digits and "-", so both are a lookup of the name's alphanumeric form
        cwd = short.get(_NON_ALNUM.sub("-", name)) if len(name) <= MAX_SLUG_LENGTH else None
        if cwd is None and len(name) > MAX_SLUG_LENGTH and _HASH_SUFFIX.fullmatch(name[MAX_SLUG_LENGTH:]):
            cwd = long.get(name[:MAX_SLUG_LENGTH])
        if cwd is None:
            continue
        try:
            if entry.is_dir(follow_symlinks=follow):
                found.append((root / entry.name, cwd))
        except OSError:
            pass
    return found


def folders_of(top: Path, cwd: str) -> list[Path]:
    """The folders of one cwd in a projects folder of Claude Code's (a symlinked one followed)."""
    return [folder for folder, _ in _folders(top, [(slug(cwd), cwd)])]


def folders_under(root: Path, cwds: tuple[str, ...]) -> list[tuple[Path, str]]:
    """The folders for these cwds in another tree laid out like Claude Code's projects folder
    (our own state: a symlinked folder there is not followed)."""
    return _folders(root, [(slug(cwd), cwd) for cwd in cwds], follow=False)


def locate(project: str, extra_cwds: tuple[str, ...] = (), roots: Iterable[ClaudeRoot] | None = None) -> ProjectDirs:
    """Find the transcript folders of ``project`` and its worktrees in the ``projects/`` folder
    of every Claude Code root (``roots``; None: ``claude_roots()``)."""
    project_path, cwds = project_dirs(project, extra_cwds)
    wanted = [(slug(cwd), cwd) for cwd in cwds]
    folders = [f for r in (claude_roots() if roots is None else roots) for f in _folders(r.projects, wanted)]
    return ProjectDirs(project=project_path, cwds=cwds, folders=tuple(folders))
