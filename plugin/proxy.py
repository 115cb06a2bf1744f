"""The plugin's server while its environment is built: the first session has the tools.

Claude Code waits 30 s for a server's first answer and remembers one that outlasted it as failed,
for 15 minutes and in every project; building the environment can take longer (a cold package
cache, a loaded machine). So while it builds, the launcher speaks MCP itself, over stdio as the
server does (one JSON-RPC 2.0 message a line). It answers ``initialize``, ``ping`` and the lists
(tools, prompts, resources, resource templates) from ``manifest.json``, the real server's own
answers (``plugin/manifest.py`` makes it; a test fails when they differ); the protocol version is
the one the client asked for when the server speaks it, else the server's own. A request only the
server can answer (a tool call, a prompt, a resource read) waits for the build, at most
``CALL_WAIT_S``; when the build failed, or took longer, it gets an error that says so and where
``build.log`` is.

Once the environment is ready the real server starts as a child: the client's ``initialize`` is
replayed to it under an id of ours and its answer swallowed, then what waited (``notifications/
initialized`` first) is sent in order, and from then on the bytes are relayed both ways as they
come, the server's own requests and notifications (``list_changed``) included. A client that
listed resources is told their list changed: the sessions are the server's to list. It ends when
either side closes and hands SIGINT, SIGTERM and SIGHUP to the server. Only protocol goes to
stdout, whole lines only; a slow reader on either side holds back the other (``HIGH_WATER``).

Before ``initialize`` only ``ping`` is answered; ``server/discover`` (the first request of the
2026 protocol) gets "method not found", which makes a client fall back to ``initialize``, and
other requests are refused. What is not a JSON-RPC message is ignored, as the server ignores it;
a line over ``MAX_LINE`` bytes is dropped. Standard library only, loaded by ``launch.py``.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CALL_WAIT_S = 300.0  # a request the server must answer waits this long for the build
TICK_S = 0.25  # how often the build is looked at while it runs
MAX_LINE = 16 << 20  # a message longer than this is not Claude Code's
MAX_WAITING = 64 << 20  # bytes of requests held for the server
HIGH_WATER = 1 << 20  # bytes not yet written to one side before the other is read no further
CHUNK = 1 << 16
REPLAY_ID = "c3async-launcher:initialize"  # a string id: no client's integer id can be it
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
LISTS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")
INVALID_PARAMS, INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND = -32602, -32603, -32600, -32601


def say(text: str) -> None:
    sys.stderr.write(f"c3async plugin: {text}\n")
    sys.stderr.flush()


class Stop(Exception):
    """A signal came while no server runs: the proxy ends."""


@dataclass
class Waiting:
    """A message for the server: a request (with its id and how long it may wait) or a notification."""

    line: bytes
    request: bool
    id: Any = None
    method: str = ""
    deadline: float = 0.0


class Lines:
    """A byte stream cut into lines of at most ``limit`` bytes (a longer one is dropped whole)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buf = bytearray()
        self.skipping = False  # inside a line that grew past the limit
        self.dropped = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        out = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            piece = chunk[start:end]
            if self.skipping or len(self.buf) + len(piece) > self.limit:
                self.dropped += 1
            else:
                self.buf += piece
                out.append(bytes(self.buf))
            self.buf.clear()
            self.skipping = False
            start = end + 1
        rest = chunk[start:]
        if not self.skipping and len(self.buf) + len(rest) > self.limit:
            self.buf.clear()
            self.skipping = True
        elif not self.skipping:
            self.buf += rest
        return out


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _nonblocking(fd: int) -> bool:
    """Make ``fd`` non-blocking; whether it was blocking (to put it back)."""
    try:
        was = os.get_blocking(fd)
        os.set_blocking(fd, False)
    except OSError:
        return True
    return was


