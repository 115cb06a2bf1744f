"""Make ``plugin/manifest.json``: what c3async's server answers before it needs its environment.

``python plugin/manifest.py`` starts the real server of this checkout (``python -m c3async
serve``, with c3async's dependencies installed) in an empty project of a fresh home, speaks to it
as Claude Code does, and writes what it answered: ``initialize`` (server info, capabilities,
instructions), the protocol versions it echoes (every version the ``mcp`` SDK knows is asked
for; one it does not know gets its own version, ``fallbackProtocolVersion``) and ``tools/list``,
``prompts/list``, ``resources/list`` (the resources an empty project has) and
``resources/templates/list``. The launcher answers from it while the environment is built
(``proxy.py``). ``--check`` writes nothing and exits 1, naming what differs, when the file is not
what the server answers now (a test runs it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
PATH = os.path.join(ROOT, "plugin", "manifest.json")
LISTS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")
UNKNOWN_VERSION = "1999-01-01"  # no protocol's: the server answers with its own
TIMEOUT_S = 60.0


class Server:
    """The real server over stdio, one request at a time."""

    def __init__(self, home: str) -> None:
        project = os.path.join(home, "project")
        os.mkdir(project)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "C3_", "PYTHON"))}
        env.update(
            HOME=home,
            CLAUDE_CONFIG_DIR=os.path.join(home, ".claude"),
            C3_HOME=os.path.join(home, ".c3"),
            CLAUDE_PROJECT_DIR=project,
            PYTHONPATH=ROOT,
            PYTHONDONTWRITEBYTECODE="1",
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "c3async", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=project,
            env=env,
        )
        self.watchdog = threading.Timer(TIMEOUT_S, self.proc.kill)  # a server that hangs fails the run
        self.watchdog.start()
        self.next_id = 0

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", **msg}).encode() + b"\n")
        self.proc.stdin.flush()

    def ask(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, **({"params": params} if params is not None else {})})
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit(f"the server ended before it answered {method}")
            msg = json.loads(line)
            if msg.get("id") == self.next_id:
                if "result" not in msg:
                    raise SystemExit(f"the server refused {method}: {msg.get('error')}")
                return dict(msg["result"])

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait()
        self.watchdog.cancel()


def generate() -> dict[str, Any]:
    from mcp_types.version import KNOWN_PROTOCOL_VERSIONS

    with tempfile.TemporaryDirectory(prefix="c3async-manifest-") as home:
        server = Server(home)
        try:
            echoed, first = [], None
            for version in (*KNOWN_PROTOCOL_VERSIONS, UNKNOWN_VERSION):
                params = {
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": {"name": "manifest", "version": "0"},
                }
                result = server.ask("initialize", params)
                answered = result.pop("protocolVersion")
                if first is not None and result != first:
                    raise SystemExit(f"the server answers initialize differently for {version}: the proxy cannot")
                first = result
                if version == UNKNOWN_VERSION:
                    fallback = answered
                elif answered == version:
                    echoed.append(version)
            server.send({"method": "notifications/initialized"})
            manifest: dict[str, Any] = {
                "initialize": first,
                "protocolVersions": echoed,
                "fallbackProtocolVersion": fallback,
            }
            for method in LISTS:
                result = server.ask(method)
                if result.get("nextCursor"):
                    raise SystemExit(f"{method} has more than one page: the proxy answers one")
                manifest[method] = result
        finally:
            server.close()
    return manifest


def main() -> int:
    manifest = generate()
    if sys.argv[1:] == ["--check"]:
        try:
            with open(PATH, "rb") as f:
                shipped = json.load(f)
        except (OSError, ValueError) as exc:
            print(f"{PATH}: {exc}", file=sys.stderr)
            return 1
        differ = sorted(k for k in manifest.keys() | shipped.keys() if manifest.get(k) != shipped.get(k))
        if differ:
            print(f"{PATH} differs from what the server answers in: {', '.join(differ)}", file=sys.stderr)
            print("make it again: python plugin/manifest.py", file=sys.stderr)
            return 1
        return 0
    with open(PATH, "w", encoding="utf-8") as f:
        f.write(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
