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

Each file of Claude Code's folder is opened once, without following a link at any level below
the project folder (``safefs.open_regular(depth=...)``), and everything after that works from
the descriptor: the link is made from it (``safefs.link_fd``: on Linux through
``/proc/self/fd``, so no name is looked up again), a copy is read from it. A name swapped for a
link or another file between a walk and the open, or after the open, redirects nothing. The
same holds the other way (``restore``): the folders of Claude Code's folder that it adds to are
opened one by one without following a link, and files are linked or copied into them by
descriptor.

The archive is used only while ``$C3_HOME`` and its ``archive`` folder are the user's own and
no other account can write them (``trusted``): an entry planted there by someone else would be
listed, searched and put back into Claude Code's folder.

A disk is finite. A copy (or the new bytes of one) is made only when the archive's filesystem
keeps ``disk.reserve`` free after it; else it is refused (``NoRoom``, naming the session, the
bytes and the free space). A copy the disk still cut short (a quota, another writer) leaves
nothing half-written. Either is remembered in ``.refused.json`` (the bytes, the free space then,
the time) and later listings back off: a refused copy is tried again once the room is there, a
cut-short one once the free space grew by its bytes; either after ``RETRY_S`` in any case. A
full disk that keeps even that record from being written leaves it in the process's memory.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec

from ..catalog.listing import MAX_DEPTH, is_session_id, regular_files
from ..ground import disk, jsondoc, safefs
from ..ground.errors import DECODE_ERRORS, C3Error, NoRoom, NotRegularFile, UnsafeArchive, UnsafeState
from ..ground.home import c3_home
from ..ground.locking import locked

__all__ = (
    "ArchiveStatus",
    "Kept",
    "holds",
    "preserve",
    "release",
    "restore",
    "root",
    "status",
    "trusted",
    "usable",
)

log = logging.getLogger("c3async.archive")

CHUNK = 8 * 1024 * 1024
CHECK = 64  # bytes compared to recognise a copy as a prefix of its original
RETRY_S = 3600.0  # a refused or cut-short copy is tried again after this at the latest


def root() -> Path:
    return c3_home() / "archive"


def _problem() -> str | None:
    """Why the archive cannot be trusted now, or None (a missing folder is fine: ours to make)."""
    for folder in (c3_home(), root()):
        try:
            st = os.lstat(folder)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return f"{folder} cannot be examined ({exc.strerror})"
        if stat.S_ISLNK(st.st_mode) and folder != c3_home():
            return f"{folder} is a symlink"
        if not stat.S_ISLNK(st.st_mode):
            if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
                return f"{folder} belongs to another account (uid {st.st_uid})"
            if st.st_mode & 0o022:
                return f"{folder} can be written by other accounts (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def trusted() -> Path:
    """The archive's folder, once it is the user's own and no one else can write it; else
    UnsafeArchive, whose message says what to fix."""
    why = _problem()
    if why is not None:
        raise UnsafeArchive(
            f"refusing the archive of kept sessions: {why}, so anything in it may have been put there by "
            f"someone else. Make it yours and private (chmod 700 {c3_home()}), then try again."
        )
    return root()


def usable() -> Path | None:
    """The archive's folder for reading (listings, search), or None, warned once, when it is
    not ``trusted``: a listing goes on without the archive rather than show what was planted."""
    try:
        return trusted()
    except UnsafeArchive as exc:
        safefs.warn_once(exc)
        return None


def _lock(folder: Path) -> Path:
    return folder / ".archive"


