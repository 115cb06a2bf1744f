"""Moved and renamed project folders: which folder a gone project plausibly moved to, and
``c3async projects --move OLD NEW``, which makes OLD's sessions NEW's, and undoes that.

Claude Code keeps a folder's sessions under the old folder's name when the folder moves (its
``/cd`` moves only the session it runs in). ``--move OLD NEW`` (any folders: git or not; OLD may
be gone or still there, NEW must be a folder):

- puts OLD's sessions into NEW's transcript folder in each Claude Code root
  (``catalog.relink``: hard links, never overwriting, nothing changed in place), so ``claude
  --resume <id>`` run in NEW continues them there, as do its picker and ``--continue``;
- records the move in ``$C3_HOME/moves.json`` (``catalog.moves``): the catalog then looks in
  OLD's folders for NEW's project and accepts OLD as their cwd, and their rows show NEW as their
  cwd and resume there;
- folds OLD's state (its ``.c3`` if OLD is still there, and what was kept for it under
  ``$C3_HOME/state``) into NEW's, leaving OLD's as it was: marks and notes follow their sessions
  (they are keyed by session id), tasks and decisions join NEW's;
- makes OLD's registry entry NEW's (its added time kept), or registers NEW.

``--move NEW OLD`` undoes a move: the files it added go (only those, and only while each is
still the file it put there), then the record. Marks, notes and tasks folded into NEW stay there;
OLD's own were never changed.

Detection (``suggestions``): a project whose folder is gone, and an existing project (registered
or found) that is plausibly it: the same ``.c3`` project id (a moved folder carries its ``.c3``)
or the same git root commit. A gone folder cannot be asked anything, so what identifies each
existing project is kept in ``$C3_HOME/cache/identities.json``, computed again only when its
signature changes (the folder, its ``project.json``, its git ``HEAD``): a project that was
listed by ``c3async projects`` before its folder moved is recognised after.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

import msgspec

from ..catalog import moves as records
from ..catalog import relink
from ..catalog.gitroot import root_commits
from ..catalog.locate import ClaudeRoot
from ..ground import jsondoc, safefs, stateroot
from ..ground.errors import DECODE_ERRORS, BadArgument, C3Error, Conflict, NotFound
from ..ground.home import c3_home
from ..ground.locking import locked
from ..ground.paths import canonical, git_common_dir
from ..ground.project import Project, resolve
from ..stores import claude_dirs, registry

__all__ = ("Moved", "Suggestion", "move", "remember", "suggestions")

log = logging.getLogger("c3async.sessions")


class Moved(msgspec.Struct):
    """What ``--move`` did: ``undone`` False for a move, True for an undo."""

    old: str
    new: str
    undone: bool = False
    sessions: int = 0  # OLD's sessions that are NEW's rows now
    linked: int = 0  # files put into NEW's transcript folders as hard links
    copied: int = 0  # ... as copies (no link could be made)
    present: int = 0  # files there already from an earlier move
    kept: list[str] = msgspec.field(default_factory=list)  # left as they were, and why
    skipped: list[str] = msgspec.field(default_factory=list)  # Claude Code roots left out, and why
    folded: list[str] = msgspec.field(default_factory=list)  # state folders folded into NEW's
    registered: bool = False  # NEW is registered (OLD's entry became NEW's, or a new one)
    removed: int = 0  # an undo: files taken out of NEW's transcript folders


# ---------------------------------------------------------------- the paths given


def _folder(given: str, what: str) -> str:
    if not given or "\x00" in given:
        raise BadArgument(f"{what} is empty or holds a NUL character: give a folder")
    path = canonical(os.path.abspath(os.path.expanduser(given)))
    if len(path) > records.MAX_PATH:
        raise BadArgument(f"{what} is longer than {records.MAX_PATH} characters: no folder has that name")
    return path


def _no_target(given: str, new: str) -> str | None:
    """Why NEW cannot take another folder's sessions (None: it can)."""
    plain = os.path.abspath(os.path.expanduser(given))
    if os.path.islink(plain):
        return f"{plain} is a symlink (to {new}): give the folder itself if that is the one you mean"
    if not os.path.isdir(new):
        return f"{new} is not a folder: NEW must exist (move the folder first, then its sessions)"
    if new == os.sep:
        return "/ is not a project's folder"
    if new == canonical(os.path.expanduser("~")):
        return f"{new} is your home folder: its sessions are your own, not a project's"
    for top in (c3_home(), *(r.path for r in claude_dirs.roots())):
        top_path = canonical(os.fspath(top))
        if new == top_path or new.startswith(top_path + os.sep):
            return f"{new} is in {top_path}, c3async's or Claude Code's own folder, not a project's"
    return None


