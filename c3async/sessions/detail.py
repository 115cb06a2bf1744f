"""One session expanded: what ``c3async show``, ``c3_session(action='show')`` and the Hub's row
detail display, from one call (``show``).

The first and last prompt, the note or the last snapshot, linked tasks and recent decisions,
the whole predecessor/successor chain (a row names only its neighbours), the session it was
forked from and its forks, the title uncut, and a preview of the last 8 turns, read from the
transcript's tail window (never the whole file).
"""

from __future__ import annotations

import os

import msgspec

from ..catalog.changes import changed_files
from ..catalog.conversation import MAX_LIMIT, Item, page
from ..catalog.extract import _decode, classify_prompt
from ..catalog.read import read_transcript
from ..ground.errors import Unavailable
from ..ground.project import Project
from ..ground.safefs import open_regular
from ..stores import records
from .rows import Chain, Row

__all__ = (
    "Detail",
    "Turn",
    "detail",
    "last_turns",
    "render",
    "render_conversation",
    "show",
    "tail_items",
    "usage_line",
    "usd",
)

TURNS = 8
TURN_CHARS = 600
PREVIEW_WINDOW = 512 * 1024
CHANGED_SHOWN = 20  # files changed named in the text (the JSON has them all)


class Turn(msgspec.Struct):
    role: str  # "user" or "assistant"
    text: str
    ts: str | None = None


class Detail(msgspec.Struct):
    row: Row  # its title uncut
    last_snapshot: records.Snapshot | None = None
    turns: list[Turn] = msgspec.field(default_factory=list)
    c3_sessions: list[str] = msgspec.field(default_factory=list)
    elsewhere: bool = False  # found in another project than the one asked (``row.project``)
    chain: Chain = msgspec.field(default_factory=Chain)  # every session before and after it
    # the files its edit and write calls named, most recently changed first (from the end of its
    # transcript: ``changed_whole`` false when the window did not cover all of it)
    changed: list[str] = msgspec.field(default_factory=list)
    changed_whole: bool = True


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


def detail(project: Project, row: Row) -> Detail:
    snap = None
    served_by = []
    for rec in records.load_all(project):
        if row.id in rec.host_session_ids:
            served_by.append(rec.c3_session_id)
            for s in rec.snapshots:
                if s.host_session_id == row.id and (snap is None or s.ts > snap.ts):
                    snap = s
    changes = changed_files(row.path)
    return Detail(
        row=row,
        last_snapshot=snap,
        turns=last_turns(row.path),
        c3_sessions=served_by,
        changed=changes.files,
        changed_whole=changes.whole,
    )


def show(project: Project, ref: str | None, *, host: str | None = None) -> Detail:
    """The session ``ref`` names (empty: the host session), expanded: a session of this
    project, else of another registered project or any folder of Claude Code's (``elsewhere``
    then says it is not this project's). Raises a C3Error."""
    from .refs import find
    from .view import list_rows_sync, row_for, whole_chain

    found = find(project, ref, host=host, anywhere=True)
    home, sid = found.project, found.id
    # The chain needs the other rows; a project c3async does not list is not listed (nor its
    # cache written) for a look at one of its sessions.
    rows = list_rows_sync([home], processes=False)[1] if found.listed else []
    row = next((r for r in rows if r.id == sid), None) or row_for(home, sid)
    if row is None:
        raise Unavailable(
            f"session {sid} has no transcript yet (Claude Code writes it during the first turn): try again in a moment"
        )
    out = detail(home, row)
    out.elsewhere = found.elsewhere
    out.chain = whole_chain(home, [*rows, row], sid)
    if row.title_truncated:
        _whole_title(row)
    return out


def _whole_title(row: Row) -> None:
    """The row's custom or ai title uncut (a listing keeps PROMPT_CAP characters of it)."""
    try:
        rec = read_transcript(row.path, row.size, row.mtime_ns, whole_titles=True)
    except OSError:
        return  # gone since it was listed: the cut title stays, and says so
    title, _ = rec.title()
    if title:
        row.title, row.title_truncated = title, False


def usd(cost: float) -> str:
    """Dollars to the cent (``<$0.01`` for less, never a misleading ``$0.00``)."""
    return "$0.00" if cost == 0 else "<$0.01" if cost < 0.005 else f"${cost:,.2f}"


def usage_line(row: Row) -> str:
    """``tokens 1,234,567 (input ..., output ..., cache write ..., cache read ...), cost $3.40``."""
    t = row.tokens
    if t is None:
        return "tokens: not accounted yet (`c3async usage` counts them; the server does every minute)"
    cost = usd(row.cost_usd or 0.0)
    if row.unpriced_models:  # the "+" of every report: plus the usage of models with no price
        cost += f"+ (not counting {', '.join(row.unpriced_models)}: no price known; prices.json gives one)"
    return (
        f"tokens: {t.total:,} (input {t.input:,}, output {t.output:,}, cache write {t.cache_write:,}, "
        f"cache read {t.cache_read:,}); cost {cost}"
    )


