"""The command that resumes a session, for a POSIX shell (rows and search results carry it)."""

from __future__ import annotations

import shlex

__all__ = ("resume_command",)


def resume_command(cwd: str, session_id: str, branch: str | None = None, gone: bool = False) -> str:
    """``cd <cwd> && claude --resume <id>``, quoted for a POSIX shell. For a session whose folder
    is gone (a removed worktree), a command that brings the worktree back first when its branch
    is known (Claude Code resumes by id only within the folder's project), else that says why."""
    if not gone:
        return f"cd {shlex.quote(cwd)} && claude --resume {session_id}"  # an id is a bare UUID
    if branch and branch != "HEAD":
        return (
            f"git worktree add {shlex.quote(cwd)} {shlex.quote(branch)} && "
            f"cd {shlex.quote(cwd)} && claude --resume {session_id}"
        )
    return f"# {cwd} is gone: recreate it (git worktree add {shlex.quote(cwd)} <branch>), then: claude --resume {session_id}"
