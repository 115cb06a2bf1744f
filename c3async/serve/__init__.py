"""Floor 4, a door: the MCP server (``c3async serve``, one process per IDE session). ``app``
(the server: its start-up and background jobs, the tools ``c3_session``, ``c3_task`` and
``c3_status``, the sessions as resources, the prompts, and the one place an error becomes an MCP
answer), ``session_actions`` (``c3_session``'s actions, declared as structs, and their bodies),
``prompts`` (what the resources and the prompts read). ``c3async/server.py`` is its entry. May
import every floor below."""
