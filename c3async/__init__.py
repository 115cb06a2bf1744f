"""c3async: a catalog, live light and task store for Claude Code sessions.

The package's folders are its floors (arrows only point down, ``tests/test_layout.py``):

- Floor 1, ``ground/``: where files live and how they are touched.
- Floor 2, what is on disk: ``catalog/`` (transcripts), ``stores/`` (c3async's own files),
  ``live/``, ``tasks/``, ``usage/``, ``search/``.
- Floor 3, ``sessions/``: the sessions view, the one place the doors ask.
- Floor 4, the doors, here at the root: ``cli`` (with ``__main__``), ``server`` (the MCP
  server, with ``session_actions`` and ``mcp_prompts`` behind its tool and prompts), ``status``
  (the reports the CLI and MCP print), and ``hub/``. Each answers an error by its kind
  (``ground/errors.py``) from one table, in one place.
"""

__version__ = "0.1.0"
