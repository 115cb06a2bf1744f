"""The sessions view: one row per Claude Code session, joined with everything c3async knows of
it (marks, liveness, C3 records, tasks and decisions, hints, the chain), and one session's
detail. The CLI, the MCP tools and the Hub ask here and nowhere else.

Modules: ``rows`` (the row), ``view`` (the join, filters, listings), ``hints``, ``chain``,
``refs`` (what was typed -> a session; marks), ``detail`` (one session expanded).
"""
