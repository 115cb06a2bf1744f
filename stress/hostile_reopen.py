"""``c3async reopen`` fed a forged memory of what was live (``$C3_HOME/was_live.json``): ids that
are no session or a path, folders outside every project, relative or with a NUL, escape sequences
and newlines in a folder, pids and times out of range, a file far over its bound, a FIFO and a
link in its place; and Claude Code's registry with a leftover that names a folder outside. Only a
real session is offered, always in the folder the catalog knows; nothing is printed raw, nothing
hangs, and a damaged file is named and left as it was (the hooks that write it still exit 0).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid

from .harness import PY, Result
from .probe import probe

CLASS = "reopen's memory of what was live"


def check(res: Result, sb, quick: bool) -> None:
    p = probe(res, sb, "reopen")
    project = p.project("app")
    real = p.session(project, "the one to open again")
    ghost = p.session(project, "a real id beside a forged folder")
    state = p.home / "was_live.json"
    p.home.mkdir(parents=True, exist_ok=True)
    now = time.time()

    def entry(sid: str, cwd: str, **more: object) -> dict:
        return {"id": sid, "cwd": cwd, "seen": now - 60, "since": now - 600, "by": "hook", "boot": 1.0, **more}

    forged = [
        entry("../../../etc/passwd", project),
        entry("1a2b", project),
        entry(str(uuid.uuid4()), project),  # names no transcript
        entry(str(uuid.uuid4()), "relative/dir"),
        entry(str(uuid.uuid4()), "/tmp/a\u0000b"),
        entry(str(uuid.uuid4()), "/tmp/\x1b[31mred\nrm -rf ~"),
        entry(str(uuid.uuid4()), project, pid=-1),
        entry(str(uuid.uuid4()), project, pid=10**30),
        entry(str(uuid.uuid4()), project, seen=1e300),
        entry(str(uuid.uuid4()), project, seen="now"),
        entry(str(uuid.uuid4()), project, by="<script>"),
        entry(ghost, "/etc"),
        entry(real, project),
        [1, 2, 3],
        "a string",
    ]
    state.write_text(json.dumps({"version": 1, "sessions": forged}))
    proc = p.run("reopen over forged entries", "reopen", "--print")
    lines = proc.stdout.splitlines()
    res.check(
        sorted(lines) == sorted(f"cd {project} && claude --resume {sid}" for sid in (real, ghost)),
        "only real sessions are offered, each in the catalog's folder (never a forged one)",
        repr(lines)[:300],
    )
    res.check("\x1b" not in proc.stdout + proc.stderr, "no raw escape sequence printed", repr(proc.stderr)[:200])
    listed = p.run("reopen --json over forged entries", "reopen", "--json")
    try:
        ids = {g["id"] for g in json.loads(listed.stdout)}
    except (ValueError, TypeError, KeyError):
        ids = set()
    res.check(ids >= {real, ghost} and "1a2b" not in ids, "--json lists what --print offers", repr(ids)[:200])

    # a file far over its bound: named, refused, left as it was; a hook beside it exits 0
    huge = b'{"version": 1, "sessions": [' + b'{"id": "x"},' * 200_000 + b"{}]}"
    state.write_bytes(huge)
    p.run("reopen over a huge file", "reopen", "--print", expect=(1,), says=("was_live.json",))
    hook = {"hook_event_name": "SessionStart", "session_id": real, "cwd": project, "source": "startup"}
    env = {**p.env, "CLAUDE_PROJECT_DIR": project, "CLAUDE_PID": str(os.getpid()), "CLAUDE_CODE_ENTRYPOINT": "cli"}
    done = subprocess.run([PY, "-m", "c3async", "hook"], input=json.dumps(hook), text=True, env=env, timeout=60)
    res.check(done.returncode == 0, "a hook beside a damaged file exits 0", str(done.returncode))
    res.check(state.read_bytes() == huge, "a damaged file is left as it was", str(state.stat().st_size))

    # a FIFO in its place: no hang; a link: never followed, its target untouched
    state.unlink()
    os.mkfifo(state)
    p.run("reopen over a FIFO", "reopen", "--print", expect=(1,), says=("was_live.json",))
    state.unlink()
    outside = p.root / "outside.json"
    outside.write_text(json.dumps({"version": 1, "sessions": [entry(real, project)]}))
    state.symlink_to(outside)
    p.run("reopen over a link", "reopen", "--print", expect=(1,), says=("was_live.json",))
    subprocess.run([PY, "-m", "c3async", "hook"], input=json.dumps(hook), text=True, env=env, timeout=60)
    res.check(
        state.is_symlink() and json.loads(outside.read_text())["sessions"][0]["id"] == real,
        "a link in its place is never written through",
        outside.read_text()[:200],
    )
    state.unlink()

    # the registry: a killed claude's leftover naming a folder outside every project
    registry = p.config / "sessions"
    registry.mkdir(parents=True, exist_ok=True)
    left = {"pid": 2**31 - 2, "sessionId": real, "cwd": "/", "kind": "interactive", "startedAt": now * 1000}
    (registry / f"{2**31 - 2}.json").write_text(json.dumps(left))
    (registry / "123.json").write_bytes(b"{" * 100_000)
    proc = p.run("reopen over a forged registry", "reopen", "--print")
    res.check(
        proc.stdout.splitlines() == [f"cd {project} && claude --resume {real}"],
        "a registry leftover's folder is never acted on: the catalog's is",
        repr(proc.stdout)[:300],
    )
    res.fig("probes", f"{p.runs} commands, {len(forged)} forged entries")
