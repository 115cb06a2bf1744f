"""``c3async serve`` as a real subprocess over stdio: what an IDE sees, and what the files say.

Each server is ``python -m c3async serve`` on this checkout (``PYTHONPATH`` from the sandbox),
started in a sandboxed project with a 0.2 s heartbeat. Covered: a list/show round trip, three
servers on one project at once (``MCP×2`` for the host session two of them serve), the
heartbeat's life (it appears, it is rewritten, it is deleted on stdin EOF, SIGINT and SIGTERM
while stdin stays open, and on Claude Code's own SIGINT-then-SIGTERM), and which host session a
server reports: the parent's ``$CLAUDE_CONFIG_DIR/sessions/<pid>.json`` when its procStart
matches, following a /clear, else ``CLAUDE_CODE_SESSION_ID``.

Each server costs ~1.5 s of imports, so the file starts as few as that coverage needs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters, stdio_client

from stress.transcripts import simple_session

pytestmark = pytest.mark.process

HOST = "aaaa1111-0000-4000-8000-000000000001"
OLD = "aaaa2222-0000-4000-8000-000000000002"
DOCS = "bbbb3333-0000-4000-8000-000000000003"
SERVE = ["-m", "c3async", "serve"]
START_TIMEOUT = 30  # a 2-core machine running other servers too: generous, it is not measured


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def project(claude) -> str:
    project = claude.project("app")
    folder = claude.folder(project)
    now = time.time()
    simple_session(folder, project, "Document the parser API", session_id=DOCS, mtime=now - 300)
    simple_session(folder, project, "Add the cache layer", session_id=OLD, mtime=now - 200)
    simple_session(folder, project, "Fix the flaky retry test", session_id=HOST, mtime=now - 100)
    return project


def server_env(claude, project: str, host: str | None = HOST) -> dict[str, str]:
    """The environment Claude Code gives an MCP server (over the sandbox's: no real CLAUDE_* or
    C3_* leaks in, PYTHONPATH is this checkout)."""
    env = claude.env(CLAUDE_PROJECT_DIR=project, C3_HEARTBEAT_INTERVAL_S="0.2")
    if host:
        env["CLAUDE_CODE_SESSION_ID"] = host
    return env


def params(claude, project: str, host: str | None = HOST) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=SERVE, env=server_env(claude, project, host), cwd=project)


def live_dir(project: str) -> Path:
    return Path(project, ".c3", "live")


def heartbeats(project: str) -> dict[str, dict]:
    """c3_session_id -> heartbeat, for every readable file (writes are atomic renames)."""
    out = {}
    for path in sorted(live_dir(project).glob("*.json")):
        try:
            out[path.stem] = json.loads(path.read_bytes())
        except (FileNotFoundError, ValueError):
            continue
    return out


async def wait_for_heartbeats(project: str, n: int = 1) -> dict[str, dict]:
    with anyio.fail_after(START_TIMEOUT):
        while len(found := heartbeats(project)) < n:
            await anyio.sleep(0.02)
    return found


async def wait_for_host(path: Path, want: str | None) -> dict:
    """The next heartbeat that names ``want`` as the host session (beats are 0.2 s apart)."""
    last: dict = {}
    with anyio.move_on_after(10):
        while True:
            try:
                last = json.loads(path.read_bytes())
            except (FileNotFoundError, ValueError):
                pass
            if last.get("host_session_id") == want:
                return last
            await anyio.sleep(0.02)
    raise AssertionError(f"the heartbeat never named {want}; last beat: {last}")


def text_of(result) -> str:
    return "\n".join(block.text for block in result.content)


def proc_start(pid: int) -> int:
    """Field 22 of /proc/<pid>/stat, as Claude Code writes it into procStart."""
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat[stat.rindex(b")") + 2 :].split()[19])


def write_registry(claude, session_id: str, proc_start_ticks: int, pid: int | None = None) -> Path:
    """``$CLAUDE_CONFIG_DIR/sessions/<pid>.json`` for the servers' parent: this test process."""
    pid = os.getpid() if pid is None else pid
    path = Path(claude.config, "sessions", f"{pid}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "pid": pid,
        "sessionId": session_id,
        "cwd": "/somewhere",
        "startedAt": int(time.time() * 1000),
        "procStart": proc_start_ticks,
        "kind": "interactive",
        "entrypoint": "cli",
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, path)  # Claude Code rewrites it whole; never let the server read half a file
    return path


