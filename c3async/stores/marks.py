"""Session marks, ``.c3/session_marks.jsonl``: stale / unstale, note, keep / unkeep, tag / untag,
each folded last-wins by time (a tag per session and word: the last tag or untag of it wins).

Marks are appended, never rewritten: several MCP processes, the Hub and the CLI write at once,
and an append never loses a concurrent row the way rewriting one JSON file would. The file is
also the audit trail; every mark writes a ``session_mark`` activity row too.

Limits (characters): a stale/unstale reason ``MAX_REASON`` (2,000), a note's summary
``MAX_SUMMARY`` and next steps ``MAX_NEXT_STEPS`` (8,000 each). Longer text, a NUL or a lone
surrogate is refused with a BadArgument naming the field, before anything is written. A tag is
one word of at most ``MAX_TAG`` (40) letters, digits and ``_ . + -`` (starting with a letter or a
digit), stored lower-cased; a mark names at most ``MAX_TAG_WORDS`` (16), and a session holds at
most ``MAX_TAGS`` (32). A tag line that breaks these (a hand-edited file) is skipped by the fold.
"""

from __future__ import annotations

import logging
import os
import re
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import msgspec

from ..catalog.listing import is_session_id
from ..ground import clock, jsonl, safefs
from ..ground.errors import DECODE_ERRORS, BadArgument, check_text, clip
from ..ground.folds import LogFold, fold_for
from ..ground.project import Project
from . import activity

__all__ = (
    "MAX_NEXT_STEPS",
    "MAX_REASON",
    "MAX_SUMMARY",
    "MAX_TAG",
    "MAX_TAGS",
    "MAX_TAG_WORDS",
    "OPS",
    "Keep",
    "Mark",
    "MarkBook",
    "MarkState",
    "Note",
    "Stale",
    "TagMark",
    "check_mark_text",
    "check_tags",
    "marks_path",
    "write_keeps",
    "write_mark",
)

log = logging.getLogger("c3async.marks")

PROVIDER = "claude-code"
MAX_REASON = 2_000  # why a session is stale (or no longer is)
MAX_SUMMARY = 8_000  # a note: what was done
MAX_NEXT_STEPS = 8_000  # a note: what to do next
MAX_REF = 100  # a session id (36 characters) or a prefix of one, as typed
LOG_FIELD = 200  # characters of a string kept in the mark's activity row
MAX_TAG = 40  # characters of a tag
MAX_TAG_WORDS = 16  # tags one mark names
MAX_TAGS = 32  # tags one session holds
MAX_TAG_ENTRIES = 4 * MAX_TAGS  # words the fold remembers per session, untagged ones too
TAG = re.compile(r"[^\W_][\w.+-]{0," + str(MAX_TAG - 1) + "}")
Op = Literal["stale", "unstale", "note", "keep", "unkeep", "tag", "untag"]
OPS = ("stale", "unstale", "note", "keep", "unkeep", "tag", "untag")
TAG_OPS = ("tag", "untag")
By = Literal["agent", "user"]


class Mark(msgspec.Struct, kw_only=True):
    """One line of the file, exactly the spec's row (field order is the wire order)."""

    ts: float
    provider: str = PROVIDER
    id: str
    op: Op
    reason: str | None = None
    successor: str | None = None
    summary: str | None = None
    next_steps: str | None = None
    by: By
    by_session: str | None = None


class TagMark(Mark, kw_only=True):
    """A tag or untag mark: the spec's row, then its words (the other marks stay the spec's row)."""

    tags: list[str]


class _Line(Mark, kw_only=True):
    """A line as the fold reads it: any mark, its words range-checked when it is a tag's."""

    tags: Any = None


class Stale(msgspec.Struct):
    reason: str | None
    successor: str | None
    by: str
    ts: float


class Note(msgspec.Struct):
    summary: str | None
    next_steps: str | None
    ts: float


class Keep(msgspec.Struct):
    """A person's or an agent's word on keeping a session past Claude Code's cleanup: it
    overrides the keep policy either way."""

    keep: bool
    reason: str | None
    by: str
    ts: float


@dataclass(slots=True)
class MarkState:
    stale: Stale | None = None
    note: Note | None = None
    keep: Keep | None = None


def marks_path(project: Project) -> Path:
    return project.state / "session_marks.jsonl"


Span = tuple[float, int, int]  # a mark's ts, and where its line is: (ts, offset, length)


class Folded(msgspec.Struct):
    """The fold of a marks file: per session, where its last stale/unstale mark and its last
    note are. Not their text: with 100,000 marks over 20,000 ids the text would make every
    process load megabytes for the few rows it shows; the lines are read back when asked."""

    stale: dict[str, Span] = msgspec.field(default_factory=dict)
    note: dict[str, Span] = msgspec.field(default_factory=dict)
    keep: dict[str, Span] = msgspec.field(default_factory=dict)
    # Tags are a few short words: the fold holds them, per session {word: (ts, tagged)}.
    tags: dict[str, dict[str, tuple[float, bool]]] = msgspec.field(default_factory=dict)


