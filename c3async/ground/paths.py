"""Where c3async keeps its files: ``$C3_HOME`` (default ``~/.c3``) and a project's state root.

A project is a directory. Its state lives in ``<project_root(dir)>/.c3``, where the root is:

- a git repository's main checkout, for the main checkout itself and for every worktree of the
  repository (a worktree's ``.git`` file names its gitdir, whose ``commondir`` leads to the
  repository's ``.git``, whose parent is the main checkout). Git's own files are read; no git
  process is spawned;
- a bare repository's own folder (``repo.git``), for the worktrees of a bare repository: it has
  no main checkout, and the repository's folder is the one place all its worktrees share;
- the directory itself in every other case: a folder outside git, a subdirectory of a checkout
  (it is its own project: Claude Code records it as its own cwd, and nothing tells a
  subdirectory's session apart from the checkout's but that cwd), a checkout whose ``.git`` is a
  file without ``commondir`` (``--separate-git-dir``, a submodule), and every checkout where git's
  files lead nowhere (a ``.git`` file naming a missing gitdir, garbage, a FIFO, unreadable): never
  a crash. A worktree whose main checkout was moved or deleted keeps its state in its own
  ``.c3`` and says so once (``git worktree repair`` in the moved checkout re-links it, and the
  next run folds that state into the main checkout's: see ``stateroot``).

Where the root's folder exists but cannot be written (read-only), the state lives in
``$C3_HOME/state/<slug of the root>/`` instead, and a warning names both folders, once per
process: state is never split silently. A root that does not exist has no state: reads find
none, and a write fails naming the folder (nothing is created for a typo).

Git's files are a stranger's input (a cloned repository ships whatever it likes): each one is read
at most 64 KiB (``_GIT_FILE_LIMIT``, only a regular file, never a FIFO or a device), at most
MAX_WORKTREES entries of ``worktrees/`` are looked at, and a link chain too long to resolve or a
loop is a path that leads nowhere, never an exception.

A door resolves its folder once (``project.resolve``: one ``lstat`` of ``<dir>/.git`` while nothing
changed); the state folder is then read for every file access (``project.Project.state``: one
``lstat`` of the root). The first time a root's state is read in a process, state that earlier
versions left in its worktrees is folded into it (``stateroot.fold_worktrees``).
"""

from __future__ import annotations

import logging
import os
import re
import stat
import unicodedata

from . import memo, safefs

__all__ = (
    "STATE_SLUG_LENGTH",
    "canonical",
    "checkout_gitdir",
    "default_project",
    "git_common_dir",
    "linked_worktrees",
    "project_root",
    "state_slug",
    "warn_once",
    "worktree_entries",
)

log = logging.getLogger("c3async")

STATE_SLUG_LENGTH = 120  # the name of a root's folder under $C3_HOME/state
_GIT_FILE_LIMIT = 64 * 1024  # a .git file, commondir, gitdir, config: small text files
_PATH_MAX = 4096  # a path git's files name that is longer can name nothing (and costs realpath dearly)
MAX_WORKTREES = 1000  # of one repository: more are not a person's
_WINDOWS_ABS = re.compile(r"[A-Za-z]:[\\/]")  # .match: a prefix
_NON_ALNUM = re.compile(r"[^A-Za-z0-9]")
_COMMENT = re.compile(r"\s[#;]")  # where an unquoted value of git's config ends


def default_project() -> str:
    """``CLAUDE_PROJECT_DIR`` (set by Claude Code for MCP servers and hooks), else the cwd."""
    return os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()


def canonical(path: str) -> str:
    """The form Claude Code records: realpath and NFC. A Windows path is kept as written.
    (The same rule as ``catalog.locate.canonical``.) A chain of links too long to resolve (before
    3.13, realpath recurses once per link: a folder can ship thousands) is left unresolved, as
    realpath leaves a loop: the kernel would refuse to follow it anyway (ELOOP)."""
    if _WINDOWS_ABS.match(path):
        return unicodedata.normalize("NFC", path)
    try:
        real = os.path.realpath(path)
    except RecursionError:
        real = os.path.abspath(path)
    return unicodedata.normalize("NFC", real)


