"""The Hub's JSON API and its guards, against the real ``c3async hub`` subprocess.

Two registered projects: ``alpha`` (a plain directory whose rows never change, for the filters
and the search) and ``beta`` (a git repository with a worktree, where the tests write marks).
"""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from hubproc import NOW, Hub, httpx, hub_session, sessions_ids

OLD = NOW - timedelta(days=30)
FIRST = "zebra-needle-4711: please refactor the payment module"
LAST = "quokka-tail-0815: and now write the migration notes"
LISTING_KEYS = {"id", "title", "live", "hints", "stale", "note", "links", "resume", "project", "cwd"}
PROMPT_KEYS = {"first_prompt", "last_prompt", "first_prompt_truncated", "last_prompt_truncated"}


_session = hub_session


def _git(*args: str, cwd: str) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main",
                    *args], cwd=cwd, env=env, check=True, capture_output=True)


class World:
    def __init__(self, claude) -> None:
        self.claude = claude
        # alpha: every kind of row the filters tell apart
        a = self.alpha = claude.project("alpha")
        fa = claude.folder(a)
        three = ["Add the endpoint", "Write its tests", "Update the docs"]
        self.healthy = _session(fa, a, three, title="Healthy endpoint work")
        self.live = _session(fa, a, three, title="Live session in progress")
        self.hinted = _session(fa, a, ["Fix the flaky retry test"], start=OLD)
        steps = [FIRST] + [f"step {i}: keep going" for i in range(2, 10)] + [LAST]
        self.secret = _session(fa, a, steps, title="Payment refactor", start=OLD)
        self.staled = _session(fa, a, ["Try the old approach"], title="Old approach", start=OLD)
        self.noted = _session(fa, a, ["Look into the cache"], title="Cache look", start=OLD)
        # beta: a git repository with a worktree; the mark tests write here
        b = self.beta = claude.project("beta")
        _git("init", "-q", cwd=b)
        _git("commit", "-q", "--allow-empty", "-m", "init", cwd=b)
        _git("worktree", "add", "-q", "-b", "feature", "../beta-wt", cwd=b)
        self.worktree = os.path.realpath(os.path.join(b, "..", "beta-wt"))
        fb = claude.folder(b)
        self.pred = _session(fb, b, three, title="First try at the parser")
        self.succ = _session(fb, b, three, title="Second try at the parser")
        self.marked = _session(fb, b, three, title="Session the mark tests mark")
        self.guarded = _session(fb, b, three, title="Session the guard tests aim at")
        self.sse = _session(fb, b, three, title="Session marked from the CLI")
        self.wt = _session(claude.folder(self.worktree), self.worktree, three, title="Worktree work",
                           branch="feature")
        # register both projects, as `c3async sessions --project P` does
        self.rows_a = claude.rows_by_id(a)
        self.rows_b = claude.rows_by_id(b)
        for args in (("stale", self.staled, "--reason", "superseded by the new approach"),
                     ("note", self.noted, "--summary", "cache looked at", "--next", "nothing")):
            proc = claude.run("mark", args[0], "--project", a, *args[1:])
            assert proc.returncode == 0, proc.stderr
        hb = Path(a) / ".c3" / "live"
        hb.mkdir(parents=True, exist_ok=True)
        # a fresh heartbeat (TTL 180 s: longer than this module runs) makes `live` live
        (hb / "c3-live.json").write_text(json.dumps({
            "session_id": "c3-live", "host_session_id": self.live, "ide": "terminal", "pid": os.getpid(),
            "ts": time.time(),
        }))

    def marks_lines(self, project: str) -> int:
        path = Path(project) / ".c3" / "session_marks.jsonl"
        return len(path.read_bytes().splitlines()) if path.exists() else 0


@pytest.fixture(scope="module")
def world(module_claude) -> World:
    return World(module_claude)


@pytest.fixture(scope="module")
def hub(world):
    h = Hub(world.claude).start()
    try:
        yield h
    finally:
        h.stop()


@pytest.fixture
def client(hub):
    with hub.client() as c:
        yield c


def _rows(client, **params) -> list[dict]:
    r = client.get("/api/sessions", params=params)
    assert r.status_code == 200, r.text
    return r.json()["rows"]


