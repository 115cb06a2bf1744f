"""Floor 2, a store: the project's durable tasks, the ones ``c3_task`` and ``c3async tasks``
keep, that outlive every conversation: tasks, milestones, decision notes, time entries, and the
event log of changes, in ``.c3/pm/pm.json`` (a name the spec fixes; ``store.file_path`` spells it).
``schema`` declares each action once (its arguments, their types, limits and help: the MCP
tool's parameters and the CLI's flags come from it); ``store`` holds the file format and its
locked read-modify-write; ``actions`` the operations that the MCP tool and the CLI share (their
refusals are ``TaskError``s of ``ground.errors``, which each door words in its own syntax);
``text`` their results as lines for a person (the CLI). May import the ground, the catalog and the stores."""
