"""Folders a person moved or renamed: ``$C3_HOME/moves.json``, written by ``c3async projects
--move OLD NEW`` (``sessions.moves``).

Claude Code keeps a folder's sessions under the slug of the folder's path, and keeps them there
when the folder moves: a session of OLD stays in OLD's transcript folder, its lines saying OLD.
A move record says that OLD's sessions are NEW's from now on: ``locate`` looks in OLD's folders
for NEW's project and accepts OLD as their cwd (``moved_into``), and a row of such a session shows
NEW as its cwd and resumes there (``renamed``). Moves chain (A moved to B, then B to C: C owns
A's and B's sessions), never in a loop.

The file is read as a stranger's input would be: a record whose paths are not absolute and
normal, or that moves a folder onto itself, counts for nothing (said once), and a file that does
not parse counts as no moves for the listings (said once) while ``--move`` refuses to change it.
What a record says it ``added`` is only ever acted on by ``catalog.relink``, which checks it.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import msgspec

from ..ground import jsondoc, memo, safefs
from ..ground.errors import DECODE_ERRORS
from ..ground.home import c3_home

__all__ = ("Added", "Move", "Moves", "load", "moved_into", "new_move", "path", "renamed", "update")

log = logging.getLogger("c3async.catalog")

MAX_PATH = 4096
MAX_MOVES = 1000  # records read: more is no person's doing
MAX_CHAIN = 64  # moves followed from one folder (A to B to C...)
MAX_BYTES = 64 << 20

R = TypeVar("R")


class Added(msgspec.Struct):
    """One file ``--move`` put into NEW's transcript folder: a hard link of ``source`` (the file
    of OLD's folder), else a copy of it (``digest``: blake2b of the bytes copied). Its identity
    when put there: an undo removes it only while it is still that very file."""

    path: str
    source: str
    dev: int
    ino: int
    size: int
    mtime_ns: int
    linked: bool
    digest: str = ""


class Move(msgspec.Struct):
    id: str
    old: str
    new: str
    at: float
    added: list[Added] = msgspec.field(default_factory=list)
    made: list[str] = msgspec.field(default_factory=list)  # transcript folders it created


class Moves(msgspec.Struct):
    version: int = 1
    moves: list[Move] = msgspec.field(default_factory=list)


def path() -> Path:
    return c3_home() / "moves.json"


def _usable(p: object) -> bool:
    return (
        isinstance(p, str)
        and 0 < len(p) <= MAX_PATH
        and "\x00" not in p
        and os.path.isabs(p)
        and os.path.normpath(p) == p
        and p != os.sep
    )


def problem(move: Move) -> str | None:
    """Why a record counts for nothing (None: it counts)."""
    if not _usable(move.old) or not _usable(move.new):
        return "its folders are not absolute, normal paths"
    if move.old == move.new or move.new.startswith(move.old.rstrip(os.sep) + os.sep):
        return "it moves a folder onto or into itself"
    return None


_held: tuple[tuple[int, int, int] | None, tuple[Move, ...]] | None = None
_said: set[str] = memo.kept(set())


@memo.on_forget
def _forget() -> None:
    global _held
    _held = None


def _say(message: str) -> None:
    if message not in _said:
        _said.add(message)
        log.warning("%s", message)


def load() -> tuple[Move, ...]:
    """The records that count, oldest first. Read again only when the file changed (one
    ``lstat`` a call); a file that does not parse, or is a link, counts as none (said once)."""
    global _held
    sig = safefs.stamp(path())
    if _held is not None and _held[0] == sig:
        return _held[1]
    found: tuple[Move, ...] = ()
    if sig is not None:
        try:
            doc = msgspec.json.decode(safefs.read_bytes(path(), MAX_BYTES + 1), type=Moves)
        except FileNotFoundError:
            doc = Moves()
        except (OSError, *DECODE_ERRORS) as exc:
            _say(f"{path()} is not read ({exc}): no moved folder is followed until it is repaired")
            doc = Moves()
        good = []
        for move in doc.moves[:MAX_MOVES]:
            why = problem(move)
            if why is None:
                good.append(move)
            else:
                _say(f"a record of {path()} counts for nothing: {why}")
        found = tuple(good)
    _held = (sig, found)
    return found


def _targets() -> dict[str, str]:
    """OLD -> NEW for every record that counts (the latest record of a folder wins)."""
    return {m.old: m.new for m in load()}


def renamed(folder: str) -> str | None:
    """Where ``folder`` (or the folder it lies in) was moved, following moves to the last one;
    None when it was not moved."""
    targets = _targets()
    if not targets:
        return None
    here, seen = folder, {folder}
    for _ in range(MAX_CHAIN):
        new = targets.get(here)
        if new is None:
            base = next((old for old in targets if here.startswith(old.rstrip(os.sep) + os.sep)), None)
            if base is None:
                break
            new = targets[base] + here[len(base.rstrip(os.sep)) :]
        if new in seen:
            break  # a loop: the last folder before it stands
        seen.add(new)
        here = new
    return None if here == folder else here


def moved_into(root: str) -> tuple[str, ...]:
    """Every folder moved into ``root``, directly or along a chain of moves (nearest first)."""
    sources: dict[str, list[str]] = {}
    for old, new in _targets().items():
        sources.setdefault(new, []).append(old)
    if not sources:
        return ()
    out: list[str] = []
    todo = [root]
    while todo and len(out) < MAX_CHAIN:
        for old in sources.get(todo.pop(0), ()):
            if old != root and old not in out:
                out.append(old)
                todo.append(old)
    return tuple(out)


def new_move(old: str, new: str) -> Move:
    return Move(uuid.uuid4().hex, old, new, time.time())


def update(change: Callable[[Moves], R]) -> R:
    """Change the records under the file's lock (``jsondoc.update``): a file that does not parse
    is refused (CorruptDocument), never overwritten; a link in its place is refused too."""
    return jsondoc.update(path(), Moves, Moves, change, backup=True)
