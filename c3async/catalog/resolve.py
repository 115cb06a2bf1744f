"""Turn what a person or an agent typed (a full session id or a unique prefix of 4+ characters)
into one session of the project, or an error that names the candidates."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..ground.errors import AmbiguousSession, BadArgument, UnknownSession, clip
from .listing import Candidate, candidates
from .locate import ClaudeRoot, claude_roots, folders_under, locate
from .read import Transcript, read_transcript
from .scan import skip_reason

__all__ = ("MIN_PREFIX", "anywhere", "check_ref", "matches", "resolve", "session_record")

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


def check_ref(ref: str) -> str:
    """``ref`` normalised (spaces around a pasted id dropped, lower case), once it can name a
    session: at least MIN_PREFIX characters, and hex digits and dashes only. Raises BadArgument
    (or UnknownSession for a plain word that no session id can start with)."""
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
    return ref


def matches(
    project: str,
    ref: str,
    extra_cwds: tuple[str, ...] = (),
    fallback_root: Path | None = None,
    roots: tuple[ClaudeRoot, ...] | None = None,
) -> tuple[str, list[Candidate]]:
    """(the project's canonical path, its sessions whose id starts with the checked ``ref``):
    transcripts of its folders (``extra_cwds``: more folders its sessions ran in, see
    ``locate``), and of ``fallback_root`` (a second tree laid out like the projects folder, for
    sessions no longer in it) where the projects folder has none of that id. Only the project's
    own sessions count (not a colliding folder's, not a sidechain's). ``roots``: as ``locate``'s."""
    dirs = locate(project, extra_cwds, roots)
    if _PREFIX.fullmatch(ref) is None:
        return dirs.project, []  # a plain word that is no id: no session has it
    found = [c for c in candidates([f for f, _ in dirs.folders]) if c.session_id.startswith(ref)]
    if fallback_root is not None:
        held = {c.session_id for c in found}
        found += [
            c
            for c in candidates([f for f, _ in folders_under(fallback_root, dirs.cwds)])
            if c.session_id.startswith(ref) and c.session_id not in held
        ]
    return dirs.project, [c for c in found if _belongs(c, dirs.cwds)]


def resolve(
    project: str,
    ref: str,
    extra_cwds: tuple[str, ...] = (),
    fallback_root: Path | None = None,
    roots: tuple[ClaudeRoot, ...] | None = None,
) -> Candidate:
    """The project's session whose id is ``ref`` or starts with it (see ``matches``). Raises a
    C3Error: BadArgument, UnknownSession, or AmbiguousSession naming the candidates."""
    ref = check_ref(ref)
    where, found = matches(project, ref, extra_cwds, fallback_root, roots)
    if len(found) > 1:
        raise AmbiguousSession(ref, [c.session_id for c in found])
    if not found:
        raise UnknownSession(ref, where)
    return found[0]


def anywhere(
    ref: str, root: Path | None = None, roots: tuple[ClaudeRoot, ...] | None = None
) -> list[tuple[Candidate, Transcript]]:
    """Every session in Claude Code's projects folders (of ``roots``, as ``locate``'s; or
    ``root``, a tree of ours laid out like one, whose symlinked folders are not followed) whose
    id starts with the checked ``ref``, with its transcript record (whose ``cwd`` says where it
    ran): for an id typed in another project's folder. Sidechains, ghosts and unreadable files
    are left out; a folder that cannot be listed costs that folder only."""
    if _PREFIX.fullmatch(ref) is None:
        return []
    follow = root is None  # Claude Code's own folders may be links (a dotfiles repository)
    tops = [root] if root is not None else [r.projects for r in (claude_roots() if roots is None else roots)]
    folders = []
    for top in tops:
        try:
            with os.scandir(top) as it:
                folders += [Path(e.path) for e in it if e.is_dir(follow_symlinks=follow)]
        except OSError:
            continue
    out = []
    for cand in candidates(folders):
        if not cand.session_id.startswith(ref):
            continue
        try:
            rec = read_transcript(cand.path, cand.size, cand.mtime_ns)
        except OSError:
            continue
        if rec.skip is None and rec.cwd:
            out.append((cand, rec))
    return out
