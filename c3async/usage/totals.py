"""What the accountant last wrote: each host session's newest row of ``.c3/session_stats.jsonl``.

Rows hold running totals, so a session's newest row (by time, not by place: rows folded in from
a worktree's old state can follow newer ones) is its total. The file grows by a row for every
session whose totals changed at every run (a live session: one a minute), so it is folded as the
marks and the activity log are (``folds.LogFold``): a long-running process (the server, the Hub)
keeps the fold in memory and reads only the rows appended since; a new process starts from the
checkpoint ``.c3/cache/session_stats.fold``. A listing reads it without importing the
accountant (its reader), and never runs it.

Rows keep each model's tokens per kind (``models``), not a cost: every report prices them with
the price table as it is then (``cost_of``), so a price added to ``prices.json`` re-prices what
was counted before, and no transcript is read again for it. Rows written before (no ``models``)
keep the cost they stored. A report names a session ``id`` (``StatsRow``), as every listing
does; the rows on disk keep ``session_id``, so files written before read as they did.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Annotated, NamedTuple

import msgspec

from ..ground import clock, jsonl
from ..ground.folds import LogFold, fold_for
from ..ground.project import Project
from .prices import PriceTable, current_prices

__all__ = (
    "Cost",
    "ModelTokens",
    "SessionTotals",
    "StatsRow",
    "cost_of",
    "latest",
    "latest_totals",
    "price_models",
    "priced",
    "stats_fold",
    "stats_path",
    "stats_rows",
)

# bump when SessionTotals or _apply change meaning: checkpoints are then refolded
FOLD_VERSION = 3  # 2: tokens per model and kind (``models``), priced at report time; 3: times checked

# A sum of token counts or of responses, and of USD, as every row is decoded: a negative one is
# no sum, and a bigger one than 64 bits no count (nor could a checkpoint hold it).
Total = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
USD = Annotated[float, msgspec.Meta(ge=0)]
Kinds = tuple[Total, Total, Total, Total, Total]  # input, output, cache write 5m, cache write 1h, cache read
NO_TOKENS: Kinds = (0, 0, 0, 0, 0)


class ModelTokens(msgspec.Struct, omit_defaults=True):
    """One model's share of a session, as much as pricing it later needs. ``tokens``: each kind
    (``Kinds``) summed over the responses that recorded no cost of their own (``responses``);
    ``above_200k``: of those, the part of each kind above 200k tokens in one response (billed at
    the long-context rate where a family has one; nearly always zeros). ``recorded_usd``: what
    the responses that recorded a cost (``costUSD``, older Claude Code; ``recorded`` of them)
    said they cost, which wins over the table, as in ccusage."""

    tokens: Kinds = NO_TOKENS
    above_200k: Kinds = NO_TOKENS
    responses: Total = 0
    recorded_usd: USD = 0.0
    recorded: Total = 0


class SessionTotals(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One row of ``.c3/session_stats.jsonl``: a session's running totals. ``cost_usd``,
    ``cost_by_model`` and ``unknown_models`` are stored only by rows written before ``models``
    was; ``priced`` fills them in from the price table of the moment."""

    session_id: str
    ts: float = 0.0  # when this row was written
    title: str | None = None
    input: Total = 0
    output: Total = 0
    cache_write_5m: Total = 0
    cache_write_1h: Total = 0
    cache_read: Total = 0
    cost_usd: USD = 0.0
    cost_by_model: dict[str, USD] = msgspec.field(default_factory=dict)
    tokens_by_model: dict[str, Total] = msgspec.field(default_factory=dict)
    unknown_models: list[str] = msgspec.field(default_factory=list)
    responses: Total = 0
    first_ts: str | None = None
    last_ts: str | None = None
    models: dict[str, ModelTokens] = msgspec.field(default_factory=dict)


class Cost(NamedTuple):
    """A session's cost under one price table: of the priced models (``usd``, and per model),
    and the models with no price, whose tokens are counted but not in ``usd``."""

    usd: float
    by_model: dict[str, float]
    unpriced: list[str]


def cost_of(t: SessionTotals, table: PriceTable) -> Cost:
    if not t.models:  # written before rows kept tokens per model: the cost it stored
        return Cost(t.cost_usd, t.cost_by_model, t.unknown_models)
    return price_models(t.models, table)


def price_models(models: Mapping[str, ModelTokens], table: PriceTable) -> Cost:
    """The cost of each model's tokens under ``table`` (a session's, a day's: sums price as the
    responses would one by one, ``Price.usd``); a model with no price is named, not priced."""
    total = 0.0
    by_model: dict[str, float] = {}
    unpriced: list[str] = []
    for model, m in models.items():
        usd = m.recorded_usd
        if m.responses:
            price = table.find(model)
            if price is not None:
                usd += price.usd(m.tokens, m.above_200k)
            else:
                unpriced.append(model)
                if not m.recorded:
                    continue
        by_model[model] = round(usd, 6)
        total += usd
    return Cost(round(total, 6), by_model, unpriced)


