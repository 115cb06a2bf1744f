"""The commands that serve or set up: the MCP server (`serve`), the Hub (`hub`), the hooks
(`hook`, `install-hooks`), the status line (`statusline`, `install-statusline`) and the shell's
completion (`completion`). `serve`, `hub` (without
``--url``) and `hook` are a process's own: they run until told to stop, or read the hook's
event from the process's stdin.
"""

from __future__ import annotations

import argparse

from ..ground.term import inert, inert_line
from . import scope
from .render import Screen

# Where a session id goes, the shell asks c3async's fast path (``c3async.completion``: ids and
# titles from the listings' cache, no parser); everywhere else argcomplete's function, which
# builds the parser. {ids} is the fast path's command line. argcomplete writes one script for
# bash and zsh, so one function serves both.
_SH_IDS = """
_c3async_complete() {
    local found
    if [[ -n "${ZSH_VERSION-}" ]]; then
        if found=$({ids} zsh $((CURRENT - 1)) "${words[@]}" 2>/dev/null); then
            local -a ids
            ids=("${(@f)found}")
            _describe -V session ids
            return
        fi
    elif found=$({ids} bash "$COMP_CWORD" "${COMP_WORDS[@]}" 2>/dev/null); then
        COMPREPLY=()
        [[ -n "$found" ]] && mapfile -t COMPREPLY <<< "$found"
        return 0
    fi
    _python_argcomplete "$@"
}
"""
_FISH_IDS = """
function __fish_c3async_ids
    set -l words (commandline -opc) (commandline -ct)
    {ids} fish (math (count $words) - 1) $words 2>/dev/null
    or __fish_c3async_complete
end
"""
# What argcomplete's script registers, and ours in its place (a test checks each is found).
_SWAPS = {
    "bash": [
        ("-F _python_argcomplete c3async", "-F _c3async_complete c3async"),
        ('        _python_argcomplete "$@"\n', '        _c3async_complete "$@"\n'),
        ("compdef _python_argcomplete c3async", "compdef _c3async_complete c3async"),
    ],
    "fish": [("-a '(__fish_c3async_complete)'", "-a '(__fish_c3async_ids)'")],
}
_SWAPS["zsh"] = _SWAPS["bash"]


def completion_script(shell: str) -> str:
    """The shell's completion script for ``c3async``: argcomplete's (commands and options), with
    session ids and their titles from c3async's fast path where an id goes."""
    import argcomplete

    from ..completion import command

    script = argcomplete.shellcode(["c3async"], shell=shell)
    for theirs, ours in _SWAPS[shell]:
        if theirs not in script:
            raise RuntimeError(f"argcomplete's {shell} script changed: {theirs!r} is not in it")
        script = script.replace(theirs, ours)
    if shell == "fish":
        return script.replace("\ncomplete --command", _FISH_IDS.replace("{ids}", command()) + "\ncomplete --command", 1)
    at = script.index('if [[ -z "${ZSH_VERSION-}" ]]; then\n    complete')
    return script[:at] + _SH_IDS.replace("{ids}", command()) + script[at:]


def cmd_completion(args: argparse.Namespace, screen: Screen) -> int:
    """The shell's completion script for ``c3async`` (argcomplete's, with session ids)."""
    screen.write(completion_script(args.shell))
    return 0


def cmd_serve(args: argparse.Namespace, screen: Screen) -> int:
    import gc

    # The MCP SDK's import builds ~120,000 objects (its protocol types are pydantic models) and
    # leaves ~1,000 of garbage: no collection during the import, and none ever walks the modules
    # again (they live as long as the process). Measured: ~50 ms less CPU to `initialize`.
    gc.disable()
    try:
        from ..server import serve
    finally:
        gc.freeze()
        gc.enable()
    return serve()


def cmd_hub(args: argparse.Namespace, screen: Screen) -> int:
    if args.url:
        return _hub_url(args, screen)
    from ..hub.server import run_hub

    return run_hub(args.host, args.port, args.open)


def _hub_url(args: argparse.Namespace, screen: Screen) -> int:
    """``hub --url``: the running Hubs' URLs (with their tokens), the newest first."""
    import msgspec

    from ..hub.server import running_hubs

    hubs = running_hubs()
    if args.json:
        screen.json(msgspec.json.encode([h._asdict() for h in hubs]))
    for hub in hubs if not args.json else ():
        screen.print(inert_line(hub.url))
    if not hubs:
        screen.say("c3async: no Hub is running; start one with `c3async hub`")
    return 0 if hubs else 1


def cmd_hook(args: argparse.Namespace, screen: Screen) -> int:
    from ..live.hooks import main as hook_main

    def last_chance(project: str) -> None:  # Claude Code starts: its cleanup follows within seconds
        from ..ground.paths import canonical
        from ..ground.project import resolve
        from ..sessions.act import last_chance

        last_chance(resolve(canonical(project)))

    return hook_main(on_start=last_chance)


def cmd_install_hooks(args: argparse.Namespace, screen: Screen) -> int:
    from ..live.hooks import install, settings_path, uninstall

    target = settings_path(None if args.user else scope.project_dir(args.project), args.user)
    if args.remove:
        removed = uninstall(target)
        screen.print(
            inert(
                f"removed the {', '.join(removed)} hooks from {target.path}"
                if removed
                else f"no c3async hooks in {target.path}"
            )
        )
        return 0
    added = install(target)
    if added:
        screen.print(inert(f"added {', '.join(added)} hooks to {target.path}"))
    else:
        screen.print(inert(f"the hooks are already in {target.path}"))
    return 0


def cmd_statusline(args: argparse.Namespace, screen: Screen) -> int:
    from ..statusline import run

    return run(args.then, screen.out)


def cmd_install_statusline(args: argparse.Namespace, screen: Screen) -> int:
    from ..live.hooks import settings_path
    from ..live.statusline import install, uninstall

    target = settings_path(scope.project_dir(args.project) if args.project else None, not args.project)
    screen.print(inert_line(uninstall(target) if args.remove else install(target)))
    return 0
