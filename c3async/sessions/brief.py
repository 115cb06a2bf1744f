"""A session's brief: what an agent needs to pick up its work, in bounded Markdown.

What the MCP resources ``c3://session/<id>`` return and what the ``continue`` prompt carries:
title, id, cwd and branch, created and last activity, the note (or last snapshot) and next
steps, a stale reason and its successor, the chain, linked tasks and decisions, the files the
session changed, the last few turns (text only, a tool call as one line), tokens and cost.

Bounded twice: reads are windows (the last turns from the transcript's end, at most
``TAIL_BYTES`` back; changed files from ``changes.WINDOW``), and the text is capped at
``cap`` bytes (8 KiB by default), dropping the oldest turns first, then files, with one line
saying what was left out. Every piece of text from a transcript, a mark or a task goes through
:func:`term.inert`, and multi-line text is quoted, so nothing in it can forge a heading of the
brief or carry a control character.

Also here: the recent rows the resource list offers (``recent``) with a one-line description
each, and ``pick``, which turns what a person typed after ``/continue`` (an id, a prefix, or
words from a title or note) into one session or the candidates.
"""

from __future__ import annotations

import os
import re
import time
from typing import NamedTuple

from ..catalog.changes import changed_files
from ..catalog.conversation import MAX_LIMIT, Item, page
from ..catalog.forks import own_first_prompt
from ..ground.clock import parse_iso
from ..ground.errors import AmbiguousSession, BadArgument, C3Error, Unavailable, UnknownSession
from ..ground.project import Project
from ..ground.term import inert, inert_line
from ..stores import records
from .chain import around
from .detail import usage_line
from .rows import Row, age
from .view import list_rows_sync

__all__ = (
    "BRIEF_BYTES",
    "Picked",
    "brief",
    "describe",
    "menu_name",
    "pick",
    "project_rows",
    "recent",
    "render",
    "short_title",
)

BRIEF_BYTES = 8 * 1024
TURNS = 6
TURN_CHARS = 1200  # of one prompt or reply
TAIL_BYTES = 2 * 1024 * 1024  # how far back from the end the last turns are looked for
FILES = 40  # changed files listed at most
PROMPT_CHARS = 600
CANDIDATES = 10


def project_rows(project: Project) -> list[Row]:
    return list_rows_sync([project], processes=False)[1]


def _when(iso: str | None, now: float) -> str:
    t = parse_iso(iso)
    if t is None:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t)) + f" ({age(iso, now)} ago)"


def short_title(row: Row, limit: int = 120) -> str:
    text = inert_line(row.title) or row.id[:8]
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


# A fork's own first prompt by (path, size, mtime): an MCP server lists its resources again and
# again, and a fork's own part is read once for each change of its file.
_OWN: dict[tuple[str, int, int], str | None] = {}
_OWN_KEEP = 512


def _own_prompt(row: Row) -> str | None:
    key = (row.path, row.size, row.mtime_ns)
    if key not in _OWN:
        if len(_OWN) >= _OWN_KEEP:
            _OWN.clear()
        _OWN[key] = own_first_prompt(row.path)
    return _OWN[key]


