"""Every declared argument, hostile, at both doors. The c3_task actions are declared once (their
structs, ``c3async.tasks.schema``) and each door is built from them: this walks the declarations
themselves, so an argument added tomorrow is probed too. Each argument of each action is given,
where it is taken (a flag, a positional, an MCP parameter): text one character over its limit,
bytes that are not UTF-8 (the CLI) or a NUL (the MCP server; a lone surrogate cannot cross its
JSON, ``tests/test_limits.py`` sends one in process), and escape
sequences, bidi controls and ``{placeholders}`` (``{action}``, ``{arg}``: the refusal templates'
own fields). Invariants: no traceback, exit 0, 1 or 2 (a refused argument: 2, naming it as the
door spells it), every MCP call a tool result (the refused ones an error naming the argument),
no raw control character in anything printed, and nothing written by a refusal.
"""

from __future__ import annotations

import os
from pathlib import Path

from .probe import mcp, probe

CLASS = "every declared argument, hostile, at both doors"

ESCAPES = "\x1b]52;c;AAAA\x07\x1b[2J\u202e{action} {arg} {0}"
CONTROLS = ("\x1b", "\x07", "\u202e", "\x9b")  # what must never reach a terminal raw
# the fields of the refusals' templates (``ground.errors.TaskError``): never printed unfilled
TEMPLATE_FIELDS = ("{got}", "{kind}", "{least}", "{listing}", "{allowed}", "{ref}", "{tag}", "{last}")


def _taken(action: type) -> list:
    from c3async.ground.schema import fields

    return list(fields(action))


def _cli_args(name: str, f, value: str) -> list[str]:
    """``tasks NAME`` with ``value`` for the argument ``f``, as its subcommand takes it (and what
    a required positional needs besides, so the probed argument is the one refused)."""
    from c3async.ground.schema import fields
    from c3async.tasks.schema import BY_NAME

    args = ["tasks", name]
    for other in fields(BY_NAME[name]):
        if other.name == f.name:
            continue
        if other.required and other.param.positional:
            args.append("abcd1234")
    if f.param.positional:
        return [*args, value]
    spelled = f.param.spelled(f.name) or f.param.old_flags
    return [*args, spelled[0], value]


def _pm(project: str) -> Path:
    return Path(project, ".c3", "pm", "pm.json")


def check(res, sb, quick: bool) -> None:
    from c3async.cli.tasks import TaskWords as _TaskWords
    from c3async.ground.schema import name_of
    from c3async.tasks.schema import ACTION_TYPES

    p = probe(res, sb, "schema")
    project = p.project("app")
    # a Claude Code session runs here: `tasks link` finds its session before it reads the task id
    p.env["CLAUDE_CODE_SESSION_ID"] = p.session(project, "the session the commands run in")
    words = _TaskWords()
    probes = [(name_of(a), f) for a in ACTION_TYPES for f in _taken(a)]

    # The CLI: each argument over its limit and not UTF-8 (quick: one of the two, in turn).
    for i, (name, f) in enumerate(probes):
        kinds = ("long", "bytes") if not quick else (("long", "bytes")[i % 2],)
        for kind in kinds:
            if not (f.param.positional or f.param.spelled(f.name) or f.param.old_flags):
                continue  # not on the CLI (milestone_add's title: --title is its name)
            value = "x" * (f.param.limit + 1) if kind == "long" else "caf" + os.fsdecode(b"\xe9")
            shown = words.arg(name, f.name) if (f.param.positional or f.param.spelled(f.name)) else None
            proc = p.run(
                f"tasks {name} {f.name} {kind}",
                *_cli_args(name, f, value),
                "--project",
                project,
                expect=(2,),
                says=(shown,) if shown else (),
            )
            res.check(
                not any(c in proc.stderr + proc.stdout for c in CONTROLS),
                "nothing raw reaches the terminal",
                f"tasks {name} {f.name}: {proc.stderr[-200:]!r}",
            )
    res.check(not _pm(project).exists(), "a refused argument writes nothing", str(_pm(project)))

    # The MCP server: every argument over its limit, with a NUL, with a lone surrogate.
    calls, expected = [], []
    for name, f in probes:
        for kind, value in (("long", "x" * (f.param.limit + 1)), ("nul", "a\x00b")):
            calls.append(("c3_task", {"action": name, f.name: value}))
            expected.append((name, f.name, kind))
    # and an argument the action does not take, over the largest limit any action gives it
    calls.append(("c3_task", {"action": "board", "title": "t" * 501}))
    expected.append(("board", "title", "long"))
    answers = mcp(p, project, calls)
    for (name, arg, kind), (is_error, text) in zip(expected, answers):
        res.check(
            is_error and arg in text,
            "a refused argument is an error naming it",
            f"c3_task({name}) {arg} {kind}: {text[:200]!r}",
        )
    res.check(not _pm(project).exists(), "a refused MCP call writes nothing", str(_pm(project)))

    # Escapes and placeholders are text: taken where text is, inert wherever printed.
    for i, (name, f) in enumerate(probes):
        if quick and i % 3:
            continue
        if not (f.param.positional or f.param.spelled(f.name)):
            continue
        proc = p.run(
            f"tasks {name} {f.name} escapes", *_cli_args(name, f, ESCAPES), "--project", project, expect=(0, 1, 2)
        )
        printed = proc.stderr + proc.stdout
        res.check(
            not any(c in printed for c in CONTROLS),
            "nothing raw reaches the terminal",
            f"tasks {name} {f.name}: {printed[-200:]!r}",
        )
        unfilled = [field for field in TEMPLATE_FIELDS if field in printed]
        res.check(
            not unfilled,
            "a refusal's own fields are filled (a caller's braces are only text)",
            f"tasks {name} {f.name}: {unfilled} in {printed[-200:]!r}",
        )
    res.fig("probes", f"{p.runs} commands, {len(calls)} MCP calls, over {len(probes)} declared arguments")
