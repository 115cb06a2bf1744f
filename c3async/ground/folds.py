"""Folds over append-only logs whose cost does not grow with the log: checkpointed and tailed.

A fold turns a log's records into a small state (where each session's last marks are, the
liveness facts of the activity log). Reading the whole log on every listing costs what the
project's whole history costs, so each fold keeps a checkpoint beside the project's caches,
``.c3/cache/<name>.fold`` (msgpack, which decodes in about half the time JSON takes): the
folded state, the byte offset it covers, and the identity of the file at that offset (device,
inode, and the bytes at its start and just before the offset). A process starts
from the checkpoint and reads only the bytes appended since; a long-running one (the server, the
Hub) keeps the fold in memory and tails the file. A log replaced, truncated or rewritten is
noticed (``jsonl.Tail``) and folded again from the start.

A checkpoint is a cache: one that is missing, garbage, of another format or version, or of
another file costs one full fold, never a wrong answer. Several processes may each write it
(atomic replace, last writer wins); no lock is held while folding. A fold's state is replaced,
never changed in place, so a reader in another thread keeps a consistent one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

import msgspec

from . import jsonl, memo, safefs
from .errors import DECODE_ERRORS

__all__ = ("SAVE_EVERY", "LogFold", "fold_for")

R = TypeVar("R")
S = TypeVar("S")

FORMAT = "c3async.fold"
SAVE_EVERY = 256 * 1024  # bytes folded since the last checkpoint before it is written again
MAX_CHECKPOINT = 64 * 1024 * 1024  # a bigger file is not a checkpoint of ours: fold from the start


class _Checkpoint(msgspec.Struct):
    format: str
    name: str
    version: int
    dev: int
    ino: int
    offset: int
    check: bytes  # the first bytes of the log and the bytes just before ``offset``
    skipped: int
    state: msgspec.Raw


class LogFold(Generic[R, S]):
    """``apply(state, batch) -> new state`` over the log at ``log``, checkpointed at
    ``checkpoint`` (None: in memory only). ``empty()`` is the state of an empty log; bump
    ``version`` whenever ``S`` or ``apply`` change meaning, so old checkpoints are refolded.
    ``spans``: batches carry each record's (offset, length), for folds that keep where a line
    is rather than what it says (and read it back when asked)."""

    def __init__(
        self,
        name: str,
        version: int,
        log: Path,
        checkpoint: Path | None,
        record: type[R],
        state: type[S],
        empty: Callable[[], S],
        apply: Callable[[S, jsonl.Batch[R]], S],
        *,
        spans: bool = False,
    ) -> None:
        self.name, self.version = name, version
        self.checkpoint = checkpoint
        self.state_type = state
        self.empty, self.apply = empty, apply
        self.tail: jsonl.Tail[R] = jsonl.Tail(log, record, spans=spans)
        self.state: S | None = None
        self.saved_offset = -1
        self.lock = threading.Lock()
        self.loaded_from_checkpoint = False
        # What a fold's user derived from the log as it is (e.g. lines read back), kept while the
        # file stays the same one; emptied whenever the fold starts over.
        self.memo: dict = {}

    def refresh(self) -> S:
        """The state as of now: the checkpoint (first time) plus the bytes appended since."""
        with self.lock:
            if self.state is None:
                self.state = self._load() or self.empty()
            state = self.state
            for batch in self.tail.batches():
                if self.tail.reset:  # replaced, truncated or rewritten: start over
                    state = self.empty()
                    self.memo = {}
                    self.tail.reset = False
                if batch.records:
                    state = self.apply(state, batch)
            if self.tail.reset:  # the log is gone (or refused): nothing is folded
                state = self.empty()
                self.memo = {}
            self.state = state
            if self.checkpoint is not None and abs(self.tail.offset - self.saved_offset) >= SAVE_EVERY:
                self._save(state)
            return state

    @property
    def skipped(self) -> int:
        return self.tail.skipped

    def _load(self) -> S | None:
        if self.checkpoint is None:
            return None
        try:
            data = safefs.read_bytes(self.checkpoint, limit=MAX_CHECKPOINT + 1)
            if len(data) > MAX_CHECKPOINT:  # not one we wrote (a cloned repository can ship anything)
                return None
            cp = msgspec.msgpack.decode(data, type=_Checkpoint)
            if (cp.format, cp.name, cp.version) != (FORMAT, self.name, self.version) or cp.offset < 0:
                return None
            state = msgspec.msgpack.decode(cp.state, type=self.state_type)
        except (OSError, *DECODE_ERRORS):
            return None  # a cache: missing, garbage or foreign means one full fold
        self.tail.resume(cp.offset, (cp.dev, cp.ino), cp.check)
        self.tail.skipped = cp.skipped
        self.saved_offset = cp.offset
        self.loaded_from_checkpoint = True
        return state

    def _save(self, state: S) -> None:
        ident = self.tail.ident
        if ident is None or self.checkpoint is None:
            return
        cp = _Checkpoint(
            FORMAT,
            self.name,
            self.version,
            ident[0],
            ident[1],
            self.tail.offset,
            self.tail.check,
            self.tail.skipped,
            msgspec.Raw(msgspec.msgpack.encode(state)),
        )
        try:
            safefs.write_atomic(self.checkpoint, msgspec.msgpack.encode(cp), fsync=False)
        except OSError:
            return  # a read-only checkout: the next process folds from its own start
        self.saved_offset = self.tail.offset


_folds: dict[tuple[str, str], LogFold] = memo.kept({})
_folds_lock = threading.Lock()


def fold_for(key: tuple[str, str], make: Callable[[], LogFold[R, S]]) -> LogFold[R, S]:
    """This process's one fold for ``key`` (a name and the log's path), made on first use, so
    every listing of a long-running process reads only what was appended since the last."""
    with _folds_lock:
        fold = _folds.get(key)
        if fold is None:
            fold = _folds[key] = make()
        return fold
