"""A door of its own: the shell's completion of session ids (``c3async --complete``), which the
script ``c3async completion bash|zsh|fish`` prints calls on each Tab where a session id goes. It
runs without the command line's package, in a Python started isolated and without ``site``
(``command``), and imports the standard library and ``sessions.completion`` alone, which reads
the cache the listings write. Everywhere else (commands, options) the script asks argcomplete,
through the command line's parser.

``c3async --complete SHELL INDEX WORD...``: WORD... is the command line (``c3async`` first),
INDEX the word being completed. Exit 1, printing nothing, when that word is not a session id
(the script then asks argcomplete); else exit 0 and one candidate a line, as the shell takes
them: bash ``ID`` alone, or ``ID  TITLE`` when there are several (bash inserts what they have in
common, which is the ids' common start); zsh ``ID:TITLE``; fish ``ID<tab>TITLE``.
"""

from __future__ import annotations

import os
import sys

__all__ = ("FLAG", "command", "main")

FLAG = "--complete"


def command() -> str:
    """The command line the completion script runs: this Python, isolated and without ``site``,
    with c3async's folders on its path (as the status line's)."""
    import shlex

    from .live.statusline import isolated

    return shlex.join(isolated(FLAG))


def main(argv: list[str]) -> int:
    """``c3async --complete ARGV``: never a traceback, whatever the words hold."""
    from .sessions.completion import id_wanted, offered

    try:
        shell, at, words = argv[0], int(argv[1]), argv[2:]
    except (IndexError, ValueError):
        return 2
    if shell not in ("bash", "zsh", "fish") or not id_wanted(words, at):
        return 1
    prefix = words[at] if at < len(words) else ""
    try:
        found = offered(prefix, os.getcwd())
    except OSError:  # the folder it runs in is gone
        found = offered(prefix, "")
    if shell == "fish":
        lines = [f"{sid}\t{title}" for sid, title in found]
    elif shell == "zsh":
        lines = [f"{sid}:{title}" for sid, title in found]
    elif len(found) == 1:
        lines = [found[0][0]]
    else:
        lines = [f"{sid}  {title}" for sid, title in found]
    out = "".join(line + "\n" for line in lines).encode("utf-8", "replace")
    try:
        sys.stdout.buffer.write(out)
        sys.stdout.flush()
    except (BrokenPipeError, OSError):
        pass
    return 0