# ---------------------------------------------------------------- moving


def move(old_given: str, new_given: str) -> Moved:
    """``--move OLD NEW``: undo the move of NEW to OLD if one is recorded, else move (see the
    module's docstring). Raises a C3Error naming the problem; one move at a time (a lock)."""
    old, new = _folder(old_given, "OLD"), _folder(new_given, "NEW")
    if old == new:
        raise BadArgument(f"OLD and NEW are the same folder ({old})")
    if new.startswith(old.rstrip(os.sep) + os.sep):
        raise BadArgument(f"NEW ({new}) is inside OLD ({old}): a folder cannot move into itself")
    with locked(c3_home() / "moves"):
        held = [m for m in jsondoc.read(records.path(), records.Moves, records.Moves).moves if not records.problem(m)]
        back = next((m for m in reversed(held) if m.old == new and m.new == old), None)
        if back is not None:
            return _undo(back)
        return _move(old, new, new_given, held)


def _move(old: str, new: str, new_given: str, held: list[records.Move]) -> Moved:
    why = _no_target(new_given, new)
    if why is not None:
        raise BadArgument(f"not moved: {why}")
    earlier = next((m for m in reversed(held) if m.old == old), None)
    if earlier is not None and earlier.new != new:
        raise Conflict(
            f"not moved: {old} was moved to {earlier.new} already (`c3async projects --move {earlier.new} {old}` "
            "undoes that)"
        )
    away = next((m for m in reversed(held) if m.old == new), None)
    if away is not None:
        raise Conflict(f"not moved: {new} itself was moved to {away.new}; move its sessions back first")
    if new in records.moved_into(old):
        raise Conflict(f"not moved: {new}'s sessions were moved into {old} before; undo that first")
    roots = claude_dirs.roots()
    linked = relink.link(old, new, (old, *records.moved_into(old)), roots)
    if not linked.sessions:
        looked = ", ".join(str(r.projects) for r in roots)
        why = "; ".join(linked.skipped) or f"Claude Code has no sessions of {old} (looked in {looked})"
        raise NotFound(f"not moved: {why}")
    _record(old, new, earlier, linked, roots)
    out = Moved(old, new, sessions=len(linked.sessions), present=len(linked.present), skipped=linked.skipped)
    out.linked = sum(1 for a in linked.added if a.linked)
    out.copied = len(linked.added) - out.linked
    out.kept = [f"{path}: {new}'s transcript folder has another file of that name" for path in linked.kept]
    target = resolve(new)  # NEW as a project, once: registered, then OLD's state folded into it
    out.registered = _register(old, target)
    out.folded = _fold(old, target)
    return out


def _record(
    old: str, new: str, earlier: records.Move | None, linked: relink.Linked, roots: tuple[ClaudeRoot, ...]
) -> None:
    """Write the record (into the earlier one of the same move, run again); if that fails, the
    files just added are taken out again, so none is left that no record names."""
    fresh = records.new_move(old, new)

    def change(doc: records.Moves) -> None:
        mine = next((m for m in doc.moves if earlier is not None and m.id == earlier.id), None)
        if mine is None:
            mine = fresh
            doc.moves.append(mine)
        # links found there already are recorded too: a move cut short (Ctrl-C) before its record
        # was written, run again, leaves none that an undo would not take out
        held = {a.path for a in mine.added}
        mine.added += [a for a in (*linked.added, *linked.present) if a.path not in held]
        mine.made += [f for f in linked.made if f not in mine.made]

    try:
        records.update(change)
    except BaseException:
        relink.unlink(records.Move(fresh.id, old, new, fresh.at, linked.added, linked.made), roots)
        raise


def _register(old: str, new: Project) -> bool:
    try:
        if not registry.rename(old, new.root):
            registry.register(new)
        return True
    except C3Error as exc:  # a registry that does not parse: said, the move stands
        log.warning("%s was not registered: %s", new, exc)
        return False


def _fold(old: str, new: Project) -> list[str]:
    """OLD's state folders folded into NEW's (OLD's own ``.c3`` if it is still there, and what was
    kept for it under ``$C3_HOME``); each is left as it was."""
    state = new.state
    sources = [Path(old) / ".c3", stateroot.fallback_state(old)]
    out = []
    for src in sources:
        if src == state or not os.path.isdir(src) or os.path.islink(src):
            continue
        done = stateroot.fold_copy(src, state)
        if done is not None and (any(done.lines.values()) or done.records or done.copied or done.pm_items):
            out.append(os.fspath(src))
    return out


