"""One transcript's conversation, read a page at a time (the Hub's reader, ``c3async show --turns``).

A page is addressed by byte offsets into the file, so the file is never read whole and a page
costs what its own lines cost: ``after=X`` reads forward from the line holding byte X,
``before=X`` reads backward from there, ``at=X`` gives the page around the line holding byte X
(a search hit) and names that item as ``target``. Each page carries ``prev`` (pass it as
``before=``) and ``next`` (pass it as ``after=``): None at the ends of the file.

:class:`Walk` reads a whole transcript forward that way, a page at a time from one descriptor
(an export).

Reads are bounded windows (``os.pread``, 256 KiB at a time, grown only to fit one long line up to
8 MiB); a longer line is never loaded: it is shown as ``(line too long: N MiB)``. A page holds at
most ``limit`` items, about a million characters of text, and scans at most 64 MiB of file.

Items, in file order, each with its line's byte ``offset``:

- ``user``: a real prompt (as the catalog judges it: no meta lines, command markup, tool results);
- ``assistant``: a reply's text block (a reply written as several block lines gives several items);
- ``tool``: one per tool call, its name, a one-line ``summary`` of its input, the input as JSON and
  the output of its tool_result, each cut to 20,000 characters (``*_truncated``). A result whose
  call is not on the page is an item of its own (no ``name``);
- ``summary``: a compact summary (the conversation was compacted here);
- ``clear``: a ``/clear``, ``/reset`` or ``/new``; ``command``: another slash command;
- ``long``: a line over the cap.

A sub-agent's lines that Claude Code 1.0.x wrote into the session's own file are items too,
marked ``sidechain`` (a search hit in one opens on it).

Meta lines, thinking blocks and bookkeeping lines (file-history-snapshot, queue-operation,
titles, system lines) are skipped. Hostile input costs a line, never the page: invalid UTF-8 is
replaced, a line that is not JSON or is nested past the recursion limit is skipped, the last line
when unterminated (a write in flight) is left for a later page, and a file that shrinks while it
is read gives a short page with ``changed`` set.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..ground.errors import DECODE_ERRORS, BadArgument
from ..ground.safefs import open_regular, pread_all
from .extract import CLEAR_COMMANDS, _Block, _Message, classify_prompt
from .extract import _Line as _PromptLine
from .listing import regular_files

__all__ = (
    "LINE_CAP",
    "MAX_LIMIT",
    "OUTPUT_CAP",
    "PAGE_ITEMS",
    "Item",
    "Page",
    "Walk",
    "open_subagent",
    "page",
)

WINDOW = 256 * 1024  # bytes read at a time
LINE_CAP = 8 * 1024 * 1024  # a longer line is never loaded
SEARCH_CHUNK = 1024 * 1024  # looking for the end of a line over the cap
SCAN_BYTES = 64 * 1024 * 1024  # file bytes one page may go through
PAGE_CHARS = 1_000_000  # characters of text one page may carry
PAGE_ITEMS = 50
MAX_LIMIT = 200
TEXT_CAP = 100_000  # a prompt, a reply, a summary
OUTPUT_CAP = 20_000  # a tool's input and its output
SUMMARY_CAP = 200  # a tool call's one-line summary

_AGENT = re.compile(r"agent-[A-Za-z0-9_-]{1,128}")
_AGENT_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
_WS = re.compile(r"\s+")
_CONVERSATION = (b'"type":"user"', b'"type":"assistant"')  # compact JSON, as Claude Code writes


class Item(msgspec.Struct, omit_defaults=True):
    """One thing shown in the reader. ``offset`` is where its line starts in the file."""

    kind: str  # user | assistant | tool | summary | clear | command | long
    offset: int
    ts: str | None = None
    text: str | None = None
    truncated: bool = False
    name: str | None = None  # tool: the tool's name (None for a result whose call is not on the page)
    summary: str | None = None  # tool: its input in one line
    input: str | None = None
    input_truncated: bool = False
    output: str | None = None  # tool: the result's text (None: no result on this page)
    output_truncated: bool = False
    is_error: bool = False
    tool_id: str | None = None
    result_offset: int | None = None  # where the tool_result line starts
    agent: str | None = None  # tool: the sub-agent file it ran (``agent-<id>``), when known
    bytes: int | None = None  # long: the line's length
    sidechain: bool = False  # a sub-agent's line written into the session's own file (1.0.x)


class Page(msgspec.Struct):
    items: list[Item]
    start: int  # the page covers the lines in [start, end)
    end: int
    size: int  # the file's size when read
    prev: int | None  # before= this for the page before (None: this page starts the file)
    next: int | None  # after= this for the page after (None: nothing more to read)
    target: int | None = None  # with at=: the offset of the item showing that line
    changed: bool = False  # the file shrank while it was read: reload


# ------------------------------------------------------------------------------- reading lines


@dataclass(slots=True)
class _Reading:
    fd: int
    size: int
    changed: bool = False
    scanned: int = 0
    searched: int = 0  # bytes looked through for the ends of lines over the cap
    extents: list[tuple[int, int]] | None = None  # where the file holds data (a sparse file's holes skipped)
    gave_up_at: int = 0
    cut: bool = False  # a line over the cap goes on past what this page searched


MAX_EXTENTS = 4096
GAVE_UP = -2  # a search for a line's end ran out of the page's budget (``_Reading.gave_up_at``)


def _data(r: _Reading) -> list[tuple[int, int]]:
    """The file's data extents, [start, end), found with SEEK_DATA / SEEK_HOLE: a sparse file's
    holes hold only zeros, so no newline, and are never read. The whole file where the
    filesystem cannot tell (or the file is cut into more than MAX_EXTENTS pieces)."""
    if r.extents is None:
        r.extents = [(0, r.size)]
        seek_data, seek_hole = getattr(os, "SEEK_DATA", None), getattr(os, "SEEK_HOLE", None)
        if seek_data is not None and seek_hole is not None:
            found: list[tuple[int, int]] = []
            pos = 0
            try:
                while pos < r.size and len(found) < MAX_EXTENTS:
                    try:
                        start = os.lseek(r.fd, pos, seek_data)
                    except OSError as exc:
                        if exc.errno != errno.ENXIO:
                            raise
                        break  # only a hole is left
                    end = min(os.lseek(r.fd, start, seek_hole), r.size)
                    found.append((start, end))
                    pos = end
                if len(found) < MAX_EXTENTS:
                    r.extents = found
                if os.fstat(r.fd).st_size < r.size:
                    r.changed = True  # it shrank since it was opened: what is read may be short
            except OSError:
                pass
    return r.extents


def _budget(r: _Reading, n: int) -> bool:
    """Count ``n`` more bytes searched for a line's end; False once a page's budget is spent."""
    r.searched += n
    return r.searched <= SCAN_BYTES


def _find_newline(r: _Reading, at: int) -> int:
    """The offset of the first newline at or after ``at``, -1 when there is none (a line still
    being written), or GAVE_UP once the page's search budget is spent, with ``r.gave_up_at``
    where it stopped. Searched without keeping, in the file's data only."""
    for start, end in _data(r):
        if end <= at:
            continue
        pos = max(at, start)
        while pos < end:
            n = min(SEARCH_CHUNK, end - pos)
            if not _budget(r, n):
                r.gave_up_at = pos
                return GAVE_UP
            chunk = pread_all(r.fd, pos, n)
            if not chunk:
                r.changed = True
                return -1
            i = chunk.find(b"\n")
            if i >= 0:
                return pos + i
            pos += len(chunk)
    return -1


