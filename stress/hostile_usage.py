"""Usage over time fed what no writer of ours writes, through ``c3async usage`` (every ``--by``,
with and without ``--since``) and a real ``c3async serve``'s ``c3_status(view='usage')``:

- ``$C3_HOME/usage/rate_limits.jsonl`` corrupt: garbage, a NUL run, a percent of 1e308 and -5, a
  reset in the year 3000 and before its sample, a window name of 10 KB, a line of 4 MiB; then
  the same file as a FIFO (no writer: a read would block) and as a symlink to a private file;
- usage lines with absurd token counts (10**18, -1, 1e300, a string) and times from the year
  3000 and 99999;
- a 2 GB sparse transcript (a hole of zeros between a real head and tail);
- the usage timeline cache swapped for a symlink to a private file.

Invariants: no traceback, no hang, exit 0; no bucket from the future and no count out of range
in any report; the corrupt samples said, in one line; a link never followed (the private file
is neither read into a report nor written); the sparse transcript's usage counted.
"""

from __future__ import annotations

import json
import os
import time
import uuid

from .harness import Result
from .probe import mcp as _mcp
from .probe import probe as _probe
from .transcripts import assistant_line, claude_slug, encode

CLASS = "usage over time fed hostile input"
HOUR = 3600.0
SECRET = "private-text-never-shown"


def _usage_line(sid: str, project: str, ts: float, **usage: object) -> dict:
    line = assistant_line(sid, project, "counted", ts)
    line["message"]["usage"] = {"input_tokens": 3, "output_tokens": 28, **usage}
    return line


def check(res: Result, sb, quick: bool) -> None:
    p = _probe(res, sb, "usage")
    project = p.project("app")
    folder = p.config / "projects" / claude_slug(project)
    now = time.time() - HOUR
    p.session(
        project,
        "count my tokens",
        lines=[
            _usage_line(str(uuid.uuid4()), project, now, output_tokens=10**18),
            _usage_line(str(uuid.uuid4()), project, now, input_tokens=-1),
            _usage_line(str(uuid.uuid4()), project, now, input_tokens=1e300),
            _usage_line(str(uuid.uuid4()), project, now, input_tokens="many"),
            {**_usage_line(str(uuid.uuid4()), project, now), "timestamp": "3000-01-01T00:00:00.000Z"},
            {**_usage_line(str(uuid.uuid4()), project, now), "timestamp": "99999-01-01T00:00:00.000Z"},
        ],
    )
    # A 2 GB sparse transcript: a real head, a hole, a real tail with usage
    giant = str(uuid.uuid4())
    head = b"".join(encode(_usage_line(giant, project, now - 600, output_tokens=7)) + b"\n" for _ in range(3))
    with open(folder / f"{giant}.jsonl", "wb") as f:
        f.write(head)
        f.truncate(2 << 30)
        f.seek(0, os.SEEK_END)
        f.write(b"\n" + encode(_usage_line(giant, project, now - 300, output_tokens=11)) + b"\n")
    limits = p.home / "usage" / "rate_limits.jsonl"
    limits.parent.mkdir(parents=True)
    t = time.time()
    bad = [
        b"garbage\n",
        b"\x00" * 4096 + b"\n",
        json.dumps({"t": t, "window": "five_hour", "used": 1e308, "resets_at": t + HOUR}).encode() + b"\n",
        json.dumps({"t": t, "window": "five_hour", "used": -5, "resets_at": t + HOUR}).encode() + b"\n",
        json.dumps({"t": t, "window": "five_hour", "used": 5, "resets_at": 32503680000}).encode() + b"\n",
        json.dumps({"t": t, "window": "five_hour", "used": 5, "resets_at": t - 86400}).encode() + b"\n",
        json.dumps({"t": t, "window": "x" * 10_000, "used": 5, "resets_at": t + HOUR}).encode() + b"\n",
        b'{"t": ' + b"9" * (4 << 20) + b"}\n",
        json.dumps({"t": t, "window": "five_hour", "used": 42, "resets_at": t + 2 * HOUR}).encode() + b"\n",
    ]
    limits.write_bytes(b"".join(bad))
    private = p.root / "private.txt"
    private.write_text(SECRET)
    private.chmod(0o600)

    def reports(stage: str, every: bool = True) -> None:
        for by in ("day", "week", "month", "window", "model", "project", "session") if every else ("day", "window"):
            for since in ((), ("--since", "7d")) if every else ((),):
                proc = p.run(f"{stage}: usage --by {by} {' '.join(since)}", "usage", "--by", by, *since,
                             "--project", project, "--json")  # fmt: skip
                try:
                    rows = json.loads(proc.stdout or "[]")
                except ValueError:
                    res.check(False, "--json prints JSON", f"{stage} {by}: {proc.stdout[:200]!r}")
                    continue
                _rows_in_range(res, f"{stage} {by}", rows)
                res.check(SECRET not in proc.stdout + proc.stderr, "a link is never followed", f"{stage} {by}")

    reports("corrupt rate limits")
    told = p.run("usage --by window, said once", "usage", "--by", "window", "--project", project)
    res.check(told.stderr.count("not rate-limit samples") == 1, "the corrupt samples said, in one line",
              repr(told.stderr[-400:]))  # fmt: skip
    res.check("reported" in told.stdout, "the good sample still draws its window", told.stdout[-400:])
    counted = json.loads(p.run("usage by session", "usage", "--by", "session", "--project", project, "--json").stdout)
    res.check(any(r["id"] == giant and r["output"] == 7 * 3 + 11 for r in counted),
              "the sparse transcript's usage counted", repr([(r["id"], r["output"]) for r in counted]))  # fmt: skip
    res.fig("sessions counted", len(counted))

    limits.unlink()
    os.mkfifo(limits)
    reports("rate limits a FIFO", every=not quick)
    limits.unlink()
    limits.symlink_to(private)
    cache = p.project("app") + "/.c3/cache/usage_timeline.msgpack"
    os.unlink(cache)
    os.symlink(private, cache)
    reports("links", every=not quick)
    res.check(private.read_text() == SECRET, "a link is never followed", "the private file was written")

    for is_error, text in _mcp(p, project, [("c3_status", {"view": "usage"})] * 2):
        res.check(not is_error and "5-hour window" in text, "c3_status(view='usage') answers", text[:300])
        res.check(SECRET not in text and "3000" not in text and "99999" not in text,
                  "no bucket from the future, nothing private", text[:300])  # fmt: skip


def _rows_in_range(res: Result, what: str, rows: list[dict]) -> None:
    latest = time.strftime("%Y-%m-%d", time.localtime(time.time() + 366 * 86400))
    for r in rows:
        for key in ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read", "responses"):
            value = r.get(key, 0)
            res.check(isinstance(value, int) and 0 <= value < 10**15, "every count in range",
                      f"{what}: {key} {value!r}")  # fmt: skip
        res.check(r.get("cost_usd", 0) >= 0, "costs never negative", f"{what}: {r.get('cost_usd')!r}")
        for key in ("start", "end", "first_ts", "last_ts", "bucket"):
            value = r.get(key)
            if isinstance(value, str) and value[:2].isdigit() and value[4:5] == "-":
                res.check(value[:10] <= latest, "no bucket from the future", f"{what}: {key} {value!r}")
