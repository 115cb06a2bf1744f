"""The one streaming walk both export formats share (``export_md``, ``export_html``), and what
both say of a session and its items.

:func:`steps`: the transcript read forward a page at a time (``catalog.conversation.Walk``),
each tool call joined with its result, and each sub-agent's own transcript read where the call
that ran it stands (nested, at most MAX_DEPTH deep, each once). A renderer turns each step into
text as it comes, so an export holds one page in memory whatever the transcript's size.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from dataclasses import dataclass

from ..catalog.conversation import Item, Walk
from ..ground.errors import NotRegularFile
from .detail import Detail

__all__ = (
    "MAX_DEPTH",
    "Enter",
    "Leave",
    "Said",
    "Step",
    "cut",
    "facts",
    "kind_label",
    "note",
    "steps",
    "tool_label",
    "when",
)

MAX_DEPTH = 3  # a sub-agent's sub-agent's sub-agent: deeper ones are named, not read


@dataclass(frozen=True, slots=True)
class Said:
    """One item of the conversation, ``depth`` sub-agents deep (0: the session's own)."""

    item: Item
    depth: int


@dataclass(frozen=True, slots=True)
class Enter:
    """A sub-agent's conversation begins (right after the tool call that ran it, whose ``agent``
    it is); ``problem``: why it is not shown (then a Leave follows at once)."""

    agent: str
    depth: int
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class Leave:
    agent: str
    depth: int


Step = Said | Enter | Leave


def steps(path: str, walk: Walk) -> Iterator[Step]:
    """The session's conversation (``walk``, opened on the transcript at ``path``) with its
    sub-agents' nested, in the order they happened."""
    yield from _steps(path, walk, 0, set())


def _steps(path: str, walk: Walk, depth: int, seen: set[str]) -> Iterator[Step]:
    for item in walk.items():
        yield Said(item, depth)
        if item.kind == "tool" and item.agent:
            yield from _agent(path, item.agent, depth + 1, seen)


def _agent(path: str, agent: str, depth: int, seen: set[str]) -> Iterator[Step]:
    if agent in seen:
        problem: str | None = "shown above"
    elif depth > MAX_DEPTH:
        problem = f"nested more than {MAX_DEPTH} deep: not shown"
    else:
        seen.add(agent)
        try:
            sub = Walk(path, agent)
        except OSError as exc:
            problem = _unreadable(exc)
        else:
            with sub:
                yield Enter(agent, depth)
                yield from _steps(path, sub, depth, seen)
                yield Leave(agent, depth)
            return
    yield Enter(agent, depth, problem)
    yield Leave(agent, depth)


def _unreadable(exc: OSError) -> str:
    if isinstance(exc, NotRegularFile):
        return "its transcript is not a regular file: not read"
    if exc.errno == errno.ENOENT:
        return "its transcript was not kept"
    return f"its transcript cannot be read ({exc.strerror or 'error'})"


# ------------------------------------------------------------------ what both formats say


def kind_label(item: Item) -> str:
    """What an item is, in words: ``Prompt``, ``Answer``, ``Sub-agent prompt``..."""
    words = {"user": "Prompt", "assistant": "Answer", "summary": "Summary of what came before (compacted)"}
    label = words.get(item.kind, item.kind)
    return f"Sub-agent {label.lower()}" if item.sidechain else label


def tool_label(item: Item) -> str:
    """A tool call's one line: its name and what it did (a result alone: ``tool result``)."""
    if not item.name:
        return "tool result"
    return f"{item.name}: {item.summary}" if item.summary else item.name


def when(ts: str | None) -> str:
    """A line's timestamp as written (ISO 8601, cut to the second), "" when it is none."""
    return ts[:19].replace("T", " ") if ts else ""


def cut(what: str, truncated: bool, limit: int) -> str:
    return f"{what} (cut at {limit:,} characters)" if truncated else what


def facts(d: Detail) -> list[tuple[str, str]]:
    """The session on top of its export, as (label, text) pairs: where, when, its chain."""
    row, chain = d.row, d.chain
    out = [("Session", row.id), ("Project", row.project), ("Folder", row.cwd)]
    if row.branch:
        out.append(("Branch", row.branch))
    if row.created_at:
        out.append(("Started", when(row.created_at)))
    if row.last_activity:
        out.append(("Last activity", when(row.last_activity)))
    if row.forked_from:
        out.append(("Forked from", row.forked_from))
    if row.forks:
        out.append(("Its forks", ", ".join(row.forks)))
    if chain.predecessors:
        out.append(("Resumed from (before it)", ", ".join(chain.predecessors)))
    if chain.successors:
        out.append(("Continued in (after it)", ", ".join(chain.successors)))
    if row.stale is not None:
        stale = f"by {row.stale.by}: {row.stale.reason or '-'}"
        out.append(("Stale", stale + (f" (successor {row.stale.successor})" if row.stale.successor else "")))
    out.append(("Resume", row.resume))
    return out


def note(d: Detail) -> list[tuple[str, str]]:
    """The note (or the last snapshot) as (label, text) pairs; [] when there is none."""
    n = d.row.note
    if n is not None:
        return [(label, text) for label, text in (("Note", n.summary), ("Next", n.next_steps)) if text]
    if d.last_snapshot is not None and d.last_snapshot.summary:
        return [("Last snapshot", d.last_snapshot.summary)]
    return []
