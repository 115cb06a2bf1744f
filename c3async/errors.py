"""Every error c3async raises on purpose. Each message says what went wrong and what to do;
the CLI prints it on stderr, the MCP tools return it as a tool error, the Hub as JSON."""

from __future__ import annotations

__all__ = ("AmbiguousSession", "BadArgument", "C3Error", "UnknownSession")


class C3Error(Exception):
    """Base class: an error meant for the user (or the agent), never a traceback."""


class BadArgument(C3Error):
    """A missing or malformed argument; the message names it and how to fix it."""


class UnknownSession(C3Error):
    """No session of the project has this id or id prefix."""

    def __init__(self, ref: str, project: str, near: list[str] | None = None) -> None:
        hint = f" Did you mean one of: {', '.join(near)}?" if near else ""
        super().__init__(
            f"no session of {project} has the id {ref!r} (give a full session id or a unique "
            f"prefix of 4+ characters; `c3async sessions` lists them).{hint}"
        )


class AmbiguousSession(C3Error):
    """An id prefix that more than one session of the project starts with."""

    def __init__(self, ref: str, candidates: list[str]) -> None:
        shown = ", ".join(candidates[:10]) + (" ..." if len(candidates) > 10 else "")
        super().__init__(
            f"the id prefix {ref!r} matches {len(candidates)} sessions: {shown}. Give more characters."
        )
