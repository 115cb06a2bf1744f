"""The actions of a tool, declared once.

An action is a msgspec Struct: its tag is the action's name (``class Add(Action, tag="add")``,
so a call is the tagged union ``{"action": "add", "title": ...}``), its docstring its one line
of help, its fields its arguments. Each field is annotated with a ``Param``: the argument's help,
its limit in characters, how its text is read (a reader returns the value, or ``UNSET`` when the
text gives none and the field keeps its default), what a call that lacks it is told, and how the
CLI spells it. A field without a default is required.

From them come what every door needs: an action's fields (``fields``), every argument of a tool
with the actions that take it (``arguments``), an argument's limit (``limit``), a call's text
read into its action's struct (``parse``), and the words for a person or a model: an action's
line (``usage``), an argument's help with its default (``helped``), and an argument's
description across the actions that take it (``described``). The MCP tool's parameters, the
CLI's flags and the checks before anything is written are built from these, in each door.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple, get_args, get_origin

import msgspec
from msgspec import UNSET, UnsetType

__all__ = (
    "UNSET",
    "Field",
    "Param",
    "UnsetType",
    "arguments",
    "described",
    "fields",
    "helped",
    "limit",
    "name_of",
    "parse",
    "text",
    "usage",
)


def text(value: str, name: str) -> str | UnsetType:
    """The reader of text kept as given; blank text gives none."""
    return value if value.strip() else UNSET


@dataclass(frozen=True)
class Param:
    """One argument of an action: what the doors show and check of it."""

    help: str
    limit: int  # characters, checked (with NUL and lone surrogates) before anything is written
    read: Callable[[str, str], Any] = text  # (text, argument name) -> value, or UNSET
    needs: str = ""  # what a call that lacks a required one is told it is ("needs title: ...")
    prose: bool = False  # free text: its description (the MCP parameter's) says its limit
    metavar: str = ""  # the CLI's placeholder (default: the name in capitals)
    positional: bool = False  # the CLI takes it without a flag, shown as its metavar
    flags: tuple[str, ...] | None = None  # the CLI's spellings (None: --name-with-dashes; (): none)
    old_flags: tuple[str, ...] = ()  # spellings of earlier versions: accepted, never shown

    def spelled(self, name: str) -> tuple[str, ...]:
        """The CLI's flags for the argument ``name`` (none for a positional)."""
        if self.positional:
            return ()
        return ("--" + name.replace("_", "-"),) if self.flags is None else self.flags


class Field(NamedTuple):
    name: str
    param: Param
    default: Any  # msgspec.NODEFAULT: required

    @property
    def required(self) -> bool:
        return self.default is msgspec.NODEFAULT


def name_of(action: type) -> str:
    """The action's name: its struct's tag."""
    return str(action.__struct_config__.tag)  # type: ignore[attr-defined]


@cache
def fields(action: type) -> tuple[Field, ...]:
    """The action's arguments, in the order its struct declares them."""
    out = []
    for info in msgspec.structs.fields(action):
        params = [m for m in get_args(info.type)[1:] if isinstance(m, Param)] if get_origin(info.type) else []
        if len(params) != 1:
            raise TypeError(f"{action.__name__}.{info.name} needs one Param in its annotation")
        default = info.default
        if info.default_factory is not msgspec.NODEFAULT:
            default = info.default_factory()
        out.append(Field(info.name, params[0], default))
    return tuple(out)


def arguments(actions: Sequence[type]) -> dict[str, list[tuple[type, Field]]]:
    """Every argument the ``actions`` take, in the order they first appear, with each action
    that takes it and its field there."""
    out: dict[str, list[tuple[type, Field]]] = {}
    for action in actions:
        for f in fields(action):
            out.setdefault(f.name, []).append((action, f))
    return out


def limit(actions: Sequence[type], action: type, name: str) -> int | None:
    """The most characters ``name`` may hold in a call of ``action``. An argument the action
    does not take is ignored, but held to the largest limit it has in any action, so no text
    goes unchecked; None for a name no action takes."""
    for f in fields(action):
        if f.name == name:
            return f.param.limit
    limits = [f.param.limit for _, f in arguments(actions).get(name, [])]
    return max(limits) if limits else None


def parse(action: type, args: Mapping[str, str], needs: Callable[[Field], Exception]) -> Any:
    """The call of ``action`` whose arguments are the text ``args``: each field read by its
    Param's reader, in the struct's order; one the text gives none of keeps its default, or,
    required, raises ``needs(field)``."""
    values = {}
    for f in fields(action):
        value = f.param.read(args.get(f.name) or "", f.name)
        if value is UNSET:
            if f.required:
                raise needs(f)
            continue
        values[f.name] = value
    return action(**values)


def helped(f: Field) -> str:
    """The argument's help, with its default when the default is a word (``(default p2)``)."""
    if isinstance(f.default, str) and f.default:
        return f"{f.param.help} (default {f.default})"
    return f.param.help


def usage(action: type) -> str:
    """``name(required, [optional, ...]): help``, one action as a tool's description lists it."""
    takes = [f.name for f in fields(action) if f.required]
    optional = [f.name for f in fields(action) if not f.required]
    if optional:
        takes.append(f"[{', '.join(optional)}]")
    return f"{name_of(action)}({', '.join(takes)}): {action.__doc__}"


def described(actions: Sequence[type], name: str) -> str:
    """What the argument ``name`` means for each action that takes it, actions that mean the
    same grouped: ``add, update: the task's title (at most 500 characters). list: ...``."""
    said: dict[str, list[str]] = {}
    for action, f in arguments(actions)[name]:
        words = helped(f) + (f" (at most {f.param.limit:,} characters)" if f.param.prose else "")
        said.setdefault(words, []).append(name_of(action))
    if len(said) == 1 and len(actions) == len(next(iter(said.values()))):
        return next(iter(said))
    return " ".join(
        f"{', '.join(names)}: {words}" + ("" if words.endswith(".") else ".") for words, names in said.items()
    )
