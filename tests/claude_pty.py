"""The real Claude Code CLI, interactive, in a pseudo-terminal: type into it, wait for what it
draws. For the end-to-end tests of what only the interactive CLI does (``@`` mentions)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import termios
import time
from pathlib import Path

_ESCAPES = re.compile(rb"\x1b\[[0-9;?>=]*[A-Za-z~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[=>()78][A-Za-z0-9]?")


def trust(config: Path, project: str, api_key: str) -> None:
    """Mark onboarding done, the project trusted and the API key approved in ``.claude.json``,
    so the CLI starts straight at its prompt."""
    path = config / ".claude.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data.update(hasCompletedOnboarding=True, theme="dark")
    data.setdefault("projects", {}).setdefault(project, {})["hasTrustDialogAccepted"] = True
    data["customApiKeyResponses"] = {"approved": [api_key[-20:]], "rejected": []}
    path.write_text(json.dumps(data))


def _squeeze(text: str) -> str:
    return "".join(text.split())


class Terminal:
    def __init__(self, argv: list[str], cwd: str, env: dict[str, str], rows: int = 50, cols: int = 160) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the CLI
            try:
                os.chdir(cwd)
                os.execve(argv[0], argv, {**env, "TERM": "xterm-256color"})
            finally:
                os._exit(127)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.raw = b""

    def pump(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ready, _, _ = select.select([self.fd], [], [], 0.05)
            if ready:
                try:
                    self.raw += os.read(self.fd, 65536)
                except OSError:
                    return

    def text(self) -> str:
        """What was drawn, escape sequences removed (so a word drawn at once stays whole)."""
        return _ESCAPES.sub(b"", self.raw).decode("utf-8", "replace")

    def wait_for(self, needle: str, timeout: float = 30.0) -> str:
        """Wait until ``needle`` is drawn. Spaces are ignored on both sides: the CLI may draw a
        gap as a cursor move rather than as spaces, depending on what was on the screen before."""
        end = time.monotonic() + timeout
        squeezed = _squeeze(needle)
        while squeezed not in _squeeze(self.text()):
            assert time.monotonic() < end, f"{needle!r} never drawn; the end of the screen: {self.text()[-1500:]!r}"
            self.pump(0.1)
        return self.text()

    def type(self, text: str, delay: float = 0.02) -> None:
        for ch in text:
            os.write(self.fd, ch.encode())
            time.sleep(delay)
            self.pump(0)

    def close(self) -> None:
        for _ in range(2):
            try:
                os.write(self.fd, b"\x03")
            except OSError:
                break
            self.pump(0.3)
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        for _ in range(50):
            if os.waitpid(self.pid, os.WNOHANG) != (0, 0):
                break
            time.sleep(0.1)
        else:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)
