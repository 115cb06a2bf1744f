"""The root commits of a repository: what every clone and every moved checkout of it shares, and
so what tells that a folder is plausibly the project whose folder vanished.

A root commit is found only by walking the history back from ``HEAD``, through loose objects and
packs (with deltas): that is git's work, so git is asked, ``git rev-list --max-parents=0
--max-count=16 HEAD``, off every listing's path (``c3async projects`` asks, and keeps the answer
per folder until the folder's ``HEAD`` changes). The process is bounded and told nothing of ours:

- only a repository of this account is asked (git's own ``safe.directory`` rule: a stranger's
  ``.git/config`` can name commands); none is asked where ``.git`` is not there;
- ``GIT_*`` variables are dropped (a ``GIT_DIR`` of the caller's must not redirect it), discovery
  stops at the folder (``GIT_CEILING_DIRECTORIES``), no hooks, no fsmonitor, no pager, no
  prompt, no optional locks, no replace refs;
- it has ``TIMEOUT_S`` to answer (a history of a million commits without a commit-graph takes
  longer: it then has no root commit here) and at most 16 lines are read.
"""

from __future__ import annotations

import os
import re
import subprocess

from ..ground.paths import git_common_dir

__all__ = ("TIMEOUT_S", "root_commits")

TIMEOUT_S = 3.0
MAX_ROOTS = 16
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def _env(root: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CEILING_DIRECTORIES=os.path.dirname(root.rstrip(os.sep)) or os.sep,
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        GIT_PAGER="cat",
        GIT_NO_REPLACE_OBJECTS="1",
        LC_ALL="C",
    )
    return env


def root_commits(root: str) -> tuple[str, ...] | None:
    """The root commits of the repository whose main checkout (or bare folder) is ``root``,
    sorted; None when it is no repository of this account's, has no commit, or git could not
    say within ``TIMEOUT_S``."""
    common = git_common_dir(root)
    if common is None:
        return None
    try:
        if hasattr(os, "geteuid") and os.stat(common).st_uid != os.geteuid():
            return None
        proc = subprocess.run(
            [
                "git",
                "-c",
                "core.hooksPath=/dev/null",
                "-c",
                "core.fsmonitor=false",
                "rev-list",
                "--max-parents=0",
                f"--max-count={MAX_ROOTS}",
                "HEAD",
                "--",
            ],
            cwd=root,
            env=_env(root),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=TIMEOUT_S,
            check=False,
        )
    except (OSError, ValueError, subprocess.SubprocessError):
        return None  # no git, a folder gone meanwhile, too slow
    if proc.returncode != 0:
        return None
    found = [line for line in proc.stdout.decode("ascii", "replace").split() if _SHA.fullmatch(line)]
    return tuple(sorted(found[:MAX_ROOTS])) or None
