"""The plugin's first start: a hostile client speaks to the launcher while the environment builds.

The launcher runs as Claude Code runs it (``python3 -I plugin/launch.py serve`` from a clean copy
of the plugin's files, a fresh ``CLAUDE_PLUGIN_DATA``), its build held at a gate (a ``uv`` first
on PATH that waits on a FIFO, then makes the environment from this Python's packages), so every
probe meets the proxy that answers from the manifest: garbage lines (not JSON, arrays, wrong ids
and versions, NUL and invalid UTF-8, a lone surrogate for an id, JSON nested 100,000 deep,
terminal escapes), a line of 40 MiB (400 MiB in full mode) before ``initialize``, one that never
ends, requests before ``initialize``, a client that closes at once or while a call waits, SIGTERM
and SIGINT, a client that never reads what it asked for, more waiting calls than the proxy holds.
Then the gate opens and a client whose call waited gets the real server's answer, and the server
takes garbage through the relay.

Invariants: no hang (each probe a process with a time limit), no traceback, stdout carries only
JSON-RPC messages, exit status 0, the answers expected (what it cannot answer is an error, never
silence, once ``initialize`` came), memory bounded (a huge line or a client that does not read
costs the launcher no more than a few MiB above its start).
"""

from __future__ import annotations

import json
import os
import queue
import select
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import psutil

from .harness import PY, REPO, Result, Sandbox
from .probe import PROTOCOL, line, request

CLASS = "the plugin's first start"
TIMEOUT_S = 60.0
STUCK_S = 2.0  # a writer that cannot write for this long: the launcher reads no further
RSS_LIMIT = 120 << 20
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "hostile", "version": "0"}},
}


