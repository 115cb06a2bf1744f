"""What a new user hit: a session that read live for minutes after its claude had exited (the
activity fallback believed the hook's session_start), and a Ctrl-C during start-up that printed a
traceback. Here a real process stands in for claude: its hook writes the session_start naming it
(``CLAUDE_PID``), it is killed, and ``live`` and ``sessions`` must not call the session live; then
SIGINT and SIGTERM come at spread moments of a command's start-up, and no traceback of c3async's
may appear (what Python prints before any of c3async runs, its own start-up, is counted apart).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

from .harness import PY, Result
from .probe import probe

CLASS = "a new user's first minutes"


def check(res: Result, sb, quick: bool) -> None:
    p = probe(res, sb, "newuser")
    project = p.project("app")
    sid = p.session(project, "a session whose claude goes away")
    claude = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    hook = {"session_id": sid, "hook_event_name": "SessionStart", "source": "startup", "cwd": project}
    env = {**p.env, "CLAUDE_PID": str(claude.pid), "CLAUDE_PROJECT_DIR": project}
    subprocess.run([PY, "-m", "c3async", "hook"], input=json.dumps(hook), text=True, env=env, timeout=60, check=True)
    live = json.loads(p.run("live while its claude runs", "live", "--project", project, "--json").stdout or "[]")
    res.check(
        sid in {e.get("id") for e in live},
        "a hook-started session reads live while its claude runs (control)",
        str(live)[:200],
    )
    claude.kill()
    claude.wait()
    claude.stdin.close()
    live = json.loads(p.run("live after its claude died", "live", "--project", project, "--json").stdout or "[]")
    res.check(
        sid not in {e.get("id") for e in live}, "a session whose claude is gone never reads live", str(live)[:200]
    )
    row = p.rows(project).get(sid, {})
    res.check(row.get("live") is False, "its row is not live either", str(row.get("live")))

    moments = 40 if quick else 150
    package = subprocess.run(
        [PY, "-c", "import c3async, os; print(os.path.dirname(os.path.realpath(c3async.__file__)))"],
        env=p.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    ours = python_own = quiet = 0
    for i in range(moments):
        delay = (i % 40) * 0.004
        sig = signal.SIGINT if i % 2 == 0 else signal.SIGTERM
        proc = subprocess.Popen(
            [PY, "-m", "c3async", "sessions", "--project", project],
            env=p.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        time.sleep(delay)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        text = err.decode("utf-8", "replace")
        if "Traceback" not in text:
            quiet += 1
        elif _ours(text, package):
            ours += 1
            res.check(False, "a signal at any moment of c3async's start-up is quiet", text[-400:])
        else:
            python_own += 1
    res.fig("signals at start-up: quiet / Python's own start-up / c3async's", f"{quiet} / {python_own} / {ours}")
    res.fig("probes", f"{p.runs} commands, {moments} signalled starts")


_FRAME = re.compile(r'^  File "([^"\n]*)", line \d+', re.M)


def _ours(traceback: str, package: str) -> bool:
    """A frame of a file in c3async's package (not a venv that happens to be named c3async)."""
    return any(
        os.path.realpath(f).startswith(package + os.sep) for f in _FRAME.findall(traceback) if not f.startswith("<")
    )
