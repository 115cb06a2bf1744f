"""A keystroke stops it: Ctrl-C (once, twice) in a real pseudo-terminal and SIGINT or SIGTERM
from a script end a command in the middle of its first pass with worker processes, with no
traceback and no worker left; the index is left consistent and the next run carries on.

The exit time is recorded by the hostile suite (``python -m stress --only hostile``); here the
only time limit is a hang guard."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from stress.hostile_interrupt import cold, index_is_sound, make_corpus, moments, stop

pytestmark = [pytest.mark.process, pytest.mark.slow]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("interrupt")
    config, c3home, projects = make_corpus(root / "c", 320)  # over 64 MiB a project: the accountant forks
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "C3_"))}
    env.update(
        CLAUDE_CONFIG_DIR=str(config),
        C3_HOME=str(c3home),
        PYTHONPATH=str(__import__("pathlib").Path(__file__).resolve().parents[1]),
    )
    return env, c3home, projects


@pytest.mark.parametrize("how", ["ctrl-c", "ctrl-c twice", "SIGINT", "SIGTERM"])
@pytest.mark.parametrize("command", ["sessions", "stats", "index", "search"])
def test_a_signal_ends_the_command_and_its_workers(corpus, command, how):
    env, c3home, projects = corpus
    args = {
        "sessions": ["sessions", "--project", projects[0]],
        "stats": ["stats", "--project", projects[0]],
        "index": ["index"],
        "search": ["search", "retry", "--all"],
    }[command]
    seen_workers = 0
    # Three moments of its run, and the moment its workers first run (a fast machine's worker
    # phase is tens of ms: only that stop is sure to land in it), or its start-up is over.
    delays = moments(args, env, c3home, projects, [0.4, 0.6, 0.8])
    for delay, at_workers in [(d, False) for d in delays] + [(0.0, command != "search")]:
        cold(c3home, projects)
        s = stop(args, env, delay, how, workers=at_workers)
        assert s.seconds is not None, f"{command} still running after a {how}"
        assert not s.traceback, s.output.decode("utf-8", "replace")
        assert not s.left, f"workers left running: {s.left}"
        code = os.waitstatus_to_exitcode(s.status)
        assert code in (0, 130, 143), (code, s.output[-300:])  # 0: it had finished first
        seen_workers += s.workers
    assert command == "search" or seen_workers  # some run was stopped while its workers ran


def test_an_interrupted_index_carries_on_and_stays_consistent(corpus):
    env, c3home, projects = corpus
    delays = moments(["index"], env, c3home, projects, [0.3, 0.5, 0.7])
    cold(c3home, projects)
    for delay in delays:  # each run carries on from what the one before committed
        stop(["index"], env, delay, "ctrl-c twice")
    assert index_is_sound(env, c3home) is None
    proc = subprocess.run(
        [sys.executable, "-m", "c3async", "search", "retry", "--all", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and json.loads(proc.stdout)["results"], proc.stderr


def test_a_signal_during_an_import_still_ends_the_command_quietly():
    """SIGTERM (``stop.Stopped``) raised inside a class body's ``__set_name__`` while a module is
    imported reaches the CLI as "RuntimeError: Error calling __set_name__", caused by it (Python
    3.11; 3.12 raises it as it is): still the signal's exit status, not a traceback."""
    import signal

    from c3async.ground import stop

    class Hook:
        def __set_name__(self, owner, name):
            raise stop.Stopped()

    try:
        type("Made", (), {"field": Hook()})
    except BaseException as exc:
        caught = exc
    assert isinstance(caught, RuntimeError if sys.version_info < (3, 12) else stop.Stopped), repr(caught)
    assert stop.code_of(caught) == 128 + signal.SIGTERM
    wrapped = RuntimeError("Error calling __set_name__")  # what 3.11 raises, on any version
    wrapped.__cause__ = stop.Stopped()
    assert stop.code_of(wrapped) == 128 + signal.SIGTERM
    assert stop.code_of(RuntimeError("something else")) is None


SWALLOWED = r"""
import os, signal, sys, time, weakref
from c3async.ground import stop
stop.install()
class Held: pass
def callback(ref):  # Python prints and drops what a weakref callback raises
    os.kill(os.getpid(), getattr(signal, sys.argv[1]))
    for _ in range(100_000): pass
held = Held(); ref = weakref.ref(held, callback)
try:
    del held
    time.sleep(5)
    print("ran on")
except (KeyboardInterrupt, stop.Stopped) as exc:
    print("stopped where it was:", type(exc).__name__)
"""


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_that_lands_in_a_weakref_callback_still_stops_the_command_quietly(corpus, sig):
    env = corpus[0]
    done = subprocess.run([sys.executable, "-c", SWALLOWED, sig], env=env, capture_output=True, text=True, timeout=30)
    want = "KeyboardInterrupt" if sig == "SIGINT" else "Stopped"
    assert done.stdout == f"stopped where it was: {want}\n" and done.stderr == "", (done.stdout, done.stderr)


# A signal at the n-th import once c3async's own start-up has begun (c3async/__main__.py is on
# the stack): the import machinery asks every finder on sys.meta_path, so this one sees every
# import boundary of the command's start-up, deterministically, whatever the machine's speed.
AT_IMPORT = r"""
import os, runpy, signal, sys
n, sig, marker = int(sys.argv[1]), getattr(signal, sys.argv[2]), sys.argv[3]
seen = 0

class Kick:
    def find_spec(self, name, path=None, target=None):
        global seen
        frame = sys._getframe(1)
        while frame is not None and not frame.f_code.co_filename.endswith(os.path.join("c3async", "__main__.py")):
            frame = frame.f_back
        if frame is not None:
            seen += 1
            if seen == n:
                open(marker, "w").write(name)
                os.kill(os.getpid(), sig)
        return None

sys.meta_path.insert(0, Kick())
sys.argv = ["c3async", *sys.argv[4:]]
runpy.run_module("c3async", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_at_any_import_of_the_start_up_ends_the_command_quietly(tmp_path, sig):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "C3_"))}
    env.update(
        CLAUDE_CONFIG_DIR=str(tmp_path / "config"),
        C3_HOME=str(tmp_path / "home"),
        PYTHONPATH=str(__import__("pathlib").Path(__file__).resolve().parents[1]),
    )
    project = tmp_path / "app"
    project.mkdir()
    marker = tmp_path / "kicked"
    hit, n = [], 1
    while True:  # every 5th import boundary, from the first, until the command runs out of them
        marker.unlink(missing_ok=True)
        done = subprocess.run(
            [sys.executable, "-c", AT_IMPORT, str(n), sig, str(marker), "sessions", "--project", str(project)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if not marker.exists():
            break
        hit.append(marker.read_text())
        assert "Traceback" not in done.stderr and done.returncode == 128 + getattr(signal, sig), (
            f"a {sig} at import {n} ({hit[-1]}): exit {done.returncode}\n{done.stderr[-2000:]}"
        )
        n += 5
    assert len(hit) > 20, hit  # the command's start-up was really walked (the CLI imports that many)
