"""The ``/usage`` snapshot the status line reads in ``.claude.json``, under attack: a 40 MB file
whose snapshot lies past the part searched, a key whose value is nested 100,000 deep, 100 KB
of spaces before its colon, a snapshot longer than is read, a file cut inside it, bytes that
are not UTF-8, absurd numbers (1e308, a reset in the year 3000, a negative fetch time), a key
inside strings, and a ``.claude.json`` that is a FIFO, a link to ``/dev/zero`` or a folder.
The command ``install-statusline`` writes is run as Claude Code runs it: the line always comes,
one short line, the good windows shown and the bad ones never; nothing is recorded from a bad
snapshot; no file is left beside ours.
"""

from __future__ import annotations

import json
import os
import time

from .harness import Result
from .probe import probe as _probe
from .probe import tree

CLASS = "the /usage snapshot in .claude.json"


def _snapshot(used: object, resets: str, fetched_ms: object) -> bytes:
    body = {"fetchedAtMs": fetched_ms, "utilization": {"seven_day_opus": {"utilization": used, "resets_at": resets}}}
    return json.dumps({"cachedUsageUtilization": body}, indent=2).encode()[1:-1]


def check(res: Result, sb, quick: bool) -> None:
    from c3async.usage.ratelimits import MAX_SNAPSHOT, SNAPSHOT_BYTES

    p = _probe(res, sb, "snapshot")
    app = p.project("app")
    now = time.time()
    reset = int(now) + 3600
    week = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + 3 * 86_400))
    data = json.dumps({"cwd": app, "rate_limits": {"five_hour": {"used_percentage": 42, "resets_at": reset}}})
    p.config.mkdir(parents=True, exist_ok=True)
    target = p.config / ".claude.json"
    log = p.home / "usage" / "rate_limits.jsonl"
    took: list[float] = []

    def line(what: str) -> str:
        out = p.statusline(what, data, app, took)
        res.check("5h 42%" in out, "the window Claude Code reports shown", f"{what}: {out!r}")
        return out

    def opus() -> list[float]:
        rows = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
        return [r["used"] for r in rows if r["window"] == "seven_day_opus"]

    def clear() -> None:
        if target.is_dir() and not target.is_symlink():
            target.rmdir()
        elif target.is_symlink() or target.exists():
            target.unlink()

    def write(body: bytes) -> None:
        clear()
        target.write_bytes(body)

    good = _snapshot(31, week, (now - 60) * 1000)
    write(b'{\n  "projects": {},' + good + b"}\n")
    out = line("a good snapshot")
    res.check("7d opus" not in out and opus() == [31.0], "a good snapshot recorded", f"{out!r} {opus()}")
    before = tree(p.home)
    other = _snapshot(71, week, (now - 30) * 1000)  # good in itself: its place is what is wrong

    bad = [
        ("nested 100,000 deep", b'{"cachedUsageUtilization": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
        ("100 KB of spaces before its colon", b'{"cachedUsageUtilization"' + b" " * 100_000 + b": {}}"),
        ("longer than is read", b"{" + other.rstrip()[:-1] + b', "pad": "' + b"y" * SNAPSHOT_BYTES + b'"}}'),
        ("a file cut inside it", b"{" + good[: len(good) // 2]),
        ("bytes that are not UTF-8", b"{" + other.replace(b"utilization", b"util\xff\xfezation") + b"}"),
        ("a percent of 1e308", b"{" + _snapshot(1e308, week, (now - 60) * 1000) + b"}"),
        ("a reset in the year 3000", b"{" + _snapshot(62, "3000-01-01T00:00:00Z", (now - 60) * 1000) + b"}"),
        ("a negative fetch time", b"{" + _snapshot(63, week, -1e15) + b"}"),
        ("the key inside strings", b'{"a": "\\"cachedUsageUtilization\\": {}", "b\\"cachedUsageUtilization": 1}'),
    ]
    if not quick:
        bad.insert(
            0,
            (
                "a 40 MB file, its snapshot past the part searched",
                b'{"p": "' + b" " * MAX_SNAPSHOT + b'",' + other + b"}",
            ),
        )
    for what, body in bad:
        write(body)
        out = line(f"a .claude.json of {what}")
        res.check(opus() == [31.0], "nothing recorded from a bad snapshot", f"{what}: {opus()}")
    for what, make in (
        ("a FIFO", lambda: os.mkfifo(target)),
        ("a link to /dev/zero", lambda: target.symlink_to("/dev/zero")),
        ("a folder", lambda: target.mkdir()),
    ):
        clear()
        make()
        line(f"a .claude.json that is {what}")
    res.check(tree(p.home) == before, "no file left beside ours", repr(tree(p.home) ^ before))
    res.fig(
        "installed command, median over the bad snapshots",
        f"{sorted(took)[len(took) // 2] * 1e3:.0f} ms over {len(took)} runs",
    )
    res.fig("probes", f"{p.runs} commands")
