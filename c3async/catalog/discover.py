"""Every folder Claude Code keeps sessions in, and the folders (cwds) those sessions ran in: how
c3async knows every project from the first command, registered or not.

A transcript folder's name is the slug of its sessions' cwd, and a slug cannot be read back
(every character outside ``[A-Za-z0-9]`` became ``-``). So the cwd is read from the first lines
of the folder's newest session (one head window, as the catalog reads it), once, and kept per
folder in ``$C3_HOME/cache/folders.json`` until the folder changes (a session added or removed).
A folder whose sessions ran in several cwds (two paths that share a slug) is told so by the
listings, which read every session's cwd anyway (``ProjectScan.other_cwds``): ``learn`` keeps
those cwds beside the folder's. It is a cache: losing it costs one head a folder.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

import msgspec

from ..ground import safefs
from ..ground.errors import DECODE_ERRORS
from ..ground.home import c3_home
from ..ground.jsondoc import write_atomic
from .extract import HEAD as HEAD_MODE
from .extract import scan
from .listing import folder_candidates, newest_first
from .locate import ClaudeRoot

__all__ = ("MAX_CWDS", "cwds_of_folders", "learn")

FORMAT = "c3async.folders"
VERSION = 1
HEAD = 64 * 1024  # the first lines of a session: where its cwd is written
TRIES = 3  # sessions of a folder read for a cwd (the newest may hold only metadata)
MAX_CWDS = 8  # cwds one folder may name (two paths sharing a slug is already rare)
MAX_BYTES = 16 << 20


class _Folder(msgspec.Struct, array_like=True):
    sig: tuple[int, int]  # (inode, mtime_ns) of the folder when its cwd was read
    cwds: list[str]


class _File(msgspec.Struct):
    format: str
    version: int
    folders: dict[str, _Folder]


def _path() -> Path:
    return c3_home() / "cache" / "folders.json"


def _load() -> dict[str, _Folder]:
    try:
        doc = msgspec.json.decode(safefs.read_bytes(_path(), MAX_BYTES + 1), type=_File)
    except (OSError, *DECODE_ERRORS):
        return {}
    return doc.folders if doc.format == FORMAT and doc.version == VERSION else {}


def _save(folders: dict[str, _Folder]) -> None:
    try:
        write_atomic(_path(), msgspec.json.encode(_File(FORMAT, VERSION, folders)), fsync=False)
    except OSError:
        pass  # a cache: the next command reads the heads again


# The folders each projects folder held when last listed, while its stat holds (a folder made
# or removed moves it): a poller (the Hub's, once a second) stats the folders alone, not every
# entry again. A listing this recent may miss a folder made in the same clock tick: not kept.
_listed: dict[str, tuple[tuple[int, int, int], list[str]]] = {}
SETTLE_NS = 2_000_000_000


def _folders(roots: Iterable[ClaudeRoot]) -> list[tuple[Path, tuple[int, int]]]:
    """(folder, its (inode, mtime_ns)) for every folder in every root's projects folder. A
    symlinked folder is followed, as ``locate`` follows it; one that cannot be examined costs
    itself only."""
    out = []
    for root in roots:
        try:
            st = os.stat(root.projects)
            sig = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
            known = _listed.get(str(root.projects))
            if known is not None and known[0] == sig:
                names = known[1]
            else:
                with os.scandir(root.projects) as it:
                    names = [e.name for e in it if _is_dir(e)]
                if st.st_mtime_ns < time.time_ns() - SETTLE_NS:
                    _listed[str(root.projects)] = (sig, names)
        except OSError:
            continue
        for name in names:
            path = root.projects / name
            try:
                st = os.stat(path)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                out.append((path, (st.st_ino, st.st_mtime_ns)))
    return out


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _cwd_of(folder: Path) -> str | None:
    """The cwd the folder's newest sessions recorded (their first lines); None when none says."""
    for cand in newest_first(folder_candidates(folder))[:TRIES]:
        try:
            fd, _st = safefs.open_regular(cand.path)
        except OSError:
            continue
        try:
            head = safefs.pread_all(fd, 0, HEAD)
        except OSError:
            continue
        finally:
            os.close(fd)
        cwd = scan(head, 0, from_start=True, mode=HEAD_MODE, at_eof=len(head) < HEAD).cwd
        if cwd and len(cwd) <= 4096 and "\x00" not in cwd and os.path.isabs(cwd):
            return cwd
    return None


def cwds_of_folders(roots: Iterable[ClaudeRoot], *, save: bool = True) -> dict[Path, list[str]]:
    """Every transcript folder of these roots, and the cwds its sessions ran in (empty: none
    said). Reads one head per folder that is new or changed since the last call; saves what it
    learnt (unless ``save`` is false: a command that only says where sessions are makes no file)."""
    held = _load()
    out: dict[Path, list[str]] = {}
    changed = False
    for folder, sig in _folders(roots):
        known = held.get(str(folder))
        if known is not None and tuple(known.sig) == sig:
            out[folder] = known.cwds
            continue
        cwds = list(known.cwds) if known is not None else []
        cwd = _cwd_of(folder)
        if cwd is not None and cwd not in cwds:
            cwds = [cwd, *cwds][:MAX_CWDS]
        held[str(folder)] = _Folder(sig, cwds)
        out[folder] = cwds
        changed = True
    gone = [name for name in held if Path(name) not in out]
    for name in gone:  # a folder Claude Code removed, or a root no longer read
        del held[name]
    if save and (changed or gone):
        _save(held)
    return out


def learn(seen: Mapping[Path, Iterable[str]]) -> None:
    """Keep cwds a listing met in these folders (sessions of another path sharing the slug)."""
    held = _load()
    changed = False
    for folder, cwds in seen.items():
        known = held.get(str(folder))
        if known is None:
            continue
        for cwd in cwds:
            if cwd not in known.cwds and len(known.cwds) < MAX_CWDS:
                known.cwds.append(cwd)
                changed = True
    if changed:
        _save(held)