def _find_newline_back(r: _Reading, before: int) -> int:
    """The offset of the last newline before ``before``, -1 when there is none (the line starts
    the file), or GAVE_UP when the page's search budget ran out first, with ``r.gave_up_at``
    where it stopped. Only the file's data is read."""
    for start, end in reversed(_data(r)):
        if start >= before:
            continue
        pos = min(before, end)
        while pos > start:
            n = min(SEARCH_CHUNK, pos - start)
            if not _budget(r, n):
                r.gave_up_at = pos
                return GAVE_UP
            chunk = pread_all(r.fd, pos - n, n)
            if len(chunk) < n:
                r.changed = True
                return -1
            i = chunk.rfind(b"\n")
            if i >= 0:
                return pos - n + i
            pos -= n
    return -1


def _line_start(r: _Reading, pos: int) -> int:
    """Where the line holding byte ``pos`` starts (``pos`` clamped to the file). A line whose
    start lies further back than a page may search is taken to start at ``pos`` (a page of a
    line too long, read in steps)."""
    pos = max(0, min(pos, r.size))
    if pos == 0:
        return 0
    nl = _find_newline_back(r, pos)
    return pos if nl == GAVE_UP else nl + 1


def _grow(have: int) -> int:
    """How much more to read for a line of which ``have`` bytes are held: a window, then doubling,
    never past the cap (plus the newline)."""
    return WINDOW if have < WINDOW else max(1, min(have, LINE_CAP + 1 - have))


