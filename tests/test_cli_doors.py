"""The CLI as a new user meets it: examples in every --help, NO_COLOR, the Hub's port in use,
``hub --url``, ``hub --open`` without a browser, ``.c3/`` kept out of git, and shell completion.
Each runs the real command as a subprocess. (``install-hooks --remove`` is in test_hooks.py.)"""

from __future__ import annotations

import argparse
import json
import os
import pty
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hubproc import Hub

from c3async.cli.parser import build_parser
from stress.transcripts import simple_session

pytestmark = pytest.mark.process


def _every_parser(parser: argparse.ArgumentParser, name: str = "c3async"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child, sub in action.choices.items():
                yield from _every_parser(sub, f"{name} {child}")


def test_every_command_help_shows_an_example() -> None:
    seen = []
    for name, parser in _every_parser(build_parser()):
        text = parser.format_help()
        assert "Example" in text and "c3async" in text.split("Example", 1)[1], name
        seen.append(name)
    assert {"c3async sessions", "c3async mark note", "c3async tasks", "c3async hub", "c3async completion"} <= set(seen)


def _on_a_terminal(claude, *args: str, **env: str) -> str:
    """The command's stdout when it is a terminal (a pty), as bytes decoded."""
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "c3async", *args],
        stdout=child,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=claude.env(**env),
        cwd=str(claude.root),
    )
    os.close(child)
    out = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return out.decode("utf-8", "replace")


def test_search_hits_are_bold_on_a_terminal_unless_no_color(claude) -> None:
    proj = claude.project("app")
    simple_session(claude.folder(proj), proj, "the pangolin parser drops a token")
    env = {"TERM": "xterm"}
    bold = _on_a_terminal(claude, "search", "pangolin", "--project", proj, **env)
    assert "\033[1mpangolin\033[0m" in bold
    plain = _on_a_terminal(claude, "search", "pangolin", "--project", proj, NO_COLOR="1", **env)
    assert "\u00abpangolin\u00bb" in plain and "\033[" not in plain
    empty = _on_a_terminal(claude, "search", "pangolin", "--project", proj, NO_COLOR="", **env)
    assert "\033[1mpangolin" in empty  # an empty NO_COLOR is not set (no-color.org)


# ---------------------------------------------------------------- the Hub


def test_a_port_in_use_says_who_holds_it_and_hub_url_prints_the_running_hubs(claude) -> None:
    none = claude.run("hub", "--url")
    assert none.returncode == 1 and "no Hub is running" in none.stderr and none.stdout == ""
    assert not (claude.c3home / "hub").exists()  # asking creates nothing
    with Hub(claude) as hub:
        shown = claude.run("hub", "--url")
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.strip() == hub.login_url
        data = json.loads(claude.run("hub", "--url", "--json").stdout)
        assert data == [{"url": hub.login_url, "port": hub.port, "pid": hub.proc.pid}]
        second = claude.run("hub", "--port", str(hub.port))
        assert second.returncode == 1
        assert f"port {hub.port} on 127.0.0.1 is in use: another c3async Hub (pid {hub.proc.pid})" in second.stderr
        assert "c3async hub --url" in second.stderr and "Traceback" not in second.stderr
    after = claude.run("hub", "--url")
    assert after.returncode == 1  # a stopped Hub is not listed


def test_a_port_another_program_holds_names_that_program(claude) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        done = claude.run("hub", "--port", str(port))
    assert done.returncode == 1
    assert f"port {port} on 127.0.0.1 is in use: " in done.stderr
    assert f"(pid {os.getpid()}) listens on it" in done.stderr and "--port 0 picks a free one" in done.stderr


