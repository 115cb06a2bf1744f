"""The Claude Code roots c3async reads. People keep a work and a personal account apart with a
``CLAUDE_CONFIG_DIR`` per shell alias; each such config dir holds its own transcripts
(``projects/``) and running sessions (``sessions/``). Read, in this order: the default root
(``$CLAUDE_CONFIG_DIR``, else ``~/.claude``), ``$CLAUDE_CONFIG_DIRS`` (colon-separated),
``claude_dirs`` in ``$C3_HOME/config.json``, and every root a registered project's sessions were
found in (so a listing run without the variable that found them still finds them)."""

from __future__ import annotations

import logging
import os

from ..catalog.locate import ClaudeRoot, claude_roots
from ..ground import memo
from ..ground.home import c3_home
from . import config, registry

__all__ = ("roots",)

log = logging.getLogger("c3async")


_held: tuple[tuple, tuple[ClaudeRoot, ...]] | None = None


@memo.on_forget
def _forget() -> None:
    global _held
    _held = None


def _signature() -> tuple:
    """What the answer depends on, cheaply: the variables, and the stat of the two files."""
    out: list[object] = [os.environ.get(k) for k in ("CLAUDE_CONFIG_DIR", "CLAUDE_CONFIG_DIRS", "HOME")]
    out.append(str(c3_home()))
    for name in ("config.json", "projects.json"):
        try:
            st = os.stat(c3_home() / name)
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append(None)
    return tuple(out)


def roots() -> tuple[ClaudeRoot, ...]:
    """Every root to read, the default first (see the module's docstring). Answered again only
    when a variable or one of the files it reads changed (the Hub asks several times a second)."""
    global _held
    sig = _signature()
    if _held is not None and _held[0] == sig:
        return _held[1]
    found = _roots()
    _held = (sig, found)
    return found


def _roots() -> tuple[ClaudeRoot, ...]:
    extra: list[str] = list(config.load().claude_dirs)  # a bad setting is an error, as every setting's
    try:
        extra += registry.remembered_roots()
    except Exception as exc:  # a registry that does not parse is said by the listing of projects
        log.debug("remembered roots not read: %s", exc)
    return claude_roots(extra)
