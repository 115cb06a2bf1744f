"""C3 session records, ``.c3/sessions/<c3_session_id>.json``: one per run of the MCP server.

A record holds what the agent said through ``c3_session``'s lifecycle actions (start, log,
snapshot, plan, end) and which host sessions the run served (several, after a /clear). Only
its own server process writes it, by atomic replace; everyone may read it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import msgspec

from ..ground import clock, safefs
from ..ground.errors import DECODE_ERRORS, UnsafeState
from ..ground.jsondoc import write_atomic
from ..ground.project import Project

__all__ = ("Event", "SessionRecord", "Snapshot", "load_all", "record_path", "save")


class Event(msgspec.Struct, kw_only=True):
    ts: float
    host_session_id: str | None
    event_type: str
    data: str = ""
    reasoning: str = ""


class Snapshot(msgspec.Struct, kw_only=True):
    ts: float
    host_session_id: str | None
    summary: str
    data: str = ""


class SessionRecord(msgspec.Struct, kw_only=True):
    version: int = 1
    c3_session_id: str
    host_session_ids: list[str] = msgspec.field(default_factory=list)
    ide: str | None = None
    cwd: str | None = None
    branch: str | None = None
    pid: int | None = None
    started: float = 0.0
    ended: float | None = None
    description: str | None = None
    summary: str | None = None
    plan: str | None = None
    snapshots: list[Snapshot] = msgspec.field(default_factory=list)
    events: list[Event] = msgspec.field(default_factory=list)

    def serve(self, host_session_id: str | None) -> None:
        if host_session_id and host_session_id not in self.host_session_ids:
            self.host_session_ids.append(host_session_id)


def record_path(project: Project, c3_session_id: str) -> Path:
    return project.state / "sessions" / f"{c3_session_id}.json"


def save(project: Project, record: SessionRecord) -> None:
    write_atomic(record_path(project, record.c3_session_id), msgspec.json.encode(record), fsync=False)


_decoder = msgspec.json.Decoder(SessionRecord)


def load_all(project: Project) -> list[SessionRecord]:
    """Every readable record of the project, oldest first; unreadable ones are skipped."""
    folder = project.state / "sessions"
    try:
        names = [n for n in safefs.listdir(folder) if n.endswith(".json") and not n.startswith(".")]
    except UnsafeState as exc:
        safefs.warn_once(exc)
        return []
    except OSError:
        return []
    out = []
    for name in names:
        try:  # a link or a special file among them is skipped (read_bytes refuses it)
            out.append(_checked(_decoder.decode(safefs.read_bytes(folder / name)), folder / name))
        except (OSError, *DECODE_ERRORS):
            continue
    out.sort(key=lambda r: r.started)
    return out


def _checked(rec: SessionRecord, path: Path) -> SessionRecord:
    """``rec`` with its times in range (``ground.clock``): one out of range reads as unknown (0,
    or None for ``ended``), said once."""

    def when(value: float | None) -> float | None:
        return clock.event(value, "a C3 session record's time", path)

    rec.started, rec.ended = when(rec.started) or 0.0, when(rec.ended)
    for snapshot in rec.snapshots:
        snapshot.ts = when(snapshot.ts) or 0.0
    for event in rec.events:
        event.ts = when(event.ts) or 0.0
    return rec


def new_record(c3_session_id: str, ide: str | None, cwd: str) -> SessionRecord:
    return SessionRecord(c3_session_id=c3_session_id, ide=ide, cwd=cwd, pid=os.getpid(), started=time.time())
