"""docs/cli.md's lists of commands, written from the parser: what ``--help`` says, as Markdown.

The page's prose is a person's; its two generated parts sit between ``<!-- begin: NAME -->`` and
``<!-- end: NAME -->`` lines: ``commands`` (one line a command, in ``c3async --help``'s order)
and ``reference`` (every command and action: its synopsis, its options and their help, its
examples). ``python -m c3async.cli.doc`` prints the page as it should be; with ``--write`` it
rewrites docs/cli.md in place. tests/test_cli_doc.py keeps the committed page current.

The synopses are made here, not by argparse (whose wrapping follows the terminal's width and
changes between Python versions), so the page is the same wherever it is written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .parser import build_parser

PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
_BEGIN = "<!-- begin: "


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, list[str], str, argparse.ArgumentParser]]:
    """(name, aliases, help, parser) of each subcommand, in ``--help``'s order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            by_parser: dict[int, list[str]] = {}
            for name, sub in action.choices.items():
                by_parser.setdefault(id(sub), []).append(name)
            out = []
            for choice in action._choices_actions:
                sub = action.choices[choice.dest]
                names = by_parser[id(sub)]
                out.append((names[0], names[1:], choice.help or "", sub))
            return out
    return []


def _metavar(action: argparse.Action) -> str:
    if action.choices is not None and action.metavar is None:
        return "|".join(str(c) for c in action.choices)
    metavar = action.metavar or (action.dest if not action.option_strings else action.dest.upper())
    if isinstance(metavar, tuple):
        return " ".join(metavar)
    if action.nargs == "+":
        return f"{metavar}..."
    return metavar


def _shown(action: argparse.Action) -> str:
    """An option or argument as typed: ``--limit N``, ``--json``, ``ID``."""
    if not action.option_strings:
        return _metavar(action)
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    return f"{', '.join(action.option_strings)} {_metavar(action)}"


def _documented(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in parser._actions
        if a.help is not argparse.SUPPRESS and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
    ]


def _synopsis(prog: str, parser: argparse.ArgumentParser) -> str:
    words = [prog]
    for a in _documented(parser):
        typed = _shown(a).split(", ")[-1] if a.option_strings else _shown(a)
        optional = (a.option_strings and not a.required) or a.nargs == "?"
        words.append(f"[{typed}]" if optional else typed)
    if _subcommands(parser):
        words.append(_sub_metavar(parser))
    return " ".join(words)


def _sub_metavar(parser: argparse.ArgumentParser) -> str:
    """What the subcommand is called in the usage line: OP, ACTION."""
    return next(str(a.metavar) for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def commands(parser: argparse.ArgumentParser) -> str:
    """The ``commands`` part: each command and what it does, as ``c3async --help`` lists them."""
    lines = ["| command | what it does |", "|---|---|"]
    for name, _aliases, help_, _sub in _subcommands(parser):
        lines.append(f"| [`{name}`](#c3async-{name}) | {_cell(help_)} |")
    return "\n".join(lines) + "\n"


def _section(prog: str, help_: str, parser: argparse.ArgumentParser, depth: int, aliases: list[str]) -> list[str]:
    out = [f"{'#' * depth} {prog}", ""]
    about = parser.description or (help_[:1].upper() + help_[1:] + "." if help_ else "")
    if about:
        out += [_cell(about), ""]
    if aliases:
        out += [f"Also spelled {', '.join(f'`{a}`' for a in aliases)}.", ""]
    out += ["```", _synopsis(prog, parser), "```", ""]
    documented = _documented(parser)
    if documented:
        out += ["| option | |", "|---|---|"]
        out += [f"| `{_cell(_shown(a))}` | {_cell(a.help or '')} |" for a in documented]
        out.append("")
    subs = _subcommands(parser)
    if subs:
        out += [f"{_sub_metavar(parser)} is one of:", ""]
        out += [f"- `{name}`: {_cell(h)}" for name, _a, h, _s in subs]
        out.append("")
    if parser.epilog:
        out += ["```", *(line.strip() for line in parser.epilog.splitlines()[1:]), "```", ""]
    for name, more, h, sub in subs:
        out += _section(f"{prog} {name}", h, sub, depth + 1, more)
    return out


def reference(parser: argparse.ArgumentParser) -> str:
    """The ``reference`` part: every command, then each of its ops or actions."""
    out: list[str] = []
    for name, aliases, help_, sub in _subcommands(parser):
        out += _section(f"c3async {name}", help_, sub, 3, aliases)
    return "\n".join(out)


PARTS = {"commands": commands, "reference": reference}


def rendered(page: str, parser: argparse.ArgumentParser | None = None) -> str:
    """``page`` with each generated part as ``parser`` (the command line's) says it now."""
    parser = parser or build_parser()
    out, pos = [], 0
    while (begin := page.find(_BEGIN, pos)) != -1:
        after = page.index("\n", begin) + 1
        name = page[begin + len(_BEGIN) : after].split()[0]
        out += [page[pos:after], PARTS[name](parser)]
        pos = page.index(f"<!-- end: {name} -->", after)
    return "".join(out) + page[pos:]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    page = rendered(PAGE.read_text(encoding="utf-8"))
    if argv == ["--write"]:
        PAGE.write_text(page, encoding="utf-8")
    elif argv:
        print("usage: python -m c3async.cli.doc [--write]", file=sys.stderr)
        return 2
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
