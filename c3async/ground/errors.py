"""Every error c3async raises on purpose. Each message says what went wrong and what to do;
the CLI prints it on stderr, the MCP tools return it as a tool error, the Hub as JSON."""

from __future__ import annotations

from collections.abc import Collection, Iterable

__all__ = (
    "DECODE_ERRORS",
    "AmbiguousSession",
    "BadArgument",
    "C3Error",
    "NotFound",
    "UnknownSession",
    "UsageError",
    "unknown_keys",
)

# What decoding untrusted JSON can raise. msgspec's DecodeError and ValidationError, json's
# JSONDecodeError and UnicodeDecodeError are ValueErrors; nesting deeper than the recursion limit
# raises RecursionError in both msgspec and json, which nothing else catches. Every decoder of a
# file, a request body or hook input catches these.
DECODE_ERRORS = (ValueError, RecursionError)


class C3Error(Exception):
    """Base class: an error meant for the user (or the agent), never a traceback."""


class BadArgument(C3Error):
    """A missing or malformed argument; the message names it and how to fix it."""


class UsageError(BadArgument):
    """A command line that cannot be run as given (a ``--project`` that is no directory): the
    CLI exits 2, as for its other usage errors."""


class NotFound(C3Error):
    """What the caller named, well formed, is not there (a session no project has): the Hub
    answers 404 where other errors are a 400."""


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


class AmbiguousSession(C3Error):
    """An id prefix that more than one session of the project starts with."""

    def __init__(self, ref: str, candidates: list[str]) -> None:
        shown = ", ".join(candidates[:10]) + (" ..." if len(candidates) > 10 else "")
        super().__init__(f"the id prefix {ref!r} matches {len(candidates)} sessions: {shown}. Give more characters.")


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