def _forward(r: _Reading, start: int) -> Iterator[tuple[int, int, bytes | None]]:
    """(offset, end, line) of each whole line from ``start`` (a line start) on; the line is None
    when longer than LINE_CAP. An unterminated last line is not given."""
    buf, buf_at, pos = b"", start, 0
    while True:
        nl = buf.find(b"\n", pos)
        if nl >= 0:
            yield buf_at + pos, buf_at + nl + 1, buf[pos:nl]
            pos = nl + 1
            continue
        have = len(buf) - pos
        read_at = buf_at + len(buf)
        if read_at >= r.size:
            return
        if have > LINE_CAP:
            line_at = buf_at + pos
            nl_at = _find_newline(r, read_at)
            if nl_at == GAVE_UP:  # the rest of this line is for the next page
                r.cut = True
                yield line_at, r.gave_up_at, None
                return
            if nl_at < 0:
                return
            yield line_at, nl_at + 1, None
            buf, buf_at, pos = b"", nl_at + 1, 0
            continue
        want = min(_grow(have), r.size - read_at)
        chunk = pread_all(r.fd, read_at, want)
        if len(chunk) < want:
            r.changed = True  # the file shrank: what was read is still whole lines or nothing
            if not chunk:
                return
        buf, buf_at, pos = buf[pos:] + chunk, buf_at + pos, 0


def _backward(r: _Reading, end: int) -> Iterator[tuple[int, int, bytes | None]]:
    """(offset, end, line) of each whole line before ``end`` (a line start), the last first."""
    buf, buf_at, hi = b"", end, 0  # buf holds the bytes from buf_at; buf[:hi] is not given yet
    while buf_at + hi > 0:
        nl = buf.rfind(b"\n", 0, hi - 1) if hi > 0 else -1
        if nl >= 0 or (buf_at == 0 and hi > 0):
            s = nl + 1
            yield buf_at + s, buf_at + hi, buf[s : hi - 1]
            hi = s
            continue
        if hi > LINE_CAP:
            nl = _find_newline_back(r, buf_at)
            if r.changed:
                return
            if nl == GAVE_UP:  # where this line starts is for the page before
                r.cut = True
                yield r.gave_up_at, buf_at + hi, None
                return
            line_at = nl + 1
            yield line_at, buf_at + hi, None
            buf, buf_at, hi = b"", line_at, 0
            continue
        n = min(_grow(hi), buf_at)
        chunk = pread_all(r.fd, buf_at - n, n)
        if len(chunk) < n:
            r.changed = True
            return
        buf = chunk + buf[:hi]
        buf_at -= n
        hi = len(buf)


# ------------------------------------------------------------------------------- lines -> items


class _Entry(msgspec.Struct):
    """The fields of a transcript line the reader uses; everything else is skipped."""

    type: Any = None
    isMeta: Any = None
    isCompactSummary: Any = None
    isSidechain: Any = None
    message: Any = None
    timestamp: Any = None
    toolUseResult: Any = None


_decode_entry = msgspec.json.Decoder(_Entry).decode


