"""The session catalog: one row per Claude Code session, read from transcript heads and tails.

Stages, one module each: ``locate`` (transcript folders), ``listing`` (session files),
``read`` (windows), ``extract`` (facts from bytes), ``cache``, ``scan`` (the pipeline),
``resolve`` (an id or prefix -> a transcript), ``gitrefs``. It knows nothing of marks, liveness,
tasks or C3 records: the sessions view (``c3async.sessions``) joins those in.
"""

from .scan import (
    NEWEST as NEWEST,
)
from .scan import (
    ProjectScan as ProjectScan,
)
from .scan import (
    Session as Session,
)
from .scan import (
    scan_project as scan_project,
)
from .scan import (
    scan_projects as scan_projects,
)
from .scan import (
    scan_projects_sync as scan_projects_sync,
)

__all__ = ("NEWEST", "ProjectScan", "Session", "scan_project", "scan_projects", "scan_projects_sync")
