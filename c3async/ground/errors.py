"""Every error c3async raises on purpose, in one tree. Each message says what went wrong and what
to do; each error is of one kind (``Kind``), and the kind is all a door reads to answer it: the
CLI's exit status, the Hub's HTTP status and the MCP server's answer each come from one table of
that door (``cli.EXIT``, ``hub.app.STATUS``, ``server.ANSWERS``), so no door reads a message to
choose, and a new error needs no door changed.

::

    C3Error                   the root, never raised itself
    ├── BadArgument           bad argument  a value the call gave, refused by what uses it (a
    │   │                                   search with no word, a byte offset, a mark's op)
    │   └── UsageError        usage         the call as written cannot run: an argument missing
    │       │                               or malformed where the call is read, two that do
    │       │                               not go together, one given twice
    │       └── TaskArgError  (TaskError)
    ├── NotFound              not found     what was named, well formed, is not there
    │   ├── UnknownSession
    │   └── TaskNotFound      (TaskError)
    ├── Ambiguous             ambiguous     a prefix or a name that more than one thing answers to
    │   ├── AmbiguousSession
    │   └── TaskAmbiguous     (TaskError)
    ├── Conflict              conflict      the state stands in the way: a milestone that exists
    │                                       already, a timer that runs, the only copy of a
    │                                       transcript an unkeep would delete
    ├── Refused               refused       what is not c3async's to touch, or not safe to
    │   │                                   (a cloned repository may plant it)
    │   ├── UnsafeState       (OSError)     a state file that is a link, or not the kind we make
    │   ├── NotRegularFile    (OSError)     a file not ours (a transcript) that is a FIFO, a
    │   │                                   device or a link: never read
    │   ├── UnsafeArchive                   an archive that is not the user's own
    │   └── UnsafeHubFolder                 a Hub token folder that is not private
    ├── Unavailable           unavailable   not now, or not here: a lock held, a file that could
    │   │                                   not be read or written, a capability missing
    │   ├── IndexUnavailable                a search shard locked or on a failing disk
    │   └── NoFTS5                          a Python whose SQLite has no full-text search
    ├── Damaged               damaged       a file c3async reads is not what it must be: it does
    │   │                                   not parse, a setting has the wrong type or range, a
    │   │                                   newer c3async wrote it
    │   ├── CorruptDocument
    │   ├── NewerDocument
    │   ├── DamagedIndex                    a search shard SQLite says is damaged, or not ours
    │   ├── ConfigError                     config.json
    │   └── PricesError                     prices.json
    └── DiskFull              disk full     (OSError) ENOSPC, EDQUOT, SQLITE_FULL, or a copy
        └── NoRoom                          refused for want of room

Why these kinds: each asks something different of whoever reads it, so each is a row of every
door's table. Bad argument and usage: change the call (the CLI exits 2 for a usage error, as
argparse does for its own, and 1 for a value refused). Not found: look elsewhere. Ambiguous: say
more. Conflict: change the state first. Refused: fix what was planted or is not private.
Unavailable: wait, or install what is missing. Damaged: repair the file the message names. Disk
full: free space.

``TaskError`` is not a kind: it is how a task store's error is worded by each door (``Words``),
mixed into the kinds it takes. ``UnsafeState``, ``NotRegularFile`` and ``DiskFull`` are OSErrors
too, so code that tolerates a missing or unwritable file tolerates them as before.

Outside the tree: ``ground.stop.Stopped`` (SIGTERM, a BaseException like KeyboardInterrupt; it
lives with its signal handler, which must import nothing before it is installed), and three
exceptions that never leave the module that raises them: ``catalog.gitrefs._Unreadable`` and
``ground.stateroot._Problem`` (a reason carried up to the function that notes it),
``hub.server._Stopped`` (SIGTERM, from the Hub's own signal handler to its serving loop).
``tests/test_layout.py`` checks that no other module defines an exception, that the roots are
never raised, and that each door reads its table in one place.
"""