FOLD_VERSION = 5  # bump when Folded or _apply change meaning: checkpoints are then refolded


def _apply(state: Folded, batch: jsonl.Batch[_Line], path: Path | None = None) -> Folded:
    # a new state: readers keep the old one (a session's tags are copied before they change)
    stale, note, keep, tags = dict(state.stale), dict(state.note), dict(state.keep), dict(state.tags)
    copied: set[str] = set()
    high = clock.latest()
    for mark, (offset, length) in zip(batch.records, batch.spans or (), strict=True):
        if not clock.EARLIEST < mark.ts <= high:  # a mark from the future would win for ever
            clock.event(mark.ts, "a mark's ts", path or "session_marks.jsonl")
            continue
        if mark.op in TAG_OPS:
            words = _fold_words(mark.tags)
            if words:
                if mark.id not in copied:
                    copied.add(mark.id)
                    tags[mark.id] = dict(tags.get(mark.id, {}))
                _fold_tags(tags[mark.id], words, mark.ts, mark.op == "tag")
            continue
        book = note if mark.op == "note" else keep if mark.op in ("keep", "unkeep") else stale
        held = book.get(mark.id)
        # By time, not by place in the file: a fold of older state (another state root's
        # lines) can append a mark after newer ones. Ties go to the later line.
        if held is None or mark.ts >= held[0]:
            book[mark.id] = (mark.ts, offset, length)
    return Folded(stale, note, keep, tags)


def _fold_words(given: Any) -> list[str]:
    """A tag line's words as written by ``write_mark``; a line that is not (hand-edited, too
    many words, a word out of the charset) counts for nothing."""
    if not isinstance(given, list) or not given or len(given) > MAX_TAG_WORDS:
        return []
    return given if all(isinstance(w, str) and TAG.fullmatch(w) and w == w.lower() for w in given) else []


def _fold_tags(held: dict[str, tuple[float, bool]], words: list[str], ts: float, tagged: bool) -> None:
    for word in words:
        was = held.get(word)
        if was is None and len(held) >= MAX_TAG_ENTRIES:
            continue  # bounded whatever the file holds
        if was is None or ts >= was[0]:  # by time; ties go to the later line
            held[word] = (ts, tagged)


def tags_of(held: dict[str, tuple[float, bool]] | None) -> list[str]:
    """The words a session is tagged with now, sorted (at most ``MAX_TAGS``)."""
    return sorted(w for w, (_ts, on) in held.items() if on)[:MAX_TAGS] if held else []


def clean_tags(words: list[str]) -> list[str]:
    """Tags as typed -> as stored (NFC, lower-cased, each once, in order); BadArgument naming the
    first that is not a tag."""
    if not words:
        raise BadArgument("give at least one tag (a word: letters, digits, _ . + -)")
    if len(words) > MAX_TAG_WORDS:
        raise BadArgument(f"too many tags at once: {len(words)}, the limit is {MAX_TAG_WORDS}")
    out: dict[str, None] = {}
    for word in words:
        check_text(word, "a tag", 4 * MAX_TAG)
        tag = unicodedata.normalize("NFC", word.strip()).lower()
        if not TAG.fullmatch(tag):
            raise BadArgument(
                f"{clip(word, 60)!r} is not a tag: one word of at most {MAX_TAG} letters, digits and _ . + -, "
                "starting with a letter or a digit"
            )
        out[tag] = None
    return list(out)


def log_fold(project: Project) -> LogFold[_Line, Folded]:
    path = marks_path(project)
    checkpoint = project.state / "cache" / "marks.fold"
    return fold_for(
        ("marks", str(path)),
        lambda: LogFold(
            "marks", FOLD_VERSION, path, checkpoint, _Line, Folded, Folded, lambda s, b: _apply(s, b, path), spans=True
        ),
    )


_decode_mark = msgspec.json.Decoder(Mark).decode


