"""docs/cli.md's lists of commands are the parser's: every command, action and option, with its
help, in ``c3async --help``'s order. ``python -m c3async.cli.doc --write`` writes them."""

from __future__ import annotations

import argparse

from c3async.cli import doc
from c3async.cli.parser import build_parser


def test_the_committed_page_is_what_the_parser_says() -> None:
    page = doc.PAGE.read_text(encoding="utf-8")
    assert doc.rendered(page) == page, "docs/cli.md is behind the parser: python -m c3async.cli.doc --write"


def test_every_command_action_and_option_is_on_the_page() -> None:
    page = doc.PAGE.read_text(encoding="utf-8")
    found = 0

    def walk(prog: str, parser: argparse.ArgumentParser) -> None:
        nonlocal found
        assert f"#### {prog}\n" in page or f"### {prog}\n" in page, prog
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    if name in {c.dest for c in action._choices_actions}:  # aliases are said once
                        walk(f"{prog} {name}", sub)
            elif action.help not in (argparse.SUPPRESS, None) and action.option_strings[:1] != ["-h"]:
                found += 1
                assert f"| {doc._cell(action.help)} |" in page, (prog, action.dest)

    for name, _aliases, _help, sub in doc._subcommands(build_parser()):
        walk(f"c3async {name}", sub)
    assert found > 150  # the tasks' actions included


def test_the_commands_are_listed_in_the_order_help_lists_them() -> None:
    page = doc.PAGE.read_text(encoding="utf-8")
    names = [name for name, *_ in doc._subcommands(build_parser())]
    listed = page.index("<!-- begin: commands")
    assert [page.index(f"[`{n}`]", listed) for n in names] == sorted(page.index(f"[`{n}`]", listed) for n in names)
    assert [page.index(f"\n### c3async {n}\n") for n in names] == sorted(
        page.index(f"\n### c3async {n}\n") for n in names
    )


def test_a_change_to_the_parser_shows_on_the_page() -> None:
    page = doc.PAGE.read_text(encoding="utf-8")
    parser = build_parser()
    sessions = doc._subcommands(parser)[0][3]
    sessions.add_argument("--newest", action="store_true", help="only the newest session")
    again = doc.rendered(page, parser)
    assert again != page and "| `--newest` | only the newest session |" in again
    assert doc.rendered(again) == page  # and written again from the parser as it is, back as it was