_warned: set[str] = memo.kept(set())
_SHOWN = 200  # characters of a path git's files name that a warning shows (it can be 64 KiB long)


def _shown(path: str) -> str:
    return path if len(path) <= _SHOWN else f"{path[: _SHOWN - 40]}…{path[-39:]}"


def warn_once(message: str, key: str | None = None) -> None:
    """Log ``message`` as a warning, once per process (once per ``key``, when given: a kind of
    problem met in many places is said at the first)."""
    key = message if key is None else key
    if key not in _warned:
        _warned.add(key)
        log.warning("%s", message)


# ---------------------------------------------------------------- git's own files


def _resolve(path: str) -> str:
    """``canonical`` of a path git's files name. realpath reads every link of a chain itself,
    and only then gives up on one the kernel refuses after 40 links (6 ms for a chain of 2,000:
    6 s for a thousand worktree entries naming one): a path that leads nowhere is only
    normalised, for one stat."""
    if "\x00" in path:
        raise ValueError("embedded null byte")  # as realpath says: callers treat it as no path
    if os.path.exists(path):
        return canonical(path)
    return unicodedata.normalize("NFC", os.path.normpath(path))


def _read_git_file(path: str) -> str | None:
    """The first line of one of git's small text files, stripped; None when it is missing,
    unreadable, not a regular file (a FIFO is never opened blocking), empty, or longer than a
    path can be (each of these files holds one)."""
    try:
        text = safefs.read_foreign(path, limit=_GIT_FILE_LIMIT)
    except (OSError, ValueError):  # ValueError: a NUL in a path
        return None
    line = text.split("\n", 1)[0].strip()
    return line if line and len(line) <= len("gitdir: ") + _PATH_MAX else None


def _gitdir(checkout: str) -> str | None:
    """The gitdir a ``.git`` file names (``gitdir: X``, X relative to the checkout or absolute),
    canonical; None when ``.git`` is not a regular file or does not have that form."""
    line = _read_git_file(os.path.join(checkout, ".git"))
    if line is None or not line.startswith("gitdir:"):
        return None
    target = line[len("gitdir:") :].strip()
    if not target:
        return None
    try:
        return _resolve(os.path.join(checkout, target))
    except ValueError:
        return None


def _commondir(gitdir: str) -> str | None:
    """The repository a linked worktree's gitdir belongs to (``<gitdir>/commondir``, relative to
    the gitdir or absolute), canonical; None when the gitdir has no commondir."""
    line = _read_git_file(os.path.join(gitdir, "commondir"))
    if line is None:
        return None
    try:
        return _resolve(os.path.join(gitdir, line))
    except ValueError:
        return None


def _links_back(checkout: str, gitdir: str) -> bool:
    """Does the repository's entry for this worktree (``<gitdir>/gitdir``, which git writes as
    the path of the worktree's ``.git``) name this very checkout? Both ends must agree: a
    ``.git`` file shipped in a folder can name any repository, but only that repository's own
    files can name the folder back."""
    line = _read_git_file(os.path.join(gitdir, "gitdir"))
    if line is None:
        return False
    try:
        return _resolve(os.path.join(gitdir, line)) == canonical(os.path.join(checkout, ".git"))
    except ValueError:
        return False


def worktree_entries(common: str) -> tuple[list[str], bool]:
    """The entries of ``<common>/worktrees`` (one per linked worktree), sorted, and whether there
    were more than MAX_WORKTREES: only that many names are ever read, however large the folder
    (a repository can ship 100,000). Unreadable or missing: none."""
    names: list[str] = []
    try:
        with os.scandir(os.path.join(common, "worktrees")) as it:
            for entry in it:
                if len(names) == MAX_WORKTREES:
                    return sorted(names), True
                names.append(entry.name)
    except (OSError, ValueError):
        pass
    return sorted(names), False