def menu_name(row: Row, by_id: dict[str, Row], limit: int = 100) -> str:
    """The name a session goes by in Claude Code's ``@`` menu: its title; for a fork, whose
    copied lines give it its parent's title, its own first prompt (or its own title, when it was
    renamed) and "fork of <the parent's title>", so a fork and its parent never look the same."""
    parent = by_id.get(row.forked_from) if row.forked_from else None
    if parent is None:
        return short_title(row, limit)
    theirs = inert_line(parent.title)
    mine = inert_line(row.title)
    own = mine if mine and mine not in (theirs, f"{theirs} (Branch)") else inert_line(_own_prompt(row) or "")
    of = "fork of " + short_title(parent, max(20, limit // 2 - 8))
    if not own:
        return of
    own = own if len(own) <= limit - len(of) - 3 else own[: max(10, limit - len(of) - 4)] + "\u2026"
    return f"{own} ({of})"


def describe(row: Row, now: float | None = None, *, with_age: bool = True) -> str:
    """One line for a resource: age, branch, and the note, the stale reason or the hints."""
    now = time.time() if now is None else now
    parts = [f"{age(row.last_activity or row.mtime, now)} ago"] if with_age else []
    parts.append(row.branch or "no branch")
    if row.live:
        parts.append("live")
    if row.stale is not None:
        parts.append(f"stale: {row.stale.reason}")
    elif row.note is not None:
        parts.append(f"note: {row.note.summary or row.note.next_steps or ''}")
    elif row.hints:
        parts.append("likely stale: " + ", ".join(row.hints))
    text = inert_line(" · ".join(parts))
    return text if len(text) <= 300 else text[:299] + "\u2026"


def recent(project: Project, n: int) -> list[Row]:
    """The project's ``n`` newest sessions, newest first."""
    return project_rows(project)[: max(0, n)]


# ------------------------------------------------------------------------------ the last turns


def _tail(path: str, turns: int) -> list[Item]:
    """The conversation from the ``turns``-th last prompt or reply to the end, read forward from
    TAIL_BYTES before the end (a page at a time): a transcript of any size costs that window."""
    try:
        size = os.stat(path).st_size
        items: list[Item] = []
        at: int | None = max(0, size - TAIL_BYTES)
        while at is not None:
            pg = page(path, after=at, limit=MAX_LIMIT)
            items += pg.items
            at = pg.next if pg.next is not None and pg.next > at else None
    except (OSError, C3Error):
        return []
    count = 0
    for at_ in range(len(items) - 1, -1, -1):
        if items[at_].kind in ("user", "assistant") and not items[at_].sidechain:
            count += 1
            if count == turns:
                return items[at_:]
    return items


def _quote(text: str, limit: int) -> list[str]:
    text = inert(text).strip()
    if len(text) > limit:
        text = text[:limit].rstrip() + "\u2026"
    return ["> " + line if line else ">" for line in text.splitlines()] or [">"]


def _turn_blocks(items: list[Item]) -> list[list[str]]:
    """One block of lines per prompt or reply, its tool calls following it one line each."""
    blocks: list[list[str]] = []
    for item in items:
        if item.sidechain:
            continue
        if item.kind in ("user", "assistant"):
            who = "User" if item.kind == "user" else "Assistant"
            blocks.append([f"**{who}**:", *_quote(item.text or "", TURN_CHARS)])
        elif item.kind == "tool" and item.name:
            label = inert_line(f"{item.name}: {item.summary}" if item.summary else item.name)
            line = f"- \u25b8 {label[:200]}" + (" (error)" if item.is_error else "")
            if blocks:
                blocks[-1].append(line)
            else:
                blocks.append([line])
        elif item.kind in ("summary", "clear"):
            blocks.append([f"- \u2500 {'conversation compacted' if item.kind == 'summary' else 'context cleared'}"])
    return blocks


# ------------------------------------------------------------------------------------ the brief


def _by_id(rows: list[Row]) -> dict[str, Row]:
    return {r.id: r for r in rows}


def _ref(sid: str, rows: dict[str, Row]) -> str:
    row = rows.get(sid)
    return f"`{sid}` {short_title(row, 80)}" if row is not None else f"`{sid}`"


def _relative(path: str, cwd: str) -> str:
    try:
        rel = os.path.relpath(path, cwd)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _last_snapshot(project: Project, sid: str) -> records.Snapshot | None:
    best = None
    for rec in records.load_all(project):
        if sid in rec.host_session_ids:
            for s in rec.snapshots:
                if s.host_session_id == sid and (best is None or s.ts > best.ts):
                    best = s
    return best


def _head(row: Row, rows: dict[str, Row], project: Project, now: float) -> list[str]:
    out = [
        f"# {short_title(row, 200)}",
        "",
        f"- id: `{row.id}`",
        f"- cwd: `{inert_line(row.cwd)}`"
        + (" (gone)" if row.cwd_gone else "")
        + f", branch: `{inert_line(row.branch or '-')}`",
        f"- created: {_when(row.created_at, now)}; last activity: {_when(row.last_activity or row.mtime, now)}"
        + ("; LIVE now" if row.live else ""),
        f"- resume: `{inert_line(row.resume)}`",
        f"- {usage_line(row)}",
    ]
    if row.stale is not None:
        out += ["", "## Stale", *_quote(row.stale.reason or "(no reason given)", 2000)]
        if row.stale.successor:
            out.append(f"- successor: {_ref(row.stale.successor, rows)}")
    elif row.hints:
        out.append(f"- likely stale: {inert_line(', '.join(row.hints))}")
    if row.note is not None:
        out += ["", "## Note", *_quote(row.note.summary or "-", 2000), "", "## Next steps"]
        out += _quote(row.note.next_steps or "-", 2000)
    else:
        snap = _last_snapshot(project, row.id)
        if snap is not None:
            out += ["", "## Last snapshot", *_quote(snap.summary, 2000)]
    if row.last_prompt:
        out += ["", "## Last prompt", *_quote(row.last_prompt, PROMPT_CHARS)]
    before, after = around([*rows.values(), row], row.id)
    chain = [f"- before: {_ref(s, rows)}" for s in before[:5]]
    chain += [f"- after: {_ref(s, rows)}" for s in after[:5]]
    if chain:
        out += ["", "## Chain", *chain]
    if row.links.tasks or row.links.decisions:
        out += ["", "## Tasks and decisions"]
        out += [f"- task `{t.id[:8]}` {inert_line(t.title)[:160]} ({t.status})" for t in row.links.tasks[:10]]
        out += [f"- decision `{d.id[:8]}` {inert_line(d.text)[:200]}" for d in row.links.decisions[:10]]
    return out


def render(project: Project, row: Row, rows: list[Row], cap: int = BRIEF_BYTES, *, now: float | None = None) -> str:
    """The brief of ``row`` (``rows``: the project's listing, for the chain's titles)."""
    now = time.time() if now is None else now
    by_id = _by_id(rows)
    head = _head(row, by_id, project, now)
    changes = changed_files(row.path)
    files = [_relative(p, row.cwd) for p in changes.files]
    blocks = _turn_blocks(_tail(row.path, TURNS))
    shown_files = files[:FILES]
    left: list[str] = []
    if len(files) > FILES:
        left.append(f"{len(files) - FILES} more changed files")
    if not changes.whole:
        left.append(f"edits before the last {changes.read_bytes >> 20} MiB of the transcript")

    def assemble(blocks: list[list[str]], shown: list[str], notes: list[str]) -> str:
        out = list(head)
        if shown:
            out += ["", "## Files changed", *(f"- `{inert_line(p)[:300]}`" for p in shown)]
        if blocks:
            out += ["", "## Last turns"]
            for b in blocks:
                out += b
        if notes:
            out += ["", f"_Left out: {'; '.join(notes)}._"]
        return "\n".join(out) + "\n"

    dropped_turns = 0
    text = assemble(blocks, shown_files, left)
    while len(text.encode()) > cap and (blocks or shown_files):
        if blocks:
            blocks = blocks[1:]
            dropped_turns += 1
        else:
            shown_files = shown_files[: len(shown_files) // 2]
        notes = list(left)
        if dropped_turns:
            notes.insert(0, f"{dropped_turns} earlier turn{'s' if dropped_turns > 1 else ''} (over {cap >> 10} KiB)")
        if len(shown_files) < min(len(files), FILES):
            notes.append(f"{min(len(files), FILES) - len(shown_files)} changed files (over {cap >> 10} KiB)")
        text = assemble(blocks, shown_files, notes)
    data = text.encode()
    if len(data) > cap:  # the head alone is over: cut it, and say so
        tail = f"\n\n_Left out: the rest of the brief (over {cap >> 10} KiB)._\n".encode()
        text = data[: max(0, cap - len(tail))].decode("utf-8", "ignore") + tail.decode()
    return text


def brief(project: Project, ref: str, *, host: str | None = None, cap: int = BRIEF_BYTES) -> str:
    """The brief of the session ``ref`` names (a full id or a unique prefix). Raises a C3Error."""
    rows = project_rows(project)
    row = _one(rows, ref)
    if row is None:
        from .refs import find
        from .view import row_for

        found = find(project, ref, host=host)
        row = next((r for r in rows if r.id == found.id), None) or row_for(found.project, found.id)
        if row is None:
            raise Unavailable(f"session {found.id} has no transcript yet: try again in a moment")
    return render(project, row, rows, cap)


def _one(rows: list[Row], ref: str) -> Row | None:
    low = (ref or "").strip().lower()
    if len(low) < 4:
        return None
    hits = [r for r in rows if r.id.startswith(low)]
    return hits[0] if len(hits) == 1 else None


# ---------------------------------------------------------------------- what /continue names


class Picked(NamedTuple):
    """The session a ``continue`` argument names (``row``), or why none: ``problem`` and the
    ``candidates`` to choose from."""

    row: Row | None
    rows: list[Row]
    problem: str = ""
    candidates: tuple[Row, ...] = ()


# A session a /continue started is titled by that command: its title names the session it
# continued, not its own work (its note still counts).
_CONTINUED = re.compile(r"/mcp__\S{0,200}__continue(?:\s|$)")


def _words_match(row: Row, words: list[str]) -> bool:
    parts = [row.id] if _CONTINUED.match(row.title) else [row.title, row.id]
    if row.note is not None:
        parts += [row.note.summary or "", row.note.next_steps or ""]
    hay = "\n".join(parts).casefold()
    return all(w in hay for w in words)


def pick(project: Project, ref: str, *, host: str | None = None) -> Picked:
    """What ``/continue REF`` means. Empty: the session this one followed (its chain), else the
    newest other one. An id or a unique prefix: that session. Else words, all of which must be
    in a session's title or note. Never raises for a ref that names nothing: ``problem`` says
    so and ``candidates`` lists the nearest."""
    rows = project_rows(project)
    others = [r for r in rows if r.id != host]
    ref = " ".join((ref or "").split())
    if not ref:
        before = [s for s in (around(rows, host)[0] if host else []) if s != host]
        by_id = _by_id(rows)
        row = next((by_id[s] for s in before if s in by_id), None) or (others[0] if others else None)
        if row is None:
            return Picked(None, rows, "this project has no earlier session to continue")
        return Picked(row, rows)
    shown = ref if len(ref) <= 200 else ref[:199] + "\u2026"
    low = ref.lower()
    if len(low) >= 4 and all(c in "0123456789abcdef-" for c in low):
        hits = [r for r in rows if r.id.startswith(low)]
        if host and [r.id for r in hits] == [host]:
            return Picked(None, rows, f"{shown!r} is this session itself", tuple(others[:CANDIDATES]))
        hits = [r for r in hits if r.id != host]
        if len(hits) == 1:
            return Picked(hits[0], rows)
        if len(hits) > 1:
            return Picked(None, rows, f"{len(hits)} sessions start with {shown!r}", tuple(hits[:CANDIDATES]))
        try:
            from .refs import find
            from .view import row_for

            found = find(project, low, host=host)
            row = row_for(found.project, found.id) if found.id != host else None
            if row is not None:
                return Picked(row, rows)
        except AmbiguousSession as exc:
            return Picked(None, rows, str(exc))
        except (UnknownSession, BadArgument):
            pass  # perhaps words after all ("beef", "cafe"), or not an id at all
    words = low.casefold().split()
    hits = [r for r in others if _words_match(r, words)]
    if len(hits) == 1:
        return Picked(hits[0], rows)
    if hits:
        return Picked(None, rows, f"{len(hits)} sessions match {shown!r}", tuple(hits[:CANDIDATES]))
    return Picked(None, rows, f"no session of this project matches {shown!r}", tuple(others[:CANDIDATES]))
