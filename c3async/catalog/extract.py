"""Stage 4: pull a catalog row's facts out of a window of transcript bytes.

Lines are never all decoded: a cheap byte test picks the few that can matter (user lines, title
and last-prompt lines, and the first/last lines that carry a timestamp), and only those go through
msgspec. A window's first line may be cut (it starts mid-file) and its last line may be
unterminated (a writer is mid-append or was killed): both are skipped, never guessed at, except
for a first prompt too long for the window, whose first 200 characters are still recovered.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Literal

import msgspec

from ..ground.errors import DECODE_ERRORS

__all__ = (
    "PROMPT_CAP",
    "TITLE_CAP",
    "Facts",
    "cap",
    "classify_prompt",
    "classify_text",
    "handoff_source",
    "prompt_title",
    "scan",
)

PROMPT_CAP = 2000  # characters of a prompt (or a custom or ai title) kept in a row; longer ones set *_truncated
TITLE_CAP = 200  # Claude Code's own cut for a title taken from a prompt

# Built-in commands that do their work locally: as a first "prompt" they only name the command.
# A custom command with arguments (`/review PR 12`) is a real prompt, as in Claude Code.
LOCAL_COMMANDS = frozenset(
    [
        "add-dir",
        "agents",
        "bashes",
        "branch",
        "btw",
        "bug",
        "cd",
        "clear",
        "compact",
        "config",
        "context",
        "cost",
        "doctor",
        "effort",
        "exit",
        "export",
        "fast",
        "fork",
        "help",
        "hooks",
        "ide",
        "install-github-app",
        "login",
        "logout",
        "mcp",
        "memory",
        "model",
        "new",
        "output-style",
        "permissions",
        "plan",
        "plugin",
        "privacy-settings",
        "quit",
        "release-notes",
        "rename",
        "reset",
        "resume",
        "rewind",
        "sandbox",
        "status",
        "statusline",
        "tasks",
        "terminal-setup",
        "theme",
        "todos",
        "upgrade",
        "usage",
        "vim",
    ]
)
CLEAR_COMMANDS = frozenset({"/clear", "/reset", "/new"})

# Markup is found with str.find, never with a lazy ``.*?`` between tags: a pattern like
# ``<command-name>\s*(.*?)\s*</command-name>`` backtracks in cubic time over a run of blank
# space with no closing tag (18 KB of newlines took hours). The patterns left are anchored
# (``match``), so each runs once from the start: linear in what they are handed.
_TAG_START = re.compile(r"<[a-z][\w-]*[\s>/]")  # .match on stripped text
_IMAGE_REF = re.compile(r"\[Image #\d+\]")  # .fullmatch on stripped text
_WS = re.compile(r"\s+")
MARKUP_CAP = 1 << 20  # characters of a text block looked at for command markup


class _Block(msgspec.Struct):
    type: Any = None
    text: Any = None


class _Message(msgspec.Struct):
    content: str | list[_Block] | None = None


class _Snapshot(msgspec.Struct):
    timestamp: Any = None


class _ForkedFrom(msgspec.Struct):
    sessionId: Any = None


class _Line(msgspec.Struct):
    """The fields of a transcript line that the catalog reads; every other field is skipped."""

    type: Any = None
    uuid: Any = None
    forkedFrom: _ForkedFrom | None = None  # on the lines /branch copied from its parent
    snapshot: _Snapshot | None = None  # a file-history-snapshot's, for its time
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
    accountUuid: Any = None


_decode_line = msgspec.json.Decoder(_Line).decode
_decode_any = msgspec.json.Decoder().decode


def _decode(raw: bytes) -> _Line | None:
    """One line, or None when it is not JSON. A line nested deeper than the recursion limit
    (RecursionError) is skipped like any malformed line."""
    try:
        return _decode_line(raw)
    except msgspec.ValidationError:
        pass  # a valid line of an unexpected shape: read it loosely below
    except msgspec.DecodeError:
        # Invalid UTF-8 inside an otherwise whole line (a bad paste, a torn multi-byte write):
        # read it with the bad bytes replaced rather than lose the line.
        fixed = raw.decode("utf-8", "replace").encode()
        if fixed == raw:
            return None
        return _decode(fixed)
    except RecursionError:
        return None
    try:
        obj = _decode_any(raw)
    except DECODE_ERRORS:
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


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _uuid(value: Any) -> str | None:
    return value if isinstance(value, str) and _UUID.fullmatch(value) else None


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
        found = classify_text(text)
        if found is None:
            continue
        if found[0] == "prompt":
            return found
        command = command or found[1]
    return ("command", command) if command else None


def _between(text: str, open_tag: str, close_tag: str) -> str | None:
    """What lies between the first ``open_tag`` and the first ``close_tag`` after it (None:
    either is missing). Two ``str.find`` calls: linear, whatever the text holds."""
    start = text.find(open_tag)
    if start < 0:
        return None
    start += len(open_tag)
    end = text.find(close_tag, start)
    return None if end < 0 else text[start:end]


def classify_text(text: str) -> tuple[str, str] | None:
    """One text block of a user line: ('prompt', text) for what the user typed (a shell escape as
    ``! cmd``, a custom command with arguments as ``/name args``), ('command', '/name args') for a
    built-in command, None for markup, images, interrupts and blank text.

    Markup is looked for in the first ``MARKUP_CAP`` characters only (a command line is short; a
    10 MB paste that starts with a tag is markup either way); a real prompt comes back whole."""
    stripped = text.strip()
    if not stripped:
        return None
    head = stripped[:MARKUP_CAP]
    if head.startswith("<bash-input>"):
        bash = _between(head, "<bash-input>", "</bash-input>")
        if bash is not None:
            return ("prompt", "! " + bash.strip())
    tagged = _TAG_START.match(head) is not None
    name = _between(head, "<command-name>", "</command-name>") if tagged else None
    if name is not None and name.strip():  # command markup only counts where the text starts with it
        cmd = name.strip()
        args = (_between(head, "<command-args>", "</command-args>") or "").strip()
        if args and cmd.lstrip("/") not in LOCAL_COMMANDS:
            return ("prompt", f"{cmd} {args}")
        return ("command", f"{cmd} {args}".strip() if args else cmd)
    if tagged or _IMAGE_REF.fullmatch(head):
        return None
    if head.startswith("[Request interrupted by user"):
        return None
    return ("prompt", stripped)


def prompt_title(prompt: str) -> str:
    """A prompt as a one-line title: white space folded, cut at 200 characters with an ellipsis.
    Only the start of a long prompt is folded (the title is its first 200 characters)."""
    flat = _WS.sub(" ", prompt.lstrip()[: TITLE_CAP * 8]).strip()
    return flat if len(flat) <= TITLE_CAP else flat[:TITLE_CAP].rstrip() + "\u2026"


def cap(text: str) -> tuple[str, bool]:
    """``text`` cut to PROMPT_CAP characters, and whether it was cut."""
    return (text, False) if len(text) <= PROMPT_CAP else (text[:PROMPT_CAP], True)


# Accepting a plan with "clear context" starts a new session whose first prompt is Claude Code's
# own: "Implement the following plan:\n\n<plan>\n\nIf you need specific details from before
# exiting plan mode (like exact code snippets, error messages, or content you generated), read
# the full transcript at: <the previous session's .jsonl>", then optional paragraphs (teammates,
# the user's feedback on the plan).
PLAN_HANDOFF = "Implement the following plan:"
_HANDOFF_PATH = "read the full transcript at: "
_HANDOFF_WHY = "exiting plan mode"
_PATH_MAX = 4096


def handoff_source(prompt: str) -> str | None:
    """The id of the session a plan-mode handoff prompt names (its transcript's file name), or
    None. Found with ``str`` searches from the end (the plan itself may quote the words): linear,
    whatever the prompt holds."""
    if not prompt.startswith(PLAN_HANDOFF):
        return None
    at = prompt.rfind(_HANDOFF_PATH)
    if at < 0 or prompt.find(_HANDOFF_WHY, max(0, at - 200), at) < 0:
        return None
    start = at + len(_HANDOFF_PATH)
    end = prompt.find("\n", start, start + _PATH_MAX + 1)
    path = prompt[start : end if end >= 0 else start + _PATH_MAX + 1].strip()
    name = path[max(path.rfind("/"), path.rfind("\\")) + 1 :]
    if not name.endswith(".jsonl"):
        return None
    return _uuid(name[: -len(".jsonl")].lower())


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
    first_uuid: str | None = None  # of the first conversation line: a fork copies it from its parent
    forked_from: str | None = None  # the parent /branch named on that line (forkedFrom.sessionId)
    head_ts: str | None = None  # the latest time written before that line (a fork's lines of its own)
    handoff_from: str | None = None  # the session a plan-mode handoff's first prompt names
    account: str | None = None  # the accountUuid of the last ``session-owner`` line (an OAuth login)


_TOOL_RESULT = b'"tool_result"'
_TS = b'"timestamp"'
_BRANCH = b'"gitBranch"'
_USER_LINE = b'"type":"user"'  # Claude Code writes compact JSON (JSON.stringify)
_TITLE = b'Title":"'  # in both "customTitle":" and "aiTitle":"; one pass finds either
_LAST_PROMPT = b'"last-prompt"'
_OWNER = b'"session-owner"'  # 2.1.337: {"type":"session-owner","accountUuid",...}: whose login
_FIRST_LINES = 400  # how far the scan for the first conversation line may go

# What a scan looks for, by window. Every user line of a WHOLE file, a big file's HEAD and its
# TAIL regions is classified, so each counts its prompts (a big file's count: the prompts in what
# was read) and knows its last one. The HEAD also yields the first prompt, how the session began
# (and a title written at creation); a TAIL region the titles, branch and time; a widened tail's
# new part (TITLES), read only for a custom title, titles alone. Title searches stop at the
# first answer, from the right end.
WHOLE, HEAD, TAIL, TITLES = "whole", "head", "tail", "titles"


def scan(buf: bytes, offset: int, *, from_start: bool, mode: str = WHOLE, at_eof: bool = True) -> Facts:
    """Scan ``buf``, which holds the file's bytes from ``offset``.

    ``from_start``: the window starts at a line boundary (offset 0, or just after a newline);
    otherwise its first line is cut and dropped. The last unterminated line is dropped too: at
    the end of the file (``at_eof``) it is a write in flight or a torn one; at a window's edge it
    is a line longer than the window, whose start may still give a first prompt.

    The window is never split into lines: C-level searches find the few lines that matter (user
    lines, title lines, the first and last conversation lines), and only those are decoded.
    """
    facts = Facts()
    last_nl = buf.rfind(b"\n")
    if last_nl < 0:
        facts.clean_end = offset
        if from_start and not at_eof and mode in (WHOLE, HEAD):  # a line longer than the window
            _take_cut_prompt(facts, buf)
        return facts
    facts.clean_end = offset + last_nl + 1
    begin = 0 if from_start else buf.find(b"\n") + 1
    end = last_nl  # index of the final newline: complete lines lie in [begin, end]
    if mode == TITLES:
        _scan_titles(facts, buf, begin, end)
        return facts
    _scan_first_lines(facts, buf, begin, end)
    _scan_user_lines(facts, buf, begin, end, opening=mode != TAIL)
    _scan_titles(facts, buf, begin, end)
    if mode != HEAD:
        _scan_last_lines(facts, buf, begin, end)
    if facts.last_prompt is None and mode != HEAD:
        _scan_marker(facts, buf, begin, end, _LAST_PROMPT, "last-prompt")
    _scan_marker(facts, buf, begin, end, _OWNER, "session-owner")
    if facts.first_prompt is None and from_start and not at_eof:
        _take_cut_prompt(facts, buf[last_nl + 1 :])
    return facts


def _line_at(buf: bytes, pos: int, begin: int, end: int) -> tuple[int, int]:
    """Bounds of the complete line holding ``pos``."""
    start = buf.rfind(b"\n", begin, pos) + 1
    if start == 0:
        start = begin
    stop = buf.find(b"\n", pos, end + 1)
    return start, (end if stop < 0 else stop)


def _scan_first_lines(facts: Facts, buf: bytes, begin: int, end: int) -> None:
    """cwd, entrypoint, first timestamp and branch, and whether the first conversation line is a
    sidechain's: from the first lines, up to the first user or assistant line."""
    pos = begin
    for _ in range(_FIRST_LINES):
        if pos >= end:
            return
        stop = buf.find(b"\n", pos, end + 1)
        stop = end if stop < 0 else stop
        raw = buf[pos:stop]
        pos = stop + 1
        if _TS not in raw and b'"cwd"' not in raw:
            continue  # metadata lines (titles, modes, snapshots) carry neither
        line = _decode(raw)
        if line is None:
            continue
        _take(facts, line)
        if line.type in ("user", "assistant"):
            facts.conversation = True
            facts.first_is_sidechain = line.isSidechain is True
            facts.first_uuid = _uuid(line.uuid)
            parent = line.forkedFrom
            facts.forked_from = _uuid(
                parent.get("sessionId") if isinstance(parent, dict) else getattr(parent, "sessionId", None)
            )
            return
        # what the session wrote before its first conversation line: a fork writes its own lines
        # (a queue operation, a file-history snapshot) at the fork's time, before copied ones
        snap = line.snapshot
        ts = line.timestamp if isinstance(line.timestamp, str) else None
        snap_ts = snap.get("timestamp") if isinstance(snap, dict) else getattr(snap, "timestamp", None)
        for t in (ts, snap_ts):
            if isinstance(t, str) and len(t) <= 40 and (facts.head_ts is None or t > facts.head_ts):
                facts.head_ts = t


def _user_prompt(facts: Facts, buf: bytes, start: int, stop: int) -> tuple[str, str] | Literal[False] | None:
    """Classify the user line at [start, stop): False for a tool result (not decoded)."""
    if buf.find(_TOOL_RESULT, start, stop) >= 0:
        return False
    line = _decode(buf[start:stop])
    if line is None or line.type != "user":
        return None
    if facts.cwd is None:
        _take(facts, line)
    found = classify_prompt(line)
    if found is None and line.isMeta is not True and line.isSidechain is not True:
        return False  # a typed line that is not a prompt (an interrupt, a tag) ends "first"
    return found if found is not None else None


def _scan_user_lines(facts: Facts, buf: bytes, begin: int, end: int, *, opening: bool) -> None:
    """Every user line of the window, in order: the prompts counted, the last one kept. Where the
    window is the file's ``opening`` (its start), also the first prompt (and the session a plan
    handoff names in it) and whether the session began with /clear. Tool results are passed
    over by a byte search, undecoded."""
    first_user = opening
    pos = begin
    while True:
        pos = buf.find(_USER_LINE, pos, end)
        if pos < 0:
            return
        start, stop = _line_at(buf, pos, begin, end)
        pos = stop + 1
        facts.conversation = True
        found = _user_prompt(facts, buf, start, stop)
        if found is None:
            continue
        if found is False:
            first_user = False
            continue
        what, text = found
        if first_user:
            first_user = False
            facts.began_with_clear = what == "command" and text.split(" ")[0] in CLEAR_COMMANDS
        if what == "command":
            if opening:
                facts.first_command = facts.first_command or text
            continue
        facts.prompts += 1
        facts.last_prompt, facts.last_prompt_truncated = cap(text)
        if opening and facts.first_prompt is None:
            facts.first_prompt, facts.first_prompt_truncated = facts.last_prompt, facts.last_prompt_truncated
            facts.handoff_from = handoff_source(text)


def _lines_back(buf: bytes, marker: bytes, begin: int, end: int) -> Iterator[tuple[int, int]]:
    """Bounds of the lines holding ``marker``, from the last one back (each line once)."""
    pos = end
    while (pos := buf.rfind(marker, begin, pos)) >= 0:
        start, stop = _line_at(buf, pos, begin, end)
        pos = start
        yield start, stop


def _scan_titles(facts: Facts, buf: bytes, begin: int, end: int) -> None:
    """The last custom-title and the last ai-title, in one pass back from the end. A marker
    inside some other line (a tool input that mentions it) is decoded, found wanting, and passed."""
    for start, stop in _lines_back(buf, _TITLE, begin, end):
        line = _decode(buf[start:stop])
        if line is None:
            continue
        if line.type == "custom-title":
            facts.custom_title = _text(line.customTitle)
            if facts.custom_title:
                return  # it outranks any ai-title further back
        elif line.type == "ai-title" and facts.ai_title is None:
            facts.ai_title = _text(line.aiTitle)


def _scan_marker(facts: Facts, buf: bytes, begin: int, end: int, marker: bytes, kind: str) -> None:
    for start, stop in _lines_back(buf, marker, begin, end):
        line = _decode(buf[start:stop])
        if line is not None and line.type == kind:
            _take(facts, line)
            return


def _scan_last_lines(facts: Facts, buf: bytes, begin: int, end: int) -> None:
    """The last timestamp and branch: back from the end, jumping from one line that holds a
    marker still needed to the next (``rfind``), decoding only those lines."""
    need_ts, need_branch = True, True
    stop = end
    while stop > begin and (need_ts or need_branch):
        at = max(buf.rfind(_TS, begin, stop) if need_ts else -1, buf.rfind(_BRANCH, begin, stop) if need_branch else -1)
        if at < 0:
            return
        start, line_end = _line_at(buf, at, begin, end)
        stop = start - 1
        line = _decode(buf[start:line_end])
        if line is None or line.isSidechain is True:
            continue
        if need_ts and isinstance(line.timestamp, str) and line.type != "queue-operation":
            facts.last_ts, need_ts = line.timestamp, False
        if need_branch and isinstance(line.gitBranch, str) and line.gitBranch:
            facts.last_branch, need_branch = line.gitBranch, False


def _take_cut_prompt(facts: Facts, partial: bytes) -> None:
    cut = _cut_prompt(partial)
    if cut is not None:
        facts.first_prompt, facts.first_prompt_truncated = cut, True
        facts.conversation = True  # a session whose one prompt outgrew every window is one


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
    if kind == "session-owner":
        facts.account = _uuid(line.accountUuid) or facts.account
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


_CONTENT_KEYS = (b'"content":"', b'"text":"')


def _cut_prompt(partial: bytes) -> str | None:
    """The first 200 characters of a user prompt whose line is longer than the window."""
    if _USER_LINE not in partial[:4096] or _TOOL_RESULT in partial[:8192]:
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
        if not text.strip() or _TAG_START.match(text.lstrip()):
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


_STRING_BODY = re.compile(rb'(?:[^"\\]++|\\.)*+"', re.S)


def _closing_quote(raw: bytes) -> int:
    """Index of the quote that ends a JSON string body, or -1 when it was cut off."""
    m = _STRING_BODY.match(raw)
    return m.end() - 1 if m else -1
