"""What a door does to one session once it is found: mark it (a keep also preserves it in the
archive, an unkeep may release its entry), link it to a task, and bring it back to resume it.
Above ``refs`` (what was typed -> a session) and ``view`` (its row). And what the doors do to the
sessions near Claude Code's cleanup, no listing needed (``keep``): ``survey`` one project,
``keep_expiring`` (keep them all), ``last_chance`` (the SessionStart hook's pass)."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import NamedTuple

import msgspec

from ..catalog.listing import candidates
from ..catalog.locate import config_home, locate, projects_root
from ..ground.errors import BadArgument, C3Error, Conflict, DiskFull, NoRoom, NotFound, Unavailable, UnknownSession
from ..ground.project import Project
from ..stores import archive, registry
from ..stores.marks import TAG_OPS, Mark, MarkBook, check_mark_text, clean_tags, write_keeps, write_mark
from ..tasks import actions
from . import keep
from .refs import Found, find
from .resume import resume_command
from .view import extra_cwds, row_for

__all__ = (
    "HOOK_BUDGET_S",
    "KeptExpiring",
    "KeptNow",
    "Marked",
    "ResumePlan",
    "check_unkeep",
    "keep_expiring",
    "last_chance",
    "mark",
    "on_mark",
    "prepare_resume",
    "run_task",
    "survey",
)

log = logging.getLogger("c3async.sessions")

HOOK_BUDGET_S = 2.0  # the SessionStart hook's pass: Claude Code's cleanup starts ~5 s after it starts
EXPIRING_REASON = "expiring: kept before Claude Code's cleanup"


class Marked(NamedTuple):
    """A mark written, and where its session was found (its project's marks hold it)."""

    mark: Mark
    found: Found


def mark(
    project: Project,
    ref: str | None,
    op: str,
    *,
    host: str | None = None,
    by: str = "user",
    reason: str | None = None,
    successor: str | None = None,
    summary: str | None = None,
    next_steps: str | None = None,
    release: bool = False,
    tags: list[str] | None = None,
) -> Marked:
    """Find ``ref`` (and ``successor``), in this project or any registered one, and write the
    mark in the marks of the session's own project; ``by_session`` is the host. ``release``: an
    unkeep may delete the archive's copy of a transcript Claude Code deleted, the only one left
    (refused without it)."""
    # The cheap checks first, so a bad call costs no listing of the transcripts.
    check_mark_text(reason=reason, summary=summary, next_steps=next_steps, successor=successor, ref=ref)
    if op in TAG_OPS:
        tags = clean_tags(tags or [])
    found = find(project, ref, host=host)
    successor = (successor or "").strip(" \t") or None
    if successor is not None:
        try:
            successor = find(project, successor, host=host).id
        except UnknownSession as exc:  # a bad argument of this mark, not a session it is about
            raise BadArgument(f"the successor: {exc}") from None
    home = found.project
    if op == "unkeep" and not release:
        check_unkeep(home, found.id, by)
    _adopt(home)
    written = write_mark(
        home,
        found.id,
        op,
        reason=reason,
        successor=successor,
        summary=summary,
        next_steps=next_steps,
        by=by,
        by_session=host,
        tags=tags,
    )
    if op in ("keep", "unkeep"):
        on_mark(home, found.id, op)
    return Marked(written, found)


def run_task(project: Project, who, action: str, **args: str) -> dict:
    """A ``c3_task`` action for a door: a session ``ref`` of ``link`` resolves like every other
    id (a unique prefix, ``current``, the host session before its transcript exists, a session
    of another registered project), then the task store acts on the full id. A session found in
    another project is said in ``session_project``."""
    found = None
    if (action or "").strip().lower() == "link" and (args.get("link_type") or "session").strip() == "session":
        found = find(project, args.get("ref"), host=who.session)
        args["ref"] = found.id
    result = actions.run(project, who, action, **args)
    if found is not None and found.elsewhere:
        result["session_project"] = found.project.root
    return result


def check_unkeep(project: Project, session_id: str, by: str) -> None:
    """Refuse an unkeep that would delete the only copy left of a transcript (Claude Code deleted
    the original) unless it says so: a person confirms (``--release``, the Hub's dialog); an
    agent cannot."""
    row = row_for(project, session_id)
    if row is not None and (row.archived or archive.only_copy(row.path, session_id)):
        how = "run `c3async mark unkeep ID --release` or use the Hub" if by == "agent" else "add --release"
        why = "Claude Code already deleted" if row.archived else "Claude Code's folder has a shorter or different"
        raise Conflict(
            f"{why} {session_id}: the archive holds the only whole copy, and unkeep would "
            f"delete it for good. To do that, {how}."
        )


def on_mark(project: Project, session_id: str, op: str) -> None:
    """Right after a keep mark: preserve the session now (not at the next listing); after an
    unkeep: release its archive entry. The mark is written either way; a failure here says so
    (and only here: the listing that finds the row keeps quiet about it)."""
    keep.hush(session_id)
    row = row_for(project, session_id)
    if row is None:
        return
    try:
        if op == "keep":
            if not row.archived:
                archive.preserve(row.path, row.id, now=True)  # asked for: no back-off
        else:
            archive.release(os.path.basename(os.path.dirname(row.path)), row.id)
    except NoRoom as exc:  # it names the session, the bytes and the room
        raise DiskFull(exc.where, exc.free, f"the keep mark is written, but {exc}") from None
    except (OSError, ValueError, C3Error) as exc:
        what = "preserve it in the archive" if op == "keep" else "remove its archive entry"
        raise Unavailable(f"the {op} mark on {session_id} is written, but could not {what}: {exc}") from None


def _adopt(project: Project) -> None:
    """A person (or an agent) marked a session of ``project``: it is registered from now on,
    its marks in its own ``.c3`` (a found project's folder is written to only from here on; one
    whose folder is gone keeps them under ``$C3_HOME/state``)."""
    try:
        registry.register(project)
    except BadArgument:
        return  # its folder is gone
    from .moves import remember

    remember(project.root)


class ResumePlan(msgspec.Struct):
    session: str
    cwd: str
    restored: list[str]  # files put back (or, for a dry run, that would be) into Claude Code's folder
    project: str = ""  # the project the session belongs to
    elsewhere: bool = False  # not the project asked for
    config_dir: str | None = None  # its Claude Code root, when not the default: CLAUDE_CONFIG_DIR for claude


def prepare_resume(project: Project, ref: str, *, dry_run: bool = False) -> ResumePlan:
    """What ``c3async resume`` runs: the session's folder and id, after putting an archived
    transcript (and its sub-agents' files) back where Claude Code looks for it. Nothing there is
    overwritten; a folder that is gone is an error that says how to bring it back. ``dry_run``:
    only say what would be put back (``resume --print``). The session may be another
    project's (a registered one, or any of Claude Code's folders)."""
    found = find(project, ref, anywhere=True)
    session, home = found.id, found.project
    row = row_for(home, session)
    if row is None:
        raise NotFound(f"no transcript of session {session} in {home} or in the archive")
    if row.cwd_gone or not os.path.isdir(row.cwd):
        raise NotFound(
            f"{row.cwd} is gone; bring it back first: {resume_command(row.cwd, session, row.branch, gone=True)}"
        )
    restored: list[str] = []
    config_dir = row.root if row.root is not None and Path(row.root) != config_home() else None
    if row.archived:  # put back where Claude Code looks for it without being told: the default root
        folder = projects_root() / os.path.basename(os.path.dirname(row.path))
        try:
            restored = archive.restore(Path(row.path), folder, session, dry_run=dry_run)
        except OSError as exc:
            raise Unavailable(f"could not put {session} back into {folder}: {exc}") from None
    return ResumePlan(session, row.cwd, restored, home.root, found.elsewhere, config_dir)


# ----------------------------------------------------------------- near Claude Code's cleanup


def survey(project: Project, *, preserve: bool = True, deadline: float | None = None) -> keep.Survey:
    """One project's sessions within ``keep.WARN_DAYS`` of Claude Code's cleanup, from their
    mtimes (no transcript is read): the kept ones preserved first, the soonest first, until
    ``deadline`` (``time.monotonic()``); ``preserve`` False: only counted (a read-only report)."""
    dirs = locate(project.root, extra_cwds(project))
    cands = candidates([folder for folder, _ in dirs.folders])
    out = keep.Survey(project.root)
    cover = keep.Cover(project, MarkBook(project).refresh())
    ids = sorted(c.session_id for c in cands)
    base = os.fspath(archive.root()) + os.sep
    keep.pass_over(out, cover, cands, dict(dirs.folders), ids, time.time(), base, deadline, preserve=preserve)
    out.unkept.sort(key=lambda e: (e.expires_in_days, e.id))
    return out


class KeptNow(msgspec.Struct):
    """A session ``keep_expiring`` kept: its keep mark is written; ``preserved``: the archive
    holds it now (else ``error`` says why not: a later listing tries again)."""

    id: str
    project: str
    expires_in_days: int
    preserved: bool
    error: str | None = None


class KeptExpiring(msgspec.Struct):
    kept: list[KeptNow]
    expiring: int = 0  # sessions within the week, kept before or now
    held: int = 0  # of them, the archive held already
    waived: int = 0  # left as they are: a person unkept them


def keep_expiring(projects: list[Project], *, by: str = "user", host: str | None = None) -> KeptExpiring:
    """Keep every session of ``projects`` that Claude Code deletes within ``keep.WARN_DAYS``
    and the archive does not hold (a session someone unkept stays as they said): a keep mark
    each, in one append per project, then each preserved at once, the soonest first. The first
    refusal of the archive (a read-only or full disk) stops the copying, not the marks: it is
    said on the sessions not tried, which later listings preserve once the archive takes them."""
    out = KeptExpiring([])
    refused: str | None = None
    for project in projects:
        found = survey(project)
        out.expiring += found.expiring
        out.held += found.kept
        out.waived += found.waived
        unmarked = [e.id for e in found.unkept if e.kept_by != "mark"]
        write_keeps(project, unmarked, reason=EXPIRING_REASON, by=by, by_session=host)
        for e in found.unkept:
            keep.hush(e.id)  # said here, not by a listing of this process
            error = refused
            if error is None:
                try:
                    archive.preserve(e.path, e.id, now=True)
                except (OSError, ValueError, C3Error) as exc:
                    error = refused = str(exc)
            out.kept.append(KeptNow(e.id, project.root, e.expires_in_days, error is None, error))
    return out


def last_chance(project: Project | None, budget: float = HOOK_BUDGET_S) -> None:
    """The SessionStart hook's pass, as Claude Code starts (its cleanup follows within seconds,
    in the background): the kept sessions nearest the cut-off preserved first, in the project
    it starts in, then in every registered one (the cleanup covers every project), until the
    budget is spent. A project that cannot be surveyed costs itself only."""
    deadline = time.monotonic() + budget
    projects = list(dict.fromkeys([*([project] if project else []), *map(Project, registry.projects())]))
    for p in projects:
        if time.monotonic() >= deadline:
            return
        try:
            survey(p, deadline=deadline)
        except (OSError, C3Error) as exc:
            log.warning("keeping the sessions of %s before Claude Code's cleanup: %s", p, exc)