from __future__ import annotations

import enum
import errno
import os
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import ClassVar, NamedTuple, Protocol

__all__ = (
    "DECODE_ERRORS",
    "MCP_WORDS",
    "Ambiguous",
    "AmbiguousSession",
    "Arg",
    "BadArgument",
    "C3Error",
    "Call",
    "ConfigError",
    "Conflict",
    "CorruptDocument",
    "Damaged",
    "DamagedIndex",
    "DiskFull",
    "IndexUnavailable",
    "Kind",
    "NewerDocument",
    "NoFTS5",
    "NoRoom",
    "NotFound",
    "NotRegularFile",
    "PricesError",
    "Refused",
    "TaskAmbiguous",
    "TaskArgError",
    "TaskError",
    "TaskNotFound",
    "Unavailable",
    "UnknownSession",
    "UnsafeArchive",
    "UnsafeHubFolder",
    "UnsafeState",
    "UsageError",
    "Words",
    "check_text",
    "clip",
    "text_problem",
    "unknown_keys",
)

# What decoding untrusted JSON can raise. msgspec's DecodeError and ValidationError, json's
# JSONDecodeError and UnicodeDecodeError are ValueErrors; nesting deeper than the recursion limit
# raises RecursionError in both msgspec and json, which nothing else catches. Every decoder of a
# file, a request body or hook input catches these.
DECODE_ERRORS = (ValueError, RecursionError)


class Kind(enum.Enum):
    """What an error asks of its reader (the module's docstring): each door answers by it."""

    USAGE = "usage"
    BAD_ARGUMENT = "bad argument"
    NOT_FOUND = "not found"
    AMBIGUOUS = "ambiguous"
    CONFLICT = "conflict"
    REFUSED = "refused"
    UNAVAILABLE = "unavailable"
    DAMAGED = "damaged"
    DISK_FULL = "disk full"


class C3Error(Exception):
    """The root: an error meant for the user (or the agent), never a traceback. Never raised
    itself (``tests/test_layout.py`` checks it): raise the kind, or an error of it."""

    kind: ClassVar[Kind]


# ---------------------------------------------------------------- the kinds


class BadArgument(C3Error):
    """A value the call gave, refused by what uses it; the message names it and how to fix it."""

    kind = Kind.BAD_ARGUMENT


class UsageError(BadArgument):
    """A call that cannot be run as written (a ``--project`` that is no directory, a flag given
    twice): a bad argument of its own kind, as the CLI exits 2 for it (as for argparse's own
    usage errors) where other bad arguments exit 1."""

    kind = Kind.USAGE


class NotFound(C3Error):
    """What the caller named, well formed, is not there (a session no project has)."""

    kind = Kind.NOT_FOUND


class Ambiguous(C3Error):
    """A prefix or a name that more than one thing answers to; the message lists them."""

    kind = Kind.AMBIGUOUS


class Conflict(C3Error):
    """The state stands in the way of what was asked; the message says what to change first."""

    kind = Kind.CONFLICT


class Refused(C3Error):
    """Something c3async will not touch: not its own, or not safe (a link, a folder others can
    write); the message says what to fix."""

    kind = Kind.REFUSED


class Unavailable(C3Error):
    """Not possible now or here: a lock held, a file that could not be read or written, a
    capability this machine lacks."""

    kind = Kind.UNAVAILABLE


class Damaged(C3Error):
    """A file c3async reads is not what it must be (it does not parse, a value has the wrong type
    or range, a newer version wrote it); the message names the file and how to repair it."""

    kind = Kind.DAMAGED


