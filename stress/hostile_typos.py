"""Typos: a ``--project`` that is no directory (missing, a file, below a file), a wrong
``CLAUDE_PROJECT_DIR``, a hook for a folder that does not exist: a usage error (exit 2) naming
it, and nothing registered or created anywhere. Every probe: no traceback, no hang, exit 0, 1 or
2, and the expected outcome."""

from __future__ import annotations

import json
import uuid

from .harness import Result
from .probe import probe, tree

CLASS = "typos"


def check(res: Result, sb, quick: bool) -> None:
    p = probe(res, sb, "typos")
    real = p.project("real")
    sid = p.session(real, "a real session")
    (p.root / "work" / "notes.txt").write_text("not a project\n")
    before = tree(p.root)
    targets = [
        str(p.root / "work" / "no-such-dir"),
        str(p.root / "work" / "notes.txt"),
        str(p.root / "work" / "notes.txt" / "below"),
    ]
    commands = [
        ["sessions"],
        ["show", sid],
        ["mark", "note", sid, "--summary", "s"],
        ["keep", sid],
        ["resume", sid, "--print"],
        ["tasks", "add", "--title", "t"],
        ["live"],
        ["stats"],
        ["search", "x"],
        ["install-hooks"],
    ]
    for target in targets:
        for args in commands:
            p.run(f"{args[0]} --project {target}", *args, "--project", target, expect=(2,), says=(target,))
    p.run(
        "sessions with CLAUDE_PROJECT_DIR gone",
        "sessions",
        env={**p.env, "CLAUDE_PROJECT_DIR": targets[0]},
        expect=(2,),
        says=("CLAUDE_PROJECT_DIR",),
    )
    hook = json.dumps({"hook_event_name": "SessionStart", "session_id": str(uuid.uuid4()), "cwd": targets[0]})
    p.run("a hook for a folder that does not exist", "hook", stdin=hook)  # exits 0, writes nothing there
    for folder in ("/", str(p.root / "work")):
        p.run(f"sessions in {folder} (no sessions)", "sessions", cwd=folder)
    after = tree(p.root)
    made = sorted(after - before - {"c3home", "c3home/hook-errors.log"})
    res.check(not made, "nothing is registered or created for a typo", ", ".join(made[:6]))
    res.fig("probes", f"{p.runs} commands on {len(targets)} typo'd folders; {len(made)} files made")
