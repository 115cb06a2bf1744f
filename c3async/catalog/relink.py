"""The files of a move (``c3async projects --move OLD NEW``): OLD's sessions put into NEW's
transcript folder of the same Claude Code root, where ``claude --resume <id>``, ``--continue``
and the picker run in NEW look first; and taken out again when the move is undone.

Nothing of Claude Code's is changed in place, and nothing is overwritten:

- each session of OLD's folders that the catalog lists as OLD's (its recorded cwd is OLD, or a
  folder moved into OLD before) is hard-linked into NEW's folder under its own name: the same
  file under a second name, so it costs no space and a session resumed in NEW grows under both
  names. Its sub-agent transcripts and tool results (``<id>/...``) likewise. Where no link can
  be made (another device, no ``/proc`` to link a descriptor through), it is copied with its
  mtime (Claude Code's cleanup goes by it);
- a name NEW's folder has already is left as it is (a file of NEW's own, or one an earlier move
  put there); a NEW folder that is a link, or not a folder, is refused, never written through;
- each source is opened once, without following a link below its transcript folder, and the
  link or copy is made from that descriptor (``safefs.link_fd``), as the archive does.

What was put there is returned as ``Added`` records (``catalog.moves``). ``unlink`` removes a
record's files only while each is still the file that was put there: a link whose original in
OLD's folder is still the same file (so nothing is lost: OLD's name keeps it, with whatever a
resume appended), a copy with the same identity, size, mtime and bytes. A path of the record
outside NEW's transcript folder in a root read now (or a source outside OLD's) is never acted
on: the record is a file, and a file can be edited. The folders it made go when empty.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

import msgspec

from ..ground import disk, safefs
from ..ground.errors import DiskFull, NotRegularFile
from .listing import MAX_DEPTH, candidates, regular_files
from .locate import MAX_SLUG_LENGTH, ClaudeRoot, folders_of, slug
from .moves import Added, Move
from .read import read_transcript
from .scan import skip_reason

__all__ = ("Linked", "Unlinked", "link", "unlink")

log = logging.getLogger("c3async.catalog")

CHUNK = 1 << 20
_NON_ALNUM = re.compile(r"[^A-Za-z0-9]")


class Linked(msgspec.Struct):
    sessions: list[str] = msgspec.field(default_factory=list)  # put into NEW's folders (or there already)
    added: list[Added] = msgspec.field(default_factory=list)
    made: list[str] = msgspec.field(default_factory=list)  # folders made
    present: list[Added] = msgspec.field(default_factory=list)  # there already as the same file (a move run before)
    kept: list[str] = msgspec.field(default_factory=list)  # names NEW's folder holds as another file: left
    skipped: list[str] = msgspec.field(default_factory=list)  # roots left out, and why


class Unlinked(msgspec.Struct):
    removed: list[str] = msgspec.field(default_factory=list)
    kept: list[str] = msgspec.field(default_factory=list)  # "<path>: why it stays"
    folders: list[str] = msgspec.field(default_factory=list)  # folders removed (empty)


# ---------------------------------------------------------------- linking


def _target(root: ClaudeRoot, new: str) -> Path | str:
    """NEW's transcript folder in ``root`` (an existing one, else the one Claude Code would
    make), or why there is none c3async can name."""
    name = slug(new)
    existing = folders_of(root.projects, new)
    if existing:
        return next((f for f in existing if f.name == name), existing[0])
    if len(name) > MAX_SLUG_LENGTH:
        return (
            f"{new}'s path is too long for c3async to name its folder in {root.projects} (Claude Code "
            "adds a hash of its own): run claude there once, then move again"
        )
    return root.projects / name


def link(old: str, new: str, accepted: tuple[str, ...], roots: Iterable[ClaudeRoot]) -> Linked:
    """Put OLD's sessions (those whose recorded cwd is one of ``accepted``) into NEW's folder of
    every root that has any. What cannot be done in a root (its NEW folder is a link or not a
    folder, a full disk) is said in ``skipped``; what was put there before stays in ``added``."""
    out = Linked()
    for root in roots:
        sources = folders_of(root.projects, old)
        if not sources:
            continue
        target = _target(root, new)
        if isinstance(target, str):
            out.skipped.append(target)
            continue
        if any(os.path.realpath(f) == os.path.realpath(target) for f in sources):
            continue  # two paths that share a folder: their sessions are in it already
        try:
            _link_root(sources, target, accepted, out)
        except OSError as exc:
            out.skipped.append(f"{target}: {getattr(exc, 'strerror', None) or exc}")
    return out


def _link_root(sources: list[Path], target: Path, accepted: tuple[str, ...], out: Linked) -> None:
    folders: dict[tuple[str, ...], int] = {}
    try:
        for cand in candidates(sources):  # one file a session (OLD's folders may be several)
            try:
                rec = read_transcript(cand.path, cand.size, cand.mtime_ns)
            except OSError:
                continue
            if skip_reason(rec, accepted) is not None:
                continue  # not OLD's (another path sharing the folder), or no session
            sid = cand.session_id
            files: list[tuple[Path, int, tuple[str, ...]]] = [(Path(cand.path), 1, ())]
            side = cand.folder / sid
            for path, _st in regular_files(os.fspath(side)):
                rel = Path(path).relative_to(side).parts
                files.append((Path(path), 1 + len(rel), (sid, *rel[:-1])))
            for src, depth, where in files:
                dfd = folders.get(where)
                if dfd is None:
                    dfd = folders[where] = _open_made(target, where, out)
                _put(src, depth, dfd, target.joinpath(*where, src.name), out)
            if sid not in out.sessions:
                out.sessions.append(sid)
    finally:
        for dfd in folders.values():
            os.close(dfd)


def _open_made(target: Path, where: tuple[str, ...], out: Linked) -> int:
    """The folder ``target/where`` opened without following a link at any level below the
    projects folder, made where missing (what was made is noted, for the undo)."""
    for depth in range(len(where) + 1):
        here = target.joinpath(*where[:depth])
        if not os.path.lexists(here):
            out.made.append(os.fspath(here))
    return safefs.open_folder_below(target.joinpath(*where), 1 + len(where), create=True)


def _put(src: Path, depth: int, dfd: int, dst: Path, out: Linked) -> None:
    try:
        fd, st = safefs.open_regular(src, depth=depth)
    except (FileNotFoundError, NotRegularFile):
        return  # gone meanwhile, or not a file: nothing to put
    try:
        try:
            have = os.lstat(dst.name, dir_fd=dfd)
        except FileNotFoundError:
            have = None
        if have is not None:
            if (have.st_dev, have.st_ino) == (st.st_dev, st.st_ino):  # its second name already
                out.present.append(
                    Added(os.fspath(dst), os.fspath(src), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, True)
                )
            else:
                out.kept.append(os.fspath(dst))
            return
        try:
            linked = safefs.link_fd(fd, dfd, dst.name)
        except FileExistsError:
            out.kept.append(os.fspath(dst))  # made meanwhile: not ours to replace
            return
        if linked:
            out.added.append(
                Added(os.fspath(dst), os.fspath(src), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, True)
            )
            return
        free, reserve = disk.free_bytes(dst.parent), disk.reserve(dst.parent)
        if free is not None and st.st_size + reserve > free:  # Claude Code needs its disk too
            raise DiskFull(dst.parent, free, f"no room to copy {src} ({st.st_size:,} bytes) into {dst.parent}")
        with disk.reported(dst.parent):
            done = _copy(fd, st, dfd, dst.name)
        if done is None:
            out.kept.append(os.fspath(dst))
        else:
            made, digest = done
            out.added.append(
                Added(
                    os.fspath(dst),
                    os.fspath(src),
                    made.st_dev,
                    made.st_ino,
                    made.st_size,
                    made.st_mtime_ns,
                    False,
                    digest,
                )
            )
    finally:
        os.close(fd)


def _copy(fd: int, st: os.stat_result, dfd: int, name: str) -> tuple[os.stat_result, str] | None:
    """A copy of ``fd`` as ``name`` in the folder ``dfd`` with ``st``'s mtime, whole or not at
    all (a temporary name linked into place, never over a file: None when one appeared)."""
    tmp = f".{name}.{os.urandom(8).hex()}.tmp"
    disk.clear_stale_temps(dfd, name)
    out = os.open(
        tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600, dir_fd=dfd
    )
    try:
        digest = hashlib.blake2b(digest_size=16)
        try:
            pos = 0
            while data := os.pread(fd, CHUNK, pos):
                digest.update(data)
                view = memoryview(data)
                while view:
                    view = view[os.write(out, view) :]
                pos += len(data)
            os.fsync(out)
            os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
            made = os.fstat(out)
        finally:
            os.close(out)
        try:
            os.link(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
        except FileExistsError:
            return None
        return made, digest.hexdigest()
    finally:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass


# ---------------------------------------------------------------- undoing


def _below(path: str, roots: Iterable[ClaudeRoot], cwd: str) -> tuple[Path, tuple[str, ...]] | None:
    """(the projects folder, the parts below it) when ``path`` is a file inside a transcript
    folder of ``cwd`` in one of ``roots``: the folder named as Claude Code names ``cwd``'s, and
    nothing that climbs out (no ``..``, no empty part, not deeper than a session's files go)."""
    if not isinstance(path, str) or "\x00" in path or not os.path.isabs(path) or os.path.normpath(path) != path:
        return None
    want = slug(cwd)
    for root in roots:
        top = os.fspath(root.projects)
        if not path.startswith(top + os.sep):
            continue
        parts = tuple(path[len(top) + 1 :].split(os.sep))
        if len(parts) < 2 or len(parts) > MAX_DEPTH + 3 or any(p in ("", ".", "..") for p in parts):
            return None
        folder = parts[0]
        if len(want) > MAX_SLUG_LENGTH:
            ok = folder[:MAX_SLUG_LENGTH] == want[:MAX_SLUG_LENGTH]
        else:
            ok = _NON_ALNUM.sub("-", folder) == want  # the exact slug, or another build's separators
        return (root.projects, parts) if ok else None
    return None


def _lstat_in(top: Path, parts: tuple[str, ...]) -> tuple[int, os.stat_result] | None:
    """(the descriptor of the file's folder, the file's lstat); None when it is not there."""
    try:
        dfd = safefs.open_folder_below(top.joinpath(*parts[:-1]), len(parts) - 1)
    except (FileNotFoundError, NotRegularFile, NotADirectoryError):
        return None
    try:
        return dfd, os.lstat(parts[-1], dir_fd=dfd)
    except OSError:
        os.close(dfd)
        return None


def _digest(dfd: int, name: str) -> str | None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), dir_fd=dfd)
    except OSError:
        return None
    try:
        digest = hashlib.blake2b(digest_size=16)
        pos = 0
        while data := os.pread(fd, CHUNK, pos):
            digest.update(data)
            pos += len(data)
        return digest.hexdigest()
    finally:
        os.close(fd)


