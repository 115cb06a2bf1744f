"""What rows and search results both show: the command that resumes a session (for a POSIX
shell) and how long ago it was active."""

from __future__ import annotations

import shlex

__all__ = ("ago", "resume_command")


def resume_command(
    cwd: str, session_id: str, branch: str | None = None, gone: bool = False, config_dir: str | None = None
) -> str:
    """``cd <cwd> && claude --resume <id>``, every part quoted for a POSIX shell (a folder name
    may hold a newline or a ``;``: pasted, the command still runs only what it says). For a
    session whose folder is gone (a removed worktree), a command that brings the worktree back
    first when its branch is known (Claude Code resumes by id only within the folder's
    project), else ``c3async resume <id>``, which says how to bring the folder back. No raw text
    ever goes in a comment. ``config_dir``: the Claude Code root the session lives in, when it is
    not the one Claude Code uses here: ``CLAUDE_CONFIG_DIR`` is set for claude."""
    claude = f"CLAUDE_CONFIG_DIR={shlex.quote(config_dir)} claude" if config_dir else "claude"
    if not gone:
        return f"cd {shlex.quote(cwd)} && {claude} --resume {session_id}"  # an id is a bare UUID
    if branch and branch != "HEAD":
        return (
            f"git worktree add {shlex.quote(cwd)} {shlex.quote(branch)} && "
            f"cd {shlex.quote(cwd)} && {claude} --resume {session_id}"
        )
    return f"c3async resume {session_id}"


def ago(then: float | None, now: float) -> str:
    """How long ago an epoch time was, in the largest whole unit: 3d, 5h, 12m, 40s ("?" if unknown)."""
    if then is None:
        return "?"
    secs = max(0.0, now - then)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{int(secs // size)}{unit}"
    return f"{int(secs)}s"
