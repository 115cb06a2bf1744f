"""Rows of real transcripts and long chains, through the CLI, a real ``c3async serve`` over stdio
and the Hub:

- growth: 2,000 sessions chained by ``/clear`` (the timing and the hooks' record both say so):
  each row names its neighbours only, so ``sessions --json`` grows with its rows (it was 15 MiB
  for 200 rows, 150 MiB for all), and the whole chain is a detail's; 40 titles of 300 KB are cut
  to 2,000 characters in every listing (the Hub's 40-row page was 11 MiB) and whole in ``show``;
- a long first prompt: a plan handoff over 2,000 characters in a file of 100 KiB to 1 MiB, its
  later prompts in the head and a tail of tool output: the last prompt and every turn counted;
- a plan handoff: its first prompt names the previous session's transcript, and the two are one
  chain both ways in every door; a handoff naming itself, one naming a session that names it
  back, and a megabyte of the handoff's words make no loop and cost what any prompt does;
- an id found nowhere names the projects searched.

Every probe: no traceback, no hang, exit 0, 1 or 2, and the expected outcome.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path

from .harness import Result
from .probe import Probe, mcp, probe
from .transcripts import (
    assistant_line,
    claude_slug,
    clear_hooks,
    cleared_chain,
    render,
    titled_sessions,
    tool_result_line,
    user_line,
)

CLASS = "rows of real transcripts and long chains"

LINKS = 2000
TITLED = 40
TITLE_CHARS = 300_000
CAP = 2000  # characters of a prompt or a title a listing keeps
ROW_BYTES = 3000  # the most a row of these sessions may take, whatever its chain or title
HANDOFF_WORDS = (
    "\n\nIf you need specific details from before exiting plan mode (like exact code snippets, error messages, "
    "or content you generated), read the full transcript at: "
)


def _write(folder: Path, sid: str, lines: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{sid}.jsonl").write_bytes(render(lines))


def _session(folder: Path, cwd: str, first: str, later: list[str], ts: float, *, quiet: int = 0) -> str:
    """A session: ``first``, then each of ``later`` after a tool round, then ``quiet`` bytes of
    tool output with no prompt."""
    sid = str(uuid.uuid4())
    lines = [user_line(sid, cwd, first, ts)]
    for n, prompt in enumerate(later):
        a = assistant_line(sid, cwd, f"working on {n}", ts + 1, lines[-1]["uuid"])
        lines += [a, tool_result_line(sid, cwd, "ok " * 2000, ts + 2, a["uuid"])]
        lines.append(user_line(sid, cwd, prompt, ts + 3, lines[-1]["uuid"]))
        ts += 4
    while quiet > 0:
        a = assistant_line(sid, cwd, "still going", ts + 1, lines[-1]["uuid"])
        lines += [a, tool_result_line(sid, cwd, "x" * 16_000, ts + 2, a["uuid"])]
        quiet -= 16_500
        ts += 3
    _write(folder, sid, lines)
    return sid


def _get(port: int, token: str, path: str, **q: object) -> bytes:
    url = f"http://127.0.0.1:{port}{path}?" + urllib.parse.urlencode(q)
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.read()


def _json(p: Probe, what: str, *args: str) -> tuple[int, object]:
    proc = p.run(what, *args)
    try:
        return len(proc.stdout.encode()), json.loads(proc.stdout or "null")
    except ValueError:
        p.res.check(False, "every JSON output parses", f"{what}: {proc.stdout[:200]!r}")
        return 0, None


def check(res: Result, sb, quick: bool) -> None:
    from .hostile_neighbour import start_hub

    p = probe(res, sb, "rows")
    start = time.time() - 30 * 86400
    chained = p.project("chained")
    chain = cleared_chain(
        p.config / "projects" / claude_slug(chained), chained, LINKS, start=datetime.fromtimestamp(start, UTC)
    )
    clear_hooks(chained, chain)
    titled = p.project("titled")
    titles = titled_sessions(
        p.config / "projects" / claude_slug(titled),
        titled,
        TITLED,
        TITLE_CHARS,
        start=datetime.fromtimestamp(start, UTC),
    )
    app = p.project("app")
    folder = p.config / "projects" / claude_slug(app)
    plan = "Implement the following plan:\n\n" + "\n".join(f"{i}. step {i} " + "of the plan " * 10 for i in range(60))
    before = _session(folder, app, "plan the importer", ["what about errors?"], start)
    handoff = _session(
        folder,
        app,
        plan + HANDOFF_WORDS + str(folder / f"{before}.jsonl"),
        ["second", "third", "the last one"],
        start + 600,
        quiet=700_000,
    )
    loop_a, loop_b = str(uuid.uuid4()), str(uuid.uuid4())
    for me, other in ((loop_a, loop_b), (loop_b, loop_a)):
        _write(folder, me, [user_line(me, app, plan + HANDOFF_WORDS + f"/x/{other}.jsonl", start + 900)])
    itself = str(uuid.uuid4())
    _write(folder, itself, [user_line(itself, app, plan + HANDOFF_WORDS + f"/x/{itself}.jsonl", start + 950)])
    words = _session(folder, app, plan + HANDOFF_WORDS * 8000 + "/x/not-a-session", [], start + 1000)
    for project in (chained, titled, app):
        p.run(f"register {project}", "sessions", "--project", project, "--limit", str(LINKS))

    # growth: the chain
    t0 = time.perf_counter()
    size_200, rows_200 = _json(p, "sessions --json (the newest 200)", "sessions", "--project", chained, "--json")
    took_200 = time.perf_counter() - t0
    t0 = time.perf_counter()
    size_all, rows_all = _json(
        p, "sessions --json (all)", "sessions", "--project", chained, "--json", "--limit", str(LINKS)
    )
    took_all = time.perf_counter() - t0
    rows_all = rows_all if isinstance(rows_all, list) else []
    rows_200 = rows_200 if isinstance(rows_200, list) else []
    res.check(
        len(rows_all) == LINKS and len(rows_200) == 200, "every link is a row", f"{len(rows_all)}, {len(rows_200)}"
    )
    biggest = max((len(json.dumps(r)) for r in rows_all), default=0)
    res.check(biggest < ROW_BYTES, "a row's size does not grow with the chain", f"the largest row: {biggest} bytes")
    by_id = {r["id"]: r for r in rows_all}
    mid = LINKS // 2
    got = by_id.get(chain[mid], {})
    res.check(
        (got.get("chain_prev"), got.get("chain_next")) == ([chain[mid - 1]], [chain[mid + 1]]),
        "a row names its neighbours",
        str((got.get("chain_prev"), got.get("chain_next"))),
    )
    res.fig(
        f"sessions --json, {LINKS:,}-link chain",
        f"200 rows {size_200 / 1024:.0f} KiB ({took_200:.2f} s), all {size_all / 1048576:.2f} MiB ({took_all:.2f} s), "
        f"{size_all / max(1, len(rows_all)):.0f} B a row (was 15 MiB and 150 MiB)",
    )
    _, shown = _json(p, "show --json of the newest link", "show", chain[-1], "--project", chained, "--json")
    whole = (shown or {}).get("chain", {}) if isinstance(shown, dict) else {}
    res.check(
        whole.get("predecessors") == chain[-2::-1],
        "the detail has the whole chain",
        f"{len(whole.get('predecessors') or [])} predecessors of {LINKS - 1}",
    )

    # growth: the titles
    size_t, rows_t = _json(p, "sessions --json (titled)", "sessions", "--project", titled, "--json")
    rows_t = rows_t if isinstance(rows_t, list) else []
    res.check(
        all(len(r["title"]) <= CAP and r["title_truncated"] for r in rows_t) and len(rows_t) == TITLED,
        "a listing cuts a long title and says so",
        f"{[len(r['title']) for r in rows_t][:5]}",
    )
    res.fig(f"sessions --json, {TITLED} rows of {TITLE_CHARS // 1000} KB titles", f"{size_t / 1024:.0f} KiB")
    sid = next(iter(titles))
    _, shown = _json(p, "show --json of a titled session", "show", sid, "--project", titled, "--json")
    res.check(isinstance(shown, dict) and shown["row"]["title"] == titles[sid], "show has the whole title")

    # a long first prompt, the handoff, the loops
    _, rows_app = _json(p, "sessions --json (app)", "sessions", "--project", app, "--json")
    app_rows = {r["id"]: r for r in rows_app} if isinstance(rows_app, list) else {}
    h = app_rows.get(handoff, {})
    res.check(
        (h.get("last_prompt"), h.get("user_turns")) == ("the last one", 4),
        "a long first prompt hides no later prompt",
        f"{h.get('last_prompt')!r}, {h.get('user_turns')} turns, {h.get('size', 0) // 1024} KiB",
    )
    res.check(
        app_rows.get(before, {}).get("chain_next") == [handoff] and h.get("chain_prev") == [before],
        "a plan handoff joins the chain both ways",
        f"{app_rows.get(before, {}).get('chain_next')}, {h.get('chain_prev')}",
    )
    res.check(
        app_rows.get(itself, {}).get("chain_prev") == [] and words in app_rows,
        "a handoff naming itself, or a megabyte of its words, is a row like any other",
    )
    res.check(app_rows.get(loop_a, {}).get("chain_next") == [loop_b], "handoffs naming each other are listed")
    p.run("show of a handoff loop", "show", loop_a, "--project", app)

    # an id found nowhere
    nowhere = "0000dead-0000-4000-8000-000000000000"
    p.run(
        "show of an id found nowhere",
        "show",
        nowhere,
        "--project",
        app,
        expect=(1,),
        says=(app, chained, titled, str(p.config / "projects")),
    )

    # MCP
    answers = mcp(
        p,
        app,
        [
            ("c3_session", {"action": "list"}),
            ("c3_session", {"action": "show", "target": handoff}),
            ("c3_session", {"action": "show", "target": nowhere}),
        ],
    )
    res.check(
        not answers[1][0] and f"predecessors: {before}" in answers[1][1], "MCP show has the chain", answers[1][1][:300]
    )
    res.check(
        answers[2][0] and chained in answers[2][1],
        "MCP show of an id found nowhere names the projects",
        answers[2][1][:300],
    )
    listed = mcp(p, titled, [("c3_session", {"action": "list"}), ("c3_session", {"action": "show", "target": sid})])
    res.check(len(listed[0][1]) < TITLED * 200, "MCP list stays short", f"{len(listed[0][1])} characters")
    res.check(titles[sid] in listed[1][1], "MCP show has the whole title")

    # the Hub
    hub, port, token = start_hub(p.env)
    try:
        page = _get(port, token, "/api/rows", project=titled, limit=TITLED)
        res.check(
            len(page) < TITLED * ROW_BYTES * 2,
            "the Hub's page of long titles stays small",
            f"{len(page) / 1024:.0f} KiB",
        )
        chain_page = _get(port, token, "/api/rows", project=chained, limit=100)
        res.fig(
            f"Hub /api/rows, {TITLED} rows of {TITLE_CHARS // 1000} KB titles / 100 rows of the chain",
            f"{len(page) / 1024:.0f} KiB / {len(chain_page) / 1024:.0f} KiB (the first was 11 MiB)",
        )
        d = json.loads(_get(port, token, f"/api/sessions/{handoff}", project=app))
        res.check(
            d["chain"]["predecessors"] == [before] and d["row"]["chain_prev"] == [before],
            "the Hub's detail has the chain",
            str(d["chain"]),
        )
        d = json.loads(_get(port, token, f"/api/sessions/{sid}", project=titled))
        res.check(d["row"]["title"] == titles[sid], "the Hub's detail has the whole title")
    finally:
        hub.terminate()
        hub.wait(10)
        if hub.stderr is not None:
            hub.stderr.close()
    res.fig("probes", f"{p.runs} commands, 5 MCP calls, 4 Hub requests")
