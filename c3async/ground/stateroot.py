"""A project's state folder, and folding into it what earlier versions wrote elsewhere.

``project_state`` is where a project's files live: ``<project_root>/.c3``, or its fallback under
``$C3_HOME/state/<slug>`` when the root cannot be written (warned once a process).

Before a repository and its worktrees shared one state root (``paths.project_root``), each
worktree kept its own ``<worktree>/.c3``; and a root that could not be written keeps its state
under ``$C3_HOME/state/<slug>`` until it can. The first time a process resolves a root
(``project_state``), or when a door asks (``fold_worktrees``), every such folder is folded
into the root's state, under the root's ``fold`` lock, and then renamed aside to
``<name>.folded-<UTC time>`` (never deleted), so each is folded once. What is folded:

- ``session_marks.jsonl``, ``activity.jsonl``, ``session_stats.jsonl``: each complete line that
  parses as a JSON object is appended to the root's log unless the identical line (the exact
  bytes) is already there; torn and unparseable lines are skipped. Lines keep their order.
  (Marks fold by time, so an older mark landing after a newer one does not win.)
- ``sessions/*.json`` (C3 records) and ``config.json``: copied where the root has no file of
  that name; the root's own copy wins.
- ``pm/pm.json``: merged into the root's under the document's own lock. Tasks, milestones and
  decisions by ``id``: a new id is added; on a clash the item with the later ``updated`` / ``ts``
  (milestones: ``completed_at`` / ``archived_at`` / ``created``) wins, ties to the root, the
  other's fields the winner lacks are kept, ``sessions`` links are unioned and time entries are
  unioned (one per start and session). Events are unioned by their exact encoded form and
  sorted by ``ts``. Fields and lists this version does not know are kept. The root's previous
  file is kept as ``pm.json.bak``.
- ``live/``, ``cache/`` and lock files are not folded: they are rebuilt.

Every rule is idempotent, so a fold cut short, or run by two processes at once, or run again
over a folder that could not be renamed aside, adds nothing twice. A problem (an unreadable
file, a ``pm.json`` that does not parse, a root that cannot be written) leaves the folder in
place, logs a warning, and never fails the caller; the fold is tried again by the next process.
A symlinked ``.c3`` (or an entry of the wrong kind inside one) is never followed: it is left
alone, with a warning.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from . import jsonl, memo, safefs
from .errors import DECODE_ERRORS, UnsafeState
from .home import c3_home
from .jsondoc import backup_path
from .locking import locked
from .paths import git_common_dir, linked_worktrees, project_root, state_slug, warn_once

__all__ = (
    "LOGS",
    "Fold",
    "adopt",
    "fallback_state",
    "fold_copy",
    "fold_into",
    "fold_worktrees",
    "found_only",
    "merge_pm",
    "project_id",
    "project_state",
    "root_state",
    "state_of",
)

log = logging.getLogger("c3async.stateroot")

LOGS = ("session_marks.jsonl", "activity.jsonl", "session_stats.jsonl")
COPIED = ("config.json",)
PM_FILE = ("pm", "pm.json")
ASIDE = ".folded-"
# pm.json lists whose items must carry these string fields (the stores' required fields).
_PM_REQUIRED = {"tasks": ("id", "title"), "milestones": ("id", "name"), "decisions": ("id", "text")}
_STAMPS = ("updated", "ts", "completed_at", "archived_at", "created")
_LINKS = ("sessions",)


@dataclass
class Fold:
    """What one folder's fold did."""

    source: Path
    target: Path
    aside: Path | None = None  # where the source was renamed; None: left in place
    lines: dict[str, int] = field(default_factory=dict)  # log name -> lines appended
    records: int = 0
    copied: list[str] = field(default_factory=list)
    pm_items: int = 0  # tasks, milestones, decisions and events added or merged
    problems: list[str] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.aside is not None


class _Problem(Exception):
    """Something that leaves the source folder in place (the fold is retried later), carried up
    to ``_fold_source``, which notes it in the fold's problems: it never leaves this module (so
    it is not in ``ground.errors``'s tree)."""


def fold_worktrees(project: str) -> list[Fold]:
    """Fold every worktree's old ``.c3`` (and a leftover fallback under ``$C3_HOME/state``) into
    the state root of ``project``. Never raises; returns what each folder's fold did."""
    root = project_root(project)
    return fold_into(root, root_state(root))


