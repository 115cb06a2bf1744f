"""What a person or an agent typed, turned into one session of the project, and the marks
written on it.

A ref is a full session id or a unique prefix of 4+ characters, found among the project's
transcripts (every checkout's, removed worktrees' too). The session a tool call comes from (the
host session) needs no transcript: on its first turn Claude Code may not have written one yet,
and the host identity (the verified ``sessions/<pid>.json`` of the claude ancestor, else
``CLAUDE_CODE_SESSION_ID``) is proof enough. A session a C3 record says it served counts too.
"""

from __future__ import annotations

from .. import archive, records
from ..catalog.listing import is_session_id
from ..catalog.resolve import resolve
from ..errors import AmbiguousSession, BadArgument, UnknownSession
from ..marks import Mark, write_mark
from .view import extra_cwds

__all__ = ("CURRENT", "mark", "resolve_ref", "run_task")

CURRENT = "current"


def resolve_ref(project: str, ref: str | None, *, host: str | None = None) -> str:
    """The full id ``ref`` names. Empty or ``current``: the host session. Raises a C3Error
    (unknown, ambiguous, malformed) naming what to do."""
    ref = (ref or "").strip(" \t")
    if not ref or ref.lower() == CURRENT:
        if host and is_session_id(host):
            return host.lower()
        raise BadArgument(
            "this call does not come from a Claude Code session that c3async can "
            "identify: give a session id (`c3async sessions` lists them)"
        )
    try:
        return resolve(project, ref, extra_cwds(project), archive.root()).session_id
    except UnknownSession:
        low = ref.lower()
        if host and is_session_id(host) and host.lower().startswith(low):
            return host.lower()  # the first turn: no transcript yet, but it is this session
        served = {h for rec in records.load_all(project) for h in rec.host_session_ids if h.startswith(low)}
        if len(served) == 1:
            return served.pop()
        if len(served) > 1:
            raise AmbiguousSession(low, sorted(served)) from None
        raise


def mark(
    project: str,
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
) -> Mark:
    """Resolve ``ref`` (and ``successor``) and write the mark; ``by_session`` is the host.
    ``release``: an unkeep may delete the archive's copy of a transcript Claude Code deleted,
    the only one left (refused without it)."""
    from ..marks import check_mark_text

    # The cheap checks first, so a bad call costs no listing of the transcripts.
    check_mark_text(reason=reason, summary=summary, next_steps=next_steps, successor=successor, ref=ref)
    session_id = resolve_ref(project, ref, host=host)
    successor = (successor or "").strip(" \t") or None
    if successor is not None:
        successor = resolve_ref(project, successor, host=host)
    if op == "unkeep" and not release:
        from .keep import check_unkeep

        check_unkeep(project, session_id, by)
    written = write_mark(
        project,
        session_id,
        op,
        reason=reason,
        successor=successor,
        summary=summary,
        next_steps=next_steps,
        by=by,
        by_session=host,
    )
    if op in ("keep", "unkeep"):
        from .keep import on_mark

        on_mark(project, session_id, op)
    return written


def run_task(project: str, who, action: str, **args: str) -> dict:
    """A ``c3_task`` action for a door: a session ``ref`` of ``link`` resolves like every other
    id (a unique prefix, ``current``, the host session before its transcript exists), then the
    task store acts on the full id."""
    from ..pm import actions

    if (action or "").strip().lower() == "link" and (args.get("link_type") or "session").strip() == "session":
        args["ref"] = resolve_ref(project, args.get("ref"), host=who.session)
    return actions.run(project, who, action, **args)
