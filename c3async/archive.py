"""The archive of kept sessions: ``$C3_HOME/archive/<project folder>/``, out of the reach of
Claude Code's cleanup (which deletes transcripts older than ``cleanupPeriodDays``).

A kept session's transcript, and the files of its session folder (sub-agent transcripts, tool
results), are preserved under the same names Claude Code uses: ``<folder>/<id>.jsonl`` and
``<folder>/<id>/...``. Where the archive is on the same filesystem, a preserved file is a hard
link: it costs no space while the original lives, survives Claude Code deleting its own name,
and follows every append (it is the same file). Elsewhere (another device, a filesystem without
hard links) it is a copy, brought up to date by appending only the new bytes, under the
folder's lock so two processes never append the same bytes twice.

Nothing here deletes or rewrites anything in Claude Code's folders: ``restore`` only adds files
that are missing there. A preserved file whose original was replaced by a different one (not a
longer version of the same bytes) is left as it is: the archive never loses what it kept.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import msgspec

from . import safefs
from .catalog.listing import MAX_DEPTH, is_session_id, regular_files
from .locking import locked
from .paths import c3_home

__all__ = ("ArchiveStatus", "Kept", "preserve", "release", "restore", "root", "status")

log = logging.getLogger("c3async.archive")

CHUNK = 8 * 1024 * 1024
CHECK = 64  # bytes compared to recognise a copy as a prefix of its original


def root() -> Path:
    return c3_home() / "archive"


def _lock(folder: Path) -> Path:
    return folder / ".archive"


def _side_files(folder: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """Regular files under a session's folder (sub-agents, tool results), never through a link."""
    for path, st in regular_files(os.fspath(folder)):
        yield Path(path), st


def preserve(transcript: str | os.PathLike[str], session: str) -> int:
    """Preserve a session's transcript and its session folder's files; returns how many files
    were linked, copied or brought up to date (0: all current). Raises OSError (a full or
    read-only disk, UnsafeState) with the originals untouched."""
    if not is_session_id(session):
        raise ValueError(f"not a session id: {session!r}")
    src = Path(transcript)
    if src.parent.parent == root() or root() in src.parents:
        return 0  # it is the archive's own copy: the original is gone
    dst_dir = root() / src.parent.name
    if _current(src, dst_dir, session):
        return 0
    safefs.ensure_dir(dst_dir)
    changed = 0
    with locked(_lock(dst_dir)):
        changed += _keep(src, dst_dir / f"{session}.jsonl")
        side = src.parent / session
        for path, _st in _side_files(side):
            changed += _keep(path, dst_dir / session / path.relative_to(side))
    return changed


def _current(src: Path, dst_dir: Path, session: str) -> bool:
    """The common case, with no lock and nothing opened: the transcript is linked already and
    its session has no folder of sub-agent files or tool results."""
    try:
        a = os.lstat(src)
        b = os.lstat(dst_dir / f"{session}.jsonl")
    except OSError:
        return False
    if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino) or not stat.S_ISREG(b.st_mode):
        return False
    return not os.path.lexists(src.parent / session)


def _keep(src: Path, dst: Path) -> int:
    try:
        fd, st = safefs.open_regular(src)
    except FileNotFoundError:
        return 0  # deleted meanwhile: what the archive has stays
    except safefs.NotRegularFile:
        return 0
    try:
        try:
            have = safefs.lstat(dst)
        except FileNotFoundError:
            have = None
        if have is not None:
            if not stat.S_ISREG(have.st_mode):
                raise safefs.UnsafeState(dst, safefs._kind(have.st_mode))
            if (have.st_dev, have.st_ino) == (st.st_dev, st.st_ino) or have.st_size == st.st_size:
                return 0  # the same file (a link), or a copy that is current
            if have.st_size < st.st_size and _is_prefix(fd, dst, have.st_size):
                _append(fd, dst, have.st_size, st.st_size)
                return 1
            log.warning("%s differs from the archived copy %s (replaced?): the archive keeps its own", src, dst)
            return 0
        safefs.ensure_dir(dst.parent)
        if _link(fd, src, dst):
            return 1
        _copy(fd, dst)
        return 1
    finally:
        os.close(fd)


