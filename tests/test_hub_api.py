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
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from fake_api import free_port
from hubproc import NOW, Hub, httpx, hub_session, sandbox_world, sessions_ids, wait_for

from c3async.ground.project import resolve
from stress.transcripts import simple_session

pytestmark = pytest.mark.process

OLD = NOW - timedelta(days=30)
FIRST = "zebra-needle-4711: please refactor the payment module"
LAST = "quokka-tail-0815: and now write the migration notes"
LISTING_KEYS = {"id", "title", "live", "hints", "stale", "note", "links", "resume", "project", "cwd"}
PROMPT_KEYS = {"first_prompt", "last_prompt", "first_prompt_truncated", "last_prompt_truncated"}


_session = hub_session


def _git(*args: str, cwd: str) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
    )


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
        self.wt = _session(claude.folder(self.worktree), self.worktree, three, title="Worktree work", branch="feature")
        # register both projects, as `c3async sessions --project P` does
        self.rows_a = claude.rows_by_id(a)
        self.rows_b = claude.rows_by_id(b)
        for args in (
            ("stale", self.staled, "--reason", "superseded by the new approach"),
            ("note", self.noted, "--summary", "cache looked at", "--next", "nothing"),
        ):
            proc = claude.run("mark", args[0], "--project", a, *args[1:])
            assert proc.returncode == 0, proc.stderr
        hb = Path(a) / ".c3" / "live"
        hb.mkdir(parents=True, exist_ok=True)
        # a fresh heartbeat (TTL 180 s: longer than this module runs) makes `live` live
        (hb / "c3-live.json").write_text(
            json.dumps(
                {
                    "session_id": "c3-live",
                    "host_session_id": self.live,
                    "ide": "terminal",
                    "pid": os.getpid(),
                    "ts": time.time(),
                }
            )
        )

    def marks_lines(self, project: str) -> int:
        path = Path(project) / ".c3" / "session_marks.jsonl"
        return len(path.read_bytes().splitlines()) if path.exists() else 0


@pytest.fixture(scope="module")
def world(module_claude) -> World:
    return World(module_claude)


@pytest.fixture
def anon(hub):
    """A stranger: another local account, or a page of another site, without the token."""
    with hub.client(auth=False) as c:
        yield c


@pytest.fixture
def browser(hub):
    """What the page is: it opened the printed URL and sends the token as its script does."""
    c = hub.login()
    try:
        yield c
    finally:
        c.close()


def _rows(client, **params) -> list[dict]:
    r = client.get("/api/sessions", params=params)
    assert r.status_code == 200, r.text
    return r.json()["rows"]


def _post(client, hub, sid: str, body: dict, **headers) -> httpx.Response:
    """POST a mark; a header given as None is left out."""
    return client.post(
        f"/api/sessions/{sid}/marks", json=body, headers={k: v for k, v in headers.items() if v is not None}
    )


def _listening(port: int) -> bool:
    for host in ("127.0.0.1", "0.0.0.0"):
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex((host, port)) == 0:
                return True
    return False


def _no_data(r: httpx.Response, world, hub) -> None:
    """A refusal says why and nothing else: no project, session, title or token."""
    text = r.text
    for secret in (
        world.alpha,
        world.beta,
        "alpha",
        "beta",
        world.healthy,
        world.secret,
        world.guarded,
        "Payment refactor",
        FIRST,
        hub.token,
    ):
        assert secret not in text, (r.request.url, secret)


# --- security ----------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5"])
def test_non_loopback_host_is_refused(world, host):
    port = free_port()
    proc = subprocess.run(
        [sys.executable, "-m", "c3async", "hub", "--host", host, "--port", str(port)],
        capture_output=True,
        text=True,
        env=world.claude.env(),
        timeout=30,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert host in proc.stderr and "refusing" in proc.stderr, proc.stderr
    assert "127.0.0.1" in proc.stderr  # says what to use instead
    assert not _listening(port)


@pytest.mark.parametrize("port", ["99999", "-1", "65536"])
def test_a_port_out_of_range_is_a_clear_error(world, port):
    proc = world.claude.run("hub", "--port", port)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert port in proc.stderr and "0 to 65535" in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    "forged",
    ["evil.example", "evil.example:80", "127.0.0.1.evil.example", "localhost.evil.example", "attacker.localhost"],
)
def test_foreign_host_header_gets_421(hub, client, world, forged):
    for path in (
        "/",
        f"/?token={hub.token}",
        "/api/projects",
        "/api/sessions",
        f"/api/sessions/{world.healthy}",
        "/static/app.js",
    ):
        r = client.get(path, headers={"Host": forged})
        assert r.status_code == 421, (path, r.status_code)
        assert r.json()["error"], path
        assert "set-cookie" not in r.headers
        _no_data(r, world, hub)
    before = world.marks_lines(world.beta)
    r = _post(client, hub, world.guarded, {"op": "note", "summary": "rebinding", "project": world.beta}, Host=forged)
    assert r.status_code == 421
    assert world.marks_lines(world.beta) == before


def test_loopback_host_names_are_served(hub, client):
    for host in (f"127.0.0.1:{hub.port}", f"localhost:{hub.port}", "localhost", f"[::1]:{hub.port}"):
        assert client.get("/api/projects", headers={"Host": host}).status_code == 200, host


# Every API route, with what an answer would leak.
def _api_paths(world) -> list[str]:
    return [
        "/api/projects",
        "/api/sessions",
        "/api/rows",
        f"/api/sessions?project={world.alpha}",
        "/api/sessions?filter=live",
        f"/api/sessions?q={FIRST[:11]}",
        f"/api/sessions/{world.secret}",
        f"/api/sessions/{world.secret}?project={world.alpha}",
        "/api/events",
        "/api",
        "/api/",
        "/api/no/such/route",
        f"/api/sessions/{world.guarded}/marks",
    ]


def test_every_api_route_needs_the_token(hub, anon, world):
    for path in _api_paths(world):
        for method in ("GET", "HEAD"):
            r = anon.request(method, path)
            assert r.status_code == 401, (method, path, r.status_code)
            _check_csp(r)
            if method == "GET":
                assert r.headers["content-type"].startswith("application/json"), path
                assert "token" in r.json()["error"], path
                _no_data(r, world, hub)


@pytest.mark.parametrize(
    "how",
    [
        "wrong bearer",
        "wrong header",
        "old cookie",
        "old cookie of another port",
        "token in the query",
        "basic auth",
        "bearer prefix",
        "token with a suffix",
    ],
)
def test_a_wrong_credential_is_refused(hub, world, how):
    port, tok = hub.port, hub.token
    headers, params = {
        "wrong bearer": ({"Authorization": "Bearer " + "x" * len(tok)}, {}),
        "wrong header": ({"X-C3-Token": tok[:-1] + ("A" if tok[-1] != "A" else "B")}, {}),
        # the real token, in the cookie that held it before: cookies go to every port, no credential
        "old cookie": ({"Cookie": hub.old_cookie}, {}),
        "old cookie of another port": ({"Cookie": f"c3async-hub-{port + 1}={tok}"}, {}),
        "token in the query": ({}, {"token": tok}),  # only `/` takes it there, for the page's script
        "basic auth": ({"Authorization": "Basic " + tok}, {}),
        "bearer prefix": ({"Authorization": "Bearer " + tok[:20]}, {}),
        "token with a suffix": ({"X-C3-Token": tok + "x"}, {}),
    }[how]
    with hub.client(auth=False) as c:
        for path in _api_paths(world)[:7]:
            r = c.get(path, headers=headers, params=params)
            assert r.status_code == 401, (how, path, r.status_code)
            _no_data(r, world, hub)


def test_every_way_to_send_the_token_works(hub, world):
    ways = [
        {"Authorization": f"Bearer {hub.token}"},
        {"Authorization": f"bearer  {hub.token}"},
        {"X-C3-Token": hub.token},
        {"X-C3-Token": hub.token, "Cookie": "c3async-hub-1=forged"},
    ]
    with hub.client(auth=False) as c:
        for headers in ways:
            r = c.get("/api/projects", headers=headers)
            assert r.status_code == 200, (headers, r.status_code)
            assert r.json()["projects"][0]["path"] == world.alpha


