"""Which Claude Code session does this MCP server serve, and from which IDE?

No MCP message carries the session. Claude Code passes ``CLAUDE_CODE_SESSION_ID`` in the
server's environment, but that stays the FIRST id after a ``/clear``. Claude Code also keeps
``$CLAUDE_CONFIG_DIR/sessions/<pid>.json`` for each running process and rewrites its
``sessionId`` on /clear; the server's parent is that process. A killed claude leaves its file
behind and pids are reused, so the file counts only when its process start time matches the
parent's real one.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from ..catalog.locate import config_home
from ..ground.peek import read_regular
from .registry_file import MAX_BYTES, Registered, decode, holds

__all__ = ("HostIdentity", "detect_ide")

MAX_ANCESTORS = 4  # how far up the process tree the claude process may be


class HostIdentity:
    """The host session a server serves, re-read on demand (every heartbeat and tool call)."""

    def __init__(self, parent_pid: int | None = None, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self.parent_pid = os.getppid() if parent_pid is None else parent_pid
        self.env_session_id = env.get("CLAUDE_CODE_SESSION_ID") or None
        self.source = "env" if self.env_session_id else None
        self.claude_pid: int | None = None  # the ancestor whose registry file matched
        self.registered: Registered | None = None  # its registry file as last read

    def registry_path(self, pid: int | None = None) -> Path:
        return config_home() / "sessions" / f"{self.parent_pid if pid is None else pid}.json"

    def _ancestors(self) -> list[int]:
        """The parent, then (when launched through `uv run`, a shell script...) its ancestors."""
        if self.claude_pid is not None:
            return [self.claude_pid]
        pids = [self.parent_pid]
        try:
            import psutil

            proc = psutil.Process(self.parent_pid)
            for _ in range(MAX_ANCESTORS - 1):
                parent = proc.parent()
                if parent is None or parent.pid <= 1:
                    break
                proc = parent
                pids.append(proc.pid)
        except Exception:  # gone, or not ours to inspect: the parent alone
            pass
        return pids

    def _registered(self, pid: int) -> str | None:
        try:
            reg = decode(read_regular(str(self.registry_path(pid)), MAX_BYTES))
        except OSError:
            return None
        if reg is not None and reg.sessionId and holds(reg, pid, self.registry_path(pid)):
            self.registered = reg
            return reg.sessionId
        return None

    def current(self) -> str | None:
        for pid in self._ancestors():
            found = self._registered(pid)
            if found:
                self.claude_pid = pid
                self.source = "registry"
                return found
        self.claude_pid = self.registered = None
        self.source = "env" if self.env_session_id else None
        return self.env_session_id


_IDE_PROCESSES = (
    ("cursor", "cursor"),
    ("windsurf", "windsurf"),
    ("code - insiders", "vscode"),
    ("code helper", "vscode"),
    ("code.exe", "vscode"),
    ("codium", "vscode"),
    ("code", "vscode"),
    ("pycharm", "jetbrains"),
    ("idea", "jetbrains"),
    ("webstorm", "jetbrains"),
    ("goland", "jetbrains"),
    ("clion", "jetbrains"),
    ("rider", "jetbrains"),
    ("phpstorm", "jetbrains"),
    ("rubymine", "jetbrains"),
    ("rustrover", "jetbrains"),
    ("datagrip", "jetbrains"),
    ("studio", "jetbrains"),
    ("zed", "zed"),
)
_TERMINALS = (
    "terminal",
    "iterm",
    "konsole",
    "alacritty",
    "kitty",
    "wezterm",
    "ghostty",
    "xterm",
    "tmux",
    "screen",
    "sshd",
    "warp",
    "tilix",
    "foot",
    "conhost",
    "windowsterminal",
)


def detect_ide(env: Mapping[str, str] | None = None, max_depth: int = 12) -> str:
    """vscode, cursor, windsurf, jetbrains, zed, terminal or unknown: from the environment the
    IDE leaves in its terminals and extension hosts, then from the process ancestry."""
    env = os.environ if env is None else env
    if any(k.startswith("CURSOR_") for k in env) or "cursor" in env.get("__CFBundleIdentifier", "").lower():
        return "cursor"
    entry = env.get("CLAUDE_CODE_ENTRYPOINT", "")
    if "vscode" in entry or env.get("TERM_PROGRAM") == "vscode" or "VSCODE_PID" in env:
        return "vscode"
    if "jetbrains" in entry or env.get("TERMINAL_EMULATOR", "").startswith("JetBrains"):
        return "jetbrains"
    try:
        import psutil

        proc = psutil.Process().parent()
        for _ in range(max_depth):
            if proc is None:
                break
            name = (proc.name() or "").lower()
            for needle, ide in _IDE_PROCESSES:
                if needle in name if len(needle) > 4 else name in (needle, needle + ".exe"):
                    return ide
            if any(t in name for t in _TERMINALS):
                return "terminal"
            proc = proc.parent()
    except Exception:  # a process vanished or access was denied: what we saw is all we know
        pass
    if env.get("TERM_PROGRAM") or (sys.stdin is not None and env.get("TERM")):
        return "terminal"
    return "unknown"