class DiskFull(C3Error, OSError):
    """A write that found no room (ENOSPC, EDQUOT, SQLITE_FULL), or a copy refused for want of
    it. An OSError with errno ENOSPC too: code that tolerates a failed write (a cache's)
    tolerates it as before. ``ground.disk`` makes them."""

    kind = Kind.DISK_FULL

    def __init__(self, where: str | os.PathLike[str] | None, free: int | None = None, message: str | None = None):
        self.where = os.fspath(where) if where is not None else None
        self.free = free
        if message is None:
            disk = f"the disk holding {self.where}" if self.where else "a disk"
            left = f": {free:,} bytes free" if free is not None else ""
            message = f"{disk} is full{left}; free space and run again"
        super().__init__(message)
        self.errno = errno.ENOSPC  # an OSError like the one it reports (str() stays the message)


# ---------------------------------------------------------------- sessions


SEARCHED_SHOWN = 5  # projects an unknown id's message names (the rest are counted)


class UnknownSession(NotFound):
    """No session of the project has this id or id prefix. ``others``: the other projects
    (registered, or found in Claude Code's folders) that were searched too (None: none was);
    ``folder``: Claude Code's projects folders, when every folder of them was searched as well."""

    def __init__(
        self,
        ref: str,
        project: str,
        near: list[str] | None = None,
        *,
        others: list[str] | None = None,
        folder: str | None = None,
    ) -> None:
        self.project = project
        hint = f" Did you mean one of: {', '.join(near)}?" if near else ""
        also = ""
        if others:
            shown = ", ".join(clip(p) for p in others[:SEARCHED_SHOWN])
            more = f" and {len(others) - SEARCHED_SHOWN} more" if len(others) > SEARCHED_SHOWN else ""
            also = f", nor of the {len(others)} other project{'s' if len(others) != 1 else ''} ({shown}{more})"
        if folder is not None:
            also += f", nor anywhere in Claude Code's projects folders ({clip(folder)})"
        if others == []:
            also += "; Claude Code has no other project"
        super().__init__(
            f"no session of {project} has the id {ref!r}{also} (give a full session id or a unique "
            f"prefix of 4+ characters; `c3async sessions` lists them).{hint}"
        )


class AmbiguousSession(Ambiguous):
    """An id prefix that more than one session of the project starts with."""

    def __init__(self, ref: str, candidates: list[str]) -> None:
        shown = ", ".join(candidates[:10]) + (" ..." if len(candidates) > 10 else "")
        super().__init__(f"the id prefix {ref!r} matches {len(candidates)} sessions: {shown}. Give more characters.")


# ---------------------------------------------------------------- files: refused, damaged, full


class UnsafeState(Refused, OSError):
    """An entry of c3async's state that is a symlink or not the kind of file we create
    (``ground.safefs`` finds them)."""

    def __init__(self, path: str | os.PathLike[str], what: str) -> None:
        self.path = os.fspath(path)
        self.what = what
        super().__init__(
            f"refusing {self.path}: it is {what}, and c3async's state files are never followed "
            "(a cloned repository may ship one). Remove it (c3async creates its own) and try again."
        )


class NotRegularFile(Refused, OSError):
    """A path that is not a regular file (a FIFO, a device, a directory, or a symlink, which is
    not followed): never read, because a FIFO blocks its reader and a symlink can point at any
    file the user can read. Made as an OSError is: ``(errno, what it is, path)``."""


class UnsafeArchive(Refused):
    """``$C3_HOME`` or its archive is not the user's own, or another account can write it."""


class UnsafeHubFolder(Refused):
    """``$C3_HOME/hub``, where the Hub's token goes, is a link, not a folder, another account's,
    or open to other accounts."""


class CorruptDocument(Damaged):
    """A shared JSON document exists but does not parse; it is left untouched."""

    def __init__(self, path: Path, detail: str, backup: Path) -> None:
        self.path = path
        where = f"the last good copy is {backup}" if backup.exists() else "there is no backup yet"
        super().__init__(
            f"{path} does not parse ({detail}); it was left untouched and nothing was changed. "
            f"Repair it, or replace it with a good copy ({where}), then try again."
        )


