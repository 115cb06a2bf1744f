"""What a transcript says, as passages to index: one file's new bytes in, passages out.

A passage is what one transcript line said in one voice: a user's prompt, the assistant's text,
or a tool's part (a call's input, a result's output). Beside the passages, a file's read finds
its titles and name (``custom-title``, ``ai-title``, ``agent-name``) and the files its edit and
write calls named (``Edit``): what ``c3async files`` answers from. Text is taken from the decoded JSON, so a
search matches what was said (escapes decoded: newlines, quotes, ``\\uXXXX``), never raw JSON,
metadata, thinking, or the copy of a tool's output that Claude Code keeps in ``toolUseResult``.
Meta lines, compact summaries and command markup are not what anyone said and are left out.

A file is read from where the last pass stopped, in bounded pieces (``jsonl.read_pieces``): a
2 GB transcript costs a buffer, a line longer than ``MAX_LINE`` is skipped and counted. A line
that does not decode (torn, binary, nested 10,000 deep) is skipped and counted; one with invalid
UTF-8 is read with the bad bytes replaced. Runs in worker processes: plain, picklable values.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterator
from functools import cache
from typing import Any

import msgspec

from ..catalog.changes import EDIT_TOOLS
from ..catalog.extract import classify_text, prompt_title
from ..catalog.listing import depth_in_folder, is_session_id
from ..ground import clock
from ..ground.errors import DECODE_ERRORS
from ..ground.safefs import open_regular

__all__ = (
    "ASSISTANT",
    "EDIT_NAMES",
    "TOOL",
    "USER",
    "Edit",
    "FileRead",
    "Job",
    "Passage",
    "index_text",
    "line_texts",
    "read_file",
)

USER, ASSISTANT, TOOL = 0, 1, 2
KINDS = ("user", "assistant", "tool")
CHUNK = 8 * 1024 * 1024
MAX_LINE = 32 * 1024 * 1024  # a 10 MB pasted prompt is indexed; no real line comes near this
CHECK = 32  # bytes just before the offset, kept to recognise the same file next time
MAX_DEPTH = 32  # of a tool input walked for its strings
MAX_PATH = 4096  # characters of a file path an edit names (longer: not a path, skipped)
MAX_NAME = 1000  # characters of a title or name kept
MAX_PENDING = 10_000  # edit calls awaiting their result at once (more: counted without waiting)
EDIT_NAMES = tuple(EDIT_TOOLS)  # an edit's tool, as its index here (a bit each in ``Edit.tools``)


class _Block(msgspec.Struct):
    type: Any = None
    text: Any = None
    id: Any = None  # a tool call's, which its result names (tool_use_id)
    name: Any = None
    input: Any = None  # a tool call's arguments (small)
    content: Any = None  # a tool result's output: a string or a list of text blocks
    tool_use_id: Any = None
    is_error: Any = None


class _Message(msgspec.Struct):
    content: str | list[_Block] | None = None


class _Line(msgspec.Struct):
    """The fields a passage needs; every other key (usage, toolUseResult, snapshots) is skipped."""

    type: Any = None
    isSidechain: Any = None
    isMeta: Any = None
    isCompactSummary: Any = None
    timestamp: Any = None
    gitBranch: Any = None
    cwd: Any = None
    sessionId: Any = None
    customTitle: Any = None
    aiTitle: Any = None
    agentName: Any = None
    message: _Message | None = None


_decoder = msgspec.json.Decoder(_Line)


def decode_line(raw: bytes | bytearray | memoryview) -> _Line | None:
    """One line, or None when it is not a JSON object of the expected shape. Invalid UTF-8 is
    replaced rather than losing the line; nesting past the recursion limit is skipped."""
    try:
        return _decoder.decode(raw)
    except msgspec.DecodeError:
        fixed = bytes(raw).decode("utf-8", "replace").encode()
        if fixed == bytes(raw):
            return None
        try:
            return _decoder.decode(fixed)
        except DECODE_ERRORS:
            return None
    except DECODE_ERRORS:
        return None


def _strings(value: Any, out: list[str], depth: int = 0) -> None:
    if isinstance(value, str):
        out.append(value)
    elif depth < MAX_DEPTH:
        if isinstance(value, dict):
            for v in value.values():
                _strings(v, out, depth + 1)
        elif isinstance(value, list):
            for v in value:
                _strings(v, out, depth + 1)


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    out: list[str] = []
    if isinstance(content, list):
        for item in content:
            if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str):
                out.append(item["text"])
    return "\n".join(out)


def line_texts(line: _Line) -> list[tuple[int, str]]:
    """What one line said: (kind, text) for each voice in it, at most one of each kind."""
    kind = line.type
    if kind not in ("user", "assistant") or line.isMeta is True or line.isCompactSummary is True:
        return []
    content = line.message.content if line.message is not None else None
    if content is None:
        return []
    talk: list[str] = []
    tool: list[str] = []
    if isinstance(content, str):
        if kind == "user":
            found = classify_text(content)
            if found is not None and found[0] == "prompt":
                talk.append(found[1])
        else:
            talk.append(content)
    else:
        for b in content:
            t = b.type
            if t == "text" and isinstance(b.text, str):
                if kind == "assistant":
                    talk.append(b.text)
                else:
                    found = classify_text(b.text)
                    if found is not None and found[0] == "prompt":
                        talk.append(found[1])
            elif t == "tool_use":
                parts = [b.name] if isinstance(b.name, str) else []
                _strings(b.input, parts)
                tool.append(" ".join(parts))
            elif t == "tool_result":
                tool.append(_result_text(b.content))
    out = []
    if talk and (text := "\n".join(talk)).strip():
        out.append((USER if kind == "user" else ASSISTANT, text))
    if tool and (text := "\n".join(tool)).strip():
        out.append((TOOL, text))
    return out


# CJK scripts are written without spaces: the tokenizer would make a whole sentence one token.
# Each such character is indexed (and queried) as a token of its own, so any run of them is a
# phrase and a substring of a sentence matches.
CJK_CLASS = "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\uff66-\uff9f]"


@cache
def cjk() -> re.Pattern[str]:
    """A run of CJK characters. Compiled on first use (~5 ms: a search of ASCII words never
    needs it)."""
    return re.compile(f"{CJK_CLASS}+")


def _spaced(run: re.Match[str]) -> str:
    return " " + " ".join(run.group()) + " "


def index_text(text: str) -> str:
    """The text as the index sees it (the same transform is applied to queries): each CJK
    character a word of its own. One call per run, not per character (8x faster on CJK text)."""
    return text if text.isascii() else cjk().sub(_spaced, text)


class Passage(msgspec.Struct, array_like=True, gc=False):
    """One voice of one line: where the line is, who spoke, when, on which branch, what."""

    offset: int
    length: int
    kind: int
    sidechain: bool
    ts: int | None
    branch: str | None
    text: str  # as indexed (``index_text``)


class Edit(msgspec.Struct, array_like=True, gc=False):
    """The edit and write calls one file's new bytes made to one path: how many, with which
    tools (a bit per ``EDIT_NAMES``), the first and last time."""

    path: str
    count: int
    tools: int
    first_ts: int | None
    last_ts: int | None


def _edited(line: _Line, cwd: str | None) -> list[tuple[str, int, Any]]:
    """(path, tool, call id) of each edit or write call of an assistant line; a relative path is
    taken in the line's cwd, every path normalised (``a/../b`` is ``b``), as the filesystem names it."""
    content = line.message.content if line.message is not None else None
    if not isinstance(content, list):
        return []
    out = []
    for b in content:
        if b.type != "tool_use" or b.name not in EDIT_TOOLS or not isinstance(b.input, dict):
            continue
        path = b.input.get(EDIT_TOOLS[b.name])
        if not isinstance(path, str) or not path or len(path) > MAX_PATH or "\x00" in path:
            continue
        if not os.path.isabs(path):
            if not cwd or not os.path.isabs(cwd):
                continue
            path = os.path.join(cwd, path)
        out.append((os.path.normpath(path), EDIT_NAMES.index(b.name), b.id))
    return out


