"""The MCP server's entry, ``c3async serve`` (and ``python -m c3async.server``): the door itself
is the ``serve`` package (``serve.app`` the server, its tools, resources and prompts)."""

from __future__ import annotations

import sys

from .serve.app import mcp, serve

__all__ = ("mcp", "serve")

if __name__ == "__main__":
    sys.exit(serve())
