"""The test tiers: what a test needs beyond this process, as a marker (registered in pyproject).

    process   starts our own processes (the CLI, `c3async serve`, a Hub, a Python helper)
    browser   drives Chromium (through a real Hub)
    e2e       runs the real Claude Code CLI (C3_CLAUDE, or the Agent SDK's bundled build)
    slow      takes over about 5 s alone, whatever it starts
    fault     a fault scenario of ``stress`` (many processes, quick mode)

A test with none of them is in the fast tier, marked ``fast`` here at collection:
``python -m pytest -m fast``. The tier is checked as the test runs: every process started
through ``subprocess``, ``os.posix_spawn`` or a pseudo-terminal, from the test's setup to its
teardown, is recorded (an audit hook: nothing is patched), and a fast test that started
anything but git or mount fails, naming what it started. So a marker can be taken off a module (once
its tests call the CLI in this process, say) and the fast tier says whether that was right.
"""

from __future__ import annotations

import os
import sys

import pytest

TIERS = ("process", "browser", "e2e", "slow", "fault")
# Tools a fast test may start, each in milliseconds: git (the library asks it for a root commit,
# tests build repositories with it) and mount (a small tmpfs stands for a full disk).
ALLOWED = frozenset({"git", "mount", "umount"})

started: list[str] = []  # what the running test started, as "name args..."


def _audit(event: str, args: tuple) -> None:
    if event == "subprocess.Popen":  # (executable, args, cwd, env)
        argv = args[1]
        words = [os.fsdecode(argv)] if isinstance(argv, str | bytes) else [os.fsdecode(a) for a in argv]
        started.append(" ".join([os.fsdecode(args[0]) if args[0] else words[0], *words[1:]]))
    elif event == "os.posix_spawn":  # (path, argv, env)
        started.append(" ".join(os.fsdecode(a) for a in args[1]))
    elif event == "os.forkpty":  # pty.fork(): the child execs what the test runs
        started.append("a process in a pseudo-terminal")


sys.addaudithook(_audit)  # for the life of the process: hooks cannot be removed


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not any(item.get_closest_marker(name) for name in TIERS):
            item.add_marker(pytest.mark.fast)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    started.clear()  # before any fixture: a module's Hub is started in its first test's setup


def foreign(commands: list[str]) -> list[str]:
    """What a fast test may not start: everything but ``ALLOWED``."""
    return [c for c in commands if os.path.basename(c.split(" ", 1)[0]) not in ALLOWED]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if call.when == "teardown":
        wrong = foreign(started) if item.get_closest_marker("fast") else []
        started.clear()
        if wrong and report.passed:
            report.outcome = "failed"
            report.longrepr = (
                f"{item.nodeid} is in the fast tier but started {len(wrong)} process(es), first {wrong[0][:200]!r}: "
                f"mark it (or its module: pytestmark) with one of {', '.join(TIERS)}"
            )
    return report
