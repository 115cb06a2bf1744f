"""Floor 1, the ground: where files live and how they are touched, knowing nothing of sessions.

``home`` ($C3_HOME), ``paths`` (a project's root across git worktrees, read from git's own files),
``stateroot`` (a project's state folder, and folding older state into it), ``project`` (a project
as a value, resolved once at a door and handed down: its root, its state folder), ``safefs``
(opening our files without following links), ``peek`` (the same refusals for the status line's
reads, with ``os`` alone), ``locking``, ``jsonl`` (append, tolerant read, tail), ``jsondoc``
(locked read-modify-write), ``folds`` (checkpoints of folded logs), ``errors`` (every error c3async
raises, in one tree, each of a kind the doors answer), ``disk`` (a full disk said as such, room for
a copy, temp files of killed writes), ``term`` (text made inert for a terminal), ``stop`` (Ctrl-C
and SIGTERM end a command at once), ``workers`` (process pools), ``clock`` (the one range every
time read from outside must fall in), ``schema`` (the actions of a tool declared once, as structs),
``memo`` (what a process remembers between calls, forgotten at once).

Imports nothing of c3async outside this package (``tests/test_layout.py`` checks it).
"""
