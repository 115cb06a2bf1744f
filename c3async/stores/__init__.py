"""Floor 2, the stores: one module per file c3async keeps, each reading and writing its own format.

``marks`` (stale, note, keep marks: ``session_marks.jsonl``), ``activity`` (``activity.jsonl``),
``records`` (C3 session records), ``registry`` (the registered projects), ``config``
(``config.json``), ``checkouts`` (the worktrees git listed), ``archive`` (kept transcripts),
``retention`` (Claude Code's cleanup period).

May import the ground and ``catalog`` (a transcript's file name is a session id); nothing above.
The other readers of floor 2 (``live``, ``tasks``, ``usage``, ``search``) sit beside it and may
import it.
"""
