"""Starting claude, or a terminal, somewhere else than here: a new tmux window (``resume --tmux``,
``reopen`` inside tmux) and the platform's terminal in a session's folder (the Hub's "Open a
terminal here"). Always an argv list and a working folder, never a shell string: a folder or a
title may hold a ``;`` or a newline, and nothing of it is ever run as a command.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import threading

from ..ground.errors import BadArgument, NotFound, Refused, Unavailable
from ..ground.project import Project

__all__ = ("claude_argv", "in_tmux", "open_terminal", "start_terminal", "terminal_argv", "tmux_here", "tmux_window")

TMUX_TIMEOUT_S = 10.0
# Terminals tried on Linux and the BSDs, in order, when $C3_TERMINAL and $TERMINAL say nothing:
# each starts its shell in its own working folder.
_TERMINALS = ("x-terminal-emulator", "gnome-terminal", "konsole", "xfce4-terminal", "kitty", "alacritty", "xterm")


def claude_argv(session_id: str, extra: list[str] | None = None) -> list[str]:
    """``claude --resume <id>`` with claude's absolute path (a tmux server's PATH is its own)."""
    claude = shutil.which("claude")
    if claude is None:
        raise Unavailable("claude is not on PATH")
    return [os.path.abspath(claude), "--resume", session_id, *(extra or [])]


def in_tmux() -> bool:
    """Inside a tmux session ($TMUX set by tmux), with tmux at hand."""
    try:
        tmux_here()
    except (BadArgument, Unavailable):
        return False
    return True


def tmux_here() -> str:
    """tmux's path, inside tmux; else BadArgument (outside tmux) or Unavailable (no tmux found)."""
    if not os.environ.get("TMUX"):
        raise BadArgument("not inside tmux ($TMUX is not set); run the command in a terminal, or without --tmux")
    tmux = shutil.which("tmux")
    if tmux is None:
        raise Unavailable("$TMUX is set but tmux is not on PATH")
    return tmux


def tmux_window(cwd: str, argv: list[str], *, name: str, env: dict[str, str] | None = None, focus: bool = True) -> None:
    """Run ``argv`` in a new window of the current tmux session, in ``cwd``; ``focus`` False
    leaves the current window in front. tmux runs a command given as several words itself,
    without a shell. Raises BadArgument outside tmux, Unavailable when tmux refuses."""
    cmd = [tmux_here(), "new-window", *([] if focus else ["-d"]), "-c", cwd, "-n", name]
    for key, value in (env or {}).items():
        cmd += ["-e", f"{key}={value}"]
    try:
        done = subprocess.run(
            [*cmd, "--", *argv], stdin=subprocess.DEVNULL, capture_output=True, timeout=TMUX_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"tmux new-window failed: {exc}") from None
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise Unavailable(f"tmux new-window failed: {said[0] if said else f'exit {done.returncode}'}")


def terminal_argv(folder: str) -> list[str] | None:
    """The command that opens the platform's terminal in ``folder`` (also its working folder), or
    None where there is none to open (no display, nothing found). ``$C3_TERMINAL`` (words, as a
    shell would split them, but never run by one) wins, then ``$TERMINAL``."""
    chosen = os.environ.get("C3_TERMINAL") or os.environ.get("TERMINAL")
    if chosen:
        try:
            words = shlex.split(chosen)
        except ValueError:
            return None
        found = shutil.which(words[0]) if words else None
        return [found, *words[1:]] if found else None
    if sys.platform == "darwin":
        return ["/usr/bin/open", "-a", "Terminal", folder]
    if sys.platform == "win32":
        wt = shutil.which("wt.exe")
        return [wt, "-d", folder] if wt else None
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return None  # a terminal window needs a display; over ssh there is none
    for name in _TERMINALS:
        found = shutil.which(name)
        if found:
            return [found]
    return None


def start_terminal(folder: str) -> None:
    """Open a terminal in ``folder``, detached from us (its own session, no stdio of ours), and
    reap it when it ends. Raises Unavailable where none can be opened."""
    argv = terminal_argv(folder)
    if argv is None:
        raise Unavailable("no terminal to open here (set C3_TERMINAL to the command of one)")
    try:
        proc = subprocess.Popen(
            argv,
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        raise Unavailable(f"could not start {os.path.basename(argv[0])}: {exc.strerror or exc}") from None
    threading.Thread(target=proc.wait, name="terminal-reaper", daemon=True).start()


def open_terminal(project: Project, session_id: str) -> str:
    """The Hub's "Open a terminal here": a terminal in the folder of ``project``'s session
    ``session_id``, as the catalog knows it, only when that folder is one of ``project``'s checkouts
    (the project itself or a worktree of it: never a folder a transcript merely names). Returns
    the folder. Raises NotFound, Refused or Unavailable."""
    from ..ground.paths import canonical
    from ..ground.project import resolve
    from .view import row_for

    row = row_for(project, session_id)
    if row is None:
        raise NotFound(f"no session of {project} has the id {session_id}")
    if row.cwd_gone or not os.path.isdir(row.cwd):
        raise NotFound(f"{row.cwd} is gone: `c3async resume {session_id}` says how to bring it back")
    try:  # the folder checked is the folder opened: a link in the path is not followed twice
        folder = canonical(row.cwd)
        home: Project | None = resolve(folder)
    except (OSError, ValueError):
        folder, home = row.cwd, None
    if home != project:
        raise Refused(f"{folder} is not a checkout of {project}: no terminal is opened there")
    start_terminal(folder)
    return folder