_NO_LINK = (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP)


def _link(fd: int, src: Path, dst: Path) -> bool:
    """Hard-link ``src`` at ``dst`` (in our state), then check the link is the very file we
    opened and vetted (a name swapped since, even for a symlink, is unlinked again and the
    opened file copied instead). False when the filesystem cannot link: copy instead."""
    with safefs.open_dir(dst.parent) as dfd:
        name: str | Path = dst if dfd is None else dst.name
        try:
            os.link(src, name, dst_dir_fd=dfd, follow_symlinks=False)
        except FileExistsError:
            return True  # another process preserved it first
        except OSError as exc:
            if exc.errno in (*_NO_LINK, errno.ENOENT):
                return False
            raise
        made = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        have = os.fstat(fd)
        if (made.st_dev, made.st_ino) != (have.st_dev, have.st_ino):
            os.unlink(name, dir_fd=dfd)
            return False
    return True


def _copy(fd: int, dst: Path, *, ours: bool = True) -> bool:
    """A copy, whole or not at all: written under a temporary name beside ``dst``, synced, then
    linked into place, never over a file that appeared meanwhile (False: one did; another
    process copied first). A copy cut short (a full disk, Ctrl-C) leaves nothing behind.
    ``ours``: ``dst`` is in our state (opened without following any link on the way); else
    it is in Claude Code's folder (a resume)."""
    tmp = dst.parent / f".{dst.name}.{os.urandom(8).hex()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    out = safefs.open_file(tmp, flags, 0o600) if ours else os.open(tmp, flags | os.O_NOFOLLOW, 0o600)
    try:
        try:
            _pump(fd, out, 0, None)
            os.fsync(out)
        finally:
            os.close(out)
        try:
            if ours:
                safefs.link(tmp, dst)
            else:
                os.link(tmp, dst, follow_symlinks=False)
        except FileExistsError:
            return False
        return True
    finally:
        try:
            if ours:
                safefs.unlink(tmp)
            else:
                os.unlink(tmp)
        except OSError:
            pass


def _pump(src: int, out: int, start: int, end: int | None) -> None:
    pos = start
    while end is None or pos < end:
        data = os.pread(src, CHUNK if end is None else min(CHUNK, end - pos), pos)
        if not data:
            break
        view = memoryview(data)
        while view:
            view = view[os.write(out, view) :]
        pos += len(data)


def _is_prefix(fd: int, dst: Path, size: int) -> bool:
    """Is the copy the start of the original (the same bytes at its head and its end)?"""
    n = min(CHECK, size)
    try:
        ours = safefs.open_file(dst, os.O_RDONLY)
    except OSError:
        return False
    try:
        return os.pread(ours, n, 0) == os.pread(fd, n, 0) and os.pread(ours, n, size - n) == os.pread(fd, n, size - n)
    finally:
        os.close(ours)


def _append(fd: int, dst: Path, start: int, end: int) -> None:
    out = safefs.open_file(dst, os.O_WRONLY)
    try:
        os.lseek(out, start, os.SEEK_SET)
        try:
            _pump(fd, out, start, end)
        except OSError:
            os.ftruncate(out, start)  # a full disk: no half line left behind
            raise
    finally:
        os.close(out)


def archived_path(transcript: str | os.PathLike[str], session: str) -> Path:
    """Where a transcript of Claude Code's folder is (or would be) preserved."""
    return root() / Path(transcript).parent.name / f"{session}.jsonl"


def release(folder: str, session: str) -> int:
    """Remove a session's archive entry (its transcript and session folder's files); returns the
    bytes no other name held (freed). Only our own regular files are removed."""
    if not is_session_id(session) or "/" in folder or folder in ("", ".", ".."):
        raise ValueError("not an archive entry")
    base = root() / folder
    freed = 0
    with locked(_lock(base)):
        for path in [base / f"{session}.jsonl", *(p for p, _ in _side_files(base / session))]:
            try:
                st = safefs.lstat(path)
                if not stat.S_ISREG(st.st_mode):
                    continue
                safefs.unlink(path)
            except FileNotFoundError:
                continue
            if st.st_nlink == 1:
                freed += st.st_size
        _prune_dirs(base / session)
    return freed