# ------------------------------------------------------------------------------------ round trip


async def test_list_and_show_round_trip(claude, project):
    """The handshake era, which is what IDEs speak today."""
    async with Client(params(claude, project), mode="legacy") as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert {"c3_session", "c3_status"} <= names
        await wait_for_heartbeats(project)
        listed = await c.call_tool("c3_session", {"action": "list"})
        assert not listed.is_error, text_of(listed)
        lines = text_of(listed).splitlines()
        assert [line.split()[0] for line in lines] == [HOST[:8], OLD[:8], DOCS[:8]]
        assert "LIVE" in lines[0] and "(this session)" in lines[0]
        shown = await c.call_tool("c3_session", {"action": "show", "target": DOCS[:4]})
        assert not shown.is_error, text_of(shown)
        assert text_of(shown).splitlines()[0] == f"{DOCS}  Document the parser API"
        ambiguous = await c.call_tool("c3_session", {"action": "show", "target": "aaaa"})
        assert ambiguous.is_error and HOST in text_of(ambiguous) and OLD in text_of(ambiguous)
        noted = await c.call_tool("c3_session", {"action": "note", "data": "over stdio"})
        assert text_of(noted) == f"note {HOST}"
    assert claude.rows_by_id(project)[HOST]["note"]["summary"] == "over stdio"


def test_the_server_imports_only_what_the_protocol_loop_needs(claude):
    """The tool bodies' modules (the sessions view, the task store, the usage accountant and its
    price tables, the Hub) load with the first call that needs them, not at start."""
    code = "import sys, c3async.server; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], env=claude.env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    assert "c3async.server" in loaded and "mcp.server.mcpserver" in loaded
    deferred = {
        "c3async.sessions.reports",
        "c3async.sessions.view",
        "c3async.sessions.detail",
        "c3async.sessions.act",
        "c3async.tasks.actions",
        "c3async.usage.account",
        "c3async.usage.prices",
        "c3async.hub.app",
    }
    assert not deferred & loaded, sorted(deferred & loaded)


async def test_reads_over_stdio_log_one_row_and_changes_one_each(claude, project):
    async with Client(params(claude, project), mode="legacy") as c:
        for _ in range(3):
            assert not (await c.call_tool("c3_session", {"action": "list"})).is_error
            assert not (await c.call_tool("c3_session", {"action": "show", "target": DOCS})).is_error
            assert not (await c.call_tool("c3_status", {"view": "live"})).is_error
        for i in range(2):
            assert not (await c.call_tool("c3_session", {"action": "note", "target": DOCS, "data": f"n{i}"})).is_error
    rows = [json.loads(line) for line in Path(project, ".c3", "activity.jsonl").read_text().splitlines()]
    calls = [(r["tool"], r["action"]) for r in rows if r["kind"] == "tool_call"]
    assert calls == [("c3_session", "list"), ("c3_session", "note"), ("c3_session", "note")]


async def test_heartbeat_lives_while_the_client_is_connected(claude, project, tmp_path):
    errlog = (tmp_path / "server-stderr.txt").open("w+")
    with errlog:
        async with Client(stdio_client(params(claude, project), errlog=errlog)) as c:
            ((c3_id, beat),) = (await wait_for_heartbeats(project)).items()
            assert (beat["session_id"], beat["host_session_id"], beat["project"]) == (c3_id, HOST, project)
            assert beat["pid"] != os.getpid() and beat["ide"] and isinstance(beat["ts"], float)
            path = live_dir(project) / f"{c3_id}.json"
            with anyio.fail_after(10):  # rewritten every 0.2 s
                while json.loads(path.read_bytes())["ts"] == beat["ts"]:
                    await anyio.sleep(0.02)
            status = await c.call_tool("c3_status", {"view": "live"})
            assert text_of(status).startswith(f"live          {HOST}  ") and "[MCP×1 (terminal)]" in text_of(status)
        # the client closed the server's stdin; it exited by itself (no signal was needed)
        assert heartbeats(project) == {}
        assert not list(live_dir(project).iterdir())
        errlog.seek(0)
        log = errlog.read()
    assert f"C3 session {c3_id}" in log
    assert "shutting down" not in log and "Traceback" not in log, log


