"""What a process keeps in memory from one call to the next, in one place that can forget it.

A long-lived process (the MCP server, the Hub) keeps caches (each checked against its file's
identity) and says some warnings once. The CLI run in process (``c3async.cli.main``) answers
each call as a fresh process would: it calls :func:`forget` after each, and a module's memo
registered here (``kept({})``, or a function for a value it replaces) is emptied.

Ground floor: imports nothing from the package.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

__all__ = ("forget", "kept", "on_forget")


class _Clearable(Protocol):
    def clear(self) -> None: ...


_C = TypeVar("_C", bound=_Clearable)
_forgetters: list[Callable[[], None]] = []


def kept(memo: _C) -> _C:
    """A dict or set a module keeps for the process: emptied by :func:`forget`."""
    _forgetters.append(memo.clear)
    return memo


def on_forget(forgetter: Callable[[], None]) -> Callable[[], None]:
    """Run ``forgetter`` on :func:`forget` (for a memo that is a value replaced, not filled)."""
    _forgetters.append(forgetter)
    return forgetter


def forget() -> None:
    """Forget what every imported module keeps: the next call starts as a fresh process does."""
    for forgetter in _forgetters:
        forgetter()
