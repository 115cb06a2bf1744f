"""Keeping sessions past Claude Code's cleanup: which rows are kept (a keep/unkeep mark, else the
policy), preserving them in the archive, and warning before the others go.

The policy (``keep`` in config; default ``["noted", "linked"]``) keeps what c3async already knows
matters: a session with a note (``noted``), one linked to tasks or decisions (``linked``), one
with a snapshot (``snapshot``), or everything (``all``). A keep or unkeep mark overrides it.
Every listing brings the archive up to date for its kept rows (a link costs one ``lstat``; a copy
on another device gets its new bytes), so a session kept weeks ago is still current when Claude
Code deletes its transcript; from then on the listing reads it from the archive
(``archived: true``), with its marks, notes, links and totals, and resumes it through
``c3async resume``.
"""

from __future__ import annotations

import logging
import os
import shlex
import time
from pathlib import Path

import msgspec

from .. import archive, config, retention
from ..errors import C3Error
from .resume import resume_command
from .rows import Row

__all__ = ("POLICIES", "ResumePlan", "apply", "kept_by_policy", "on_mark", "prepare_resume")

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
    rules: dict[str, retention.Retention] = {}
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
        rule = rules.get(row.cwd)
        if rule is None:
            rule = rules[row.cwd] = retention.effective(row.cwd)
        left = retention.days_left(row.mtime_ns / 1e9, rule, now)
        if left is not None and left <= retention.WARN_DAYS:
            row.expires_in_days = left
            row.hints.append(f"expires in {left}d")


def check_unkeep(project: str, session_id: str, by: str) -> None:
    """Refuse an unkeep that would delete the only copy left of a transcript (Claude Code deleted
    the original) unless it says so: a person confirms (``--release``, the Hub's dialog); an
    agent cannot."""
    from .view import row_for

    row = row_for(project, session_id)
    if row is not None and (row.archived or archive.only_copy(row.path, session_id)):
        how = "run `c3async mark unkeep ID --release` or use the Hub" if by == "agent" else "add --release"
        why = "Claude Code already deleted" if row.archived else "Claude Code's folder has a shorter or different"
        raise C3Error(
            f"{why} {session_id}: the archive holds the only whole copy, and unkeep would "
            f"delete it for good. To do that, {how}."
        )


def on_mark(project: str, session_id: str, op: str) -> None:
    """Right after a keep mark: preserve the session now (not at the next listing); after an
    unkeep: release its archive entry. The mark is written either way; a failure here says so."""
    from .view import row_for

    row = row_for(project, session_id)
    if row is None:
        return
    try:
        if op == "keep":
            if not row.archived:
                archive.preserve(row.path, row.id)
        else:
            archive.release(os.path.basename(os.path.dirname(row.path)), row.id)
    except (OSError, ValueError, C3Error) as exc:
        what = "preserve it in the archive" if op == "keep" else "remove its archive entry"
        raise C3Error(f"the {op} mark on {session_id} is written, but could not {what}: {exc}") from None


class ResumePlan(msgspec.Struct):
    session: str
    cwd: str
    restored: list[str]  # files put back (or, for a dry run, that would be) into Claude Code's folder
    project: str = ""  # the project the session belongs to
    elsewhere: bool = False  # not the project asked for


def prepare_resume(project: str, ref: str, *, dry_run: bool = False) -> ResumePlan:
    """What ``c3async resume`` runs: the session's folder and id, after putting an archived
    transcript (and its sub-agents' files) back where Claude Code looks for it. Nothing there is
    overwritten; a folder that is gone is an error that says how to bring it back. ``dry_run``:
    only say what would be put back (``resume --print``). The session may be another
    project's (a registered one, or any of Claude Code's folders)."""
    from ..catalog.locate import projects_root
    from .refs import find
    from .view import row_for

    found = find(project, ref, anywhere=True)
    session, home = found.id, found.project
    row = row_for(home, session)
    if row is None:
        raise C3Error(f"no transcript of session {session} in {home} or in the archive")
    if row.cwd_gone or not os.path.isdir(row.cwd):
        raise C3Error(
            f"{row.cwd} is gone; bring it back first: {resume_command(row.cwd, session, row.branch, gone=True)}"
        )
    restored: list[str] = []
    if row.archived:
        folder = projects_root() / os.path.basename(os.path.dirname(row.path))
        try:
            restored = archive.restore(Path(row.path), folder, session, dry_run=dry_run)
        except OSError as exc:
            raise C3Error(f"could not put {session} back into {folder}: {exc}") from None
    return ResumePlan(session, row.cwd, restored, home, found.elsewhere)


def _still_kept(project: str, session_id: str) -> bool:
    """Asked under the archive's lock, just before a listing preserves a row it judged kept: an
    unkeep written since (by another process, which then releases the entry under that lock)
    wins, so a listing never puts back what an unkeep took out."""
    from ..marks import MarkBook

    state = MarkBook(project).refresh().get(session_id)
    return state is None or state.keep is None or state.keep.keep


def _preserve(project: str, row: Row) -> None:
    try:
        archive.preserve(row.path, row.id, still=lambda: _still_kept(project, row.id))
    except (OSError, ValueError, C3Error) as exc:
        key = f"{row.id}:{type(exc).__name__}"
        if key not in _warned:  # once a process: a full disk must not flood every listing
            _warned.add(key)
            log.warning("could not preserve kept session %s in the archive: %s", row.id, exc)
