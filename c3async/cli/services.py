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


def cmd_completion(args: argparse.Namespace, screen: Screen) -> int:
    """The shell's completion script for ``c3async`` (argcomplete writes it: bash, zsh, fish)."""
    import argcomplete

    screen.write(argcomplete.shellcode(["c3async"], shell=args.shell))
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
