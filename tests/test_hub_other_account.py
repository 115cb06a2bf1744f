"""Another account on the same machine probes the Hub: it can reach the loopback port, and it
can walk every folder the user left open, but it gets no transcript text, no token and no way
to write a mark. Run as a real second account (``nobody``), which needs root to switch to."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
import textwrap

import pytest
from hubproc import Hub

from stress.harness import SYSTEM_PYTHON, as_nobody
from stress.transcripts import simple_session

pytestmark = pytest.mark.process

SECRET = "zebra-needle-other-account-4711"

PROBE = textwrap.dedent(
    """
    import json, os, sys, urllib.request, urllib.error
    url, token_file, sid, project = sys.argv[1:5]
    out = {"uid": os.getuid()}

    def fetch(path, method="GET", body=None, headers=None):
        req = urllib.request.Request(url + path, method=method, data=body, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.read(200_000).decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read(200_000).decode("utf-8", "replace")

    try:
        with open(token_file) as f:
            out["token_file"] = f.read()
    except OSError as exc:
        out["token_file"] = type(exc).__name__
    try:
        out["hub_dir"] = os.listdir(os.path.dirname(token_file))
    except OSError as exc:
        out["hub_dir"] = type(exc).__name__
    for path in ("/", "/api/projects", "/api/sessions", f"/api/sessions/{sid}", "/api/events",
                 "/?token=guess", "/static/app.js"):
        out[path] = fetch(path)
    mark = json.dumps({"op": "note", "summary": "from another account", "project": project}).encode()
    out["post"] = fetch(f"/api/sessions/{sid}/marks", "POST", mark,
                        {"Content-Type": "application/json", "Origin": url, "X-C3-Request": "1"})
    print(json.dumps(out))
    """
)


# The probe needs a Python the other account can run (the test's own may sit under /root).


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another account needs root")
@pytest.mark.skipif(SYSTEM_PYTHON is None, reason="no system Python for the other account")
def test_another_account_gets_nothing_from_the_hub(claude) -> None:
    nobody = pwd.getpwnam("nobody")
    project = claude.project("app")
    sid = simple_session(claude.folder(project), project, f"the secret prompt {SECRET}")
    assert claude.run("sessions", "--project", project).returncode == 0  # registers the project
    # The other account may walk every folder the user left open on the way to the Hub's files.
    for folder in (claude.root.parent, claude.root, claude.c3home):
        os.chmod(folder, 0o755)
    hub = Hub(claude).start()
    try:
        assert hub.token_file.exists()
        proc = as_nobody(PROBE, hub.url, str(hub.token_file), sid, project)
        assert proc.returncode == 0, proc.stderr
        seen = json.loads(proc.stdout)
    finally:
        hub.stop()
    assert seen["uid"] == nobody.pw_uid
    assert seen["token_file"] == "PermissionError" and seen["hub_dir"] == "PermissionError"
    for path in ("/api/projects", "/api/sessions", f"/api/sessions/{sid}", "/api/events"):
        status, body = seen[path]
        assert status == 401, (path, status)
        assert SECRET not in body and project not in body, path
    for path in ("/", "/?token=guess"):
        status, body = seen[path]
        assert status in (200, 403), (path, status)
        assert SECRET not in body and project not in body and hub.token not in body, path
    assert hub.token not in json.dumps(seen)
    assert seen["post"][0] in (401, 403)
    # Nothing was written on its behalf.
    marks = claude.root / "work" / "app" / ".c3" / "session_marks.jsonl"
    assert not marks.exists() or "from another account" not in marks.read_text()


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another account needs root")
@pytest.mark.skipif(SYSTEM_PYTHON is None, reason="no system Python for the other account")
def test_the_hub_answers_while_another_account_holds_1100_idle_connections(claude) -> None:
    """The Hub starts with the soft file limit a desktop has (1,024); another account opens
    1,100 connections and sends nothing, reopening each one the Hub closes. The user's own
    requests are still answered (the Hub raised its limit, closes connections that send no
    request, and makes room by closing the oldest idle one)."""
    import resource
    import time

    from stress.hostile_neighbour import IDLE, Flood

    project = claude.project("app")
    simple_session(claude.folder(project), project, "a session")
    assert claude.run("sessions", "--project", project).returncode == 0
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < IDLE + 200:
        pytest.skip(f"the hard file limit ({hard}) leaves no room for {IDLE} connections")
    hub = Hub(claude, preexec=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))).start()
    try:
        flood = Flood(hub.port, IDLE, hold=8.0)
        held = flood.wait_ready()
        answers = []
        with hub.client(timeout=10) as c:
            for _ in range(5):
                answers.append(c.get("/api/projects").status_code)
                time.sleep(0.3)
        opened, closed, _ = flood.finish()
    finally:
        hub.stop()
    assert held, "the neighbour never held its connections"
    assert answers == [200] * 5
    assert opened >= IDLE and closed > 0, (opened, closed)  # the Hub closed idle ones to make room


def test_the_hub_folder_must_be_private_and_ours(claude) -> None:
    folder = claude.c3home / "hub"
    folder.mkdir(parents=True)
    os.chmod(folder, 0o755)
    proc = subprocess.run(
        [sys.executable, "-m", "c3async", "hub", "--port", "0"],
        capture_output=True,
        text=True,
        env=claude.env(),
        timeout=60,
    )
    assert proc.returncode == 1 and "chmod 700" in proc.stderr and str(folder) in proc.stderr, proc.stderr
    if os.geteuid() == 0:
        os.chmod(folder, 0o700)
        os.chown(folder, 65534, 65534)
        proc = subprocess.run(
            [sys.executable, "-m", "c3async", "hub", "--port", "0"],
            capture_output=True,
            text=True,
            env=claude.env(),
            timeout=60,
        )
        assert proc.returncode == 1 and "another account" in proc.stderr, proc.stderr
    assert list(folder.iterdir()) == []


def test_the_url_is_written_once_the_socket_listens(claude) -> None:
    """The moment the token file exists, its URL answers (it used to be written before listen())."""
    import json as _json
    import socket
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "c3async", "hub", "--port", "0"], stderr=subprocess.DEVNULL, env=claude.env()
    )
    try:
        folder = claude.c3home / "hub"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = list(folder.glob("hub-*.json")) if folder.is_dir() else []
            if found:
                break
            time.sleep(0.001)
        doc = _json.loads(found[0].read_text())
        with socket.create_connection(("127.0.0.1", doc["port"]), timeout=5):
            pass  # accepted: the socket was listening before the file was written
    finally:
        proc.terminate()
        proc.wait(10)
