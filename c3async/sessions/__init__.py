"""Floor 3, the sessions view: one row per Claude Code session, joined with everything c3async
knows of it (marks, liveness, C3 records, tasks and decisions, hints, the chain), and one
session's detail. The CLI, the MCP tools and the Hub ask here and nowhere else.

Modules, bottom up: ``rows`` (the row), ``resume``, ``launch`` (claude in a tmux window, a
terminal in a session's folder), ``reopen`` (what a reboot took, to start again), ``chain``,
``hints``, ``keep`` (kept rows and the archive), ``view`` (the join, filters, listings),
``refs`` (what was typed -> a session), ``act`` (marking, linking, resuming one), ``detail``,
``brief``, ``board`` (live sessions),
``reports`` (``c3_status``'s views as text: the token budget per host session, who runs now),
``search``, ``export`` (one session whole, as Markdown or one HTML page: ``export_walk`` the
streaming walk both share, ``export_md`` and ``export_html`` the formats), ``watch`` (whether a project's rows may have moved, cheaply, for the watchers),
``projects`` (every project c3async can list), ``moves`` (moved and renamed folders),
``runtime`` (the background jobs of the doors that stay up: the MCP server and the Hub start
the same one). May import floors 1 and 2, never a door.
"""
