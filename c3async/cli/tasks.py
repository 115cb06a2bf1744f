"""`c3async tasks`: the c3_task actions from the terminal. Each action's subcommand, flags and
help come from its declaration (``tasks.schema``), and a task error is worded in those flags
(:class:`TaskWords`, read where the CLI says an error).
"""

from __future__ import annotations

import argparse

from . import scope
from .render import Screen


class TaskWords:
    """How the CLI words a task error (``ground.errors.Words``): `tasks add needs --title`, an
    argument by how the action's own parser spells it (``tasks.schema``)."""

    def action(self, action: str) -> str:
        return f"tasks {action}"

    def arg(self, action: str, name: str) -> str:
        from ..ground.schema import fields
        from ..tasks.schema import BY_NAME

        for f in fields(BY_NAME[action]) if action in BY_NAME else ():
            if f.name == name and (f.param.positional or f.param.spelled(name)):
                return f.param.metavar if f.param.positional else f.param.spelled(name)[0]
        return "--" + name.replace("_", "-")

    def call(self, action: str, args: tuple[tuple[str, str], ...] = ()) -> str:
        return " ".join(["c3async tasks", action, *(f"{self.arg(action, name)} {value}" for name, value in args)])


def _task_args(args: argparse.Namespace) -> dict[str, str]:
    """The c3_task arguments typed, by their c3_task names; one given two ways must agree."""
    from ..ground.errors import UsageError

    given: dict[str, tuple[str, str]] = {}  # c3_task argument -> (value, as typed)
    for dest, arg, typed in args.task_inputs:
        value = getattr(args, dest, None)
        if not value:
            continue
        if arg in given and given[arg][0] != value:
            raise UsageError(f"tasks {args.task_action} takes {given[arg][1]} once (got {given[arg][1]} and {typed})")
        given[arg] = (value, typed)
    return {arg: value for arg, (value, _) in given.items()}


def cmd_tasks(args: argparse.Namespace, screen: Screen) -> int:
    import msgspec

    from ..sessions.act import run_task
    from ..tasks import actions, text

    action = args.task_action
    given = _task_args(args)
    project = scope.projects(args, screen)[0]
    who = actions.Who(session=scope.env_session(), by="user")
    result = run_task(project, who, action, **given)  # a refusal is worded by _said, in --flags
    if args.json:
        screen.json(msgspec.json.format(msgspec.json.encode(result), indent=2))
    elif action in actions.READ_ACTIONS:
        lines, empty = text.shown(action, result, given)
        if lines:
            screen.print("\n".join(lines))
        if empty:
            screen.say(empty)
    else:
        screen.print(text.said(action, result, given))
    return 0
