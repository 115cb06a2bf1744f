"""Append-only JSONL logs shared by many processes: marks, activity, stats.

Writing: the whole line is ONE ``write()`` on an ``O_APPEND`` descriptor, under the sidecar lock
(``<file>.lock``). Under that lock, a file that does not end in ``\\n`` (a writer was killed
mid-line) first gets the ``\\n``, so a torn fragment never swallows the next good line. A write
that fails part-way (disk full: ``DiskFull``) is cut back off, so no half line is left to
glue to the next.

Reading: split on ``\\n``; the bytes after the last ``\\n`` are a write in flight or a torn one
and are left for later; a line that does not decode is skipped and counted, never fatal.
``Tail`` resumes from a byte offset, so folding a growing log only reads its new bytes.
"""

from __future__ import annotations

import errno
import io
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

import msgspec

from . import disk, safefs
from .errors import DECODE_ERRORS, UnsafeState
from .locking import locked

__all__ = (
    "Appender",
    "Batch",
    "PieceReader",
    "Pieces",
    "Tail",
    "append",
    "appending",
    "encode_line",
    "has_blank_line",
    "next_data",
    "read_all",
    "read_pieces",
)

T = TypeVar("T")
_encoder = msgspec.json.Encoder()


def encode_line(record: Any) -> bytes:
    """One record as one line of compact JSON (JSON never holds a raw newline)."""
    return _encoder.encode(record) + b"\n"


def append(path: Path, record: Any) -> int:
    """Append ``record`` as one line. Returns the offset it was written at.

    Raises OSError (read-only folder, disk full...) with nothing half-written left behind, and
    UnsafeState when the log or a folder above it is a link or not a regular file.
    """
    line = record if isinstance(record, bytes) else encode_line(record)
    if not line.endswith(b"\n") or b"\n" in line[:-1]:
        raise ValueError("a log record must be exactly one line ending in a newline")
    with appending(path) as log:
        return log.write(line)


class Appender:
    """A log held for appending (under its lock): ``size`` when it was taken, ``fd`` to read
    what is there, ``write`` for whole lines."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size = fd, size

    def write(self, lines: bytes) -> int:
        """Append complete lines in ONE ``write()``; returns the offset of the first. A file not
        ending in a newline (a writer was killed mid-line) gets the newline first, so a torn
        fragment never swallows a good line; a write that fails part-way is cut back off."""
        start = self.size
        healed = start > 0 and os.pread(self.fd, 1, start - 1) != b"\n"
        data = b"\n" + lines if healed else lines
        written = 0
        try:
            while written < len(data):  # one write() in practice; the loop guards short writes
                written += os.write(self.fd, data[written:])
        except OSError:
            if written:
                try:
                    os.ftruncate(self.fd, start)  # we hold the lock: nobody appended after us
                except OSError:
                    pass
            raise
        self.size = start + len(data)
        return start + healed


@contextmanager
def appending(path: Path) -> Iterator[Appender]:
    """Hold ``path`` for appending, under the lock every appender of it takes."""
    with disk.reported(path.parent), locked(path):
        fd = safefs.open_file(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, create_dirs=True)
        try:
            yield Appender(fd, os.fstat(fd).st_size)
        finally:
            os.close(fd)


@dataclass(slots=True)
class Batch(Generic[T]):
    records: list[T] = field(default_factory=list)
    skipped: int = 0  # lines that did not decode (torn, garbage, wrong shape)
    end: int = 0  # offset just after the last complete line
    # With ``Tail(..., offsets=True)``: where each record's line starts in the file, and its
    # length without the newline (a fold can keep these instead of the records).
    spans: list[tuple[int, int]] | None = None


_BLANK_LINE = re.compile(rb"\n[ \t\r]*\n")  # (a literal first: ~1 ms for 8 MiB)


def has_blank_line(data: bytes | bytearray | memoryview) -> bool:
    """Does ``data`` (complete lines) hold an empty or blank line? ``decode_lines`` skips those,
    so a line holding two values elsewhere would make the counts agree with the records one
    line off: such a chunk is read line by line instead."""
    if data[:1] in (b"\n", b" ", b"\t", b"\r"):  # the first line blank (or starting blank)
        return _BLANK_LINE.search(b"\n" + bytes(data[:4096])) is not None or _BLANK_LINE.search(data) is not None
    return _BLANK_LINE.search(data) is not None


def _decode_lines(data: bytes, decoder: msgspec.json.Decoder, batch: Batch, base: int | None = None) -> None:
    """Decode ``data`` (complete lines only) into ``batch``, skipping and counting bad lines.
    ``base``: the file offset of ``data``, to record each record's span in ``batch.spans``."""
    # Fast path: the whole chunk in one C call, each line its own value (joining lines into one
    # array would let lines that are each invalid glue into a valid record). Any bad or blank
    # line (or two values on one line, caught by the count) sends us to the line-by-line path.
    count = data.count(b"\n")
    try:
        records = decoder.decode_lines(data)
    except DECODE_ERRORS:
        records = None
    if records is not None and len(records) == count and not has_blank_line(data):
        batch.records.extend(records)
        if base is not None and batch.spans is not None:
            start = 0
            for _ in range(count):
                end = data.index(b"\n", start)
                batch.spans.append((base + start, end - start))
                start = end + 1
        return
    start = 0
    for line in data.split(b"\n")[:-1]:
        here, start = start, start + len(line) + 1
        if not line.strip():
            continue
        try:
            batch.records.append(decoder.decode(line))
        except DECODE_ERRORS:
            batch.skipped += 1
            continue
        if base is not None and batch.spans is not None:
            batch.spans.append((base + here, len(line)))


