"""What a command is about: the folder it works on, the projects it lists, the session it runs in.

The environment read here is the call's (``main(env=...)`` sets it for the call).
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from ..ground.term import inert_line
from .render import Screen

if TYPE_CHECKING:
    from ..ground.project import Project
from .typed import not_utf8


def env_session() -> str | None:
    """``CLAUDE_CODE_SESSION_ID`` (stored in marks, tasks and logs): refused if it is not UTF-8."""
    value = os.environ.get("CLAUDE_CODE_SESSION_ID")
    if value and not_utf8(value) is not None:
        from ..ground.errors import BadArgument

        raise BadArgument(
            "CLAUDE_CODE_SESSION_ID holds bytes that are not UTF-8, so it is no session "
            "id: unset it or give the id as an argument"
        )
    return value


def project_dir(given: str | None) -> str:
    """The folder a command works on: ``--project``, else ``CLAUDE_PROJECT_DIR``, else the cwd,
    which must be an existing directory (a typo is a usage error, exit 2: nothing is registered,
    created or written for it)."""
    from ..ground.errors import UsageError

    if given is not None:
        what, value = "--project", given
    elif os.environ.get("CLAUDE_PROJECT_DIR"):
        what, value = "CLAUDE_PROJECT_DIR", os.environ["CLAUDE_PROJECT_DIR"]
    else:
        try:
            return os.getcwd()
        except FileNotFoundError:
            raise UsageError(
                "the current directory no longer exists: cd into a project or give --project DIR"
            ) from None
    try:
        is_dir = os.path.isdir(value)
        exists = is_dir or os.path.lexists(value)
    except ValueError:  # a NUL
        is_dir = exists = False
    if not is_dir:
        why = "is not a directory" if exists else "no such directory"
        raise UsageError(f"{what} {value}: {why} (give the folder of a project)")
    return value


def projects(args: argparse.Namespace, screen: Screen) -> list[Project]:
    """The project the command is about (``--project``, else the current folder's), or with
    ``--all`` every project c3async knows: registered or found in Claude Code's folders. The
    CLI's door: every command's projects are resolved here, once."""
    from ..ground.paths import canonical
    from ..ground.project import Project, resolve

    # A repository's worktrees are one project with its main checkout: the state root.
    here = resolve(canonical(project_dir(args.project)))
    if not getattr(args, "all", False):
        return [here]
    from ..sessions.projects import known_projects
    from ..stores.claude_dirs import roots

    known = known_projects()
    found = [Project(p.path) for p in known]
    if args.project and here not in found:
        found.append(here)
    gone = [p.path for p in known if p.missing]
    if gone:
        screen.say(
            f"c3async: {len(gone)} project folder{'s' if len(gone) != 1 else ''} no longer "
            f"exist{'s' if len(gone) == 1 else ''} ({inert_line(', '.join(gone[:3]))}{' ...' if len(gone) > 3 else ''}); "
            f"{'its' if len(gone) == 1 else 'their'} sessions are listed (`c3async projects` says more)"
        )
    if not found:
        looked = ", ".join(str(r.projects) for r in roots())
        screen.say(f"c3async: Claude Code has no sessions yet (looked in {inert_line(looked)})")
    return found
