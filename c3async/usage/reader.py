"""Reading one transcript's new bytes for the accountant: bounded memory, narrow decoding.

The new bytes of a file are read in ``CHUNK``-sized pieces into one reused buffer (a 2 GB
transcript costs a chunk of memory, not 2 GB); the unfinished line at the end of a piece is
carried to the front of the next. In each piece the lines that can carry usage are found by
searching the raw bytes for ``"usage":{`` (ccusage's own pre-filter: inside a JSON string every
quote is escaped, so the marker only matches a real ``usage`` key with an object value), and
only those lines are decoded, with a narrow ``msgspec`` type that skips everything else
(content, tool results, thinking), all of a piece's lines in one C call; a piece holding a line
that does not decode (torn, binary, nested too deep, two values on one line) is decoded again
line by line, and only the bad lines are skipped.

A line longer than ``CHUNK`` makes the buffer grow to hold it, up to ``MAX_LINE``; a longer
line is streamed past and skipped (no Claude Code response comes near it: a response is written
one content block a line). The bytes after the last newline are a line still being written and
are left for the next pass.

Everything here runs in a worker process as well as in the caller's (``read_files`` takes and
returns plain, picklable values), and one file's failure is that file's only.
"""

from __future__ import annotations

import io
import os
from collections import deque
from dataclasses import dataclass
from typing import Annotated, Any, Protocol, cast

import msgspec

from ..catalog.listing import depth_in_folder
from ..ground import jsonl
from ..ground.errors import DECODE_ERRORS
from ..ground.safefs import open_regular

__all__ = (
    "CHUNK",
    "MAX_LINE",
    "MAX_RESPONSE_USD",
    "MAX_TOKENS",
    "Count",
    "FileScan",
    "Hit",
    "Job",
    "Refusal",
    "ResponseUSD",
    "Tokens",
    "read_file",
    "read_files",
    "read_files_packed",
    "unpack",
)

CHUNK = 8 * 1024 * 1024
MAX_LINE = 32 * 1024 * 1024
# One response's tokens of one kind: the largest context window is 2**20 tokens and an output
# at most 128k, so a count above 10**9 (a thousand windows) is no count; nor is a negative one.
MAX_TOKENS = 10**9
# One response's recorded ``costUSD``: the dearest response a 1M-token window can cost at
# today's prices is about 30 USD, so more than 10,000 (or less than 0) is no cost.
MAX_RESPONSE_USD = 10_000.0
_MARKER = b'"usage":{'
_NL = b"\n"

# One response's tokens of one kind, and its recorded cost, as every decoder checks them (the
# accountant's state is a file too).
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_TOKENS)]
ResponseUSD = Annotated[float, msgspec.Meta(ge=0, le=MAX_RESPONSE_USD)]
# tokens: (input, output, cache_write_5m, cache_write_1h, cache_read)
Tokens = tuple[Count, Count, Count, Count, Count]


# Counts are decoded as numbers of either kind, so that one which is not a whole number is
# found and said (``MAX_TOKENS``), not lost with its line.
class _CacheCreation(msgspec.Struct):
    ephemeral_5m_input_tokens: int | float = 0
    ephemeral_1h_input_tokens: int | float = 0


class _Usage(msgspec.Struct):
    input_tokens: int | float = 0
    output_tokens: int | float = 0
    cache_creation_input_tokens: int | float = 0
    cache_read_input_tokens: int | float = 0
    cache_creation: _CacheCreation | None = None


class _Msg(msgspec.Struct):
    id: str | None = None
    model: str | None = None
    usage: _Usage | None = None


class _Line(msgspec.Struct):
    """The only fields a usage line is decoded into; every other key is skipped unparsed."""

    sessionId: str | None = None
    timestamp: str | None = None
    requestId: str | None = None
    isSidechain: bool | None = None
    costUSD: float | None = None
    message: _Msg | None = None
    # A usage-limit refusal's (``"<synthetic>"`` lines only are looked at): any value decodes,
    # so a strange one never costs a real response its line; ``refusal`` range-checks them.
    apiError: Any = None
    apiErrorParams: Any = None


_decoder = msgspec.json.Decoder(_Line)
_decode_line = _decoder.decode
_decode_lines = _decoder.decode_lines


class Hit(msgspec.Struct, array_like=True, gc=False):
    """One API response as read: its dedup key (``message.id:requestId``; None: never merged)."""

    key: str | None
    session: str
    model: str
    tokens: Tokens
    cost: ResponseUSD | None  # what the line recorded (``costUSD``, older Claude Code); None: priced when reported
    sidechain: bool
    ts: str | None


