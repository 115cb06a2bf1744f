"""Real transcripts: a compaction's sub-agent, an orphaned sub-agent folder, a flat 2.0 agent
file and a 1.0.x inline sidechain (their hits opened in the Hub's reader), parallel batches
(every page of the reader holds each call with its result)."""

from __future__ import annotations

import json
import time
import uuid

from .harness import Result
from .probe import probe
from .transcripts import assistant_line, claude_slug, render, tool_result_line, user_line

CLASS = "real transcripts"


def check(res: Result, sb, quick: bool) -> None:
    from .hostile_neighbour import start_hub

    p = probe(res, sb, "real")
    project = p.project("app")
    folder = p.config / "projects" / claude_slug(project)
    now = time.time() - 600
    compacted = p.session(project, "compacted work")
    comp = folder / compacted / "subagents"
    comp.mkdir(parents=True)
    (comp / "agent-acompact-9f8e.jsonl").write_bytes(
        render([{**user_line(compacted, project, "Create a detailed summary, quodlibetzz", now), "isSidechain": True}])
    )
    orphan = str(uuid.uuid4())
    (folder / orphan / "subagents").mkdir(parents=True)
    (folder / orphan / "subagents" / "agent-x.jsonl").write_bytes(
        render([{**user_line(orphan, project, "an orphaned frobnicatezz", now), "isSidechain": True}])
    )
    flat_parent = p.session(project, "start the audit")
    (folder / "agent-5f6e7d8c.jsonl").write_bytes(
        render([{**user_line(flat_parent, project, "look into the quasarfluxzz module", now), "isSidechain": True}])
    )
    inline = p.session(
        project,
        "begin",
        lines=[
            {
                **user_line(str(uuid.uuid4()), project, "sub-task blorptanglezz", now + 2),
                "sessionId": None,
                "isSidechain": True,
            }
        ],
    )
    # parallel batches: calls in one line, results one line each
    batch_sid = str(uuid.uuid4())
    calls = [
        {"type": "tool_use", "id": f"toolu_{i:04d}", "name": "Bash", "input": {"command": f"c{i}"}} for i in range(12)
    ]
    lines = [user_line(batch_sid, project, "run them all", now)]
    a = assistant_line(batch_sid, project, "", now + 1, lines[0]["uuid"])
    a["message"]["content"] = calls
    lines.append(a)
    for i, c in enumerate(calls):
        r = tool_result_line(batch_sid, project, f"out {i}", now + 2, a["uuid"])
        r["message"]["content"][0]["tool_use_id"] = c["id"]
        lines.append(r)
    lines.append(user_line(batch_sid, project, "and then", now + 3))
    (folder / f"{batch_sid}.jsonl").write_bytes(render(lines))
    p.run("register", "sessions", "--project", project)
    found = json.loads(p.run("search compaction", "search", "quodlibetzz", "--project", project, "--json").stdout)
    res.check(found["results"] == [], "a compaction's sub-agent is not searched", str(found["results"])[:200])
    found = json.loads(p.run("search orphan", "search", "frobnicatezz", "--project", project, "--json").stdout)
    res.check(found["results"] == [], "an orphaned sub-agent folder is no hit", str(found["results"])[:200])
    hub, port, token = start_hub(p.env)
    opened = pages = split = 0
    try:
        import urllib.parse
        import urllib.request

        def get(path: str, **q: object) -> dict:
            url = f"http://127.0.0.1:{port}{path}?" + urllib.parse.urlencode(
                {k: v for k, v in q.items() if v is not None}
            )
            req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read())

        for word, sid in (("quasarfluxzz", flat_parent), ("blorptanglezz", inline)):
            results = get("/api/search", q=word, project=project)["results"]
            ok = len(results) == 1 and results[0]["id"] == sid
            res.check(ok, "a hit names its session", f"{word}: {results}")
            if not ok:
                continue
            sn = results[0]["snippets"][0]
            pg = get(f"/api/sessions/{sid}/conversation", at=sn["offset"], agent=sn.get("agent"), project=project)
            target = next((i for i in pg["items"] if i["offset"] == pg["target"]), {})
            opened += word in (target.get("text") or "")
            res.check(word in (target.get("text") or ""), "a hit opens the reader on its own item", f"{word}: {target}")
        for limit in (1, 3, 5):
            nxt: int | None = 0
            while nxt is not None:
                pg = get(f"/api/sessions/{batch_sid}/conversation", after=nxt, limit=limit, project=project)
                pages += 1
                for it in pg["items"]:
                    if it["kind"] == "tool" and not (
                        it.get("name")
                        and it.get("output") is not None
                        and pg["start"] <= it["result_offset"] < pg["end"]
                    ):
                        split += 1
                nxt = pg["next"]
    finally:
        hub.terminate()
        hub.wait(10)
        if hub.stderr is not None:
            hub.stderr.close()
    res.check(split == 0, "a reader page never separates a tool call from its result", f"{split} split")
    res.fig("probes", f"{p.runs} commands; {opened} hits opened on their item; {pages} reader pages, {split} split")