def _prune_dirs(folder: Path, depth: int = 0) -> None:
    try:
        with os.scandir(folder) as it:
            subdirs = [Path(e.path) for e in it if e.is_dir(follow_symlinks=False)]
    except OSError:
        return
    if depth < MAX_DEPTH:
        for d in subdirs:
            _prune_dirs(d, depth + 1)
    try:
        os.rmdir(folder)  # only when empty
    except OSError:
        pass


def restore(archived: Path, target_dir: Path, session: str, *, dry_run: bool = False) -> list[str]:
    """Put a session's preserved files back into Claude Code's folder ``target_dir`` (where it
    looks for them), adding only files that are missing: an existing file is never overwritten,
    whatever its age. Returns the files put back (``dry_run``: the files that would be; nothing
    is written)."""
    put: list[str] = []
    base = archived.parent
    pairs = [(archived, target_dir / f"{session}.jsonl")]
    pairs += [(p, target_dir / session / p.relative_to(base / session)) for p, _ in _side_files(base / session)]
    if dry_run:
        return [os.fspath(dst) for _, dst in pairs if not os.path.lexists(dst)]
    target_dir.mkdir(parents=True, exist_ok=True)
    for src, dst in pairs:
        if os.path.lexists(dst):
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        fd = safefs.open_file(src, os.O_RDONLY)  # ours: no link followed, regular only
        try:
            try:
                os.link(src, dst, follow_symlinks=False)
            except FileExistsError:
                continue
            except OSError as exc:
                if exc.errno not in _NO_LINK:
                    raise
                if not _copy(fd, dst, ours=False):
                    continue
        finally:
            os.close(fd)
        # Claude Code deletes by mtime at start-up: a transcript put back with its old mtime would
        # be deleted by the very `claude --resume` it was put back for.
        os.utime(dst, follow_symlinks=False)
        put.append(os.fspath(dst))
    return put


def only_copy(transcript: str | os.PathLike[str], session: str) -> bool:
    """Does the archive hold bytes of this session's transcript that Claude Code's folder does
    not (the original gone, shorter, or different)? Then releasing it loses them."""
    ours = archived_path(transcript, session)
    try:
        have = safefs.lstat(ours)
    except FileNotFoundError:
        return False
    try:
        fd, st = safefs.open_regular(transcript)
    except OSError:
        return True  # the original is gone
    try:
        if (st.st_dev, st.st_ino) == (have.st_dev, have.st_ino):
            return False  # the same file
        return have.st_size > st.st_size or not _is_prefix(fd, ours, have.st_size)
    finally:
        os.close(fd)


class Kept(msgspec.Struct):
    """One archived session."""

    folder: str
    session: str
    files: int
    bytes: int
    held_bytes: int  # bytes only the archive holds (the original is gone, or this is a copy)


class ArchiveStatus(msgspec.Struct):
    path: str
    sessions: list[Kept]
    files: int = 0
    bytes: int = 0
    held_bytes: int = 0


def status() -> ArchiveStatus:
    """What the archive holds, and how much of it only the archive holds."""
    out = ArchiveStatus(os.fspath(root()), [])
    try:
        with os.scandir(root()) as it:
            folders = sorted(e.path for e in it if e.is_dir(follow_symlinks=False))
    except OSError:
        return out
    for folder in folders:
        try:
            with os.scandir(folder) as it:
                names = sorted(e.name for e in it if e.is_file(follow_symlinks=False) and e.name.endswith(".jsonl"))
        except OSError:
            continue
        for name in names:
            session = name[:-6]
            if not is_session_id(session):
                continue
            files = [(Path(folder, name), os.lstat(Path(folder, name)))]
            files += list(_side_files(Path(folder, session)))
            size = sum(st.st_size for _, st in files)
            held = sum(st.st_size for _, st in files if st.st_nlink == 1)
            out.sessions.append(Kept(os.path.basename(folder), session, len(files), size, held))
            out.files += len(files)
            out.bytes += size
            out.held_bytes += held
    return out
