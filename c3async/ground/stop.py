"""Ctrl-C and SIGTERM for a command: ended within a second, with no traceback and nothing half
made. Installed before anything else is imported (``c3async.__main__``), so there is no moment
of a command's life when a keystroke prints a traceback.

The first signal interrupts the command where it is (Ctrl-C as KeyboardInterrupt, SIGTERM as
``Stopped``), so its cleanup runs: worker processes are killed, temporary files removed, locks
released. If that takes longer than ``BUDGET_S``, or a second signal comes, the process ends at
once. Nothing c3async writes can be half-written either way: every document is replaced whole,
every log line is one ``write()``, and SQLite rolls back what it did not commit.

Ground floor: imports nothing from the package.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ("BUDGET_S", "Stopped", "code_of", "exit_now", "install", "installed", "signalled", "uninstall")

BUDGET_S = 0.8  # cleanup after the first signal may take this long before the process just ends


class Stopped(BaseException):
    """SIGTERM, raised where the process is, so its cleanup runs as Ctrl-C's does."""


_stopping = False


def exit_now(code: int) -> None:
    """End the process now: what was printed is flushed, nothing else is waited for (a worker,
    a thread, an exit handler)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


_again = False  # a swallowed signal is being delivered again: the budget already runs


def _on_signal(signum: int, frame: object) -> None:
    global _stopping, _again, _signalled
    code = 128 + signum
    _signalled = _signalled or code
    if _stopping and not _again:
        exit_now(code)
    if not _stopping:
        _stopping = True
        # What the interruption leaves behind in an event loop (a task that ended with it) is
        # not worth a traceback on the terminal of someone who pressed Ctrl-C. (logging is not
        # imported up front: a command's start-up stays short, and without it there is no loop.)
        try:
            sys.modules["logging"].getLogger("asyncio").disabled = True
        except Exception:  # not imported, or half-imported when the signal came: nothing logs yet
            pass
        if hasattr(signal, "setitimer"):
            signal.signal(signal.SIGALRM, lambda *_: exit_now(code))
            signal.setitimer(signal.ITIMER_REAL, BUDGET_S)
    _again = False
    raise KeyboardInterrupt if signum == signal.SIGINT else Stopped()


_signalled: int | None = None


def signalled() -> int | None:
    """The exit status of the signal that is ending this command, if one came (else None): an
    error raised after it is its consequence, not the command's news."""
    return _signalled


def code_of(exc: BaseException) -> int | None:
    """The exit status of a command that ``exc`` ended, when it is a signal's (Ctrl-C: 130,
    SIGTERM: 143), also inside an exception group (a task group that was running); else None."""
    if isinstance(exc, KeyboardInterrupt):
        return 130
    if isinstance(exc, Stopped):
        return 128 + signal.SIGTERM
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            code = code_of(inner)
            if code is not None:
                return code
    # a signal that came while Python ran a hook of its own wraps in another exception (during an
    # import, a class body's ``__set_name__`` turns it into "RuntimeError: Error calling
    # __set_name__", caused by it)
    if isinstance(exc, RuntimeError) and exc.__cause__ is not None and exc.__cause__ is not exc:
        return code_of(exc.__cause__)
    return None


_previous_hook = sys.__unraisablehook__


def _swallowed(unraisable: sys.UnraisableHookArgs) -> None:
    """A signal that landed in a weakref callback or a ``__del__`` is swallowed there ("Exception
    ignored in ..."), and the command would run on: deliver it again, quietly, so it is raised
    where the command is (the budget's alarm still ends the process if it keeps landing there).
    Once stopping, any other error said there is the interruption's consequence (a ``__del__`` of
    an object the signal left half-built) and is not said."""
    global _again
    try:
        exc = unraisable.exc_value
        if isinstance(exc, KeyboardInterrupt | Stopped) and _stopping:
            import threading

            _again = True  # the budget's alarm set by the first delivery keeps running
            signum = signal.SIGINT if isinstance(exc, KeyboardInterrupt) else signal.SIGTERM
            # From another thread, a moment later: sent from here, it would be raised in this hook.
            again = threading.Timer(0.002, os.kill, (os.getpid(), signum))
            again.daemon = True  # never holds up the exit of a command that ended meanwhile
            again.start()
            return
        if _stopping:  # the __del__ of what the signal left half-built (an event loop): its doing
            return
        _previous_hook(unraisable)
    except BaseException:  # a signal landing in this hook itself: the alarm ends the process
        pass


def install() -> None:
    global _previous_hook
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _on_signal)
    if sys.unraisablehook is not _swallowed:
        _previous_hook = sys.unraisablehook
        sys.unraisablehook = _swallowed


def uninstall() -> None:
    """For a command that handles its signals itself (the server, the Hub)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextmanager
def installed() -> Iterator[None]:
    """``install`` for one command run in a process that goes on after it (the CLI's ``main``
    in process): the handlers, the unraisable hook and what a signal left are put back after.
    Outside the main thread, where no handler can be set, nothing is installed."""
    global _stopping, _again, _signalled
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = [signal.SIGINT, signal.SIGTERM] + ([signal.SIGALRM] if hasattr(signal, "setitimer") else [])
    handlers = {sig: signal.getsignal(sig) for sig in sigs}
    hook = sys.unraisablehook
    install()
    try:
        yield
    finally:
        if _stopping and hasattr(signal, "setitimer"):
            signal.setitimer(signal.ITIMER_REAL, 0)  # the budget's alarm: the command is over
        for sig, handler in handlers.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        sys.unraisablehook = hook
        _stopping = _again = False
        _signalled = None
