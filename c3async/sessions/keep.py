"""Keeping sessions past Claude Code's cleanup: which sessions are kept (a keep/unkeep mark, else
the policy), preserving them in the archive before the cleanup can delete them, and warning
before the others go.

The policy (``keep`` in config, ``stores.config``): ``marked``, the default, keeps every session
someone said something about: a note (``noted``), a stale or unstale mark (``stale``), a linked
task or decision (``linked``), a snapshot (``snapshot``); ``all`` keeps every session, ``none``
only those with a keep mark. A keep or unkeep mark overrides it either way (``kept_by`` says
which: ``mark``, or ``policy: <term>``).

Claude Code deletes a transcript whose mtime is older than ``cleanupPeriodDays`` when it starts
(in the background, a few seconds after). So a kept session is preserved well before that:

- every listing brings the archive up to date for its kept rows (a link costs one ``lstat``; a
  copy on another device gets its new bytes), and for the kept sessions beyond its rows (older
  than the newest it reads) that are within ``WARN_DAYS`` of the cut-off: their mtimes are in
  the listing's stat pass, and the marks, tasks and records say which are kept, so none is read;
- the MCP server runs that listing in the background when the project moves, and every hour;
- the SessionStart hook, run as Claude Code starts (``last_chance`` in ``act``), preserves the
  kept sessions nearest the cut-off first, within a time budget: a last chance, since Claude
  Code's cleanup may win that race.

A session Claude Code deleted is then read from the archive (``archived: true``), with its
marks, notes, links and totals, and resumed through ``c3async resume``. A copy the archive's
disk has no room for is refused and backed off (``archive``): the listing says so once a
process, and goes on.

Every door warns ahead with one ``Survey`` a project: how many sessions Claude Code deletes
within ``WARN_DAYS``, how many of them the archive holds (``kept``), and the others, soonest
first (``unkept``), which ``c3async keep --expiring`` keeps. A session a person unkept is left
out of those (``waived``): they said so.
"""

from __future__ import annotations

import bisect
import logging
import os
import shlex
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import msgspec

from ..catalog.listing import Candidate, is_session_id
from ..catalog.scan import ProjectScan
from ..ground import memo
from ..ground.errors import C3Error, NoRoom
from ..ground.project import Project
from ..stores import archive, config, records, retention
from ..stores.marks import MarkBook
from ..tasks import store as task_store
from .rows import Row

__all__ = (
    "WARN_DAYS",
    "Cover",
    "Expiring",
    "Survey",
    "apply",
    "hush",
    "pass_over",
    "surveyed",
    "total",
    "warning",
)

log = logging.getLogger("c3async.sessions")

WARN_DAYS = retention.WARN_DAYS
_warned: set[str] = memo.kept(set())
# What the last listing of each project in this process found (``surveyed``): a listing's doors
# (the CLI's warning, the Hub's banner) read it after the listing, which runs the pass.
_surveys: dict[Project, Survey] = memo.kept({})


class Expiring(msgspec.Struct):
    """A session Claude Code deletes within WARN_DAYS that the archive does not hold."""

    id: str
    project: str
    path: str
    expires_in_days: int  # 0: deleted at the next start of Claude Code
    kept_by: str | None  # kept, but not preserved (the archive refused it: said on stderr)


class Survey(msgspec.Struct):
    """One project's (or, summed, several projects') sessions that Claude Code deletes within
    WARN_DAYS: how many, how many the archive holds, how many a person unkept (``waived``),
    and the others, soonest first."""

    project: str | None = None
    expiring: int = 0
    kept: int = 0
    waived: int = 0
    unkept: list[Expiring] = msgspec.field(default_factory=list)