# ------------------------------------------------------------------------------------ three servers


async def test_three_servers_on_one_project(claude, project):
    hosts = (HOST, HOST, DOCS)  # two IDEs on the same host session, one on another
    clients: dict[int, Client] = {}
    done = anyio.Event()

    async def serve(i: int) -> None:  # started side by side: each one's imports take a while
        async with Client(params(claude, project, hosts[i])) as c:
            clients[i] = c
            await done.wait()

    async with anyio.create_task_group() as tg:
        for i in range(3):
            tg.start_soon(serve, i)
        with anyio.fail_after(START_TIMEOUT):
            while len(clients) < 3:
                await anyio.sleep(0.02)
        try:
            await _check_three(claude, project, [clients[i] for i in range(3)], hosts)
        finally:
            done.set()
    assert heartbeats(project) == {}
    live = await anyio.to_thread.run_sync(claude.run, "live", "--project", project, "--json")
    assert json.loads(live.stdout) == []


async def _check_three(claude, project: str, clients: list[Client], hosts: tuple[str, ...]) -> None:
    """What the CLI and each server say while all three run."""
    beats = await wait_for_heartbeats(project, 3)
    assert sorted(b["host_session_id"] for b in beats.values()) == sorted([HOST, HOST, DOCS])
    assert len({b["pid"] for b in beats.values()}) == 3

    live = await anyio.to_thread.run_sync(claude.run, "live", "--project", project, "--json")
    assert live.returncode == 0, live.stderr
    by_host = {e["id"]: e for e in json.loads(live.stdout)}
    assert set(by_host) == {HOST, DOCS}
    assert (by_host[HOST]["mcp_count"], by_host[HOST]["source"]) == (2, "heartbeat")
    assert sorted(by_host[HOST]["c3_sessions"]) == sorted(k for k, b in beats.items() if b["host_session_id"] == HOST)
    assert by_host[DOCS]["mcp_count"] == 1

    rows = await anyio.to_thread.run_sync(claude.rows_by_id, project)
    assert (rows[HOST]["live"], rows[HOST]["mcp_count"]) == (True, 2)
    assert (rows[DOCS]["live"], rows[DOCS]["mcp_count"]) == (True, 1)
    assert (rows[OLD]["live"], rows[OLD]["mcp_count"]) == (False, 0)

    for c, host in zip(clients, hosts):
        listed = text_of(await c.call_tool("c3_session", {"action": "list"})).splitlines()
        mine = next(line for line in listed if line.startswith(host[:8]))
        assert "(this session)" in mine
        assert "MCP×2" in next(line for line in listed if line.startswith(HOST[:8]))


# ------------------------------------------------------------------------------------ shutdown


def _spawn(claude, project: str, errlog) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, *SERVE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog,
        env=server_env(claude, project),
        cwd=project,
    )