def _side_files(folder: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """Regular files under a session's folder (sub-agents, tool results), never through a link."""
    for path, st in regular_files(os.fspath(folder)):
        yield Path(path), st


def preserve(
    transcript: str | os.PathLike[str],
    session: str,
    still: Callable[[], bool] | None = None,
    *,
    now: bool = False,
) -> int:
    """Preserve a session's transcript and its session folder's files; returns how many files
    were linked, copied or brought up to date (0: all current). ``still``: asked under the
    folder's lock (which ``release`` takes too) whether the session is still to be kept.
    ``now``: try even while backing off from a refused copy (a person just asked to keep it).
    Raises NoRoom (a copy refused or cut short, remembered for the back-off: see the module's
    docstring), OSError (a read-only disk, UnsafeState), or UnsafeArchive, with the originals
    untouched."""
    if not is_session_id(session):
        raise ValueError(f"not a session id: {session!r}")
    src, base = Path(transcript), root()
    if os.fspath(src).startswith(os.fspath(base) + os.sep):
        return 0  # it is the archive's own copy: the original is gone
    dst_dir = base / src.parent.name
    if _current(src, dst_dir, session):
        return 0
    trusted()
    refused = _refusals().get(session)
    if refused is not None and not now:
        _back_off(session, refused)
    changed = 0
    with disk.reported(dst_dir):
        safefs.ensure_dir(dst_dir)
        with locked(_lock(dst_dir)):
            if still is not None and not still():
                return 0
            try:
                changed += _keep(src, 1, dst_dir / f"{session}.jsonl", session)
                side = src.parent / session
                for path, _st in _side_files(side):
                    rel = path.relative_to(side)
                    changed += _keep(path, 1 + len(rel.parts), dst_dir / session / rel, session)
            except NoRoom as exc:
                _remember(session, exc, refused)
                raise
    if refused is not None:
        _record(session, None)
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


def _keep(src: Path, depth: int, dst: Path, session: str) -> int:
    """Bring ``dst`` (ours) up to date with ``src`` (Claude Code's; its last ``depth`` components
    opened without following a link), from the one descriptor of ``src``. A copy, or the bytes
    it lacks, only where there is room for them (NoRoom)."""
    try:
        fd, st = safefs.open_regular(src, depth=depth)
    except FileNotFoundError:
        return 0  # deleted meanwhile: what the archive has stays
    except NotRegularFile:
        return 0
    try:
        try:
            have = safefs.lstat(dst)
        except FileNotFoundError:
            have = None
        if have is not None:
            if not stat.S_ISREG(have.st_mode):
                raise UnsafeState(dst, safefs._kind(have.st_mode))
            if (have.st_dev, have.st_ino) == (st.st_dev, st.st_ino) or have.st_size == st.st_size:
                return 0  # the same file (a link), or a copy that is current
            if have.st_size < st.st_size and _is_prefix(fd, dst, have.st_size):
                with _room(dst.parent, st.st_size - have.st_size, session):
                    _append(fd, dst, have.st_size, st.st_size)
                return 1
            log.warning("%s differs from the archived copy %s (replaced?): the archive keeps its own", src, dst)
            return 0
        safefs.ensure_dir(dst.parent)
        with safefs.open_dir(dst.parent) as dfd:
            if dfd is not None:
                try:
                    if safefs.link_fd(fd, dfd, dst.name):
                        return 1
                except FileExistsError:
                    return 0  # another process preserved it first
            elif _link_by_name(fd, src, dst):
                return 1
        with _room(dst.parent, st.st_size, session):
            _copy(fd, dst, st.st_size)
        return 1
    finally:
        os.close(fd)


@contextmanager
def _room(folder: Path, need: int, session: str) -> Iterator[None]:
    """A copy of ``need`` bytes into ``folder``: refused (NoRoom) unless the filesystem keeps its
    reserve after it; a full disk during the copy is a NoRoom too (the copy removes its part)."""
    free, keep = disk.free_bytes(folder), disk.reserve(folder)
    if free is not None and need + keep > free:
        raise NoRoom(session, folder, need, free, keep, cut=False, retry_s=RETRY_S)
    try:
        yield
    except OSError as exc:
        if not disk.is_full(exc):
            raise
        raise NoRoom(session, folder, need, disk.free_bytes(folder) or 0, keep, cut=True, retry_s=RETRY_S) from exc


# ------------------------------------------------------------------ backing off a refused copy


class _Refusal(msgspec.Struct):
    id: str  # the session's
    need: int  # bytes the copy needed
    free: int  # bytes free on the archive's filesystem then
    at: float  # when (epoch seconds)
    cut: bool  # the copy was cut short by a full disk (else refused before writing)
    tries: int = 1


class _Refusals(msgspec.Struct):
    version: int = 1
    refused: list[_Refusal] = msgspec.field(default_factory=list)


_refused_here: dict[str, _Refusal] = {}  # what a full disk kept from being written


def _refusals_path() -> Path:
    return root() / ".refused.json"


def _refusals() -> dict[str, _Refusal]:
    """The remembered refusals, those of this process included; a bad entry counts for none."""
    try:
        found = jsondoc.read(_refusals_path(), _Refusals, _Refusals).refused
    except (OSError, C3Error, *DECODE_ERRORS):
        found = []
    out = {
        r.id: r
        for r in found
        if is_session_id(r.id) and r.need >= 0 and r.free >= 0 and r.tries >= 0 and math.isfinite(r.at)
    }
    for sid, r in _refused_here.items():
        if sid not in out or out[sid].at < r.at:
            out[sid] = r
    return out


def _back_off(session: str, r: _Refusal) -> None:
    """Raise NoRoom (from the record) while the back-off rule says to wait; return to try."""
    folder = root()
    free, keep, now = disk.free_bytes(folder), disk.reserve(folder), time.time()
    if free is None or not r.at <= now < r.at + RETRY_S:
        return  # an hour has passed (or the clock went back)
    if free >= (r.free + r.need if r.cut else r.need + keep):
        return  # the room is there now (a cut-short copy: its bytes were freed since)
    raise NoRoom(session, folder, r.need, free, keep, cut=r.cut, retry_s=RETRY_S)


def _remember(session: str, exc: NoRoom, before: _Refusal | None) -> None:
    tries = (before.tries if before else 0) + 1
    _record(session, _Refusal(session, exc.need, exc.free or 0, time.time(), exc.cut, tries))


def _record(session: str, r: _Refusal | None) -> None:
    """Remember a refused copy (None: forget it) in ``.refused.json``, and in this process, where
    a full disk may keep that file from being written."""
    if r is not None:
        _refused_here[session] = r
    else:
        _refused_here.pop(session, None)
        if not os.path.lexists(_refusals_path()):
            return

    def change(doc: _Refusals) -> None:
        doc.refused = [x for x in doc.refused if x.id != session] + ([r] if r is not None else [])

    try:
        jsondoc.update(_refusals_path(), _Refusals, _Refusals, change)
    except (OSError, C3Error, *DECODE_ERRORS):
        pass  # a full disk, a damaged file: this process remembers


_NO_LINK = (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP)


def _link_by_name(fd: int, src: Path, dst: Path) -> bool:
    """Where no descriptor can be linked (no openat, no /proc): link ``src`` by name, then check
    the link is the very file ``fd`` holds (a name swapped meanwhile is unlinked again, and the
    caller copies from ``fd`` instead). False when the filesystem cannot link."""
    try:
        os.link(src, dst, follow_symlinks=False)
    except FileExistsError:
        return True  # another process preserved it first
    except OSError as exc:
        if exc.errno in (*_NO_LINK, errno.ENOENT):
            return False
        raise
    made, have = os.lstat(dst), os.fstat(fd)
    if (made.st_dev, made.st_ino) != (have.st_dev, have.st_ino):
        os.unlink(dst)
        return False
    return True


def _copy(fd: int, dst: Path, size: int) -> bool:
    """A copy of the first ``size`` bytes into our state, whole or not at all: written under a
    temporary name beside ``dst``, synced, then linked into place, never over a file that
    appeared meanwhile (False: one did; another process copied first). A copy cut short (a full
    disk, Ctrl-C) leaves nothing behind; one a killed process left goes at the next copy."""
    tmp = dst.parent / f".{dst.name}.{os.urandom(8).hex()}.tmp"
    with safefs.open_dir(dst.parent) as dfd:
        disk.clear_stale_temps(dst.parent if dfd is None else dfd, dst.name)
    out = safefs.open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        _fill(fd, out, size)
        try:
            safefs.link(tmp, dst)
        except FileExistsError:
            return False
        return True
    finally:
        try:
            safefs.unlink(tmp)
        except OSError:
            pass


def _link_name_into(src: Path, fd: int, dfd: int, name: str) -> bool:
    """Where a descriptor cannot be linked (no /proc): link our archived file ``src`` by name
    into the folder ``dfd``, and keep the link only if it is the file ``fd`` holds."""
    if safefs._PROC_FD:
        return False
    try:
        os.link(src, name, dst_dir_fd=dfd, follow_symlinks=False)
    except OSError as exc:
        if isinstance(exc, FileExistsError):
            raise
        return False
    made, have = os.stat(name, dir_fd=dfd, follow_symlinks=False), os.fstat(fd)
    if (made.st_dev, made.st_ino) != (have.st_dev, have.st_ino):
        os.unlink(name, dir_fd=dfd)
        return False
    return True


def _copy_into(fd: int, dfd: int, name: str) -> bool:
    """The same into a folder of Claude Code's (``dfd``, opened without following a link): a
    temporary name beside ``name``, synced, linked into place by descriptor, never over a file."""
    tmp = f".{name}.{os.urandom(8).hex()}.tmp"
    disk.clear_stale_temps(dfd, name)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    out = os.open(tmp, flags, 0o600, dir_fd=dfd)
    try:
        _fill(fd, out)
        try:
            os.link(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
        except FileExistsError:
            return False
        return True
    finally:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass


def _fill(src: int, out: int, end: int | None = None) -> None:
    """``src`` (up to ``end``; None: all of it) into the new file ``out``, synced, ``out``
    closed (removing the half-made file on failure is the caller's: it knows its name)."""
    try:
        _pump(src, out, 0, end)
        os.fsync(out)
    finally:
        os.close(out)


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


def holds(transcript: str | os.PathLike[str], session: str) -> bool:
    """Does the archive hold this session's transcript (a regular file of ours, one ``lstat``)?"""
    try:
        return stat.S_ISREG(os.lstat(archived_path(transcript, session)).st_mode)
    except OSError:
        return False


def release(folder: str, session: str) -> int:
    """Remove a session's archive entry (its transcript and session folder's files); returns the
    bytes no other name held (freed). Only our own regular files are removed."""
    if not is_session_id(session) or "/" in folder or folder in ("", ".", ".."):
        raise ValueError("not an archive entry")
    base = trusted() / folder
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
    if session in _refusals():  # no longer kept: no copy to wait for
        _record(session, None)
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
    is written). The folders below ``target_dir`` are opened without following a link, and each
    file is linked (or copied) from its one descriptor into the folder's."""
    trusted()
    base = archived.parent
    pairs = [(archived, Path(f"{session}.jsonl"))]
    pairs += [(p, Path(session) / p.relative_to(base / session)) for p, _ in _side_files(base / session)]
    if dry_run:
        return [os.fspath(target_dir / rel) for _, rel in pairs if not os.path.lexists(target_dir / rel)]
    put: list[str] = []
    # Every folder first (opened without following a link, made where missing): one that is a
    # link refuses the whole restore before any file is put back, not half of it.
    folders: dict[Path, int] = {}
    try:
        for _, rel in pairs:
            if rel.parent not in folders:
                folders[rel.parent] = safefs.open_folder_below(target_dir / rel.parent, len(rel.parts) - 1, create=True)
        for src, rel in pairs:
            if _put_back(src, folders[rel.parent], rel.name):
                put.append(os.fspath(target_dir / rel))
    finally:
        for dfd in folders.values():
            os.close(dfd)
    return put


def _put_back(src: Path, dfd: int, name: str) -> bool:
    """Link (or copy) our archived ``src`` as ``name`` in Claude Code's folder ``dfd``, if no
    file has that name there; True when it was put back."""
    try:
        os.lstat(name, dir_fd=dfd)
        return False  # there already: never overwritten
    except FileNotFoundError:
        pass
    fd = safefs.open_file(src, os.O_RDONLY)  # ours: no link followed, regular only
    try:
        try:
            linked = safefs.link_fd(fd, dfd, name) or _link_name_into(src, fd, dfd, name)
        except FileExistsError:
            return False
        if not linked and not _copy_into(fd, dfd, name):
            return False
        # Claude Code deletes by mtime at start-up: a transcript put back with its old mtime
        # would be deleted by the very `claude --resume` it was put back for.
        os.utime(name, dir_fd=dfd, follow_symlinks=False)
        return True
    finally:
        os.close(fd)


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
    id: str  # the session's id
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
