"""A benchmark's figures: a table printed as it is measured, and written as JSON with ``--json
FILE``. The JSON files in ``stress/figures/`` are the measured figures ``docs/performance.md``
shows: ``python -m stress.report`` renders its tables from them.

    t = Table("bench_server")
    t.section("the MCP server")
    t.add("idle RSS after a start on deleted caches", "77 MiB", "(budget: under 80 MiB)")
    t.done(args.json)  # prints; writes the JSON if a path was given
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

FIGURES = Path(__file__).resolve().parent / "figures"


def add_json_option(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON (stress/figures/ is the docs')")


class Table:
    def __init__(self, bench: str) -> None:
        self.bench = bench
        self.rows: list[tuple[str, str, str]] = []

    def add(self, label: str, value: str, extra: str = "") -> None:
        self.rows.append((label, value, extra))

    def section(self, title: str) -> None:
        self.rows.append(("", "", ""))
        self.rows.append((f"-- {title}", "", ""))

    def print(self) -> None:
        width = max((len(r[0]) for r in self.rows if r[1]), default=0)
        vwidth = max((len(r[1]) for r in self.rows), default=0)
        for label, value, extra in self.rows:
            if not value:
                print(label)
            else:
                print(f"{label:<{width}}   {value:>{vwidth}}  {extra}".rstrip())

    def document(self) -> dict:
        """What ``--json`` writes: the command, when and on what, then the sections' rows."""
        argv = list(sys.argv[1:])
        if "--json" in argv:  # the destination is not part of what was measured
            at = argv.index("--json")
            del argv[at : at + 2]
        sections: list[dict] = [{"title": "", "rows": []}]
        for label, value, extra in self.rows:
            if label.startswith("-- ") and not value:
                sections.append({"title": label[3:], "rows": []})
            elif label or value:
                sections[-1]["rows"].append([label, value, extra])
        return {
            "command": " ".join(["python", "-m", ".".join(filter(None, ("stress", self.bench))), *argv]),
            "measured": time.strftime("%Y-%m-%d"),
            "machine": f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, "
            f"load average {os.getloadavg()[0]:.1f} at the end",
            "sections": [s for s in sections if s["rows"]],
        }

    def done(self, json_path: str | None) -> None:
        """Print the table; write its JSON too if ``--json`` gave a path."""
        self.print()
        if json_path:
            self.save(json_path)

    def save(self, json_path: str) -> None:
        Path(json_path).write_text(dumps(self.document()))


def dumps(doc: dict) -> str:
    """The JSON of a document, a row a line (the files are read in diffs too)."""
    one = lambda v: json.dumps(v, ensure_ascii=False)  # noqa: E731
    sections = ",\n".join(
        f'  {{"title": {one(s["title"])}, "rows": [\n' + ",\n".join(f"   {one(r)}" for r in s["rows"]) + "]}"
        for s in doc["sections"]
    )
    head = "".join(f"{one(k)}: {one(v)},\n " for k, v in doc.items() if k != "sections")
    return f'{{{head}"sections": [\n{sections}]}}\n'