def _decode(raw: bytes) -> _Entry | None:
    try:
        return _decode_entry(raw)
    except msgspec.ValidationError:
        return None  # valid JSON, but not an object
    except msgspec.DecodeError:
        fixed = raw.decode("utf-8", "replace").encode()  # invalid UTF-8: read it replaced
        if fixed == raw:
            return None
        try:
            return _decode_entry(fixed)
        except DECODE_ERRORS:
            return None
    except DECODE_ERRORS:  # RecursionError: nested past the limit
        return None


@dataclass(slots=True)
class _Result:
    offset: int
    tool_id: str | None
    output: str
    truncated: bool
    is_error: bool
    agent: str | None


@dataclass(slots=True)
class _Parsed:
    offset: int
    end: int
    items: list[Item] = field(default_factory=list)
    results: list[_Result] = field(default_factory=list)
    chars: int = 0


def _cap(text: str, limit: int) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[:limit], True)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _one_line(text: str) -> str:
    flat = _WS.sub(" ", text).strip()
    return flat if len(flat) <= SUMMARY_CAP else flat[: SUMMARY_CAP - 1] + "\u2026"


# Which input field says what a call does, by tool (else the first string field).
_SUMMARY_KEYS = {
    "Bash": ("command",),
    "Read": ("file_path",),
    "Write": ("file_path",),
    "Edit": ("file_path",),
    "MultiEdit": ("file_path",),
    "NotebookEdit": ("notebook_path",),
    "Grep": ("pattern",),
    "Glob": ("pattern",),
    "WebFetch": ("url",),
    "WebSearch": ("query",),
    "Task": ("description", "prompt"),
    "Agent": ("description", "prompt"),
}


def _tool_summary(name: str, value: Any) -> str:
    if not isinstance(value, dict):
        return ""
    if name == "TodoWrite" and isinstance(value.get("todos"), list):
        return f"{len(value['todos'])} todos"
    for key in _SUMMARY_KEYS.get(name, ()):
        if isinstance(value.get(key), str):
            return _one_line(value[key])
    for v in value.values():
        if isinstance(v, str) and v.strip():
            return _one_line(v)
    return ""


def _json_text(value: Any) -> str:
    try:
        return msgspec.json.format(msgspec.json.encode(value), indent=2).decode("utf-8", "replace")
    except (TypeError, *DECODE_ERRORS):
        return ""


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif block.get("type") == "image":
            parts.append("[image]")
    return "\n".join(parts)


def _prompt_line(entry: _Entry, content: Any) -> _PromptLine | None:
    """The catalog's view of a user line, for ``classify_prompt``."""
    if isinstance(content, str):
        message = _Message(content)
    elif isinstance(content, list):
        message = _Message([_Block(b.get("type"), b.get("text")) for b in content if isinstance(b, dict)])
    else:
        return None
    # isSidechain is left out: a sub-agent file's lines are all sidechain lines, and the main
    # file's are filtered before this.
    return _PromptLine(type="user", isMeta=entry.isMeta, isCompactSummary=entry.isCompactSummary, message=message)


def _parse(offset: int, end: int, raw: bytes | None, sidechain: bool) -> _Parsed:
    """What one line shows: items and tool results."""
    line = _Parsed(offset, end)
    if raw is None:
        size = end - offset
        line.items.append(Item("long", offset, text=f"(line too long: {size / 2**20:.1f} MiB)", bytes=size))
        return line
    if not any(marker in raw for marker in _CONVERSATION):
        return line  # bookkeeping: snapshots, queue operations, titles, system lines
    entry = _decode(raw)
    if entry is None or entry.isMeta is True:
        return line
    msg = entry.message if isinstance(entry.message, dict) else {}
    content = msg.get("content")
    ts = _str(entry.timestamp)
    if entry.type == "user":
        _parse_user(line, entry, content, ts)
    elif entry.type == "assistant" and isinstance(content, list):
        _parse_assistant(line, content, ts)
    if entry.isSidechain is True and not sidechain:  # Claude Code 1.0.x wrote sub-agents inline
        for item in line.items:
            item.sidechain = True
    return line