def _why_kept(a: Added, move: Move, roots: list[ClaudeRoot], dfd: int, st: os.stat_result) -> str | None:
    """Why the file ``a`` names stays (None: it is the very file put there, and removing it
    loses nothing)."""
    if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (a.dev, a.ino):
        return "it is no longer the file the move put there"
    if not a.linked:
        if (st.st_size, st.st_mtime_ns) != (a.size, a.mtime_ns) or _digest(dfd, os.path.basename(a.path)) != a.digest:
            return "it changed since it was copied there (a session resumed in the new folder?)"
        return None
    source = _below(a.source, roots, move.old)
    held = _lstat_in(*source) if source is not None else None
    if held is None:
        return "its original in the old folder's transcripts is gone: it is the only copy"
    os.close(held[0])
    if (held[1].st_dev, held[1].st_ino) != (a.dev, a.ino):
        return "its original in the old folder's transcripts is another file now: it is the only copy"
    return None


def unlink(move: Move, roots: Iterable[ClaudeRoot]) -> Unlinked:
    """Take out what the move put into NEW's folders (see the module's docstring)."""
    roots = list(roots)
    out = Unlinked()
    for a in move.added:
        where = _below(a.path, roots, move.new)
        if where is None:
            out.kept.append(f"{a.path}: not in a transcript folder of {move.new} (not touched)")
            continue
        held = _lstat_in(*where)
        if held is None:
            continue  # gone already (Claude Code's cleanup, a person)
        dfd, st = held
        try:
            why = _why_kept(a, move, roots, dfd, st)
            if why is None:
                os.unlink(where[1][-1], dir_fd=dfd)
                out.removed.append(a.path)
            else:
                out.kept.append(f"{a.path}: {why}")
        except OSError as exc:
            out.kept.append(f"{a.path}: {exc.strerror or exc}")
        finally:
            os.close(dfd)
    for folder in sorted(move.made, key=len, reverse=True):  # the deepest first
        where = _below(folder + os.sep + "-", roots, move.new)  # as the folder of a file in it
        if where is None:
            continue
        top, parts = where
        try:
            dfd = safefs.open_folder_below(top.joinpath(*parts[:-2]), len(parts) - 2)
        except OSError:
            continue
        try:
            os.rmdir(parts[-2], dir_fd=dfd)  # only when empty
            out.folders.append(folder)
        except OSError:
            pass
        finally:
            os.close(dfd)
    return out
