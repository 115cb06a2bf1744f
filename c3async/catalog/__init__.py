"""The session catalog: one row per Claude Code session, read from transcript heads and tails.

Stages, one module each: ``locate`` (transcript folders), ``listing`` (session files),
``read`` (windows), ``extract`` (facts from bytes), ``cache``, ``scan`` (the pipeline), ``rows``.
"""

from .rows import Row as Row, resume_command as resume_command, to_row as to_row
from .scan import (
    NEWEST as NEWEST,
    ProjectScan as ProjectScan,
    Session as Session,
    scan_project as scan_project,
    scan_projects as scan_projects,
    scan_projects_sync as scan_projects_sync,
)

__all__ = ("NEWEST", "ProjectScan", "Row", "Session", "resume_command", "scan_project", "scan_projects", "scan_projects_sync", "to_row")
