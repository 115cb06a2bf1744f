"""c3async: a catalog, live light and task store for Claude Code sessions."""

__version__ = "0.1.0"
