"""The Hub's Usage page (``GET /api/usage``) fed what no writer of ours writes, through a real
``c3async hub``:

- a project named with markup, usage lines with absurd token counts (10**18, -1, 1e300, a
  string) and times from the year 3000, a rate-limit log of garbage (a NUL run, a percent of
  1e308, a reset in the year 3000, a window name of 10 KB) beside one good sample;
- hostile parameters: ``by`` a path, ``since`` backwards (d7), negative, 10**30 days, the
  year 10000, a NUL, 41 characters;
- then the project's timeline swapped for garbage, for a symlink to a private file, and the
  rate-limit log for a FIFO (no writer: a read would block).

Invariants: every answer 200 or a 400 that says why (never a 500, a traceback or a hang); no
count out of range and no bucket from the future; the private file never shown; the good
sample still gives the 5-hour window its percent.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

from .harness import Result
from .hostile_usage import HOUR, SECRET, _rows_in_range, _usage_line
from .probe import probe as _probe

CLASS = "the Hub's Usage page fed hostile input"
MARKUP = "<img src=x onerror=alert(1)>"  # a directory name: no slash


def check(res: Result, sb, quick: bool) -> None:
    from .hostile_neighbour import start_hub

    p = _probe(res, sb, "usage-page")
    app, odd = p.project("app"), p.project(MARKUP)
    now = time.time() - HOUR
    p.session(app, "count my tokens", lines=[
        _usage_line(str(uuid.uuid4()), app, now, output_tokens=10**18),
        _usage_line(str(uuid.uuid4()), app, now, input_tokens=-1),
        _usage_line(str(uuid.uuid4()), app, now, input_tokens=1e300),
        _usage_line(str(uuid.uuid4()), app, now, input_tokens="many"),
        {**_usage_line(str(uuid.uuid4()), app, now), "timestamp": "3000-01-01T00:00:00.000Z"},
    ])  # fmt: skip
    p.session(odd, "a name with markup", lines=[_usage_line(str(uuid.uuid4()), odd, now, output_tokens=5)])
    limits = p.home / "usage" / "rate_limits.jsonl"
    limits.parent.mkdir(parents=True)
    t = time.time()
    lines = [
        b"\x00" * 4096,
        json.dumps({"t": t, "window": "five_hour", "used": 1e308, "resets_at": t + HOUR}).encode(),
        json.dumps({"t": t, "window": "five_hour", "used": 5, "resets_at": 32503680000}).encode(),
        json.dumps({"t": t, "window": "x" * 10_000, "used": 5, "resets_at": t + HOUR}).encode(),
        json.dumps({"t": t, "window": "five_hour", "used": 42, "resets_at": t + 2 * HOUR}).encode(),
    ]
    limits.write_bytes(b"\n".join(lines) + b"\n")
    for project in (app, odd):
        p.run(f"usage --project {project}", "usage", "--project", project)  # registers and accounts it
    private = p.root / "private.txt"
    private.write_text(SECRET)
    private.chmod(0o600)

    hub, port, token = start_hub(p.env)
    try:

        def get(params: dict[str, str]) -> tuple[int | str, dict]:
            url = f"http://127.0.0.1:{port}/api/usage?{urllib.parse.urlencode(params)}"
            req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
            try:
                with urllib.request.urlopen(req, timeout=60) as r:
                    return r.status, json.loads(r.read())
            except urllib.error.HTTPError as exc:
                return exc.code, json.loads(exc.read() or b"{}")
            except OSError as exc:  # a hang (the time-out) or a dropped connection
                return type(exc).__name__, {}

        def pages(stage: str, every: bool = True) -> dict:
            seen: dict = {}
            for by in ("day", "window"):
                for since in ("", "7d", "today", "2000-01-01") if every else ("",):
                    status, data = get({"by": by, **({"since": since} if since else {})})
                    what = f"{stage}: by={by} since={since or '(default)'}"
                    res.check(status == 200, "the page answers", f"{what}: {status} {data}")
                    rows = [part for b in data.get("buckets", []) for part in b["parts"]] + data.get("buckets", [])
                    _rows_in_range(res, what, rows)
                    res.check(SECRET not in json.dumps(data), "a link is never followed", what)
                    seen = data or seen
            return seen

        data = pages("hostile usage and samples")
        five = next((w for w in data.get("windows", []) if w["window"] == "five_hour"), {})
        res.check(five.get("used") == 42, "the good sample still gives the window its percent", repr(five)[:300])
        res.check(MARKUP in {x["name"] for x in data.get("projects", [])}, "a name with markup is data, as it is",
                  repr(data.get("projects"))[:300])  # fmt: skip
        bad = [{"by": "../../etc/passwd"}, {"by": "week"}, {"since": "d7"}, {"since": "-5d"},
               {"since": "9" * 30 + "d"}, {"since": "10000-01-01"}, {"since": "7d\x00"}, {"since": "x" * 41}]  # fmt: skip
        for params in bad:
            status, body = get(params)
            res.check(status == 400 and bool(body.get("error")), "a bad parameter is a 400 that says why",
                      f"{params!r}: {status} {body}")  # fmt: skip
        timeline = os.path.join(app, ".c3", "cache", "usage_timeline.msgpack")
        with open(timeline, "wb") as f:
            f.write(b"\xc1" * 1000)  # not msgpack
        pages("a damaged timeline", every=not quick)
        os.unlink(timeline)
        os.symlink(private, timeline)
        limits.unlink()
        os.mkfifo(limits)
        pages("a linked timeline, a FIFO for the samples", every=not quick)
        res.check(private.read_text() == SECRET, "a link is never followed", "the private file was written")
    finally:
        hub.terminate()
        hub.wait(10)
        if hub.stderr is not None:
            hub.stderr.close()
    res.fig("probes", f"{p.runs} commands, 1 Hub")
