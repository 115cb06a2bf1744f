"""The real ``c3async hub`` as a subprocess, for the Hub's API and browser tests.

``Hub(sandbox).start()`` runs ``python -m c3async hub --port 0`` in the sandbox's environment,
reads the port and the token from the ``c3async Hub on http://127.0.0.1:PORT/?token=T`` line it
prints on stderr (the only place, with the token file, the token is to be found), waits until
the page answers, and keeps draining stderr (kept for failure messages).

``hub.client()`` sends the token as ``Authorization: Bearer`` (as scripts do); ``client(auth=False)``
sends nothing (a stranger); ``hub.login()`` opens the printed URL as a browser does (no cookie
comes back) and then sends what the page's script sends: ``X-C3-Token`` and the browser's
``Sec-Fetch-Site: same-origin``.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

try:  # the brief's client; mcp depends on its successor, which has the same API
    import httpx
except ImportError:  # pragma: no cover - depends on the environment
    import httpx2 as httpx  # type: ignore[no-redef]

__all__ = ("Hub", "httpx", "sessions_ids", "wait_for")

_ANNOUNCE = re.compile(r"c3async Hub on (http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]+))")


def wait_for(predicate, timeout: float = 10.0, interval: float = 0.05):
    """Poll ``predicate`` until it returns something truthy; returns it, or fails at ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {predicate}")
        time.sleep(interval)


def sessions_ids(rows: Sequence[dict]) -> set[str]:
    return {r["id"] for r in rows}


class Hub:
    """One hub process. ``url`` is ``http://127.0.0.1:PORT``; ``login_url`` the URL it printed,
    ``token`` the token in it."""

    def __init__(
        self,
        sandbox,
        *args: str,
        startup_timeout: float = 20.0,
        env: dict[str, str] | None = None,
        preexec: Callable[[], None] | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.args = args
        self.env = env or {}
        self.preexec = preexec  # run in the child before the hub starts (a resource limit, say)
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.token: str | None = None
        self.login_url: str | None = None
        self.stderr_lines: list[str] = []
        self._announced = threading.Event()
        self._reader: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token_file(self) -> Path:
        return Path(self.sandbox.c3home) / "hub" / f"hub-{self.port}.json"

    @property
    def old_cookie(self) -> str:
        """The cookie that held the token before the page kept it in its own storage."""
        return f"c3async-hub-{self.port}={self.token}"

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_lines.append(line)
            m = _ANNOUNCE.search(line)
            if m and self.port is None:
                self.login_url, self.token = m.group(1), m.group(3)
                self.port = int(m.group(2))
                self._announced.set()
        self._announced.set()  # the process ended (maybe before announcing)

    def stderr(self) -> str:
        return "".join(self.stderr_lines)

    def start(self) -> Hub:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "c3async", "hub", "--port", "0", *self.args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=self.sandbox.env(**self.env),
            cwd=str(self.sandbox.root),
            preexec_fn=self.preexec,
        )
        self._reader = threading.Thread(target=self._drain, name="hub-stderr", daemon=True)
        self._reader.start()
        if not self._announced.wait(self.startup_timeout) or self.port is None:
            self.stop()
            raise AssertionError(f"the hub did not announce its port; stderr:\n{self.stderr()}")
        # The socket is bound before the line is printed; uvicorn listens a moment later.
        deadline = time.monotonic() + self.startup_timeout
        while True:
            try:
                r = httpx.get(self.url + "/", timeout=5)
                if r.status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"the hub did not answer on {self.url}; stderr:\n{self.stderr()}")
            time.sleep(0.05)

    def stop(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if self._reader is not None:
            self._reader.join(5)
        if proc.stderr is not None:
            proc.stderr.close()
        self.proc = None

    def __enter__(self) -> Hub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def indexed(self, timeout: float = 30.0) -> Hub:
        """Wait until the search index the Hub builds at start is done."""
        with self.client() as c:
            wait_for(lambda: not c.get("/api/search/status").json()["updating"], timeout=timeout)
        return self

    def client(self, auth: bool = True, **kwargs) -> httpx.Client:
        """A client of the API; with ``auth`` it sends ``Authorization: Bearer <token>``."""
        kwargs.setdefault("timeout", 10)
        if auth:
            kwargs["headers"] = {"Authorization": f"Bearer {self.token}", **kwargs.get("headers", {})}
        return httpx.Client(base_url=self.url, **kwargs)

    def login(self, **kwargs) -> httpx.Client:
        """A client that opened the printed URL as a browser does (the page, and no cookie), then
        asks as the page's script does: ``X-C3-Token`` from a same-origin page."""
        c = self.client(auth=False, **kwargs)
        try:
            assert self.login_url is not None
            r = c.get(self.login_url)
            assert r.status_code == 200 and "set-cookie" not in r.headers and not c.cookies, (r.status_code, r.headers)
            assert self.token is not None and self.token not in r.text
            c.headers.update({"X-C3-Token": self.token, "Sec-Fetch-Site": "same-origin"})
        except BaseException:
            c.close()
            raise
        return c  # already open: use it as it is (``with`` would open it again), close it after


NOW = datetime.now(UTC)


def hub_session(
    folder: Path,
    cwd: str,
    prompts: list[str],
    *,
    title: str | None = None,
    start: datetime = NOW,
    branch: str = "main",
    answer: Callable[[int, str], str] = lambda i, p: f"answer {i}",
) -> str:
    """A session of ``len(prompts)`` exchanges; started ``start`` (NOW: recent, no idle hint)."""
    import os

    from stress.transcripts import Conversation, write_session

    conv = Conversation(cwd, start=start - timedelta(hours=1) if start is NOW else start, branch=branch)
    lines = [conv.permission_mode()]
    for i, prompt in enumerate(prompts, 1):
        lines += conv.exchange(prompt, answer(i, prompt))
    if title is not None:
        lines.append(conv.custom_title(title))
    path = write_session(folder, conv.id, lines)
    when = start.timestamp() + 600 if start is not NOW else time.time()
    os.utime(path, (when, when))
    return conv.id


def sandbox_world(tmp_path_factory, name: str, make):
    """``make(Sandbox)`` in a module's own sandbox, for worlds built once per module."""
    from conftest import Sandbox

    return make(Sandbox(tmp_path_factory.mktemp(name)))