def _wait_serving(project: str, proc: subprocess.Popen) -> Path:
    """Until the heartbeat has been written twice: the event loop is running with every
    background task (the signal watcher among them) started."""
    deadline = time.monotonic() + START_TIMEOUT
    first = None
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the server exited early with {proc.returncode}"
        beats = heartbeats(project)
        if beats:
            ((c3_id, beat),) = beats.items()
            if first is None:
                first = beat["ts"]
            elif beat["ts"] != first:
                return live_dir(project) / f"{c3_id}.json"
        time.sleep(0.01)
    raise AssertionError("the server never wrote its heartbeat twice")


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGINT then SIGTERM", "stdin EOF"])
def test_shutdown_deletes_the_heartbeat_first(claude, project, tmp_path, how):
    """stdin stays open for the signals (Claude Code signals its servers without closing it):
    SIGINT, SIGTERM, and Claude Code's own sequence (SIGINT, SIGTERM 100 ms later)."""
    with (tmp_path / "server-stderr.txt").open("w+") as errlog:
        proc = _spawn(claude, project, errlog)
        try:
            path = _wait_serving(project, proc)
            started = time.monotonic()
            if how == "stdin EOF":
                proc.stdin.close()
            else:
                proc.send_signal(signal.SIGTERM if how == "SIGTERM" else signal.SIGINT)
            sent_term = how != "SIGINT then SIGTERM"
            gone = None
            while time.monotonic() - started < 30:  # a hang guard: how soon is no test's business
                if gone is None and not path.exists():
                    gone = time.monotonic() - started
                if not sent_term and time.monotonic() - started >= 0.1:
                    proc.send_signal(signal.SIGTERM)
                    sent_term = True
                if gone is not None and sent_term:
                    break
                time.sleep(0.01)
            assert gone is not None, f"the heartbeat file was still there 30 s after {how}"
            try:
                rc = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"the server was still running 30 s after {how}") from None
            errlog.seek(0)
            log = errlog.read()
            assert "Traceback" not in log, log
            if how != "SIGINT then SIGTERM":  # a second signal may end it by SIGTERM's default action
                assert rc == 0, f"exit status {rc}; stderr:\n{log}"
            assert not path.exists() and heartbeats(project) == {}
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream and not stream.closed:
                    stream.close()


# ------------------------------------------------------------------------------------ host identity


async def test_host_session_comes_from_the_parents_registry_and_follows_clear(claude, project):
    """The server's parent is this process: its registry file names DOCS while the server's
    environment says HOST (as after a /clear in a resumed session)."""
    reg = write_registry(claude, DOCS, proc_start(os.getpid()))
    async with Client(params(claude, project, HOST)) as c:
        ((c3_id, beat),) = (await wait_for_heartbeats(project)).items()
        path = live_dir(project) / f"{c3_id}.json"
        assert beat["host_session_id"] == DOCS
        started = await c.call_tool("c3_session", {"action": "start", "description": "identity"})
        assert text_of(started).endswith(f"for host session {DOCS}")

        write_registry(claude, OLD, proc_start(os.getpid()))  # /clear: same claude, new session id
        await wait_for_host(path, OLD)
        noted = await c.call_tool("c3_session", {"action": "note", "data": "after clear"})
        assert text_of(noted) == f"note {OLD}"
        logged = await c.call_tool("c3_session", {"action": "log", "event_type": "progress", "data": "x"})
        assert not logged.is_error, text_of(logged)
        record = json.loads(Path(project, ".c3", "sessions", f"{c3_id}.json").read_text())
        assert record["host_session_ids"] == [DOCS, OLD]

        write_registry(claude, DOCS, proc_start(os.getpid()) + 1)  # a dead claude's file, pid reused
        await wait_for_host(path, HOST)
        reg.unlink()
        await wait_for_host(path, HOST)
    marks = [json.loads(line) for line in Path(project, ".c3", "session_marks.jsonl").read_text().splitlines()]
    assert [(m["id"], m["by"], m["by_session"]) for m in marks] == [(OLD, "agent", OLD)]


async def test_a_registry_file_with_the_wrong_proc_start_is_ignored(claude, project):
    write_registry(claude, DOCS, proc_start(os.getpid()) - 1)
    async with Client(params(claude, project, HOST)) as c:
        ((_c3_id, beat),) = (await wait_for_heartbeats(project)).items()
        assert beat["host_session_id"] == HOST
        listed = text_of(await c.call_tool("c3_session", {"action": "list"})).splitlines()
        assert "(this session)" in next(line for line in listed if line.startswith(HOST[:8]))
        status = text_of(await c.call_tool("c3_status", {"view": "live"}))
        assert status.startswith(f"live          {HOST}  ") and "MCP×1" in status