def test_hub_open_without_a_browser_says_so_and_with_one_opens_the_private_page(claude, tmp_path) -> None:
    no_display = {"DISPLAY": "", "WAYLAND_DISPLAY": "", "BROWSER": ""}
    with Hub(claude, "--open", env=no_display) as hub:
        assert hub.login_url in hub.stderr()
        deadline = time.monotonic() + 10
        while "no browser found" not in hub.stderr() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "c3async: no browser found to open (no display, no $BROWSER); open the URL above" in hub.stderr()
    seen = tmp_path / "opened"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\nprintf "%s" "$1" > {seen}\n')
    browser.chmod(0o755)
    with Hub(claude, "--open", env={"DISPLAY": "", "BROWSER": str(browser)}) as hub:
        deadline = time.monotonic() + 10
        while not seen.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        opened = seen.read_text()
        assert opened == (claude.c3home / "hub" / f"hub-{hub.port}-open.html").as_uri()
        assert hub.token not in opened  # the token is never on a command line
        assert "no browser found" not in hub.stderr()


# ---------------------------------------------------------------- hooks, git, completion


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_c3_folder_keeps_itself_out_of_git_until_the_user_edits_its_gitignore(claude) -> None:
    repo = claude.project("repo")
    subprocess.run(["git", "init", "-q", repo], check=True)
    assert claude.run("tasks", "add", "--title", "ship it", "--project", repo).returncode == 0
    status = subprocess.run(["git", "status", "--porcelain", "-uall"], cwd=repo, capture_output=True, text=True)
    assert status.stdout == ""  # .c3 holds pm/pm.json, its lock and backup: none shows
    ignore = Path(repo, ".c3", ".gitignore")
    share = [line[4:] for line in ignore.read_text().splitlines() if line.startswith("#   ")]
    ignore.write_text("\n".join(share) + "\n")  # the user opts to share, as the file says
    for name in ("activity.jsonl", "session_marks.jsonl", "config.json"):
        Path(repo, ".c3", name).touch()
    claude.run("tasks", "add", "--title", "and this", "--project", repo)
    status = subprocess.run(["git", "status", "--porcelain", "-uall"], cwd=repo, capture_output=True, text=True)
    assert sorted(status.stdout.split()[1::2]) == [
        ".c3/.gitignore",
        ".c3/config.json",
        ".c3/pm/pm.json",
        ".c3/session_marks.jsonl",
    ]
    assert ignore.read_text() == "\n".join(share) + "\n"  # never rewritten


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_c3_folder_made_before_the_gitignore_gets_one_and_a_deleted_one_comes_back(claude) -> None:
    repo = claude.project("old")
    subprocess.run(["git", "init", "-q", repo], check=True)
    Path(repo, ".c3").mkdir()
    Path(repo, ".c3", "session_marks.jsonl").write_text("")
    assert claude.run("sessions", "--project", repo).returncode == 0
    assert Path(repo, ".c3", ".gitignore").read_text().rstrip().endswith("\n*")
    Path(repo, ".c3", ".gitignore").unlink()
    claude.run("sessions", "--project", repo)
    assert Path(repo, ".c3", ".gitignore").exists()


def test_bash_completion_from_the_printed_script_completes_commands_and_options(claude) -> None:
    script = claude.run("completion", "bash")
    assert script.returncode == 0 and "complete " in script.stdout
    bin_dir = Path(sys.executable).parent
    line = (
        'COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}; read -ra COMP_WORDS <<< "$1"; COMP_CWORD=$((${#COMP_WORDS[@]}-1));'
    )
    probe = f'source /dev/stdin; {line} _python_argcomplete c3async; printf "%s\\n" "${{COMPREPLY[@]}}"'
    env = claude.env(PATH=f"{bin_dir}:{os.environ['PATH']}")
    for typed, expect in (("c3async se", {"sessions", "search", "serve"}), ("c3async hub --u", {"--url"})):
        done = subprocess.run(
            ["bash", "-c", probe, "bash", typed],
            input=script.stdout,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert set(done.stdout.split()) >= expect, (typed, done.stdout, done.stderr)
    for shell in ("zsh", "fish"):
        assert "c3async" in claude.run("completion", shell).stdout
