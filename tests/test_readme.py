"""README.md is true as written.

Its sample output is what the commands print: each ``console`` block of the README is run, `$` line
by `$` line, in the made-up week of sessions its samples come from (``tests/demo_world.py``), by the
real ``c3async`` on PATH, and what it prints (stdout and stderr, as a terminal shows them) must be
the block's text once what has to vary is set aside: the sandbox's folder (the README says
``/tmp/demo``), ages in seconds, sizes (the sandbox's path is in every transcript line), timings,
the Hub's port and token, and the ids of the tasks it adds. A change in what a command prints
fails here until the README says it too. ``C3_WRITE_DOCS=1`` writes the real output into the
README instead (then read the diff): samples are made, never typed.

The quick start is two commands, the second of which is the last line of ``.ci/run``; the messages
the README quotes are the ones c3async prints.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import Sandbox
from demo_world import DemoWorld

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DEMO = "/tmp/demo"  # the sandbox's folder, as the README names it
WRITE = os.environ.get("C3_WRITE_DOCS") == "1"

_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)
pytestmark = pytest.mark.process  # the samples' commands, the completion lines, bash

_TASK_ID = re.compile(r"(?:added task|linked task|task) ([0-9a-f]{8})\b")


def blocks(text: str, lang: str) -> list[re.Match]:
    return [m for m in _BLOCK.finditer(text) if m.group(1) == lang]


def steps(block: str) -> list[tuple[str, str]]:
    """A console block's commands, each with the text printed after it."""
    out: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], []))
        else:
            assert out, f"a console block starts with output: {line!r}"
            out[-1][1].append(line)
    return [(cmd, "\n".join(lines)) for cmd, lines in out]


def normal(text: str) -> str:
    """What must be the same: volatile values set aside, columns' padding not counted."""
    text = re.sub(r"\b\d+s\b", "<s>", text)  # an age in seconds
    text = re.sub(r"\b\d+(?:\.\d)?[KMG]\b", "<size>", text)
    text = re.sub(r"\(\d+\.\d+ s\)", "(<t> s)", text)
    text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", text)
    text = re.sub(r"token=[\w-]+", "token=<token>", text)
    text = re.sub(r"hub-\d+\.json", "hub-<port>.json", text)
    # a live session's burn over the last 15 minutes: where the quarter hours fall moves it
    text = re.sub(r"now [\d,]+ tok/h \$[\d.]+/h(?:, \d+% of the 5h window)?", "now <burn>", text)
    return "\n".join(re.sub(r" {2,}", "  ", line).rstrip() for line in text.strip("\n").splitlines())