def _failed_calls(line: _Line) -> Iterator[tuple[Any, bool]]:
    """(call id, failed) of each tool result of a user line."""
    content = line.message.content if line.message is not None else None
    if isinstance(content, list):
        for b in content:
            if b.type == "tool_result" and isinstance(b.tool_use_id, str):
                yield b.tool_use_id, b.is_error is True


class Job(msgspec.Struct):
    """One file to read, from where the last pass stopped (``offset`` in file ``ino``, whose
    bytes just before the offset were ``check``)."""

    path: str
    session: str | None  # None: a legacy sub-agent file, whose lines name their session
    sidechain: bool
    offset: int = 0
    ino: int = 0
    check: bytes = b""
    new: int = 0  # about how many bytes there are to read
    searched: int = 0  # an unterminated line over MAX_LINE at ``offset`` was followed this far


class FileRead(msgspec.Struct, array_like=True, gc=False):
    """What reading one file's new bytes found."""

    ino: int
    start: int  # where reading began: 0 for a file replaced or shrunk since (forget it first)
    offset: int  # just after the last complete line read
    check: bytes
    bytes_read: int
    passages: list[Passage]
    skipped: int = 0  # lines that did not decode, or longer than MAX_LINE
    session: str | None = None  # from the lines, for a file whose name does not say
    cwd: str | None = None
    custom_title: str | None = None
    ai_title: str | None = None
    first_prompt: str | None = None
    last_ts: int | None = None
    last_branch: str | None = None
    searched: int = 0  # see ``jsonl.Pieces``
    agent_name: str | None = None
    edits: list[Edit] = msgspec.field(default_factory=list)


