"""Floor 2, first: the session catalog, one record per Claude Code transcript, read from heads
and tails.

Stages, one module each: ``locate`` (transcript folders), ``listing`` (session files),
``read`` (windows), ``extract`` (facts from bytes), ``cache``, ``scan`` (the pipeline),
``resolve`` (an id or prefix -> a transcript), ``gitrefs``, ``gitroot`` (a repository's root
commits), ``forks``, ``conversation`` (the reader's turns), ``changes`` (files a session edited),
``watch`` (which session files moved, without a stat per file at every pass), ``discover`` (every
transcript folder's cwd), ``moves`` (folders a person moved: whose sessions are whose) and
``relink`` (a moved folder's sessions put where ``claude --resume`` looks). May import only the ground: it knows
nothing of marks, liveness, tasks or C3 records; the sessions view (``c3async.sessions``) joins
those in.
"""

from typing import Any

__all__ = ("NEWEST", "ProjectScan", "Session", "scan_project", "scan_projects", "scan_projects_sync")


def __getattr__(name: str) -> Any:
    # Imported on first use: a command that needs one stage (search needs ``locate``) does not
    # pay for the whole pipeline's imports.
    if name in __all__:
        from . import scan

        return getattr(scan, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
