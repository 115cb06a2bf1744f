"""The probe of a hostile class (``stress/hostile_<name>.py``): a sandbox of its own under the
suite's, a CLI runner that judges every command (a process with a time limit: no hang, no
traceback, the expected exit status, a refusal that names the problem), and a real ``c3async
serve`` over stdio whose every call must get a tool result.

    p = probe(res, sb, "typos")
    sid = p.session(p.project("app"), "a prompt")
    p.run("what this step is", "sessions", "--project", project, expect=(2,), says=(project,))
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .harness import PY, REPO, Result
from .transcripts import assistant_line, claude_slug, render, user_line

TIMEOUT_S = 120.0
STATUSLINE_S = 20.0  # a status line's time limit here (Claude Code's own wait is shorter)
PROTOCOL = "2025-11-25"  # the MCP protocol version our raw probes speak


def line(msg: object) -> bytes:
    """One JSON-RPC message as a stdio line."""
    return json.dumps(msg).encode() + b"\n"


def request(mid: object, method: str, params: dict | None = None) -> bytes:
    return line({"jsonrpc": "2.0", "id": mid, "method": method, **({"params": params} if params else {})})


def initialize(client: str, protocol: str = PROTOCOL, mid: object = 1) -> bytes:
    """The ``initialize`` request of a client named ``client``, as a line."""
    return request(
        mid,
        "initialize",
        {"protocolVersion": protocol, "capabilities": {}, "clientInfo": {"name": client, "version": "0"}},
    )


@dataclass
class Probe:
    """One class's sandbox and its CLI runner."""

    res: Result
    root: Path
    env: dict[str, str] = field(default_factory=dict)
    runs: int = 0

    @property
    def config(self) -> Path:
        return self.root / "claude"

    @property
    def home(self) -> Path:
        return self.root / "c3home"

    def project(self, name: str) -> str:
        path = self.root / "work" / name
        path.mkdir(parents=True, exist_ok=True)
        return os.path.realpath(path)

    def session(
        self,
        project: str,
        prompt: str,
        sid: str | None = None,
        *,
        folder: str | None = None,
        lines: list[dict] | None = None,
    ) -> str:
        sid = sid or str(uuid.uuid4())
        dest = self.config / "projects" / (folder or claude_slug(project))
        dest.mkdir(parents=True, exist_ok=True)
        ts = time.time() - 3600
        u = user_line(sid, project, prompt, ts)
        body = [u, assistant_line(sid, project, f"on it: {prompt}", ts + 1, u["uuid"])] + (lines or [])
        (dest / f"{sid}.jsonl").write_bytes(render(body))
        return sid

    def run(
        self,
        what: str,
        *args: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        expect: tuple[int, ...] = (0,),
        says: tuple[str, ...] = (),
        stdin: str = "",
    ) -> subprocess.CompletedProcess:
        self.runs += 1
        try:
            proc = subprocess.run(
                [PY, "-m", "c3async", *args],
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S,
                env=env or self.env,
                cwd=cwd or str(self.root),
                input=stdin,
            )
        except subprocess.TimeoutExpired:
            self.res.check(False, "no hang", f"{what}: no answer in {TIMEOUT_S:.0f} s")
            return subprocess.CompletedProcess(args, -1, "", "")
        self.res.check("Traceback" not in proc.stderr + proc.stdout, "no traceback", f"{what}: {proc.stderr[-300:]!r}")
        self.res.check(
            proc.returncode in expect,
            "the expected exit status",
            f"{what}: {proc.returncode}, wanted {expect}: {proc.stderr[-300:]!r}",
        )
        for word in says:
            self.res.check(
                word in proc.stderr + proc.stdout,
                "a refusal names the problem",
                f"{what}: {word!r} not said: {proc.stderr[-300:]!r}",
            )
        return proc

    def statusline(self, what: str, data: str, cwd: str, took: list[float], **env: str) -> str:
        """One run of the status line as Claude Code runs it: the command ``install-statusline``
        writes, through ``/bin/sh -c``, Claude Code's JSON ``data`` on stdin, ``NO_COLOR`` set.
        Judged: no hang (in ``STATUSLINE_S``), exit 0 and nothing on stderr, one short line with
        no raw control character. Its output ('' when it hung); its time appended to ``took``."""
        from c3async.live.statusline import statusline_command

        self.runs += 1
        t0 = time.monotonic()
        try:
            proc = subprocess.run(
                ["/bin/sh", "-c", statusline_command()],
                input=data,
                capture_output=True,
                text=True,
                env={**self.env, "NO_COLOR": "1", **env},
                cwd=cwd,
                timeout=STATUSLINE_S,
            )
        except subprocess.TimeoutExpired:
            self.res.check(False, "no hang", f"{what}: no line in {STATUSLINE_S:.0f} s")
            return ""
        took.append(time.monotonic() - t0)
        out = proc.stdout
        self.res.check(
            proc.returncode == 0 and not proc.stderr, "exit 0, nothing on stderr", f"{what}: {proc.stderr[-300:]!r}"
        )
        self.res.check(len(out.splitlines()) == 1 and len(out) < 400, "one short line", f"{what}: {out[:200]!r}")
        bad = [c for c in out if (ord(c) < 32 and c != "\n") or 0x7F <= ord(c) <= 0x9F]
        self.res.check(not bad, "no raw control character", f"{what}: {out[:200]!r}")
        return out

    def rows(self, project: str) -> dict[str, dict]:
        proc = self.run(f"sessions --project {project}", "sessions", "--project", project, "--json")
        try:
            return {r["id"]: r for r in json.loads(proc.stdout or "[]")}
        except ValueError:
            return {}


def probe(res: Result, sb, name: str) -> Probe:
    root = sb.root / f"class-{name}"
    root.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "C3_"))}
    env.update(
        CLAUDE_CONFIG_DIR=str(root / "claude"),
        C3_HOME=str(root / "c3home"),
        PYTHONPATH=str(REPO),
        HOME=str(root / "home"),
    )
    (root / "home").mkdir()
    return Probe(res, root, env)


def tree(root: Path) -> set[str]:
    return {os.path.relpath(os.path.join(d, n), root) for d, ds, fs in os.walk(root) for n in ds + fs}


def mcp(p: Probe, project: str, calls: list[tuple[str, dict]]) -> list[tuple[bool, str]]:
    """(is_error, text) of each call to a real ``c3async serve`` started in ``project``."""
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=PY, args=["-m", "c3async", "serve"], env={**p.env, "CLAUDE_PROJECT_DIR": project}, cwd=project
    )

    async def main() -> list[tuple[bool, str]]:
        out = []
        with open(p.root / "serve.err", "a") as err:  # stdio_client needs a real file
            async with Client(stdio_client(params, errlog=err), mode="legacy", read_timeout_seconds=TIMEOUT_S) as c:
                for tool, args in calls:
                    r = await c.call_tool(tool, args)
                    out.append((bool(r.is_error), "".join(getattr(x, "text", "") for x in r.content or [])))
        return out

    answers = anyio.run(main)
    for (tool, args), (_, text) in zip(calls, answers):
        p.res.check(
            "Traceback" not in text and "failed inside c3async" not in text,
            "every tool call gets a tool result",
            f"{tool}({args}): {text[:300]!r}",
        )
    return answers