@dataclass(slots=True)
class Job:
    """One file to read: where the last pass stopped (``offset``) in which file (``ino``)."""

    path: str
    session: str | None  # the session its lines count toward; None: the lines' own sessionId
    offset: int = 0
    ino: int = 0
    new: int = 0  # about how many bytes there are to read (from a stat before the read)
    searched: int = 0  # a line with no newline yet, starting at ``offset``, was followed this far


class Refusal(msgspec.Struct, array_like=True, gc=False):
    """A usage-limit refusal Claude Code wrote in a transcript (a synthetic assistant line with
    ``"apiError": "usage_limit_reached"``): when, which window refused and when it resets (None:
    not said, or out of the window's reach from ``t``)."""

    session: Annotated[str, msgspec.Meta(max_length=200)]
    t: Annotated[float, msgspec.Meta(gt=0, le=253_402_300_799)]
    window: Annotated[str, msgspec.Meta(max_length=64)] | None
    resets_at: Annotated[float, msgspec.Meta(gt=0, le=253_402_300_799)] | None


MAX_REFUSALS = 64  # kept per file read, and by the accountant: the newest


def refusal(line: _Line, session: str) -> Refusal | None:
    """The refusal ``line`` records, when it is one with a time in range."""
    if line.apiError != "usage_limit_reached":
        return None
    from ..ground.clock import event_iso
    from .ratelimits import is_window, sample

    t = event_iso(line.timestamp, "a usage-limit refusal's timestamp", session)
    if t is None:
        return None
    params = line.apiErrorParams
    info = params.get("rate_limit_info") if isinstance(params, dict) else None
    info = info if isinstance(info, dict) else {}
    window = info.get("rateLimitType")
    window = window if is_window(window) else None
    # ``sample`` checks that the reset lies within the window's reach from ``t`` (in seconds)
    found = sample(window, 100.0, info.get("resetsAt"), t, t) if window else None
    return Refusal(session, round(t, 3), window, found.resets_at if found else None)


class FileScan(msgspec.Struct, array_like=True, gc=False):
    """What reading one file's new bytes found (from a worker process: as MessagePack)."""

    ino: int
    start: int  # where reading began: 0 for a file replaced or shrunk since (forget it first)
    offset: int  # just after the last complete line read
    bytes_read: int
    best: list[Hit]  # keyed responses, the best copy in this file of each, in first-seen order
    loose: list[Hit]  # responses with no message.id, every one
    lines: int = 0  # lines holding the marker
    decoded: int = 0  # bytes of those lines handed to the decoder
    skipped: int = 0  # lines holding the marker that did not decode, or over MAX_LINE
    searched: int = 0  # see ``jsonl.Pieces``
    out_of_range: int = 0  # responses not counted: token counts or a cost out of range
    refusals: list[Refusal] = msgspec.field(default_factory=list)  # the newest ``MAX_REFUSALS``


class Copy(Protocol):
    """What choosing between two copies of a response looks at."""

    sidechain: bool
    tokens: Tokens


def better(new: Copy, old: Copy) -> bool:
    """ccusage's choice between two copies of one response: the main-chain copy over a
    sidechain replay, then the higher token total (a streaming partial loses); ties keep the
    first."""
    if old.sidechain != new.sidechain:
        return not new.sidechain
    return sum(new.tokens) > sum(old.tokens)


