"""The status line under hostile input: garbage and 50 MB on its stdin, a percent past any
limit, a reset in the year 3000, control characters in a session's name and mark, a
settings.json that is a link, and a status-line command of the person's that hangs or prints
1 MB. ``statusline`` always exits 0 with one short line and no raw control character; nothing
out of range reaches the log; ``install-statusline`` never writes through a link and
``--remove`` gives the person's settings back byte for byte.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from .harness import Result
from .probe import probe as _probe

CLASS = "the status line and a person's status line"


def _status(sid: str, cwd: str, five: object = 42, reset: object = None, **more: object) -> str:
    reset = int(time.time()) + 3600 if reset is None else reset
    return json.dumps(
        {
            "session_id": sid,
            "cwd": cwd,
            "session_name": more.pop("name", "x"),
            "rate_limits": {"five_hour": {"used_percentage": five, "resets_at": reset}},
            **more,
        }
    )


def check(res: Result, sb, quick: bool) -> None:
    p = _probe(res, sb, "statusline")
    app = p.project("app")
    sid = p.session(app, "a real session")
    p.run(
        "a note with escapes", "mark", "note", sid, "--summary", "done\x1b]52;c;ZXZpbA==\x07\x1b[2J", "--project", app
    )
    log = p.home / "usage" / "rate_limits.jsonl"
    inputs = {
        "no input": "",
        "garbage": "\x00\x01 not json }}}",
        "a JSON array": "[1, 2, 3]",
        "nested 100,000 deep": "[" * 100_000,
        "50 MB": "{" + " " * (50 << 20) + "}",
        "a huge percent": _status(sid, app, five=1e308),
        "a reset in the year 3000": _status(sid, app, reset=32_503_680_000),
        "a percent that is text": _status(sid, app, five="99"),
        "escapes in the name and cwd": _status(sid, app + "\x1b[2J", name="\x1b]0;owned\x07\x9b31m"),
    }
    for what, data in inputs.items():
        proc = p.run(f"statusline with {what}", "statusline", stdin=data, cwd=app)
        out = proc.stdout
        res.check(len(out.splitlines()) == 1 and len(out) < 400, "one short line", f"{what}: {out[:200]!r}")
        bad = [c for c in out.replace("\x1b[", "") if (ord(c) < 32 and c != "\n") or 0x7F <= ord(c) <= 0x9F]
        res.check(not bad, "no raw control character but our colours", f"{what}: {out[:200]!r}")
    rows = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    res.check(
        all(0 <= r["used"] <= 100 and r["resets_at"] < time.time() + 8 * 86_400 for r in rows),
        "nothing out of range is recorded",
        repr(rows[:4]),
    )
    good = p.run(
        "statusline, a plain one", "statusline", stdin=_status(sid, app), cwd=app, env={**p.env, "NO_COLOR": "1"}
    )
    res.check("5h 42%" in good.stdout and "\x1b" not in good.stdout, "NO_COLOR: plain text", repr(good.stdout))
    res.check("\\x1b]52" in good.stdout, "a mark's escapes shown inert", repr(good.stdout))

    # A person's status line that hangs, and one that floods: theirs cut, ours still shown.
    for what, command in (("hangs", "sleep 60"), ("prints 1 MB", "head -c 1048576 /dev/zero | tr '\\0' x")):
        t0 = time.monotonic()
        proc = p.run(
            f"statusline after yours, which {what}", "statusline", "--then", command, stdin=_status(sid, app), cwd=app
        )
        res.check(
            "5h" in proc.stdout.splitlines()[-1:][0] if proc.stdout else False,
            "ours shown after theirs",
            f"{what}: {proc.stdout[-200:]!r}",
        )
        res.check(len(proc.stdout) < 20_000, "theirs is cut", f"{what}: {len(proc.stdout)} bytes")
        res.fig(f"statusline after a command that {what}", f"{time.monotonic() - t0:.2f} s")

    # settings.json a link into the decoy home: refused, nothing written through it.
    decoy = p.root / "home" / "precious.json"
    decoy.write_text('{"mine": true}\n')
    settings = p.config / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.symlink_to(decoy)
    p.run("install-statusline over a linked settings.json", "install-statusline", "--user", expect=(1,), says=("link",))
    res.check(decoy.read_text() == '{"mine": true}\n', "nothing is written through a link", str(decoy))
    settings.unlink()

    # install over the person's own, then remove: the very bytes back, their backup untouched.
    before = b'{\n  "statusLine": {"type": "command", "command": "echo mine"},\n  "env": {"KEY": "secret"}\n}'
    settings.write_bytes(before)
    theirs = settings.with_name("settings.json.bak")
    theirs.write_bytes(b"my own backup")
    p.run("install-statusline over yours", "install-statusline", "--user")
    command = json.loads(settings.read_text())["statusLine"]["command"]
    res.check("--then" in command and "echo mine" in command, "yours is kept, run first", command)
    p.run("install-statusline --remove", "install-statusline", "--user", "--remove")
    res.check(
        settings.read_bytes() == before, "--remove gives the settings back byte for byte", settings.read_text()[:200]
    )
    res.check(theirs.read_bytes() == b"my own backup", "a person's settings.json.bak is never touched", "")
    res.check(
        not [n for n in os.listdir(Path(app)) if n not in (".c3",)],
        "nothing stray in the project",
        repr(os.listdir(app)),
    )
    res.fig("probes", f"{p.runs} commands")