def fold_into(root: str, state: Path) -> list[Fold]:
    """Fold every foreign state folder of ``root`` into ``state`` (see the module docstring)."""
    try:
        sources = _sources(root, state)
        if not sources:
            return []
        results = []
        with locked(state / "fold"):
            for src in sources:
                result = _fold_source(src, state)
                if result is not None:
                    results.append(result)
        return results
    except Exception as exc:  # a migration never breaks its caller
        warn_once(f"could not fold older c3async state into {state}: {exc}; it stays where it is")
        log.debug("fold into %s failed", state, exc_info=True)
        return []


def fold_copy(src: Path, state: Path) -> Fold | None:
    """Fold the state folder ``src`` (another project's: a folder that was moved or renamed)
    into ``state`` by the same rules, leaving ``src`` as it was (not renamed aside: it is still
    its folder's). Never raises; None when ``src`` is no folder of state."""
    try:
        with locked(state / "fold"):
            return _fold_source(src, state, aside=False)
    except Exception as exc:
        warn_once(f"could not fold {src} into {state}: {exc}; it stays where it is")
        log.debug("fold of %s into %s failed", src, state, exc_info=True)
        return None


# ---------------------------------------------------------------- which folders


def _kind(path: Path) -> str | None:
    try:
        mode = os.lstat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISLNK(mode):
        return "link"
    return "dir" if stat.S_ISDIR(mode) else "other"


def _sources(root: str, state: Path) -> list[Path]:
    found: list[Path] = []
    common = git_common_dir(root)
    if common is not None:
        for wt in linked_worktrees(common):
            if wt == root:
                continue
            candidate = Path(wt) / ".c3"
            if candidate == state:
                continue
            kind = _kind(candidate)
            if kind not in ("link", "dir") or project_root(wt) != root:
                continue  # nothing there, or a folder that is not a checkout of this repository
            if kind == "link":
                warn_once(
                    f"{candidate} is a symlink: c3async never follows one, so whatever it leads to was "
                    f"not folded into {state}. Move what you need by hand, then remove the link."
                )
            else:
                found.append(candidate)
    spare = fallback_state(root)
    if spare != state and _kind(spare) == "dir":
        found.append(spare)  # written while the root could not be: the root can be now
    return found


# ---------------------------------------------------------------- one folder


def _fold_source(src: Path, dst: Path, *, aside: bool = True) -> Fold | None:
    if _kind(src) != "dir":
        return None  # folded by another process while we waited for the lock
    fold = Fold(source=src, target=dst)
    for name in LOGS:
        try:
            fold.lines[name] = _fold_log(src / name, dst / name)
        except _Problem as exc:
            fold.problems.append(str(exc))
    try:
        fold.records = _fold_records(src / "sessions", dst / "sessions")
    except _Problem as exc:
        fold.problems.append(str(exc))
    for name in COPIED:
        try:
            if _copy_if_absent(src / name, dst / name):
                fold.copied.append(name)
        except _Problem as exc:
            fold.problems.append(str(exc))
    try:
        fold.pm_items = _fold_pm(src.joinpath(*PM_FILE), dst.joinpath(*PM_FILE))
    except _Problem as exc:
        fold.problems.append(str(exc))
    if fold.problems:
        warn_once(
            f"{src} was not folded into {dst}: {'; '.join(fold.problems)}. It stays in place, "
            "and the fold is tried again (nothing already folded is added twice)."
        )
        return fold
    if not aside:
        return fold
    try:
        fold.aside = _rename_aside(src)
    except OSError as exc:
        fold.problems.append(f"cannot rename it aside: {exc}")
        warn_once(
            f"{src} was folded into {dst} but could not be renamed aside ({exc}); the fold is "
            "tried again (nothing already folded is added twice)."
        )
        return fold
    log.info(
        "folded %s into %s (%s, sessions/ +%d, pm items +%d%s); the old folder is kept as %s",
        src,
        dst,
        ", ".join(f"{name} +{n}" for name, n in fold.lines.items()),
        fold.records,
        fold.pm_items,
        "".join(f", {name} copied" for name in fold.copied),
        fold.aside,
    )
    return fold


def _rename_aside(src: Path) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for n in range(1000):
        dst = src.with_name(f"{src.name}{ASIDE}{stamp}" + (f"-{n}" if n else ""))
        if not os.path.lexists(dst):
            safefs.rename(src, dst)
            _ignore_all(dst)
            return dst
    raise FileExistsError(f"no free name beside {src}")


def _ignore_all(folder: Path) -> None:
    """A ``.gitignore`` of ``*`` in the renamed folder: a checkout that ignores ``.c3/`` must not
    show it as untracked, nor have ``git worktree remove`` refuse because of it (its content is
    folded into the root). Best effort: an existing file is never replaced."""
    _with_gitignore(folder, b"# c3async: this state was folded into the project's root .c3; kept as a backup\n*\n")


