"""Forked worker processes for the big first passes (the cold catalog scan, the first token
accounting, the first index build): finding markers in bytes holds the GIL, so threads keep to
one core (measured: 8 threads were no faster than 1), while forked processes do not.

A pool is forked only from the only thread of a process (forking a process that runs threads is
unsafe: a lock another thread holds stays held in the child) and where fork exists. Workers are
forked with SIGINT blocked, then ignore it (Ctrl-C is the parent's to handle: a worker never
prints a traceback of its own), and die with their parent: on Linux the kernel kills them when
it exits (``PR_SET_PDEATHSIG``), elsewhere a thread watches for it. ``pool`` never waits on a
worker once the pass is interrupted (Ctrl-C, SIGTERM, an error): the workers are killed at once,
so nothing is left running or waited for (a worker's half-done work is work its parent did not
take: an index shard's open transaction is rolled back by SQLite, the rest only read).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager

__all__ = ("can_fork", "pool")

log = logging.getLogger("c3async")

PR_SET_PDEATHSIG = 1


def can_fork(most: int) -> int:
    """How many worker processes (at most ``most``) a big pass may fork from here and now; 0:
    one core, no fork on this platform, or other threads running in this process."""
    import multiprocessing

    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    n = min(most, cores)
    if n < 2 or threading.active_count() > 1 or "fork" not in multiprocessing.get_all_start_methods():
        return 0
    return n


def _die_with(parent: int) -> None:
    """Make this (forked) process end when ``parent`` does."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0 and os.getppid() == parent:
                return  # (checked after: the parent may have died before the call)
        except (OSError, AttributeError):
            pass
        if os.getppid() != parent:
            os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.25)
        os._exit(1)

    threading.Thread(target=watch, name="c3async-parent-watch", daemon=True).start()


def _init(parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    _die_with(parent)


def _start(n: int) -> ProcessPoolExecutor | None:
    import multiprocessing

    # Blocked while the workers fork: a Ctrl-C in that moment must not reach a child before its
    # initializer has told it to ignore SIGINT (a worker's traceback on the terminal).
    blocked = {signal.SIGINT, signal.SIGTERM}
    masked = hasattr(signal, "pthread_sigmask")
    before = signal.pthread_sigmask(signal.SIG_BLOCK, blocked) if masked else set()
    try:
        pool = ProcessPoolExecutor(
            n, mp_context=multiprocessing.get_context("fork"), initializer=_init, initargs=(os.getpid(),)
        )
        pool.submit(int).result()  # with fork, every worker starts at the first submit
    except Exception as exc:
        log.warning("cannot start worker processes (%s); reading in this process", exc)
        return None
    finally:
        if masked:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)
    return pool


def kill(pool: ProcessPoolExecutor) -> None:
    """End the pool now: its workers killed (not waited for), its queued work dropped."""
    for proc in list(getattr(pool, "_processes", {}).values()):
        try:
            proc.kill()
        except (OSError, AttributeError, ValueError):
            pass
    try:
        pool.shutdown(wait=False, cancel_futures=True)
    except Exception:  # a pool broken by the kill: there is nothing left to shut down
        pass


@contextmanager
def pool(most: int) -> Iterator[tuple[ProcessPoolExecutor | None, int]]:
    """A pool of up to ``most`` forked workers and its size, or (None, 0) where ``can_fork``
    says none or none can be had (limits, memory: the caller reads in-process). Shut down when
    the pass ends; killed at once when it ends by an exception (Ctrl-C, SIGTERM, an error)."""
    n = can_fork(most)
    p = _start(n) if n else None
    if p is None:
        yield None, 0
        return
    try:
        yield p, n
    except BaseException:
        kill(p)
        raise
    p.shutdown(wait=True)