_SPOKEN_OR_TITLE = frozenset({"user", "assistant", "custom-title", "ai-title", "agent-name"})


def _name(value: Any) -> str | None:
    return value[:MAX_NAME] if isinstance(value, str) and value.strip() and "\x00" not in value else None


class _Reader:
    def __init__(self, job: Job, found: FileRead) -> None:
        self.sidechain = job.sidechain
        self.path = job.path
        self.found = found
        self.skipped = 0
        self.edits: dict[str, Edit] = {}
        # edit calls whose result is not read yet: one the tool refused (no such tool, a file
        # not read first, a string not found) changed nothing and is not counted
        self.pending: dict[str, list[tuple[str, int, int | None]]] = {}

    def piece(self, buf: bytearray, end: int, base: int) -> None:
        from ..ground.jsonl import has_blank_line

        count = buf.count(b"\n", 0, end)
        with memoryview(buf) as view:
            try:
                lines: list[_Line] | None = _decoder.decode_lines(view[:end])
                if lines is not None and (len(lines) != count or has_blank_line(view[:end])):
                    lines = None  # a blank line or two values on one: read line by line
            except DECODE_ERRORS:
                lines = None
        find, take, found = buf.find, self._take, self.found
        start = 0
        if lines is not None:
            for line in lines:
                stop = find(b"\n", start, end)
                t = line.type
                if t.__class__ is str and t in _SPOKEN_OR_TITLE:
                    take(line, base + start, stop - start, found)
                start = stop + 1
            return
        while start < end:
            stop = find(b"\n", start, end)
            raw = bytes(buf[start:stop])
            if raw.strip():
                loose = decode_line(raw)
                if loose is None:
                    self.skipped += 1
                elif loose.type.__class__ is str and loose.type in _SPOKEN_OR_TITLE:
                    take(loose, base + start, stop - start, found)
            start = stop + 1

    def _take(self, line: _Line, offset: int, length: int, found: FileRead) -> None:
        kind = line.type
        if kind == "custom-title":
            found.custom_title = _name(line.customTitle) or found.custom_title
            return
        if kind == "ai-title":
            found.ai_title = _name(line.aiTitle) or found.ai_title
            return
        if kind == "agent-name":
            found.agent_name = _name(line.agentName) or found.agent_name
            return
        if kind not in ("user", "assistant"):
            return
        if found.cwd is None and isinstance(line.cwd, str) and line.cwd:
            found.cwd = line.cwd
        if kind == "assistant":
            self._edits(line)
        elif self.pending:
            for call, failed in _failed_calls(line):
                for path, tool, ts in self.pending.pop(call, ()):
                    if not failed:
                        self._count(path, tool, ts)
        if found.session is None and isinstance(line.sessionId, str) and is_session_id(line.sessionId):
            found.session = line.sessionId.lower()  # a legacy agent file's: it ends in a command line
        texts = line_texts(line)
        if not texts:
            return
        seconds = clock.event_iso(line.timestamp, "a transcript's timestamp", self.path)
        ts = None if seconds is None else int(seconds)
        branch = line.gitBranch if isinstance(line.gitBranch, str) and line.gitBranch else None
        sidechain = self.sidechain or line.isSidechain is True
        if not sidechain:
            if ts is not None:
                found.last_ts = ts
            if branch is not None:
                found.last_branch = branch
        for k, text in texts:
            if k == USER and found.first_prompt is None and not sidechain:
                found.first_prompt = prompt_title(text)
            found.passages.append(Passage(offset, length, k, sidechain, ts, branch, index_text(text)))

    def _edits(self, line: _Line) -> None:
        edited = _edited(line, line.cwd if isinstance(line.cwd, str) else None)
        if not edited:
            return
        seconds = clock.event_iso(line.timestamp, "a transcript's timestamp", self.path)
        ts = None if seconds is None else int(seconds)
        for path, tool, call in edited:
            if isinstance(call, str) and len(self.pending) < MAX_PENDING:
                self.pending.setdefault(call, []).append((path, tool, ts))
            else:
                self._count(path, tool, ts)

    def close(self) -> None:
        """Count the calls whose result has not come: in progress, or cut off (by an interrupt,
        or by the end of what was read): they may have changed the file."""
        for calls in self.pending.values():
            for path, tool, ts in calls:
                self._count(path, tool, ts)
        self.pending.clear()

    def _count(self, path: str, tool: int, ts: int | None) -> None:
        held = self.edits.get(path)
        if held is None:
            self.edits[path] = Edit(path, 1, 1 << tool, ts, ts)
            return
        held.count += 1
        held.tools |= 1 << tool
        if ts is not None:
            held.first_ts = ts if held.first_ts is None else min(held.first_ts, ts)
            held.last_ts = ts if held.last_ts is None else max(held.last_ts, ts)