def _parse_user(line: _Parsed, entry: _Entry, content: Any, ts: str | None) -> None:
    if entry.isCompactSummary is True:
        text, cut = _cap(_result_text(content), TEXT_CAP)
        line.items.append(Item("summary", line.offset, ts, text, cut))
        line.chars += len(text)
        return
    if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
        tur = entry.toolUseResult
        agent_id = tur.get("agentId") if isinstance(tur, dict) else None
        agent = f"agent-{agent_id}" if isinstance(agent_id, str) and _AGENT_ID.fullmatch(agent_id) else None
        for b in content:
            if not (isinstance(b, dict) and b.get("type") == "tool_result"):
                continue
            out, cut = _cap(_result_text(b.get("content")), OUTPUT_CAP)
            tool_id = b.get("tool_use_id") if isinstance(b.get("tool_use_id"), str) else None
            line.results.append(_Result(line.offset, tool_id, out, cut, b.get("is_error") is True, agent))
            line.chars += len(out)
        return
    prompt = _prompt_line(entry, content)
    found = classify_prompt(prompt) if prompt is not None else None
    if found is None:
        return
    what, text = found
    if what == "command":
        kind = "clear" if text.split(" ")[0] in CLEAR_COMMANDS else "command"
        line.items.append(Item(kind, line.offset, ts, text))
    else:
        text, cut = _cap(text, TEXT_CAP)
        line.items.append(Item("user", line.offset, ts, text, cut))
    line.chars += len(text)


def _parse_assistant(line: _Parsed, content: list, ts: str | None) -> None:
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str) and block["text"].strip():
            text, cut = _cap(block["text"], TEXT_CAP)
            line.items.append(Item("assistant", line.offset, ts, text, cut))
            line.chars += len(text)
        elif kind == "tool_use":
            name = _str(block.get("name")) or "tool"
            value = block.get("input")
            text, cut = _cap(_json_text(value), OUTPUT_CAP)
            tool_id = block.get("id") if isinstance(block.get("id"), str) else None
            item = Item(
                "tool",
                line.offset,
                ts,
                name=name,
                summary=_tool_summary(name, value),
                input=text,
                input_truncated=cut,
                tool_id=tool_id,
            )
            line.items.append(item)
            line.chars += len(text) + len(item.summary or "")


# ------------------------------------------------------------------------------- pages


# A page ends only where no tool call on it waits for its result (and starts only where no
# result waits for its call): a parallel batch of calls and their results is never cut. A real
# prompt (or a compact summary, a /clear, a command) is always such a place: Claude Code
# finishes a turn's tool calls, with a result or an "interrupted" one, before the next prompt.
# A batch is let to grow a page past its limit up to BATCH_ITEMS items and BATCH_CHARS
# characters; a larger one (no real transcript has one) is cut, and the halves are joined by
# looking the missing half up (``_repair``).
BATCH_ITEMS = 400
BATCH_CHARS = 4 * PAGE_CHARS
REPAIR_LINES = 2000  # lines looked through for the other half of a cut pair
REPAIR_BYTES = 4 * 1024 * 1024  # nor further than this: a call and its result sit side by side


def _calls(line: _Parsed) -> set[str]:
    return {i.tool_id for i in line.items if i.kind == "tool" and i.tool_id}


def _results(line: _Parsed) -> set[str]:
    return {x.tool_id for x in line.results if x.tool_id}


def _turn(line: _Parsed) -> bool:
    """Does a new turn start here (no tool call before this line is still waiting)?"""
    return any(i.kind in ("user", "summary", "clear", "command") and not i.sidechain for i in line.items)


def _new_forward(line: _Parsed, on_page: set[str]) -> int:
    """Items this line adds read forward: its own, and results whose call is not on the page."""
    return len(line.items) + sum(1 for x in line.results if x.tool_id not in on_page)


def _new_backward(line: _Parsed, on_page: set[str]) -> int:
    """Items this line adds read backward: its results, and calls whose result is not on the page."""
    return len(line.results) + sum(1 for i in line.items if not (i.tool_id and i.tool_id in on_page))


def _full(items: int, chars: int, limit: int) -> bool:
    return items >= limit or chars >= PAGE_CHARS


