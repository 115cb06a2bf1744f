"""``docs/performance.md``'s figures, made from the measured ones: every block

    <!-- figures NAME -->
    ...
    <!-- /figures -->

of the document is the table of ``stress/figures/NAME.json`` (what ``python -m stress.NAME
--json FILE`` wrote), rendered here. The prose around the blocks says why; the numbers are only
in the blocks.

    python -m stress.report           rewrite docs/performance.md from stress/figures/
    python -m stress.report --check   exit 1 if the document is not what they render
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from .figures import FIGURES

DOC = Path(__file__).resolve().parents[1] / "docs" / "performance.md"
BLOCK = re.compile(r"<!-- figures (?P<name>[\w-]+) -->\n.*?<!-- /figures -->", re.S)


def _cell(text: str) -> str:
    return text.strip().replace("|", "\\|").replace("<", "&lt;").replace("\n", " ")


def table(name: str, doc: dict) -> str:
    """The block of one figures document: where it comes from, then a table a section."""
    lines = [f"<!-- figures {name} -->", f"`{doc['command']}`, {doc['measured']}; {doc['machine']}.", ""]
    for section in doc["sections"]:
        lines += [f"| {_cell(section['title'])} | | |", "|---|---|---|"]
        lines += [f"| {' | '.join(_cell(c) for c in row)} |" for row in section["rows"]]
        lines.append("")
    return "\n".join([*lines[:-1], "<!-- /figures -->"])


def render(text: str, figures: Path = FIGURES) -> str:
    """``text`` with every figures block made again from ``figures``."""

    def one(m: re.Match) -> str:
        path = figures / f"{m['name']}.json"
        return table(m["name"], json.loads(path.read_text()))

    return BLOCK.sub(one, text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stress.report", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only say whether the document is current (exit 1 if not)")
    args = ap.parse_args(argv)
    text = DOC.read_text()
    made = render(text)
    if args.check:
        if made != text:
            print(f"{DOC} is not what stress/figures/ renders: run python -m stress.report", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(made)
    return 0


if __name__ == "__main__":
    sys.exit(main())
