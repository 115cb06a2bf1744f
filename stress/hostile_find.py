"""Finding by name, tag and file, fed hostile input: tags that are no words (markup, control
characters, 10,000 characters, 17 at once, a 33rd), a marks file with hand-written tag lines
(upper case, a number for a list, a million-word line, a tag line from the year 3000), titles
and notes full of FTS5 syntax and pathological regex bait, edit calls naming absurd paths
(a NUL, 100,000 characters, relative with no cwd, ``..`` chains, a number), ``files`` given a
typo, an empty path, ``/`` and a symlink loop, and the same over MCP. Every probe: no
traceback, no hang, exit 0, 1 or 2, and the expected outcome; search and files stay linear
(a title of 1 MB of one repeated letter costs what a short one does, within the time limit)."""

from __future__ import annotations

import json
import os
import time

from .harness import Result
from .probe import mcp, probe
from .transcripts import assistant_line, encode

CLASS = "find"


def _edit(sid: str, cwd: str, path: object, ts: float) -> dict:
    line = assistant_line(sid, cwd, "editing", ts)
    line["message"]["content"] = [{"type": "tool_use", "id": "toolu_x", "name": "Edit", "input": {"file_path": path}}]
    return line


def check(res: Result, sb, quick: bool) -> None:
    p = probe(res, sb, "find")
    app = p.project("app")
    ts = time.time() - 7200
    bait = "a" * (200_000 if quick else 1_000_000)
    edits = [
        _edit("x", app, f"{app}/src/real.py", ts),
        _edit("x", app, "relative/only.py", ts + 1),
        _edit("x", app, f"{app}/../app/./src/dots.py", ts + 2),
        _edit("x", app, "nul\x00byte", ts + 3),
        _edit("x", app, "/" + "p" * 100_000, ts + 4),
        _edit("x", app, 12345, ts + 5),
        _edit("x", app, ["/a/list"], ts + 6),
    ]
    sid = p.session(app, "edit some files", lines=edits)
    titled = p.session(
        app,
        "the baited one",
        lines=[
            {
                "type": "custom-title",
                "customTitle": '") OR NEAR(x y) * <script>alert(1)</script>\x1b[2J',
                "sessionId": "",
            },
            {"type": "ai-title", "aiTitle": bait, "sessionId": ""},
            {"type": "agent-name", "agentName": {"not": "a string"}, "sessionId": ""},
        ],
    )
    # tags: refused before anything is written
    for bad in ("<b>x</b>", "tab\there", "x" * 10_000, "-dash", "ctl\x1b[31m", ""):
        p.run(f"tag {bad[:12]!r}", "mark", "tag", sid, bad, "--project", app, expect=(1, 2), says=("tag",))
    p.run("17 tags at once", "mark", "tag", sid, *[f"t{i}" for i in range(17)], "--project", app, expect=(1,))
    p.run("32 tags", "mark", "tag", sid, *[f"t{i}" for i in range(16)], "--project", app)
    p.run("32 tags more", "mark", "tag", sid, *[f"u{i}" for i in range(16)], "--project", app)
    p.run("a 33rd tag", "mark", "tag", sid, "one-more", "--project", app, expect=(1,), says=("limit is 32",))
    marks = os.path.join(app, ".c3", "session_marks.jsonl")
    with open(marks, "ab") as f:  # hand-written lines: each counts for nothing, none breaks the fold
        for tags in (["UPPER"], 7, ["w"] * 1_000, [f"w{i}" for i in range(1_000_000 if not quick else 100_000)]):
            f.write(encode({"ts": ts, "id": sid, "op": "tag", "by": "user", "tags": tags}) + b"\n")
        f.write(encode({"ts": 32503680000, "id": sid, "op": "untag", "by": "user", "tags": ["t0"]}) + b"\n")
        f.write(b'{"ts": 1, "op": "tag", "tags": ["x"]\n')
    p.run(
        "a note of FTS5 syntax", "mark", "note", titled, "--summary", 'NEAR("a" "b") ^ col:* OR (((', "--project", app
    )
    rows = p.rows(app)
    tags = rows.get(sid, {}).get("tags", [])
    res.check(len(tags) == 32 and "upper" not in tags and "t0" in tags, "tags fold to what was written", f"{tags[:5]}")
    p.run("sessions --tag with markup", "sessions", "--tag", "<b>", "--project", app, expect=(1,), says=("tag",))
    # search: field hits, attacker text inert, bait linear
    started = time.perf_counter()
    found = p.run("search a word of the baited title", "search", "script", "--project", app, "--json")
    took = time.perf_counter() - started
    try:
        results = json.loads(found.stdout)["results"]
    except (ValueError, KeyError):
        results = []
    res.check([r["id"] for r in results] == [titled], "the title matches", f"{[r.get('fields') for r in results]}")
    res.check(results and results[0]["fields"][0] == "title", "it says which field matched", str(results[:1]))
    shown = p.run("search shown on a terminal's text", "search", "script", "--project", app)
    res.check("\x1b" not in shown.stdout, "no control character printed", repr(shown.stdout[:80]))
    for q in ('"', "NEAR(", "*", "a" * 2001):  # (a NUL cannot be an argument: MCP gives one below)
        p.run(f"search {q[:10]!r}", "search", q, "--project", app, expect=(0, 1, 2))
    p.run("search the bait", "search", "a" * 50, "--project", app)
    # files: what the edits named, the bad ones skipped
    got = p.run("files of the real file", "files", "src/real.py", "--project", app, "--json")
    try:
        touched = json.loads(got.stdout)["sessions"]
    except (ValueError, KeyError):
        touched = []
    res.check([t["id"] for t in touched] == [sid], "files finds the session that edited it", got.stdout[:200])
    folder = p.run("files of the folder", "files", app, "--json")
    try:
        paths = {c["path"] for t in json.loads(folder.stdout)["sessions"] for c in t["files"]}
    except (ValueError, KeyError):
        paths = set()
    sane = {f"{app}/src/real.py", f"{app}/src/dots.py", f"{app}/relative/only.py"}  # relative: in the line's cwd
    res.check(paths == sane, "only sane paths are kept", f"{sorted(paths)}")
    loop = os.path.join(app, "loop")
    os.symlink(loop, loop)
    for what, path, expect in (
        ("a typo", "src/rael.py", (1,)),
        ("an empty path", "", (1, 2)),
        ("a symlink loop", "loop", (0, 1)),
        ("the root", "/", (0,)),
        ("100,000 characters", "/" + "q" * 100_000, (1, 2)),
    ):
        p.run(f"files {what}", "files", path, "--project", app, expect=expect)
    res.check(took < 60, "search stays linear over a baited title", f"{took:.1f} s")
    if not quick:
        answers = mcp(
            p,
            app,
            [
                ("c3_session", {"action": "tag", "target": sid[:8], "data": "<script>"}),
                ("c3_session", {"action": "files", "target": "a\x00b"}),
                ("c3_session", {"action": "files", "target": "src/real.py", "data": "limit=x"}),
                ("c3_session", {"action": "list", "data": "tag=" + "x" * 400}),
                ("c3_session", {"action": "files", "target": "src/real.py"}),
            ],
        )
        res.check(
            [e for e, _ in answers] == [True, True, True, True, False],
            "MCP answers each call (errors as tool errors)",
            str(answers)[:300],
        )
    res.fig("probes", f"{p.runs} commands; search over a {len(bait):,}-character title {took:.2f} s")