class _Reader:
    """The lines of one file's new bytes, decoded, deduplicated within the file."""

    def __init__(self, session: str | None) -> None:
        self.session = session
        self.best: dict[str, Hit] = {}
        self.loose: list[Hit] = []
        self.lines = self.decoded = self.skipped = self.out_of_range = 0
        self.refusals: deque[Refusal] = deque(maxlen=MAX_REFUSALS)

    def piece(self, buf: bytearray, end: int, base: int) -> None:
        """Account the complete lines of ``buf[:end]`` (``buf[end - 1]`` is a newline)."""
        find, rfind = buf.find, buf.rfind
        spans = []
        pos = find(_MARKER, 0, end)
        while pos >= 0:
            start = rfind(_NL, 0, pos) + 1
            stop = find(_NL, pos, end)
            spans.append(buf[start:stop])
            pos = find(_MARKER, stop + 1, end)
        if not spans:
            return
        self.lines += len(spans)
        payload = _NL.join(spans)
        self.decoded += len(payload)
        try:
            # One C call for the piece; decode_lines keeps each line its own value, so a line
            # that is not valid alone (two values, a torn half) fails the batch, never glues.
            decoded: list[_Line | None] = list(_decode_lines(payload))
            if len(decoded) != len(spans):
                raise ValueError("line count")
        except DECODE_ERRORS:
            decoded = [_decode_or_none(s) for s in spans]
        best, session = self.best, self.session
        for line in decoded:
            if line is None:
                self.skipped += 1
                continue
            msg = line.message
            if msg is None or msg.usage is None or not msg.model:
                continue
            sid = session or (line.sessionId or "").lower()
            if not sid:
                continue
            if msg.model == "<synthetic>":  # no response: a refusal, perhaps
                found = refusal(line, sid) if line.apiError is not None else None
                if found is not None:
                    self.refusals.append(found)
                continue
            u = msg.usage
            cc = u.cache_creation
            tokens = (
                u.input_tokens,
                u.output_tokens,
                cc.ephemeral_5m_input_tokens if cc is not None else u.cache_creation_input_tokens,
                cc.ephemeral_1h_input_tokens if cc is not None else 0,
                u.cache_read_input_tokens,
            )
            cost = line.costUSD
            # a sum of whole numbers is one: a float among them makes it a float
            if (
                min(tokens) < 0
                or max(tokens) > MAX_TOKENS
                or type(sum(tokens)) is not int
                or (cost is not None and not 0 <= cost <= MAX_RESPONSE_USD)
            ):
                self.out_of_range += 1  # that response is not counted (the accountant says so once)
                continue
            sidechain = bool(line.isSidechain)
            if not msg.id:
                key = None
            else:
                key = f"{msg.id}:{line.requestId or ''}"
                old = best.get(key)
                # ``better``, inline: most keyed lines are further copies of a response
                if old is not None and (
                    (old.sidechain == sidechain and sum(tokens) <= sum(old.tokens)) or (not old.sidechain and sidechain)
                ):
                    continue
            # cost: a recorded costUSD (legacy lines) wins, as in ccusage's auto mode; the
            # others are priced when a report is made, from the price table of the moment
            hit = Hit(key, sid, msg.model, cast(Tokens, tokens), cost, sidechain, line.timestamp)
            if key is None:
                self.loose.append(hit)
            else:
                best[key] = hit


def _decode_or_none(line: bytes | bytearray) -> _Line | None:
    try:
        return _decode_line(line)
    except DECODE_ERRORS:  # malformed, binary, or nested deeper than the recursion limit
        return None


def read_file(job: Job, buf: bytearray | None = None, max_line: int = MAX_LINE) -> FileScan | None:
    """Read ``job.path`` from where the last pass stopped (from 0 when the file was replaced or
    shrank) to its size now, a piece of ``len(buf)`` bytes at a time (``buf``: a buffer to reuse,
    ``CHUNK`` bytes when none is given). None when it cannot be read (vanished, no longer a
    regular file, an I/O error): the caller keeps what it had, and the next pass tries again."""
    try:
        # Non-blocking and no-follow, then fstat: a FIFO or a symlink put here (even after the
        # listing looked) is refused at once instead of hanging the accountant.
        fd, st = open_regular(job.path, depth=depth_in_folder(job.path))
    except OSError:
        return None
    try:
        same = st.st_ino == job.ino and st.st_size >= job.offset
        start = job.offset if same else 0
        reader = _Reader(job.session)
        with io.FileIO(fd, closefd=False) as f:
            if buf is None:  # a buffer of at most the bytes to read: most transcripts are small
                buf = bytearray(max(1, min(CHUNK, st.st_size - start)))
            offset, read, searched = jsonl.read_pieces(
                f, start, st.st_size, reader, buf, max_line, job.searched if same else 0
            )
    except OSError:
        return None
    finally:
        os.close(fd)
    return FileScan(
        st.st_ino,
        start,
        offset,
        read,
        list(reader.best.values()),
        reader.loose,
        reader.lines,
        reader.decoded,
        reader.skipped,
        searched,
        reader.out_of_range,
        list(reader.refusals),
    )


def read_files(jobs: list[tuple[int, Job]]) -> list[tuple[int, FileScan | None]]:
    """Several files (a worker process's hand-off), each read on its own (see ``read_file``),
    through one buffer."""
    buf = bytearray(max(1, min(CHUNK, max((job.new for _, job in jobs), default=1))))
    return [(i, read_file(job, buf)) for i, job in jobs]


_packer = msgspec.msgpack.Encoder()
_unpacker = msgspec.msgpack.Decoder(list[tuple[int, FileScan | None]])


def read_files_packed(jobs: list[tuple[int, Job]]) -> bytes:
    """``read_files`` in a worker process: the answer as MessagePack, which crosses to the
    parent several times faster than a pickle of the same structs."""
    return _packer.encode(read_files(jobs))


def unpack(data: bytes) -> list[tuple[int, FileScan | None]]:
    return _unpacker.decode(data)
