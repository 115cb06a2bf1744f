"""c3async: a catalog, live light and task store for Claude Code sessions.

The package's folders are its floors (arrows only point down, ``tests/test_layout.py``):

- Floor 1, ``ground/``: where files live and how they are touched.
- Floor 2, what is on disk: ``catalog/`` (transcripts), ``stores/`` (c3async's own files),
  ``live/``, ``tasks/``, ``usage/``, ``search/``.
- Floor 3, ``sessions/``: the sessions view, the one place the doors ask.
- Floor 4, the doors, each a package laid out alike (parse, call the view, answer): ``cli/``
  (the command line; ``__main__`` is its entry), ``serve/`` (the MCP server; ``server`` is its
  entry) and ``hub/`` (the web Hub). Each answers an error by its kind (``ground/errors.py``)
  from one table, in one place.
"""

__version__ = "0.1.0"
