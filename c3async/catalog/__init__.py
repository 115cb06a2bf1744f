"""The session catalog: one row per Claude Code session, read from transcript heads and tails.

Stages, one module each: ``locate`` (transcript folders), ``listing`` (session files),
``read`` (windows), ``extract`` (facts from bytes), ``cache``, ``scan`` (the pipeline),
``resolve`` (an id or prefix -> a transcript), ``gitrefs``. It knows nothing of marks, liveness,
tasks or C3 records: the sessions view (``c3async.sessions``) joins those in.
"""

from .scan import (
    NEWEST as NEWEST,
    ProjectScan as ProjectScan,
    Session as Session,
    scan_project as scan_project,
    scan_projects as scan_projects,
    scan_projects_sync as scan_projects_sync,
)

__all__ = ("NEWEST", "ProjectScan", "Session", "scan_project", "scan_projects", "scan_projects_sync")