class Console:
    """Runs the README's `$` lines in the demo world, in one shell's state: the current folder
    (billing-api's to begin with) and the tasks the README's ids stand for."""

    def __init__(self, claude, world: DemoWorld, env: dict[str, str]) -> None:
        self.claude = claude
        self.root = str(claude.root)
        self.cwd = world.projects["billing-api"]
        self.env = env
        self.tasks: dict[str, str] = {}  # the README's task id -> the real one

    def _in(self, command: str) -> str:
        """The README's command as it runs here: the sandbox for /tmp/demo, the real task ids."""
        command = command.replace(DEMO, self.root)
        for said, real in self.tasks.items():
            command = re.sub(rf"\b{said[:4]}[0-9a-f]{{0,4}}\b", lambda m, real=real: real[: len(m.group(0))], command)
        return command

    def _out(self, text: str) -> str:
        text = text.replace(self.root, DEMO)
        for said, real in self.tasks.items():
            text = text.replace(real, said)
        return text

    def run(self, command: str, said: str) -> str:
        """What ``command`` prints, as the README would say it."""
        words = shlex.split(command)
        if words[0] == "cd":
            self.cwd = self._in(words[1])
            return ""
        if words[:2] == ["c3async", "hub"]:
            return self._out(self._hub(self._in(command)))
        proc = subprocess.run(
            ["bash", "-c", self._in(command)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=self.env,
            cwd=self.cwd,
            timeout=120,
        )
        assert proc.returncode == 0, f"{command}: exit {proc.returncode}\n{proc.stdout}"
        # the tasks a command adds: their ids stand for the README's
        for ours, real in zip(_TASK_ID.findall(said), _TASK_ID.findall(proc.stdout)):
            self.tasks.setdefault(ours, real)
        return self._out(proc.stdout)

    def _hub(self, command: str) -> str:
        """The Hub serves until Ctrl-C: what it prints once it serves."""
        proc = subprocess.Popen(
            ["bash", "-c", f"exec {command}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=self.env,
            cwd=self.cwd,
        )
        try:
            assert proc.stdout is not None
            lines = []
            for line in proc.stdout:
                lines.append(line)
                if line.lstrip().startswith("open that URL"):
                    break
            else:
                raise AssertionError(f"{command}: ended with\n{''.join(lines)}")
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
        return "".join(lines)


@pytest.fixture
def demo():
    """A sandbox whose path is about as long as the README's /tmp/demo (the sizes it shows hold
    the path of every session's folder)."""
    root = tempfile.mkdtemp(prefix="demo", dir="/tmp")
    yield Sandbox(Path(root))
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def shell_env(demo, tmp_path) -> dict[str, str]:
    """The sandbox's environment with ``c3async`` on PATH (this checkout's), as a terminal has it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "c3async"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m c3async "$@"\n')
    shim.chmod(0o755)
    return demo.env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", COLUMNS="120", NO_COLOR="1")


@pytest.fixture
def console(demo, sleepers, shell_env):
    return Console(demo, DemoWorld(demo, sleepers), shell_env)


def test_every_sample_is_what_the_command_prints(console):
    text = README.read_text()
    wrong = []
    written = text
    for block in blocks(text, "console"):
        made = []
        for command, said in steps(block.group(2)):
            real = console.run(command, said)
            made.append(f"$ {command}\n" + "".join(line.rstrip() + "\n" for line in real.splitlines()))
            if normal(real) != normal(said):
                wrong.append(f"$ {command}\n--- README\n{said}\n--- prints\n{real}")
        if WRITE:
            written = written.replace(block.group(2), "".join(made), 1)
    if WRITE:
        README.write_text(written)
    assert not wrong, "\n\n".join(wrong)


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_the_quick_start_is_two_commands_and_ci_runs_the_second():
    quick = blocks(_section(README.read_text(), "Quick start"), "sh")
    assert len(quick) == 1
    commands = [line for line in quick[0].group(2).splitlines() if line.strip()]
    assert len(commands) == 2, commands  # one installs and runs the main job, one runs the tests
    assert "pip install ." in commands[0] and commands[0].endswith("c3async sessions --all")
    assert "pip install '.[test]'" in commands[1] and commands[1].endswith("-m pytest -q -n 2 --dist loadfile")
    ci = REPO / ".ci" / "run"
    lines = [line for line in ci.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert lines[-1] == commands[1]  # CI ends with the README's test command, and exits with its status
    assert lines[0] == "set -euo pipefail"
    checked = subprocess.run(["bash", "-n", str(ci)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def test_the_completion_lines_work_as_written_and_the_uninstall_line_takes_them_out(shell_env, tmp_path):
    text = README.read_text()
    lines = blocks(text[text.index("### Shell completion") :], "sh")[0].group(2).splitlines()
    home = tmp_path / "fresh-home"
    home.mkdir()
    env = {**shell_env, "HOME": str(home)}
    for line in lines:  # each creates its folder
        proc = subprocess.run(["bash", "-c", line], capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 0, f"{line}: {proc.stderr}"
    scripts = {
        "bash": home / ".local/share/bash-completion/completions/c3async",
        "zsh": home / ".zfunc/_c3async",
        "fish": home / ".config/fish/completions/c3async.fish",
    }
    assert all(path.stat().st_size > 0 for path in scripts.values())
    loaded = subprocess.run(
        ["bash", "-c", f"source {shlex.quote(str(scripts['bash']))} && complete -p c3async"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert "-F _c3async_complete c3async" in loaded.stdout, loaded.stderr
    for shell, check in (("zsh", ["zsh", "-n"]), ("fish", ["fish", "--no-execute"])):
        if shutil.which(shell):  # the script parses in its own shell
            parsed = subprocess.run([*check, str(scripts[shell])], capture_output=True, text=True, env=env)
            assert parsed.returncode == 0, parsed.stderr
    removal = next(
        line
        for line in blocks(_section(text, "Uninstalling"), "sh")[0].group(2).splitlines()
        if "completions/c3async" in line
    )
    assert subprocess.run(["bash", "-c", removal], env=env, timeout=60).returncode == 0
    assert not any(path.exists() for path in scripts.values())


def _quote(fragment: str) -> re.Pattern:
    """A message as the README quotes it: DIR and N stand for a value, ... for the rest."""
    pattern = re.escape(fragment).replace("DIR", r"\S+").replace(r"\.\.\.", ".+")
    return re.compile(pattern)


def _shape(text: str) -> str:
    """A message with its paths and numbers set aside."""
    return re.sub(r"\b\d[\d,]*", "N", re.sub(r"/\S*[^\s)]", "PATH", text)).strip()


def test_the_messages_it_quotes_are_the_ones_c3async_prints(console, tmp_path):
    text = " ".join(README.read_text().split())  # as it reads, whatever the line breaks
    # a folder Claude Code has no sessions of: where it looked, and where the sessions are
    said = "Claude Code has no sessions of DIR (looked for ...)"
    assert f"`{said}`" in text
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = subprocess.run(
        ["c3async", "sessions"], capture_output=True, text=True, env=console.env, cwd=empty, timeout=120
    )
    assert proc.returncode == 0 and proc.stdout == ""
    assert _quote(said).search(proc.stderr), proc.stderr
    assert "`c3async sessions --all` lists them" in proc.stderr and "(`c3async sessions --all` lists them)" in text
    cli = (REPO / "docs" / "cli.md").read_text()
    example = cli[cli.index("A folder Claude Code has no sessions of is said on stderr") :]
    assert _shape(blocks(example, "")[0].group(2)) == _shape(proc.stderr)  # docs/cli.md's example

    # the Hub's port held by another program
    said = "port 8765 on 127.0.0.1 is in use"
    assert f"`c3async hub` says `{said}`" in text
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        proc = subprocess.run(
            ["c3async", "hub", "--port", str(port)], capture_output=True, text=True, env=console.env, timeout=60
        )
    assert proc.returncode == 1 and said.replace("8765", str(port)) in proc.stderr, proc.stderr

    # the warning of sessions near Claude Code's cleanup (docs/cli.md quotes it whole)
    from c3async.sessions.keep import Expiring, Survey, warning

    others = [Expiring(f"{i:08x}-0000-4000-8000-000000000000", "/p", "/p/x.jsonl", 2 + i % 5, None) for i in range(29)]
    line = f"c3async: {warning(Survey(expiring=41, kept=12, unkept=others))}"
    assert "(`41 sessions expire within 7 days (12 kept): ...`)" in text
    assert f"```\n{line}\n```" in (REPO / "docs" / "cli.md").read_text()

    # what others print where no sandbox reaches: the words are in the code that prints them
    for said, where in (
        ("the index is being built by another process", "c3async/cli/reports.py"),
        ("belongs to another account", "plugin/launch.py"),
        ("can be written by other accounts", "plugin/launch.py"),
        (": nothing is run from it", "plugin/launch.py"),
    ):
        assert said in text and said in (REPO / where).read_text(), said