class NewerDocument(Damaged):
    """A document whose ``version`` is newer than this c3async understands: reading it is best
    effort, rewriting it could drop what the newer version keeps there, so it is refused."""

    def __init__(self, path: Path, found: int, known: int) -> None:
        super().__init__(
            f"{path} was written by a newer c3async (format version {found}; this one knows up to "
            f"{known}); it was left untouched. Upgrade c3async (pip install -U c3async) to change it."
        )


class ConfigError(Damaged):
    """A setting of the wrong type or out of range, named with its file and key."""

    def __init__(self, path: Path, key: str, problem: str) -> None:
        super().__init__(f"{path}: {key} {problem}; fix or remove it")


class PricesError(Damaged):
    """``$C3_HOME/prices.json`` cannot be used: the message names the file and the key."""


class DamagedIndex(Damaged):
    """A search shard that is not a readable index of ours (the index puts it aside and builds
    it anew)."""


class IndexUnavailable(Unavailable):
    """A search shard that could not be read or written now (locked, a failing or read-only
    disk): not damaged, so never rebuilt for it."""


class NoFTS5(Unavailable):
    """Full-text search needs SQLite's FTS5, which this Python's sqlite3 lacks."""


class NoRoom(DiskFull):
    """A copy into the archive refused for want of room (``cut`` false: nothing was written), or
    cut short by a full disk (``cut``: what was written is removed). ``retry_s``: when a later
    listing tries it again at the latest."""

    def __init__(
        self, session: str, folder: Path, need: int, free: int, reserve: int, cut: bool, retry_s: float
    ) -> None:
        self.session, self.need, self.cut = session, need, cut
        if cut:
            message = (
                f"the disk holding {folder} is full: {free:,} bytes free; kept session {session} ({need:,} bytes) "
                f"is not copied into the archive (nothing half-copied is left); it is tried again once "
                f"{need:,} more bytes are free there, or in {retry_s / 3600:.0f} hour"
            )
        else:
            message = (
                f"kept session {session} is not copied into the archive: it needs {need:,} bytes and the disk "
                f"holding {folder} has {free:,} bytes free, of which c3async leaves {reserve:,} for other uses; "
                f"free space there and a later listing copies it"
            )
        super().__init__(folder, free, message)


# ---------------------------------------------------------------- the task store's errors


class Arg(NamedTuple):
    """An argument of the task action that failed, by its MCP name (``task_id``, ``blocked_by``)."""

    name: str


class Call(NamedTuple):
    """Another task action to suggest, with the arguments to show (MCP names, shown values)."""

    action: str
    args: tuple[tuple[str, str], ...] = ()


class Words(Protocol):
    """How a door words a task error: the MCP tool says ``c3_task(action='add') needs title``;
    the CLI, with its flags, ``tasks add needs --title``."""

    def action(self, action: str) -> str:
        """How this door names the action that failed (``{action}``)."""
        ...

    def arg(self, action: str, name: str) -> str:
        """How this door names ``action``'s argument ``name``."""
        ...

    def call(self, action: str, args: tuple[tuple[str, str], ...] = ()) -> str:
        """How this door writes a call of ``action`` with ``args``."""
        ...


class _McpWords:
    def action(self, action: str) -> str:
        return self.call(action)

    def arg(self, action: str, name: str) -> str:
        return name

    def call(self, action: str, args: tuple[tuple[str, str], ...] = ()) -> str:
        shown = [f"action={action!r}", *(f"{name}={value!r}" for name, value in args)]
        return f"c3_task({', '.join(shown)})"


MCP_WORDS: Words = _McpWords()