class World:
    def __init__(self, res: Result, base: Path, quick: bool) -> None:
        self.res = res
        self.quick = quick
        self.root = base / "plugins" / "c3async"
        shutil.copytree(
            REPO, self.root, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", "tests", "stress")
        )
        self.data = base / "data"
        self.project = base / "project"
        self.project.mkdir()
        self.gate = base / "gate"
        os.mkfifo(self.gate)
        shim = base / "bin" / "uv"
        shim.parent.mkdir()
        gate = shlex.quote(str(self.gate))
        shim.write_text(  # uv venv: held at the gate; uv pip install: the packages are this Python's
            "#!/bin/sh\n"
            '[ "$1" = venv ] || exit 0\n'
            f": > {gate}.held\n"
            f'[ "$(cat {gate})" = go ] || exit 1\n'
            "for dest; do :; done\n"
            f'PYTHONPATH={shlex.quote(str(REPO))} exec {shlex.quote(PY)} -m stress.venvs "$dest"\n'
        )
        shim.chmod(0o755)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "C3_", "PYTHON"))}
        self.env.update(
            PATH=f"{shim.parent}{os.pathsep}{os.environ.get('PATH', '')}",
            CLAUDE_PLUGIN_DATA=str(self.data),
            CLAUDE_PROJECT_DIR=str(self.project),
            CLAUDE_CONFIG_DIR=str(base / "claude"),
            C3_HOME=str(base / "c3home"),
            HOME=str(base / "home"),
        )
        (base / "home").mkdir()
        self.rss = 0

    def start(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [PY, "-I", str(self.root / "plugin" / "launch.py"), "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=self.project,
            env=self.env,
        )

    def probe(self, label: str, feed: Iterable[bytes | None]) -> list[dict] | None:
        """One launcher fed ``feed`` (a None there: its memory is measured then, ``self.rss``),
        then its stdin closed: its messages, checked (None: it hung)."""
        proc = self.start()
        out: list[bytes] = []
        reader = threading.Thread(target=lambda: out.append(proc.stdout.read() if proc.stdout else b""))
        reader.start()
        try:
            assert proc.stdin is not None
            for chunk in feed:
                if chunk is None:
                    proc.stdin.flush()
                    self.rss = psutil.Process(proc.pid).memory_info().rss
                else:
                    proc.stdin.write(chunk)
            proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            proc.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            self.res.check(False, "no hang", f"{label}: the launcher did not end within {TIMEOUT_S:.0f} s")
            return None
        finally:
            reader.join(TIMEOUT_S)
            err = proc.stderr.read() if proc.stderr else b""
            for pipe in (proc.stdout, proc.stderr):
                if pipe:
                    pipe.close()
        return self.judge(label, proc.returncode, b"".join(out), err)

    def judge(self, label: str, status: int | None, out: bytes, err: bytes) -> list[dict]:
        res = self.res
        res.check(b"Traceback" not in out + err, "no traceback", f"{label}: {err[-300:]!r}")
        res.check(status == 0, "the launcher exits 0", f"{label}: {status}: {err[-300:]!r}")
        messages = []
        for raw in out.splitlines():
            try:
                msg = json.loads(raw)
            except ValueError:
                msg = None
            if not res.check(
                isinstance(msg, dict) and msg.get("jsonrpc") == "2.0",
                "stdout carries only JSON-RPC messages",
                f"{label}: {raw[:200]!r}",
            ):
                continue
            messages.append(msg)
        return messages

    def answered(self, label: str, messages: list[dict] | None, expect: dict[object, str]) -> None:
        """Each id of ``expect`` answered once, with a result ("result") or an error code."""
        if messages is None:
            return
        got = {m.get("id"): ("result" if "result" in m else str(m.get("error", {}).get("code"))) for m in messages}
        self.res.check(
            got == expect and len(messages) == len(expect), "the expected answers", f"{label}: {got} != {expect}"
        )


def check(res: Result, sb: Sandbox, quick: bool) -> None:
    base = sb.root / "class-plugin-start"
    base.mkdir()
    w = World(res, base, quick)
    t0 = time.perf_counter()
    _garbage(w)
    _huge(w)
    _before_initialize(w)
    _closing(w)
    _signals(w)
    _not_reading(w)
    _too_many_waiting(w)
    res.fig("probes while the build is held", f"{time.perf_counter() - t0:.1f} s")
    _handover(w)
    _builders_end(w)


def _garbage(w: World) -> None:
    junk = [
        b"garbage",
        b"\x00\xff\xfe\x80 not utf-8",
        b"[1, 2]",
        b"[" + line({"jsonrpc": "2.0", "id": 9, "method": "ping"}).strip() + b"]",  # a batch
        b'{"jsonrpc": "2.0"}',
        b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}',
        b'{"jsonrpc": "2.0", "id": true, "method": "ping"}',
        b'{"jsonrpc": "2.0", "id": null, "method": "ping"}',
        b'{"jsonrpc": "1.0", "id": 3, "method": "ping"}',
        b'{"jsonrpc": "2.0", "id": 4, "method": 7}',
        b'{"jsonrpc": "2.0", "id": 5, "result": {}}',  # an answer to nothing
        b'"a string"',
        b"null",
        b"[" * 100_000 + b"]" * 100_000,
        b'{"a": ' * 50_000 + b"1" + b"}" * 50_000,
        b"\x1b]0;pwned\x07\x1b[2J\x9b31m",
        b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "ping"}',  # a lone surrogate for an id
    ]
    feed = [chunk + b"\n" for chunk in junk] + [line(INITIALIZE), request(2, "ping")]
    w.answered(
        "garbage, then initialize", w.probe("garbage", feed), {"\ud800": "result", "init": "result", 2: "result"}
    )