def _over(items: int, chars: int, limit: int) -> bool:
    return items >= limit + BATCH_ITEMS or chars >= BATCH_CHARS


def _collect_forward(
    r: _Reading, start: int, limit: int, sidechain: bool, opens: set[str] | None = None
) -> tuple[list[_Parsed], int, bool]:
    """Lines from ``start`` (a line start) until the page holds ``limit`` items and no call on
    it waits for its result: (lines, end, more). ``opens``: calls taken before ``start`` that
    wait for their results (updated)."""
    opens = set() if opens is None else opens
    on_page: set[str] = set()
    lines: list[_Parsed] = []
    items = chars = 0
    end = start
    for offset, stop, raw in _forward(r, start):
        if lines and r.scanned >= SCAN_BYTES:
            return lines, end, True
        line = _parse(offset, stop, raw, sidechain)
        if _turn(line):
            opens.clear()  # a turn's calls all ended before it
        new = _new_forward(line, on_page)
        if new and ((_full(items, chars, limit) and not opens) or _over(items, chars, limit)):
            return lines, end, True
        r.scanned += stop - offset
        items += new
        chars += line.chars
        lines.append(line)
        on_page |= _calls(line)
        opens |= _calls(line)
        opens -= _results(line)
        end = stop
    return lines, end, r.cut


def _collect_backward(
    r: _Reading, end: int, limit: int, sidechain: bool, waiting: set[str] | None = None
) -> tuple[list[_Parsed], int, bool]:
    """Lines before ``end`` until the page holds ``limit`` items and no result on it waits for
    its call, in file order: (lines, start, more). ``waiting``: results after ``end`` whose calls
    are still to be found (updated)."""
    waiting = set() if waiting is None else waiting
    on_page: set[str] = set(waiting)
    lines: list[_Parsed] = []
    items = chars = 0
    start = end
    more = False
    for offset, stop, raw in _backward(r, end):
        if lines and r.scanned >= SCAN_BYTES:
            more = True
            break
        line = _parse(offset, stop, raw, sidechain)
        new = _new_backward(line, on_page)
        if new and ((_full(items, chars, limit) and not waiting) or _over(items, chars, limit)):
            more = True
            break
        r.scanned += stop - offset
        items += new
        chars += line.chars
        lines.append(line)
        on_page |= _results(line)
        waiting |= _results(line)
        waiting -= _calls(line)
        if _turn(line):
            waiting.clear()  # their calls would be after the turn began: there are none
        start = offset
    lines.reverse()
    return lines, start, more or r.cut


def _items(lines: list[_Parsed]) -> list[Item]:
    """The page's items in file order, each result joined to its call when the call is here."""
    out: list[Item] = []
    calls: dict[str, Item] = {}
    for line in lines:
        for item in line.items:
            out.append(item)
            if item.tool_id:
                calls[item.tool_id] = item
        for res in line.results:
            call = calls.get(res.tool_id) if res.tool_id else None
            if call is None or call.output is not None:
                call = Item("tool", res.offset, tool_id=res.tool_id)
                out.append(call)
            call.output, call.output_truncated, call.is_error = res.output, res.truncated, res.is_error
            call.result_offset, call.agent = res.offset, res.agent
    return out


def _target(items: list[Item], line_at: int) -> int | None:
    """The item showing the line at ``line_at``: its own, the call its result joined, else the
    first item after it, else the last one before."""
    for item in items:
        if item.offset == line_at or item.result_offset == line_at:
            return item.offset
    after = [i.offset for i in items if i.offset > line_at]
    if after:
        return after[0]
    return items[-1].offset if items else None


