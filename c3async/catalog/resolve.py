"""Turn what a person or an agent typed (a full session id or a unique prefix of 4+ characters)
into one session of the project, or an error that names the candidates."""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import AmbiguousSession, BadArgument, UnknownSession, clip
from .listing import Candidate, candidates
from .locate import folders_under, locate
from .read import Transcript, read_transcript
from .scan import skip_reason

__all__ = ("MIN_PREFIX", "resolve", "session_record")

MIN_PREFIX = 4
# A session id is a UUID: a prefix of one is hex digits and dashes. fullmatch, never `$`, which
# would also accept a final newline.
_PREFIX = re.compile(rf"[0-9a-f-]{{{MIN_PREFIX},36}}")


def session_record(cand: Candidate, cwds: tuple[str, ...]) -> Transcript | None:
    """The record of a transcript that is a session of the project: None for a sidechain, a
    ghost, an unreadable file, or the file of another directory whose folder name collides."""
    try:
        rec = read_transcript(cand.path, cand.size, cand.mtime_ns)
    except OSError:
        return None
    return rec if skip_reason(rec, cwds) is None else None


def _belongs(cand: Candidate, cwds: tuple[str, ...]) -> bool:
    return session_record(cand, cwds) is not None


def _plain_word(ref: str) -> bool:
    """Printable, no white space, no longer than an id: worth a "no session has it" answer."""
    return len(ref) <= 36 and ref.isprintable() and not any(ch.isspace() for ch in ref)


def resolve(project: str, ref: str, extra_cwds: tuple[str, ...] = (), fallback_root: Path | None = None) -> Candidate:
    """The project's session whose id is ``ref`` or starts with it (``extra_cwds``: more folders
    its sessions ran in, see ``locate``; ``fallback_root``: a second tree laid out like the
    projects folder, for sessions no longer in it). Raises a C3Error."""
    ref = (ref or "").strip(" \t").lower()  # spaces around a pasted id; never a newline
    if len(ref) < MIN_PREFIX:
        raise BadArgument(
            f"a session id needs at least {MIN_PREFIX} characters, got {ref!r} "
            "(give the full id or a unique prefix; `c3async sessions` lists them)"
        )
    if _PREFIX.fullmatch(ref) is None and not _plain_word(ref):
        raise BadArgument(
            f"{clip(ref, 60)!r} is not a session id: a session id (or a prefix of one) is hex digits "
            "and dashes only, at most 36 characters, with no spaces or control characters "
            "(`c3async sessions` lists them)"
        )
    dirs = locate(project, extra_cwds)
    if _PREFIX.fullmatch(ref) is None:
        raise UnknownSession(ref, dirs.project)  # a plain word that is no id: no session has it
    found = [c for c in candidates([f for f, _ in dirs.folders]) if c.session_id.startswith(ref)]
    if fallback_root is not None:
        held = {c.session_id for c in found}
        found += [
            c
            for c in candidates([f for f, _ in folders_under(fallback_root, dirs.cwds)])
            if c.session_id.startswith(ref) and c.session_id not in held
        ]
    if len(found) > 1:
        found = [c for c in found if _belongs(c, dirs.cwds)]
        if len(found) > 1:
            raise AmbiguousSession(ref, [c.session_id for c in found])
    elif found and not _belongs(found[0], dirs.cwds):
        found = []
    if not found:
        raise UnknownSession(ref, dirs.project)
    return found[0]