def test_welcome_says_how_to_get_in_and_nothing_else(hub, anon, world):
    for path, refused in (("/welcome", False), ("/welcome?refused=1", True), ("/welcome?refused=x", False)):
        r = anon.get(path)
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/html")
        _check_csp(r)
        html = r.text
        assert "c3async hub" in html and "?token=" in html and "hub-PORT.json" in html
        assert ("not this Hub" in html) == refused, path
        _no_data(r, world, hub)
        for leak in (
            "Session",
            "session_marks",
            str(world.claude.root),
            str(world.claude.c3home),
            "/static/app.js",
            "<script",
            'name="c3-token"',
        ):
            assert leak not in html, leak
        assert "set-cookie" not in r.headers
    assert anon.head("/welcome").status_code == 200


def test_the_page_is_served_to_anyone_and_holds_nothing(hub, anon, world):
    """Without a token ``/`` is the page all the same (its script goes to /welcome): no data, no token."""
    for path in ("/", hub.login_url):
        r = anon.get(path)
        assert r.status_code == 200, path
        assert r.headers["content-type"].startswith("text/html")
        _check_csp(r)
        assert r.headers["referrer-policy"] == "no-referrer" and r.headers["cache-control"] == "no-store"
        assert '<script src="/static/app.js"' in r.text
        assert "c3-token" not in r.text and "{{TOKEN}}" not in r.text
        assert "set-cookie" not in r.headers and not anon.cookies
        _no_data(r, world, hub)  # the token included
    assert anon.head("/").status_code == 200


def test_the_printed_url_sets_no_cookie_and_the_page_asks_with_the_token(hub, browser, world):
    assert hub.login_url == f"{hub.url}/?token={hub.token}"
    assert len(hub.token) >= 43  # token_urlsafe(32)
    assert not browser.cookies
    assert browser.get("/api/projects").json()["projects"][0]["path"] == world.alpha
    assert world.healthy in {row["id"] for row in _rows(browser, project=world.alpha)}


def test_a_cookie_of_the_old_form_is_no_credential_and_is_expired(hub, anon, world):
    """Earlier versions kept the token in ``c3async-hub-PORT``; every server of this host got it.
    With the real token it opens nothing, and the page expires every such cookie it is sent."""
    jar = {"Cookie": f"{hub.old_cookie}; c3async-hub-1=old; theirs=1; c3async-hub-x=not-ours"}
    for path in _api_paths(world)[:8]:
        for site in ({}, {"Sec-Fetch-Site": "same-origin"}):
            r = anon.get(path, headers={**jar, **site})
            assert r.status_code == 401, (path, site, r.status_code)
            _no_data(r, world, hub)
    before = world.marks_lines(world.beta)
    r = _post(
        anon,
        hub,
        world.guarded,
        {"op": "note", "summary": "old cookie", "project": world.beta},
        Cookie=hub.old_cookie,
        Origin=hub.url,
        **{"X-C3-Request": "1", "Sec-Fetch-Site": "same-origin"},
    )
    assert r.status_code == 401
    assert world.marks_lines(world.beta) == before
    r = anon.get("/", headers=jar)
    assert r.status_code == 200
    expired = sorted(r.headers.get_list("set-cookie"))
    assert expired == sorted(
        f"{name}=; Max-Age=0; Path=/; HttpOnly; SameSite=Strict"
        for name in (f"c3async-hub-{hub.port}", "c3async-hub-1")
    ), expired


@pytest.mark.parametrize(
    "given", ["", "wrong", "x" * 43, "{token}x", "{token_upper}", "t%C3%B6ken", "%ED%A0%80", "%00"]
)
def test_a_wrong_token_in_the_url_is_refused(hub, anon, world, given):
    given = given.format(token=hub.token, token_upper=hub.token.upper())
    r = anon.get(f"/?token={given}")
    assert r.status_code == 403, (given, r.status_code)
    assert "set-cookie" not in r.headers and not anon.cookies
    assert "not this Hub" in r.text
    _check_csp(r)
    _no_data(r, world, hub)


