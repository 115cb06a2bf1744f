"""``c3async reopen``: the sessions that were live when the machine or their claude went down, and
how to start each again.

What was live comes from ``live.waslive`` (kept by the hooks and the MCP servers) and from the
registry files killed claudes left (``waslive.left_behind``). A session is never offered while it
runs: held by a running claude in the registry, or its own claude process (pid and start time)
still there. Each one offered is resolved as ``c3async resume`` resolves it (``act.prepare_resume``:
its transcript found in the catalog, its folder the catalog's): an id that names no transcript,
or a folder that is gone, is said and skipped, and no remembered folder is ever acted on itself.
"""

from __future__ import annotations

import time

import msgspec

from ..ground.errors import C3Error
from ..ground.project import resolve
from ..live import running, waslive
from .act import prepare_resume
from .resume import resume_command

__all__ = ("BOOT_SLACK_S", "Gone", "gone")

BOOT_SLACK_S = 2.0  # psutil's boot time, read twice in one boot, moves by less than this


class Gone(msgspec.Struct):
    """A session that was live and is not now: why (``reboot``: the machine restarted since it
    was seen; ``ended``: its claude ended without the person ending it, a SIGTERM; ``killed``:
    its claude left its registry file), when it was last known live, who saw it, and the resume
    plan (``cwd``, ``command``), or ``problem`` when it cannot be resumed."""

    id: str
    why: str
    seen: float
    by: str
    cwd: str | None = None
    config_dir: str | None = None
    command: str | None = None
    restored: list[str] = msgspec.field(default_factory=list)
    problem: str | None = None


def _runs(entry: waslive.Remembered) -> bool:
    """Whether the claude that held it runs still (same pid, same start time)."""
    if entry.pid is None or entry.started is None:
        return False
    started = waslive.process_start(entry.pid)
    return started is not None and abs(started - entry.started) < 1.0


def gone(since: float | None = None, *, dry_run: bool = True, now: float | None = None) -> list[Gone]:
    """The sessions to open again, the most recently seen first: remembered live (seen since
    ``since``) or left behind by a killed claude, and running now in no claude. ``dry_run``:
    nothing of the archive is put back (``--print``). Raises CorruptDocument for a damaged file of
    what was live."""
    now = time.time() if now is None else now
    remembered = [e for e in waslive.remembered(now) if since is None or e.seen >= since]
    held = {e.id for e in remembered}
    left = [e for e in waslive.left_behind(since, now) if e.id not in held]
    runs = {r.session_id for r in running.running()}
    boot = waslive.boot_time()
    out: list[Gone] = []
    for entry in sorted([*remembered, *left], key=lambda e: e.seen, reverse=True):
        if entry.id in runs or _runs(entry):
            continue
        if entry.by == "registry":
            why = "killed"
        elif entry.boot is not None and boot is not None and abs(entry.boot - boot) > BOOT_SLACK_S:
            why = "reboot"
        else:
            why = "ended"
        out.append(_planned(Gone(entry.id, why, entry.seen, entry.by), entry.cwd, dry_run))
    return out


def _planned(found: Gone, cwd: str, dry_run: bool) -> Gone:
    """``found`` with how to resume it, as ``c3async resume`` would (or the problem)."""
    try:
        plan = prepare_resume(resolve(cwd), found.id, dry_run=dry_run)
    except C3Error as exc:
        found.problem = str(exc)
        return found
    except (OSError, ValueError) as exc:  # the remembered folder cannot be read as a project
        found.problem = f"{cwd}: {exc}"
        return found
    found.cwd, found.config_dir, found.restored = plan.cwd, plan.config_dir, plan.restored
    found.command = resume_command(plan.cwd, plan.session, config_dir=plan.config_dir)
    return found
