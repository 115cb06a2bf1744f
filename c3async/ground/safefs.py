"""File access inside c3async's own state: ``<project>/.c3/`` and ``$C3_HOME``.

A repository cloned from a stranger can ship a ``.c3/`` whose entries are symlinks (``.c3/live ->
~``, ``.c3/session_marks.jsonl -> ~/.bashrc``) or special files (a FIFO named ``activity.jsonl``).
Nothing here follows a link or opens anything but a regular file or directory:

- the state root (the folder that holds ``.c3``, or ``$C3_HOME`` itself: both are the user's
  choice) is trusted as given; every folder below it is opened one component at a time with
  ``O_NOFOLLOW | O_DIRECTORY`` relative to its parent's descriptor (``openat``), so a symlink
  anywhere in the chain is refused, not followed, even if it appears between two calls;
- files are opened with ``O_NOFOLLOW | O_NONBLOCK`` relative to that folder's descriptor, then
  ``fstat``-ed: a FIFO, socket or device is refused without ever blocking on it;
- an entry of the wrong kind raises ``UnsafeState`` (``ground.errors``: refused), a C3Error (the
  doors print its message) and an OSError (code that tolerates a missing or unreadable file
  tolerates it too); a file not ours that is no regular file, ``NotRegularFile``, likewise;
- what is ours is private: it holds first prompts, notes and summaries copied from transcripts
  that Claude Code keeps private. Folders are made 0700 and files 0600; a ``.c3`` or ``$C3_HOME``
  found readable by other accounts (made by an older version, or by git) is closed (``chmod
  go-rwx``) when it is ours; one others can write, or another account's, is said once.

Where the platform has no ``dir_fd`` support (Windows), each component is ``lstat``-ed instead.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import stat
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from . import disk, memo
from .errors import NotRegularFile, UnsafeState
from .home import c3_home
from .peek import pread_all

__all__ = (
    "GITIGNORE",
    "PROJECT_FILE",
    "TEMP_NAME",
    "append_fd",
    "ensure_dir",
    "ignore_in_git",
    "link_fd",
    "listdir",
    "lstat",
    "name_project",
    "open_dir",
    "open_file",
    "open_folder_below",
    "open_regular",
    "pread_all",
    "read_bytes",
    "read_foreign",
    "rename",
    "stamp",
    "state_parts",
    "unlink",
    "warn_once",
    "write_atomic",
    "write_new",
)

log = logging.getLogger("c3async")

_O_BINARY = getattr(os, "O_BINARY", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FD = sys.platform != "win32" and os.open in os.supports_dir_fd and os.mkdir in os.supports_dir_fd
# The temp files write_atomic makes: ".<name>.<16 hex>.tmp". Cleanup deletes only such names.
TEMP_NAME = re.compile(r"\.[^/\\]+\.[0-9a-f]{16}\.tmp")
STATE_DIR_NAME = ".c3"
DIR_MODE = 0o700  # every folder c3async makes for its state
FILE_MODE = 0o600  # every file, unless a caller keeps a file's own mode (a person's settings)
# What a project's .c3 holds from its creation: it stays out of git (a person's sessions, live
# files and caches are not the repository's) unless someone edits this file to share some of it.
GITIGNORE = b"""# Written by c3async: this folder stays out of git. c3async never rewrites this file, so to
# share the project's tasks, decisions and session notes through the repository, replace the
# "*" line below with these lines (and commit the folder):
#   /*
#   !/.gitignore
#   !/pm/
#   /pm/*
#   !/pm/pm.json
#   !/session_marks.jsonl
#   !/config.json
# Deleting this file only brings it back; edit it instead.
*
"""


_warned: set[str] = memo.kept(set())


def warn_once(problem: BaseException | str) -> None:
    """Log a refusal (or a warning's text) once per process: a listing goes on without that
    state, and says why."""
    key = str(problem)
    if key not in _warned:
        _warned.add(key)
        log.warning("%s", key)


def state_parts(path: str | os.PathLike[str], trusted: Path | None = None) -> tuple[Path, tuple[str, ...]]:
    """Split a state path into the trusted root and the components below it that must be ours.

    Under ``$C3_HOME``: ``$C3_HOME`` as the user wrote it is the root. Under a project: the
    folder holding the ``.c3`` component nearest the end. Anything else is trusted as given,
    unless the caller names the folder it trusts (``trusted``: a project folder, whose
    ``.claude`` a cloned repository may ship as a link)."""
    p = Path(path)
    if trusted is not None:
        return trusted, p.relative_to(trusted).parts  # ValueError: not below it
    home = c3_home()
    try:
        rel = p.relative_to(home)
        return home, rel.parts
    except ValueError:
        pass
    parts = p.parts
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] == STATE_DIR_NAME:
            return Path(*parts[:i]), parts[i:]
    return p, ()


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _refuse_existing(dir_fd: int | None, name: str, path: Path, want_dir: bool) -> UnsafeState:
    """Why opening ``name`` failed with ELOOP/ENOTDIR/ENXIO: name the kind of entry found."""
    try:
        st = os.lstat(name, dir_fd=dir_fd) if dir_fd is not None else os.lstat(path)
        what = _kind(st.st_mode)
    except OSError:
        what = "a symlink" if not want_dir else "not a directory"
    return UnsafeState(path, what)


def _open_root(root: Path, create: bool) -> int:
    """The trusted root's descriptor. Only ``$C3_HOME`` is ever created: a project folder that
    does not exist (a typo'd ``--project``) stays absent, and writing its state fails."""
    flags = os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC
    home = root == c3_home()
    try:
        fd = os.open(root, flags)
    except FileNotFoundError:
        if not create or not home:
            raise
        root.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        fd = os.open(root, flags)
    if home:
        keep_private(fd, root)
    return fd


_private_seen: set[tuple[int, int]] = memo.kept(set())


def keep_private(fd: int, path: Path) -> None:
    """Close the folder ``fd`` (``path``, a ``.c3`` or ``$C3_HOME``) to other accounts: its group
    and other bits are cleared when it is this account's and only readable by others; one that
    others can write, or that is not this account's, is said once and left as it is (it cannot
    be helped from here). A folder seen private once is not looked at again."""
    try:
        st = os.fstat(fd)
    except OSError:
        return
    key = (st.st_dev, st.st_ino)
    if key in _private_seen:
        return
    mode = stat.S_IMODE(st.st_mode)
    if not mode & 0o077:
        _private_seen.add(key)
        return
    if mode & 0o022:
        # Others could write here: what is in it may not be ours, and closing it now would make
        # it look trusted (the archive refuses such a home). A person checks it first.
        warn_once(
            f"{path} can be written by other accounts (mode {mode:o}); c3async leaves it as it is, since "
            f"what is in it may not be yours. Check it, then make it private (chmod go-rwx {path})."
        )
        return
    if hasattr(os, "geteuid") and st.st_uid == os.geteuid():
        try:
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & 0o700)
            _private_seen.add(key)
            return
        except OSError as exc:
            why = f"it could not be made private ({exc.strerror or exc})"
    else:
        why = f"it belongs to another account (uid {st.st_uid}), so c3async cannot make it private"
    warn_once(
        f"{path} can be read by other accounts (mode {stat.S_IMODE(st.st_mode):o}) and holds text copied "
        f"from your sessions; {why}. Make it private (chmod go-rwx {path}) or move the project's state."
    )


@contextmanager
def open_dir(
    path: str | os.PathLike[str], *, create: bool = False, trusted: Path | None = None
) -> Iterator[int | None]:
    """A descriptor of the state folder ``path``, every component below the trusted root opened
    without following links (created, mode 0700, when ``create``; a project's ``.c3`` on the way
    is kept private). Raises FileNotFoundError when missing and not ``create``, UnsafeState when a
    component is a link or not a folder. Yields None where there is no ``dir_fd`` support."""
    root, parts = state_parts(path, trusted)
    if not _DIR_FD:
        _check_chain(root, parts, create)
        yield None
        return
    fd = _descend(_open_root(root, create), root, parts, create, DIR_MODE, _refuse_existing, state=trusted is None)
    try:
        yield fd
    finally:
        os.close(fd)


def _descend(
    fd: int, here: Path, parts: tuple[str, ...], create: bool, mode: int, refuse, *, state: bool = False
) -> int:
    """From the folder ``fd`` (at ``here``) down ``parts``, each opened with ``O_DIRECTORY |
    O_NOFOLLOW`` (made first, mode ``mode``, when missing and ``create``); returns the last
    one's descriptor, having closed the others (``fd`` too). A component that is a link or not
    a folder raises ``refuse(parent fd, name, path, True)``. ``state``: the chain is c3async's
    state, whose ``.c3`` folder is kept private and starts with its ``.gitignore``."""
    try:
        for name in parts:
            here = here / name
            try:
                nfd = os.open(name, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                made = True
                try:
                    os.mkdir(name, mode, dir_fd=fd)
                except FileExistsError:
                    made = False  # another process made it (or a link appeared): the open below decides
                try:
                    nfd = os.open(name, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise refuse(fd, name, here, True) from None
                    raise
                if made and state and name == STATE_DIR_NAME:
                    ignore_in_git(nfd)
                    name_project(nfd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise refuse(fd, name, here, True) from None
                raise
            if state and name == STATE_DIR_NAME:
                keep_private(nfd, here)
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def ignore_in_git(dir_fd: int, text: bytes = GITIGNORE) -> bool:
    """Put a ``.gitignore`` holding ``text`` in the folder ``dir_fd``, unless one is there (of
    any kind: a person's own file, or a link, is left as it is). Best effort: False when not
    written."""
    return _create_new(dir_fd, ".gitignore", text, 0o644)


PROJECT_FILE = "project.json"  # in a project's .c3: {"id": <uuid4>}, which a moved folder carries along


def name_project(dir_fd: int) -> bool:
    """Give the ``.c3`` folder ``dir_fd`` a project id (``project.json``), unless it has one (or
    anything of that name). The id travels with the folder, so a project whose folder moved is
    known again under its new path. Best effort: False when not written."""
    import uuid

    return _create_new(dir_fd, PROJECT_FILE, b'{"id": "' + str(uuid.uuid4()).encode() + b'"}\n', FILE_MODE)


def _create_new(dir_fd: int, name: str, data: bytes, mode: int) -> bool:
    """A new file ``name`` in the folder ``dir_fd`` holding ``data``, never over anything of that
    name; a short write (a full disk) is removed again, so the next run tries again."""
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, mode, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        done = os.write(fd, data) == len(data)
    except OSError:
        done = False
    finally:
        os.close(fd)
    if not done:
        try:
            os.unlink(name, dir_fd=dir_fd)
        except OSError:
            pass
    return done


def _check_chain(root: Path, parts: tuple[str, ...], create: bool) -> None:
    if not root.is_dir():
        if not create or root != c3_home():
            raise FileNotFoundError(errno.ENOENT, "no such folder", os.fspath(root))
        root.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    here = root
    for name in parts:
        here = here / name
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            if not create:
                raise
            here.mkdir(mode=DIR_MODE, exist_ok=True)
            st = os.lstat(here)
        if not stat.S_ISDIR(st.st_mode):
            raise UnsafeState(here, _kind(st.st_mode))


def ensure_dir(path: str | os.PathLike[str]) -> None:
    """Create the state folder ``path`` (and the folders above it, up to the root) if missing."""
    with open_dir(path, create=True):
        pass


def open_file(
    path: str | os.PathLike[str],
    flags: int,
    mode: int = FILE_MODE,
    *,
    create_dirs: bool = False,
    trusted: Path | None = None,
) -> int:
    """Open a regular file of our state without following a link or blocking on a FIFO.
    Returns a descriptor (blocking again); UnsafeState when the entry is of another kind."""
    p = Path(path)
    flags |= _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC | _O_BINARY
    with open_dir(p.parent, create=create_dirs, trusted=trusted) as dfd:
        try:
            if dfd is None:
                st = _lstat_or_none(p)
                if st is not None and not stat.S_ISREG(st.st_mode):
                    raise UnsafeState(p, _kind(st.st_mode))
                fd = os.open(p, flags, mode)
            else:
                fd = os.open(p.name, flags, mode, dir_fd=dfd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.ENOTDIR) and not isinstance(
                exc, UnsafeState
            ):
                raise _refuse_existing(dfd, p.name, p, False) from None
            raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeState(p, _kind(st.st_mode))
        if _O_NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _lstat_or_none(p: Path) -> os.stat_result | None:
    try:
        return os.lstat(p)
    except FileNotFoundError:
        return None


def append_fd(path: str | os.PathLike[str]) -> int:
    """``O_WRONLY | O_APPEND | O_CREAT`` on a regular file of our state (folders created)."""
    return open_file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, create_dirs=True)


def read_bytes(path: str | os.PathLike[str], limit: int | None = None, *, trusted: Path | None = None) -> bytes:
    """The file's bytes (at most ``limit``). FileNotFoundError when it or its folder is missing."""
    fd = open_file(path, os.O_RDONLY, trusted=trusted)
    try:
        chunks: list[bytes] = []
        left = limit
        while left is None or left > 0:
            # Read what is there: a limit is a cap, not a buffer to allocate up front.
            data = os.read(fd, 1 << 20 if left is None else min(left, 1 << 20))
            if not data:
                break
            chunks.append(data)
            if left is not None:
                left -= len(data)
        return b"".join(chunks)
    finally:
        os.close(fd)


def open_regular(
    path: str | os.PathLike[str],
    *,
    follow: bool = False,
    lstat_first: bool = False,
    depth: int = 1,
) -> tuple[int, os.stat_result]:
    """Open a file that is not our state (a transcript, git's ``HEAD``) for reading, only if it
    is a regular file: (fd, fstat). ``O_NONBLOCK`` makes opening a FIFO return at once,
    ``O_NOFOLLOW`` (unless ``follow``) refuses a symlink, and the ``fstat`` of the descriptor, not
    of the name, decides, so nothing swapped in after a caller's stat can block or redirect the
    read. ``depth``: how many of the path's last components are below the folder the caller
    trusts (2 for ``<folder>/<session>/x``): each is opened relative to the one above it, a
    folder with ``O_DIRECTORY | O_NOFOLLOW``, so a folder swapped for a link between a walk and
    this open is refused too. ``lstat_first`` checks the name (with ``follow``, what it leads to)
    before opening, so a device is not even opened (for paths no listing has vetted). Raises
    NotRegularFile, or the OSError of the open."""
    if depth > 1 and not follow and _DIR_FD:
        return _open_below(Path(path), depth)
    nofollow = 0 if follow else _O_NOFOLLOW
    if lstat_first or (not follow and not _O_NOFOLLOW):
        st = os.stat(path) if follow else os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(errno.EINVAL, _kind(st.st_mode), os.fspath(path))
    try:
        fd = os.open(path, os.O_RDONLY | _O_NONBLOCK | _O_CLOEXEC | _O_BINARY | nofollow)
    except OSError as exc:
        if nofollow and exc.errno in (errno.ELOOP, errno.EMLINK):  # EMLINK: BSD's O_NOFOLLOW
            raise NotRegularFile(exc.errno, "a symlink (not followed)", os.fspath(path)) from None
        raise
    return fd, _regular(fd, path)


def _regular(fd: int, path: str | os.PathLike[str]) -> os.stat_result:
    """The fstat of ``fd``, which must be a regular file (else it is closed: NotRegularFile)."""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(errno.EINVAL, _kind(st.st_mode), os.fspath(path))
    except BaseException:
        os.close(fd)
        raise
    return st


def open_folder_below(path: str | os.PathLike[str], depth: int, *, create: bool = False) -> int:
    """A descriptor of the folder ``path``, whose last ``depth`` components are opened one by
    one without following a link (created, mode 0700, when ``create``); the folder above them is
    trusted as it is. NotRegularFile names a component that is a link or not a folder."""
    p = Path(path)
    parts = p.parts[len(p.parts) - depth :] if depth else ()
    base = Path(*p.parts[: len(p.parts) - depth]) if depth else p
    if create:
        base.mkdir(parents=True, exist_ok=True)
    fd = os.open(base, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
    return _descend(fd, base, parts, create, DIR_MODE, _not_followed)


def _not_followed(dir_fd: int, name: str, path: Path, want_dir: bool) -> NotRegularFile:
    return NotRegularFile(errno.ENOTDIR, "a symlink or not a folder (not followed)", os.fspath(path))


def _open_below(p: Path, depth: int) -> tuple[int, os.stat_result]:
    dfd = open_folder_below(p.parent, depth - 1)
    try:
        try:
            fd = os.open(p.name, os.O_RDONLY | _O_NONBLOCK | _O_CLOEXEC | _O_NOFOLLOW, dir_fd=dfd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EMLINK):
                raise NotRegularFile(exc.errno, "a symlink (not followed)", os.fspath(p)) from None
            raise
    finally:
        os.close(dfd)
    return fd, _regular(fd, p)


# Linux names every open file in /proc/self/fd: linkat through it links the very file a
# descriptor holds (no name is looked up again). Elsewhere a link is made by name and checked.
_PROC_FD = sys.platform.startswith("linux") and os.path.isdir("/proc/self/fd")


def link_fd(fd: int, dir_fd: int, name: str) -> bool:
    """Hard-link the open file ``fd`` as ``name`` in the folder ``dir_fd``, never over an
    existing name (FileExistsError). False where that cannot be done (no /proc, another device,
    no hard links, the file already unlinked): the caller copies from ``fd`` instead."""
    if not _PROC_FD:
        return False
    try:
        os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=dir_fd, follow_symlinks=True)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno in (
            errno.EXDEV,
            errno.EPERM,
            errno.EMLINK,
            errno.ENOTSUP,
            errno.EOPNOTSUPP,
            errno.ENOENT,
            errno.EACCES,
        ):
            return False
        raise
    return True


def read_foreign(path: str | os.PathLike[str], limit: int = 1 << 20) -> str:
    """A small text file that is not ours (git's ``HEAD``, ``commondir``...): links are followed,
    as git follows them, but only a regular file is read, and never one that would block (a
    FIFO named ``.git`` in a hostile checkout), nor a device a link names (``HEAD -> /dev/zero``:
    some devices act when opened, so it is not even opened). At most ``limit`` bytes, decoded
    leniently."""
    fd, _ = open_regular(path, follow=True, lstat_first=True)
    try:
        return pread_all(fd, 0, limit).decode("utf-8", "replace")
    finally:
        os.close(fd)


def listdir(path: str | os.PathLike[str]) -> list[str]:
    """The names in a state folder (FileNotFoundError when missing; UnsafeState when a link)."""
    with open_dir(path) as dfd:
        return os.listdir(dfd if dfd is not None else path)


def stamp(path: str | os.PathLike[str], *, follow: bool = False) -> tuple[int, int, int] | None:
    """What tells one state of a file or folder from another, for a watcher deciding whether to
    read it again: its (inode, size, mtime_ns), None when it is not there. A stat alone (of the
    link itself unless ``follow``): nothing is opened, and whoever then reads it reads through
    the functions above."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def lstat(path: str | os.PathLike[str]) -> os.stat_result:
    p = Path(path)
    with open_dir(p.parent) as dfd:
        return os.lstat(p.name, dir_fd=dfd) if dfd is not None else os.lstat(p)


def unlink(path: str | os.PathLike[str], *, trusted: Path | None = None) -> None:
    """Remove one of our files; a folder of the chain that is a link is refused, and the name
    itself is unlinked (a link named like our file is removed as a link, never followed).
    ``trusted``: as for ``open_dir``."""
    p = Path(path)
    with open_dir(p.parent, trusted=trusted) as dfd:
        if dfd is None:
            os.unlink(p)
        else:
            os.unlink(p.name, dir_fd=dfd)


def rename(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Rename within one state folder."""
    s, d = Path(src), Path(dst)
    if s.parent != d.parent:
        raise ValueError("rename stays within one folder")
    with open_dir(s.parent) as dfd:
        if dfd is None:
            os.replace(s, d)
        else:
            os.rename(s.name, d.name, src_dir_fd=dfd, dst_dir_fd=dfd)


def link(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Hard-link within one state folder; fails (FileExistsError) rather than overwrite."""
    s, d = Path(src), Path(dst)
    with open_dir(s.parent) as dfd:
        if dfd is None:
            os.link(s, d)
        else:
            os.link(s.name, d.name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)


def write_atomic(
    path: str | os.PathLike[str], data: bytes, *, fsync: bool = True, mode: int = FILE_MODE, trusted: Path | None = None
) -> None:
    """Replace ``path`` with ``data``: readers see the old file or the new one, never a mix.

    The temp file is made in the same folder with ``O_EXCL | O_NOFOLLOW`` and renamed over the
    name: a link at ``path`` is replaced as a name, never written through. Temp files of ``path``
    that killed writers left are removed first (``disk.clear_stale_temps``); a full disk raises
    ``DiskFull`` naming the folder."""
    p = Path(path)
    tmp = f".{p.name}.{os.urandom(8).hex()}.tmp"
    with open_dir(p.parent, create=True, trusted=trusted) as dfd:
        disk.clear_stale_temps(p.parent if dfd is None else dfd, p.name)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC | _O_BINARY
        fd = os.open(p.parent / tmp, flags, mode) if dfd is None else os.open(tmp, flags, mode, dir_fd=dfd)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            _replace(dfd, p, tmp)
        except BaseException as exc:
            try:
                if dfd is None:
                    os.unlink(p.parent / tmp)
                else:
                    os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            if disk.is_full(exc):
                raise disk.full(p.parent) from exc
            raise
        if fsync and dfd is not None:
            try:
                os.fsync(dfd)
            except OSError:
                pass


def _replace(dfd: int | None, p: Path, tmp: str) -> None:
    if dfd is not None:
        os.replace(tmp, p.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        return
    # On Windows a reader holding the file open makes os.replace fail for a moment: retry ~1 s.
    import time

    for attempt in range(50):
        try:
            os.replace(p.parent / tmp, p)
            return
        except PermissionError:
            if attempt == 49:
                raise
            time.sleep(0.02)


def write_new(path: str | os.PathLike[str], chunks: Iterable[bytes], *, replace: bool = False) -> None:
    """Write ``chunks`` as the file ``path`` that a person named (not our state: its folder is
    taken as given, links in it included), whole or not at all, private (0600). The chunks go
    to a temp file beside it (``O_EXCL | O_NOFOLLOW``), synced, then linked in as ``path``, never
    over anything of that name (FileExistsError); with ``replace``, renamed over a regular file
    of that name. Whatever ``path`` is, it is never written through: a link, a folder, a FIFO
    there is refused (NotRegularFile), even with ``replace``. Checked before the first chunk is
    asked for, and again as the file is put in place. Interrupted or failed: no temp file stays;
    a full disk raises ``DiskFull``."""
    p = Path(path)
    if not p.name or p.name in (".", ".."):
        raise IsADirectoryError(errno.EISDIR, "a file name is needed, not a folder", os.fspath(path))
    dfd = os.open(p.parent, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC) if _DIR_FD else None
    at = {"dir_fd": dfd} if dfd is not None else {}
    name = p.name if dfd is not None else os.fspath(p)
    tmp = f".{p.name}.{os.urandom(8).hex()}.tmp"
    tmp_name = tmp if dfd is not None else os.fspath(p.parent / tmp)
    try:
        _may_write(name, at, p, replace)
        disk.clear_stale_temps(p.parent if dfd is None else dfd, p.name)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC | _O_BINARY
        fd = os.open(tmp_name, flags, FILE_MODE, **at)
        try:
            try:
                if hasattr(os, "fchmod"):
                    os.fchmod(fd, FILE_MODE)  # whatever the umask said
                for chunk in chunks:
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            _may_write(name, at, p, replace)
            if replace:
                os.replace(tmp_name, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            else:
                os.link(tmp_name, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
        except BaseException as exc:
            if disk.is_full(exc):
                raise disk.full(p.parent) from exc
            raise
        finally:
            try:
                os.unlink(tmp_name, **at)
            except OSError:
                pass
    finally:
        if dfd is not None:
            os.close(dfd)


def _may_write(name: str, at: dict, p: Path, replace: bool) -> None:
    """Refuse what is at ``name`` unless nothing is, or (``replace``) a regular file."""
    try:
        st = os.lstat(name, **at)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(errno.EEXIST, f"{_kind(st.st_mode)} is there (never written through)", os.fspath(p))
    if not replace:
        raise FileExistsError(errno.EEXIST, "a file is there already", os.fspath(p))