def test_the_token_file_holds_the_printed_url_and_only_its_owner_reads_it(hub):
    path = hub.token_file
    st = path.lstat()
    assert stat.S_ISREG(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    assert stat.S_IMODE(path.parent.lstat().st_mode) == 0o700
    assert json.loads(path.read_text()) == {
        "url": hub.login_url,
        "port": hub.port,
        "pid": hub.proc.pid,
        "token": hub.token,
    }
    assert str(path) in hub.stderr()  # the Hub says where it is


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT"])
def test_the_token_file_goes_at_a_clean_stop(claude, how):
    h = Hub(claude).start()
    try:
        path = h.token_file
        assert path.exists()
        h.proc.send_signal(getattr(signal, how))
        h.proc.wait(15)
        assert not path.exists(), h.stderr()
        assert "Traceback" not in h.stderr(), h.stderr()
        assert [p.name for p in path.parent.iterdir()] == []
    finally:
        h.stop()


def test_a_killed_hubs_token_file_is_pruned_by_the_next(claude):
    hub_dir = claude.c3home / "hub"
    hub_dir.mkdir(parents=True, mode=0o700)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (hub_dir / "hub-1.json").write_text(json.dumps({"url": "x", "port": 1, "pid": dead.pid, "token": "t"}))
    (hub_dir / "hub-1-open.html").write_text("x")
    (hub_dir / "hub-2.json").write_text(json.dumps({"url": "x", "port": 2, "pid": os.getpid(), "token": "t"}))
    (hub_dir / "notes.txt").write_text("not ours")
    h = Hub(claude).start()
    try:
        names = sorted(p.name for p in hub_dir.iterdir())
        assert names == sorted(["hub-2.json", "notes.txt", h.token_file.name]), names
    finally:
        h.stop()


def test_a_symlinked_hub_directory_is_refused(claude):
    elsewhere = claude.root / "elsewhere"
    elsewhere.mkdir()
    claude.c3home.mkdir(parents=True, exist_ok=True)
    (claude.c3home / "hub").symlink_to(elsewhere)
    proc = subprocess.run(
        [sys.executable, "-m", "c3async", "hub", "--port", "0"],
        capture_output=True,
        text=True,
        check=False,
        env=claude.env(),
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "symbolic link" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert "?token=" not in proc.stderr
    assert list(elsewhere.iterdir()) == []


def test_open_hands_the_browser_no_token_on_its_command_line(claude, tmp_path):
    """Other accounts can read command lines: ``--open`` opens a private file that redirects."""
    seen = tmp_path / "argv.txt"
    fake = tmp_path / "fake-browser"
    fake.write_text(f"#!{sys.executable}\nimport sys\nopen({str(seen)!r}, 'w').write(sys.argv[1])\n")
    fake.chmod(0o700)
    h = Hub(claude, "--open", env={"BROWSER": f"{fake} %s", "DISPLAY": ""}).start()
    try:
        wait_for(seen.exists)
        uri = wait_for(seen.read_text)
        assert uri.startswith("file://") and h.token not in uri, uri
        opener = Path(uri.removeprefix("file://"))
        assert opener.parent == h.token_file.parent
        assert stat.S_IMODE(opener.lstat().st_mode) == 0o600
        assert f'content="0;url={h.login_url}"' in opener.read_text()
    finally:
        h.stop()
    assert not opener.exists() and not h.token_file.exists()


def test_post_without_token_is_401(hub, anon, world):
    before = world.marks_lines(world.beta)
    r = _post(anon, hub, world.guarded, {"op": "note", "summary": "no token", "project": world.beta})
    assert r.status_code == 401
    assert "token" in r.json()["error"].lower()
    assert world.marks_lines(world.beta) == before


@pytest.mark.parametrize("token", ["", "wrong", "x" * 43])
def test_post_with_wrong_token_is_401(hub, anon, world, token):
    before = world.marks_lines(world.beta)
    r = _post(
        anon, hub, world.guarded, {"op": "note", "summary": "bad token", "project": world.beta}, **{"X-C3-Token": token}
    )
    assert r.status_code == 401
    assert r.json()["error"]
    assert world.marks_lines(world.beta) == before


def test_post_with_a_non_ascii_token_is_401_not_500(hub, anon, world):
    """A wrong token is a wrong token, whatever its bytes (latin-1 as HTTP carries them)."""
    before = world.marks_lines(world.beta)
    for header in ("X-C3-Token", "Authorization"):
        r = anon.post(
            f"/api/sessions/{world.guarded}/marks",
            json={"op": "note", "summary": "odd token", "project": world.beta},
            headers={header: "Bearer t\xf6ken\xff".encode("latin-1")},
        )
        assert r.status_code == 401, (header, r.status_code, r.text)
    assert world.marks_lines(world.beta) == before


FOREIGN_ORIGINS = [
    "http://evil.example",
    "https://evil.example",
    "http://127.0.0.1.evil.example",
    "null",
    "http://127.0.0.1:{other}",
    "http://localhost:{other}",
    "http://[::1]:{other}",
    "http://localhost",
    "http://127.0.0.1",
    "https://127.0.0.1:{port}",
    "ws://127.0.0.1:{port}",
    "http://127.0.0.1:{port}/x",
    "http://evil.example:{port}",
    "http://127.0.0.1:{port}0",
    "127.0.0.1:{port}",
    "",
]


@pytest.mark.parametrize("origin", FOREIGN_ORIGINS)
def test_post_with_right_token_but_foreign_origin_is_403(hub, client, world, origin):
    """Only this Hub's own origin: not another site, nor another server of this machine (another
    port), nor another scheme."""
    origin = origin.format(port=hub.port, other=9999 if hub.port != 9999 else 9998)
    before = world.marks_lines(world.beta)
    r = _post(
        client, hub, world.guarded, {"op": "note", "summary": "cross-origin", "project": world.beta}, Origin=origin
    )
    assert r.status_code == 403, (origin, r.status_code)
    assert "origin" in r.json()["error"].lower()
    assert world.marks_lines(world.beta) == before


@pytest.mark.parametrize(
    "origin", ["self", "http://localhost:{port}", "http://[::1]:{port}", "HTTP://LocalHost:{port}", None]
)
def test_post_with_right_token_and_own_origin_is_201(hub, client, world, origin):
    origin = hub.url if origin == "self" else origin if origin is None else origin.format(port=hub.port)
    before = world.marks_lines(world.beta)
    r = _post(
        client,
        hub,
        world.guarded,
        {"op": "note", "summary": f"from {origin}", "project": world.beta},
        Origin=origin,
        **{"X-C3-Request": None if origin is None else "1"},
    )
    assert r.status_code == 201, r.text
    assert r.json()["by"] == "user"
    assert world.marks_lines(world.beta) == before + 1


def test_the_page_posts_with_its_token_origin_and_custom_header(hub, browser, world):
    """With the token, a browser's POST (it sends an Origin) must still come from this very
    page: its Origin, Sec-Fetch-Site same-origin and X-C3-Request: 1 (which no form can send)."""
    own = {"Origin": hub.url, "X-C3-Request": "1"}
    body = {"op": "note", "summary": "from the page", "project": world.beta}
    before = world.marks_lines(world.beta)
    refused = [
        {"Origin": hub.url},
        {**own, "X-C3-Request": "0"},
        {**own, "Origin": f"http://127.0.0.1:{hub.port + 1}"},
        {**own, "Sec-Fetch-Site": "same-site"},  # another port of this host
        {**own, "Sec-Fetch-Site": "cross-site"},
    ]
    for headers in refused:
        r = _post(browser, hub, world.guarded, body, **headers)
        assert r.status_code == 403, (headers, r.status_code)
        assert r.json()["error"]
    assert world.marks_lines(world.beta) == before
    r = _post(browser, hub, world.guarded, body, **own)  # the browser's Sec-Fetch-Site: same-origin
    assert r.status_code == 201, r.text
    assert world.marks_lines(world.beta) == before + 1


@pytest.mark.parametrize("site", ["cross-site", "same-site"])
def test_api_reads_from_another_site_or_port_are_refused_even_with_the_token(hub, browser, world, site):
    """A page elsewhere that learned the token still cannot read through the user's browser:
    the browser says where the request comes from, and the Hub says no."""
    for path in _api_paths(world)[:8]:
        r = browser.get(path, headers={"Sec-Fetch-Site": site})
        assert r.status_code == 403, (path, r.status_code)
        _no_data(r, world, hub)
    assert browser.get("/api/projects", headers={"Sec-Fetch-Site": "same-origin"}).status_code == 200


def _check_csp(r) -> None:
    csp = r.headers.get("content-security-policy")
    assert csp, (r.request.url, r.status_code, dict(r.headers))
    directives = {d.split()[0]: d.split()[1:] for d in csp.split(";") if d.strip()}
    assert "'unsafe-inline'" not in csp and "'unsafe-eval'" not in csp
    assert directives.get("script-src") == ["'self'"], csp
    assert directives.get("frame-ancestors") == ["'none'"], csp
    assert r.headers.get("x-content-type-options") == "nosniff"
    assert r.headers.get("x-frame-options") == "DENY"
    assert r.headers.get("referrer-policy") == "no-referrer"
    assert r.headers.get("cache-control") == "no-store"


def test_every_response_carries_a_strict_csp(hub, client, anon, world):
    responses = [
        client.get("/"),
        client.get("/static/app.js"),
        client.get("/static/app.css"),
        client.get("/api/projects"),
        client.get("/api/sessions"),
        client.get(f"/api/sessions/{world.healthy}", params={"project": world.alpha}),
        client.get("/api/sessions", params={"filter": "nope"}),  # 400
        client.get("/api/sessions/00000000-0000-4000-8000-000000000000"),  # no such session
        client.get("/no/such/page"),  # 404
        _post(client, hub, world.guarded, {"op": "note", "summary": "csp", "project": world.beta}),  # 201
        anon.get("/"),
        anon.get(hub.login_url),
        anon.get("/?token=wrong"),
        anon.get("/favicon.ico"),
    ]
    with client.stream("GET", "/api/events") as events:
        responses.append(events)
    assert [r.status_code for r in responses[:6]] == [200] * 6
    assert responses[9].status_code == 201
    for r in responses:
        _check_csp(r)


def test_errors_and_refusals_carry_the_security_headers_too(hub, client, anon, world):
    """421 (foreign Host), 401 (no token), 403 (CSRF), 404, 405, 413, 414: responses all."""
    refusals = {
        421: client.get("/", headers={"Host": "evil.example"}),
        401: _post(anon, hub, world.guarded, {"op": "note", "summary": "x"}),
        403: _post(client, hub, world.guarded, {"op": "note", "summary": "x"}, Origin="http://evil.example"),
        404: client.get("/no/such/page"),
        405: client.get(f"/api/sessions/{world.guarded}/marks"),
        413: client.post(f"/api/sessions/{world.guarded}/marks", content=b" " * (65 * 1024)),
        414: client.get("/api/sessions", params={"q": "x" * 9000}),
    }
    for status, r in refusals.items():
        assert r.status_code == status, (status, r.status_code, r.text)
        _check_csp(r)
        assert r.headers["content-type"].startswith("application/json"), status
        assert r.json()["error"], status
    r = client.delete(f"/api/sessions/{world.guarded}/marks")
    assert r.status_code == 405
    _check_csp(r)


def test_a_registry_entry_that_names_no_folder_is_left_out(claude):
    """A hand-edited registry entry whose path holds a NUL (it used to make the listing raise
    deep in os.path: a 500) names no folder: the Hub lists the others, and `c3async projects`
    shows it missing until `--prune` takes it out."""
    project = claude.project("ok")
    simple_session(claude.folder(project), project, "still listed")
    claude.c3home.mkdir(parents=True, exist_ok=True)
    (claude.c3home / "projects.json").write_text(
        json.dumps(
            {"version": 1, "projects": [{"path": project + "\x00/evil", "added": 0}, {"path": project, "added": 1}]}
        )
    )
    with Hub(claude) as h, h.client() as c:
        r = c.get("/api/sessions")
        assert r.status_code == 200, (r.status_code, r.text)
        assert [row["title"] for row in r.json()["rows"]] == ["still listed"]
        assert [p["path"] for p in c.get("/api/projects").json()["projects"]] == [project]
    listed = json.loads(claude.run("projects", "--json").stdout)
    assert [(p["path"], p["missing"]) for p in listed] == [(project + "\x00/evil", True), (project, False)]
    assert claude.run("projects", "--prune").returncode == 0
    assert [p["path"] for p in json.loads(claude.run("projects", "--json").stdout)] == [project]


def test_the_guard_answers_for_an_app_that_fails(tmp_path):
    """In process: whatever escapes the app, before or after it began to answer, the client gets
    one answer with the headers, and no exception reaches the server."""
    import anyio

    from c3async.hub.app import Guard

    async def fails_early(scope, receive, send):
        raise RuntimeError("before answering")

    async def fails_late(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"partial", "more_body": False})
        raise RuntimeError("after answering")

    async def call(app) -> httpx.Response:
        transport = httpx.ASGITransport(app=Guard(app, "t" * 43))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as c:
            return await c.get("/", headers={"Authorization": "Bearer " + "t" * 43})

    r = anyio.run(call, fails_early)
    assert r.status_code == 500 and r.json()["error"]
    _check_csp(r)
    r = anyio.run(call, fails_late)
    assert (r.status_code, r.text) == (200, "partial")
    _check_csp(r)


def test_html_has_no_inline_script_and_no_token(hub, client):
    r = client.get("/")
    assert r.headers["content-type"].startswith("text/html")
    html = r.text
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script\s*>", html, flags=re.DOTALL | re.IGNORECASE)
    assert scripts, "the page loads its script"
    for attrs, body in scripts:
        assert re.search(r"\bsrc\s*=\s*\"/static/[^\"]+\"", attrs), attrs
        assert body.strip() == ""
    assert len(re.findall(r"<script\b", html, flags=re.IGNORECASE)) == len(scripts)
    assert not re.search(r"\son[a-z]+\s*=", html, flags=re.IGNORECASE), "inline event handler"
    assert not re.search(r"\sstyle\s*=", html, flags=re.IGNORECASE), "inline style (blocked by the CSP)"
    assert "javascript:" not in html.lower()
    assert hub.token not in html and "c3-token" not in html and "{{TOKEN}}" not in html
    for script in ("/static/app.js", "/static/usage.js"):
        js = client.get(script).text
        assert js and hub.token not in js and "c3-token" not in js


# --- hostile input: always a 4xx with a JSON message, never a 500 ----------------------------------


def _raw_post(client, sid: str, content: bytes, **headers) -> httpx.Response:
    return client.post(
        f"/api/sessions/{sid}/marks", content=content, headers={"Content-Type": "application/json", **headers}
    )


@pytest.mark.parametrize(
    "content",
    [
        b'{"op": "note", "summary": "\xff\xfe", "project": "{beta}"}',  # not UTF-8
        b'{"op": "note", "summary": "\xed\xa0\x80", "project": "{beta}"}',  # a surrogate, UTF-8-encoded
        b'{"op": "note", "summary": "\\ud800", "project": "{beta}"}',  # a lone surrogate escape
        b'{"op": "note", "summary": "x\\udfff", "project": "{beta}"}',
        b'{"op": "note", "summary": "ok", "project": "\\ud800"}',
        b'{"op": "note", "summary": "ok", "project": "{beta}\\u0000"}',
        b'{"op": "note", "summary": "ok", "project": "\\u0000"}',
        b'{"op": "\\ud800", "project": "{beta}"}',
        b'{"op": "note", "summary": "ok", "project": "{beta}", "successor": "\\udc80"}',
        b'{"op": "note", "summary": "' + b"x" * 20_000 + b'", "project": "{beta}"}',  # the marks layer's limit
        b'{"op": "note", "summary": "ok", "project": "' + b"/x" * 3000 + b'"}',
        b"[" * 10_000 + b"]" * 10_000,
        b'{"a":' * 10_000 + b"1" + b"}" * 10_000,
        b'{"op": "note", "summary": ' + b"[" * 10_000 + b"]" * 10_000 + b"}",
        b"\x00" * 100,
        b'"\\ud800"',
    ],
)
def test_hostile_bodies_are_4xx(hub, client, world, content):
    content = content.replace(b"{beta}", world.beta.encode())
    before = world.marks_lines(world.beta)
    r = _raw_post(client, world.guarded, content)
    assert 400 <= r.status_code < 500, (content[:80], r.status_code, r.text[:200])
    assert r.json()["error"]
    _check_csp(r)
    assert world.marks_lines(world.beta) == before


def test_a_body_over_the_limit_is_413(hub, client, world):
    before = world.marks_lines(world.beta)
    big = json.dumps({"op": "note", "summary": "x" * (70 * 1024), "project": world.beta}).encode()
    r = _raw_post(client, world.guarded, big)
    assert r.status_code == 413, r.status_code
    assert "KiB" in r.json()["error"]

    def chunks():  # no Content-Length: the Hub counts as it reads
        for i in range(0, len(big), 8192):
            yield big[i : i + 8192]

    r = client.post(
        f"/api/sessions/{world.guarded}/marks", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 413, r.status_code
    _check_csp(r)
    assert world.marks_lines(world.beta) == before


@pytest.mark.parametrize(
    "query",
    [
        "project=%00",
        "project=%00%00",
        "project={alpha}%00",
        "project=%ED%A0%80",
        "project=%FF",
        "project=" + "%2Fx" * 2000,
        "q=" + "x" * 2000,
        "filter=%00",
        "filter=" + "x" * 5000,
        "q=%ED%A0%80&filter=%00",
        "project=%C0%80",
    ],
)
def test_hostile_query_values_are_4xx(client, world, query):
    query = query.replace("{alpha}", world.alpha)
    for path in ("/api/sessions", f"/api/sessions/{world.healthy}"):
        r = client.get(f"{path}?{query}")
        if "project=" not in query and path != "/api/sessions":
            continue  # the detail takes only `project`
        assert 400 <= r.status_code < 500, (path, query[:60], r.status_code, r.text[:200])
        assert r.json()["error"]
        _check_csp(r)


def test_the_event_stream_checks_its_project(client, world):
    for query in ("project=%00", "project=/etc", "project=%ED%A0%80"):
        r = client.get(f"/api/events?{query}")
        assert r.status_code == 400, (query, r.status_code)
        assert r.json()["error"]
    with client.stream("GET", "/api/events", params={"project": world.beta}) as s:
        assert s.status_code == 200 and s.headers["content-type"].startswith("text/event-stream")


def test_an_absurdly_long_query_is_414(client):
    r = client.get("/api/sessions?q=" + "x" * 10_000)
    assert r.status_code == 414
    _check_csp(r)


@pytest.mark.parametrize(
    "path",
    [
        "/api/sessions/..%2F..%2Fetc%2Fpasswd",
        "/api/sessions/..%2F..%2F..%2F..%2F..%2Fetc%2Fpasswd?project=/",
        "/api/sessions/%2e%2e",
        "/api/sessions/not-a-uuid",
        "/api/sessions/..%2fsession_marks.jsonl",
        "/api/sessions/%00",
        "/api/sessions/%ED%A0%80",
        "/static/..%2F..%2F..%2F..%2Fetc%2Fpasswd",
        "/static/%2e%2e/app.py",
        "/static/%00",
    ],
)
def test_session_ids_and_static_paths_are_validated(client, path):
    r = client.get(path)
    assert r.status_code in (400, 404), (path, r.status_code)
    assert "root:" not in r.text and "import" not in r.text
    if path.startswith("/api/sessions/") and r.status_code == 400:
        assert "uuid" in r.json()["error"].lower()


def test_marks_post_validates_the_id(hub, client, world):
    before = world.marks_lines(world.beta)
    for sid in ("not-a-uuid", "..%2F..%2Fetc", world.guarded[:8], "%00"):
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
    projects = r.json()["projects"]
    assert [(p["path"], p["name"]) for p in projects] == [(world.alpha, "alpha"), (world.beta, "beta")]
    # The rail's live count: the one live session's project has 1, the other none.
    live_project = next(row["project"] for row in _rows(client) if row["id"] == world.live)
    assert {p["path"]: p["live"] for p in projects} == {
        world.alpha: int(live_project == world.alpha),
        world.beta: int(live_project == world.beta),
    }


def test_listing_rows_carry_no_prompts(client, world):
    r = client.get("/api/sessions")
    assert r.status_code == 200
    data = r.json()
    rows = data["rows"]
    assert sessions_ids(rows) == set(world.rows_a) | set(world.rows_b)
    assert {p["path"] for p in data["projects"]} == {world.alpha, world.beta}
    for row in rows:
        assert not PROMPT_KEYS & set(row), row["id"]
        assert set(row) >= LISTING_KEYS, row["id"]
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


PER_REPLY = {"input": 3, "output": 28, "cache_write": 3296, "cache_read": 11331}  # tests/transcripts.py's usage
PER_REPLY_USD = (3 * 5 + 28 * 25 + 3296 * 6.25 + 11331 * 0.5) / 1e6  # opus 4.5; cache write 1.25x, read 0.1x


def _accounted(client, project: str) -> dict[str, dict]:
    """The project's rows once the Hub's own accountant (first run at start) has counted them all."""

    def ready():
        rows = {r["id"]: r for r in _rows(client, project=project)}
        return rows if all(r["tokens"] for r in rows.values()) else None

    return wait_for(ready, timeout=30)


def test_rows_detail_and_rail_carry_tokens_and_cost(client, world):
    rows = _accounted(client, world.alpha)
    for name, replies in (("healthy", 3), ("live", 3), ("hinted", 1), ("secret", 10)):
        row = rows[getattr(world, name)]
        tokens = row["tokens"]
        assert {k: tokens[k] for k in PER_REPLY} == {k: v * replies for k, v in PER_REPLY.items()}, name
        assert tokens["total"] == sum(PER_REPLY.values()) * replies and row["unpriced_models"] == []
        assert abs(row["cost_usd"] - PER_REPLY_USD * replies) < 1e-6, name
    # The detail carries the same figures; the rail sums the project's sessions.
    d = client.get(f"/api/sessions/{world.secret}", params={"project": world.alpha}).json()
    assert d["row"]["tokens"] == rows[world.secret]["tokens"]
    projects = {p["path"]: p for p in client.get("/api/projects").json()["projects"]}
    usage = projects[world.alpha]["usage"]
    assert usage["sessions"] == len(rows) == 6
    assert usage["tokens"]["total"] == sum(r["tokens"]["total"] for r in rows.values())
    assert abs(usage["cost_usd"] - sum(r["cost_usd"] for r in rows.values())) < 1e-6
    assert set(projects[world.beta]["usage"]) == {"sessions", "tokens", "cost_usd", "unpriced_models"}


def test_new_totals_from_an_accountant_refresh_the_rows(hub, client, world, monkeypatch):
    """Whoever writes new totals (a server, `c3async stats`, the Hub's own run): the change feed
    sees the stats log move and the rows show them. Here a row appended as an accountant does."""
    from c3async.sessions.watch import position

    world.claude.activate(monkeypatch)
    _accounted(client, world.beta)
    before = position(resolve(world.beta))
    events: queue.Queue = queue.Queue()

    def read() -> None:
        try:
            with (
                hub.client(timeout=httpx.Timeout(10, read=20)) as c,
                c.stream("GET", "/api/events", params={"project": world.beta}) as s,
            ):
                for line in s.iter_lines():
                    events.put(line)
        except Exception as exc:
            events.put(f"error: {exc!r}")

    threading.Thread(target=read, daemon=True).start()
    assert events.get(timeout=10).startswith("retry:")  # the baseline is taken
    stats = Path(world.beta) / ".c3" / "session_stats.jsonl"
    with open(stats, "a") as f:
        f.write(
            json.dumps(
                {
                    "session_id": world.wt,
                    "ts": time.time(),
                    "input": 1_234_567,
                    "output": 1,
                    "cache_read": 2,
                    "cache_write_5m": 3,
                    "cache_write_1h": 4,
                    "cost_usd": 3.4,
                }
            )
            + "\n"
        )
    assert position(resolve(world.beta)) != before  # what the feed polls moved with the stats log alone
    deadline = time.monotonic() + 6
    while (line := events.get(timeout=max(0.01, deadline - time.monotonic()))) != "event: change":
        assert not line.startswith("error: "), line
    row = {r["id"]: r for r in _rows(client, project=world.beta)}[world.wt]  # a worktree's session
    assert row["tokens"]["input"] == 1_234_567 and row["tokens"]["cache_write"] == 7
    assert row["tokens"]["total"] == 1_234_567 + 1 + 2 + 7 and row["cost_usd"] == 3.4


@pytest.mark.parametrize(
    "which,expected",
    [
        ("all", ("healthy", "live", "hinted", "secret", "staled", "noted")),
        ("likely", ("hinted", "secret")),
        ("stale", ("staled",)),
        ("live", ("live",)),
    ],
)
def test_filters(client, world, which, expected):
    rows = _rows(client, project=world.alpha, filter=which)
    assert sessions_ids(rows) == {getattr(world, name) for name in expected}


def test_filter_live_across_projects(client, world):
    assert sessions_ids(_rows(client, filter="live")) == {world.live}


@pytest.mark.parametrize(
    "q,expected",
    [
        ("zebra-needle-4711", "secret"),  # in the first prompt only
        ("QUOKKA-tail-0815", "secret"),  # in the last prompt only, any case
        ("payment refactor", "secret"),  # the title
        ("cache looked", "noted"),  # the note
        ("new approach", "staled"),  # the stale reason
    ],
)
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
        "step 7: keep going",
        "answer 7",
        "step 8: keep going",
        "answer 8",
        "step 9: keep going",
        "answer 9",
        LAST,
        "answer 10",
    ]
    assert row["resume"] == f"cd {shlex.quote(world.alpha)} && claude --resume {world.secret}"
    assert d["chain"] == {"predecessors": [], "successors": []}
    assert (d["row"]["chain_prev"], d["row"]["chain_next"]) == ([], [])


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
    assert r.status_code == 404 and r.json()["error"]


UNKNOWN = "00000000-0000-4000-8000-000000000000"


@pytest.mark.parametrize("project", [None, "alpha"])
def test_an_unknown_session_id_is_404_and_a_malformed_one_400(hub, client, world, project):
    """On the detail, the conversation and the marks: a well-formed id no project has is not
    found; one that is no UUID is a bad request. Nothing is written either way."""
    params = {"project": world.alpha} if project else {}
    before = world.marks_lines(world.alpha)
    for sid, status in ((UNKNOWN, 404), (UNKNOWN.upper(), 404), ("not-a-uuid", 400), (world.healthy[:8], 400)):
        for r in (
            client.get(f"/api/sessions/{sid}", params=params),
            client.get(f"/api/sessions/{sid}/conversation", params=params),
            _post(client, hub, sid, {"op": "note", "summary": "x", **params}),
        ):
            assert r.status_code == status, (sid, r.request.url, r.status_code, r.text)
            assert r.headers["content-type"].startswith("application/json") and r.json()["error"]
            if status == 404:
                assert UNKNOWN in r.json()["error"]
    assert world.marks_lines(world.alpha) == before


def test_worktree_session_resumes_in_the_worktree(client, world):
    rows = {r["id"]: r for r in _rows(client, project=world.beta)}
    want = f"cd {shlex.quote(world.worktree)} && claude --resume {world.wt}"
    assert rows[world.wt]["cwd"] == world.worktree
    assert rows[world.wt]["resume"] == want
    d = client.get(f"/api/sessions/{world.wt}", params={"project": world.beta}).json()
    assert d["row"]["resume"] == want
    assert d["row"]["branch"] == "feature"


def test_stale_with_successor_links_both_sides(hub, client, world):
    r = _post(
        client,
        hub,
        world.pred,
        {"op": "stale", "reason": "the second try replaced it", "successor": world.succ, "project": world.beta},
    )
    assert r.status_code == 201, r.text
    assert (r.json()["op"], r.json()["successor"], r.json()["by"]) == ("stale", world.succ, "user")
    before = client.get(f"/api/sessions/{world.pred}", params={"project": world.beta}).json()
    after = client.get(f"/api/sessions/{world.succ}", params={"project": world.beta}).json()
    assert before["chain"]["successors"] == [world.succ] and before["row"]["chain_next"] == [world.succ]
    assert after["chain"]["predecessors"] == [world.pred] and after["row"]["chain_prev"] == [world.pred]
    assert before["row"]["stale"]["successor"] == world.succ


def test_stale_needs_a_reason(hub, client, world):
    before = world.marks_lines(world.beta)
    for body in ({"op": "stale"}, {"op": "stale", "reason": "   "}, {"op": "stale", "reason": None}):
        r = _post(client, hub, world.marked, {**body, "project": world.beta})
        assert r.status_code == 400, body
        assert r.headers["content-type"].startswith("application/json")
        assert "reason" in r.json()["error"]
    assert world.marks_lines(world.beta) == before


@pytest.mark.parametrize(
    "body",
    [
        {"op": "delete"},
        {"op": ""},
        {"op": "note"},
        {"op": "stale", "reason": "x", "successor": "not-a-session"},
    ],
)
def test_bad_marks_are_400_with_a_message(hub, client, world, body):
    before = world.marks_lines(world.beta)
    r = _post(client, hub, world.marked, {**body, "project": world.beta})
    assert r.status_code == 400, (body, r.status_code, r.text)
    assert r.json()["error"]
    assert world.marks_lines(world.beta) == before


def test_a_mark_into_a_linked_marks_log_is_a_403_naming_it(claude, tmp_path):
    """A cloned repository may ship ``.c3/session_marks.jsonl`` as a link: the write is refused
    (a 403 naming it: the refusal is an OSError too, never a 500), and the target is untouched."""
    project = claude.project("linked")
    sid = simple_session(claude.folder(project), project, "a session")
    assert claude.run("sessions", "--project", project).returncode == 0
    target = tmp_path / "bashrc"
    target.write_text("keep me\n")
    log = Path(project) / ".c3" / "session_marks.jsonl"
    log.parent.mkdir(exist_ok=True)
    log.unlink(missing_ok=True)
    log.symlink_to(target)
    with Hub(claude) as h, h.client() as c:
        r = _post(c, h, sid, {"op": "note", "summary": "x", "project": project})
    assert r.status_code == 403, r.text
    assert "session_marks.jsonl" in r.json()["error"]
    assert target.read_text() == "keep me\n"


def test_marks_post_needs_a_json_object(hub, client, world):
    for content in (b"not json", b"[1, 2]", b""):
        r = client.post(
            f"/api/sessions/{world.marked}/marks",
            content=content,
            headers={"X-C3-Token": hub.token, "Content-Type": "application/json"},
        )
        assert r.status_code == 400, content
        assert r.json()["error"]


def test_stale_unstale_and_note_are_by_user(hub, client, world):
    claude = world.claude
    r = _post(
        client,
        hub,
        world.marked,
        {
            "op": "stale",
            "reason": "finished in the Hub",
            "project": world.beta,
            "by": "agent",
            "by_session": world.pred,
        },
    )  # not the client's to say
    assert r.status_code == 201, r.text
    row = claude.rows_by_id(world.beta)[world.marked]
    assert row["stale"]["reason"] == "finished in the Hub"
    assert row["stale"]["by"] == "user"
    assert world.marked in sessions_ids(_rows(client, project=world.beta, filter="stale"))

    r = _post(client, hub, world.marked, {"op": "unstale", "project": world.beta})
    assert r.status_code == 201, r.text
    assert claude.rows_by_id(world.beta)[world.marked]["stale"] is None
    assert world.marked not in sessions_ids(_rows(client, project=world.beta, filter="stale"))

    r = _post(
        client,
        hub,
        world.marked,
        {"op": "note", "summary": "parser half done", "next_steps": "error recovery", "project": world.beta},
    )
    assert r.status_code == 201, r.text
    note = claude.rows_by_id(world.beta)[world.marked]["note"]
    assert (note["summary"], note["next_steps"]) == ("parser half done", "error recovery")
    marks = [json.loads(x) for x in (Path(world.beta) / ".c3" / "session_marks.jsonl").read_text().splitlines()]
    mine = [m for m in marks if m["id"] == world.marked]
    assert [m["op"] for m in mine] == ["stale", "unstale", "note"]
    assert {m["by"] for m in mine} == {"user"} and {m.get("by_session") for m in mine} == {None}


def test_mark_without_project_finds_the_session(hub, client, world):
    r = client.post(
        f"/api/sessions/{world.marked}/marks",
        json={"op": "note", "summary": "no project given"},
        headers={"X-C3-Token": hub.token},
    )
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
        except Exception as exc:
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


# ------------------------------------------------------------------ the conversation reader
# Its own sandbox and Hub: the sessions here would change the counts the tests above check.

CONV_HTML = '<img src=x onerror="alert(1)">'


class ConvWorld:
    def __init__(self, claude) -> None:
        from stress.transcripts import Conversation, text, tool_use, write_session

        self.claude = claude
        p = self.project = claude.project("reader")
        folder = claude.folder(p)
        c = Conversation(p, start=NOW - timedelta(hours=1))
        lines: list = [c.permission_mode()]
        for n in range(30):
            lines += c.exchange(f"prompt {n} {CONV_HTML}", f"answer {n}")
            if n == 20:
                lines += c.tool_round("12 passed", input={"command": "npm test", "description": "Run"})
        task = tool_use("Task", {"description": "Find the bug", "prompt": "Look", "subagent_type": "x"})
        lines += c.reply(task)
        result = c.tool_result(task["id"], "found it")
        result["toolUseResult"] = {"agentId": "0a1b2c", "totalTokens": 1}
        lines.append(result)
        self.sid = c.id
        self.path = write_session(folder, c.id, lines)
        sub = Conversation(p, c.id, sidechain=True)
        write_session(folder / c.id / "subagents", "agent-0a1b2c", [sub.prompt("Look"), *sub.reply(text("Found"))])
        o = self.other = claude.project("reader-other")
        self.foreign = hub_session(claude.folder(o), o, ["Another project's prompt"])
        claude.sessions(p)  # registers both projects
        claude.sessions(o)


@pytest.fixture(scope="module")
def conv_world(tmp_path_factory) -> ConvWorld:
    return sandbox_world(tmp_path_factory, "reader", ConvWorld)


@pytest.fixture(scope="module")
def conv_hub(conv_world):
    with Hub(conv_world.claude) as h:
        yield h


def _conv(hub, sid: str, **params) -> httpx.Response:
    with hub.client() as c:
        return c.get(f"/api/sessions/{sid}/conversation", params=params)


def test_conversation_pages_forward_backward_and_at(conv_hub, conv_world):
    w = conv_world
    r = _conv(conv_hub, w.sid, project=w.project, limit=7)
    assert r.status_code == 200, r.text
    _check_csp(r)
    first = r.json()
    assert set(first) == {"items", "start", "end", "size", "prev", "next", "target", "changed", "id", "agent"}
    assert (first["id"], first["agent"], first["start"], first["prev"]) == (w.sid, None, 0, None)
    assert first["size"] == w.path.stat().st_size and not first["changed"]
    assert [i["kind"] for i in first["items"]] == ["user", "assistant"] * 3 + ["user"]
    assert first["items"][0]["text"] == f"prompt 0 {CONV_HTML}"  # as text, in JSON: the page sets textContent
    forward, page = list(first["items"]), first
    while page["next"] is not None:
        page = _conv(conv_hub, w.sid, project=w.project, limit=7, after=page["next"]).json()
        forward += page["items"]
    backward, page = [], _conv(conv_hub, w.sid, project=w.project, limit=9, before=first["size"]).json()
    backward[:0] = page["items"]
    while page["prev"] is not None:
        page = _conv(conv_hub, w.sid, project=w.project, limit=9, before=page["prev"]).json()
        backward[:0] = page["items"]
    assert forward == backward and len(forward) == 30 * 2 + 2
    tools = [i for i in forward if i["kind"] == "tool"]
    assert [(t["name"], t["summary"], t["output"]) for t in tools] == [
        ("Bash", "npm test", "12 passed"),
        ("Task", "Find the bug", "found it"),
    ]
    assert tools[1]["agent"] == "agent-0a1b2c"
    hit = tools[0]
    r = _conv(conv_hub, w.sid, project=w.project, at=hit["result_offset"] + 10, limit=10)
    assert r.status_code == 200 and r.json()["target"] == hit["offset"]
    assert hit["offset"] in [i["offset"] for i in r.json()["items"]]
    r = _conv(conv_hub, w.sid.upper())  # no project: the registered one that has it
    assert r.status_code == 200 and len(r.json()["items"]) == 50  # the default page


def test_conversation_of_a_sub_agent(conv_hub, conv_world):
    w = conv_world
    r = _conv(conv_hub, w.sid, project=w.project, agent="agent-0a1b2c")
    assert r.status_code == 200, r.text
    assert [(i["kind"], i["text"]) for i in r.json()["items"]] == [("user", "Look"), ("assistant", "Found")]
    assert r.json()["agent"] == "agent-0a1b2c"
    r = _conv(conv_hub, w.sid, project=w.project, agent="agent-ffff")
    assert r.status_code == 404 and "agent-ffff" in r.json()["error"]


def test_conversation_needs_the_token(conv_hub, conv_world):
    url = f"/api/sessions/{conv_world.sid}/conversation?project={conv_world.project}"
    with conv_hub.client(auth=False) as anon:
        r = anon.get(url)
        assert r.status_code == 401 and "prompt 0" not in r.text
        _check_csp(r)
    browser = conv_hub.login()
    try:
        assert browser.get(url).status_code == 200
        r = browser.get(url, headers={"Sec-Fetch-Site": "cross-site"})
        assert r.status_code == 403 and "prompt 0" not in r.text
    finally:
        browser.close()


@pytest.mark.parametrize(
    "params",
    [
        {"after": "-1"},
        {"after": "abc"},
        {"after": "1e3"},
        {"before": "9" * 30},
        {"at": "１２"},
        {"limit": "0"},
        {"limit": "201"},
        {"limit": "x"},
        {"after": "0", "before": "10"},
        {"agent": "../../../etc/passwd"},
        {"agent": "agent-a/b"},
        {"agent": "agent-\x00"},
        {"agent": "x" * 300},
    ],
)
def test_bad_conversation_parameters_are_400(conv_hub, conv_world, params):
    r = _conv(conv_hub, conv_world.sid, project=conv_world.project, **params)
    assert r.status_code == 400, (params, r.status_code, r.text)
    assert r.json()["error"] and "prompt 0" not in r.text


def test_conversation_limit_is_capped_and_ids_validated(conv_hub, conv_world):
    w = conv_world
    r = _conv(conv_hub, w.sid, project=w.project, limit=200)
    assert r.status_code == 200 and len(r.json()["items"]) == 62 and r.json()["next"] is None
    r = _conv(conv_hub, "00000000-0000-4000-8000-000000000000", project=w.project)
    assert r.status_code == 404 and r.json()["error"]
    r = _conv(conv_hub, w.foreign, project=w.project)  # another project's session
    assert r.status_code == 404 and "Another project" not in r.text
    r = _conv(conv_hub, w.sid, project="/etc")
    assert r.status_code == 400 and "prompt 0" not in r.text
    for bad in ("not-a-uuid", "..%2F..%2Fetc%2Fpasswd", "%00"):
        with conv_hub.client() as c:
            r = c.get(f"/api/sessions/{bad}/conversation")
        assert r.status_code in (400, 404), bad
        assert "root:" not in r.text


# --- full-text search (/api/search) --------------------------------------------------------------
# Its own sandbox and Hub, as the reader's: two projects, a planted phrase in two prompts and in
# one tool output (which only matches with tools=1).

PHRASE = "zebra_quokka_budget"
SEARCH_HTML = "<img src=x onerror=alert(1)>"
SEARCH_KEYS = {"query", "total", "seconds", "problems", "index", "results"}
INDEX_KEYS = {"files", "updating", "done_bytes", "total_bytes", "pending_bytes", "indexed_now", "seconds"}
RESULT_KEYS = {
    "id",
    "fields",
    "project",
    "folder",
    "path",
    "cwd",
    "title",
    "title_source",
    "branch",
    "last_ts",
    "age",
    "resume",
    "score",
    "hits",
    "snippets",
    "also_in",
}
SNIPPET_KEYS = {"text", "marks", "role", "sidechain", "ts", "offset", "agent"}


class SearchWorld:
    def __init__(self, claude) -> None:
        from stress.transcripts import Conversation, write_session

        self.claude = claude
        a = self.a = claude.project("search-a")
        fa = claude.folder(a)
        self.prompted = hub_session(
            fa,
            a,
            [f"please look at {SEARCH_HTML} {PHRASE} now", "and then the rest"],
            title="Budget planted in a prompt",
            branch="feature/budget",
        )
        c = Conversation(a, start=NOW - timedelta(hours=2))
        lines: list = [c.permission_mode(), *c.exchange("run the checks", "running them")]
        lines += c.tool_round(f"checks: {PHRASE} exceeded by 3")
        self.tooled = c.id
        write_session(fa, c.id, lines)
        b = self.b = claude.project("search-b")
        self.other = hub_session(claude.folder(b), b, [f"{PHRASE} in the other project too"], title="Other budget")
        claude.sessions(a)  # registers both projects
        claude.sessions(b)


@pytest.fixture(scope="module")
def search_world(tmp_path_factory) -> SearchWorld:
    return sandbox_world(tmp_path_factory, "search", SearchWorld)


@pytest.fixture(scope="module")
def search_hub(search_world):
    with Hub(search_world.claude) as h:
        yield h.indexed()  # the index the Hub builds at start


def _search(hub, **params) -> httpx.Response:
    with hub.client() as c:
        return c.get("/api/search", params=params)


def _found(hub, **params) -> dict[str, dict]:
    r = _search(hub, **params)
    assert r.status_code == 200, r.text
    return {x["id"]: x for x in r.json()["results"]}


def test_search_needs_the_token(search_hub, search_world):
    with search_hub.client(auth=False) as anon:
        for path in (f"/api/search?q={PHRASE}", "/api/search/status"):
            r = anon.get(path)
            assert r.status_code == 401, path
            _check_csp(r)
            assert "token" in r.json()["error"]
            for secret in (PHRASE, search_world.prompted, search_world.a, "files"):
                assert secret not in r.text, (path, secret)
    browser = search_hub.login()  # the page's token header, from the page's own origin only
    try:
        assert browser.get(f"/api/search?q={PHRASE}").status_code == 200
        r = browser.get(f"/api/search?q={PHRASE}", headers={"Sec-Fetch-Site": "cross-site"})
        assert r.status_code == 403 and PHRASE not in r.text
    finally:
        browser.close()


@pytest.mark.parametrize(
    "params",
    [
        {"q": "!!!"},
        {"q": ""},
        {"q": "NOT budget"},
        {"q": "x" * 2001},
        {"q": PHRASE, "role": "robot"},
        {"q": PHRASE, "since": "yesterday"},
        {"q": PHRASE, "limit": "0"},
        {"q": PHRASE, "limit": "51"},
        {"q": PHRASE, "project": "/etc"},
    ],
)
def test_a_bad_search_is_400_with_a_message(search_hub, search_world, params):
    r = _search(search_hub, **params)
    assert r.status_code == 400, (params, r.status_code, r.text)
    _check_csp(r)
    assert set(r.json()) == {"error"} and r.json()["error"]
    assert search_world.prompted not in r.text


def test_search_results_shape_marks_and_resume(search_hub, search_world):
    w = search_world
    r = _search(search_hub, q=PHRASE)
    assert r.status_code == 200, r.text
    _check_csp(r)
    data = r.json()
    assert set(data) == SEARCH_KEYS and set(data["index"]) == INDEX_KEYS
    assert data["query"] == PHRASE and data["problems"] == [] and not data["index"]["updating"]
    assert data["index"]["files"] == 3
    found = {x["id"]: x for x in data["results"]}
    assert set(found) == {w.prompted, w.other} and data["total"] == 2  # not the tool output
    hit = found[w.prompted]
    assert set(hit) == RESULT_KEYS
    assert (hit["project"], hit["cwd"], hit["title"], hit["title_source"], hit["branch"], hit["hits"]) == (
        w.a,
        w.a,
        "Budget planted in a prompt",
        "custom",
        "feature/budget",
        1,
    )
    assert hit["resume"] == f"cd {shlex.quote(w.a)} && claude --resume {w.prompted}"
    assert re.fullmatch(r"\d+[smhd]", hit["age"]) and isinstance(hit["last_ts"], int)
    [snippet] = hit["snippets"]
    assert set(snippet) == SNIPPET_KEYS
    assert (snippet["role"], snippet["sidechain"], snippet["agent"]) == ("user", False, None)
    assert SEARCH_HTML in snippet["text"]  # as text: the page puts it in text nodes
    assert [snippet["text"][s:e] for s, e in snippet["marks"]] == [PHRASE]
    # the offset is the prompt's line: the reader opens there
    page = _conv(search_hub, w.prompted, project=w.a, at=snippet["offset"], limit=5).json()
    target = next(i for i in page["items"] if i["offset"] == page["target"])
    assert PHRASE in target["text"] and target["kind"] == "user"
    assert found[w.other]["project"] == w.b


def test_search_project_role_limit_and_tools(search_hub, search_world):
    w = search_world
    assert set(_found(search_hub, q=PHRASE, project=w.a)) == {w.prompted}
    assert set(_found(search_hub, q=PHRASE, project=w.b)) == {w.other}
    assert set(_found(search_hub, q=PHRASE, role="user")) == {w.prompted, w.other}
    assert set(_found(search_hub, q=PHRASE, role="assistant")) == set()
    assert set(_found(search_hub, q=PHRASE, limit=1)) <= {w.prompted, w.other}
    r = _search(search_hub, q=PHRASE, limit=1)
    assert (r.json()["total"], len(r.json()["results"])) == (2, 1)
    # tool output only with tools=1
    both = _found(search_hub, q=PHRASE, tools=1)
    assert set(both) == {w.prompted, w.other, w.tooled}
    [snippet] = both[w.tooled]["snippets"]
    assert snippet["role"] == "tool" and [snippet["text"][s:e] for s, e in snippet["marks"]] == [PHRASE]
    assert set(_found(search_hub, q=PHRASE, tools="1", project=w.a)) == {w.prompted, w.tooled}
    assert set(_found(search_hub, q=PHRASE, tools="0")) == {w.prompted, w.other}
    # the prompts are about an hour old, the tool output two
    assert set(_found(search_hub, q=PHRASE, tools=1, since="90m")) == {w.prompted, w.other}
    assert set(_found(search_hub, q=PHRASE, tools=1, until="90m")) == {w.tooled}
    assert set(_found(search_hub, q=PHRASE, branch="feature/budget")) == {w.prompted}


def test_search_status_answers(search_hub):
    with search_hub.client() as c:
        r = c.get("/api/search/status")
    assert r.status_code == 200, r.text
    assert r.json() == {"updating": False, "done_bytes": 0, "total_bytes": 0}


# ---------------------------------------------------------------- keeping past Claude Code's cleanup

DAY = 86_400


class KeepWorld:
    """One project, ``kappa``: fresh sessions to keep, unkeep and delete, and one whose
    transcript was last written 26 days ago (Claude Code's default cleanup is 30 days: it
    expires in 4 days)."""

    def __init__(self, claude) -> None:
        self.claude = claude
        k = self.kappa = claude.project("kappa")
        self.folder = claude.folder(k)
        three = ["Add the endpoint", "Write its tests", "Update the docs"]
        self.tokeep = _session(self.folder, k, three, title="Session kept and unkept in the Hub")
        self.todelete = _session(self.folder, k, three, title="Session Claude Code deletes after its keep")
        self.old = _session(self.folder, k, ["Sketch the importer"], title="Old importer sketch")
        when = time.time() - 26 * DAY
        os.utime(self.transcript(self.old), (when, when))
        claude.sessions(k)  # registers the project

    def transcript(self, sid: str) -> Path:
        return self.folder / f"{sid}.jsonl"

    def archived(self, sid: str) -> Path:
        return Path(self.claude.c3home) / "archive" / self.folder.name / f"{sid}.jsonl"


@pytest.fixture(scope="module")
def keep_world(tmp_path_factory) -> KeepWorld:
    return sandbox_world(tmp_path_factory, "keep", KeepWorld)


@pytest.fixture(scope="module")
def keep_hub(keep_world):
    with Hub(keep_world.claude) as h:
        yield h


def _keep_rows(hub, w: KeepWorld, **params) -> dict[str, dict]:
    with hub.client() as c:
        return {r["id"]: r for r in _rows(c, project=w.kappa, **params)}


def test_keep_fields_are_in_every_listing_row(keep_hub, keep_world):
    w = keep_world
    rows = _keep_rows(keep_hub, w)
    assert set(rows) == {w.tokeep, w.todelete, w.old}
    for r in rows.values():
        assert {"kept", "kept_by", "archived", "expires_in_days"} <= set(r)
    fresh = rows[w.tokeep]
    assert (fresh["kept"], fresh["kept_by"], fresh["archived"], fresh["expires_in_days"]) == (False, None, False, None)
    assert not any(h.startswith("expires in") for h in fresh["hints"])


def test_keep_filter_expiring_lists_only_the_old_session(keep_hub, keep_world):
    w = keep_world
    rows = _keep_rows(keep_hub, w, filter="expiring")
    assert set(rows) == {w.old}
    old = rows[w.old]
    assert old["expires_in_days"] == 4 and "expires in 4d" in old["hints"]
    assert (old["kept"], old["archived"]) == (False, False)
    with keep_hub.client() as c:
        r = c.get("/api/sessions", params={"filter": "nonsense"})
    assert r.status_code == 400 and "expiring" in r.json()["error"]


def test_keep_and_unkeep_from_the_hub(keep_hub, keep_world):
    w = keep_world
    with keep_hub.client() as c:
        r = _post(c, keep_hub, w.tokeep, {"op": "keep", "project": w.kappa, "reason": "the design discussion"})
    assert r.status_code == 201, r.text
    assert r.json()["op"] == "keep" and r.json()["by"] == "user"
    row = _keep_rows(keep_hub, w)[w.tokeep]
    assert (row["kept"], row["kept_by"], row["archived"]) == (True, "mark", False)
    assert w.archived(w.tokeep).is_file()  # preserved at once, not at the next listing
    assert w.tokeep not in _keep_rows(keep_hub, w, filter="expiring")

    with keep_hub.client() as c:
        r = _post(c, keep_hub, w.tokeep, {"op": "unkeep", "project": w.kappa})
    assert r.status_code == 201, r.text
    row = _keep_rows(keep_hub, w)[w.tokeep]
    assert (row["kept"], row["kept_by"]) == (False, None)
    assert not w.archived(w.tokeep).exists()
    assert w.transcript(w.tokeep).is_file()  # Claude Code's own file is never touched


def test_keep_posted_by_the_page_needs_its_origin_and_header(keep_hub, keep_world):
    w = keep_world
    page = keep_hub.login()
    try:
        r = _post(page, keep_hub, w.tokeep, {"op": "keep", "project": w.kappa}, Origin=keep_hub.url)
        assert r.status_code == 403, r.text  # no X-C3-Request: 1
        assert _keep_rows(keep_hub, w)[w.tokeep]["kept_by"] != "mark"
    finally:
        page.close()


def test_keep_a_session_whose_transcript_claude_code_deletes_afterwards(keep_hub, keep_world):
    w = keep_world
    with keep_hub.client() as c:
        r = _post(c, keep_hub, w.todelete, {"op": "keep", "project": w.kappa})
    assert r.status_code == 201, r.text
    w.transcript(w.todelete).unlink()  # what Claude Code's cleanup does
    row = _keep_rows(keep_hub, w)[w.todelete]
    assert (row["kept"], row["kept_by"], row["archived"]) == (True, "mark", True)
    assert row["resume"] == f"cd {row['cwd']} && c3async resume {w.todelete}"
    assert row["title"] == "Session Claude Code deletes after its keep"
    assert row["expires_in_days"] is None
    with keep_hub.client() as c:
        d = c.get(f"/api/sessions/{w.todelete}", params={"project": w.kappa})
    assert d.status_code == 200, d.text
    assert d.json()["row"]["archived"] is True
