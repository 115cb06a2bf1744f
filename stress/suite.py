"""The fault suite's scenarios by name, each run in a sandbox of its own: what ``python -m
stress`` runs and prints, and what ``tests/test_fault.py`` runs as tests (marker ``fault``).

  marks      marks storm: N `c3async serve` over stdio + CLI + Hub API + raw writers
  kill       kill storm: mark writers SIGKILLed mid-append, then a survivor appends
  heartbeat  heartbeat churn: servers started and stopped (cleanly and SIGKILL) under a reader
  pm         pm contention: many processes changing pm.json at once
  catalog    catalog under writes: listings while transcripts grow and marks are appended
  hostile    hostile input: trapped repositories, transcripts and documents through every door
             (CLI, hook, MCP server, Hub) with a decoy HOME checksummed before and after
  hostile:NAME  one class of hostile input, ``stress/hostile_NAME.py`` (found by itself)

A scenario is ``run(sb, quick, seed)`` returning its ``Result`` (figures and named invariant
breaks); a hostile class is ``check(res, sb, quick)``.
"""

from __future__ import annotations

import functools
import time
import traceback
from collections.abc import Callable

from . import catalog_under_writes, churn_heartbeat, contention_pm, hostile, storm_kill, storm_marks
from .harness import Result, Sandbox, check_checkout

Scenario = Callable[[Sandbox, bool, int], Result]


def _hostile_class(mod, sb: Sandbox, quick: bool, seed: int) -> Result:
    return hostile.part(mod, sb, quick)


SCENARIOS: dict[str, Scenario] = {
    "marks": storm_marks.run,
    "kill": storm_kill.run,
    "heartbeat": churn_heartbeat.run,
    "pm": contention_pm.run,
    "catalog": catalog_under_writes.run,
    "hostile": hostile.run,
    **{
        f"hostile:{mod.__name__.rsplit('.hostile_', 1)[1]}": functools.partial(_hostile_class, mod)
        for mod in hostile.class_modules()
    },
}


def select(wanted: list[str]) -> tuple[list[str], list[str]]:
    """(the scenarios ``wanted`` names, the names that match none); a name ending in ``:``
    (``hostile:``) is every scenario it begins."""
    picked, unknown = [], []
    for want in wanted:
        hits = [n for n in SCENARIOS if n == want or (want.endswith(":") and n.startswith(want))]
        picked += [n for n in hits if n not in picked]
        if not hits:
            unknown.append(want)
    return picked, unknown


def run(name: str, quick: bool, seed: int, keep: bool = False) -> Result:
    """One scenario in a sandbox of its own (kept with ``keep``: its path is in the result's
    notes); an exception is a break that names where it happened."""
    started = time.perf_counter()
    sb = Sandbox(keep=keep)
    try:
        sb.activate()
        wrong = check_checkout(sb)
        if wrong is not None:
            res = Result(name)
            res.check(False, "spawned processes run this checkout", f"they import {wrong}")
        else:
            try:
                res = SCENARIOS[name](sb, quick, seed)
            except Exception:
                res = Result(name)
                res.check(False, f"scenario {name} completes", traceback.format_exc(limit=8))
    finally:
        sb.close()
    res.wall = time.perf_counter() - started
    if keep:
        res.note(f"sandbox kept: {sb.root} (logs in {sb.logs})")
    return res
