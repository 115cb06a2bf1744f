"""The session ids a shell completes, with their titles, from a small cache the listings write.

A shell asks on every Tab, so the answer must come in well under 150 ms: ``offered`` reads one
file, ``$C3_HOME/cache/completion.tsv``, with the standard library alone (no catalog, no
listing, no msgspec), in a Python started isolated and without ``site`` (``c3async completion``
writes the command). ``remember`` writes it after a full listing (``c3async sessions``): the
listed projects' sessions replace what it held of them, the other projects' stay, at most
``KEEP`` sessions in all, the newest. Written only when its bytes change.

The file is ours and private, but read as untrusted: a line of the wrong shape is skipped, an id
must look like one, a title is made inert and cut (``ground.term``), and a file over
``MAX_BYTES`` is not read.
"""

from __future__ import annotations

import os
import re

from ..ground import peek
from ..ground.home import c3_folder
from ..ground.term import inert_line

TYPE_CHECKING = False  # typing itself costs every Tab 2 ms
if TYPE_CHECKING:
    from collections.abc import Iterable

    from .rows import Row

__all__ = ("CACHE", "KEEP", "id_wanted", "offered", "remember")

CACHE = ("cache", "completion.tsv")  # below $C3_HOME
HEADER = "c3async-completion 1"
KEEP = 5000
MAX_BYTES = 4 << 20
TITLE_CHARS = 80
OFFERED = 200  # at most this many ids in one answer (a shell lists them all)
_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

# Where a command line takes a session id: the commands whose first argument is one, the
# ``mark`` actions whose first argument is one, and the options that take one.
ID_COMMANDS = frozenset({"show", "resume", "keep", "export"})
MARK_ACTIONS = frozenset({"stale", "unstale", "note", "keep", "unkeep", "tag", "untag"})
ID_OPTIONS = frozenset({"--successor"})
# the options of those commands that take a value (the word after is not an argument)
VALUE_OPTIONS = frozenset(
    {"--project", "--summary", "--next", "--reason", "--turns", "--successor", "--since", "-o", "--output"}
)


def _clean(text: str, limit: int) -> str:
    text = inert_line(text).replace("\t", " ")
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _read() -> list[tuple[str, str, str, str]]:
    """(activity, id, project, title) lines of the cache, newest first; [] when there is none."""
    try:
        data = peek.read_below(MAX_BYTES, c3_folder(), *CACHE)
    except (OSError, ValueError):
        return []
    lines = data.decode("utf-8", "replace").split("\n")
    if not lines or lines[0] != HEADER:
        return []
    out = []
    for line in lines[1:]:
        parts = line.split("\t")
        if len(parts) == 4 and _ID.fullmatch(parts[1]):
            out.append((parts[0], parts[1], parts[2], parts[3]))
    return out


def remember(projects: Iterable[str], rows: Iterable[Row]) -> None:
    """What a full listing of ``projects`` found (``rows``), for the shell's completion."""
    from ..ground.home import c3_home
    from ..ground.safefs import write_atomic

    listed = set(projects)
    fresh = [
        (_clean(r.last_activity or r.mtime, 40), r.id, _clean(r.project, 4096), _clean(r.title or "", TITLE_CHARS))
        for r in rows
        if _ID.fullmatch(r.id)
    ]
    held = [entry for entry in _read() if entry[2] not in listed]
    merged = sorted([*fresh, *held], key=lambda e: e[0], reverse=True)[:KEEP]
    data = "\n".join([HEADER, *("\t".join(e) for e in merged)]).encode()
    path = c3_home().joinpath(*CACHE)
    try:
        if peek.read_below(MAX_BYTES, c3_folder(), *CACHE) == data:
            return
    except (OSError, ValueError):
        pass
    write_atomic(path, data, fsync=False)


def id_wanted(words: list[str], at: int) -> bool:
    """Whether word ``at`` of ``words`` (the command line, ``c3async`` first) is a session id."""
    if at < 1 or at > len(words) or (at < len(words) and words[at].startswith("-")):
        return False
    if words[at - 1] in ID_OPTIONS:
        return True
    args = [w for i, w in enumerate(words[1:at], 1) if not w.startswith("-") and words[i - 1] not in VALUE_OPTIONS]
    if not args:
        return False
    if args[0] in ID_COMMANDS:
        return len(args) == 1
    return args[0] == "mark" and len(args) == 2 and args[1] in MARK_ACTIONS


def offered(prefix: str, cwd: str) -> list[tuple[str, str]]:
    """(id, title) of the sessions whose id starts with ``prefix``, newest first: those of the
    project ``cwd`` is in first (the one a command there is about), then the others. Each id
    once, with its newest title: the cache can hold one under two projects (a project moved),
    and two lines of one id would have bash insert their common start, title words and all."""
    low = prefix.lower()
    here: list[tuple[str, str]] = []
    there: list[tuple[str, str]] = []
    seen: set[str] = set()
    for _, sid, project, title in _read():
        if sid.startswith(low) and sid not in seen:
            seen.add(sid)
            inside = cwd == project or cwd.startswith(project.rstrip(os.sep) + os.sep)
            (here if inside else there).append((sid, _clean(title, TITLE_CHARS)))
    return (here + there)[:OFFERED]
