"""What one window's status line says: this session's mark or note, who waits for you in the
other windows, and the account's binding rate-limit window.

Claude Code runs the status-line command after each response of every window (and every
``refreshInterval`` seconds), so this reads only what it must: Claude Code's registry of running
processes (``live.running``: no catalog, no listing), the tail of the rate-limit log, and the
marks of this session's project when that project has a marks log (a project c3async was never
used in gets no ``.c3``). Every value read from Claude Code's JSON is range-checked; what fails
a check is left out, never shown.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..usage import ratelimits

__all__ = ("Facts", "Waiting", "facts", "record_limits")

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
MAX_PATH = 4096


@dataclass(frozen=True, slots=True)
class Waiting:
    """A session waiting for you in another window."""

    session_id: str
    label: str  # its project folder's name (or its name, when it has no cwd)
    since: float | None  # epoch seconds


@dataclass(slots=True)
class Facts:
    mark: str | None = None  # "stale" or "note"
    mark_text: str | None = None  # the note's summary, or the stale mark's reason
    waiting: list[Waiting] = field(default_factory=list)  # the longest waiting first
    windows: dict[str, ratelimits.Sample] = field(default_factory=dict)  # current, by window

    def binding(self) -> ratelimits.Sample | None:
        """The window nearest its limit (a tie: the one that resets last)."""
        if not self.windows:
            return None
        return max(self.windows.values(), key=lambda s: (s.used, s.resets_at))


def session_id(payload: Any) -> str | None:
    value = payload.get("session_id") if isinstance(payload, dict) else None
    return value if isinstance(value, str) and _UUID.fullmatch(value) else None


def folder(payload: Any) -> str | None:
    """The project folder the window runs in: ``workspace.project_dir``, else ``cwd``."""
    if not isinstance(payload, dict):
        return None
    workspace = payload.get("workspace")
    for value in (workspace.get("project_dir") if isinstance(workspace, dict) else None, payload.get("cwd")):
        if isinstance(value, str) and 0 < len(value) <= MAX_PATH and "\0" not in value and os.path.isabs(value):
            return value
    return None


def record_limits(payload: Any, config: Path, now: float) -> list[ratelimits.Sample]:
    """Record the windows this JSON (and a ``/usage`` snapshot in ``.claude.json``) report;
    returns them."""
    from ..ground.home import claude_json

    seen = ratelimits.from_status(payload, now)
    reported = {s.window for s in seen}
    # The snapshot's windows that the JSON does not carry (per-model weeklies), when not stale.
    seen += [s for s in ratelimits.from_snapshot(claude_json(config), now) if s.window not in reported]
    ratelimits.record(seen, now)
    return seen


def facts(payload: Any, config: Path, now: float) -> Facts:
    """Everything the line shows, for the window whose JSON is ``payload``; a part that cannot
    be read is left empty (the line never fails for it)."""
    out = Facts()
    seen: list[ratelimits.Sample] = []
    try:
        seen = record_limits(payload, config, now)
    except OSError:  # a full disk, a log that is a link: the numbers are still shown
        pass
    out.windows = {**ratelimits.current(now), **{s.window: s for s in seen if s.resets_at > now}}
    sid = session_id(payload)
    out.waiting = _waiting(config / "sessions", sid)
    where = folder(payload)
    if sid and where:
        out.mark, out.mark_text = _mark(where, sid)
    return out


def _waiting(registry: Path, me: str | None) -> list[Waiting]:
    from ..live.running import read_registry

    found = []
    for run in read_registry(registry).running:
        if run.state == "waiting" and run.session_id != me:
            label = os.path.basename(run.cwd.rstrip("/")) if run.cwd else run.name
            found.append(Waiting(run.session_id, label or run.session_id[:8], run.state_since))
    found.sort(key=lambda w: (w.since is None, w.since or 0.0, w.label))
    return found


def _mark(where: str, sid: str) -> tuple[str | None, str | None]:
    """This session's note (else its stale mark) and its text, from its project's marks log,
    read only when the project has one."""
    from ..ground.home import c3_home
    from ..ground.paths import project_root, state_slug

    root = project_root(where)
    # Its state is the project's .c3, or kept under $C3_HOME when the folder cannot be written:
    # with a marks log in neither, nothing more is imported or read.
    if not any(
        os.path.isfile(p / "session_marks.jsonl") for p in (Path(root) / ".c3", c3_home() / "state" / state_slug(root))
    ):
        return None, None
    from ..stores.marks import MarkBook

    state = MarkBook(root).refresh().get(sid)
    if state is None:
        return None, None
    if state.note is not None:
        return "note", state.note.summary or state.note.next_steps
    if state.stale is not None:
        return "stale", state.stale.reason
    return None, None
