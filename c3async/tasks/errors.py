"""The task store's errors, written once and worded by each door in its own syntax.

A message names an argument or another action through a placeholder: ``{action}`` is the action
that failed, ``{title}`` (any name given as ``Arg``) one of its arguments, a ``Call`` another
action to try. The MCP tool says ``c3_task(action='add') needs title``; the CLI, with its flags,
``tasks add needs --title``. ``str()`` is the MCP wording, so a door that does nothing special
says what the MCP tool says.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from ..ground.errors import BadArgument, C3Error

__all__ = ("MCP", "Arg", "Call", "Door", "TaskArgError", "TaskError")


class Arg(NamedTuple):
    """An argument of the action that failed, by its MCP name (``task_id``, ``blocked_by``)."""

    name: str


class Call(NamedTuple):
    """Another action to suggest, with the arguments to show (MCP names, shown values)."""

    action: str
    args: tuple[tuple[str, str], ...] = ()


class Door(Protocol):
    def action(self, action: str) -> str:
        """How this door names the action that failed (``{action}``)."""
        ...

    def arg(self, action: str, name: str) -> str:
        """How this door names ``action``'s argument ``name``."""
        ...

    def call(self, action: str, args: tuple[tuple[str, str], ...] = ()) -> str:
        """How this door writes a call of ``action`` with ``args``."""
        ...


class _Mcp:
    def action(self, action: str) -> str:
        return self.call(action)

    def arg(self, action: str, name: str) -> str:
        return name

    def call(self, action: str, args: tuple[tuple[str, str], ...] = ()) -> str:
        shown = [f"action={action!r}", *(f"{name}={value!r}" for name, value in args)]
        return f"c3_task({', '.join(shown)})"


MCP: Door = _Mcp()


class TaskError(C3Error):
    """A refusal of the task store. ``template`` is ours (``str.format`` fields); what a caller
    gave goes in ``parts`` as plain text, so it is never read as a field. ``action`` is set by
    ``actions.run`` on the way out."""

    def __init__(self, template: str, **parts: str | Arg | Call) -> None:
        super().__init__(template)
        self.template = template
        self.parts = parts
        self.action = ""

    def worded(self, door: Door) -> str:
        fields: dict[str, str] = {"action": door.action(self.action) if self.action else "c3_task"}
        for key, part in self.parts.items():
            if isinstance(part, Arg):
                fields[key] = door.arg(self.action, part.name)
            elif isinstance(part, Call):
                fields[key] = door.call(part.action, part.args)
            else:
                fields[key] = part
        return self.template.format_map(fields)

    def __str__(self) -> str:
        return self.worded(MCP)


class TaskArgError(TaskError, BadArgument):
    """A missing or malformed argument, found before the store is read (the CLI: a usage error)."""


def about(arg: str, exc: BadArgument) -> TaskArgError:
    """``exc``, a ground message that begins with the argument's name (``check_text``), as a
    TaskArgError that lets each door name the argument."""
    text = str(exc)
    rest = text[len(arg) :] if text.startswith(arg) else f": {text}"
    return TaskArgError("{arg}" + rest.replace("{", "{{").replace("}", "}}"), arg=Arg(arg))
