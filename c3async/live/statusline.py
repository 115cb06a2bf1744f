"""``c3async install-statusline``: c3async's status line in Claude Code's settings (``statusLine``).

A status line you already have is kept and wrapped: ours runs yours first, on the same input,
and prints its line after yours (``statusline --then YOUR_COMMAND``). Your ``statusLine``'s
other keys (``padding``, ``refreshInterval``) stay; a ``refreshInterval`` is added where there
was none (Claude Code runs an idle window's status line only with one, and who waits elsewhere
changes while yours is idle), and the command says so (``--refresh-added``). ``--remove`` puts
your ``statusLine`` back as it was: the file's previous bytes exactly, when nothing else in it
changed since (the ``.c3async.bak`` install kept), else the settings with yours back in place.

The same care as ``install-hooks`` (``hooks``): never through a link, the previous file kept as
``<name>.c3async.bak`` (yours, ``settings.json.bak``, never touched), a file that is not JSON
left as it is.
"""

from __future__ import annotations

import json
import os
import shlex
import sys

TYPE_CHECKING = False  # the status line imports this module (``wrapped``): typing costs it 2 ms
if TYPE_CHECKING:
    from typing import Any

    from .hooks import SettingsFile

__all__ = ("REFRESH_S", "install", "isolated", "ours", "statusline_command", "uninstall", "wrapped")

REFRESH_S = 10  # seconds between an idle window's refreshes, where you set none
AGAIN = "install-statusline"


def statusline_command(theirs: str | None = None, refresh_added: bool = False) -> str:
    """The command Claude Code runs after each response of every window, so it starts as little
    as it can: this Python isolated (``-I``: no ``PYTHON*`` variable, no user site, and never
    the folder it runs in, a cloned repository, on its path) and without ``site`` (``-S``: no
    ``.pth`` file runs), the folders of c3async and its dependencies put on its path by the
    command itself (``BOOT``), after the standard library's. The byte-code folder this Python
    was told to use is kept (the plugin's environment writes none into the plugin's folder)."""
    argv = isolated("statusline")
    if theirs:
        argv += ["--then", theirs]
    if refresh_added:
        argv.append("--refresh-added")
    return shlex.join(argv)


def isolated(*args: str) -> list[str]:
    """``c3async ARGS`` as a command for what runs often and must start fast (the status line,
    the shell's completion): this Python, isolated and without ``site``, c3async's folders put
    on its path by the command itself."""
    argv = [sys.executable, "-I", "-S"]
    if sys.pycache_prefix:
        argv += ["-X", f"pycache_prefix={sys.pycache_prefix}"]
    return [*argv, "-c", BOOT.format(folders=json.dumps(_folders())), *args]


BOOT = "import sys; sys.path += {folders}; from c3async.__main__ import main; main()"
_BOOTED = "; from c3async.__main__ import main; main()"  # how ours() knows the command it wrote


def _folders() -> list[str]:
    """The folders this process found c3async and the dependencies the status line may import
    in (msgspec, to write; psutil, without /proc): a venv's, a user install's, the plugin's."""
    import importlib.util

    found: list[str] = []
    for name in ("c3async", "msgspec", "psutil"):
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin:
            continue
        where = os.path.dirname(os.path.dirname(os.path.abspath(spec.origin)))
        if where not in found:
            found.append(where)
    return found


def ours(command: Any) -> tuple[str | None, bool] | None:
    """For a command install wrote: (the command it wraps, whether it added refreshInterval);
    None for any other (a person's own that merely mentions c3async is never taken for ours).
    Both forms: ``-c BOOT statusline``, and ``-m c3async statusline`` of earlier versions."""
    if not isinstance(command, str) or len(command) > 65_536:
        return None
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    for at in range(len(argv) - 2):
        if argv[at : at + 3] == ["-m", "c3async", "statusline"] or (
            argv[at] == "-c" and argv[at + 1].endswith(_BOOTED) and argv[at + 2] == "statusline"
        ):
            return wrapped(argv[at + 3 :])
    return None


def wrapped(rest: list[str]) -> tuple[str | None, bool] | None:
    """The arguments install writes after ``statusline`` read: (the command it wraps, whether
    it added refreshInterval); None for any others. Imports nothing (the status line's path)."""
    theirs, added = None, False
    while rest:
        if rest[0] == "--then" and len(rest) > 1:
            theirs, rest = rest[1], rest[2:]
        elif rest[0] == "--refresh-added":
            added, rest = True, rest[1:]
        else:
            return None
    return theirs, added


def _snippet() -> str:
    return json.dumps(
        {"statusLine": {"type": "command", "command": statusline_command(), "refreshInterval": REFRESH_S}}
    )


def _current(target: SettingsFile) -> tuple[bytes, dict[str, Any], dict[str, Any] | None]:
    from ..ground.errors import Damaged
    from .hooks import read_settings

    data, settings = read_settings(target, _snippet(), AGAIN)
    line = settings.get("statusLine")
    if line is not None and not (isinstance(line, dict) and isinstance(line.get("command", ""), str)):
        raise Damaged(f"{target.path}: 'statusLine' is not a status-line object; fix it and run {AGAIN} again")
    return data, settings, line


def install(target: SettingsFile) -> str:
    """Set ours, wrapping yours; says what it did. Idempotent."""
    from .hooks import encode_settings, write_settings

    data, settings, line = _current(target)
    if line is not None and ours(line.get("command")) is not None:
        return f"c3async's status line is already in {target.path}"
    theirs = line.get("command") if line else None
    new = dict(line or {})
    added = "refreshInterval" not in new
    new.update(type="command", command=statusline_command(theirs or None, added))
    if added:
        new["refreshInterval"] = REFRESH_S
    settings["statusLine"] = new
    write_settings(target, data, encode_settings(settings), _snippet())
    kept = f", after yours ({theirs})" if theirs else ""
    return f"set c3async's status line in {target.path}{kept}"


def uninstall(target: SettingsFile) -> str:
    """Put back the ``statusLine`` that was there before install (or none); says what it did."""
    from .hooks import encode_settings, remove_empty, write_settings

    if not target.path.parent.is_dir():
        return f"no c3async status line in {target.path}"
    data, settings, line = _current(target)
    found = ours(line.get("command")) if line is not None else None
    if line is None or found is None:
        return f"no c3async status line in {target.path}"
    theirs, added = found
    if theirs:
        back = {k: v for k, v in line.items() if not (added and k == "refreshInterval")}
        back["command"] = theirs
        settings["statusLine"] = back
    else:
        del settings["statusLine"]
    before = _backup(target)
    if before is not None and before[1] == settings:  # nothing else changed since: its very bytes
        write_settings(target, data, before[0], _snippet())
    elif settings:
        write_settings(target, data, encode_settings(settings), _snippet())
    else:  # there was no settings file: none again (and a project's .claude, if empty, goes too)
        remove_empty(target, backup_too=False)
    return f"put back {'your status line' if theirs else 'no status line, as before'} in {target.path}"


def _backup(target: SettingsFile) -> tuple[bytes, Any] | None:
    """The backup's bytes and what they hold, when it is a settings file that parses."""
    from ..ground import safefs
    from ..ground.errors import DECODE_ERRORS
    from .hooks import MAX_SETTINGS, backup_path

    try:
        data = safefs.read_bytes(backup_path(target), limit=MAX_SETTINGS + 1, trusted=target.trusted)
        return data, json.loads(data.decode("utf-8", "replace")) if data.strip() else {}
    except (OSError, *DECODE_ERRORS):
        return None