def _with_gitignore(folder: Path, text: bytes = safefs.GITIGNORE, *, named: bool = False) -> None:
    """``safefs.ignore_in_git`` for ``folder``, opened without following a link (``named``: and
    ``safefs.name_project``, for a project's own ``.c3`` made before projects had an id)."""
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    if not nofollow or os.open not in os.supports_dir_fd:
        return
    try:
        dfd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | nofollow)
    except OSError:
        return
    try:
        safefs.ignore_in_git(dfd, text)
        if named:
            safefs.name_project(dfd)
    finally:
        os.close(dfd)


_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def project_id(root: str) -> str | None:
    """The id in ``<root>/.c3/project.json`` (``safefs.name_project``), None when there is none
    that reads as one (a link, a file too big, not an object, not a uuid)."""
    try:
        doc = msgspec.json.decode(safefs.read_bytes(Path(root) / ".c3" / safefs.PROJECT_FILE, 4096))
    except (OSError, *DECODE_ERRORS):
        return None
    value = doc.get("id") if isinstance(doc, dict) else None
    return value.lower() if isinstance(value, str) and _ID.fullmatch(value.lower()) else None


def _read_source(path: Path) -> bytes | None:
    """A source file's bytes; None when missing, or not a regular file (warned, not followed)."""
    try:
        return safefs.read_bytes(path)
    except FileNotFoundError:
        return None
    except UnsafeState as exc:
        safefs.warn_once(exc)
        return None
    except OSError as exc:
        raise _Problem(f"cannot read {path}: {exc}") from None


def _digest(line: bytes) -> bytes:
    return hashlib.blake2b(line, digest_size=16).digest()


def _fold_log(src: Path, dst: Path) -> int:
    """Append the source's good lines the root's log lacks; returns how many were appended."""
    data = _read_source(src)
    if not data:
        return 0
    lines = []
    for line in data.split(b"\n")[:-1]:  # after the last newline: a torn write
        if not line.strip():
            continue
        try:
            if not isinstance(msgspec.json.decode(line), dict):
                continue
        except DECODE_ERRORS:
            continue
        lines.append(line)
    if not lines:
        return 0
    try:
        with jsonl.appending(dst) as log:  # the lock every appender of this log takes
            existing = safefs.pread_all(log.fd, 0, log.size)
            seen = {_digest(line) for line in existing.split(b"\n")[:-1]}
            new = []
            for line in lines:
                d = _digest(line)
                if d not in seen:
                    seen.add(d)
                    new.append(line + b"\n")
            if new:
                log.write(b"".join(new))  # a torn tail is healed first, as every appender does
            return len(new)
    except OSError as exc:
        raise _Problem(f"cannot append to {dst}: {exc}") from None


def _exists(path: Path) -> bool:
    try:
        safefs.lstat(path)
        return True
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise _Problem(f"cannot examine {path}: {exc}") from None


def _copy_if_absent(src: Path, dst: Path) -> bool:
    if _exists(dst):
        return False
    data = _read_source(src)
    if data is None:
        return False
    try:
        safefs.write_atomic(dst, data, fsync=False)
    except OSError as exc:
        raise _Problem(f"cannot write {dst}: {exc}") from None
    return True


def _fold_records(src: Path, dst: Path) -> int:
    try:
        names = safefs.listdir(src)
    except FileNotFoundError:
        return 0
    except UnsafeState as exc:
        safefs.warn_once(exc)
        return 0
    except OSError as exc:
        raise _Problem(f"cannot list {src}: {exc}") from None
    copied = 0
    for name in sorted(names):
        if name.endswith(".json") and not name.startswith("."):  # not a temp file
            copied += _copy_if_absent(src / name, dst / name)
    return copied


# ---------------------------------------------------------------- pm.json


def _pm_problem(doc: Any) -> str | None:
    """Why ``doc`` is not a pm document the stores can read, or None."""
    if not isinstance(doc, dict):
        return "not a JSON object"
    version = doc.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool):
        return "its version is not a number"
    for key, fields in _PM_REQUIRED.items():
        items = doc.get(key, [])
        if not isinstance(items, list):
            return f"{key} is not a list"
        for item in items:
            if not isinstance(item, dict) or not all(isinstance(item.get(f), str) for f in fields):
                return f"an entry of {key} lacks {' or '.join(fields)}"
    events = doc.get("events", [])
    if not isinstance(events, list):
        return "events is not a list"
    for event in events:
        if not isinstance(event, dict) or not _is_number(event.get("ts")) or not isinstance(event.get("action"), str):
            return "an event lacks ts or action"
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _pm_doc(data: bytes, path: Path, then: str = "") -> dict:
    """A pm.json's document as decoded JSON, or a _Problem naming what is wrong with it."""
    try:
        doc = msgspec.json.decode(data)
    except DECODE_ERRORS as exc:
        raise _Problem(f"{path} does not parse ({exc}){then}") from None
    why = _pm_problem(doc)
    if why:
        raise _Problem(f"{path} is not a task document ({why}){then}")
    return doc


