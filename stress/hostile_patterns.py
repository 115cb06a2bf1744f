"""Linear time on any text: every regular expression in ``c3async`` and every function that
applies one to transcript or state text, fed pathological inputs (long blank runs, unclosed
tags, many unclosed tags, long runs of one character, deep nesting), at two sizes.

``AUDIT`` names each module-level pattern with the one way the code applies it (``match`` and
``fullmatch`` start at one place; ``search``, ``sub``, ``split`` and ``finditer`` try every
start): a pattern is timed the way it is used. A pattern found in the package that ``AUDIT``
does not name is a break, so a new one cannot skip the audit. Patterns made at run time (the
search box's hit marker, git's config comment) are reached through ``ENTRY_POINTS``.

The measuring runs in a child process (``python -m stress.hostile_patterns``) with a time limit,
printing one JSON line per measurement as it goes, so a pattern that runs away is killed and
named (the line it started is the last one printed). Linear means: the time per MiB at the
large size is within a few times the time per MiB at the small one. Figures: the slowest
pattern per MiB, and the worst growth from the small size to the large.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from .harness import PY, REPO, Result, Sandbox, c3async_cmd
from .transcripts import assistant_line, claude_slug, render, tool_result_line, user_line

CLASS = "linear time"

# How the code applies each module-level pattern. (docs/design.md's design notes say why each is
# linear; this table is what makes the claim checked.)
AUDIT: dict[str, str] = {
    "c3async.catalog.conversation._AGENT": "fullmatch",
    "c3async.catalog.conversation._AGENT_ID": "fullmatch",
    "c3async.catalog.conversation._WS": "sub",
    "c3async.catalog.extract._IMAGE_REF": "fullmatch",
    "c3async.catalog.extract._STRING_BODY": "match",
    "c3async.catalog.extract._TAG_START": "match",
    "c3async.catalog.extract._UUID": "fullmatch",
    "c3async.catalog.extract._WS": "sub",
    "c3async.catalog.gitrefs._CONTROL": "search",
    "c3async.catalog.gitroot._SHA": "fullmatch",
    "c3async.catalog.listing._SESSION_FILE": "fullmatch",
    "c3async.catalog.listing._SESSION_ID": "fullmatch",
    "c3async.catalog.locate._HASH_SUFFIX": "fullmatch",
    "c3async.catalog.locate._NON_ALNUM": "sub",
    "c3async.catalog.locate._WINDOWS_ABS": "match",
    "c3async.catalog.relink._NON_ALNUM": "sub",
    "c3async.catalog.resolve._PREFIX": "fullmatch",
    "c3async.ground.disk._TEMP_TAIL": "fullmatch",
    "c3async.ground.jsonl._BLANK_LINE": "search",
    "c3async.ground.paths._COMMENT": "split",
    "c3async.ground.paths._NON_ALNUM": "sub",
    "c3async.ground.paths._WINDOWS_ABS": "match",
    "c3async.ground.safefs.TEMP_NAME": "fullmatch",
    "c3async.ground.stateroot._ID": "fullmatch",
    "c3async.ground.term._BAD": "search",
    "c3async.ground.term._BAD_RUN": "sub",
    "c3async.ground.term._JSON_BAD": "sub",
    "c3async.hub.app._HOST": "match",
    "c3async.hub.app._OLD_COOKIE": "fullmatch",
    "c3async.hub.server._OURS": "match",
    "c3async.live.reader.HEARTBEAT_NAME": "fullmatch",
    "c3async.live.reader._OWN_SIDE_NAME": "fullmatch",
    "c3async.live.registry_file.NAME": "fullmatch",
    "c3async.live.registry_file.UUID": "fullmatch",
    "c3async.live.waslive._UUID": "fullmatch",
    "c3async.search.find._MARKS": "sub",
    "c3async.search.find._WS": "sub",
    "c3async.search.query._LEX": "finditer",
    "c3async.search.query._TOKEN": "findall",
    "c3async.sessions.brief._CONTINUED": "match",
    "c3async.sessions.completion._ID": "fullmatch",
    "c3async.sessions.export_md._TICKS": "finditer",
    "c3async.sessions.search._AGO": "fullmatch",
    "c3async.sessions.statusline._UUID": "fullmatch",
    "c3async.stores.marks.TAG": "fullmatch",
    "c3async.tasks.schema._TASK_REF": "fullmatch",
    "c3async.tasks.store.DATE": "fullmatch",
    "c3async.usage.prices._DATE": "fullmatch",
    "c3async.usage.prices._ID_CHARS": "fullmatch",
    "c3async.usage.ratelimits._WINDOW": "fullmatch",
}

# Pathological text of about ``n`` characters, by family.
FAMILIES: dict[str, Callable[[int], str]] = {
    "blank run": lambda n: " " * n + "x",
    "newline run": lambda n: "\n" * n + "x",
    "mixed blank run": lambda n: " \t\r\n" * (n // 4) + "x",
    "unclosed tag, blanks": lambda n: "<command-name>" + "\n" * n + "x",
    "unclosed tag, words": lambda n: "<command-name>" + "word " * (n // 5),
    "many unclosed tags": lambda n: "<command-name> " * (n // 15),
    "many unclosed args": lambda n: "<command-name>/x</command-name>" + "<command-args>a " * (n // 17),
    "unclosed bash input": lambda n: "<bash-input>" + " " * n,
    "tag then word run": lambda n: "<" + "a" * n,
    "run of <": lambda n: "<" * n,
    "run of [": lambda n: "[" * n,
    "run of ]": lambda n: "]" * n,
    "run of a": lambda n: "a" * n,
    "run of -": lambda n: "-" * n,
    "run of _": lambda n: "_" * n,
    "run of digits": lambda n: "7" * n,
    "run of backslashes": lambda n: "\\" * n,
    "run of backticks": lambda n: "`" * n,
    "backtick runs growing": lambda n: "".join("`" * k + " " for k in range(1, int((2 * n) ** 0.5))),
    "run of quotes": lambda n: '"' * n,
    "escaped quotes": lambda n: '\\"' * (n // 2),
    "run of ESC": lambda n: "\x1b" * n,
    "run of CJK": lambda n: "\u4e2d" * n,
    "run of accents": lambda n: "e\u0301" * (n // 2),
    "deep nesting {": lambda n: "{" * n,
    "deep nesting [{": lambda n: '[{"a":' * (n // 6),
    "word/space alternation": lambda n: "a " * (n // 2),
    "word/underscore alternation": lambda n: "a_" * (n // 2),
    "almost a date": lambda n: "-1234567" * (n // 8),
    "image ref, no close": lambda n: "[Image #" + "1" * n,
    "host-like": lambda n: "a" * n + ":",
    "many hits": lambda n: "retry budget " * (n // 13),
    "many plan handoffs": lambda n: "exiting plan mode, read the full transcript at: " * (n // 48),
}


def _pattern_call(pattern: re.Pattern, how: str) -> Callable[[Any], Any]:
    if how == "sub":
        return lambda text: pattern.sub("", text)
    if how == "split":
        return lambda text: pattern.split(text, maxsplit=1)
    if how in ("findall", "finditer"):
        return lambda text: sum(1 for _ in pattern.finditer(text))
    return getattr(pattern, how)


def _entry_points() -> dict[str, Callable[[Any], Any]]:
    """Functions that apply patterns (or classify) text that comes from transcripts or state."""
    from c3async.catalog import extract
    from c3async.ground import term
    from c3async.ground.errors import C3Error
    from c3async.ground.jsonl import has_blank_line
    from c3async.hub import app
    from c3async.search import find, passages, query
    from c3async.sessions import export_md
    from c3async.sessions.search import parse_when
    from c3async.usage.prices import normalise

    markers = {
        q: (query.parse(q).marker(), query.parse(q).marker(folded=True))
        for q in ("retry budget", '"a b c"', "retr*", "\u4e2d\u6587", "caf\u00e9", "a_b")
    }

    def when(text: str) -> Any:
        try:
            return parse_when(text[:100], "since")
        except C3Error:
            return None

    def lexed(text: str) -> Any:
        try:
            return query.parse(text[: query.MAX_QUERY])
        except C3Error:
            return None

    out: dict[str, Callable[[Any], Any]] = {
        "extract.classify_text": extract.classify_text,
        "extract.prompt_title": extract.prompt_title,
        "extract._cut_prompt (bytes)": lambda t: extract._cut_prompt(
            b'{"type":"user","message":{"role":"user","content":"' + t.encode("utf-8", "replace")
        ),
        "extract.scan (bytes)": lambda t: extract.scan(t.encode("utf-8", "replace"), 0, from_start=True),
        "extract.handoff_source": lambda t: extract.handoff_source(extract.PLAN_HANDOFF + t),
        "prices.normalise": normalise,
        "term.inert": term.inert,
        "term.inert_line": term.inert_line,
        "term.json_inert (bytes)": lambda t: term.json_inert(t.encode("utf-8", "replace")),
        "jsonl.has_blank_line (bytes)": lambda t: has_blank_line(t.encode("utf-8", "replace")),
        "passages.index_text": passages.index_text,
        "query.parse (its 2,000-character cap)": lexed,
        "sessions.search.parse_when": when,
        "hub.app._host_name": app._host_name,
        "export_md.escape": export_md.escape,
        "export_md.fenced": export_md.fenced,
    }
    for q, (marker, folded) in markers.items():
        out[f"find.cut (query {q!r})"] = lambda t, m=marker, f=folded: find.cut(t, m, f)
    return out


def discover() -> dict[str, re.Pattern]:
    """Every module-level compiled pattern of the package, by every name it has (``re`` hands
    out one object for one pattern string, so ``\\s+`` in three modules is one object under
    three names: each is applied its own way)."""
    import c3async

    found: dict[str, re.Pattern] = {}
    for info in pkgutil.walk_packages(c3async.__path__, "c3async."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for attr, value in vars(module).items():
            if isinstance(value, re.Pattern) and not attr.startswith("__"):
                found[f"{info.name}.{attr}"] = value
    return found


def _targets() -> tuple[dict[str, Callable[[Any], Any]], list[str]]:
    """(name -> callable over text, patterns found that the audit does not name)."""
    found = discover()
    calls: dict[str, Callable[[Any], Any]] = {}
    unaudited = []
    for name, pattern in sorted(found.items()):
        how = AUDIT.get(name)
        if how is None:
            unaudited.append(name)
            continue
        fn = _pattern_call(pattern, how)
        if isinstance(pattern.pattern, bytes):
            calls[f"{name} ({how}, bytes)"] = lambda t, fn=fn: fn(t.encode("utf-8", "replace"))
        else:
            calls[f"{name} ({how})"] = fn
    calls.update(_entry_points())
    return calls, unaudited


def worker(sizes: list[int], only: set[tuple[str, str]] | None = None, repeat: int = 2) -> None:
    """The child: one JSON line per (target, family, size), flushed before and after each; the
    fastest of ``repeat`` calls (a scheduling hiccup is not the pattern). ``only``: these
    (target, family) pairs alone."""
    calls, unaudited = _targets()
    print(json.dumps({"unaudited": unaudited, "targets": len(calls)}), flush=True)
    for family, make in FAMILIES.items():
        if only is not None and family not in {f for _, f in only}:
            continue
        texts = {n: make(n) for n in sizes}
        for name, fn in calls.items():
            if only is not None and (name, family) not in only:
                continue
            for n in sizes:
                text = texts[n]
                print(json.dumps({"start": name, "family": family, "size": len(text)}), flush=True)
                best = float("inf")
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    fn(text)
                    best = min(best, time.perf_counter() - t0)
                print(json.dumps({"name": name, "family": family, "size": len(text), "s": best}), flush=True)


SMALL, LARGE = 64 * 1024, 512 * 1024
NOISE_S = 0.02  # below this at the large size, growth is timer noise
MAX_GROWTH = 4.0  # per-MiB time at the large size over that at the small one (8x the text)
MAX_CALL_S = 5.0  # one call on 512 KiB of text; a linear pattern takes milliseconds


def _world(sb: Sandbox, name: str, sessions: int, payload: Callable[[int], str]) -> str:
    """A project of ``sessions`` transcripts (prompts, replies, tool results and a sub-agent's
    file each); ``payload(i)`` is the text of every prompt, reply and output."""
    import os
    import uuid

    project = sb.work / name
    project.mkdir(parents=True)
    folder = sb.config / "projects" / claude_slug(str(project))
    folder.mkdir(parents=True)
    base = time.time() - 86400
    for i in range(sessions):
        sid = str(uuid.uuid4())
        cwd, ts, lines, parent = str(project), base + i * 60, [], None
        for k in range(12):
            u = user_line(sid, cwd, payload(i * 100 + k), ts + k, parent)
            a = assistant_line(sid, cwd, payload(i * 100 + k + 50), ts + k, u["uuid"])
            t = tool_result_line(sid, cwd, payload(i * 100 + k + 75), ts + k, a["uuid"])
            lines += [u, a, t]
            parent = t["uuid"]
        path = folder / f"{sid}.jsonl"
        path.write_bytes(render(lines))
        sub = folder / sid / "subagents"
        sub.mkdir(parents=True)
        side = [dict(x, isSidechain=True, agentId="a1") for x in lines[:6]]
        (sub / "agent-a1.jsonl").write_bytes(render(side))
        os.utime(path, (ts + 60, ts + 60))
    return str(project)


PATHOLOGICAL = [make for name, make in FAMILIES.items() if name not in ("many hits",)]


def _listing_seconds(sb: Sandbox, project: str, runs: int) -> float:
    """The median whole-process cold listing (the catalog's cache deleted before each run)."""
    import shutil
    import statistics

    times = []
    for _ in range(runs):
        shutil.rmtree(f"{project}/.c3/cache", ignore_errors=True)
        t0 = time.perf_counter()
        out = subprocess.run(
            c3async_cmd("sessions", "--project", project, "--json"),
            env=sb.env(project),
            cwd=project,
            capture_output=True,
            timeout=600,
        )
        times.append(time.perf_counter() - t0)
        if out.returncode != 0:
            raise RuntimeError(f"c3async sessions failed: {out.stderr.decode()[-400:]}")
    return statistics.median(times)


def compare_listings(res: Result, sb: Sandbox, quick: bool) -> None:
    """A project whose transcripts hold pathological text lists as fast as an ordinary one."""
    n, size = (40, 16 * 1024) if quick else (200, 32 * 1024)
    ordinary = _world(sb, "linear-ordinary", n, lambda i: f"an ordinary line of work number {i} " * (size // 36))
    hostile = _world(sb, "linear-hostile", n, lambda i: PATHOLOGICAL[i % len(PATHOLOGICAL)](size))
    runs = 3
    a = _listing_seconds(sb, ordinary, runs)
    b = _listing_seconds(sb, hostile, runs)
    res.fig(
        "cold listing, ordinary / pathological",
        f"{a:.2f} s / {b:.2f} s  ({n} transcripts of "
        f"{36 * size // 1024} KiB of text each; median of {runs}; ratio {b / a:.2f})",
    )
    res.check(
        b <= 3 * a + 0.5,
        "a listing of pathological transcripts costs what an ordinary one does",
        f"{b:.2f} s against {a:.2f} s",
    )


def check(res: Result, sb: Sandbox, quick: bool) -> None:
    compare_listings(res, sb, quick)
    sizes = [SMALL, LARGE] if quick else [SMALL, LARGE, 4 * LARGE]
    limit = 300 if quick else 900
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [PY, "-m", "stress.hostile_patterns", *map(str, sizes)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if proc.returncode != 0:
        last = next((x for x in reversed(lines) if "start" in x), None)
        what = f"{last['start']} on {last['family']} ({last['size']:,} characters)" if last else "?"
        res.check(
            False,
            "every pattern finishes on pathological text",
            f"the measuring process ended ({proc.returncode}) during {what}: {err[-400:]}",
        )
    head = lines[0] if lines and "unaudited" in lines[0] else {"unaudited": [], "targets": 0}
    res.check(
        not head["unaudited"],
        "every regular expression in c3async is audited (stress/hostile_patterns.AUDIT)",
        ", ".join(head["unaudited"]),
    )
    done = [x for x in lines if "s" in x]
    by: dict[tuple[str, str], dict[int, float]] = {}
    for x in done:
        by.setdefault((x["name"], x["family"]), {})[x["size"]] = x["s"]
    # A pair that looks superlinear is timed again, alone and best of RETRY_REPEAT, before it
    # counts: on a loaded machine (the suite's other worker) one slow call is a neighbour's doing;
    # a pattern that backtracks is as slow every time.
    suspects = [pair for pair, times in by.items() if _growth(times) > MAX_GROWTH]
    if suspects:
        for x in _timed_again(suspects, sizes, limit):
            by[(x["name"], x["family"])][x["size"]] = x["s"]
    worst_rate = (0.0, "")
    worst_growth = (0.0, "")
    for (name, family), times in by.items():
        ns = sorted(times)
        big, small = ns[-1], ns[0]
        rate = times[big] / (big / 2**20)
        if rate > worst_rate[0]:
            worst_rate = (rate, f"{name} on {family}")
        res.check(
            times[big] <= MAX_CALL_S,
            "each pattern is fast on pathological text",
            f"{name} on {family}: {times[big]:.2f} s for {big:,} characters",
        )
        if times[big] >= NOISE_S and small != big:
            growth = rate / (times[small] / (small / 2**20) or 1e-9)
            if growth > worst_growth[0]:
                worst_growth = (growth, f"{name} on {family}")
            res.check(
                growth <= MAX_GROWTH,
                "each pattern runs in linear time",
                f"{name} on {family}: {growth:.1f}x the time per MiB at {big:,} characters as at {small:,}",
            )
    res.fig(
        "patterns / entry points timed",
        f"{head['targets']} over {len(FAMILIES)} families at "
        f"{', '.join(f'{n // 1024} KiB' for n in sizes)} ({len(done)} measurements, {time.perf_counter() - t0:.1f} s)",
    )
    res.fig("slowest time per MiB", f"{worst_rate[0] * 1e3:.1f} ms  [{worst_rate[1]}]")
    res.fig(
        "worst growth (per MiB, large/small)",
        f"{worst_growth[0]:.1f}x  [{worst_growth[1]}]" if worst_growth[1] else "none above the noise floor",
    )


RETRY_REPEAT = 5


def _growth(times: dict[int, float]) -> float:
    """Time per MiB at the largest size over that at the smallest (0 below the noise floor)."""
    ns = sorted(times)
    big, small = ns[-1], ns[0]
    if times[big] < NOISE_S or small == big:
        return 0.0
    return (times[big] / (big / 2**20)) / (times[small] / (small / 2**20) or 1e-9)


def _timed_again(pairs: list[tuple[str, str]], sizes: list[int], limit: float) -> list[dict]:
    proc = subprocess.run(
        [PY, "-m", "stress.hostile_patterns", "--again", *map(str, sizes)],
        cwd=REPO,
        input=json.dumps(pairs),
        capture_output=True,
        text=True,
        timeout=limit,
    )
    return [x for line in proc.stdout.splitlines() if line.startswith("{") and "s" in (x := json.loads(line))]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--again"]:
        again = {(name, family) for name, family in json.load(sys.stdin)}
        worker([int(a) for a in sys.argv[2:]], only=again, repeat=RETRY_REPEAT)
    else:
        worker([int(a) for a in sys.argv[1:]] or [SMALL, LARGE])