class MarkBook:
    """The folded state of a project's marks, kept current by reading only new bytes: the
    process's one fold of the file (checkpointed in ``.c3/cache/marks.fold``), so a long
    running server or Hub tails it and a new process starts from the checkpoint.

    Folding keeps, per session, the stale/unstale mark and the note with the greatest ``ts``
    (ties: the later line); the marks themselves are read back only for the sessions asked
    about (``get_many``: one open, one ``pread`` a line).
    """

    def __init__(self, project: Project) -> None:
        self.project = project
        self.fold = log_fold(project)
        self._state = Folded()

    def refresh(self) -> MarkBook:
        self._state = self.fold.refresh()
        return self

    @property
    def skipped(self) -> int:
        return self.fold.skipped

    def ids(self) -> set[str]:
        return self._state.stale.keys() | self._state.note.keys() | self._state.keep.keys()

    def tags(self, session_id: str) -> list[str]:
        """The session's tags, sorted (from the fold alone: no line read)."""
        return tags_of(self._state.tags.get(session_id))

    def tagged(self) -> dict[str, list[str]]:
        """Every session with a tag now, and its tags."""
        return {sid: t for sid, held in self._state.tags.items() if (t := tags_of(held))}

    def stale_ids(self) -> list[str]:
        """The sessions whose last stale/unstale mark may name a successor."""
        return list(self._state.stale)

    def note_ids(self) -> list[str]:
        """The sessions with a note (``get_many`` reads it)."""
        return list(self._state.note)

    def keep_ids(self) -> list[str]:
        """The sessions with a keep or unkeep mark (``get_many`` says which)."""
        return list(self._state.keep)

    def judged(self, session_id: str) -> str | None:
        """What a person or an agent said of this session, from the fold alone (no line read):
        "noted" (a note), "stale" (a stale mark, or the unstale that undid one), else None."""
        if session_id in self._state.note:
            return "noted"
        return "stale" if session_id in self._state.stale else None

    def get(self, session_id: str) -> MarkState | None:
        return self.get_many([session_id]).get(session_id)

    def get_many(self, session_ids: list[str]) -> dict[str, MarkState]:
        """The mark state of each of these sessions that has a mark."""
        state = self._state
        wanted = [sid for sid in session_ids if sid in state.stale or sid in state.note or sid in state.keep]
        if not wanted:
            return {}
        try:
            fd = safefs.open_file(marks_path(self.project), os.O_RDONLY)
        except OSError:
            return {}
        memo = self.fold.memo  # lines already read back, in a long-running process
        try:
            out = {}
            for sid in wanted:
                s = self._read(fd, state.stale.get(sid), sid, memo)
                n = self._read(fd, state.note.get(sid), sid, memo)
                k = self._read(fd, state.keep.get(sid), sid, memo)
                if s is None and n is None and k is None:
                    continue
                out[sid] = MarkState(
                    stale=Stale(s.reason, s.successor, s.by, s.ts) if s is not None and s.op == "stale" else None,
                    note=Note(n.summary, n.next_steps, n.ts) if n is not None else None,
                    keep=Keep(k.op == "keep", k.reason, k.by, k.ts) if k is not None else None,
                )
            return out
        finally:
            os.close(fd)

    @staticmethod
    def _read(fd: int, span: Span | None, sid: str, memo: dict) -> Mark | None:
        if span is None:
            return None
        mark = memo.get(span)
        if mark is None:
            try:
                mark = _decode_mark(os.pread(fd, span[2], span[1]))
            except (OSError, *DECODE_ERRORS):
                return None  # rewritten in its middle since it was folded: the next full fold mends it
            if len(memo) > 10_000:
                memo.clear()
            memo[span] = mark
        return mark if mark.id == sid else None