def _offset(value: int | None, name: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise BadArgument(f"{name} must be a byte offset (a whole number, 0 or more)")
    return value


def page(
    path: str,
    *,
    after: int | None = None,
    before: int | None = None,
    at: int | None = None,
    limit: int = PAGE_ITEMS,
    agent: str | None = None,
) -> Page:
    """One page of the transcript at ``path`` (or of its sub-agent ``agent``, ``agent-<id>``):
    at most ``limit`` items (1 to MAX_LIMIT) forward from ``after``, backward from ``before``, or
    around ``at`` (at most one of them; none: the first page). An offset inside a line means that
    line; one past the end means the end.

    Raises BadArgument for bad arguments, OSError (NotRegularFile for a link, a FIFO...) when the
    file cannot be read."""
    given = [k for k, v in (("after", after), ("before", before), ("at", at)) if v is not None]
    if len(given) > 1:
        raise BadArgument(f"give at most one of after, before and at (got {', '.join(given)})")
    after, before, at = _offset(after, "after"), _offset(before, "before"), _offset(at, "at")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise BadArgument(f"limit must be a whole number from 1 to {MAX_LIMIT}")
    fd, st = open_subagent(path, agent) if agent is not None else open_regular(path)
    try:
        return _page(_Reading(fd, st.st_size), after, before, at, limit, sidechain=agent is not None)
    finally:
        os.close(fd)


class Walk:
    """A transcript (or one of its sub-agents, ``agent-<id>``) read forward from its start, a
    page at a time, from one descriptor opened here: :meth:`items` gives every item, each tool
    call joined with its result, holding one page at most (an export of a 1 GB transcript costs
    what a page costs). It reads what the file held when opened (a session still writing adds
    lines after). Raises what :func:`page` raises; close it (or use it in ``with``)."""

    def __init__(self, path: str, agent: str | None = None) -> None:
        self.fd, st = open_subagent(path, agent) if agent is not None else open_regular(path)
        self.size = st.st_size
        self.sidechain = agent is not None
        self.changed = False  # the file shrank while it was read: what was given may be short

    def items(self) -> Iterator[Item]:
        after: int | None = 0
        extents = None
        while after is not None:
            r = _Reading(self.fd, self.size, extents=extents)
            pg = _page(r, after, None, None, MAX_LIMIT, self.sidechain)
            extents = r.extents  # a sparse file's holes, found once
            self.changed |= pg.changed
            yield from pg.items
            after = pg.next if pg.next is not None and pg.next > after else None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Walk:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _page(r: _Reading, after: int | None, before: int | None, at: int | None, limit: int, sidechain: bool) -> Page:
    target = None
    if before is not None:
        end = _line_start(r, before)
        lines, start, more = _collect_backward(r, end, limit, sidechain)
        prev = start if more and start > 0 else None
        nxt = end if end < r.size else None
    elif at is not None:
        line_at = _line_start(r, at)
        lines, start, end, more_back, more = _around(r, line_at, limit, sidechain)
        prev = start if more_back and start > 0 else None
        nxt = end if more else None
    else:
        start = _line_start(r, after or 0)
        lines, end, more = _collect_forward(r, start, limit, sidechain)
        prev = start if start > 0 else None
        nxt = end if more else None
    items = _repair(r, _items(lines), start, end, sidechain)
    if at is not None:
        target = _target(items, line_at)
    return Page(items, start, end, r.size, prev, nxt, target, r.changed)


def _around(r: _Reading, line_at: int, limit: int, sidechain: bool) -> tuple[list[_Parsed], int, int, bool, bool]:
    """The page around the line at ``line_at``: it and what follows, with context before (a
    quarter of the page, or more when the file ends first), grown at either end until no tool
    call on it waits for a result beyond it, nor a result for a call before it: (lines, start,
    end, more before, more after)."""
    fwd, end, more = _collect_forward(r, line_at, max(1, limit - limit // 4), sidechain)
    calls = {c for x in fwd for c in _calls(x)}
    waiting = {res for x in fwd for res in _results(x)} - calls
    shown = sum(_new_forward(x, calls) for x in fwd)
    back, start, more_back = _collect_backward(r, line_at, max(limit - shown, 0), sidechain, waiting)
    lines = back + fwd
    for _ in range(8):  # each round only grows the page; two are the most a real file needs
        called = {c for x in lines for c in _calls(x)}
        answered = {res for x in lines for res in _results(x)}
        opens = called - answered
        if opens and more:  # calls before ``end`` whose results come after it
            extra, end, more = _collect_forward(r, end, 0, sidechain, opens)
            lines += extra
            continue
        if (answered - called) and more_back:
            extra, start, more_back = _collect_backward(r, start, 0, sidechain, answered - called)
            lines = extra + lines
            continue
        break
    return lines, start, end, more_back, more


def _repair(r: _Reading, items: list[Item], start: int, end: int, sidechain: bool) -> list[Item]:
    """Give a tool call that is alone on the page its result, and a result alone its call, by
    looking at the lines around the page (at most REPAIR_LINES and REPAIR_BYTES each way): only a
    batch larger than a page may grow is cut (or a page asked for at an offset inside one)."""
    lonely_results = {i.tool_id: i for i in items if i.kind == "tool" and i.name is None and i.tool_id}
    lonely_calls = {i.tool_id: i for i in items if i.kind == "tool" and i.name and i.output is None and i.tool_id}
    if lonely_results and start > 0:
        for n, (offset, stop, raw) in enumerate(_backward(r, start)):
            if n >= REPAIR_LINES or not lonely_results or start - offset > REPAIR_BYTES:
                break
            for call in _parse(offset, stop, raw, sidechain).items:
                got = lonely_results.pop(call.tool_id or "", None)
                if got is not None:
                    got.name, got.summary = call.name, call.summary
                    got.input, got.input_truncated = call.input, call.input_truncated
    if lonely_calls and end < r.size:
        for n, (offset, stop, raw) in enumerate(_forward(r, end)):
            if n >= REPAIR_LINES or not lonely_calls or stop - end > REPAIR_BYTES:
                break
            for res in _parse(offset, stop, raw, sidechain).results:
                got = lonely_calls.pop(res.tool_id or "", None)
                if got is not None:
                    got.output, got.output_truncated, got.is_error = res.output, res.truncated, res.is_error
                    got.result_offset, got.agent = res.offset, res.agent
    return items


def open_subagent(transcript: str, agent: str) -> tuple[int, os.stat_result]:
    """Open the file of sub-agent ``agent`` (``agent-<id>``) of the session whose transcript is
    ``transcript``: ``<folder>/<session>/subagents/<agent>.jsonl`` (or deeper below
    ``subagents``, as a workflow's agents are), else the flat ``<folder>/<agent>.jsonl`` that
    Claude Code wrote before 2.1.2, if its lines name this session. The name is checked (no
    slashes, no dots) and every folder below the project's is opened without following a link;
    the file is used from that one descriptor. FileNotFoundError when the session has no such
    sub-agent."""
    if not isinstance(agent, str) or _AGENT.fullmatch(agent) is None:
        raise BadArgument("agent must be a sub-agent's name: agent- and then letters, digits, _ or -")
    folder, name = os.path.split(transcript)
    session = name[: -len(".jsonl")] if name.endswith(".jsonl") else name
    subagents = os.path.join(folder, session, "subagents")
    try:
        return open_regular(os.path.join(subagents, agent + ".jsonl"), depth=3)
    except FileNotFoundError:
        pass
    for path, _st in regular_files(subagents):  # a workflow's agents sit deeper
        if os.path.basename(path) == agent + ".jsonl":
            return open_regular(path, depth=len(os.path.relpath(path, folder).split(os.sep)))
    fd, st = open_regular(os.path.join(folder, agent + ".jsonl"))  # FileNotFoundError: none at all
    if _names_session(fd, session):
        return fd, st
    os.close(fd)
    raise FileNotFoundError(errno.ENOENT, "no sub-agent of this session has that name", agent)


def _names_session(fd: int, session: str) -> bool:
    """Do the first lines of a flat sub-agent file name ``session`` as theirs?"""
    head = pread_all(fd, 0, WINDOW)
    for raw in head.split(b"\n")[:200]:
        if b'"sessionId"' not in raw:
            continue
        try:
            sid = msgspec.json.decode(raw, type=_SessionOf).sessionId
        except DECODE_ERRORS:
            continue
        if isinstance(sid, str):
            return sid.lower() == session.lower()
    return False


class _SessionOf(msgspec.Struct):
    sessionId: Any = None
