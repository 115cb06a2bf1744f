"""The plugin's launcher (``plugin/launch.py``), run as Claude Code runs it: ``python3 -I
launch.py serve|hook`` with ``CLAUDE_PLUGIN_DATA`` set, from a clean copy of this checkout.

Real builds (pip, or uv where installed; the registry or its cache): the first start builds the
environment once however many windows start at once, a build outlives a launcher killed while
it waits (Claude Code gives up after 30 s), a new plugin version builds anew and keeps the one
before, nothing is written under the plugin's folder, and the folder Claude Code starts the
server in (a cloned repository) can never put a module on its path.

Plants, without a build: a ``CLAUDE_PLUGIN_DATA`` another account owns or could write (or below
a folder others could write), an ``env-<key>`` (the key computed by the launcher), its ``bin``,
``python`` or ``pyvenv.cfg`` theirs, writable by others or a link, a ``pycache`` likewise, and a
plugin folder, package or module others could change: each refused in one line naming it, the
planted ``python`` (which leaves a marker: a control shows it does run when nothing is wrong)
never run, a hook exiting 0.

While it builds (a ``uv`` of the test's first on PATH: it makes the environment from this
Python's own packages, and holds the build until the test opens its gate, or fails it): the
launcher answers ``initialize`` and the lists from the manifest at once, a tool call waits and is
answered by the real server once the gate opens, the server's ``list_changed`` reaches the client,
closing stdin or a signal ends both; a failed build answers a call with an error naming
``build.log``; the manifest is what the server answers; two Pythons of one version share one
environment; a hook fired during the build is saved, then replayed with its own time; an
environment replaced by a new version goes once no server runs from it, another Python's stays.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from plugin_build import Gate, wait_for

from stress.transcripts import simple_session

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """A clean copy of the plugin's files (what a marketplace install holds)."""
    dest = tmp_path_factory.mktemp("plugin-root") / "c3async"
    shutil.copytree(REPO, dest, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", "tests", "stress"))
    return dest


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


def _env(claude, data: Path, project: str) -> dict[str, str]:
    env = claude.env(CLAUDE_PLUGIN_DATA=str(data), CLAUDE_PROJECT_DIR=project)
    env.pop("PYTHONPATH", None)
    return env


def _builds(data: Path) -> int:
    log = data / "build.log"
    return log.read_text().count(" building ") if log.exists() else 0


class Client:
    """An MCP client of ``launch.py serve`` over its stdin and stdout, one message a line."""

    def __init__(self, root: Path, env: dict[str, str], cwd: str, python: str = sys.executable) -> None:
        self.proc = subprocess.Popen(
            [python, "-I", str(root / "plugin" / "launch.py"), "serve"],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.inbox: queue.Queue[dict | None] = queue.Queue()
        self.notes: list[dict] = []
        self.err: list[bytes] = []
        self.next_id = 0
        self.readers = [threading.Thread(target=self._read), threading.Thread(target=self._read_err)]
        for reader in self.readers:
            reader.daemon = True
            reader.start()

    def _read_err(self) -> None:
        self.err.extend(self.proc.stderr)

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.inbox.put(json.loads(line))  # anything but JSON on stdout fails here
        self.inbox.put(None)

    def send(self, **msg) -> None:
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", **msg}).encode() + b"\n")
        self.proc.stdin.flush()

    def next(self, timeout: float = 120) -> dict:
        try:
            msg = self.inbox.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no message in {timeout:.0f} s; stderr: {self.stderr()}") from None
        assert msg is not None, f"stdout closed; stderr: {self.stderr()}"
        return msg

    def ask(self, method: str, params: dict | None = None) -> int:
        self.next_id += 1
        self.send(id=self.next_id, method=method, **({"params": params} if params is not None else {}))
        return self.next_id

    def answer(self, mid: int, timeout: float = 120) -> dict:
        """The answer to request ``mid`` (notifications met on the way kept in ``notes``)."""
        while True:
            msg = self.next(timeout)
            if "method" in msg:
                self.notes.append(msg)
            else:
                assert msg.get("id") == mid, msg
                return msg

    def request(self, method: str, params: dict | None = None, timeout: float = 120) -> dict:
        return self.answer(self.ask(method, params), timeout)

    def initialize(self, version: str = "2025-11-25") -> dict:
        params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
        reply = self.request("initialize", params)
        self.send(method="notifications/initialized")
        return reply

    def real(self, timeout: float = 180) -> str:
        """What only the real server can answer (the build waited for): the open tasks' text."""
        reply = self.request("resources/read", {"uri": "c3://tasks/open"}, timeout)
        return reply["result"]["contents"][0]["text"]

    def close(self, timeout: float = 30) -> int:
        """Close stdin (what Claude Code does at the end): the launcher's exit status, once its
        output is all read."""
        self.proc.stdin.close()
        status = self.proc.wait(timeout)
        self._done(timeout)
        return status

    def kill(self) -> None:
        """What a timed-out start comes to in Claude Code."""
        self.proc.kill()
        self.proc.wait()
        self.proc.stdin.close()
        self._done(30)

    def _done(self, timeout: float) -> None:
        for reader in self.readers:
            reader.join(timeout)
        self.proc.stdout.close()
        self.proc.stderr.close()

    def stderr(self) -> str:
        return b"".join(self.err).decode(errors="replace")[-2000:]


def _server_of(client: Client) -> psutil.Process:
    """The real server the launcher started (its other child, the builder, may still run)."""
    found = []
    for child in psutil.Process(client.proc.pid).children():
        try:
            if child.cmdline()[-3:] == ["-m", "c3async", "serve"]:
                found.append(child)
        except psutil.Error:
            pass  # the builder, ending
    (server,) = found
    return server


def _manifest(root: Path) -> dict:
    return json.loads((root / "plugin" / "manifest.json").read_text())


@pytest.mark.slow
def test_windows_starting_at_once_build_once_and_all_connect(root, claude, tmp_path):
    before = _files(root)
    data = tmp_path / "data"
    project = claude.project("p")
    env = _env(claude, data, project)
    clients = [Client(root, env, project) for _ in range(3)]
    for client in clients:  # answered from the manifest while the environment builds
        assert client.initialize()["result"]["serverInfo"]["name"] == "c3async"
    assert all(client.real().startswith("# Open tasks") for client in clients)  # then by the server
    assert [client.close() for client in clients] == [0, 0, 0]
    assert _builds(data) == 1
    later = Client(root, env, project)  # a later start: the server itself, no build
    assert later.initialize()["result"]["serverInfo"]["name"] == "c3async"
    assert later.real().startswith("# Open tasks") and later.close() == 0
    assert "first start" not in later.stderr() and _builds(data) == 1
    assert _files(root) == before, "the launcher wrote under the plugin's folder"
    assert len(list(data.glob("env-*/.c3async-ready"))) == 1


@pytest.mark.slow
def test_a_build_outlives_the_launcher_claude_code_gave_up_on(root, claude, tmp_path):
    data = tmp_path / "data"
    project = claude.project("q")
    env = _env(claude, data, project)
    client = Client(root, env, project)
    wait_for("the build started", (data / "build.log").exists, 30)
    client.kill()
    wait_for("the build finished", lambda: bool(list(data.glob("env-*/.c3async-ready"))), 180)
    later = Client(root, env, project)
    assert later.initialize()["result"]["serverInfo"]["name"] == "c3async" and later.real()
    assert later.close() == 0 and "first start" not in later.stderr()
    assert _builds(data) == 1


@pytest.mark.slow
def test_the_hook_records_through_the_plugins_environment(root, claude, tmp_path):
    data = tmp_path / "data"
    project = claude.project("h")
    env = _env(claude, data, project)
    client = Client(root, env, project)
    client.initialize()
    client.real()  # built
    client.close()
    sid = "abcd1234-0000-4000-8000-000000000001"
    payload = json.dumps({"hook_event_name": "SessionStart", "session_id": sid, "source": "startup", "cwd": project})
    out = _launch(root, "hook", env, project, stdin=payload)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(x) for x in Path(project, ".c3", "activity.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["session_id"]) for r in rows] == [("session_start", sid)]


@pytest.mark.slow
def test_the_folder_it_starts_in_never_puts_a_module_on_its_path(root, claude, tmp_path):
    data = tmp_path / "data"
    project = claude.project("hostile")
    marker = tmp_path / "pwned"
    for name in ("msgspec.py", "anyio.py", "c3async.py"):
        Path(project, name).write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    client = Client(root, _env(claude, data, project), project)
    assert client.initialize()["result"]["serverInfo"]["name"] == "c3async"
    assert client.real().startswith("# Open tasks")  # the server ran there
    client.close()
    assert not marker.exists()
    assert os.path.isdir(data / "pycache") or os.environ.get("PYTHONDONTWRITEBYTECODE")


@pytest.mark.slow
def test_the_first_start_answers_at_once_then_hands_over_to_the_server(root, claude, tmp_path):
    data, project = tmp_path / "data", claude.project("first")
    gate = Gate(tmp_path)
    manifest = _manifest(root)
    client = Client(root, gate.env(_env(claude, data, project)), project)
    unknown = client.initialize("2099-01-01")["result"]  # the build cannot end before the gate opens
    assert unknown == {**manifest["initialize"], "protocolVersion": manifest["fallbackProtocolVersion"]}
    assert client.initialize("2025-06-18")["result"]["protocolVersion"] == "2025-06-18"
    for method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list"):
        assert client.request(method)["result"] == manifest[method], method
    call = client.ask("tools/call", {"name": "c3_session", "arguments": {"action": "list"}})
    assert client.request("ping")["result"] == {}  # answered while the call waits
    gate.wait_held()
    assert not list(data.glob("env-*/.c3async-ready"))
    gate.open()
    answer = client.answer(call, 180)["result"]  # by the real server, once the environment is there
    assert answer["isError"] is False and answer["content"][0]["text"] == "no sessions", answer
    assert {"jsonrpc": "2.0", "method": "notifications/resources/list_changed"} in client.notes
    server = _server_of(client)
    client.notes.clear()
    client.request("resources/list")  # the server's now: it tells of changes from here on
    simple_session(claude.folder(project), project, "port the retry loop")
    note = client.next(60)  # the server's own notification, relayed
    assert note == {"jsonrpc": "2.0", "method": "notifications/resources/list_changed"}, note
    listed = client.request("resources/list")["result"]["resources"]
    assert "port the retry loop" in [r["name"] for r in listed]
    assert client.close() == 0  # stdin closed: the server ends, then the launcher
    assert not server.is_running()


def test_a_failed_build_answers_a_call_with_where_its_log_is(root, claude, tmp_path):
    data, project = tmp_path / "data", claude.project("failed")
    gate = Gate(tmp_path)
    client = Client(root, gate.env(_env(claude, data, project)), project)
    client.initialize()
    call = client.ask("tools/call", {"name": "c3_status", "arguments": {}})
    gate.wait_held()
    gate.open("fail")
    answer = client.answer(call)["result"]
    assert answer["isError"] is True and str(data / "build.log") in answer["content"][0]["text"], answer
    prompt = client.request("prompts/get", {"name": "triage"})
    assert prompt["error"]["code"] == -32603 and "build.log" in prompt["error"]["message"], prompt
    assert client.request("tools/list")["result"] == _manifest(root)["tools/list"]  # what it can, it still answers
    assert client.close() == 0 and "could not be built" in client.stderr()


@pytest.mark.slow
def test_a_signal_reaches_the_server_the_launcher_started(root, claude, tmp_path):
    data, project = tmp_path / "data", claude.project("signalled")
    client = Client(root, Gate(tmp_path, held=False).env(_env(claude, data, project)), project)
    client.initialize()
    client.real()
    server = _server_of(client)
    client.proc.send_signal(signal.SIGTERM)  # stdin stays open
    assert client.proc.wait(30) >= 0, "the launcher died of the signal instead of handing it on"
    assert not server.is_running()
    client.close()


def test_the_manifest_is_what_the_server_answers():
    out = subprocess.run(
        [sys.executable, "-B", str(REPO / "plugin" / "manifest.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr


@pytest.mark.slow
def test_two_pythons_of_one_version_share_one_environment(root, claude, tmp_path):
    venv = tmp_path / "venv"  # an activated venv's python3, made from this Python
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    data, project = tmp_path / "data", claude.project("pythons")
    env = Gate(tmp_path, held=False).env(_env(claude, data, project))
    launcher = str(root / "plugin" / "launch.py")
    for python in (str(venv / "bin" / "python"), sys.executable):
        built = subprocess.run([python, "-I", launcher, "build"], env=env, capture_output=True, text=True, timeout=300)
        assert built.returncode == 0 and _builds(data) == 1, built.stderr
    client = Client(root, env, project)  # this Python runs the server at once from the venv's build
    client.initialize()
    assert client.real() and client.close() == 0 and "first start" not in client.stderr()
    assert len(list(data.glob("env-*"))) == 1


def test_a_hook_during_the_build_is_saved_then_replayed_with_its_time(root, claude, tmp_path):
    data, project = tmp_path / "data", claude.project("hooked-early")
    gate = Gate(tmp_path)
    env = {**gate.env(_env(claude, data, project)), "CLAUDE_PID": "4242"}
    sid = "abcd1234-0000-4000-8000-000000000002"
    events = [
        {"hook_event_name": "SessionStart", "session_id": sid, "source": "startup", "cwd": project},
        {"hook_event_name": "SessionEnd", "session_id": sid, "reason": "other", "cwd": project},
    ]
    spans = []
    for event in events:
        before = time.time()
        out = _launch(root, "hook", env, project, stdin=json.dumps(event))
        spans.append((before, time.time()))
        assert out.returncode == 0 and out.stderr == "", out.stderr
    gate.wait_held()
    pending = data / "pending-hooks"
    saved = sorted(pending.iterdir())
    assert len(saved) == 2 and stat.S_IMODE(pending.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in saved)
    assert saved[0].read_bytes().endswith(json.dumps(events[0]).encode())
    log = Path(project, ".c3", "activity.jsonl")
    assert not log.exists()  # nothing recorded yet, nothing skipped either
    released = time.time()
    gate.open()
    wait_for("the saved hooks replayed", lambda: not list(pending.iterdir()))
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    assert [(r["kind"], r["session_id"], r["claude_pid"]) for r in rows] == [
        ("session_start", sid, 4242),
        ("session_end", sid, 4242),
    ]
    for row, (before, after) in zip(rows, spans):  # the time each fired, not the replay's (after released)
        assert before - 0.001 <= row["ts"] <= after + 0.001 and after <= released
    assert "hook skipped" not in ((data / "hook-errors.log").read_text() if (data / "hook-errors.log").exists() else "")


def _saved_hook(data: Path, when: float, event: dict, **env: str) -> Path:
    """A hook event as the launcher saves it during a build (its replay cut short, say)."""
    pending = data / "pending-hooks"
    pending.mkdir(mode=0o700, exist_ok=True)
    path = pending / f"{int(when * 1e9):020d}-{os.getpid()}.hook"
    meta = {"time": when, "cwd": "", "env": env}
    path.write_bytes(json.dumps(meta).encode() + b"\n" + json.dumps(event).encode())
    path.chmod(0o600)
    return path


def test_a_hook_after_events_left_waiting_is_recorded_after_them(root, claude, tmp_path):
    data, project = tmp_path / "data", claude.project("left-waiting")
    env = Gate(tmp_path, held=False).env(_env(claude, data, project))
    built = _launch(root, "build", env, timeout=300)
    assert built.returncode == 0, built.stderr
    first, second = "abcd1234-0000-4000-8000-000000000003", "abcd1234-0000-4000-8000-000000000004"
    earlier = time.time() - 60
    _saved_hook(
        data,
        earlier,
        {"hook_event_name": "SessionStart", "session_id": first, "source": "startup"},
        CLAUDE_PROJECT_DIR=project,
    )
    event = {"hook_event_name": "SessionStart", "session_id": second, "source": "startup", "cwd": project}
    out = _launch(root, "hook", env, project, stdin=json.dumps(event))
    assert out.returncode == 0 and out.stderr == "", out.stderr
    wait_for("the events replayed, in order", lambda: not list((data / "pending-hooks").iterdir()))
    rows = [json.loads(x) for x in Path(project, ".c3", "activity.jsonl").read_text().splitlines()]
    assert [r["session_id"] for r in rows] == [first, second]
    assert rows[0]["ts"] == pytest.approx(earlier, abs=0.001)


@pytest.mark.parametrize("how", ["a link", "a hard link", "a folder that is a link"])
def test_a_planted_hook_event_is_never_replayed(root, claude, tmp_path, how):
    data, project = tmp_path / "data", claude.project("planted-event")
    env = Gate(tmp_path, held=False).env(_env(claude, data, project))
    outside = tmp_path / "outside"
    outside.mkdir()
    event = {"hook_event_name": "SessionStart", "session_id": "abcd1234-0000-4000-8000-000000000005", "cwd": project}
    saved = _saved_hook(outside, time.time(), event, CLAUDE_PROJECT_DIR=project)
    data.mkdir(mode=0o700)
    if how == "a folder that is a link":
        (data / "pending-hooks").symlink_to(saved.parent)
    else:
        (data / "pending-hooks").mkdir(mode=0o700)
        planted = data / "pending-hooks" / saved.name
        planted.symlink_to(saved) if how == "a link" else os.link(saved, planted)
    built = _launch(root, "build", env, timeout=300)
    assert built.returncode == 0, built.stderr
    assert not Path(project, ".c3", "activity.jsonl").exists()  # nothing replayed
    assert saved.exists() and json.dumps(event).encode() in saved.read_bytes()  # never followed, never changed
    if how != "a folder that is a link":
        assert not os.path.lexists(data / "pending-hooks" / saved.name)  # said, then removed
        assert "not replayed" in (data / "hook-errors.log").read_text()


@pytest.mark.slow
def test_a_replaced_environment_goes_once_no_server_runs_from_it(root, claude, tmp_path):
    data, project = tmp_path / "data", claude.project("versions")
    env = Gate(tmp_path, held=False).env(_env(claude, data, project))
    running = Client(root, env, project)
    running.initialize()
    running.real()  # the first version's environment, a server running from it
    (first,) = [p.parent for p in data.glob("env-*/.c3async-ready")]
    other, idle = data / "env-00000000000000aa", data / "env-00000000000000bb"  # another Python's
    for path, age in ((other, 0), (idle, 31 * 86400)):
        path.mkdir()
        marker = path / ".c3async-ready"
        marker.write_text(json.dumps({"key": path.name[4:], "python": "cpython-3.99-linux-x86_64"}) + "\n")
        os.utime(marker, (time.time() - age,) * 2)
    bumped = tmp_path / "bumped"
    shutil.copytree(root, bumped)
    manifest = bumped / ".claude-plugin" / "plugin.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "version": "99.0.0"}))

    def build() -> None:
        out = subprocess.run(
            [sys.executable, "-I", str(bumped / "plugin" / "launch.py"), "build"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr

    build()
    assert _builds(data) == 2
    assert first.exists() and other.exists() and not idle.exists()  # in use; started lately; idle a month
    assert running.close() == 0
    build()  # nothing to build: what it replaced goes now
    assert _builds(data) == 2 and not first.exists()
    assert sorted(p.name for p in data.glob("env-*")) == sorted([other.name, f"env-{_key_of(bumped)}"])


def _launch(
    root: Path,
    command: str,
    env: dict[str, str],
    cwd: str | None = None,
    timeout: float = 60,
    stdin: str = "{}",
    args: list[str] | None = None,
) -> subprocess.CompletedProcess:
    """``python -I plugin/launch.py COMMAND [ARGS]`` as Claude Code runs it, ``stdin`` its input."""
    return subprocess.run(
        [sys.executable, "-I", str(root / "plugin" / "launch.py"), command, *(args or [])],
        input=stdin,
        text=True,
        env=env,
        cwd=cwd,
        capture_output=True,
        timeout=timeout,
    )


def _one_line(out: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in out.stderr, out.stderr
    lines = [x for x in out.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("c3async plugin: "), out.stderr
    return lines[0]


def test_a_bad_data_folder_is_one_line_and_a_hook_never_fails(root, claude, tmp_path):
    project = claude.project("bad")
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    outside = tmp_path / "outside"
    fifo_data, link_data = tmp_path / "fifo", tmp_path / "link"
    fifo_data.mkdir()
    os.mkfifo(fifo_data / "build.lock")
    link_data.mkdir()
    (link_data / "build.lock").symlink_to(outside)
    for data, said in (
        (a_file, "cannot use the data folder"),
        (a_file / "under", "cannot use the data folder"),
        (fifo_data, "build.lock"),
        (link_data, "build.lock"),
    ):
        env = _env(claude, data, project)
        started = time.monotonic()
        hook = _launch(root, "hook", env, project)
        assert hook.returncode == 0 and time.monotonic() - started < 9.5
        serve = _launch(root, "serve", env, project)
        assert serve.returncode == 1
        for out in (serve,) if data in (fifo_data, link_data) else (hook, serve):
            assert said in _one_line(out)
    assert not outside.exists(), "the lock was created through a link"
    launcher = str(root / "plugin" / "launch.py")
    deadline = time.monotonic() + 30  # a builder that was started ends by itself
    while builders := [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if launcher in (p.info["cmdline"] or []) and "build" in (p.info["cmdline"] or [])
    ]:
        assert time.monotonic() < deadline, f"a builder was left blocked: {builders}"
        time.sleep(0.05)


def test_incomplete_plugin_files_are_said_in_one_line(root, claude, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(root, broken)
    (broken / "pyproject.toml").unlink()
    env = _env(claude, tmp_path / "data", claude.project("broken"))
    assert "incomplete" in _one_line(_launch(broken, "serve", env, str(tmp_path)))
    assert _launch(broken, "hook", env, str(tmp_path)).returncode == 0


@pytest.mark.slow
def test_a_linked_environment_is_never_run(root, claude, tmp_path):
    key = _key_of(root)
    data, evil = tmp_path / "data", tmp_path / "evil"
    marker = tmp_path / "ran"
    (evil / "bin").mkdir(parents=True)
    (evil / ".c3async-ready").write_text(key)
    (evil / "bin" / "python").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (evil / "bin" / "python").chmod(0o755)
    data.mkdir()
    (data / f"env-{key}").symlink_to(evil)
    project = claude.project("linked")
    gate = Gate(tmp_path, held=False)
    client = Client(root, gate.env(_env(claude, data, project)), project)
    assert client.initialize()["result"]["serverInfo"]["name"] == "c3async"
    assert client.real().startswith("# Open tasks")  # the link replaced by a real environment
    client.close()
    assert not marker.exists() and (evil / "bin" / "python").exists()  # not run, not followed to delete
    assert not (data / f"env-{key}").is_symlink()


# --- what another account could have changed is never run ---------------------------------------

NOBODY = 65534  # the account `nobody`: another local account, for the plants that need one
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="making a folder another account's needs root")


def _key_of(root: Path) -> str:
    """The environment's key, computed by the launcher itself (what a neighbour can compute too)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("launch_copy", root / "plugin" / "launch.py")
    assert spec is not None and spec.loader is not None
    launch = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launch)
    return launch._key(launch._dependencies())


def _plant(data: Path, key: str, marker: Path) -> Path:
    """A finished-looking ``env-<key>`` whose ``bin/python`` leaves ``marker`` when run: as it is
    (the user's, 0755), the launcher runs it, which is what a plant must never achieve."""
    env = data / f"env-{key}"
    (env / "bin").mkdir(parents=True)
    (env / ".c3async-ready").write_text(key + "\n")
    (env / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (env / "bin" / "python").write_text(f'#!/bin/sh\necho "$@" >> {marker}\n')
    for path in (data, env, env / "bin"):
        path.chmod(0o755 if path != data else 0o700)
    (env / "bin" / "python").chmod(0o755)
    return env


def _refused(root: Path, env: dict[str, str], cwd: str, said: Path | str) -> None:
    """The server exits 1 and the hook 0, each with one line naming ``said``."""
    serve = _launch(root, "serve", env, cwd)
    assert serve.returncode == 1 and str(said) in _one_line(serve), serve.stderr
    hook = _launch(root, "hook", env, cwd)
    assert hook.returncode == 0 and str(said) in _one_line(hook), hook.stderr


def test_the_plant_runs_when_nothing_is_wrong(root, claude, tmp_path):
    """The control of what follows: a planted environment that looks right is run, so a marker
    that stays away below means the launcher refused it."""
    data, marker = tmp_path / "data", tmp_path / "ran"
    data.mkdir()
    _plant(data, _key_of(root), marker)
    project = claude.project("control")
    assert _launch(root, "hook", _env(claude, data, project), project).returncode == 0
    assert marker.read_text() == "-P -m c3async hook\n"


@needs_root
def test_a_data_folder_of_another_account_is_refused(root, claude, tmp_path):
    data, marker = tmp_path / "data", tmp_path / "ran"
    data.mkdir()
    _plant(data, _key_of(root), marker)
    os.chown(data, NOBODY, -1)
    project = claude.project("theirs")
    _refused(root, _env(claude, data, project), project, f"{data} belongs to another account")
    assert not marker.exists() and sorted(os.listdir(data)) == [f"env-{_key_of(root)}"]


@needs_root
def test_a_data_folder_others_could_write_is_made_private_and_what_they_put_there_refused(root, claude, tmp_path):
    data, marker = tmp_path / "data", tmp_path / "ran"
    data.mkdir()
    env = _plant(data, _key_of(root), marker)
    for path in (env, env / "bin", env / "bin" / "python"):
        os.chown(path, NOBODY, -1, follow_symlinks=False)
    data.chmod(0o777)
    project = claude.project("loose")
    _refused(root, _env(claude, data, project), project, f"{env} belongs to another account")
    assert not marker.exists()
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    logged = (data / "hook-errors.log").read_text().splitlines()  # the data folder is safe now: the hook says it there
    assert len(logged) == 1 and "hook refused" in logged[0] and str(env) in logged[0]


def test_a_folder_above_the_data_folder_others_could_write_is_refused(root, claude, tmp_path):
    loose = tmp_path / "shared"
    loose.mkdir()
    loose.chmod(0o777)  # not sticky: anyone can replace what is in it
    project = claude.project("above")
    data = loose / "config" / "data"
    _refused(root, _env(claude, data, project), project, f"{loose} can be written by other accounts")
    assert os.listdir(loose) == [], "a folder was made below a folder that was refused"
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)  # /tmp: others cannot replace what the user made there
    assert _launch(root, "hook", _env(claude, sticky / "data", project), project).returncode == 0
    assert stat.S_IMODE((sticky / "data").stat().st_mode) == 0o700


@needs_root
@pytest.mark.parametrize(
    "how",
    [
        "env theirs",
        "env loose",
        "bin theirs",
        "bin loose",
        "bin a link",
        "python loose",
        "pyvenv.cfg theirs",
        "pyvenv.cfg loose",
    ],
)
def test_a_planted_environment_is_never_run(root, claude, tmp_path, how):
    data, marker, elsewhere = tmp_path / "data", tmp_path / "ran", tmp_path / "elsewhere"
    data.mkdir()
    env = _plant(data, _key_of(root), marker)
    what, change = how.split(" ", 1)
    path = {"env": env, "bin": env / "bin", "python": env / "bin" / "python", "pyvenv.cfg": env / "pyvenv.cfg"}[what]
    if change == "theirs":
        os.chown(path, NOBODY, -1)
    elif change == "loose":
        path.chmod(0o777 if path.is_dir() else 0o757)
    else:
        path.rename(elsewhere)
        path.symlink_to(elsewhere)
    project = claude.project("planted")
    _refused(root, _env(claude, data, project), project, path)
    assert not marker.exists()
    assert path.exists() and os.path.lexists(env / "bin" / "python"), "the plant was removed: nothing was said to"


@needs_root
@pytest.mark.parametrize("how", ["theirs", "loose", "a link", "a file"])
def test_a_planted_pycache_is_refused(root, claude, tmp_path, how):
    data, marker = tmp_path / "data", tmp_path / "ran"
    data.mkdir()
    _plant(data, _key_of(root), marker)
    pycache, elsewhere = data / "pycache", tmp_path / "elsewhere"
    elsewhere.mkdir()
    if how == "a link":
        pycache.symlink_to(elsewhere)
    elif how == "a file":
        pycache.write_text("")
    else:
        pycache.mkdir()
        (pycache / "planted.pyc").write_bytes(b"\0" * 16)
        os.chown(pycache, NOBODY, -1) if how == "theirs" else pycache.chmod(0o777)
    project = claude.project("pycache")
    _refused(root, _env(claude, data, project), project, pycache)
    assert not marker.exists()


@needs_root
@pytest.mark.parametrize(
    "how", ["root loose", "root theirs", "package loose", "module loose", "module a link", "above loose"]
)
def test_a_plugin_folder_others_could_change_is_refused(root, claude, tmp_path, how):
    data, marker = tmp_path / "data", tmp_path / "ran"
    data.mkdir()
    _plant(data, _key_of(root), marker)
    above = tmp_path / "plugins"
    copy = above / "c3async"
    shutil.copytree(root, copy)
    what, change = how.split(" ", 1)
    path = {
        "root": copy,
        "package": copy / "c3async" / "sessions",
        "module": copy / "c3async" / "cli" / "__init__.py",
        "above": above,
    }[what]
    if change == "theirs":
        os.chown(path, NOBODY, -1)
    elif change == "loose":
        path.chmod(0o777 if path.is_dir() else 0o666)
    else:
        path.rename(tmp_path / "cli.py")
        path.symlink_to(tmp_path / "cli.py")
    project = claude.project("root")
    _refused(copy, _env(claude, data, project), project, path)
    assert not marker.exists()
    logged = (data / "hook-errors.log").read_text()
    assert str(path) in logged and "hook refused" in logged


@needs_root
def test_a_hook_log_that_is_not_safe_to_write_is_left_alone(root, claude, tmp_path):
    data, outside = tmp_path / "data", tmp_path / "outside"
    data.mkdir()
    outside.write_text("the user's file\n")
    os.link(outside, data / "hook-errors.log")  # a hard link: appending would write the user's file
    copy = tmp_path / "c3async"
    shutil.copytree(root, copy)
    (copy / "c3async").chmod(0o777)
    project = claude.project("log")
    hook = _launch(copy, "hook", _env(claude, data, project), project)
    assert hook.returncode == 0 and str(copy / "c3async") in _one_line(hook)  # stderr only
    assert outside.read_text() == "the user's file\n"


@pytest.mark.parametrize("what", ["interpreter", "its folder"])
def test_an_environment_whose_interpreter_others_could_change_is_never_run(root, claude, tmp_path, what):
    """An environment made by one python3 is run by every python3 of its version: the
    interpreter its ``python`` link leads to is checked as the rest is."""
    data, marker = tmp_path / "data", tmp_path / "ran"
    data.mkdir()
    env = _plant(data, _key_of(root), marker)
    interpreter = tmp_path / "pythons" / "python3"
    interpreter.parent.mkdir()
    (env / "bin" / "python").rename(interpreter)
    (env / "bin" / "python").symlink_to(interpreter)
    loose = interpreter if what == "interpreter" else interpreter.parent
    loose.chmod(0o757 if what == "interpreter" else 0o777)
    project = claude.project("interpreter")
    _refused(root, _env(claude, data, project), project, loose)
    assert not marker.exists()
    loose.chmod(0o755)  # the control: as it should be, it runs
    assert _launch(root, "hook", _env(claude, data, project), project).returncode == 0
    assert marker.read_text() == "-P -m c3async hook\n"


@pytest.mark.slow
def test_the_session_end_hook_is_saved_at_once_and_replayed_by_a_process_of_its_own(root, claude, tmp_path):
    """Claude Code cancels SessionEnd hooks 1.5 s into its exit: ``hook --detach`` only saves the
    event and starts a detached replay, which records it with the time it fired."""
    data, project = tmp_path / "data", claude.project("ending")
    env = Gate(tmp_path, held=False).env(_env(claude, data, project))
    built = _launch(root, "build", env, timeout=300)
    assert built.returncode == 0, built.stderr
    sid = "abcd1234-0000-4000-8000-000000000005"
    event = {"hook_event_name": "SessionEnd", "session_id": sid, "reason": "other", "cwd": project}
    fired = time.time()
    out = _launch(root, "hook", env, project, stdin=json.dumps(event), args=["--detach"])
    assert out.returncode == 0 and out.stderr == "", out.stderr
    activity = Path(project, ".c3", "activity.jsonl")
    wait_for("the detached replay recorded it", lambda: activity.exists() and activity.read_text().strip())
    (row,) = [json.loads(x) for x in activity.read_text().splitlines()]
    assert (row["kind"], row["session_id"]) == ("session_end", sid)
    assert fired - 1 < row["ts"] < time.time()
    wait_for("nothing left waiting", lambda: not list((data / "pending-hooks").iterdir()))
    assert _launch(root, "hook", env, project, stdin="{}", args=["--now"]).returncode == 0  # a hook never fails
