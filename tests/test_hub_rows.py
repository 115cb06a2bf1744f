"""The Hub's one listing API, ``/api/rows``, against a real ``c3async hub``: server-side filter,
search, project, branch, sort and cursor paging over every registered project in one request,
counts per filter and per project, likely-stale rows ordered by their evidence with the reason,
older sessions on request, and the change stream carrying the rows that changed. Also the
CLI's ``sessions --limit`` above the newest 200 and what a capped listing says."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime

import pytest
from hubproc import wait_for

from stress.transcripts import simple_session

pytestmark = pytest.mark.process

OLD = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)


class World:
    def __init__(self, claude) -> None:
        self.claude = claude
        now = time.time()
        self.projects = [claude.project(name) for name in ("alpha", "beta", "gamma")]
        self.ids: dict[str, list[str]] = {}
        for n, p in enumerate(self.projects):
            folder = claude.folder(p)
            self.ids[p] = [
                simple_session(
                    folder,
                    p,
                    f"{p.rsplit('/', 1)[-1]} task {i:02d}",
                    mtime=now - 1000 * n - i,
                    branch="main" if i % 2 else "feature",
                    start=OLD if i >= 5 else None,
                )
                for i in range(12)
            ]
        a = self.projects[0]
        self.cleared = self.ids[a][7]
        log = claude.root / "work" / "alpha" / ".c3"
        log.mkdir(parents=True, exist_ok=True)
        (log / "activity.jsonl").write_text(
            json.dumps({"ts": now - 5000, "kind": "session_end", "session_id": self.cleared, "reason": "clear"}) + "\n"
        )
        for p in self.projects:
            assert claude.run("sessions", "--project", p).returncode == 0  # registered


@pytest.fixture(scope="module")
def world(module_claude):
    return World(module_claude)


def rows(client, **params) -> dict:
    r = client.get("/api/rows", params=params)
    assert r.status_code == 200, r.text
    return r.json()


def test_one_request_lists_every_project_with_counts(client, world):
    data = rows(client, limit=10)
    assert data["total"] == 36 and len(data["rows"]) == 10 and data["next"] == 10
    assert data["counts"]["all"] == 36
    assert {p["path"]: p["count"] for p in data["projects"]} == dict.fromkeys(world.projects, 12)
    acts = [r["last_activity"] for r in data["rows"]]
    assert acts == sorted(acts, reverse=True)
    assert "first_prompt" not in data["rows"][0] and "last_prompt" not in data["rows"][0]
    assert len(json.dumps(data["rows"][0])) < 1500


def test_cursor_pages_cover_every_row_once(client):
    seen, cursor = [], 0
    while cursor is not None:
        page = rows(client, limit=7, cursor=cursor)
        seen += [r["id"] for r in page["rows"]]
        cursor = page["next"]
    assert len(seen) == len(set(seen)) == 36


def test_filter_search_project_branch_and_sort(client, world):
    alpha = world.projects[0]
    data = rows(client, q="alpha task", sort="title", order="asc")
    titles = [r["title"] for r in data["rows"]]
    assert data["total"] == 12 and titles == sorted(titles)
    assert {p["path"]: p["count"] for p in data["projects"]}[world.projects[1]] == 0
    only = rows(client, project=alpha, branch="feature")
    assert only["total"] == 6 and all(r["branch"] == "feature" and r["project"] == alpha for r in only["rows"])
    assert only["counts"]["all"] == 6
    for bad in (
        {"filter": "nope"},
        {"sort": "nope"},
        {"order": "up"},
        {"limit": "-1"},
        {"cursor": "x"},
        {"project": "/no/such"},
        {"depth": "5"},
    ):
        assert client.get("/api/rows", params=bad).status_code == 400, bad


def test_likely_stale_is_ordered_by_evidence_and_says_why(client, world):
    data = rows(client, filter="likely", project=world.projects[0])
    assert data["sort"] == "evidence" and data["total"] == data["counts"]["likely"] > 0
    first = data["rows"][0]
    assert first["id"] == world.cleared and "ended by /clear" in first["why"]
    assert all(r["why"] for r in data["rows"])


def test_older_sessions_on_request(client, world, module_claude):
    p = world.projects[2]
    folder = module_claude.folder(p)
    older = [simple_session(folder, p, f"ancient {i}", mtime=time.time() - 10**6 - i) for i in range(200)]
    module_claude.run("sessions", "--project", p)
    assert wait_for(lambda: rows(client, project=p)["total"] == 200, timeout=15)
    data = rows(client, project=p)
    assert next(x for x in data["projects"] if x["path"] == p)["more"] is True
    deeper = rows(client, project=p, depth=400)
    assert deeper["total"] == 212 and set(older) <= {r["id"] for r in rows(client, project=p, limit=500)["rows"]}
    cli = module_claude.run("sessions", "--project", p, "--json")
    assert "200 of 212 sessions listed" in cli.stderr and "--limit" in cli.stderr
    assert len(json.loads(cli.stdout)) == 200
    more = module_claude.run("sessions", "--project", p, "--json", "--limit", "300")
    assert len(json.loads(more.stdout)) == 212 and "of" not in more.stderr


def test_the_change_stream_carries_the_rows_that_changed(hub, world, module_claude):
    target = world.ids[world.projects[1]][3]
    events: list[dict] = []
    ready = threading.Event()

    def listen() -> None:
        with hub.client() as c, c.stream("GET", "/api/events", timeout=30) as r:
            kind = None
            for line in r.iter_lines():
                if line.startswith("retry"):
                    ready.set()
                if line.startswith("event:"):
                    kind = line.split(":", 1)[1].strip()
                elif line.startswith("data:") and kind == "change":
                    events.append(json.loads(line.split(":", 1)[1]))
                    if any(row["id"] == target for e in events for row in e["rows"] or []):
                        return

    t = threading.Thread(target=listen, daemon=True)
    t.start()
    assert ready.wait(15)
    marked = module_claude.run("mark", "stale", target, "--reason", "done elsewhere", "--project", world.projects[1])
    assert marked.returncode == 0, marked.stderr
    t.join(20)
    row = next(row for e in events for row in e["rows"] or [] if row["id"] == target)
    assert row["stale"]["reason"] == "done elsewhere"
    assert all(len(e["rows"] or []) <= 3 for e in events)  # the rows that changed, not the listing
