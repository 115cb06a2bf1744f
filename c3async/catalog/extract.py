"""Stage 4: pull a catalog row's facts out of a window of transcript bytes.

Lines are never all decoded: a cheap byte test picks the few that can matter (user lines, title
and last-prompt lines, and the first/last lines that carry a timestamp), and only those go through
msgspec. A window's first line may be cut (it starts mid-file) and its last line may be
unterminated (a writer is mid-append or was killed): both are skipped, never guessed at, except
for a first prompt too long for the window, whose first 200 characters are still recovered.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

__all__ = ("Facts", "scan", "prompt_title", "PROMPT_CAP", "TITLE_CAP")

PROMPT_CAP = 2000  # characters of a prompt kept in a row; longer ones set *_truncated
TITLE_CAP = 200  # Claude Code's own cut for a title taken from a prompt

# Built-in commands that do their work locally: as a first "prompt" they only name the command.
# A custom command with arguments (`/review PR 12`) is a real prompt, as in Claude Code.
LOCAL_COMMANDS = frozenset(
    """add-dir agents bashes branch btw bug cd clear compact config context cost doctor effort exit
    export fast fork help hooks ide install-github-app login logout mcp memory model new
    output-style permissions plan plugin privacy-settings quit release-notes rename reset resume
    rewind sandbox status statusline tasks terminal-setup theme todos upgrade usage vim""".split()
)
CLEAR_COMMANDS = frozenset({"/clear", "/reset", "/new"})

_TAG_START = re.compile(r"^\s*<[a-z][\w-]*[\s>/]")
_COMMAND_NAME = re.compile(r"<command-name>\s*(.*?)\s*</command-name>", re.S)
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.S)
_BASH_INPUT = re.compile(r"^\s*<bash-input>(.*?)</bash-input>", re.S)
_IMAGE_REF = re.compile(r"^\s*\[Image #\d+\]\s*$")
_WS = re.compile(r"\s+")


class _Block(msgspec.Struct):
    type: Any = None
    text: Any = None


class _Message(msgspec.Struct):
    content: str | list[_Block] | None = None


class _Line(msgspec.Struct):
    """The fields of a transcript line that the catalog reads; every other field is skipped."""

    type: Any = None
    isSidechain: Any = None
    isMeta: Any = None
    isCompactSummary: Any = None
    message: _Message | None = None
    cwd: Any = None
    gitBranch: Any = None
    timestamp: Any = None
    entrypoint: Any = None
    customTitle: Any = None
    aiTitle: Any = None
    lastPrompt: Any = None


_decode_line = msgspec.json.Decoder(_Line).decode
_decode_any = msgspec.json.Decoder().decode


def _decode(raw: bytes) -> _Line | None:
    try:
        return _decode_line(raw)
    except msgspec.ValidationError:
        pass  # a valid line of an unexpected shape: read it loosely below
    except msgspec.DecodeError:
        return None
    try:
        obj = _decode_any(raw)
    except msgspec.DecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    msg = obj.get("message")
    content = msg.get("content") if isinstance(msg, dict) else None
    if isinstance(content, list):
        blocks = [_Block(b.get("type"), b.get("text")) for b in content if isinstance(b, dict)]
        message = _Message(blocks)
    else:
        message = _Message(content if isinstance(content, str) else None)
    fields = {f: obj.get(f) for f in _Line.__struct_fields__ if f != "message"}
    return _Line(message=message, **fields)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def classify_prompt(line: _Line) -> tuple[str, str] | None:
    """('prompt', text) for a real user prompt, ('command', '/name args') for a slash command
    line, None for everything that is not typed by the user (meta, tool results, tags...)."""
    if line.isMeta is True or line.isCompactSummary is True or line.isSidechain is True:
        return None
    content = line.message.content if line.message is not None else None
    if isinstance(content, str):
        texts = [content]
    elif isinstance(content, list):
        if any(b.type == "tool_result" for b in content):
            return None
        texts = [b.text for b in content if b.type == "text" and isinstance(b.text, str)]
    else:
        return None
    command = None
    for text in texts:
        stripped = text.strip()
        if not stripped:
            continue
        bash = _BASH_INPUT.match(stripped)
        if bash:
            return ("prompt", "! " + bash.group(1).strip())
        name = _COMMAND_NAME.search(stripped)
        if name:
            cmd = name.group(1).strip()
            args_m = _COMMAND_ARGS.search(stripped)
            args = args_m.group(1).strip() if args_m else ""
            if args and cmd.lstrip("/") not in LOCAL_COMMANDS:
                return ("prompt", f"{cmd} {args}")
            command = command or (f"{cmd} {args}".strip() if args else cmd)
            continue
        if _TAG_START.match(stripped) or _IMAGE_REF.match(stripped):
            continue
        if stripped.startswith("[Request interrupted by user"):
            continue
        return ("prompt", stripped)
    return ("command", command) if command else None


def prompt_title(prompt: str) -> str:
    """A prompt as a one-line title: white space folded, cut at 200 characters with an ellipsis."""
    flat = _WS.sub(" ", prompt).strip()
    return flat if len(flat) <= TITLE_CAP else flat[:TITLE_CAP].rstrip() + "\u2026"


def _cap(text: str) -> tuple[str, bool]:
    return (text, False) if len(text) <= PROMPT_CAP else (text[:PROMPT_CAP], True)


class Facts(msgspec.Struct, omit_defaults=True):
    """What one scan of one window found. Merged into a transcript record by ``read``."""

    conversation: bool = False  # saw a user or assistant line
    first_is_sidechain: bool = False
    first_prompt: str | None = None
    first_prompt_truncated: bool = False
    first_command: str | None = None  # "/clear" for a session that is only commands
    began_with_clear: bool = False
    last_prompt: str | None = None
    last_prompt_truncated: bool = False
    last_prompt_meta: str | None = None  # from a `last-prompt` line
    custom_title: str | None = None
    ai_title: str | None = None
    cwd: str | None = None
    entrypoint: str | None = None
    first_branch: str | None = None
    last_branch: str | None = None
    first_ts: str | None = None
    last_ts: str | None = None
    prompts: int = 0
    clean_end: int = 0  # offset just after the window's last complete line


_USER = b'"user"'
_ASSISTANT = b'"assistant"'
_TOOL_RESULT = b'"tool_result"'
_CUSTOM = b'"custom-title"'
_AI = b'"ai-title"'
_LAST_PROMPT = b'"last-prompt"'
_TS = b'"timestamp"'
_CWD = b'"cwd"'
_BRANCH = b'"gitBranch"'


def scan(buf: bytes, offset: int, *, from_start: bool) -> Facts:
    """Scan ``buf``, which holds the file's bytes from ``offset``.

    ``from_start``: the window starts at a line boundary (offset 0, or just after a newline);
    otherwise its first line is cut and dropped. The last unterminated line is dropped too: it is
    the window's edge, a write in flight, or a torn write.
    """
    facts = Facts()
    last_nl = buf.rfind(b"\n")
    if last_nl < 0:
        facts.clean_end = offset
        if from_start:  # one line longer than the whole window: a huge pasted prompt?
            _take_cut_prompt(facts, buf)
        return facts
    facts.clean_end = offset + last_nl + 1
    body = buf[: last_nl + 1]
    start = 0
    if not from_start:
        start = body.find(b"\n") + 1
    lines = body[start:].split(b"\n")
    lines.pop()  # the empty string after the final newline
    seen_first_conv = False
    seen_first_user = False
    for raw in lines:
        is_user = _USER in raw
        if is_user and _TOOL_RESULT in raw and _ASSISTANT not in raw:
            # a tool result rides on a user line; it is never a prompt, so don't decode it,
            # but it may still be the first line that tells cwd/branch/time.
            if facts.first_ts is not None and facts.cwd is not None:
                continue
        wanted = (
            is_user
            or _CUSTOM in raw
            or _AI in raw
            or _LAST_PROMPT in raw
            or (not seen_first_conv and (_ASSISTANT in raw or _CWD in raw or _TS in raw))
        )
        if not wanted:
            continue
        line = _decode(raw)
        if line is None:
            continue
        _take(facts, line)
        kind = line.type
        if kind in ("user", "assistant"):
            facts.conversation = True
            if not seen_first_conv:
                seen_first_conv = True
                facts.first_is_sidechain = line.isSidechain is True
        if kind == "user":
            found = classify_prompt(line)
            if not seen_first_user and line.isMeta is not True and line.isSidechain is not True:
                seen_first_user = True
                facts.began_with_clear = bool(
                    found and found[0] == "command" and found[1].split(" ")[0] in CLEAR_COMMANDS
                )
            if found is None:
                continue
            what, text = found
            if what == "command":
                facts.first_command = facts.first_command or text
                continue
            facts.prompts += 1
            text, cut = _cap(text)
            if facts.first_prompt is None:
                facts.first_prompt, facts.first_prompt_truncated = text, cut
            facts.last_prompt, facts.last_prompt_truncated = text, cut
    _take_tail_markers(facts, lines)
    if facts.first_prompt is None and from_start:
        _take_cut_prompt(facts, buf[last_nl + 1 :])
    return facts


def _take_cut_prompt(facts: Facts, partial: bytes) -> None:
    cut = _cut_prompt(partial)
    if cut is not None:
        facts.first_prompt, facts.first_prompt_truncated = cut, True


def _take(facts: Facts, line: _Line) -> None:
    kind = line.type
    if kind == "custom-title":
        facts.custom_title = _text(line.customTitle) or facts.custom_title
        return
    if kind == "ai-title":
        facts.ai_title = _text(line.aiTitle) or facts.ai_title
        return
    if kind == "last-prompt":
        facts.last_prompt_meta = _text(line.lastPrompt) or facts.last_prompt_meta
        return
    if line.isSidechain is True:
        return
    if facts.cwd is None and isinstance(line.cwd, str) and line.cwd:
        facts.cwd = line.cwd
    if facts.entrypoint is None and kind in ("user", "assistant"):
        facts.entrypoint = _text(line.entrypoint)
    if facts.first_ts is None and isinstance(line.timestamp, str):
        facts.first_ts = line.timestamp
    if facts.first_branch is None and isinstance(line.gitBranch, str) and line.gitBranch:
        facts.first_branch = line.gitBranch


def _take_tail_markers(facts: Facts, lines: list[bytes]) -> None:
    """The last timestamp and branch: walk back from the end, decoding only candidate lines."""
    need_ts, need_branch = True, True
    for raw in reversed(lines):
        if not ((need_ts and _TS in raw) or (need_branch and _BRANCH in raw)):
            continue
        line = _decode(raw)
        if line is None or line.isSidechain is True:
            continue
        if need_ts and isinstance(line.timestamp, str) and line.type != "queue-operation":
            facts.last_ts, need_ts = line.timestamp, False
        if need_branch and isinstance(line.gitBranch, str) and line.gitBranch:
            facts.last_branch, need_branch = line.gitBranch, False
        if not (need_ts or need_branch):
            break


_CONTENT_KEYS = (b'"content":"', b'"text":"')


def _cut_prompt(partial: bytes) -> str | None:
    """The first 200 characters of a user prompt whose line is longer than the window."""
    if _USER not in partial[:4096] or _TOOL_RESULT in partial[:8192]:
        return None
    if b'"isMeta":true' in partial[:8192] or b'"isSidechain":true' in partial[:4096]:
        return None
    msg_at = partial.find(b'"message":')
    if msg_at < 0:
        return None
    for key in _CONTENT_KEYS:
        at = partial.find(key, msg_at)
        if at < 0:
            continue
        text = _string_prefix(partial[at + len(key) : at + len(key) + 8192])
        if not text.strip() or _TAG_START.match(text):
            continue
        return _WS.sub(" ", text).strip()[:TITLE_CAP]
    return None


def _string_prefix(raw: bytes) -> str:
    """Decode the start of a JSON string body that may be cut anywhere."""
    raw = raw.decode("utf-8", "ignore").encode()  # the cut may split a character
    end = _closing_quote(raw)
    if end >= 0:
        raw = raw[:end]
    else:
        # drop a dangling escape (`\`, `\u12`) so the piece parses
        tail = raw[-6:]
        cut = tail.rfind(b"\\")
        if cut >= 0:
            run = len(tail[: cut + 1]) - len(tail[: cut + 1].rstrip(b"\\"))
            if run % 2 == 1:
                raw = raw[: len(raw) - len(tail) + cut]
    try:
        return msgspec.json.decode(b'"' + raw + b'"', type=str)
    except msgspec.DecodeError:
        return raw.decode("utf-8", "ignore")


def _closing_quote(raw: bytes) -> int:
    i = raw.find(b'"')
    while i >= 0:
        backslashes = len(raw[:i]) - len(raw[:i].rstrip(b"\\"))
        if backslashes % 2 == 0:
            return i
        i = raw.find(b'"', i + 1)
    return -1
