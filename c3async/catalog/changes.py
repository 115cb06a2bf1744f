"""The files a session changed: the paths of its edit and write tool calls, read from a bounded
window at the end of its transcript (the whole file when it is smaller than the window).

Only lines that hold one of the editing tools' names as raw bytes are decoded, so a window of
tool output costs one byte search per line. A transcript larger than the window is never read
whole: ``Changes.whole`` says whether the paths cover the entire session.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec

from ..ground.errors import DECODE_ERRORS
from ..ground.safefs import open_regular, pread_all

__all__ = ("EDIT_TOOLS", "WINDOW", "Changes", "changed_files")

WINDOW = 8 * 1024 * 1024  # bytes read from the end of the transcript at most
MAX_FILES = 200
# The tools that change a file, and the input field that names it.
EDIT_TOOLS = {"Edit": "file_path", "MultiEdit": "file_path", "Write": "file_path", "NotebookEdit": "notebook_path"}
_MARKERS = tuple(f'"name":"{name}"'.encode() for name in EDIT_TOOLS)


class _Message(msgspec.Struct):
    content: list[Any] | str | None = None  # blocks; one that is not an object is skipped


class _Line(msgspec.Struct):
    type: Any = None
    isSidechain: Any = None
    message: _Message | None = None


_decode = msgspec.json.Decoder(_Line).decode


class Changes(msgspec.Struct):
    files: list[str]  # most recently changed first, each once
    whole: bool  # the window covered the whole transcript
    read_bytes: int


def _failed(raw: bytes) -> list[str]:
    """The ids of the calls a user line's tool results say failed."""
    if b'"is_error":true' not in raw or b'"tool_result"' not in raw:
        return []
    try:
        line = _decode(raw)
    except (msgspec.ValidationError, *DECODE_ERRORS):
        return []
    content = line.message.content if line.message is not None else None
    if not isinstance(content, list):
        return []
    return [
        b["tool_use_id"]
        for b in content
        if isinstance(b, dict)
        and b.get("type") == "tool_result"
        and b.get("is_error") is True
        and isinstance(b.get("tool_use_id"), str)
    ]


def _paths(raw: bytes, failed: set[str]) -> list[str]:
    """The paths of an assistant line's edit and write calls, but those whose result (read
    before, the file being read backwards) says the tool refused: they changed nothing."""
    if b'"type":"assistant"' not in raw or not any(m in raw for m in _MARKERS):
        return []
    try:
        line = _decode(raw)
    except (msgspec.ValidationError, *DECODE_ERRORS):
        return []
    if line.isSidechain is True or line.message is None or not isinstance(line.message.content, list):
        return []
    out = []
    for block in line.message.content:
        if not isinstance(block, dict) or block.get("type") != "tool_use":
            continue
        call = block.get("id")
        if isinstance(call, str) and call in failed:
            continue
        name, given = block.get("name"), block.get("input")
        key = EDIT_TOOLS.get(name) if isinstance(name, str) else None
        value = given.get(key) if key and isinstance(given, dict) else None
        if isinstance(value, str) and value and len(value) <= 4096 and "\x00" not in value:
            out.append(value)
    return out


def changed_files(path: str, window: int = WINDOW) -> Changes:
    """The paths the session's edit and write calls named, newest first. An unreadable file (a
    link, a FIFO, gone) gives no paths."""
    try:
        fd, st = open_regular(path)
    except OSError:
        return Changes([], True, 0)
    try:
        start = max(0, st.st_size - window)
        buf = pread_all(fd, start, st.st_size - start)
    except OSError:
        return Changes([], True, 0)
    finally:
        os.close(fd)
    lines = buf.split(b"\n")
    if start:
        lines = lines[1:]  # cut by the window
    seen: dict[str, None] = {}
    failed: set[str] = set()
    for raw in reversed(lines):
        failed.update(_failed(raw))
        for p in reversed(_paths(raw, failed)):
            if p not in seen:
                seen[p] = None
        if len(seen) >= MAX_FILES:
            break
    return Changes(list(seen), start == 0, len(buf))
