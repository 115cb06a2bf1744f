"""Our files only: ``install-hooks`` and ``--remove`` in a project and in the user's settings
where a person keeps a ``settings.json.bak`` of their own, where our backup's name is taken by a
link into the decoy home, and where settings were emptied by hand after an install. The person's
files stay byte for byte; nothing is written through a link; a backup that holds a person's
settings is never removed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .harness import Result
from .probe import probe

CLASS = "install-hooks and a person's own files"


def check(res: Result, sb, quick: bool) -> None:
    p = probe(res, sb, "settings")
    decoy = p.root / "home" / "precious.json"
    decoy.write_text('{"mine": true}\n')
    for where, flag, settings in (
        ("a project", ("--project", p.project("app")), Path(p.project("app"), ".claude", "settings.local.json")),
        ("the user", ("--user",), p.config / "settings.json"),
    ):
        settings.parent.mkdir(parents=True, exist_ok=True)
        settings.write_text(json.dumps({"model": "opus", "env": {"KEY": "secret"}}))
        theirs = settings.with_name(settings.name + ".bak")
        theirs.write_bytes(b'{"model": "my own backup"}\n')
        before = theirs.read_bytes()
        p.run(f"install-hooks in {where}", "install-hooks", *flag)
        p.run(f"install-hooks again in {where}", "install-hooks", *flag)
        ours = settings.with_name(settings.name + ".c3async.bak")
        res.check(
            ours.exists() and oct(ours.stat().st_mode & 0o777) == "0o600",
            "install-hooks keeps its backup under its own name, private",
            f"{where}: {sorted(os.listdir(settings.parent))}",
        )
        # the person empties the settings by hand, keeping only our hooks: our backup is now theirs too
        settings.write_text(json.dumps({"hooks": json.loads(settings.read_text())["hooks"]}))
        p.run(f"install-hooks --remove in {where}", "install-hooks", *flag, "--remove")
        res.check(theirs.read_bytes() == before, "a person's settings.json.bak is never touched", where)
        res.check(
            ours.exists() and "opus" in ours.read_text(),
            "a backup holding a person's settings is never removed",
            f"{where}: {sorted(os.listdir(settings.parent))}",
        )
        # our backup's name taken by a link into the decoy home: never written through
        ours.unlink()
        ours.symlink_to(decoy)
        settings.write_text(json.dumps({"model": "sonnet"}))
        p.run(f"install-hooks over a linked backup in {where}", "install-hooks", *flag, expect=(0, 1))
        res.check(decoy.read_text() == '{"mine": true}\n', "nothing is written through a link", where)
        ours.unlink(missing_ok=True)
    res.fig("probes", f"{p.runs} commands")
