"""Bad values: dates out of range at every door, wrong-typed settings and prices, a planted
search database, a 50 GB sparse transcript (timed: ``show --turns`` and two ``stats``)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from .harness import Result
from .probe import mcp, probe
from .transcripts import claude_slug

CLASS = "bad values"


def check(res: Result, sb, quick: bool) -> None:
    p = probe(res, sb, "bad-values")
    project = p.project("app")
    sid = p.session(project, "fix the retry budget")
    p.run("register", "sessions", "--project", project)
    for when in ("99999999999d", "9" * 5000 + "m", "0001-01-01", "9999-12-31T23:59:59-14:00"):
        for flag in ("--since", "--until"):
            p.run(
                f"search {flag} {when[:20]}",
                "search",
                "retry",
                "--project",
                project,
                flag,
                when,
                expect=(1, 2),
                says=("out of range",),
            )
    config = Path(project, ".c3", "config.json")
    for doc, key in (
        ({"idle_days": "x"}, "idle_days"),
        ({"mcp_resources": "all"}, "mcp_resources"),
        ({"idle_days": -1}, "idle_days"),
    ):
        config.write_text(json.dumps(doc))
        p.run(f"sessions with config {doc}", "sessions", "--project", project, expect=(1,), says=(key, "config.json"))
    config.unlink()
    prices = p.home / "prices.json"
    for doc in ({"m": {"input": "x", "output": 1}}, {"m": {"input": 1}}, [1], {"m": {"input": -1, "output": 1}}):
        prices.write_text(json.dumps(doc))
        p.run(f"stats with prices {doc}", "stats", "--project", project, expect=(1,), says=("prices.json",))
    prices.unlink()
    answers = mcp(p, project, [("c3_session", {"action": "search", "target": "retry", "data": "since=99999999999d"})])
    res.check(
        answers[0][0] and "out of range" in answers[0][1],
        "the MCP server answers a bad date with a tool error",
        answers[0][1][:200],
    )
    # a planted trigger in the search index
    import sqlite3

    p.run("index", "index", "--quiet")
    for db in (p.home / "search").glob("index-*.db"):
        conn = sqlite3.connect(db)
        conn.executescript(
            "CREATE TRIGGER planted AFTER INSERT ON files BEGIN SELECT count(*) FROM (WITH RECURSIVE "
            "c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c); END;"
        )
        conn.close()
    p.session(project, "a newer retry prompt")
    p.run("search with a planted trigger", "search", "retry", "--project", project)
    # a 50 GB sparse transcript
    path = p.config / "projects" / claude_slug(project) / f"{sid}.jsonl"
    with open(path, "ab") as f:
        f.write(b'{"type":"user","message":{"content":"')
    os.truncate(path, 50 * 2**30)
    times = {}
    for what, args in (
        ("show --turns 5", ["show", sid, "--project", project, "--turns", "5"]),
        ("stats (first)", ["stats", "--project", project]),
        ("stats (again)", ["stats", "--project", project]),
    ):
        t0 = time.perf_counter()
        p.run(f"{what} of a 50 GB sparse transcript", *args)
        times[what] = time.perf_counter() - t0
    res.fig("50 GB sparse transcript", ", ".join(f"{k} {v:.2f} s" for k, v in times.items()))
    res.fig("probes", f"{p.runs} commands, 1 MCP server")
