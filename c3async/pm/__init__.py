"""Floor 2, a store: ``c3_task``'s durable project-management state in ``.c3/pm/pm.json``
that outlives every conversation: tasks, milestones, decision notes, time entries, and the event
log of changes. ``store`` holds the file format and its locked read-modify-write; ``actions`` the
operations that the MCP tool, the CLI and the Hub share (their refusals are ``TaskError``s of
``ground.errors``, which each door words in its own syntax); ``text`` their results as lines for
a person (the CLI). May import the ground, the catalog and the stores."""