class Cover:
    """What keeps the sessions of one project: the keep and unkeep marks, then the policy. What
    a listed row already joined (its note, links, snapshot) is asked of the row; for the
    sessions beyond the rows, the tasks, decisions and snapshots are read once, when first
    needed."""

    def __init__(self, project: Project, book: MarkBook) -> None:
        self.project = project
        self.policy = config.keep_policy(project)
        self.book = book
        self._words: dict[str, bool] | None = None
        self._linked: dict[str, str] | None = None

    def word(self, sid: str) -> bool | None:
        """The session's keep (True) or unkeep (False) mark, or None (every keep mark of the
        project is read back once, when first asked)."""
        if self._words is None:
            states = self.book.get_many(self.book.keep_ids())
            self._words = {i: st.keep.keep for i, st in states.items() if st.keep is not None}
        return self._words.get(sid)

    def of_row(self, row: Row, word: bool | None) -> str | None:
        """What keeps a listed row, whose keep or unkeep mark (``word``) the listing read."""

        def term() -> str | None:
            if row.note is not None:
                return "noted"
            judged = self.book.judged(row.id)
            if judged is not None:
                return judged
            if row.links.tasks or row.links.decisions:
                return "linked"
            return "snapshot" if row.links.snapshot is not None else None

        return self._kept_by(word, term)

    def of_id(self, sid: str, ids: list[str]) -> str | None:
        """The same for a session that is no listed row; ``ids``: every session id of the
        project, sorted (an earlier version stored a typed prefix in a task's links)."""
        return self._kept_by(self.word(sid), lambda: self.book.judged(sid) or self._links(ids).get(sid))

    def _kept_by(self, word: bool | None, term: Callable[[], str | None]) -> str | None:
        """``mark`` (or None: unkept), else the policy's word; ``term``: what the ``marked``
        policy sees in the session, asked only under that policy."""
        if word is not None:
            return "mark" if word else None
        if self.policy == "all":
            return "policy: all"
        said = term() if self.policy == "marked" else None
        return f"policy: {said}" if said else None

    def _links(self, ids: list[str]) -> dict[str, str]:
        if self._linked is not None:
            return self._linked
        linked: dict[str, str] = {}
        for rec in records.load_all(self.project):
            for snap in rec.snapshots:
                if snap.host_session_id and is_session_id(snap.host_session_id):
                    linked[snap.host_session_id.lower()] = "snapshot"
        try:
            task_file = task_store.load(self.project)
        except C3Error as exc:  # a corrupt pm.json costs its links, not the pass (the listing says why)
            log.debug("keep pass: %s", exc)
            task_file = None
        if task_file is not None:
            refs = [ref for task in task_file.tasks for ref in task.sessions]
            refs += [d.session for d in task_file.decisions if d.session]
            for ref in refs:
                sid = _resolve(ref, ids)
                if sid is not None:
                    linked[sid] = "linked"
        self._linked = linked
        return linked


def _resolve(ref: str, ids: list[str]) -> str | None:
    """A stored session ref: a full id, or a unique prefix (4+ characters) of one of ``ids``."""
    ref = ref.lower()
    if is_session_id(ref):
        return ref
    if not 4 <= len(ref) < 36:
        return None
    at = bisect.bisect_left(ids, ref)
    if at < len(ids) and ids[at].startswith(ref) and not (at + 1 < len(ids) and ids[at + 1].startswith(ref)):
        return ids[at]
    return None


def apply(
    project: Project,
    rows: list[Row],
    keeps: dict[str, bool],
    now: float | None = None,
    *,
    book: MarkBook | None = None,
    scan: ProjectScan | None = None,
) -> None:
    """Set ``kept``, ``archived`` and ``expires_in_days`` on one project's rows (marks and links
    joined already), preserve the kept ones, and add the ``expires in Nd`` hint to the others.
    With the listing's ``scan``, the kept sessions beyond its rows that are near the cut-off are
    preserved too, and what it found is kept for ``surveyed``."""
    now = time.time() if now is None else now
    cover = Cover(project, (book or MarkBook(project)).refresh())
    base = os.fspath(archive.root()) + os.sep
    rules: dict[tuple[str, str | None], retention.Retention] = {}
    survey = Survey(project.root)
    for row in rows:
        word = keeps.get(row.id)
        kept_by = cover.of_row(row, word)
        row.kept, row.kept_by = kept_by is not None, kept_by
        row.archived = row.path.startswith(base)
        if row.archived:
            row.resume = f"cd {shlex.quote(row.cwd)} && c3async resume {row.id}"
            continue
        held = _preserve(project, row.id, row.path) if row.kept else False
        if row.live:
            continue  # being written to: no hints, and its mtime moves with every line
        rule = rules.get((row.cwd, row.root))
        if rule is None:
            rule = rules[(row.cwd, row.root)] = retention.effective(row.cwd, row.root)
        left = retention.days_left(row.mtime_ns / 1e9, rule, now)
        if left is None or left > WARN_DAYS:
            continue
        _count(survey, Expiring(row.id, project.root, row.path, left, kept_by), held, word)
        if not row.kept:
            row.expires_in_days = left
            row.hints.append(f"expires in {left}d")
    if scan is not None and scan.candidates:
        listed = {row.id for row in rows}
        # The newest ``examined`` were read: one of them that is no row is no session of this
        # project (a sidechain, another folder's); those after were never read.
        beyond = [c for c in scan.candidates[scan.examined :] if c.session_id not in listed]
        folders = {folder: cwd for folder, cwd in scan.dirs.folders}
        ids = sorted(c.session_id for c in scan.candidates)
        pass_over(survey, cover, beyond, folders, ids, now, base)
        survey.unkept.sort(key=lambda e: (e.expires_in_days, e.id))
        _surveys[project] = survey