def read_file(job: Job, buf: bytearray | None = None, max_line: int = MAX_LINE) -> FileRead | None:
    """Read ``job.path`` from where the last pass stopped (from 0 when the file was replaced or
    shrank) to its size now. None when it cannot be read (vanished, not a regular file, I/O
    error): the caller keeps what it had and tries again next time."""
    try:  # no-follow at every level below the project folder, non-blocking: a FIFO cannot hang us
        fd, st = open_regular(job.path, depth=depth_in_folder(job.path))
    except OSError:
        return None
    try:
        same = _same_file(fd, st, job)
        start = job.offset if same else 0
        found = FileRead(st.st_ino, start, start, b"", 0, [])
        reader = _Reader(job, found)
        with io.FileIO(fd, closefd=False) as f:
            if buf is None:
                buf = bytearray(max(1, min(CHUNK, st.st_size - start)))
            from ..ground.jsonl import read_pieces  # here: a search that reads nothing does not load it

            found.offset, found.bytes_read, found.searched = read_pieces(
                f, start, st.st_size, reader, buf, max_line, job.searched if same else 0
            )
        n = min(CHECK, found.offset)
        found.check = os.pread(fd, n, found.offset - n) if n else b""
    except OSError:
        return None
    finally:
        os.close(fd)
    found.skipped = reader.skipped
    reader.close()
    found.edits = list(reader.edits.values())
    return found


def _same_file(fd: int, st: os.stat_result, job: Job) -> bool:
    """Is this still the file read up to ``job.offset`` (same inode, not shorter, the same bytes
    just before the offset)? A transcript is only ever appended to."""
    if not job.offset or st.st_ino != job.ino or st.st_size < job.offset:
        return False
    n = len(job.check)
    return not n or os.pread(fd, n, job.offset - n) == job.check


def read_files(jobs: list[tuple[int, Job]]) -> list[tuple[int, FileRead | None]]:
    """Several files through one buffer (a worker's hand-off)."""
    buf = bytearray(max(1, min(CHUNK, max((job.new for _, job in jobs), default=1))))
    return [(i, read_file(job, buf)) for i, job in jobs]
