"""A session row as the CLI, the MCP tools and the Hub show it: a catalog record joined with
marks, liveness, C3 records, tasks, hints and token totals (``view`` fills them in). Until a source has
something to say, its keys are present and empty, so scripts can rely on the shape.
"""

from __future__ import annotations

import time
from pathlib import Path

import msgspec

from ..catalog.accounts import account_name
from ..catalog.locate import config_home
from ..catalog.scan import Session
from ..ground.clock import clamp_ns, parse_iso
from ..stores.marks import Note, Stale
from .resume import ago, resume_command

__all__ = (
    "Chain",
    "DecisionLink",
    "Links",
    "Places",
    "Row",
    "RowTokens",
    "SnapshotLink",
    "TaskLink",
    "age",
    "resume_command",
    "to_row",
)


class TaskLink(msgspec.Struct):
    id: str
    title: str
    status: str


class DecisionLink(msgspec.Struct):
    id: str
    text: str
    ts: float


class SnapshotLink(msgspec.Struct):
    summary: str
    ts: float


class Links(msgspec.Struct):
    tasks: list[TaskLink] = msgspec.field(default_factory=list)
    decisions: list[DecisionLink] = msgspec.field(default_factory=list)
    snapshot: SnapshotLink | None = None


class Chain(msgspec.Struct):
    """The whole chain around one session (a detail's): every session before and after it,
    nearest first, reached through the rows' ``chain_prev`` and ``chain_next``."""

    predecessors: list[str] = msgspec.field(default_factory=list)
    successors: list[str] = msgspec.field(default_factory=list)


class RowTokens(msgspec.Struct):
    """A session's tokens as the accountant last wrote them (``.c3/session_stats.jsonl``; its
    sub-agents count toward it). ``cache_write``: 5-minute and 1-hour cache writes together.
    ``as_of``: when the accountant wrote these (epoch seconds)."""

    input: int
    output: int
    cache_write: int
    cache_read: int
    total: int
    as_of: float = 0.0


class Row(msgspec.Struct):
    id: str
    title: str  # a custom or ai title is cut to PROMPT_CAP characters, as prompts are (whole in a detail)
    title_truncated: bool
    title_source: str | None
    first_prompt: str | None
    first_prompt_truncated: bool
    last_prompt: str | None
    last_prompt_truncated: bool
    branch: str | None
    cwd: str
    project: str
    created_at: str | None
    last_activity: str | None
    mtime: str
    mtime_ns: int  # exact, for ordering (mtime is cut to milliseconds)
    size: int
    user_turns: int
    user_turns_exact: bool
    began_with_clear: bool
    entrypoint: str | None
    path: str
    resume: str
    live: bool = False
    mcp_count: int = 0
    state: str | None = None  # busy, idle or waiting, from Claude Code's registry (None: not known)
    state_since: str | None = None  # ISO 8601, when the state began
    hints: list[str] = msgspec.field(default_factory=list)
    stale: Stale | None = None
    note: Note | None = None
    links: Links = msgspec.field(default_factory=Links)
    marked: bool = False  # any mark at all (stale, unstale or note): "likely" skips these
    tags: list[str] = msgspec.field(default_factory=list)  # a person's or an agent's words for it, sorted
    # The chain's neighbours, the sessions just before and just after this one (a /clear, a plan
    # handoff, a stale mark's successor, a fork): a row names its own, so a listing grows with
    # its rows whatever the chain's length. A detail has the whole chain (``Detail.chain``).
    chain_prev: list[str] = msgspec.field(default_factory=list)
    chain_next: list[str] = msgspec.field(default_factory=list)
    cwd_gone: bool = False  # the folder it ran in (a removed worktree) no longer exists
    tokens: RowTokens | None = None  # None: not accounted yet (the accountant has not run since)
    # priced when listed, from the price table of the moment: the cost of the priced models,
    # and the models whose tokens count but have no price (not in ``cost_usd``); None as tokens
    cost_usd: float | None = None
    unpriced_models: list[str] = msgspec.field(default_factory=list)
    kept: bool = False  # preserved past Claude Code's cleanup (a keep mark, or the keep policy)
    kept_by: str | None = None  # "mark", or "policy: noted|linked|snapshot|all"
    archived: bool = False  # Claude Code deleted its transcript: this row is read from the archive
    expires_in_days: int | None = None  # unkept and within a week of Claude Code's cleanup
    forked_from: str | None = None  # the session this one is a fork of (``sessions.forks``)
    forks: list[str] = msgspec.field(default_factory=list)  # the sessions forked from this one
    # the Claude Code root (config dir) that holds its transcript (None: read from the archive),
    # and the login it ran under (the account's e-mail where that root says, else its uuid)
    root: str | None = None
    account: str | None = None


def age(iso: str | None, now: float) -> str:
    """How long ago an ISO time was, in the largest whole unit: 3d, 5h, 12m, 40s ("?" if unknown)."""
    return ago(parse_iso(iso), now)


def iso(ns: int) -> str:
    """Epoch nanoseconds as ISO 8601 UTC with milliseconds, as transcripts write times (within
    1970 .. 2262, ``clock.clamp_ns``: every platform's gmtime shows those)."""
    secs, rest = divmod(clamp_ns(ns), 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{rest // 1_000_000:03d}Z"


class Places:
    """Where each transcript folder of a listing is: its Claude Code root (None for the
    archive's), and that root again when it is not the default one (claude must be told of it).
    Worked out once a folder, and the login's name once a root and account: ``to_row`` runs for
    every row of every listing."""

    def __init__(self) -> None:
        self.default = config_home()
        self.held: dict[Path, tuple[str | None, str | None]] = {}
        self.names: dict[tuple[str | None, str], str] = {}

    def of(self, folder: Path) -> tuple[str | None, str | None]:
        place = self.held.get(folder)
        if place is None:
            projects = folder.parent
            root = projects.parent if projects.name == "projects" else None
            place = self.held[folder] = (
                str(root) if root is not None else None,
                str(root) if root is not None and root != self.default else None,
            )
        return place

    def account(self, root: str | None, account: str) -> str:
        name = self.names.get((root, account))
        if name is None:
            name = self.names[(root, account)] = account_name(root, account)
        return name


def to_row(session: Session, places: Places | None = None) -> Row:
    rec, cand = session.record, session.candidate
    cwd = rec.cwd or session.project
    title, source = rec.title()
    places = places or Places()
    root, elsewhere = places.of(cand.folder)
    # Positional, in field order: this runs for every row of every listing.
    row = Row(
        cand.session_id,
        title or cand.session_id[:8],
        rec.title_truncated(),
        source,
        rec.first_prompt,
        rec.first_prompt_truncated,
        rec.last_prompt,
        rec.last_prompt_truncated,
        rec.branch,
        cwd,
        session.project,
        rec.created_at,
        rec.last_activity,
        iso(cand.mtime_ns),
        cand.mtime_ns,
        cand.size,
        rec.user_turns,
        rec.user_turns_exact,
        rec.began_with_clear,
        rec.entrypoint,
        cand.path,
        resume_command(cwd, cand.session_id, config_dir=elsewhere),
    )
    row.root = root
    row.account = places.account(root, rec.account) if rec.account else None
    return row
