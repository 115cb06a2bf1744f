"""One declaration per action: the c3_task and c3_session actions are msgspec Structs, and the
MCP tools' parameters and their descriptions, the CLI's `tasks` subcommands and flags, and the
checks before anything is written all come from them. An argument added to a struct shows in
both doors and is checked, with no other edit. In process: no server, no subprocess."""

from __future__ import annotations

import argparse
from typing import Annotated, ClassVar

import pytest
from mcp.server.mcpserver import MCPServer

from c3async.cli.parser import build_parser
from c3async.cli.tasks import TaskWords as _TaskWords
from c3async.ground import schema
from c3async.ground.errors import BadArgument, TaskArgError
from c3async.ground.project import resolve
from c3async.serve import app as server
from c3async.serve import session_actions
from c3async.tasks import actions
from c3async.tasks import schema as task_schema

SEED_SESSION_SIGNATURE = ("action", "data", "reasoning", "description", "summary", "event_type", "target")


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _task_parser(action: str) -> argparse.ArgumentParser:
    return _subparsers(_subparsers(build_parser())["tasks"])[action]


def _shown_options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """What ``--help`` lists: positionals by metavar, flags by their first spelling."""
    out = {}
    for a in parser._actions:
        if a.help == argparse.SUPPRESS or a.dest in ("help", "project", "json"):
            continue
        out[a.option_strings[0] if a.option_strings else str(a.metavar)] = a
    return out


async def _tools(mcp: MCPServer) -> dict:
    return {t.name: t for t in await mcp.list_tools()}


# ------------------------------------------------------------------ the MCP tools


async def test_the_tools_parameters_are_the_arguments_their_actions_declare():
    tools = await _tools(server.mcp)
    for tool, actions_ in (("c3_task", task_schema.ACTION_TYPES), ("c3_session", session_actions.ACTION_TYPES)):
        props = tools[tool].input_schema["properties"]
        assert set(props) == {"action", *schema.arguments(actions_)}, tool
        for name in schema.arguments(actions_):
            assert props[name]["description"] == schema.described(actions_, name), (tool, name)
            assert (props[name]["type"], props[name]["default"]) == ("string", "")
        for action in actions_:  # each action's line, with what it takes, in the tool's description
            assert f"- {schema.usage(action)}\n" in tools[tool].description
        assert all(schema.name_of(a) in props["action"]["description"] for a in actions_)
    # the spec fixes c3_session's signature, order included
    assert tuple(tools["c3_session"].input_schema["properties"]) == SEED_SESSION_SIGNATURE


def test_a_parameter_says_what_it_is_for_each_action_and_its_limit():
    said = schema.described(task_schema.ACTION_TYPES, "title")
    assert said == (
        "add, update: the task's title (at most 500 characters). "
        "milestone_add: its name, as milestone (at most 200 characters)."
    )
    assert "add: p0 (first) to p3 (default p2)." in schema.described(task_schema.ACTION_TYPES, "priority")
    assert schema.usage(task_schema.Add).startswith("add(title, [description, status, priority, due, tags,")
    assert schema.usage(task_schema.Board) == "board(): the tasks by status, then each open milestone's"


# ------------------------------------------------------------------ the CLI


def test_each_tasks_subcommand_takes_what_its_action_declares():
    for action in task_schema.ACTION_TYPES:
        name = schema.name_of(action)
        parser = _task_parser(name)
        shown = _shown_options(parser)
        wanted = {}
        for f in schema.fields(action):
            spelled = f.param.spelled(f.name)
            if f.param.positional:
                wanted[f.param.metavar] = f
            elif spelled:
                wanted[spelled[0]] = f
                assert set(shown[spelled[0]].option_strings) == set(spelled), (name, f.name)
        assert set(shown) == set(wanted), name
        for key, f in wanted.items():
            assert shown[key].help == schema.helped(f), (name, key)
            assert shown[key].metavar == (f.param.metavar or f.name.upper()), (name, key)
        hidden = {o for a in parser._actions if a.help == argparse.SUPPRESS for o in a.option_strings}
        assert hidden == {old for f in schema.fields(action) for old in f.param.old_flags}, name
        assert parser.description.lower().startswith(action.__doc__.lower()), name


def test_the_cli_words_an_argument_as_its_action_spells_it(tmp_path):
    words = _TaskWords()
    assert [words.arg("update", n) for n in ("task_id", "blocked_by", "due")] == ["ID", "--blocked-by", "--due"]
    assert words.arg("milestone_add", "milestone") == "--title"  # its name, as a task's is given
    assert words.arg("link", "ref") == "SESSION" and words.arg("decision_delete", "ref") == "DECISION"
    task = actions.run(resolve(tmp_path), actions.Who(), "add", title="x")
    with pytest.raises(TaskArgError) as e:
        actions.run(resolve(tmp_path), actions.Who(), "update", task_id=task["id"])
    assert e.value.worded(words) == (
        "tasks update changed nothing: give --title, --description, --status, --priority, --due, --tags, "
        "--milestone or --blocked-by"
    )  # UPDATABLE: every argument of `update` but the task


# ------------------------------------------------------------------ the checks


