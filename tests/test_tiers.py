"""The tiers are checked as the tests run (``tests/tiers.py``): a test with no tier marker is in
the fast tier, and one of those that starts a process fails at its teardown, naming what it
started; a marked test may start anything, and any test may ask git. Shown on a test module of
its own, run by pytest in this process; its processes are audit events only (the check listens
to those), so nothing is started here."""

from __future__ import annotations

pytest_plugins = ("pytester",)

MODULE = """
import sys
import pytest

def start(*argv):
    sys.audit("subprocess.Popen", argv[0], list(argv), None, None)

def test_starts_python():
    start(sys.executable, "-m", "c3async", "sessions")

@pytest.mark.process
def test_marked_starts_python():
    start(sys.executable, "-m", "c3async", "sessions")

def test_asks_git():
    start("/usr/bin/git", "rev-list", "HEAD")

def test_in_process():
    pass

@pytest.mark.browser
def test_is_not_fast():
    pass

def test_fast_only(request):
    assert request.node.get_closest_marker("fast")
"""


def test_a_fast_test_that_starts_a_process_fails_naming_it(pytester, request, monkeypatch):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # none of the installed plugins is needed
    markers = "\n".join(f"    {line}" for line in request.config.getini("markers"))
    pytester.makeini(f"[pytest]\nmarkers =\n{markers}\n")
    pytester.makepyfile(test_module=MODULE)
    result = pytester.runpytest_inprocess("-p", "tiers", "--strict-markers")
    result.assert_outcomes(passed=6, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_starts_python*",
            "*is in the fast tier but started 1 process(es), first*-m c3async sessions*",
        ]
    )
    fast = pytester.runpytest_inprocess("-p", "tiers", "-m", "fast", "-q")
    fast.assert_outcomes(passed=4, errors=1, deselected=2)
