"""Any id: another registered project's session shown, marked, resumed and linked from here; a
prefix two projects share."""

from __future__ import annotations

import shlex
from pathlib import Path

from .harness import Result
from .probe import mcp, probe

CLASS = "any id, any project"


def check(res: Result, sb, quick: bool) -> None:
    p = probe(res, sb, "any-id")
    here, there = p.project("here"), p.project("there")
    mine = p.session(here, "this project's")
    theirs = p.session(there, "the other project's", "eeee0001-0000-4000-8000-000000000001")
    p.session(there, "a twin", "ffff0001-0000-4000-8000-000000000001")
    p.session(here, "another twin", "ffff0002-0000-4000-8000-000000000002")
    for proj in (here, there):
        p.run("register", "sessions", "--project", proj)
    proc = p.run("show another project's session", "show", theirs[:8], "--project", here, says=(there,))
    res.check("the other project's" in proc.stdout, "show finds an id of any registered project", proc.stdout[:200])
    p.run("mark it", "mark", "note", theirs[:8], "--summary", "from here", "--project", here, says=(there,))
    marks = Path(there, ".c3", "session_marks.jsonl")
    res.check(marks.exists() and theirs in marks.read_text(), "a mark is written in the session's own project")
    proc = p.run("resume it", "resume", theirs[:8], "--print", "--project", here)
    res.check(shlex.split(proc.stdout)[:2] == ["cd", there], "resume runs in the session's own folder", proc.stdout)
    elsewhere = p.project("elsewhere")
    p.run("a prefix two projects share", "show", "ffff", "--project", elsewhere, expect=(1,), says=(here, there))
    answers = mcp(p, here, [("c3_session", {"action": "show", "target": theirs[:8]})])
    res.check(
        not answers[0][0] and there in answers[0][1],
        "the MCP server shows another project's session",
        answers[0][1][:200],
    )
    assert mine
    res.fig("probes", f"{p.runs} commands, 1 MCP server")
