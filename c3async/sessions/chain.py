"""The predecessor/successor chain of sessions, from every source that links two of them:

- a stale mark that names a successor (a person's or an agent's judgement);
- a ``session_start`` row whose ``predecessor`` the hooks recorded for a ``/clear`` (a fact);
- a ``/clear`` pair found by timing (the next session in the folder began with ``/clear`` right
  after this one ended), for sessions the hooks did not see;
- a plan-mode handoff (accepting a plan with "clear context" starts a session whose first
  prompt names the previous session's transcript);
- a fork and the session it was forked from.

A row keeps its neighbours only: a listing grows with its rows, whatever the chain's length. A
detail walks one session's whole chain to both ends (``view.whole_chain``: the rows' links and
those that reach past the listed rows), nearest first, safe against cycles (a marks mistake
can make one); ``around`` walks the rows' links alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

__all__ = ("Links", "around", "build", "walk")

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


class _Linked(Protocol):
    id: str
    chain_prev: list[str]
    chain_next: list[str]


def around(rows: Iterable[_Linked], sid: str) -> tuple[list[str], list[str]]:
    """(every session before ``sid``, every one after it), nearest first, walked over the rows'
    neighbours (a neighbour with no row of its own ends its branch of the walk)."""
    listed = list(rows)
    before = {r.id: r.chain_prev for r in listed if r.chain_prev}
    after = {r.id: r.chain_next for r in listed if r.chain_next}
    return walk(before, sid), walk(after, sid)
