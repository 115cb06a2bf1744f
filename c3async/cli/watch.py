"""`live --watch`: the live board kept current in a terminal, and told when a session starts
waiting for you (the bell; a desktop notification with ``--notify`` where the system has a
notifier: ``notify-send``, or ``osascript`` on macOS).

A cheap poll (``POLL_S``) of the board (Claude Code's registry, the heartbeats), redrawn only
when it changed; on a terminal the screen is redrawn, elsewhere each change is a line. Ctrl-C
ends it at once (the signal ends the sleep).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from typing import TYPE_CHECKING

from ..ground.term import inert_line
from .render import Screen

if TYPE_CHECKING:
    from ..ground.project import Project

__all__ = ("changes", "watch")

POLL_S = 1.0
CLEAR = "\x1b[H\x1b[2J"


def changes(before: dict[str, tuple[str | None, str]], after: dict[str, tuple[str | None, str]]) -> list[str]:
    """What moved between two boards (id -> (state, label)), one line each; the sessions that
    start waiting first."""
    waiting, moved = [], []
    for sid, (state, label) in after.items():
        was = before.get(sid)
        if state == "waiting" and (was is None or was[0] != "waiting"):
            waiting.append(f"waiting for you: {label} ({sid[:8]})")
        elif was is None:
            moved.append(f"started, {state or 'live'}: {label} ({sid[:8]})")
        elif was[0] != state:
            moved.append(f"{state or 'live'}: {label} ({sid[:8]})")
    moved += [f"ended: {label} ({sid[:8]})" for sid, (_, label) in before.items() if sid not in after]
    return waiting + moved


def notify(text: str) -> None:
    """A desktop notification, where the system has a notifier (never through a shell)."""
    if shutil.which("notify-send"):
        argv = ["notify-send", "c3async", text]
    elif shutil.which("osascript"):
        script = 'on run argv\ndisplay notification (item 1 of argv) with title "c3async"\nend run'
        argv = ["osascript", "-e", script, text]
    else:
        return
    try:
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        pass


def watch(project: Project, everywhere: bool, notify_too: bool, screen: Screen, polls: int | None = None) -> int:
    """Until Ctrl-C (or ``polls`` polls, for the tests)."""
    from ..sessions.board import board
    from ..sessions.reports import live_table

    tty = screen.out.isatty()
    before: dict[str, tuple[str | None, str]] = {}
    first = True
    while polls is None or polls > 0:
        rows = board(project, everywhere=everywhere)
        after = {r.id: (r.state, inert_line(r.title or r.project.rsplit("/", 1)[-1])) for r in rows}
        moved = changes(before, after) if not first else []
        started = [ln for ln in moved if ln.startswith("waiting for you")]
        if first or after != before:
            stamp = time.strftime("%H:%M:%S")
            if tty:
                table = live_table(rows, show_project=everywhere) if rows else "no live sessions"
                screen.write(f"{CLEAR}c3async live, {stamp} (Ctrl-C ends)\n{table}\n")
            elif first:
                screen.write(
                    "".join(f"{stamp} {st or 'live'}: {label} ({sid[:8]})\n" for sid, (st, label) in after.items())
                )
            else:
                screen.write("".join(f"{stamp} {ln}\n" for ln in moved))
            if started and not first:
                if tty:
                    screen.write("\a")
                if notify_too:
                    notify(started[0].removeprefix("waiting for you: ") + " waits for you")
            screen.flush()
        before, first = after, False
        if polls is not None:
            polls -= 1
            if polls == 0:
                break
        time.sleep(POLL_S)
    return 0
