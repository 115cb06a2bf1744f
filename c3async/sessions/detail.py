"""One session expanded: what ``c3async show``, ``c3_session(action='show')`` and the Hub's row
detail display, from one call (``show``).

The first and last prompt, the note or the last snapshot, linked tasks and recent decisions,
the predecessor/successor chain (on the row), and a preview of the last 8 turns, read from the
transcript's tail window (never the whole file).
"""

from __future__ import annotations

import os

import msgspec

from .. import records
from ..catalog.extract import _decode, classify_prompt
from ..errors import C3Error
from ..safefs import open_regular
from .rows import Row

__all__ = ("Detail", "Turn", "detail", "last_turns", "render", "show")

TURNS = 8
TURN_CHARS = 600
PREVIEW_WINDOW = 512 * 1024


class Turn(msgspec.Struct):
    role: str  # "user" or "assistant"
    text: str
    ts: str | None = None


class Detail(msgspec.Struct):
    row: Row  # its ``chain`` holds the predecessors and successors
    last_snapshot: records.Snapshot | None = None
    turns: list[Turn] = msgspec.field(default_factory=list)
    c3_sessions: list[str] = msgspec.field(default_factory=list)


def last_turns(path: str, n: int = TURNS) -> list[Turn]:
    """The last ``n`` prompts and assistant replies (text only, cut to TURN_CHARS)."""
    try:  # a regular file only, never a link or a FIFO swapped in since the listing
        fd, st = open_regular(path)
    except OSError:
        return []
    try:
        start = max(0, st.st_size - PREVIEW_WINDOW)
        buf = os.pread(fd, st.st_size - start, start)
    except OSError:
        return []
    finally:
        os.close(fd)
    lines = buf.split(b"\n")
    if start:
        lines = lines[1:]  # cut by the window
    lines = lines[:-1]  # after the last newline: nothing, or a line still being written
    turns: list[Turn] = []
    for raw in reversed(lines):
        if b'"type":"user"' not in raw and b'"type":"assistant"' not in raw:
            continue
        line = _decode(raw)
        if line is None or line.isSidechain is True:
            continue
        text = None
        if line.type == "user":
            found = classify_prompt(line)
            if found is not None:
                text = found[1]
        elif line.type == "assistant" and line.message is not None and isinstance(line.message.content, list):
            parts = [b.text for b in line.message.content if b.type == "text" and isinstance(b.text, str)]
            text = "\n".join(parts).strip() or None
        if not text:
            continue
        turn = Turn(
            line.type,
            text if len(text) <= TURN_CHARS else text[:TURN_CHARS] + "\u2026",
            line.timestamp if isinstance(line.timestamp, str) else None,
        )
        if turns and turns[-1].role == turn.role == "assistant":
            continue  # one reply written as several block lines: keep its last text only once
        turns.append(turn)
        if len(turns) >= n:
            break
    turns.reverse()
    return turns


def detail(project: str, row: Row) -> Detail:
    snap = None
    served_by = []
    for rec in records.load_all(project):
        if row.id in rec.host_session_ids:
            served_by.append(rec.c3_session_id)
            for s in rec.snapshots:
                if s.host_session_id == row.id and (snap is None or s.ts > snap.ts):
                    snap = s
    return Detail(row=row, last_snapshot=snap, turns=last_turns(row.path), c3_sessions=served_by)


def show(project: str, ref: str | None, *, host: str | None = None) -> Detail:
    """The session ``ref`` names (empty: the host session), expanded. Raises a C3Error."""
    from .refs import resolve_ref
    from .view import list_rows_sync, row_for

    sid = resolve_ref(project, ref, host=host)
    _, rows = list_rows_sync([project], processes=False)  # the chain needs the other rows
    row = next((r for r in rows if r.id == sid), None) or row_for(project, sid)
    if row is None:
        raise C3Error(
            f"session {sid} has no transcript yet (Claude Code writes it during the first turn): try again in a moment"
        )
    return detail(project, row)


def render(d: Detail) -> str:
    """The detail as plain text, for the agent and the terminal (the caller makes it inert)."""
    row = d.row
    out = [
        f"{row.id}  {row.title}",
        f"branch {row.branch or '-'}  cwd {row.cwd}  "
        f"{'LIVE' if row.live else 'not live'}{f' MCP×{row.mcp_count}' if row.mcp_count else ''}",
        f"resume: {row.resume}",
    ]
    if row.stale is not None:
        out.append(
            f"STALE ({row.stale.by}): {row.stale.reason}"
            + (f" -> {row.stale.successor}" if row.stale.successor else "")
        )
    if row.hints:
        out.append("hints: " + ", ".join(row.hints))
    out.append(f"first prompt: {row.first_prompt or '-'}")
    out.append(f"last prompt: {row.last_prompt or '-'}")
    if row.note is not None:
        out.append(f"note: {row.note.summary or '-'}; next: {row.note.next_steps or '-'}")
    elif d.last_snapshot is not None:
        out.append(f"last snapshot: {d.last_snapshot.summary}")
    if row.links.tasks:
        out.append("tasks: " + "; ".join(f"{t.id[:8]} {t.title} ({t.status})" for t in row.links.tasks))
    if row.links.decisions:
        out.append("decisions: " + "; ".join(f"{x.id[:8]} {x.text}" for x in row.links.decisions))
    if row.chain.predecessors:
        out.append("predecessors: " + ", ".join(row.chain.predecessors))
    if row.chain.successors:
        out.append("successors: " + ", ".join(row.chain.successors))
    if d.turns:
        out.append("last turns:")
        out += [f"  [{t.role}] {' '.join(t.text.split())[:300]}" for t in d.turns]
    return "\n".join(out)