def pass_over(
    survey: Survey,
    cover: Cover,
    cands: Iterable[Candidate],
    folders: dict[Path, str],
    ids: list[str],
    now: float,
    base: str,
    deadline: float | None = None,
    *,
    preserve: bool = True,
) -> None:
    """Preserve the kept sessions among ``cands`` (no row of theirs: their mtimes alone) that
    are within WARN_DAYS of the cut-off, the soonest first, and count them all in ``survey``.
    ``folders``: the cwd each transcript folder is Claude Code's for (its settings say the
    period); ``deadline`` (``time.monotonic()``): past it, nothing more is preserved, only
    counted (the hook's budget). ``preserve`` False: only counted (a read-only report), a kept
    session as kept when the archive holds it."""
    rules: dict[Path, retention.Retention] = {}
    near: list[tuple[int, int, Candidate]] = []
    for c in cands:
        if c.path.startswith(base):
            continue  # the archive's: Claude Code deleted its original already
        rule = rules.get(c.folder)
        if rule is None:
            root = c.folder.parent.parent if c.folder.parent.name == "projects" else None
            rule = rules[c.folder] = retention.effective(folders.get(c.folder), str(root) if root else None)
        left = retention.days_left(c.mtime_ns / 1e9, rule, now)
        if left is not None and left <= WARN_DAYS:
            near.append((c.mtime_ns, left, c))
    near.sort(key=lambda item: item[0])  # the oldest first: the first Claude Code deletes
    for _, left, c in near:
        kept_by = cover.of_id(c.session_id, ids)
        held = False
        if kept_by is not None:
            if preserve and (deadline is None or time.monotonic() < deadline):
                held = _preserve(cover.project, c.session_id, c.path)
            else:
                held = archive.holds(c.path, c.session_id)
        entry = Expiring(c.session_id, cover.project.root, c.path, left, kept_by)
        _count(survey, entry, held, cover.word(c.session_id))


def _count(survey: Survey, entry: Expiring, held: bool, word: bool | None) -> None:
    survey.expiring += 1
    if held:
        survey.kept += 1
    elif word is False:  # a person (or an agent) unkept it
        survey.waived += 1
    else:
        survey.unkept.append(entry)


def surveyed(project: Project) -> Survey | None:
    """What the last listing of ``project`` in this process found near the cut-off."""
    return _surveys.get(project)


def total(surveys: Iterable[Survey | None]) -> Survey:
    """Several projects' surveys summed (their ``unkept`` together, soonest first)."""
    out = Survey()
    for s in surveys:
        if s is None:
            continue
        out.expiring += s.expiring
        out.kept += s.kept
        out.waived += s.waived
        out.unkept += s.unkept
    out.unkept.sort(key=lambda e: (e.expires_in_days, e.id))
    return out


def warning(survey: Survey, command: str = "c3async keep --expiring") -> str | None:
    """The one line every door says while some session near the cut-off is not kept."""
    if not survey.unkept:
        return None
    n, others, soonest = survey.expiring, len(survey.unkept), survey.unkept[0].expires_in_days
    waived = f", {survey.waived:,} unkept by a mark" if survey.waived else ""
    when = "at its next start" if soonest == 0 else f"in {soonest} day{'s' if soonest != 1 else ''}"
    if others == n:
        which = "it" if n == 1 else "them"
    else:
        which = "the other one" if others == 1 else f"the {others:,} others"
    return (
        f"{n:,} session{'s' if n != 1 else ''} expire{'s' if n == 1 else ''} within {WARN_DAYS} days "
        f"({survey.kept:,} kept{waived}): Claude Code deletes {which}, the first {when}; "
        f"`{command}` keeps {'it' if others == 1 else 'them'}"
    )


def hush(session_id: str) -> None:
    """No listing of this process warns that it could not preserve this session: the door that
    just kept it says so itself."""
    _warned.add(session_id)


def _still_kept(project: Project, session_id: str) -> bool:
    """Asked under the archive's lock, just before a listing preserves a session it judged kept:
    an unkeep written since (by another process, which then releases the entry under that lock)
    wins, so a listing never puts back what an unkeep took out."""
    state = MarkBook(project).refresh().get(session_id)
    return state is None or state.keep is None or state.keep.keep


def _preserve(project: Project, sid: str, path: str) -> bool:
    """Preserve one kept session; False when the archive refused it. Said once a process for
    each kind of refusal (a full disk or a read-only archive refuses every session alike: one
    line, not one per session), never for a session a door has just said it of."""
    try:
        archive.preserve(path, sid, still=lambda: _still_kept(project, sid))
    except (OSError, ValueError, C3Error) as exc:
        kind = f"{type(exc).__name__}:{getattr(exc, 'errno', None)}"
        if sid not in _warned and kind not in _warned:
            _warned.add(kind)
            others = " (and any other kept session it refuses alike, said once)"
            if isinstance(exc, NoRoom):  # it names the session, the bytes and the room
                log.warning("%s%s", exc, others)
            else:
                log.warning("could not preserve kept session %s in the archive: %s%s", sid, exc, others)
        return False
    return True