def render(d: Detail, *, preview: bool = True) -> str:
    """The detail as plain text, for the agent and the terminal (the caller makes it inert);
    without ``preview``, no "last turns" (``render_conversation`` shows them instead)."""
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
    out.append(usage_line(row))
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
    if row.forked_from:
        out.append(f"forked from: {row.forked_from}")
    if row.forks:
        out.append("forks: " + ", ".join(row.forks))
    if d.chain.predecessors:
        out.append("predecessors: " + ", ".join(d.chain.predecessors))
    if d.chain.successors:
        out.append("successors: " + ", ".join(d.chain.successors))
    if row.tags:
        out.append("tags: " + " ".join(row.tags))
    if d.changed:
        more = f" ... {len(d.changed) - CHANGED_SHOWN} more" if len(d.changed) > CHANGED_SHOWN else ""
        out.append("files changed (`c3async files PATH`): " + ", ".join(d.changed[:CHANGED_SHOWN]) + more)
    if d.turns and preview:
        out.append("last turns:")
        out += [f"  [{t.role}] {' '.join(t.text.split())[:300]}" for t in d.turns]
    return "\n".join(out)


# ------------------------------------------------------------------ the last turns, for `show --turns N`

TURN_KINDS = ("user", "assistant")  # what counts as a turn; tool calls and markers come along
TURNS_CHARS = 4000  # of one prompt or reply, on a terminal
TOOL_RUN = 12  # a longer run of tool calls is shown by its ends
TAIL_PAGES = 64  # pages read back at most (each bounded): a file of giant lines costs that, not its size


def tail_items(path: str, n: int) -> list[Item]:
    """The conversation from the ``n``-th last prompt or reply to the end (tool calls and
    markers between them included, tool calls without their input and output), read backward
    from the end of the transcript a page at a time. An unreadable transcript gives []."""
    if n <= 0:
        return []
    items: list[Item] = []
    turns = 0
    before: int | None = 1 << 62  # the end
    pages = 0
    try:
        while before is not None and turns < n and pages < TAIL_PAGES:
            pages += 1
            pg = page(path, before=before, limit=MAX_LIMIT)
            for item in pg.items:
                if item.kind == "tool":
                    item.input = item.output = None
            items[:0] = pg.items
            turns += sum(1 for i in pg.items if i.kind in TURN_KINDS and not i.sidechain)
            before = pg.prev
    except OSError:
        return []
    seen = 0
    for at in range(len(items) - 1, -1, -1):
        if items[at].kind in TURN_KINDS and not items[at].sidechain:
            seen += 1
            if seen == n:
                return items[at:]
    return items


def _turn_line(item: Item) -> str:
    if item.kind == "tool":
        label = f"{item.name}: {item.summary}" if item.name and item.summary else item.name or "tool result"
        return f"  \u25b8 {label}" + ("  (error)" if item.is_error else "")
    if item.kind == "summary":
        return "  \u2500\u2500 conversation compacted (summary) \u2500\u2500"
    if item.kind == "clear":
        return f"  \u2500\u2500 {item.text}: context cleared \u2500\u2500"
    if item.kind in ("command", "long"):
        return f"  {' '.join((item.text or '').split())}"
    text = (item.text or "").strip()
    if len(text) > TURNS_CHARS or item.truncated:
        text = text[:TURNS_CHARS].rstrip() + "\u2026"
    when = f" {item.ts[:16].replace('T', ' ')}" if item.ts else ""
    body = "\n".join("    " + line for line in text.splitlines())
    return f"  [{'sub-agent ' if item.sidechain else ''}{item.kind}{when}]\n{body}"


def render_conversation(items: list[Item], n: int) -> str:
    """The last turns as plain text (the caller makes it inert): prompts and replies whole (cut
    at 4,000 characters), tool calls one line each (a run of more than 12 by its ends)."""
    turns = sum(1 for i in items if i.kind in TURN_KINDS and not i.sidechain)
    out = [f"last {min(turns, n)} turn{'' if min(turns, n) == 1 else 's'}:"]
    run: list[Item] = []

    def flush() -> None:
        if len(run) > TOOL_RUN:
            out.extend(_turn_line(i) for i in run[:5])
            out.append(f"  \u2026 {len(run) - 10} more tool calls \u2026")
            out.extend(_turn_line(i) for i in run[-5:])
        else:
            out.extend(_turn_line(i) for i in run)
        run.clear()

    for item in items:
        if item.kind == "tool":
            run.append(item)
            continue
        flush()
        out.append(_turn_line(item))
    flush()
    if len(out) == 1:
        out.append("  (none)")
    return "\n".join(out)
