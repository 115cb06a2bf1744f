"""Liveness v2: a live light that is a fact. Each MCP process writes a heartbeat file; readers
trust its timestamp, prune dead files, and fall back to the activity log only where no heartbeat
exists. Modules: ``heartbeat`` (the file and its writer), ``reader`` (who is live),
``identity`` (which host session and IDE a server serves), ``hooks`` (Claude Code hook rows)."""

from .reader import LiveSession as LiveSession
from .reader import live_sessions as live_sessions

__all__ = ("LiveSession", "live_sessions")