def _fold_pm(src: Path, dst: Path) -> int:
    data = _read_source(src)
    if data is None:
        return 0
    theirs = _pm_doc(data, src)
    try:
        safefs.ensure_dir(dst.parent)
        with locked(dst):  # the lock of every pm.json change
            try:
                old: bytes | None = safefs.read_bytes(dst)
            except FileNotFoundError:
                old = None
            if old is None:
                safefs.write_atomic(dst, data)
                return sum(len(theirs.get(k, [])) for k in (*_PM_REQUIRED, "events"))
            ours = _pm_doc(old, dst, "; repair it first")
            if ours.get("version", 1) != theirs.get("version", 1):
                raise _Problem(
                    f"{src} (format version {theirs.get('version', 1)}) and {dst} (version "
                    f"{ours.get('version', 1)}) differ: upgrade c3async, then try again"
                )
            before = msgspec.json.encode(ours)
            count = merge_pm(ours, theirs)
            after = msgspec.json.encode(ours)
            if after != before:
                safefs.write_atomic(backup_path(dst), old, fsync=False)
                safefs.write_atomic(dst, msgspec.json.format(after, indent=1) + b"\n")
            return count
    except OSError as exc:
        raise _Problem(f"cannot update {dst}: {exc}") from None


def merge_pm(ours: dict[str, Any], theirs: dict[str, Any]) -> int:
    """Merge the pm document ``theirs`` into ``ours`` in place (the rules in the module's
    docstring); returns how many of their items were added or changed ours. Idempotent."""
    count = 0
    for key, value in theirs.items():
        if key == "version":
            continue
        if key not in ours:
            ours[key] = value
            count += len(value) if isinstance(value, list) else 1
            continue
        mine = ours[key]
        if not isinstance(mine, list) or not isinstance(value, list):
            continue  # a value both have, not a list: the root's stands
        if key != "events" and _has_ids(mine) and _has_ids(value):
            merged, n = _merge_by_id(mine, value)
        else:
            merged = _union(mine, value)
            n = len(merged) - len(mine)
            if key == "events":
                merged.sort(key=_event_ts)
        ours[key] = merged
        count += n
    return count


def _event_ts(event: Any) -> float:
    ts = event.get("ts") if isinstance(event, dict) else None
    return float(ts) if isinstance(ts, (int, float)) and not isinstance(ts, bool) else 0.0


def _has_ids(items: list[Any]) -> bool:
    return all(isinstance(i, dict) and isinstance(i.get("id"), (str, int)) for i in items)


def _encoded(item: Any) -> bytes:
    return msgspec.json.encode(item)


def _union(a: list[Any], b: list[Any]) -> list[Any]:
    """``a``, then the items of ``b`` whose encoded form is not in it."""
    seen = {_encoded(x) for x in a}
    out = list(a)
    for item in b:
        e = _encoded(item)
        if e not in seen:
            seen.add(e)
            out.append(item)
    return out


