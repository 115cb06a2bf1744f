"""The predecessor/successor chain of sessions, from every source that links two of them:

- a stale mark that names a successor (a person's or an agent's judgement);
- a ``session_start`` row whose ``predecessor`` the hooks recorded for a ``/clear`` (a fact);
- a ``/clear`` pair found by timing (the next session in the folder began with ``/clear`` right
  after this one ended), for sessions the hooks did not see.

Walked to both ends, nearest first, and safe against cycles (a marks mistake can make one).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ("Links", "build", "walk")

Links = dict[str, list[str]]  # session id -> the ids directly after it


def _add(graph: Links, a: str, b: str) -> None:
    if a != b:
        out = graph.setdefault(a, [])
        if b not in out:
            out.append(b)


def build(pairs: Iterable[tuple[str, str]]) -> tuple[Links, Links]:
    """(successors, predecessors) adjacency from (earlier, later) pairs."""
    after: Links = {}
    before: Links = {}
    for a, b in pairs:
        _add(after, a, b)
        _add(before, b, a)
    return after, before


def walk(graph: Links, start: str) -> list[str]:
    """Every id reachable from ``start`` (breadth first: nearest first), never ``start`` itself,
    each once, whatever cycles the links hold."""
    seen = {start}
    order: list[str] = []
    frontier = [start]
    while frontier:
        nxt: list[str] = []
        for sid in frontier:
            for other in graph.get(sid, ()):
                if other not in seen:
                    seen.add(other)
                    order.append(other)
                    nxt.append(other)
        frontier = nxt
    return order
