"""``c3async.cli.main`` runs a command in this process as ``c3async`` runs it in its own: the
same output and exit status, on the streams and in the environment given, and nothing of the
call left behind (environment, streams, signal handlers, log handlers, what was said once)."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import sys

import pytest

from c3async.cli import main
from stress.transcripts import simple_session


def _call(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=out, err=err, env=env)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.process  # the process it is compared with
def test_the_same_answer_as_the_process_on_the_streams_given(claude) -> None:
    proj = claude.project("app")
    simple_session(
        claude.folder(proj), proj, "café \u202e and \x1b[31m", session_id="aaaa1111-0000-4000-8000-000000000001"
    )
    for argv in (["sessions", "--project", proj, "--json"], ["show", "aaaa", "--project", proj], ["tasks", "add"]):
        here = _call(argv, claude.env())
        there = claude.run(*argv, process=True)
        assert here == (there.returncode, there.stdout, there.stderr), argv
    assert json.loads(_call(["sessions", "--project", proj, "--json"], claude.env())[1])[0]["title"].startswith("café")


def test_usage_errors_and_help_return_their_status() -> None:
    code, out, err = _call(["sessions", "--limit", "many"], {})
    assert (code, out) == (2, "") and "--limit: expected a whole number, got 'many'" in err
    code, out, err = _call(["--help"], {})
    assert code == 0 and out.startswith("usage: c3async") and err == ""
    code, out, err = _call([], {})
    assert code == 2 and out == "" and err.startswith("usage: c3async")


def test_the_call_reads_its_environment_and_leaves_this_one_as_it_was(claude) -> None:
    proj = claude.project("app")
    before = dict(os.environ)
    code, _, err = _call(["tasks", "add", "--title", "here", "--json"], claude.env(CLAUDE_PROJECT_DIR=proj))
    assert code == 0, err
    assert (claude.root / "work" / "app" / ".c3" / "pm" / "pm.json").is_file()  # CLAUDE_PROJECT_DIR was read
    assert dict(os.environ) == before


def test_nothing_of_the_call_stays(claude) -> None:
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)}
    streams, hook = (sys.stdout, sys.stderr), sys.unraisablehook
    root = logging.getLogger()
    logging_was = (list(root.handlers), root.level)
    assert _call(["sessions", "--project", "/no/such/folder"], claude.env())[0] == 2
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers
    assert (sys.stdout, sys.stderr, sys.unraisablehook) == (*streams, hook)
    assert (list(root.handlers), root.level) == logging_was


def test_a_warning_said_once_a_process_is_said_by_each_call(claude) -> None:
    proj = claude.project("app")
    simple_session(claude.folder(proj), proj, "one", session_id="aaaa1111-0000-4000-8000-000000000001")
    claude.c3home.mkdir(parents=True, exist_ok=True)
    (claude.c3home / "moves.json").write_text("{not json")
    said = [_call(["sessions", "--project", proj], claude.env())[2] for _ in range(2)]
    assert "moves.json is not read" in said[0]
    assert said[0] == said[1]