def write_mark(
    project: Project,
    session_id: str,
    op: str,
    *,
    reason: str | None = None,
    successor: str | None = None,
    summary: str | None = None,
    next_steps: str | None = None,
    by: str = "user",
    by_session: str | None = None,
    tags: list[str] | None = None,
) -> Mark:
    """Validate and append one mark (and its activity row) on ``session_id``, a full id (the
    sessions view resolves what was typed: ``c3async.sessions.act.mark``). ``successor`` is a
    full id too; ``tags`` the words of a tag or untag mark. Raises a C3Error on bad input.

    Once the mark's line is appended the call succeeds: an activity row that cannot be written
    (the log unwritable) is logged as a warning, never reported as a failed mark, which would
    invite the caller to write the mark again."""
    if op not in OPS:
        raise BadArgument(f"unknown mark {op!r}: use {', '.join(OPS)}")
    if by not in ("agent", "user"):
        raise BadArgument(f"by must be 'agent' or 'user', got {by!r}")
    check_mark_text(reason=reason, summary=summary, next_steps=next_steps, successor=successor, ref=session_id)
    if by_session is not None:
        check_text(by_session, "by_session", MAX_REF)
    reason, successor = _clean(reason), (successor or "").strip(" \t") or None  # an id: never strip a newline
    summary, next_steps = _clean(summary), _clean(next_steps)
    if op == "stale" and not reason:
        raise BadArgument("marking a session stale needs a reason (why it should not be resumed)")
    if op == "note" and not (summary or next_steps):
        raise BadArgument("a note needs a summary (what was done) or next steps")
    for name, value in (("session id", session_id), ("successor", successor)):
        if value is not None and not is_session_id(value):
            raise BadArgument(f"the {name} must be a full session id, got {clip(value, 60)!r}")
    if successor is not None:
        if op != "stale":
            raise BadArgument("a successor goes with a stale mark only")
        if successor == session_id:
            raise BadArgument("a session cannot be its own successor")
    if op in TAG_OPS:
        tags = clean_tags(tags or [])
        if op == "tag":
            check_tags(project, session_id, tags)
    elif tags:
        raise BadArgument("tags go with a tag or untag mark only")
    else:
        tags = None
    if op == "note":
        reason = None  # a note's "why" is its next steps
    else:
        summary = next_steps = None
    mark = Mark(
        ts=round(time.time(), 6),
        id=session_id,
        op=cast(Op, op),  # checked against OPS above
        reason=reason,
        successor=successor,
        summary=summary,
        next_steps=next_steps,
        by=cast(By, by),  # checked against agent/user above
        by_session=by_session,
    )
    if tags is not None:
        mark = TagMark(**msgspec.structs.asdict(mark), tags=tags)
    jsonl.append(marks_path(project), mark)
    # From here on the mark is written: nothing may report it as failed.
    # `target`, not `session_id`: a mark is about a session, not activity of it (the liveness
    # fallback reads session_id as "this session did something").
    try:
        activity.record(
            project,
            "session_mark",
            target=session_id,
            op=op,
            by=by,
            by_session=clip(by_session, LOG_FIELD) if by_session else None,
            reason=clip(reason, LOG_FIELD) if reason else None,
            successor=successor,
            tags=tags,
        )
    except Exception as exc:
        log.warning("the %s mark on %s was written, but its activity row was not: %s", op, session_id, exc)
    return mark


def write_keeps(
    project: Project, session_ids: list[str], *, reason: str | None, by: str = "user", by_session: str | None = None
) -> list[Mark]:
    """A keep mark on each of ``session_ids`` (full ids), all in one append, and their activity
    rows in one more: ``keep --expiring`` keeps thousands at once without a write each."""
    if by not in ("agent", "user"):
        raise BadArgument(f"by must be 'agent' or 'user', got {by!r}")
    check_mark_text(reason=reason)
    if by_session is not None:
        check_text(by_session, "by_session", MAX_REF)
    bad = next((sid for sid in session_ids if not is_session_id(sid)), None)
    if bad is not None:
        raise BadArgument(f"the session id must be a full session id, got {clip(bad, 60)!r}")
    if not session_ids:
        return []
    ts, reason = round(time.time(), 6), _clean(reason)
    marks = [
        Mark(ts=ts, id=sid, op="keep", reason=reason, by=cast(By, by), by_session=by_session) for sid in session_ids
    ]
    with jsonl.appending(marks_path(project)) as out:
        out.write(b"".join(jsonl.encode_line(m) for m in marks))
    try:  # written: from here on nothing may report the marks as failed (as ``write_mark``)
        rows = [
            {"ts": round(ts, 3), "kind": "session_mark", "target": sid, "op": "keep", "by": by}
            | ({"by_session": clip(by_session, LOG_FIELD)} if by_session else {})
            | ({"reason": clip(reason, LOG_FIELD)} if reason else {})
            for sid in session_ids
        ]
        with jsonl.appending(activity.activity_path(project)) as out:
            out.write(b"".join(jsonl.encode_line(row) for row in rows))
    except Exception as exc:
        log.warning("%d keep marks were written, but their activity rows were not: %s", len(marks), exc)
    return marks


def check_tags(project: Project, session_id: str, adding: list[str]) -> None:
    """Refuse tags that would give the session more than ``MAX_TAGS`` (two writers at once may
    pass it by a few: a listing shows the first ``MAX_TAGS``)."""
    held = MarkBook(project).refresh().tags(session_id)
    total = len(set(held) | set(adding))
    if total > MAX_TAGS:
        raise BadArgument(
            f"{session_id} would have {total} tags, the limit is {MAX_TAGS}: untag some first "
            f"(it has {', '.join(held[:8])}{' ...' if len(held) > 8 else ''})"
        )


def check_mark_text(
    *,
    reason: str | None = None,
    summary: str | None = None,
    next_steps: str | None = None,
    successor: str | None = None,
    ref: str | None = None,
) -> None:
    """The checks of a mark's text that need no file (length, NUL, lone surrogates): the MCP
    server runs them before it logs the call, ``write_mark`` before it writes anything."""
    check_text(reason, "reason", MAX_REASON)
    check_text(summary, "summary", MAX_SUMMARY)
    check_text(next_steps, "next_steps", MAX_NEXT_STEPS)
    check_text(successor, "successor", MAX_REF)
    check_text(ref, "the session id", MAX_REF)


def _clean(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return value or None
