"""Forked worker processes for the big first passes (the cold catalog scan, the first token
accounting): finding markers in bytes holds the GIL, so threads keep to one core (measured: 8
threads were no faster than 1), while forked processes do not.

A pool is forked only from the only thread of a process (forking a process that runs threads is
unsafe: a lock another thread holds stays held in the child) and where fork exists. Each worker
leaves Ctrl-C to its parent, and exits when the parent dies (SIGKILL, SIGTERM) rather than wait
forever on a queue whose other end it holds itself.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor

__all__ = ("can_fork", "process_pool")

log = logging.getLogger("c3async")


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


def _init(parent: int) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.25)
        os._exit(1)

    threading.Thread(target=watch, name="c3async-parent-watch", daemon=True).start()


def process_pool(most: int) -> tuple[ProcessPoolExecutor | None, int]:
    """A pool of up to ``most`` forked workers, started now, and its size; (None, 0) where
    ``can_fork`` says none or no process can be had (limits, memory: the caller reads in-process)."""
    import multiprocessing

    n = can_fork(most)
    if not n:
        return None, 0
    try:
        pool = ProcessPoolExecutor(
            n, mp_context=multiprocessing.get_context("fork"), initializer=_init, initargs=(os.getpid(),)
        )
        pool.submit(int).result()  # with fork, every worker starts at the first submit
    except Exception as exc:
        log.warning("cannot start worker processes (%s); reading in this process", exc)
        return None, 0
    return pool, n