def _post(client, hub, sid: str, body: dict, **headers) -> httpx.Response:
    h = {"X-C3-Token": hub.token, **headers}
    return client.post(f"/api/sessions/{sid}/marks", json=body, headers={k: v for k, v in h.items() if v is not None})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    for host in ("127.0.0.1", "0.0.0.0"):
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex((host, port)) == 0:
                return True
    return False


# --- security ----------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5"])
def test_non_loopback_host_is_refused(world, host):
    port = _free_port()
    proc = subprocess.run(
        [sys.executable, "-m", "c3async", "hub", "--host", host, "--port", str(port)],
        capture_output=True, text=True, env=world.claude.env(), timeout=30, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert host in proc.stderr and "refusing" in proc.stderr, proc.stderr
    assert "127.0.0.1" in proc.stderr  # says what to use instead
    assert not _listening(port)


@pytest.mark.parametrize("forged", ["evil.example", "evil.example:80", "127.0.0.1.evil.example",
                                    "localhost.evil.example", "attacker.localhost"])
def test_foreign_host_header_gets_421(hub, client, world, forged):
    for path in ("/", "/api/projects", "/api/sessions", f"/api/sessions/{world.healthy}", "/static/app.js"):
        r = client.get(path, headers={"Host": forged})
        assert r.status_code == 421, (path, r.status_code)
        assert r.json()["error"], path
        assert hub.token not in r.text and world.healthy not in r.text
    before = world.marks_lines(world.beta)
    r = _post(client, hub, world.guarded, {"op": "note", "summary": "rebinding", "project": world.beta},
              Host=forged)
    assert r.status_code == 421
    assert world.marks_lines(world.beta) == before


def test_loopback_host_names_are_served(hub, client):
    for host in (f"127.0.0.1:{hub.port}", f"localhost:{hub.port}", "localhost", f"[::1]:{hub.port}"):
        assert client.get("/api/projects", headers={"Host": host}).status_code == 200, host


def test_post_without_token_is_403(hub, client, world):
    before = world.marks_lines(world.beta)
    r = _post(client, hub, world.guarded, {"op": "note", "summary": "no token", "project": world.beta},
              **{"X-C3-Token": None})
    assert r.status_code == 403
    assert "token" in r.json()["error"].lower()
    assert world.marks_lines(world.beta) == before


@pytest.mark.parametrize("token", ["", "wrong", "x" * 43])
def test_post_with_wrong_token_is_403(hub, client, world, token):
    before = world.marks_lines(world.beta)
    r = _post(client, hub, world.guarded, {"op": "note", "summary": "bad token", "project": world.beta},
              **{"X-C3-Token": token})
    assert r.status_code == 403
    assert r.json()["error"]
    assert world.marks_lines(world.beta) == before


def test_post_with_a_non_ascii_token_is_403_not_500(hub, client, world):
    """A wrong token is a wrong token, whatever its bytes (latin-1 as HTTP carries them)."""
    before = world.marks_lines(world.beta)
    r = client.post(f"/api/sessions/{world.guarded}/marks",
                    json={"op": "note", "summary": "odd token", "project": world.beta},
                    headers={"X-C3-Token": "t\xf6ken".encode("latin-1")})
    assert world.marks_lines(world.beta) == before
    assert r.status_code == 403, (r.status_code, r.text)


@pytest.mark.parametrize("origin", ["http://evil.example", "https://evil.example",
                                    "http://127.0.0.1.evil.example", "null"])
def test_post_with_right_token_but_foreign_origin_is_403(hub, client, world, origin):
    before = world.marks_lines(world.beta)
    r = _post(client, hub, world.guarded, {"op": "note", "summary": "cross-origin", "project": world.beta},
              Origin=origin)
    assert r.status_code == 403
    assert "origin" in r.json()["error"].lower()
    assert world.marks_lines(world.beta) == before


@pytest.mark.parametrize("origin", ["self", "http://localhost", None])
def test_post_with_right_token_and_loopback_origin_is_201(hub, client, world, origin):
    origin = hub.url if origin == "self" else origin
    before = world.marks_lines(world.beta)
    r = _post(client, hub, world.guarded, {"op": "note", "summary": f"from {origin}", "project": world.beta},
              Origin=origin)
    assert r.status_code == 201, r.text
    assert r.json()["by"] == "user"
    assert world.marks_lines(world.beta) == before + 1


def _check_csp(r) -> None:
    csp = r.headers.get("content-security-policy")
    assert csp, (r.request.url, r.status_code, dict(r.headers))
    directives = {d.split()[0]: d.split()[1:] for d in csp.split(";") if d.strip()}
    assert "'unsafe-inline'" not in csp and "'unsafe-eval'" not in csp
    assert directives.get("script-src") == ["'self'"], csp
    assert r.headers.get("x-content-type-options") == "nosniff"


def test_every_response_carries_a_strict_csp(hub, client, world):
    responses = [
        client.get("/"), client.get("/static/app.js"), client.get("/static/app.css"),
        client.get("/api/projects"), client.get("/api/sessions"),
        client.get(f"/api/sessions/{world.healthy}", params={"project": world.alpha}),
        client.get("/api/sessions", params={"filter": "nope"}),  # 400
        client.get("/api/sessions/00000000-0000-4000-8000-000000000000"),  # no such session
        client.get("/no/such/page"),  # 404
        _post(client, hub, world.guarded, {"op": "note", "summary": "csp", "project": world.beta}),  # 201
    ]
    with client.stream("GET", "/api/events") as events:
        responses.append(events)
    assert [r.status_code for r in responses[:6]] == [200] * 6
    assert responses[9].status_code == 201
    for r in responses:
        _check_csp(r)


def test_guard_refusals_carry_the_security_headers_too(hub, client, world):
    """The 421 (foreign Host) and 403 (CSRF) answers are responses too."""
    refusals = [
        client.get("/", headers={"Host": "evil.example"}),
        _post(client, hub, world.guarded, {"op": "note", "summary": "x"}, **{"X-C3-Token": None}),
        _post(client, hub, world.guarded, {"op": "note", "summary": "x"}, Origin="http://evil.example"),
    ]
    assert [r.status_code for r in refusals] == [421, 403, 403]
    for r in refusals:
        _check_csp(r)


def test_html_has_no_inline_script_and_carries_the_token(hub, client):
    r = client.get("/")
    assert r.headers["content-type"].startswith("text/html")
    html = r.text
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script\s*>", html, flags=re.S | re.I)
    assert scripts, "the page loads its script"
    for attrs, body in scripts:
        assert re.search(r"\bsrc\s*=\s*\"/static/[^\"]+\"", attrs), attrs
        assert body.strip() == ""
    assert len(re.findall(r"<script\b", html, flags=re.I)) == len(scripts)
    assert not re.search(r"\son[a-z]+\s*=", html, flags=re.I), "inline event handler"
    assert not re.search(r"\sstyle\s*=", html, flags=re.I), "inline style (blocked by the CSP)"
    assert "javascript:" not in html.lower()
    assert f'content="{hub.token}"' in html and "{{TOKEN}}" not in html
    # the token is per process and hard to guess
    assert len(hub.token) >= 32


@pytest.mark.parametrize("path", [
    "/api/sessions/..%2F..%2Fetc%2Fpasswd",
    "/api/sessions/..%2F..%2F..%2F..%2F..%2Fetc%2Fpasswd?project=/",
    "/api/sessions/%2e%2e",
    "/api/sessions/not-a-uuid",
    "/api/sessions/..%2fsession_marks.jsonl",
    "/static/..%2F..%2F..%2F..%2Fetc%2Fpasswd",
    "/static/%2e%2e/app.py",
])
def test_session_ids_and_static_paths_are_validated(client, path):
    r = client.get(path)
    assert r.status_code in (400, 404), (path, r.status_code)
    assert "root:" not in r.text and "import" not in r.text
    if path.startswith("/api/sessions/") and r.status_code == 400:
        assert "uuid" in r.json()["error"].lower()


def test_marks_post_validates_the_id(hub, client, world):
    before = world.marks_lines(world.beta)
    for sid in ("not-a-uuid", "..%2F..%2Fetc", world.guarded[:8]):
        r = _post(client, hub, sid, {"op": "note", "summary": "x", "project": world.beta})
        assert r.status_code in (400, 404, 405), (sid, r.status_code)
    assert world.marks_lines(world.beta) == before


@pytest.mark.parametrize("project", ["/etc", "/", "{alpha}/../../../../etc", "{alpha}/.c3", "relative"])
def test_unregistered_project_is_400(client, world, project):
    project = project.format(alpha=world.alpha)
    for path in ("/api/sessions", f"/api/sessions/{world.healthy}"):
        r = client.get(path, params={"project": project})
        assert r.status_code == 400, (path, project, r.status_code)
        assert "registered" in r.json()["error"]


def test_marks_post_refuses_an_unregistered_project(hub, client, world):
    for project in ("/etc", world.alpha + "/.c3", 42, ["/etc"]):
        r = _post(client, hub, world.guarded, {"op": "note", "summary": "x", "project": project})
        assert r.status_code == 400, (project, r.status_code)
        assert r.json()["error"]
    assert not (Path("/etc") / ".c3").exists()


# --- behaviour ---------------------------------------------------------------------------------


def test_projects_lists_the_registered_projects(client, world):
    r = client.get("/api/projects")
    assert r.status_code == 200
    assert r.json()["projects"] == [{"path": world.alpha, "name": "alpha"}, {"path": world.beta, "name": "beta"}]


def test_listing_rows_carry_no_prompts(client, world):
    r = client.get("/api/sessions")
    assert r.status_code == 200
    data = r.json()
    rows = data["rows"]
    assert sessions_ids(rows) == set(world.rows_a) | set(world.rows_b)
    assert {p["path"] for p in data["projects"]} == {world.alpha, world.beta}
    for row in rows:
        assert not PROMPT_KEYS & set(row), row["id"]
        assert LISTING_KEYS <= set(row), row["id"]
        assert set(row["links"]) == {"tasks", "decisions", "snapshot"}
    assert FIRST not in r.text and LAST not in r.text
    assert "step 5: keep going" not in r.text
    # newest first
    mtimes = [row["mtime_ns"] for row in rows]
    assert mtimes == sorted(mtimes, reverse=True)


def test_listing_of_one_project(client, world):
    rows = _rows(client, project=world.alpha)
    assert sessions_ids(rows) == set(world.rows_a)
    assert {r["project"] for r in rows} == {world.alpha}


def test_listing_row_values(client, world):
    rows = {r["id"]: r for r in _rows(client, project=world.alpha)}
    assert rows[world.live]["live"] is True and rows[world.live]["hints"] == []
    assert rows[world.healthy]["live"] is False and rows[world.healthy]["hints"] == []
    assert rows[world.hinted]["hints"] and rows[world.hinted]["stale"] is None
    stale = rows[world.staled]["stale"]
    assert stale["reason"] == "superseded by the new approach" and stale["by"] == "user"
    assert rows[world.noted]["note"]["summary"] == "cache looked at"
    assert rows[world.secret]["title"] == "Payment refactor"
    assert rows[world.healthy]["resume"] == f"cd {shlex.quote(world.alpha)} && claude --resume {world.healthy}"


@pytest.mark.parametrize("which,expected", [
    ("all", ("healthy", "live", "hinted", "secret", "staled", "noted")),
    ("likely", ("hinted", "secret")),
    ("stale", ("staled",)),
    ("live", ("live",)),
])
def test_filters(client, world, which, expected):
    rows = _rows(client, project=world.alpha, filter=which)
    assert sessions_ids(rows) == {getattr(world, name) for name in expected}


def test_filter_live_across_projects(client, world):
    assert sessions_ids(_rows(client, filter="live")) == {world.live}


@pytest.mark.parametrize("q,expected", [
    ("zebra-needle-4711", "secret"),  # in the first prompt only
    ("QUOKKA-tail-0815", "secret"),  # in the last prompt only, any case
    ("payment refactor", "secret"),  # the title
    ("cache looked", "noted"),  # the note
    ("new approach", "staled"),  # the stale reason
])
def test_search_finds_rows_without_returning_prompts(client, world, q, expected):
    r = client.get("/api/sessions", params={"q": q})
    assert r.status_code == 200
    assert sessions_ids(r.json()["rows"]) == {getattr(world, expected)}
    assert FIRST not in r.text and LAST not in r.text


def test_search_by_id_and_with_a_filter(client, world):
    assert sessions_ids(_rows(client, q=world.pred[:13])) == {world.pred}
    assert sessions_ids(_rows(client, q="zebra-needle", filter="live")) == set()
    assert sessions_ids(_rows(client, q="zebra-needle", filter="likely")) == {world.secret}
    assert _rows(client, q="no session says this") == []


@pytest.mark.parametrize("params", [{"filter": "nope"}, {"filter": "LIKELY"}, {"filter": "all", "project": "/nope"}])
def test_bad_listing_parameters_are_400_json(client, params):
    r = client.get("/api/sessions", params=params)
    assert r.status_code == 400
    assert r.headers["content-type"].startswith("application/json")
    assert isinstance(r.json()["error"], str) and r.json()["error"]


def test_detail_has_prompts_turns_and_resume(client, world):
    r = client.get(f"/api/sessions/{world.secret}", params={"project": world.alpha})
    assert r.status_code == 200, r.text
    d = r.json()
    row = d["row"]
    assert row["id"] == world.secret
    assert row["first_prompt"] == FIRST and row["last_prompt"] == LAST
    turns = d["turns"]
    assert [t["role"] for t in turns] == ["user", "assistant"] * 4
    assert [t["text"] for t in turns] == [
        "step 7: keep going", "answer 7", "step 8: keep going", "answer 8",
        "step 9: keep going", "answer 9", LAST, "answer 10",
    ]
    assert row["resume"] == f"cd {shlex.quote(world.alpha)} && claude --resume {world.secret}"
    assert d["predecessors"] == [] and d["successors"] == []


def test_detail_without_project_finds_the_session(client, world):
    r = client.get(f"/api/sessions/{world.pred.upper()}")
    assert r.status_code == 200, r.text
    assert r.json()["row"]["id"] == world.pred and r.json()["row"]["project"] == world.beta


def test_detail_of_an_unknown_or_foreign_session_is_404(client, world):
    r = client.get("/api/sessions/00000000-0000-4000-8000-000000000000", params={"project": world.alpha})
    assert r.status_code == 404 and r.json()["error"]
    r = client.get(f"/api/sessions/{world.pred}", params={"project": world.alpha})  # it is beta's
    assert r.status_code == 404 and r.json()["error"]
    r = client.get("/api/sessions/00000000-0000-4000-8000-000000000000")
    assert r.status_code in (400, 404) and r.json()["error"]


def test_worktree_session_resumes_in_the_worktree(client, world):
    rows = {r["id"]: r for r in _rows(client, project=world.beta)}
    want = f"cd {shlex.quote(world.worktree)} && claude --resume {world.wt}"
    assert rows[world.wt]["cwd"] == world.worktree
    assert rows[world.wt]["resume"] == want
    d = client.get(f"/api/sessions/{world.wt}", params={"project": world.beta}).json()
    assert d["row"]["resume"] == want
    assert d["row"]["branch"] == "feature"


def test_stale_with_successor_links_both_sides(hub, client, world):
    r = _post(client, hub, world.pred, {"op": "stale", "reason": "the second try replaced it",
                                        "successor": world.succ, "project": world.beta})
    assert r.status_code == 201, r.text
    assert (r.json()["op"], r.json()["successor"], r.json()["by"]) == ("stale", world.succ, "user")
    before = client.get(f"/api/sessions/{world.pred}", params={"project": world.beta}).json()
    after = client.get(f"/api/sessions/{world.succ}", params={"project": world.beta}).json()
    assert before["successors"] == [world.succ]
    assert after["predecessors"] == [world.pred]
    assert before["row"]["stale"]["successor"] == world.succ


def test_stale_needs_a_reason(hub, client, world):
    before = world.marks_lines(world.beta)
    for body in ({"op": "stale"}, {"op": "stale", "reason": "   "}, {"op": "stale", "reason": None}):
        r = _post(client, hub, world.marked, {**body, "project": world.beta})
        assert r.status_code == 400, body
        assert r.headers["content-type"].startswith("application/json")
        assert "reason" in r.json()["error"]
    assert world.marks_lines(world.beta) == before


@pytest.mark.parametrize("body", [
    {"op": "delete"}, {"op": ""}, {"op": "note"}, {"op": "stale", "reason": "x", "successor": "not-a-session"},
])
def test_bad_marks_are_400_with_a_message(hub, client, world, body):
    before = world.marks_lines(world.beta)
    r = _post(client, hub, world.marked, {**body, "project": world.beta})
    assert r.status_code == 400, (body, r.status_code, r.text)
    assert r.json()["error"]
    assert world.marks_lines(world.beta) == before


def test_marks_post_needs_a_json_object(hub, client, world):
    for content in (b"not json", b"[1, 2]", b""):
        r = client.post(f"/api/sessions/{world.marked}/marks", content=content,
                        headers={"X-C3-Token": hub.token, "Content-Type": "application/json"})
        assert r.status_code == 400, content
        assert r.json()["error"]


def test_stale_unstale_and_note_are_by_user(hub, client, world):
    claude = world.claude
    r = _post(client, hub, world.marked, {"op": "stale", "reason": "finished in the Hub", "project": world.beta,
                                          "by": "agent", "by_session": world.pred})  # not the client's to say
    assert r.status_code == 201, r.text
    row = claude.rows_by_id(world.beta)[world.marked]
    assert row["stale"]["reason"] == "finished in the Hub"
    assert row["stale"]["by"] == "user"
    assert world.marked in sessions_ids(_rows(client, project=world.beta, filter="stale"))

    r = _post(client, hub, world.marked, {"op": "unstale", "project": world.beta})
    assert r.status_code == 201, r.text
    assert claude.rows_by_id(world.beta)[world.marked]["stale"] is None
    assert world.marked not in sessions_ids(_rows(client, project=world.beta, filter="stale"))

    r = _post(client, hub, world.marked, {"op": "note", "summary": "parser half done",
                                          "next_steps": "error recovery", "project": world.beta})
    assert r.status_code == 201, r.text
    note = claude.rows_by_id(world.beta)[world.marked]["note"]
    assert (note["summary"], note["next_steps"]) == ("parser half done", "error recovery")
    marks = [json.loads(x) for x in (Path(world.beta) / ".c3" / "session_marks.jsonl").read_text().splitlines()]
    mine = [m for m in marks if m["id"] == world.marked]
    assert [m["op"] for m in mine] == ["stale", "unstale", "note"]
    assert {m["by"] for m in mine} == {"user"} and {m.get("by_session") for m in mine} == {None}


def test_mark_without_project_finds_the_session(hub, client, world):
    r = client.post(f"/api/sessions/{world.marked}/marks", json={"op": "note", "summary": "no project given"},
                    headers={"X-C3-Token": hub.token})
    assert r.status_code == 201, r.text
    assert world.claude.rows_by_id(world.beta)[world.marked]["note"]["summary"] == "no project given"


def test_events_stream_a_change_after_a_cli_mark(hub, world):
    events: queue.Queue = queue.Queue()
    stop = threading.Event()

    def read() -> None:
        try:
            with hub.client(timeout=httpx.Timeout(10, read=20)) as c, c.stream("GET", "/api/events") as s:
                events.put(("status", s.status_code, s.headers.get("content-type", "")))
                for line in s.iter_lines():
                    events.put(("line", line, time.monotonic()))
                    if stop.is_set():
                        return
        except Exception as exc:  # noqa: BLE001 - reported through the queue
            events.put(("error", repr(exc), time.monotonic()))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    kind, status, ctype = events.get(timeout=10)
    assert (kind, status) == ("status", 200) and ctype.startswith("text/event-stream")
    first = events.get(timeout=10)
    assert first[0] == "line" and first[1].startswith("retry:"), first  # the baseline is taken
    proc = world.claude.run("mark", "note", world.sse, "--project", world.beta, "--summary", "written by the CLI")
    assert proc.returncode == 0, proc.stderr
    written = time.monotonic()
    got = None
    deadline = written + 6
    while got is None and time.monotonic() < deadline:
        try:
            item = events.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            break
        assert item[0] != "error", item
        if item[1] == "event: change":
            got = item[2]
    stop.set()
    assert got is not None, "no `event: change` within 6 s of the mark"
    assert got - written < 4
