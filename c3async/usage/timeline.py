"""Usage over time: what the accountant counted, summed per quarter hour, session and model.

``c3async usage`` reports by day, week, month and 5-hour window without reading a transcript
or the accountant's state (a mebibyte per 200 sessions, every response in it): each pass that
writes totals also writes ``.c3/cache/usage_timeline.msgpack``, one row (``Slot``) per quarter
hour, session and model with the tokens of each kind, the responses and the times of the first
and last of them. A quarter hour, because every time zone's offset from UTC is a whole number
of them: a day or a month in any zone is a whole number of slots, so daily totals come out
exactly as a reader of every response would make them. The first and last times let the 5-hour
windows follow ccusage's rule (a gap of over 5 hours between responses starts a new one).

A session the accountant's state no longer holds (Claude Code deleted its transcript and the
state was rebuilt since, or a worktree's rows folded in) keeps its total in the stats log: it
is placed whole at its last response (``whole``), so what it spent stays counted.

The file is a cache: another format, a damaged or missing file, is rebuilt by the next pass.
It carries ``stamp``, what the pass read (every transcript's size and time, the catalog's
cache, the state and stats files as it left them): while they are the same, nothing new is to
be counted, and a pass costs a ``stat`` per transcript (``account.account_projects``'s
``only_changed``). It carries the usage-limit refusals the transcripts recorded too (the newest
``reader.MAX_REFUSALS``), for the reports of the windows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import msgspec

from ..ground import safefs
from ..ground.errors import DECODE_ERRORS
from ..ground.jsondoc import write_atomic
from ..ground.project import Project
from .reader import Refusal
from .totals import NO_TOKENS, USD, Kinds, ModelTokens, Total

__all__ = ("SLOT_S", "Slot", "Timeline", "load", "path", "save")

VERSION = 1
SLOT_S = 900  # a quarter hour
MAX_BYTES = 1 << 30  # a cache of ours: a gigabyte would be 10 million rows

# Times as every decode checks them: after 1970 and before the year 10000 (the event range of
# ``ground.clock`` is narrower, and is checked where the times are read from transcripts).
Seconds = Annotated[float, msgspec.Meta(ge=0, le=253_402_300_799)]
SlotIndex = Annotated[int, msgspec.Meta(ge=-1, le=253_402_300_799 // SLOT_S)]


class Slot(msgspec.Struct, array_like=True, gc=False):
    """One quarter hour of one session's use of one model: ``tokens``, ``above_200k``,
    ``responses``, ``recorded_usd`` and ``recorded`` as ``totals.ModelTokens`` has them, and the
    tokens of the responses that recorded their own cost (``recorded_tokens``)."""

    slot: SlotIndex  # quarter hours since 1970 (UTC); -1: no usable time
    session: str
    model: str
    tokens: Kinds = NO_TOKENS
    above_200k: Kinds = NO_TOKENS
    responses: Total = 0
    recorded_usd: USD = 0.0
    recorded: Total = 0
    recorded_tokens: Kinds = NO_TOKENS
    first: Seconds = 0.0  # its first and last response (0: no usable time)
    last: Seconds = 0.0
    whole: bool = False  # a session's whole usage from the stats log, at its last response

    def model_tokens(self) -> ModelTokens:
        return ModelTokens(self.tokens, self.above_200k, self.responses, self.recorded_usd, self.recorded)

    def all_tokens(self) -> tuple[int, int, int, int, int]:
        t, r = self.tokens, self.recorded_tokens
        return (t[0] + r[0], t[1] + r[1], t[2] + r[2], t[3] + r[3], t[4] + r[4])


class Timeline(msgspec.Struct):
    version: int = VERSION
    stamp: str = ""
    written: Seconds = 0.0
    slots: list[Slot] = msgspec.field(default_factory=list)
    titles: dict[str, str] = msgspec.field(default_factory=dict)
    refusals: list[Refusal] = msgspec.field(default_factory=list)  # usage-limit refusals, the newest


_decoder = msgspec.msgpack.Decoder(Timeline)
_encoder = msgspec.msgpack.Encoder()


def path(project: Project) -> Path:
    return project.state / "cache" / "usage_timeline.msgpack"


def load(project: Project) -> Timeline | None:
    """The project's timeline as the last pass wrote it; None when there is none to trust (never
    written, another version, damaged, not a regular file: the next pass writes it again)."""
    try:
        data = safefs.read_bytes(path(project), limit=MAX_BYTES)
        found = _decoder.decode(data)
    except (OSError, *DECODE_ERRORS):
        return None
    return found if found.version == VERSION else None


def save(project: Project, timeline: Timeline) -> None:
    """Write it in place of the last (a cache: a failure costs the next report a pass)."""
    try:
        write_atomic(path(project), _encoder.encode(timeline), fsync=False)
    except OSError:
        pass
