"""Shared fixtures: a sandboxed Claude config home and C3 home, and the real CLI (in process, or as a process)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
REPO = Path(__file__).resolve().parents[1]

from stress.transcripts import claude_slug  # noqa: E402

pytest_plugins = ("tiers",)  # the markers' check (tests/tiers.py)


class Sandbox:
    """A tmp world: ``<root>/config`` is CLAUDE_CONFIG_DIR, ``<root>/c3home`` is C3_HOME."""

    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.realpath(root))
        self.config = self.root / "config"
        self.c3home = self.root / "c3home"
        self.projects_root = self.config / "projects"
        self.projects_root.mkdir(parents=True, exist_ok=True)

    def env(self, **overrides: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "C3_"))}
        for size in ("COLUMNS", "LINES"):  # a table as a pipe gets it (pytest-xdist's workers set 80)
            env.pop(size, None)
        env.update(
            CLAUDE_CONFIG_DIR=str(self.config), C3_HOME=str(self.c3home), PYTHONPATH=str(REPO)
        )  # the checkout under test, whatever copy is installed
        env.update(overrides)
        return env

    def activate(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Point this process at the sandbox too, for tests that call the library in-process."""
        for key, value in self.env().items():
            monkeypatch.setenv(key, value)

    def project(self, *parts: str) -> str:
        """Create a project directory under the sandbox; returns its real path."""
        path = self.root.joinpath("work", *parts)
        path.mkdir(parents=True, exist_ok=True)
        return os.path.realpath(path)

    def folder(self, project: str, name: str | None = None) -> Path:
        """The transcript folder Claude Code would use for ``project`` (or one named ``name``)."""
        folder = self.projects_root / (name or claude_slug(project))
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def run(
        self, *args: str, env: dict[str, str] | None = None, cwd: str | None = None, process: bool = False
    ) -> subprocess.CompletedProcess:
        """``c3async ARGS`` in the sandbox (or ``env``), in ``cwd``: run in this process by
        ``c3async.cli.main``, or with ``process=True`` as a process of its own (a test of
        what only a process has: its signals, tty, stdin, exit, or several at once)."""
        env, cwd = env or self.env(), cwd or str(self.root)
        command = [sys.executable, "-m", "c3async", *args]
        if process:
            return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=120)
        assert not _a_process_of_its_own(args, env), f"c3async {args[0]} needs process=True"
        from c3async.cli import main

        out, err, here = io.StringIO(), io.StringIO(), os.getcwd()
        ended: list = []  # its exit status, or what it raised

        def call() -> None:
            try:
                ended.append(main(list(args), out=out, err=err, env=env))
            except BaseException as exc:  # raised again in the test's thread
                ended.append(exc)

        os.chdir(cwd)
        try:
            if asyncio_loop_runs():  # an async test, or Playwright's: the command's own loop needs a thread
                thread = threading.Thread(target=call)
                thread.start()
                thread.join()
            else:
                call()
        finally:
            os.chdir(here)
        if isinstance(ended[0], BaseException):
            raise ended[0]
        return subprocess.CompletedProcess(command, ended[0], out.getvalue(), err.getvalue())

    def sessions(self, project: str, *args: str, env: dict[str, str] | None = None) -> list[dict]:
        """``c3async sessions --project DIR --json``: the rows, after checking the exit status."""
        proc = self.run("sessions", "--project", project, "--json", *args, env=env)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    def rows_by_id(self, project: str, *args: str, env: dict[str, str] | None = None) -> dict[str, dict]:
        return {row["id"]: row for row in self.sessions(project, *args, env=env)}


def asyncio_loop_runs() -> bool:
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _a_process_of_its_own(args: tuple[str, ...], env: dict[str, str]) -> bool:
    """A command that would end or become the process that runs it (the test's, in process),
    or read its stdin: `resume` (exec claude), the shell's completion, the MCP server, a hook."""
    command = args[0] if args else None
    if command == "resume":
        return "--print" not in args[: args.index("--") if "--" in args else len(args)]
    return command in ("serve", "hook", "statusline") or "_ARGCOMPLETE" in env


@pytest.fixture
def claude(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path)


@pytest.fixture
def sleeper():
    """A real process standing for a running claude."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def sleepers():
    """Three real processes standing for running claudes (the demo world's waiting, busy and idle)."""
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]) for _ in range(3)]
    yield [p.pid for p in procs]
    for p in procs:
        p.kill()
        p.wait()


@pytest.fixture(scope="module")
def module_claude(tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    """One sandbox per test module, for corpora that are built and listed once."""
    return Sandbox(tmp_path_factory.mktemp("claude"))


# The Hub's tests: a module defines ``world`` (with ``.claude``, its sandbox); these serve it.
@pytest.fixture(scope="module")
def hub(world):
    """The real ``c3async hub`` over the module's world."""
    from hubproc import Hub

    with Hub(world.claude) as h:
        yield h


@pytest.fixture
def client(hub):
    """Authenticated as a script is: ``Authorization: Bearer <token>``."""
    with hub.client() as c:
        yield c


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium for the module's browser tests (they skip where ``stress.chromium.missing()``)."""
    from stress.chromium import launched

    with launched() as b:
        yield b
