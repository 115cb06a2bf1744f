"""Floor 2, a reader: who is live, from facts. Each MCP process writes a heartbeat file; Claude
Code's own registry says which claude runs and whether it waits; the activity log is the last
resort. Modules: ``heartbeat`` (the file and its writer), ``running`` (Claude Code's registry),
``reader`` (who is live), ``identity`` (which host session and IDE a server serves), ``hooks``
(Claude Code hook rows). May import the ground, the catalog and the stores."""

from .reader import LiveSession as LiveSession
from .reader import live_sessions as live_sessions

__all__ = ("LiveSession", "live_sessions")