class TaskError(C3Error):
    """A refusal of the task store, written once and worded by each door in its own syntax. Not a
    kind: mixed into one (``TaskArgError``, ``TaskNotFound``, ``TaskAmbiguous``).

    A message names an argument or another action through a placeholder: ``{action}`` is the
    action that failed, ``{title}`` (any name given as ``Arg``) one of its arguments, a ``Call``
    another action to try. ``template`` is ours (``str.format`` fields); what a caller gave goes
    in ``parts`` as plain text, so it is never read as a field. ``action`` is set by
    ``pm.actions.run`` on the way out. ``str()`` is the MCP wording, so a door that does nothing
    special says what the MCP tool says."""

    def __init__(self, template: str, **parts: str | Arg | Call) -> None:
        super().__init__(template)
        self.template = template
        self.parts = parts
        self.action = ""

    def worded(self, words: Words) -> str:
        fields: dict[str, str] = {"action": words.action(self.action) if self.action else "c3_task"}
        for key, part in self.parts.items():
            if isinstance(part, Arg):
                fields[key] = words.arg(self.action, part.name)
            elif isinstance(part, Call):
                fields[key] = words.call(part.action, part.args)
            else:
                fields[key] = part
        return self.template.format_map(fields)

    def __str__(self) -> str:
        return self.worded(MCP_WORDS)


class TaskArgError(TaskError, UsageError):
    """A missing or malformed argument of a task action, found before the store is read."""

    @classmethod
    def about(cls, arg: str, exc: BadArgument) -> TaskArgError:
        """``exc``, a ground message that begins with the argument's name (``check_text``), as a
        TaskArgError that lets each door name the argument."""
        text = str(exc)
        rest = text[len(arg) :] if text.startswith(arg) else f": {text}"
        return cls("{arg}" + rest.replace("{", "{{").replace("}", "}}"), arg=Arg(arg))


class TaskNotFound(TaskError, NotFound):
    """No task, decision or milestone has the id or name given."""


class TaskAmbiguous(TaskError, Ambiguous):
    """An id prefix that more than one decision starts with."""


# ---------------------------------------------------------------- text a caller gives us

ELLIPSIS = "\u2026"


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as text, or None: a NUL character (no business in a note,
    and a C string ends there) or a lone surrogate (from a surrogateescape argv such as
    ``$'\\xff'``, or a JSON ``\\ud800``: not Unicode text, and no JSON encoder writes it)."""
    if "\x00" in value:
        return "a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"an invalid character at position {exc.start} (a lone surrogate: not UTF-8 text)"
    return None


def check_text(value: str | None, name: str, limit: int) -> None:
    """Refuse ``value`` (the field ``name``) when it is longer than ``limit`` characters or holds
    a character no log may hold; raises BadArgument naming the field, the limit and the length."""
    if value is None:
        return
    if len(value) > limit:
        raise BadArgument(
            f"{name} is too long: {len(value):,} characters, the limit is {limit:,}. "
            "Shorten it (put long material in a file and refer to it)."
        )
    problem = text_problem(value)
    if problem is not None:
        raise BadArgument(f"{name} holds {problem}; give plain text without it")


def clip(value: str, limit: int = 200) -> str:
    """``value`` cut to at most ``limit`` characters, the cut marked with an ellipsis: for
    strings that go into a log row (what was asked, not what is stored)."""
    if len(value) <= limit:
        return value
    return value[: limit - 1] + ELLIPSIS


def unknown_keys(keys: Iterable[object], known: Collection[str], limit: int = 5) -> str | None:
    """The keys of a settings file that are none of ``known``, named (the first ``limit``), each
    with the known key it most likely misspells; None when every key is known. A misspelt key
    is otherwise silently ignored, and the setting silently left at its default."""
    strange = [k for k in keys if k not in known]
    if not strange:
        return None
    import difflib

    named = []
    for key in strange[:limit]:
        shown = str(key)[:60]
        near = difflib.get_close_matches(shown, list(known), n=1)
        named.append(repr(shown) + (f" (did you mean {near[0]!r}?)" if near else ""))
    more = f" and {len(strange) - limit} more" if len(strange) > limit else ""
    return ", ".join(named) + more
