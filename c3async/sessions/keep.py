"""Keeping sessions past Claude Code's cleanup: which rows are kept (a keep/unkeep mark, else the
policy), preserving them in the archive, and warning before the others go.

The policy (``keep`` in config; default ``["noted", "linked"]``) keeps what c3async already knows
matters: a session with a note (``noted``), one linked to tasks or decisions (``linked``), one
with a snapshot (``snapshot``), or everything (``all``). A keep or unkeep mark overrides it.
Every listing brings the archive up to date for its kept rows (a link costs one ``lstat``; a copy
on another device gets its new bytes), so a session kept weeks ago is still current when Claude
Code deletes its transcript; from then on the listing reads it from the archive
(``archived: true``), with its marks, notes, links and totals, and resumes it through
``c3async resume``. A copy the archive's disk has no room for is refused and backed off
(``archive``): the listing says so once a process, and goes on.
"""

from __future__ import annotations

import logging
import os
import shlex
import time

from ..ground.errors import C3Error
from ..stores import archive, config, retention
from ..stores.marks import MarkBook
from .rows import Row

__all__ = ("POLICIES", "apply", "hush", "kept_by_policy")

log = logging.getLogger("c3async.sessions")

POLICIES = config.KEEP_TERMS
_warned: set[str] = set()


def kept_by_policy(row: Row, policy: list[str]) -> str | None:
    """The policy term that keeps this row, or None."""
    if "all" in policy:
        return "all"
    if "noted" in policy and row.note is not None:
        return "noted"
    if "linked" in policy and (row.links.tasks or row.links.decisions):
        return "linked"
    if "snapshot" in policy and row.links.snapshot is not None:
        return "snapshot"
    return None


def apply(project: str, rows: list[Row], keeps: dict[str, bool], now: float | None = None) -> None:
    """Set ``kept``, ``archived`` and ``expires_in_days`` on one project's rows (marks and links
    joined already), preserve the kept ones, and add the ``expires in Nd`` hint to the others."""
    now = time.time() if now is None else now
    policy = config.load(project).keep
    base = os.fspath(archive.root()) + os.sep
    rules: dict[tuple[str, str | None], retention.Retention] = {}
    for row in rows:
        word = keeps.get(row.id)
        if word is not None:
            row.kept, row.kept_by = word, "mark" if word else None
        else:
            term = kept_by_policy(row, policy)
            row.kept, row.kept_by = term is not None, (f"policy: {term}" if term else None)
        row.archived = row.path.startswith(base)
        if row.archived:
            row.resume = f"cd {shlex.quote(row.cwd)} && c3async resume {row.id}"
            continue
        if row.kept:
            _preserve(project, row)
            continue
        if row.live:
            continue  # being written to: no hints, and its mtime moves with every line
        rule = rules.get((row.cwd, row.root))
        if rule is None:
            rule = rules[(row.cwd, row.root)] = retention.effective(row.cwd, row.root)
        left = retention.days_left(row.mtime_ns / 1e9, rule, now)
        if left is not None and left <= retention.WARN_DAYS:
            row.expires_in_days = left
            row.hints.append(f"expires in {left}d")


def hush(session_id: str) -> None:
    """No listing of this process warns that it could not preserve this session: the door that
    just kept it says so itself."""
    _warned.add(session_id)


def _still_kept(project: str, session_id: str) -> bool:
    """Asked under the archive's lock, just before a listing preserves a row it judged kept: an
    unkeep written since (by another process, which then releases the entry under that lock)
    wins, so a listing never puts back what an unkeep took out."""
    state = MarkBook(project).refresh().get(session_id)
    return state is None or state.keep is None or state.keep.keep


def _preserve(project: str, row: Row) -> None:
    try:
        archive.preserve(row.path, row.id, still=lambda: _still_kept(project, row.id))
    except (OSError, ValueError, C3Error) as exc:
        if row.id not in _warned:  # once a process: a full disk must not flood every listing
            _warned.add(row.id)
            if isinstance(exc, archive.NoRoom):  # it names the session, the bytes and the room
                log.warning("%s", exc)
            else:
                log.warning("could not preserve kept session %s in the archive: %s", row.id, exc)