@pytest.mark.parametrize("action", task_schema.ACTION_TYPES, ids=schema.name_of)
def test_every_task_argument_is_held_to_its_declared_limit(action):
    name = schema.name_of(action)
    for f in schema.fields(action):
        with pytest.raises(BadArgument) as e:
            task_schema.read(name, **{f.name: "x" * (f.param.limit + 1)})
        assert str(e.value).startswith(
            f"{f.name} is too long: {f.param.limit + 1:,} characters, the limit is {f.param.limit:,}"
        ), (name, f.name)


def test_session_limits_and_needs_are_the_declared_ones():
    assert {
        (schema.name_of(a), f.name): f.param.limit for a in session_actions.ACTION_TYPES for f in schema.fields(a)
    } == session_actions.LIMITS
    for action in session_actions.ACTION_TYPES:
        name = schema.name_of(action)
        for f in schema.fields(action):
            with pytest.raises(BadArgument, match=f"c3_session\\(action='{name}'\\) {f.name} is too long"):
                session_actions.validate(name, **{f.name: "y" * (f.param.limit + 1)})
        required = [f for f in schema.fields(action) if f.required]
        if required:  # the first one missing is named, with what it is
            with pytest.raises(BadArgument) as e:
                session_actions.validate(name)
            assert str(e.value) == f"c3_session(action='{name}') needs {required[0].name}: {required[0].param.needs}"


def test_an_argument_no_action_takes_is_refused_and_one_another_takes_is_checked():
    with pytest.raises(BadArgument, match="c3_task takes no argument 'colour'"):
        task_schema.read("list", colour="red")
    with pytest.raises(BadArgument, match="c3_session takes no argument 'colour'"):
        session_actions.validate("list", colour="red")
    # `board` takes no title, but a title is never longer than any action lets it be
    assert isinstance(task_schema.read("board", title="t" * 500), task_schema.Board)
    with pytest.raises(BadArgument, match="title is too long: 501 characters, the limit is 500"):
        task_schema.read("board", title="t" * 501)


def test_every_action_has_its_operation():
    assert set(actions._DO) == set(task_schema.ACTION_TYPES)
    assert set(session_actions._HANDLERS) == set(session_actions.ACTIONS)
    assert tuple(task_schema.BY_NAME) == actions.ACTIONS and set(actions.READ_ACTIONS) == {
        schema.name_of(a) for a in task_schema.ACTION_TYPES if a.reads
    }


def test_a_call_reads_into_typed_values():
    call = task_schema.read(" Add ", title="  ship it ", tags="UI, hub,ui", due="none", blocked_by="ABCD, 1234ef")
    assert call == task_schema.Add(title="ship it", tags=["hub", "ui"], due=None, blocked_by=["abcd", "1234ef"])
    update = task_schema.read("update", task_id="abcd", milestone="none", blocked_by="none", status=" Done")
    assert (update.milestone, update.blocked_by, update.status, update.title) == (None, [], "done", schema.UNSET)
    assert task_schema.read("milestones", status="all").status == {"open", "completed", "archived"}
    assert task_schema.read("list", status="done,all").status == {"done", "all"}


# ------------------------------------------------------------------ one edit: a new argument


class Flavoured(task_schema.Read, tag="board"):
    """the tasks by status, in a flavour"""

    example: ClassVar[str] = "c3async tasks board --flavour mint"
    flavour: Annotated[
        str, schema.Param("which flavour", 12, read=task_schema.one_of(("mint", "lime")), metavar="F")
    ] = "mint"


@pytest.fixture
def flavoured(monkeypatch):
    """``board`` with one more argument, declared in its struct and nowhere else."""
    declared = tuple(Flavoured if a is task_schema.Board else a for a in task_schema.ACTION_TYPES)
    monkeypatch.setattr(task_schema, "ACTION_TYPES", declared)
    monkeypatch.setitem(task_schema.BY_NAME, "board", Flavoured)
    return declared


async def test_an_argument_added_to_a_struct_shows_in_both_doors_and_is_checked(flavoured):
    mcp = MCPServer("probe")

    @mcp.tool()
    @server._takes(flavoured)
    async def probe(action: str, **args: str) -> str:
        return repr(task_schema.read(action, **args))

    props = (await _tools(mcp))["probe"].input_schema["properties"]
    assert props["flavour"]["description"] == "board: which flavour (default mint)."

    parser = _task_parser("board")
    assert _shown_options(parser)["--flavour"].help == "which flavour (default mint)"
    args = parser.parse_args(["--flavour", "lime"])
    assert ("arg_flavour", "flavour", "--flavour") in args.task_inputs and args.arg_flavour == "lime"

    assert task_schema.read("board", flavour="LIME") == Flavoured(flavour="lime")
    assert task_schema.read("board") == Flavoured(flavour="mint")
    with pytest.raises(TaskArgError) as e:
        task_schema.read("board", flavour="cherry")
    assert e.value.worded(_TaskWords()) == "--flavour must be one of mint, lime, got 'cherry'"
    with pytest.raises(BadArgument, match="flavour is too long: 13 characters, the limit is 12"):
        task_schema.read("board", flavour="m" * 13)