def _merge_by_id(mine: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    out = list(mine)
    index = {item["id"]: i for i, item in enumerate(out)}
    changed = 0
    for item in theirs:
        i = index.get(item["id"])
        if i is None:
            index[item["id"]] = len(out)
            out.append(item)
            changed += 1
            continue
        merged = _merge_item(out[i], item)
        if _encoded(merged) != _encoded(out[i]):
            out[i] = merged
            changed += 1
    return out, changed


def _stamp(item: dict[str, Any]) -> float:
    return max((float(item[k]) for k in _STAMPS if _is_number(item.get(k))), default=0.0)


def _merge_item(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """One item both documents hold: the later wins, ties to ours; nothing of either is lost
    that the winner has no value for, and links and time entries of both are kept."""
    winner, loser = (theirs, ours) if _stamp(theirs) > _stamp(ours) else (ours, theirs)
    merged = dict(winner)
    for key, value in loser.items():
        merged.setdefault(key, value)
    for key in _LINKS:
        a, b = ours.get(key), theirs.get(key)
        if isinstance(a, list) and isinstance(b, list):
            merged[key] = _union(a, b)
    a, b = ours.get("time"), theirs.get("time")
    if isinstance(a, list) and isinstance(b, list):
        merged["time"] = _union_time(a, b)
    return merged


def _union_time(a: list[Any], b: list[Any]) -> list[Any]:
    """Time entries of both: one per (start, session), a closed entry over an open one."""
    out: dict[Any, Any] = {}
    for entry in [*a, *b]:
        if not isinstance(entry, dict):
            out.setdefault(_encoded(entry), entry)
            continue
        key: Any = (entry.get("start"), entry.get("session"))
        try:
            hash(key)
        except TypeError:
            key = _encoded(entry)
        held = out.get(key)
        if held is None or (held.get("end") is None and entry.get("end") is not None):
            out[key] = entry
    return list(out.values())


# ---------------------------------------------------------------- the state folder


def fallback_state(root: str) -> Path:
    """Where the state of ``root`` lives when its folder cannot be written."""
    return c3_home() / "state" / state_slug(root)


def _writable(root: str) -> str | None:
    """None when ``<root>/.c3`` can be used, else why not."""
    own = os.path.join(root, ".c3")
    try:
        st = os.lstat(own)
    except FileNotFoundError:
        st = None
    except (OSError, ValueError):
        return "it cannot be examined"
    if st is not None:
        if not stat.S_ISDIR(st.st_mode):
            return None  # a link or a file named .c3: safefs refuses it by name, never routed around
        return None if os.access(own, os.W_OK | os.X_OK) else f"{own} is read-only"
    if not os.path.isdir(root):
        return None  # nothing to fall back from: reads find no state, writes fail and say so
    return None if os.access(root, os.W_OK | os.X_OK) else "it is read-only"


_states: dict[str, tuple[tuple[int, int, int, int] | None, Path]] = memo.kept({})
_resolved: set[str] = memo.kept(set())


def project_state(project: str | os.PathLike[str]) -> Path:
    """The state folder of ``project``: ``<project_root(project)>/.c3``, or its fallback under
    ``$C3_HOME/state`` when the root cannot be written (warned once). The first call for a root
    in a process folds older state of its worktrees into it."""
    return state_of(project_root(project))


def state_of(root: str) -> Path:
    """``project_state`` of a root already resolved (``project.Project.state``)."""
    state = root_state(root)
    if root not in _resolved and not (root in _found and state == fallback_state(root)):
        _resolved.add(root)  # first: the fold below resolves paths of this root too
        _first_use(root, state)  # (a found project's folders are not touched: no fold there)
    return state


# roots listed because Claude Code has sessions there, that c3async was never used in
_found: set[str] = memo.kept(set())


def found_only(roots: Iterable[str]) -> None:
    """These roots are listed only because Claude Code has sessions there: until c3async is
    used there (``adopt``), what a listing keeps of them (caches, folds, token totals) lives
    under ``$C3_HOME/state/<slug>``, and nothing is written into their folders."""
    for root in roots:
        if root not in _found:
            _found.add(root)
            _states.pop(root, None)


def adopt(root: str) -> None:
    """c3async is used in ``root`` now (registered, served, marked): its state folder is its own
    ``.c3`` from here on, where the next process folds what was kept for it meanwhile."""
    if root in _found:
        _found.discard(root)
        _states.pop(root, None)
        _resolved.discard(root)


def root_state(root: str) -> Path:
    """The state folder of a root as ``project_root`` returns it (no fold is started here)."""
    try:
        st = os.lstat(root)
        ident: tuple[int, int, int, int] | None = (st.st_dev, st.st_ino, st.st_mode, st.st_uid)
    except (OSError, ValueError):
        ident = None
    hit = _states.get(root)
    if hit is not None and hit[0] == ident:
        state = hit[1]
    elif root in _found and not os.path.lexists(os.path.join(root, ".c3")):
        # said nowhere: a found project is meant to be left alone (a gone one has no folder)
        state = fallback_state(root)
        _states[root] = (ident, state)
    else:
        why = _writable(root)
        if why is None:
            state = Path(root) / ".c3"
        else:
            state = fallback_state(root)
            warn_once(
                f"the project folder {root} cannot be written ({why}): c3async keeps its state in "
                f"{state} instead of {Path(root) / '.c3'}."
            )
        _states[root] = (ident, state)
    return state


def _first_use(root: str, state: Path) -> None:
    """Fold what earlier versions left in the root's worktrees (never fails the caller)."""
    if state == Path(root) / ".c3" and os.path.isdir(state):
        # a .c3 made before c3async wrote these: out of git from now on, and with a project id
        _with_gitignore(state, named=True)
    try:
        fold_into(root, state)
    except Exception:  # a migration must never break a listing or a write
        log.warning("could not fold older c3async state into %s", state, exc_info=True)