def read_all(path: Path, type_: type[T]) -> Batch[T]:
    """Every complete, valid record of ``path`` (missing file: none)."""
    tail = Tail(path, type_)
    return tail.poll()


class Tail(Generic[T]):
    """Read a log incrementally: each ``poll()`` returns only the records appended since.

    A file that shrank, was replaced (another device or inode) or rewritten (the first bytes, or
    the bytes just before the offset, are not the ones seen there) is read again from the start, and ``reset``
    is set so the caller can rebuild what it folded. ``resume`` starts from a saved position
    (a fold's checkpoint), checked the same way before it is trusted.
    """

    CHUNK = 8 * 1024 * 1024
    CHECK = 64  # bytes at the start and just before the offset kept to recognise the same file

    def __init__(self, path: Path, type_: type[T], *, spans: bool = False) -> None:
        self.path = path
        self.spans = spans
        self.decoder = msgspec.json.Decoder(type_)
        self.offset = 0
        self.skipped = 0
        self.reset = False
        self.ident: tuple[int, int] | None = None
        self.check = b""

    def resume(self, offset: int, ident: tuple[int, int], check: bytes) -> None:
        self.offset, self.ident, self.check = offset, ident, check

    def poll(self) -> Batch[T]:
        batch: Batch[T] = Batch(end=self.offset, spans=[] if self.spans else None)
        for part in self.batches():
            batch.records.extend(part.records)
            batch.skipped += part.skipped
            if batch.spans is not None and part.spans is not None:
                batch.spans.extend(part.spans)
        batch.end = self.offset
        return batch

    def batches(self) -> Iterator[Batch[T]]:
        """The new records, one batch per chunk read (a fold applies each and lets it go)."""
        self.reset = False
        try:
            fd = safefs.open_file(self.path, os.O_RDONLY)
        except (FileNotFoundError, UnsafeState) as exc:
            if isinstance(exc, UnsafeState):
                safefs.warn_once(exc)  # read as if absent; writes to it are refused
            if self.offset or self.ident is not None:
                self.reset = self.offset > 0
                self.offset, self.ident, self.check = 0, None, b""
            return
        try:
            st = os.fstat(fd)
            ident = (st.st_dev, st.st_ino)
            if ident != self.ident or st.st_size < self.offset or not self._same_bytes(fd):
                if self.offset:
                    self.reset = True
                self.offset, self.ident, self.check = 0, ident, b""
            for chunk_start, data in self._chunks(fd, st.st_size):
                last_nl = data.rfind(b"\n")
                if last_nl < 0:
                    break
                batch: Batch[T] = Batch(spans=[] if self.spans else None)
                _decode_lines(data[: last_nl + 1], self.decoder, batch, chunk_start if self.spans else None)
                self.offset = chunk_start + last_nl + 1
                batch.end = self.offset
                self.skipped += batch.skipped
                yield batch
            if self.offset:  # the first and the last bytes read, CHECK of each
                n = min(self.CHECK, self.offset)
                self.check = os.pread(fd, n, 0) + os.pread(fd, n, self.offset - n)
        finally:
            os.close(fd)

    def _same_bytes(self, fd: int) -> bool:
        """The bytes at both ends of what was read are still there (a log rewritten in place
        with the same inode differs at one end or the other; a change only in its middle would
        need a full read to see)."""
        if not self.offset or not self.check:
            return True
        n = len(self.check) // 2
        head, tail = self.check[:n], self.check[n:]
        return os.pread(fd, n, 0) == head and os.pread(fd, len(tail), self.offset - len(tail)) == tail

    def _chunks(self, fd: int, size: int) -> Iterator[tuple[int, bytes]]:
        pos = self.offset
        carry = b""
        while pos < size:
            data = os.pread(fd, min(self.CHUNK, size - pos), pos)
            if not data:
                break
            start = pos - len(carry)
            block = carry + data
            pos += len(data)
            last_nl = block.rfind(b"\n")
            if last_nl < 0:
                carry = block
                continue
            yield start, block[: last_nl + 1]
            carry = block[last_nl + 1 :]