def priced(t: SessionTotals, table: PriceTable) -> SessionTotals:
    """A copy of ``t`` with its cost fields worked out from ``table``."""
    c = cost_of(t, table)
    return msgspec.structs.replace(t, cost_usd=c.usd, cost_by_model=c.by_model, unknown_models=c.unpriced)


class StatsRow(msgspec.Struct):
    """A session's tokens and cost as the reports give them (``c3async usage --by session --json``, the
    ``c3_status`` sessions view): ``id`` and ``project`` as in every listing; ``cost_usd`` is
    of the priced models, ``unpriced_models`` the models whose tokens are counted but have no
    price (``prices.json`` gives them one); ``as_of``: when the accountant counted these."""

    id: str
    project: str  # the root, as every listing prints it
    title: str | None
    input: int
    output: int
    cache_write_5m: int
    cache_write_1h: int
    cache_read: int
    cost_usd: float
    unpriced_models: list[str]
    responses: int
    first_ts: str | None
    last_ts: str | None
    cost_by_model: dict[str, float]
    tokens_by_model: dict[str, int]
    as_of: float
    # its transcript is gone (Claude Code's cleanup) and the archive does not hold it: what it
    # spent was spent, so it stays in the report and in every total, as ccusage's ledger keeps it
    deleted: bool = False


def stats_rows(
    project: Project, totals: Mapping[str, SessionTotals], table: PriceTable, gone: Collection[str] = ()
) -> list[StatsRow]:
    """``totals`` as report rows, priced with ``table``, the most recently active first;
    ``gone``: the sessions whose transcripts are deleted (``account.deleted``)."""
    rows = []
    for t in totals.values():
        c = cost_of(t, table)
        rows.append(
            StatsRow(
                t.session_id,
                project.root,
                t.title,
                t.input,
                t.output,
                t.cache_write_5m,
                t.cache_write_1h,
                t.cache_read,
                c.usd,
                list(c.unpriced),
                t.responses,
                t.first_ts,
                t.last_ts,
                dict(c.by_model),
                dict(t.tokens_by_model),
                t.ts,
                t.session_id in gone,
            )
        )
    rows.sort(key=lambda r: r.last_ts or "", reverse=True)
    return rows


class Latest(msgspec.Struct):
    """The fold's state: each session's newest row."""

    sessions: dict[str, SessionTotals] = msgspec.field(default_factory=dict)


def stats_path(project: Project) -> Path:
    return project.state / "session_stats.jsonl"


def _apply(old: Latest, batch: jsonl.Batch[SessionTotals], path: Path | None = None) -> Latest:
    """A new state (readers in other threads keep the old one). A row whose time is out of
    range (``ground.clock``) is skipped: from the future, it would be the session's total for
    ever; its first and last times are dropped when out of range. (Counts out of range never
    decode: ``Total``.)"""
    latest = dict(old.sessions)
    high = clock.latest()
    earliest, last = clock.iso_window()
    where = path or "session_stats.jsonl"
    for row in batch.records:
        if not clock.EARLIEST < row.ts <= high:
            clock.event(row.ts, "a stats row's ts", where)
            continue
        for name in ("first_ts", "last_ts"):
            value = getattr(row, name)
            if value is not None and not earliest < value <= last:
                clock.event_iso(value, "a stats row's time", where)
                setattr(row, name, None)
        held = latest.get(row.session_id)
        if held is None or row.ts >= held.ts:
            latest[row.session_id] = row
    return Latest(latest)


def stats_fold(project: Project) -> LogFold[SessionTotals, Latest]:
    path = stats_path(project)
    checkpoint = project.state / "cache" / "session_stats.fold"
    return fold_for(
        ("session_stats", str(path)),
        lambda: LogFold(
            "session_stats",
            FOLD_VERSION,
            path,
            checkpoint,
            SessionTotals,
            Latest,
            Latest,
            lambda s, b: _apply(s, b, path),
        ),
    )


def latest(project: Project) -> Mapping[str, SessionTotals]:
    """Each session's newest row, as of now, shared with other readers: do not change it."""
    return stats_fold(project).refresh().sessions


def latest_totals(project: Project) -> dict[str, SessionTotals]:
    """Each session's newest row, priced with the price table as it is now, as copies the
    caller may change. Raises PricesError for a ``prices.json`` that is not a price table."""
    table = current_prices()
    return {sid: priced(row, table) for sid, row in latest(project).items()}
