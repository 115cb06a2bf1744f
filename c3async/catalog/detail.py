"""One row expanded: what `c3_session show` and the Hub's row detail display.

The first and last prompt, the note or the last snapshot, linked tasks and recent decisions,
the predecessor/successor chain, and a preview of the last 8 turns, read from the transcript's
tail window (never the whole file).
"""

from __future__ import annotations

import os
from typing import Any

import msgspec

from .. import activity, records
from ..safefs import open_regular
from .extract import _decode, classify_prompt
from .rows import Row

__all__ = ("Detail", "Turn", "chain", "detail", "last_turns")

TURNS = 8
TURN_CHARS = 600
PREVIEW_WINDOW = 512 * 1024


class Turn(msgspec.Struct):
    role: str  # "user" or "assistant"
    text: str
    ts: str | None = None


class Detail(msgspec.Struct):
    row: Row
    last_snapshot: Any = None
    predecessors: list[str] = msgspec.field(default_factory=list)
    successors: list[str] = msgspec.field(default_factory=list)
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
        turn = Turn(line.type, text if len(text) <= TURN_CHARS else text[:TURN_CHARS] + "\u2026",
                    line.timestamp if isinstance(line.timestamp, str) else None)
        if turns and turns[-1].role == turn.role == "assistant":
            continue  # one reply written as several block lines: keep its last text only once
        turns.append(turn)
        if len(turns) >= n:
            break
    turns.reverse()
    return turns


def chain(project: str, session_id: str, rows: list[Row]) -> tuple[list[str], list[str]]:
    """(predecessors, successors): from stale marks naming a successor, and from the /clear
    links the hooks recorded (a session_start whose predecessor is known)."""
    before: list[str] = []
    after: list[str] = []
    for row in rows:
        if row.stale is not None and row.stale.successor == session_id and row.id not in before:
            before.append(row.id)
        if row.id == session_id and row.stale is not None and row.stale.successor:
            after.append(row.stale.successor)
    for r in activity.read_rows(project).records:
        if r.kind == "session_start" and r.predecessor:
            if r.session_id == session_id and r.predecessor not in before:
                before.append(r.predecessor)
            if r.predecessor == session_id and r.session_id and r.session_id not in after:
                after.append(r.session_id)
    return before, after


def detail(project: str, row: Row, rows: list[Row]) -> Detail:
    snap = None
    served_by = []
    for rec in records.load_all(project):
        if row.id in rec.host_session_ids:
            served_by.append(rec.c3_session_id)
            for s in rec.snapshots:
                if s.host_session_id == row.id and (snap is None or s.ts > snap.ts):
                    snap = s
    before, after = chain(project, row.id, rows)
    return Detail(row=row, last_snapshot=snap, predecessors=before, successors=after,
                  turns=last_turns(row.path), c3_sessions=served_by)
