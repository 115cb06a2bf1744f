"""The incremental token and cost accountant.

Every transcript of the project (sessions, and sub-agent files, which count toward their parent
session) is read from the byte offset where the last run stopped: transcripts are append-only,
so a run costs only new bytes; a file that shrank or was replaced is read again from 0. Only
lines holding ``"usage":{`` are decoded.

One API response is written as several lines (one per content block) with the same
``message.id`` and ``requestId`` and the same usage: it counts once. Among copies the best is
kept, as ccusage keeps it (a main-chain copy over a sidechain replay, then the higher token
total, which drops a streaming partial); lines with no ``message.id`` are never merged.
Results go to ``.c3/session_stats.jsonl``: one row of running totals per host session whose
totals changed; the last row of a session is its total.

Only regular files are read, each opened without following a symlink and without blocking (a
FIFO named ``x.jsonl`` under ``subagents/`` must not hang ``c3async stats`` or a server's
shutdown); the sub-agent walk never follows a symlinked folder (no loops, nothing outside the
session's folder), and an entry that cannot be examined costs that entry only.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec

from .. import jsonl, safefs
from ..catalog import cache as catalog_cache
from ..catalog.listing import is_session_id
from ..catalog.locate import locate
from ..catalog.scan import cache_path as catalog_cache_path
from ..errors import DECODE_ERRORS
from ..jsondoc import write_atomic
from ..paths import project_state
from ..safefs import open_regular, pread_all
from .prices import TIER_TOKENS, Price, PriceTable, load_prices

__all__ = ("Result", "SessionTotals", "account", "session_titles", "stats_path")

_USAGE = b'"usage":{'
STATE_VERSION = 1
MAX_DEPTH = 16  # sub-agent folders nest a level or two; deeper is not Claude Code's


class _CacheCreation(msgspec.Struct):
    ephemeral_5m_input_tokens: int = 0
    ephemeral_1h_input_tokens: int = 0


class _Usage(msgspec.Struct):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation: _CacheCreation | None = None


class _Msg(msgspec.Struct):
    id: str | None = None
    model: str | None = None
    usage: _Usage | None = None


class _Line(msgspec.Struct):
    sessionId: str | None = None
    timestamp: str | None = None
    requestId: str | None = None
    isSidechain: bool | None = None
    costUSD: float | None = None
    message: _Msg | None = None


_decode_line = msgspec.json.Decoder(_Line).decode

# tokens tuple: (input, output, cache_write_5m, cache_write_1h, cache_read)
Tokens = tuple[int, int, int, int, int]


class _Entry(msgspec.Struct, array_like=True):
    """One counted API response (the kept copy of a deduplicated one)."""

    file: str
    session: str
    model: str
    tokens: Tokens
    cost: float | None  # None: unpriced model
    sidechain: bool
    ts: str | None


class _FileState(msgspec.Struct):
    offset: int = 0
    ino: int = 0
    session: str | None = None
    loose: list[_Entry] = msgspec.field(default_factory=list)  # responses with no message.id


class _State(msgspec.Struct):
    version: int = STATE_VERSION
    files: dict[str, _FileState] = msgspec.field(default_factory=dict)
    seen: dict[str, _Entry] = msgspec.field(default_factory=dict)  # "msg_id:request_id" -> kept copy


class SessionTotals(msgspec.Struct, kw_only=True):
    session_id: str
    ts: float = 0.0  # when this row was written
    title: str | None = None
    input: int = 0
    output: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    cache_read: int = 0
    cost_usd: float = 0.0
    cost_by_model: dict[str, float] = msgspec.field(default_factory=dict)
    tokens_by_model: dict[str, int] = msgspec.field(default_factory=dict)
    unknown_models: list[str] = msgspec.field(default_factory=list)
    responses: int = 0
    first_ts: str | None = None
    last_ts: str | None = None


@dataclass
class Result:
    totals: dict[str, SessionTotals]
    files: int
    files_read: int
    bytes_read: int
    changed: list[str]
    seconds: float


def stats_path(project: str) -> Path:
    return project_state(project) / "session_stats.jsonl"


def _state_path(project: str) -> Path:
    return project_state(project) / "cache" / "usage.json"


def _tier(tokens: int, base: float, high: float | None) -> float:
    if high is None or tokens <= TIER_TOKENS:
        return tokens * base
    return TIER_TOKENS * base + (tokens - TIER_TOKENS) * high


def cost(price: Price, t: Tokens) -> float:
    """USD for one response: each kind of token priced, above 200k at the long-context rate."""
    hi = price.above_200k
    return (
        _tier(t[0], price.input, hi.input if hi else None)
        + _tier(t[1], price.output, hi.output if hi else None)
        + _tier(t[2], price.w5(), hi.w5() if hi else None)
        + _tier(t[3], price.w1h(), hi.w1h() if hi else None)
        + _tier(t[4], price.read(), hi.read() if hi else None)
    ) / 1_000_000


def _files(project: str) -> Iterator[tuple[Path, str | None]]:
    """(transcript, the session it counts toward; None: read it from its lines)."""
    for folder, _cwd in locate(project).folders:
        for e in _entries(folder):
            try:
                if e.is_file(follow_symlinks=False):  # never a symlink, a FIFO, a socket...
                    if not e.name.endswith(".jsonl"):
                        continue
                    if is_session_id(e.name[:-6]):
                        yield Path(e.path), e.name[:-6].lower()
                    elif e.name.startswith("agent-"):  # a legacy sub-agent file beside the sessions
                        yield Path(e.path), None
                elif e.is_dir(follow_symlinks=False) and is_session_id(e.name):
                    for path in sorted(_subagent_files(Path(e.path, "subagents"))):
                        yield path, e.name.lower()
            except OSError:
                continue  # vanished, or cannot be examined: this entry only


def _entries(folder: str | os.PathLike[str]) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as it:
            return list(it)
    except OSError:
        return []


def _subagent_files(folder: Path, depth: int = 0) -> Iterator[Path]:
    """Every ``*.jsonl`` regular file under ``folder`` (not a workflow's ``journal.jsonl``),
    walking real folders only: a symlinked folder is not followed (so no loop, and nothing
    outside the session's folder is read), and ``folder`` itself must not be a symlink."""
    if depth == 0:
        try:
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                return
        except OSError:
            return
    for e in _entries(folder):
        try:
            if e.is_file(follow_symlinks=False):
                if e.name.endswith(".jsonl") and e.name != "journal.jsonl":
                    yield Path(e.path)
            elif e.is_dir(follow_symlinks=False) and depth < MAX_DEPTH:
                yield from _subagent_files(Path(e.path), depth + 1)
        except OSError:
            continue


def _better(new: _Entry, old: _Entry) -> bool:
    if old.sidechain != new.sidechain:
        return not new.sidechain
    return sum(new.tokens) > sum(old.tokens)


def _scan_file(path: Path, fs: _FileState, state: _State, prices: PriceTable, unknown: set[str]) -> int:
    """Account the new complete lines of one file; returns the bytes read."""
    try:
        # Non-blocking and no-follow, then fstat: a FIFO or a symlink put here (even after the
        # listing looked) is refused at once instead of hanging the accountant.
        fd, st = open_regular(path)
    except OSError:
        return 0
    try:
        if st.st_ino != fs.ino or st.st_size < fs.offset:
            _forget(str(path), fs, state)
            fs.ino = st.st_ino
        if st.st_size == fs.offset:
            return 0
        data = pread_all(fd, fs.offset, st.st_size - fs.offset)
    except OSError:
        return 0
    finally:
        os.close(fd)
    end = data.rfind(b"\n") + 1  # the bytes after the last newline are a line still being written
    key_path = str(path)
    pos = 0
    while (pos := data.find(_USAGE, pos, end)) >= 0:
        start = data.rfind(b"\n", 0, pos) + 1
        stop = data.find(b"\n", pos, end)
        pos = stop + 1
        try:
            line = _decode_line(data[start:stop])
        except DECODE_ERRORS:  # malformed, or nested deeper than the recursion limit
            continue
        msg = line.message
        if msg is None or msg.usage is None or not msg.model or msg.model == "<synthetic>":
            continue
        session = fs.session or line.sessionId
        if not session:
            continue
        u = msg.usage
        cc = u.cache_creation
        tokens: Tokens = (
            u.input_tokens,
            u.output_tokens,
            cc.ephemeral_5m_input_tokens if cc is not None else u.cache_creation_input_tokens,
            cc.ephemeral_1h_input_tokens if cc is not None else 0,
            u.cache_read_input_tokens,
        )
        price = prices.find(msg.model)
        if line.costUSD is not None:
            usd: float | None = line.costUSD  # a recorded cost wins, as in ccusage's auto mode
        elif price is None:
            usd = None
            unknown.add(msg.model)
        else:
            usd = cost(price, tokens)
        entry = _Entry(key_path, session.lower(), msg.model, tokens, usd, bool(line.isSidechain), line.timestamp)
        if not msg.id:
            fs.loose.append(entry)
            continue
        key = f"{msg.id}:{line.requestId or ''}"
        old = state.seen.get(key)
        if old is None or _better(entry, old):
            state.seen[key] = entry
    fs.offset += end
    return len(data)


def _forget(path: str, fs: _FileState, state: _State) -> None:
    """A file that shrank or was replaced: drop what it contributed, read it again from 0."""
    for key in [k for k, e in state.seen.items() if e.file == path]:
        del state.seen[key]
    fs.loose.clear()
    fs.offset = 0


def session_titles(project: str) -> dict[str, str]:
    """Session titles from the catalog's cache (no transcript is read for them)."""
    out = {}
    for path, rec in catalog_cache.load(catalog_cache_path(project)).items():
        title, _ = rec.title()
        if title:
            out[Path(path).stem.lower()] = title
    return out


def _totals(state: _State, titles: dict[str, str], now: float) -> dict[str, SessionTotals]:
    totals: dict[str, SessionTotals] = {}
    entries = list(state.seen.values()) + [e for fs in state.files.values() for e in fs.loose]
    for e in entries:
        t = totals.get(e.session)
        if t is None:
            t = totals[e.session] = SessionTotals(session_id=e.session, ts=now, title=titles.get(e.session))
        t.input += e.tokens[0]
        t.output += e.tokens[1]
        t.cache_write_5m += e.tokens[2]
        t.cache_write_1h += e.tokens[3]
        t.cache_read += e.tokens[4]
        t.responses += 1
        t.tokens_by_model[e.model] = t.tokens_by_model.get(e.model, 0) + sum(e.tokens)
        if e.cost is None:
            if e.model not in t.unknown_models:
                t.unknown_models.append(e.model)
        else:
            t.cost_usd += e.cost
            t.cost_by_model[e.model] = t.cost_by_model.get(e.model, 0.0) + e.cost
        if e.ts:
            t.first_ts = e.ts if t.first_ts is None or e.ts < t.first_ts else t.first_ts
            t.last_ts = e.ts if t.last_ts is None or e.ts > t.last_ts else t.last_ts
    for t in totals.values():
        t.cost_usd = round(t.cost_usd, 6)
        t.cost_by_model = {m: round(c, 6) for m, c in t.cost_by_model.items()}
    return totals


def _load_state(path: Path) -> _State:
    try:
        state = msgspec.json.decode(safefs.read_bytes(path), type=_State)  # never a link or a FIFO
    except (OSError, *DECODE_ERRORS):
        return _State()
    return state if state.version == STATE_VERSION else _State()


def latest_totals(project: str) -> dict[str, SessionTotals]:
    """Each session's newest row of ``session_stats.jsonl`` (rows hold running totals). By time,
    not by place: rows folded in from a worktree's old state can follow newer ones."""
    latest: dict[str, SessionTotals] = {}
    for row in jsonl.read_all(stats_path(project), SessionTotals).records:
        held = latest.get(row.session_id)
        if held is None or row.ts >= held.ts:
            latest[row.session_id] = row
    return latest


def _same(old: SessionTotals, new: SessionTotals) -> bool:
    """Nothing worth a new row: the same totals, and no title learnt since."""
    if new.title and new.title != old.title:
        return False
    return msgspec.structs.replace(old, ts=0.0, title=None) == msgspec.structs.replace(new, ts=0.0, title=None)


def account(project: str, *, write: bool = True) -> Result:
    """Bring the project's usage up to date; append a stats row for each session that changed."""
    started = time.perf_counter()
    prices = load_prices()
    state_file = _state_path(project)
    state = _load_state(state_file)
    unknown: set[str] = set()  # models no price matched (they show per session too)
    present: set[str] = set()
    read_files = read_bytes = 0
    for path, session in _files(project):
        key = str(path)
        present.add(key)
        fs = state.files.get(key)
        if fs is None:
            fs = state.files[key] = _FileState(session=session)
        n = _scan_file(path, fs, state, prices, unknown)
        if n:
            read_files += 1
            read_bytes += n
    # A transcript deleted since (Claude Code's 30-day cleanup) keeps its place in the state:
    # what it spent was spent.
    totals = _totals(state, session_titles(project), time.time())
    changed = []
    if write:
        before = latest_totals(project)
        for sid, t in sorted(totals.items(), key=lambda kv: kv[1].last_ts or ""):
            if sid not in before or not _same(before[sid], t):
                jsonl.append(stats_path(project), t)
                changed.append(sid)
        try:
            write_atomic(state_file, msgspec.json.encode(state), fsync=False)
        except OSError:
            pass  # the state is a cache: the next run reads from 0
    return Result(totals, len(present), read_files, read_bytes, changed, time.perf_counter() - started)