def _undo(move: records.Move) -> Moved:
    roots = claude_dirs.roots()
    done = relink.unlink(move, roots)

    def change(doc: records.Moves) -> None:
        doc.moves = [m for m in doc.moves if m.id != move.id]

    records.update(change)
    return Moved(move.new, move.old, undone=True, removed=len(done.removed), kept=done.kept)


# ---------------------------------------------------------------- detection


class Suggestion(msgspec.Struct):
    """A gone project's folder (``old``) and the existing project it plausibly moved to."""

    old: str
    new: str
    why: str  # "the same project id" or "the same git root commit"
    others: int = 0  # other existing projects that match as well


class _Identity(msgspec.Struct, array_like=True):
    sig: list[int | None]
    id: str | None
    roots: list[str]


class _Identities(msgspec.Struct):
    format: str
    version: int
    folders: dict[str, _Identity]


FORMAT = "c3async.identities"
VERSION = 1
MAX_BYTES = 8 << 20
MAX_KEPT = 4096  # folders the cache knows


def _cache() -> Path:
    return c3_home() / "cache" / "identities.json"


def _load() -> dict[str, _Identity]:
    try:
        doc = msgspec.json.decode(safefs.read_bytes(_cache(), MAX_BYTES + 1), type=_Identities)
    except (OSError, *DECODE_ERRORS):
        return {}
    return doc.folders if doc.format == FORMAT and doc.version == VERSION else {}


def _stamp(path: str) -> list[int | None]:
    st = safefs.stamp(path, follow=True)
    return [st[0], st[2]] if st is not None else [None, None]


def _signature(root: str) -> list[int | None]:
    """What the identity of ``root`` depends on: the folder itself, its ``project.json``, and the
    ``HEAD`` of its repository (a checkout or a history rewritten changes it)."""
    try:
        st = os.stat(root)
    except (OSError, ValueError):
        return []
    common = git_common_dir(root)
    head = _stamp(os.path.join(common, "HEAD")) if common else [None, None]
    return [st.st_dev, st.st_ino, *_stamp(os.path.join(root, ".c3", safefs.PROJECT_FILE)), *head]


def _identities(present: Iterable[str]) -> dict[str, _Identity]:
    """The identity of every existing project (computed where its signature changed), and the
    last one known of every folder that is gone; the cache keeps exactly those."""
    held = _load()
    out: dict[str, _Identity] = {}
    changed = False
    for root in present:
        sig = _signature(root)
        known = held.get(root)
        if known is None or known.sig != sig:
            known = _Identity(sig, stateroot.project_id(root), list(root_commits(root) or ()))
            changed = True
        out[root] = known
    for root, was in held.items():  # what a gone folder was is kept (for a later listing, an undo)
        if root not in out and len(out) < MAX_KEPT and not os.path.isdir(root):
            out[root] = was
    if changed or set(out) != set(held):
        try:
            jsondoc.write_atomic(_cache(), msgspec.json.encode(_Identities(FORMAT, VERSION, out)), fsync=False)
        except OSError:
            pass  # a cache: the next listing computes it again
    return out


def remember(root: str) -> None:
    """Note what ``root`` is (its project id, its git root commits) while it exists, so that once
    it is moved ``projects`` can say where to: called where a project is registered, so a person
    who never ran ``projects`` before moving the folder is still told. One stat pass when known."""
    held = _load()
    sig = _signature(root)
    known = held.get(root)
    if not sig or (known is not None and known.sig == sig):
        return
    held[root] = _Identity(sig, stateroot.project_id(root), list(root_commits(root) or ()))
    if len(held) > MAX_KEPT:
        return  # full: ``projects`` prunes it (present and gone folders only)
    try:
        jsondoc.write_atomic(_cache(), msgspec.json.encode(_Identities(FORMAT, VERSION, held)), fsync=False)
    except OSError:
        pass


def suggestions(present: list[str], gone: list[str]) -> dict[str, Suggestion]:
    """For each gone project folder, the existing project it plausibly moved to (see the
    module's docstring); none for a folder that matches nothing."""
    known = _identities(present)
    out: dict[str, Suggestion] = {}
    for old in gone:
        was = known.get(old)
        if was is None or (was.id is None and not was.roots):
            continue
        found: list[tuple[int, str, str]] = []
        for new in present:
            now = known.get(new)
            if now is None or new == old:
                continue
            if was.id is not None and now.id == was.id:
                found.append((0, new, "the same project id"))
            elif set(was.roots) & set(now.roots):
                found.append((1, new, "the same git root commit"))
        if found:
            found.sort()
            out[old] = Suggestion(old, found[0][1], found[0][2], len(found) - 1)
    return out