def _huge(w: World) -> None:
    size = (40 if w.quick else 400) << 20

    def feed() -> Iterable[bytes | None]:
        block = b"A" * (1 << 20)
        for _ in range(size >> 20):
            yield block
        yield None  # all but its end taken in
        yield b"\n" + line(INITIALIZE)

    t0 = time.perf_counter()
    w.answered(f"a line of {size >> 20} MiB", w.probe("a huge line", feed()), {"init": "result"})
    w.res.fig(f"a line of {size >> 20} MiB, then initialize", f"{time.perf_counter() - t0:.2f} s")
    w.res.fig("the launcher's memory, that line read but for its end", f"{w.rss / (1 << 20):.0f} MiB")
    w.res.check(0 < w.rss < RSS_LIMIT, "a huge line costs bounded memory", f"{w.rss / (1 << 20):.0f} MiB")
    endless = w.probe("a line that never ends", [b"B" * (1 << 20)] * (20 if w.quick else 200))
    w.res.check(endless == [], "a line that never ends is never answered", f"{endless}")


def _before_initialize(w: World) -> None:
    feed = [
        request(1, "tools/list"),
        request(2, "tools/call", {"name": "c3_session", "arguments": {"action": "list"}}),
        request(3, "server/discover"),
        request(4, "ping"),
        line({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        request(5, "resources/read", {"uri": "c3://tasks/open"}),
    ]
    w.answered(
        "requests before initialize",
        w.probe("requests before initialize", feed),
        {1: "-32600", 2: "-32600", 3: "-32601", 4: "result", 5: "-32600"},
    )


def _closing(w: World) -> None:
    w.answered("a client that closes at once", w.probe("closes at once", []), {})
    call = request(2, "tools/call", {"name": "c3_session", "arguments": {"action": "list"}})
    w.answered(
        "a client that closes while its call waits",
        w.probe("closes while a call waits", [line(INITIALIZE), call]),
        {"init": "result"},
    )
    t0 = time.perf_counter()
    w.probe("bad initialize params", [line({**INITIALIZE, "params": {"protocolVersion": 7}})])
    w.res.fig("a start that is closed at once, whole process", f"{(time.perf_counter() - t0) * 1e3:.0f} ms")


def _signals(w: World) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        proc = w.start()
        assert proc.stdin is not None and proc.stdout is not None
        t0 = time.perf_counter()
        proc.stdin.write(line(INITIALIZE))
        proc.stdin.flush()
        first = proc.stdout.readline()
        if sig == signal.SIGTERM:
            w.res.fig("initialize answered while the build is held", f"{(time.perf_counter() - t0) * 1e3:.0f} ms")
        proc.send_signal(sig)
        try:
            proc.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            w.res.check(False, "no hang", f"{sig.name}: the launcher did not end")
        out, err = proc.communicate()
        w.judge(f"{sig.name} while it builds", proc.returncode, first + out, err)


def _not_reading(w: World) -> None:
    """A client that asks and asks and never reads: the launcher stops reading it (what it holds
    for the client is bounded) and ends once the client goes away."""
    proc = w.start()
    assert proc.stdin is not None and proc.stdout is not None
    fd = proc.stdin.fileno()
    os.set_blocking(fd, False)
    pending = line(INITIALIZE) + b"".join(request(n, "tools/list") for n in range(20_000 if w.quick else 100_000))
    sent = 0
    while sent < len(pending):
        _r, writable, _x = select.select([], [fd], [], STUCK_S)
        if not writable:
            break  # it reads no more: its buffers are full
        try:
            sent += os.write(fd, pending[sent : sent + 65536])
        except BlockingIOError:
            continue
    try:
        rss = psutil.Process(proc.pid).memory_info().rss
    except psutil.Error:
        rss = 0
    w.res.fig(
        "a client that never reads: requests taken, launcher RSS",
        f"{sent // len(request(1, 'tools/list'))}, {rss / (1 << 20):.0f} MiB",
    )
    w.res.check(0 < rss < RSS_LIMIT, "a client that never reads costs bounded memory", f"{rss / (1 << 20):.0f} MiB")
    proc.stdout.close()  # the client goes away
    proc.stdin.close()
    try:
        proc.wait(TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        w.res.check(False, "no hang", "a client that never reads, then leaves: the launcher did not end")
    err = proc.stderr.read() if proc.stderr else b""
    if proc.stderr:
        proc.stderr.close()
    w.res.check(b"Traceback" not in err, "no traceback", f"a client that never reads: {err[-300:]!r}")


def _too_many_waiting(w: World) -> None:
    """More waiting calls than the proxy holds (64 MiB): the rest get an error at once."""
    big = "x" * (1 << 20)
    calls = [
        request(n, "tools/call", {"name": "c3_session", "arguments": {"action": "note", "data": big}})
        for n in range(80)
    ]
    messages = w.probe("more waiting calls than it holds", [line(INITIALIZE), *calls])
    if messages is not None:
        refused = [m for m in messages if m.get("result", {}).get("isError")]
        w.res.check(
            0 < len(refused) < len(calls) and all("too many" in m["result"]["content"][0]["text"] for m in refused),
            "calls past what the proxy holds get an error at once",
            f"{len(refused)} of {len(calls)}",
        )


def _handover(w: World) -> None:
    """A call that waited is answered by the real server once the gate opens; garbage then goes
    through the relay to the server, which ignores it; stdin closed, both end."""
    proc = w.start()
    assert proc.stdin is not None and proc.stdout is not None
    inbox: queue.Queue[bytes] = queue.Queue()
    reader = threading.Thread(target=_pump, args=(proc.stdout, inbox))
    reader.start()

    def answer(mid: object) -> dict:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                raw = inbox.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if not raw:
                break
            msg = json.loads(raw)
            if msg.get("id") == mid:
                return msg
        return {}

    proc.stdin.write(
        line(INITIALIZE) + request(2, "tools/call", {"name": "c3_session", "arguments": {"action": "list"}})
    )
    proc.stdin.flush()
    w.res.check(bool(answer("init")), "initialize answered while the build is held", "")
    t0 = time.perf_counter()
    with open(w.gate, "w") as gate:
        gate.write("go")
    reply = answer(2)
    w.res.fig("gate opened to the waiting call's answer (venv, server start)", f"{time.perf_counter() - t0:.1f} s")
    w.res.check(
        reply.get("result", {}).get("content", [{}])[0].get("text") == "no sessions",
        "a call that waited gets the real server's answer",
        f"{reply}",
    )
    proc.stdin.write(b"garbage\n\x00\xff\n[1]\n" + request(3, "ping"))
    proc.stdin.flush()
    w.res.check(answer(3).get("result") == {}, "the server, relayed to, ignores garbage", "")
    proc.stdin.close()
    try:
        proc.wait(TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        w.res.check(False, "no hang", "after the handover, stdin closed: the launcher did not end")
    reader.join(TIMEOUT_S)
    err = proc.stderr.read() if proc.stderr else b""
    for pipe in (proc.stdout, proc.stderr):
        if pipe:
            pipe.close()
    w.res.check(
        proc.returncode == 0 and b"Traceback" not in err, "the relay ends cleanly", f"{proc.returncode} {err[-300:]!r}"
    )


def _pump(stream: Iterable[bytes], inbox: queue.Queue[bytes]) -> None:
    for raw in stream:
        inbox.put(raw)
    inbox.put(b"")  # the end


def _builders_end(w: World) -> None:
    """Every build each probe started ends once the environment is there."""
    launcher = str(w.root / "plugin" / "launch.py")
    deadline = time.monotonic() + TIMEOUT_S
    left: list[int] = []
    while time.monotonic() < deadline:
        left = []
        for proc in psutil.process_iter(["cmdline"]):
            cmd = proc.info["cmdline"] or []
            if launcher in cmd and "build" in cmd:
                left.append(proc.pid)
        if not left:
            break
        time.sleep(0.2)
    w.res.check(not left, "every build ends", f"{len(left)} still running")
    w.res.check(len(list(w.data.glob("env-*/.c3async-ready"))) == 1, "one environment is built", "")