class Proxy:
    """The conversation with the client, from the first byte to the end of the server it starts.

    ``poll_build()``: None while the build runs, "" when the environment is ready, else why it
    cannot be used. ``start_server()``: the server as a child with pipes for stdin and stdout
    (OSError or the launcher's Problem when it cannot start)."""

    def __init__(
        self,
        manifest: dict[str, Any],
        poll_build: Callable[[], str | None],
        start_server: Callable[[], subprocess.Popen[bytes]],
        log: str,
        stdin: int = 0,
        stdout: int = 1,
    ) -> None:
        self.manifest = manifest
        self.poll_build = poll_build
        self.start_server = start_server
        self.log = log
        self.fin, self.fout = stdin, stdout
        self.started = time.monotonic()
        self.phase = "building"  # then "starting" (the server answers the replay), "relaying"; or "failed"
        self.why = ""  # failed: why
        self.init: dict[str, Any] | None = None  # the client's initialize params
        self.listed = False  # the client listed resources from the manifest
        self.waiting: list[Waiting] = []
        self.waiting_bytes = 0
        self.lines = Lines(MAX_LINE)
        self.to_client = bytearray()
        self.to_server = bytearray()
        self.child: subprocess.Popen[bytes] | None = None
        self.server_in: int | None = None  # the server's stdin and stdout, while open
        self.server_out: int | None = None
        self.from_child = bytearray()  # while starting: the server's output, cut into lines
        self.client_eof = False
        self.child_eof = False
        self.ignored = 0

    # --- the loop ---------------------------------------------------------------------------

    def run(self) -> int:
        blocking = {fd: _nonblocking(fd) for fd in (self.fin, self.fout)}
        handlers = {s: signal.signal(s, self._signal) for s in SIGNALS}
        selector = selectors.PollSelector() if hasattr(selectors, "PollSelector") else selectors.SelectSelector()
        try:
            return self._loop(selector)
        except Stop:
            return 0
        finally:
            selector.close()
            for s, handler in handlers.items():
                signal.signal(s, handler)
            for fd, was in blocking.items():
                try:
                    os.set_blocking(fd, was)
                except OSError:
                    pass
            if self.lines.dropped or self.ignored:
                say(f"ignored {self.ignored} message(s) that were not JSON-RPC, dropped {self.lines.dropped} too long")

    def _loop(self, selector: selectors.BaseSelector) -> int:
        while True:
            if self.phase == "building":
                self._look_at_build()
            self._expire()
            done = self._ended()
            if done is not None:
                return done
            self._interest(selector)
            for key, _events in selector.select(self._timeout()):
                fd = key.fd
                if fd == self.fin:
                    self._read_client()
                elif fd == self.fout and not self._write(fd, self.to_client):
                    return self._client_gone()
                elif fd == self.server_out:
                    self._read_child()
                elif fd == self.server_in and not self._write(fd, self.to_server):
                    self.to_server.clear()  # the server is gone: its stdout's end says so

    def _interest(self, selector: selectors.BaseSelector) -> None:
        want: dict[int, int] = {}
        if not self.client_eof and len(self.to_client) < HIGH_WATER and len(self.to_server) < HIGH_WATER:
            want[self.fin] = selectors.EVENT_READ
        if self.to_client:
            want[self.fout] = want.get(self.fout, 0) | selectors.EVENT_WRITE
        if self.server_out is not None and not self.child_eof and len(self.to_client) < HIGH_WATER:
            want[self.server_out] = selectors.EVENT_READ
        if self.server_in is not None and self.to_server:
            want[self.server_in] = selectors.EVENT_WRITE
        for fd in [k.fd for k in selector.get_map().values() if k.fd not in want]:
            selector.unregister(fd)
        for fd, events in want.items():
            try:
                selector.modify(fd, events)
            except KeyError:
                selector.register(fd, events)

    def _timeout(self) -> float | None:
        deadlines = [w.deadline for w in self.waiting if w.request]
        soonest = min(deadlines) - time.monotonic() if deadlines else None
        if self.phase == "building":
            return TICK_S if soonest is None else max(0.0, min(TICK_S, soonest))
        return None if soonest is None else max(0.0, soonest)

    def _ended(self) -> int | None:
        """The exit status once the conversation is over, else None."""
        child = self.child
        if child is None:
            if self.client_eof:
                self._drain()
                return 0
            return None
        if self.child_eof:
            self._unanswered("the server stopped (its messages are on stderr)")
            self._drain()
            return self._reap(child)
        if self.client_eof and not self.to_server:
            self._close_server_in()  # EOF: the server ends as it does when Claude Code closes it
        return None

    def _close_server_in(self) -> None:
        if self.child is not None and self.child.stdin is not None:
            self.child.stdin.close()
        self.server_in = None

    def _drain(self, limit: float = 2.0) -> None:
        """What is left for the client, written while it reads (at most ``limit`` seconds)."""
        deadline = time.monotonic() + limit
        with selectors.DefaultSelector() as sel:
            try:
                sel.register(self.fout, selectors.EVENT_WRITE)
            except (OSError, ValueError):
                return
            while self.to_client and sel.select(max(0.0, deadline - time.monotonic())):
                if not self._write(self.fout, self.to_client):
                    return

    def _client_gone(self) -> int:
        """The client stopped reading (EPIPE): the server, if any, is closed and waited for."""
        self.to_client.clear()
        if self.child is None:
            return 0
        self._close_server_in()
        return self._reap(self.child)

    @staticmethod
    def _reap(child: subprocess.Popen[bytes]) -> int:
        """The server's exit status once it ends (its stdin is closed, or its stdout was): after
        5 s it is asked to end, then made to."""
        for stop in (None, child.terminate, child.kill):
            if stop is not None:
                stop()
            try:
                return child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                continue
        return child.wait()

    def _signal(self, signum: int, frame: object) -> None:
        if self.child is not None and self.child.poll() is None:
            try:
                self.child.send_signal(signum)
            except OSError:
                pass
        else:
            raise Stop

    # --- bytes ------------------------------------------------------------------------------

    @staticmethod
    def _write(fd: int, buf: bytearray) -> bool:
        """Write what ``fd`` takes of ``buf``; False when its reader is gone."""
        try:
            written = os.write(fd, buf[:HIGH_WATER])
        except BlockingIOError:
            return True
        except OSError:
            return False
        del buf[:written]
        return True

    @staticmethod
    def _read(fd: int) -> bytes | None:
        """What ``fd`` has: None when nothing yet, b"" at its end (or when it fails)."""
        try:
            return os.read(fd, CHUNK)
        except BlockingIOError:
            return None
        except OSError:
            return b""

    def _read_client(self) -> None:
        chunk = self._read(self.fin)
        if chunk is None:
            return
        if not chunk:
            self.client_eof = True
        elif self.phase == "relaying":
            self.to_server += chunk
        else:
            for line in self.lines.feed(chunk):
                self._message(line)

    def _read_child(self) -> None:
        assert self.server_out is not None
        chunk = self._read(self.server_out)
        if chunk is None:
            return
        if not chunk:
            self.child_eof = True
            self.to_client += self.from_child  # a last line without its end: the server's, as it is
            self.from_child.clear()
        elif self.phase == "relaying":
            self.to_client += chunk
        else:
            self.from_child += chunk
            while self.phase == "starting" and (end := self.from_child.find(b"\n")) >= 0:
                line = bytes(self.from_child[: end + 1])
                del self.from_child[: end + 1]
                if not self._replay_answer(line):
                    self.to_client += line  # something the server said first: the client's

    # --- the build and the server -----------------------------------------------------------

    def _look_at_build(self) -> None:
        state = self.poll_build()
        if state is None:
            return
        if state:
            self._fail(state)
            return
        try:
            child = self.start_server()
        except Exception as exc:  # the launcher's Problem (a plant) or an OSError: said, not raised
            self._fail(f"the server could not start: {exc}")
            return
        self.child = child
        assert child.stdin is not None and child.stdout is not None
        self.server_in, self.server_out = child.stdin.fileno(), child.stdout.fileno()
        for fd in (self.server_in, self.server_out):
            _nonblocking(fd)
        if self.init is None:
            self._relay()  # nothing said yet: the client speaks to the server itself
            return
        self.phase = "starting"
        self.to_server += self._encode({"jsonrpc": "2.0", "id": REPLAY_ID, "method": "initialize", "params": self.init})

    def _replay_answer(self, line: bytes) -> bool:
        """Whether ``line`` is the server's answer to the replayed ``initialize`` (then swallowed,
        and the relay begins)."""
        if REPLAY_ID.encode() not in line:
            return False
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError):
            return False
        if not isinstance(msg, dict) or msg.get("id") != REPLAY_ID or "method" in msg:
            return False
        if "error" in msg:
            say(f"the server refused the client's initialize: {json.dumps(msg['error'])[:300]}")
        self._relay()
        return True

    def _relay(self) -> None:
        """From now on the server answers: what waited goes to it, then bytes flow both ways."""
        self.phase = "relaying"
        if self.listed and self.manifest["initialize"]["capabilities"].get("resources", {}).get("listChanged"):
            self._send({"jsonrpc": "2.0", "method": "notifications/resources/list_changed"})
        for waiting in self.waiting:
            self.to_server += waiting.line + b"\n"
        self.waiting.clear()
        self.to_server += self.lines.buf  # a message half read: the rest follows it
        self.lines.buf.clear()
        self.to_client += self.from_child
        self.from_child.clear()

    def _fail(self, why: str) -> None:
        self.phase = "failed"
        self.why = f"{why}; the next session tries again"
        say(self.why)
        self._unanswered(self.why)

    def _unanswered(self, why: str) -> None:
        """Every request still waiting gets ``why``."""
        for waiting in [w for w in self.waiting if w.request]:
            self._refuse(waiting, why)
        self.waiting.clear()
        self.waiting_bytes = 0

    def _expire(self) -> None:
        if self.phase not in ("building", "starting"):
            return
        now = time.monotonic()
        for waiting in [w for w in self.waiting if w.request and w.deadline <= now]:
            self._drop(waiting)
            self._refuse(
                waiting,
                f"c3async's environment is still being built ({now - self.started:.0f} s so far, "
                f"log: {self.log}); try again in a minute",
            )

    def _drop(self, waiting: Waiting) -> None:
        self.waiting.remove(waiting)
        self.waiting_bytes -= len(waiting.line)

    # --- messages ---------------------------------------------------------------------------

    @staticmethod
    def _encode(msg: dict[str, Any]) -> bytes:
        return json.dumps(msg, ensure_ascii=True, separators=(",", ":")).encode() + b"\n"

    def _send(self, msg: dict[str, Any]) -> None:
        self.to_client += self._encode(msg)

    def _answer(self, mid: Any, result: dict[str, Any]) -> None:
        self._send({"jsonrpc": "2.0", "id": mid, "result": result})

    def _error(self, mid: Any, code: int, message: str, data: Any = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self._send({"jsonrpc": "2.0", "id": mid, "error": error})

    def _refuse(self, waiting: Waiting, why: str) -> None:
        """A request the server cannot answer: a tool's error result (the model reads it), or a
        JSON-RPC error for the others."""
        if waiting.method == "tools/call":
            self._answer(waiting.id, {"content": [{"type": "text", "text": why}], "isError": True})
        else:
            self._error(waiting.id, INTERNAL_ERROR, why)

    def _message(self, line: bytes) -> None:
        """One line from the client, before the server answers: answered, held for it, or ignored."""
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError):
            msg = None
        method = msg.get("method") if isinstance(msg, dict) and msg.get("jsonrpc") == "2.0" else None
        if not isinstance(method, str) or ("id" in msg and not _valid_id(msg["id"])):
            if line.strip():
                self.ignored += 1  # not JSON-RPC, a batch, or an answer to nothing we asked
            return
        if "id" not in msg:
            self._notification(msg, method, line)
            return
        mid = msg["id"]
        if method == "initialize":
            self._initialize(mid, msg.get("params"))
        elif method == "ping":
            self._answer(mid, {})
        elif self.init is None:
            if method == "server/discover":
                self._error(mid, METHOD_NOT_FOUND, "Method not found", method)
            else:
                self._error(mid, INVALID_REQUEST, "c3async is starting: send initialize first")
        elif method in LISTS:
            self.listed |= method == "resources/list"
            self._answer(mid, self.manifest[method])
        elif self.phase == "failed":
            self._refuse(Waiting(line, True, mid, method), self.why)
        elif self.waiting_bytes + len(line) > MAX_WAITING:
            self._refuse(Waiting(line, True, mid, method), "too many requests wait for c3async's server to start")
        else:
            self._hold(Waiting(line, True, mid, method, time.monotonic() + CALL_WAIT_S))

    def _notification(self, msg: dict[str, Any], method: str, line: bytes) -> None:
        if self.init is None or self.phase == "failed":
            return  # nothing to tell a server that is not there
        params = msg.get("params")
        if method == "notifications/cancelled" and isinstance(params, dict):
            for waiting in [w for w in self.waiting if w.request and w.id == params.get("requestId")]:
                self._drop(waiting)  # never sent: nothing for the server to cancel
            return
        if self.waiting_bytes + len(line) <= MAX_WAITING:
            self._hold(Waiting(line, False))

    def _hold(self, waiting: Waiting) -> None:
        self.waiting.append(waiting)
        self.waiting_bytes += len(waiting.line)

    def _initialize(self, mid: Any, params: Any) -> None:
        """The server's own answer, with the protocol version it would choose."""
        if (
            not isinstance(params, dict)
            or not isinstance(params.get("protocolVersion"), str)
            or not isinstance(params.get("capabilities"), dict)
            or not isinstance(params.get("clientInfo"), dict)
        ):
            self._error(mid, INVALID_PARAMS, "Invalid request parameters", "")
            return
        self.init = params  # the last one: the version the client now speaks
        asked = params["protocolVersion"]
        result = dict(self.manifest["initialize"])
        result["protocolVersion"] = (
            asked if asked in self.manifest["protocolVersions"] else self.manifest["fallbackProtocolVersion"]
        )
        self._answer(mid, result)
