"""Floor 4, a door: the ``c3async`` command, laid out as the Hub is. ``parser`` (the argparse tree:
a command line becomes the args of a command), the commands by subject: ``commands`` (sessions,
show, mark, keep, resume, live, projects), ``tasks`` (the c3_task actions), ``reports`` (stats,
search, index), ``services`` (serve, hub, the hooks, completion), each asking the sessions view
or a store and handing what it found to ``render`` (everything a terminal shows: the two streams,
inert text, JSON, tables, colour, progress); ``scope`` (the folder and projects a command is
about); ``doc`` (docs/cli.md, written from the parser). Here: :func:`main`, which runs one
command in this process, and the one place an error is said.

Errors are said in one place, ``_said`` (``c3async: error: MESSAGE`` on stderr), with the exit
status its kind has in ``EXIT``: 2 for a usage error (as argparse's own), 1 for the rest; an
OSError that is not ours is said as it is, exit 1. ``--json`` output is for scripts.

Imports happen inside each command so that ``c3async sessions`` does not pay for the MCP SDK.
May import every floor below.
"""

from __future__ import annotations

import datetime  # noqa: F401 - before msgspec, see below
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from typing import TextIO

from ..ground.errors import C3Error, Kind, TaskError
from .render import InertFormatter, Screen, safe_streams

# datetime is imported above, before any command imports msgspec: msgspec's C module imports it
# as it starts, and a Ctrl-C or SIGTERM landing in that import made the interpreter crash
# (SIGSEGV); imported here, it is an ordinary KeyboardInterrupt.

__all__ = ("EXIT", "main")

OWN_SIGNALS = ("serve", "hub")  # commands that handle SIGINT and SIGTERM themselves

_one_call_at_a_time = threading.RLock()


def main(
    argv: list[str] | None = None,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    env: Mapping[str, str] | None = None,
) -> int:
    """Run ``c3async ARGV`` in this process and return its exit status (a usage error: 2, its
    message on ``err``; Ctrl-C: 130, SIGTERM: 143). What it prints goes to ``out`` and ``err``
    (text streams; by default this process's), and it reads ``env`` as its environment (by
    default this process's).

    For the length of the call ``os.environ`` is ``env``, ``sys.stdout`` and ``sys.stderr`` are
    ``out`` and ``err`` (for what the floors below print), Ctrl-C and SIGTERM are ``stop``'s
    (in the main thread) and a root log handler writes to ``err``; each is put back after, and
    what the modules below remember is forgotten (``ground.memo``), so the next call answers as
    a fresh process would. That is the process's state: calls take a lock, one at a time, and
    ``main`` is not for concurrent use (another thread reading ``os.environ`` meanwhile reads
    the call's). The commands that are a process's own run here too, as they would in it:
    `serve` and `hub` until stopped, `hook` reads this process's stdin, `resume` without
    ``--print`` becomes ``claude`` (exec), and the shell's completion ends the process."""
    from ..ground import memo, stop

    argv = sys.argv[1:] if argv is None else list(argv)
    with _one_call_at_a_time, _environment(env), _streams(out, err) as screen, stop.installed():
        try:
            if argv[:1] in [[c] for c in OWN_SIGNALS]:
                stop.uninstall()
            return _main(argv, screen)
        except SystemExit as exc:  # argparse's usage errors and --help
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        except BaseException as exc:
            code = stop.code_of(exc)  # a Ctrl-C or SIGTERM (maybe inside a task group's exceptions)
            if code is None:
                raise
            return code
        finally:
            memo.forget()


@contextmanager
def _environment(env: Mapping[str, str] | None) -> Iterator[None]:
    if env is None:
        yield
        return
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    time.tzset()  # local time is the call's TZ (`usage`'s days), as it is a process's
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        time.tzset()


@contextmanager
def _streams(out: TextIO | None, err: TextIO | None) -> Iterator[Screen]:
    """The call's Screen; sys.stdout and sys.stderr are its streams, and so is the log's."""
    screen = Screen(out or sys.stdout, err or sys.stderr)
    safe_streams(screen.out, screen.err)
    handler = logging.StreamHandler(screen.err)
    handler.setFormatter(InertFormatter("c3async: %(message)s"))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    try:
        with redirect_stdout(screen.out), redirect_stderr(screen.err):
            yield screen
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        for stream in (screen.out, screen.err):
            try:
                stream.flush()
            except (OSError, ValueError):  # the reader left, or a closed stream
                pass


def _main(argv: list[str], screen: Screen) -> int:
    from .parser import parse

    args = parse(argv)
    try:
        return args.func(args, screen)
    except BrokenPipeError:
        # `c3async sessions | head`: the reader left; not an error worth a traceback.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), screen.out.fileno())
        except (OSError, ValueError):  # a stream with no descriptor: nothing more is written to it
            pass
        return 0
    except Exception as exc:
        from ..ground import stop

        code = stop.signalled()
        if code is not None:  # an error the interruption itself caused (a SQLite call cut short)
            return code
        if isinstance(exc, (C3Error, OSError)):
            return _said(exc, screen)
        raise


# The exit status of each kind of error (ground/errors.py): 2 for a call that cannot run as
# written, as argparse's own usage errors; 1 for every refusal of what was asked.
EXIT = {
    Kind.USAGE: 2,
    Kind.BAD_ARGUMENT: 1,
    Kind.NOT_FOUND: 1,
    Kind.AMBIGUOUS: 1,
    Kind.CONFLICT: 1,
    Kind.REFUSED: 1,
    Kind.UNAVAILABLE: 1,
    Kind.DAMAGED: 1,
    Kind.DISK_FULL: 1,
}


def _said(exc: C3Error | OSError, screen: Screen | None = None) -> int:
    """The CLI's one translation of an error: its message on stderr (a task error in the CLI's
    words), and its kind's exit status; an OSError not ours (EACCES on a file) exits 1, a full
    disk that no writer named is said as one (``disk.said``)."""
    from ..ground.disk import said
    from .tasks import TaskWords

    screen = screen or Screen(sys.stdout, sys.stderr)
    told = said(exc)
    screen.say(f"c3async: error: {told.worded(TaskWords()) if isinstance(told, TaskError) else told}")
    return EXIT[told.kind] if isinstance(told, C3Error) else 1