class PieceReader(Protocol):
    """What ``read_pieces`` feeds: complete lines, a piece at a time."""

    skipped: int  # lines given up (longer than ``max_line``), counted here

    def piece(self, buf: bytearray, end: int, base: int) -> None:
        """Take the complete lines of ``buf[:end]`` (``buf[end - 1]`` is a newline; ``buf[0]``
        is at file offset ``base``)."""


class Pieces(NamedTuple):
    """Where a pass over a file's lines ended."""

    offset: int  # just after the last complete line: the next pass reads from here
    read: int  # bytes read
    searched: int  # 0, or how far a line that has no newline yet was followed (from ``offset``)


def next_data(fd: int, pos: int, size: int) -> int:
    """The first byte at or after ``pos`` that is not in a hole of a sparse file (``size``: no
    data left). A hole holds only zeros, so it holds no newline: nothing in it is read. (Moves
    the descriptor's position.)"""
    seek_data = getattr(os, "SEEK_DATA", None)
    if seek_data is None:
        return pos
    try:
        return os.lseek(fd, pos, seek_data)
    except OSError as exc:
        return size if exc.errno == errno.ENXIO else pos  # ENXIO: only a hole is left


def next_hole(fd: int, pos: int, size: int) -> int:
    """Where the data at ``pos`` ends (a hole starts, or the file ends)."""
    seek_hole = getattr(os, "SEEK_HOLE", None)
    if seek_hole is None:
        return size
    try:
        return min(os.lseek(fd, pos, seek_hole), size)
    except OSError:
        return size


def read_pieces(
    f: io.FileIO, start: int, size: int, reader: PieceReader, buf: bytearray, max_line: int, searched: int = 0
) -> Pieces:
    """Feed ``reader`` the complete lines of bytes ``start..size`` of ``f``, a piece of
    ``len(buf)`` bytes at a time, so a 2 GB file costs one buffer, not 2 GB. ``buf`` grows (as a
    copy) to hold a line longer than itself, up to ``max_line``; a longer line is streamed past
    (the holes of a sparse file skipped, not read) and counted in ``reader.skipped``. The bytes
    after the last newline are a line still being written, left for the next pass; when that line
    is longer than ``max_line``, ``searched`` says how far it was followed, and the next pass
    (given it back) goes on looking for its end from there instead of reading it all again."""
    base = start  # the file offset of buf[0]
    have = 0  # bytes of buf holding data
    read = 0
    giant = -1  # the offset where a line longer than max_line began: its bytes are dropped
    if searched > start:  # a giant line starting at ``start``, followed this far already
        giant, base = start, min(searched, size)
    while base + have < size:
        if have == len(buf) and giant < 0:  # a line longer than the buffer: grow it, or give it up
            if len(buf) < max_line:
                grown = bytearray(min(2 * len(buf), max_line))
                grown[:have] = buf
                buf = grown
            else:
                giant = base
                base += have
                have = 0
        if giant >= 0:  # have == 0 here: look for the giant line's end, past any hole
            base = next_data(f.fileno(), base, size)
            if base >= size:
                break
        else:
            hole_end = next_data(f.fileno(), base + have, size)
            if hole_end > base + have and have + hole_end - (base + have) > max_line:
                giant, base, have = base, hole_end, 0  # a hole longer than a line may be: not read
                continue
        stop = min(len(buf), size - base)
        hole = next_hole(f.fileno(), base + have, size)  # (lseek moves the file's position: seek after)
        if hole > base + have:
            stop = min(stop, hole - base)  # not into a hole: the next turn sees how long it is
        f.seek(base + have)
        with memoryview(buf) as view:
            n = f.readinto(view[have:stop])
        if not n:
            break  # truncated while we read: the next pass sees it shrunk
        read += n
        if giant >= 0:
            nl = buf.find(b"\n", 0, n)
            if nl < 0:
                base += n
                continue
            reader.skipped += 1
            giant = -1
            base, have = _shift(buf, nl + 1, n, base)
        else:
            have += n
        end = buf.rfind(b"\n", 0, have) + 1
        if end:
            reader.piece(buf, end, base)
            base, have = _shift(buf, end, have, base)
    if giant >= 0:  # an unfinished giant line: given up again once it has its newline
        return Pieces(giant, read, min(base, size))
    return Pieces(base, read, 0)


def _shift(buf: bytearray, end: int, have: int, base: int) -> tuple[int, int]:
    """Drop ``buf[:end]`` (done with), moving the rest to the front; returns (base, have)."""
    rest = have - end
    if rest:
        buf[:rest] = buf[end:have]
    return base + end, rest