def linked_worktrees(common: str) -> list[str]:
    """The linked worktrees of the repository whose git dir is ``common``, canonical, each
    checked both ways (``<common>/worktrees/<name>/gitdir`` names the worktree's ``.git``, and
    that ``.git`` file names the entry back): a worktree whose folder is gone, or an entry that a
    shipped ``.git`` folder made up to name another project, is not listed. At most
    MAX_WORKTREES entries are looked at."""
    folder = os.path.join(common, "worktrees")
    found = []
    for name in worktree_entries(common)[0]:
        entry = os.path.join(folder, name)
        line = _read_git_file(os.path.join(entry, "gitdir"))
        if line is None:
            continue
        try:
            checkout = os.path.dirname(_resolve(os.path.join(entry, line)))
            if _gitdir(checkout) == canonical(entry) and checkout not in found:
                found.append(checkout)
        except ValueError:
            continue
    return found


def _is_dir(path: str) -> bool:
    try:
        return os.path.isdir(path)
    except ValueError:
        return False


def _core_config(common: str) -> tuple[bool | None, str | None]:
    """``core.bare`` and ``core.worktree`` of a repository's ``config`` (None: not set, or the
    file is unreadable). A small reader of git's INI dialect: enough for these two keys."""
    try:
        text = safefs.read_foreign(os.path.join(common, "config"), limit=_GIT_FILE_LIMIT)
    except (OSError, ValueError):
        return None, None
    section = None
    bare: bool | None = None
    worktree: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            end = line.find("]")
            section = line[1:end].strip().lower() if end > 0 else None
            continue
        if section != "core":
            continue
        key, eq, value = line.partition("=")
        key = key.strip().lower()
        value = value.strip()
        quoted = value.startswith('"')
        value = value[1:].split('"', 1)[0] if quoted else _COMMENT.split(value, maxsplit=1)[0].strip()
        if key == "bare":
            bare = (not eq) or value.lower() in ("true", "yes", "on", "1")
        elif key == "worktree" and value and len(value) <= _PATH_MAX:
            worktree = value
    return bare, worktree


def _resolve_root(p: str) -> str:
    """The state root of the canonical directory ``p`` (see the module's docstring). Every root
    other than ``p`` itself is one that git's files name from both ends, so nothing a folder
    ships (a ``.git`` file, a config's ``core.worktree``) can move its root somewhere else."""
    dot_git = os.path.join(p, ".git")
    try:
        st = os.stat(dot_git)  # a symlinked .git is followed, as git follows it
    except (OSError, ValueError):
        return p
    if not stat.S_ISREG(st.st_mode):
        return p  # a folder: a main checkout; a FIFO or a device: not git's, never opened
    gitdir = _gitdir(p)
    if gitdir is None:
        log.debug("%s is not a gitdir file git would read: %s is its own project", dot_git, p)
        return p
    if not _is_dir(gitdir):
        warn_once(
            f"{dot_git} names the git directory {_shown(gitdir)}, which is not a folder (was the main "
            f"checkout moved or deleted?): c3async keeps the state of {p} in its own .c3 folder. "
            "Run `git worktree repair` in the main checkout to re-link it."
        )
        return p
    common = _commondir(gitdir)
    if common is None:
        return p  # --separate-git-dir, or a submodule: the checkout is the repository's only one
    if not _is_dir(common):
        warn_once(
            f"the git directory {gitdir} of {p} names the repository {_shown(common)}, which does not "
            f"exist (moved or deleted?): c3async keeps the state of {p} in its own .c3 folder."
        )
        return p
    if os.path.dirname(gitdir) != os.path.join(common, "worktrees") or not _links_back(p, gitdir):
        warn_once(
            f"{dot_git} names {gitdir} as its worktree entry, but the repository {common} does not "
            f"name {p} back: c3async keeps the state of {p} in its own .c3 folder (run `git worktree "
            "repair` if this checkout was moved)."
        )
        return p
    if os.path.basename(common) == ".git":
        main = os.path.dirname(common)
        if _is_dir(main):
            return main
        warn_once(
            f"the main checkout {main} of {p} does not exist: c3async keeps the state of {p} in its own .c3 folder."
        )
        return p
    bare, core_worktree = _core_config(common)
    if core_worktree:  # a repository that names its main checkout (a submodule's, say)
        try:
            main = _resolve(os.path.join(common, core_worktree))
        except ValueError:
            main = ""
        # ...and the main checkout must name the repository back, as a submodule's does
        if main and _is_dir(main) and _gitdir(main) == common:
            return main
    if bare is False:
        warn_once(
            f"{p} is a worktree of {common}, a repository whose files do not name its main "
            f"checkout (made with --separate-git-dir?): c3async keeps the state of {p} in its own .c3 folder."
        )
        return p
    return common  # a bare repository: its folder is the one place its worktrees share


_roots: dict[str, tuple[tuple[int, int, int, int] | None, str]] = memo.kept({})


def project_root(path: str | os.PathLike[str]) -> str:
    """The c3async project the directory ``path`` belongs to, canonical (see the module's
    docstring). Cached per process on the path and an ``lstat`` of ``<path>/.git``: a repeated
    call costs that one ``lstat``."""
    key = os.fspath(path)
    try:
        st = os.lstat(os.path.join(key, ".git"))
        ident: tuple[int, int, int, int] | None = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_mode)
    except (OSError, ValueError):
        ident = None
    hit = _roots.get(key)
    # A root other than the path itself must still be there (a main checkout deleted while this
    # process runs leaves the worktree's .git file as it was): one stat more, for worktrees only.
    if hit is not None and hit[0] == ident and (hit[1] == key or _is_dir(hit[1])):
        return hit[1]
    try:
        p = canonical(key)
    except ValueError:  # a NUL in the path: nothing on disk has that name
        return unicodedata.normalize("NFC", key)
    root = p if ident is None else _resolve_root(p)
    if os.path.isabs(key):  # a relative path means another folder once the cwd changes
        _roots[key] = (ident, root)
    return root


def checkout_gitdir(checkout: str) -> str | None:
    """The git dir of a checkout, canonical: its ``.git`` folder, or the folder its ``.git`` file
    names (a worktree's entry in its repository); None outside git or where ``.git`` leads to no
    folder."""
    dot_git = os.path.join(checkout, ".git")
    try:
        st = os.stat(dot_git)
    except (OSError, ValueError):
        return None
    if stat.S_ISDIR(st.st_mode):
        return canonical(dot_git)
    gitdir = _gitdir(checkout) if stat.S_ISREG(st.st_mode) else None
    return gitdir if gitdir is not None and _is_dir(gitdir) else None


def git_common_dir(root: str) -> str | None:
    """The repository directory (git's common dir) of a state root: ``<root>/.git`` for a main
    checkout, what a ``.git`` file leads to, the root itself for a bare repository; None
    outside git, or where ``.git`` leads nowhere."""
    gitdir = checkout_gitdir(root)
    if gitdir is not None:  # a main checkout's .git has no commondir: it is the repository
        common = _commondir(gitdir)
        return common if common is not None and _is_dir(common) else gitdir
    if os.path.exists(os.path.join(root, ".git")):
        return None  # a .git that leads nowhere: not a bare repository either
    if os.path.isfile(os.path.join(root, "HEAD")) and _is_dir(os.path.join(root, "refs")):
        return root  # a bare repository
    return None


# ---------------------------------------------------------------- the state folder


def state_slug(root: str) -> str:
    """The folder name of a root's state under ``$C3_HOME/state``: the root's path with every
    character outside ``[A-Za-z0-9]`` as ``-`` (readable), cut so that a hash of the whole path
    fits within STATE_SLUG_LENGTH (so two paths that slug alike never share state)."""
    import hashlib  # here: most commands never need it, and it loads OpenSSL

    digest = hashlib.sha256(root.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return _NON_ALNUM.sub("-", root)[: STATE_SLUG_LENGTH - 17] + "-" + digest
