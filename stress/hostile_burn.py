"""Live burn and runway fed what no writer of ours writes, through ``c3async usage --burn`` (text
and JSON), ``live``, the status line and ``c3_status(view='usage')``:

- ``$C3_HOME/usage/rate_limits.jsonl`` with samples that go backwards, 0 % then 100 % at the same
  moment, a reset that jumps at every sample, then a million samples (200,000 in quick mode);
- usage-limit refusals in a transcript with absurd resets (1e308, -1, the year 3000, a string,
  an integer of 400 digits, an object), a window's name of 10 KB or with escapes, params nested
  deeper than any decoder goes;
- ``runway.json`` as garbage, a megabyte, a FIFO and a symlink to a private file.

Invariants: no traceback, no hang, exit 0; every percent in 0-100 or absent, a runway's end
between now and its window's reset or absent, every rate and share finite and in range; a
refusal's reset in its window's reach or absent; nothing raw from a file on the terminal; a
link never followed.
"""

from __future__ import annotations

import json
import math
import os
import time
import uuid

from .harness import Result
from .probe import mcp as _mcp
from .probe import probe as _probe
from .transcripts import assistant_line, claude_slug, encode

CLASS = "live burn and runway fed hostile input"
HOUR = 3600.0
SECRET = "private-text-never-shown"


def _usage(sid: str, project: str, ts: float, out: int) -> dict:
    line = assistant_line(sid, project, "counted", ts)
    line["message"]["usage"] = {"input_tokens": 3, "output_tokens": out}
    return line


def _refusal(sid: str, project: str, ts: float, reset: object, window: object = "five_hour", params=None) -> dict:
    line = assistant_line(sid, project, "You've hit your 5-hour limit", ts)
    line["message"]["model"] = "<synthetic>"
    line["message"]["usage"] = {"input_tokens": 0, "output_tokens": 0}
    line.update(apiError="usage_limit_reached", error="rate_limit", isApiErrorMessage=True, apiErrorStatus=429)
    info = {"status": "rejected", "resetsAt": reset, "rateLimitType": window}
    line["apiErrorParams"] = params if params is not None else {"rate_limit_info": info}
    return line


def _samples(t0: float, n: int) -> bytes:
    """Backwards, 0 and 100 at once, resets that jump, then ``n`` ordinary-looking ones."""
    rows = []
    for i in range(12):
        t = t0 + i * 1000
        rows += [
            {"t": t, "window": "five_hour", "used": 90 - 7 * i, "resets_at": t0 + 4 * HOUR},  # backwards
            {"t": t + 1, "window": "seven_day", "used": 0 if i % 2 else 100, "resets_at": t0 + 86400},
            {"t": t + 2, "window": "seven_day_opus", "used": 50, "resets_at": t + 600 + 997 * i},  # jumping
        ]
    rows += [{"t": t + 3, "window": "seven_day", "used": 100, "resets_at": t0 + 86400}]
    head = "".join(json.dumps(r) + "\n" for r in rows).encode()
    step = 3 * HOUR / max(n, 1)
    body = "".join(
        f'{{"t":{t0 + i * step:.3f},"window":"five_hour","used":{(i * 37) % 101},"resets_at":{t0 + 4 * HOUR:.0f}}}\n'
        for i in range(n)
    ).encode()
    return head + body


def check(res: Result, sb, quick: bool) -> None:
    p = _probe(res, sb, "burn")
    project = p.project("app")
    folder = p.config / "projects" / claude_slug(project)
    now = time.time()
    sid = str(uuid.uuid4())
    p.session(
        project,
        "burn my quota",
        sid,
        lines=[
            *(_usage(sid, project, now - 3 * HOUR + i * 300, 1000 + i) for i in range(36)),
            _refusal(sid, project, now - 120, 1e308),
            _refusal(sid, project, now - 110, -1),
            _refusal(sid, project, now - 100, 32503680000),
            _refusal(sid, project, now - 90, "soon"),
            _refusal(sid, project, now - 80, {"at": 5}),
            _refusal(sid, project, now - 70, now + HOUR, "x" * 10_000),
            _refusal(sid, project, now - 60, now + HOUR, "five_hour\x1b]0;owned\x07"),
            _refusal(sid, project, now - 50, now + HOUR),  # a good one
        ],
    )
    with open(folder / f"{sid}.jsonl", "ab") as f:
        f.write(b'{"type":"assistant","timestamp":"x","apiError":"usage_limit_reached","resetsAt":' + b"9" * 400)
        f.write(b',"message":{"model":"<synthetic>","usage":{}}}\n')
        nested = encode(_refusal(sid, project, now - 40, now + HOUR, params={"deep": "HERE"}))
        f.write(nested.replace(b'"HERE"', b'{"a":' * 5000 + b"1" + b"}" * 5000) + b"\n")
    limits = p.home / "usage" / "rate_limits.jsonl"
    limits.parent.mkdir(parents=True)
    n = 200_000 if quick else 1_000_000
    limits.write_bytes(_samples(now - 3 * HOUR, n))
    res.fig("rate-limit samples written", n)
    res.fig("rate-limit log MiB", round(limits.stat().st_size / 2**20, 1))

    started = time.perf_counter()
    proc = p.run("usage --burn --json", "usage", "--burn", "--json", "--project", project)
    res.fig("usage --burn --json s (whole process)", round(time.perf_counter() - started, 2))
    try:
        data = json.loads(proc.stdout or "{}")
    except ValueError:
        res.check(False, "--json prints JSON", proc.stdout[:200])
        data = {}
    _in_range(res, data, now)
    text = p.run("usage --burn", "usage", "--burn", "--project", project).stdout
    res.check("\x1b" not in text and "\x07" not in text, "nothing raw on the terminal", repr(text[:300]))
    res.check("xxxxxxxxxx" * 10 not in text, "a window's name of 10 KB is not shown", text[-300:])
    p.run("live", "live", "--project", project)

    runway = p.home / "usage" / "runway.json"
    private = p.root / "private.txt"
    private.write_text(SECRET)
    private.chmod(0o600)
    status = json.dumps({"session_id": sid, "cwd": project,
                         "rate_limits": {"five_hour": {"used_percentage": 64, "resets_at": now + HOUR}}})  # fmt: skip
    tiny = {"window": "five_hour", "resets_at": now + HOUR, "pct_per_hour": 1e-300}
    absurd = json.dumps({"version": 1, "computed": now, "runways": [tiny]})
    for what, make in (
        ("garbage", lambda: runway.write_bytes(b"\x00garbage{")),
        ("a megabyte", lambda: runway.write_bytes(b"[" * (1 << 20))),
        ("absurd values", lambda: runway.write_text(absurd)),
        ("a FIFO", lambda: os.mkfifo(runway)),
        ("a link", lambda: runway.symlink_to(private)),
    ):
        if runway.is_symlink() or runway.exists():
            runway.unlink()
        make()
        line = p.run(f"statusline, runway.json {what}", "statusline", stdin=status).stdout
        res.check("left at this pace" not in line, "no runway from a file that is not one", f"{what}: {line!r}")
        res.check(SECRET not in line, "a link is never followed", what)
    res.check(private.read_text() == SECRET, "a link is never followed", "the private file was written")
    for is_error, answer in _mcp(p, project, [("c3_status", {"view": "usage"})]):
        res.check(not is_error and "runway" in answer and "refusals" in answer, "c3_status(view='usage') answers",
                  answer[-300:])  # fmt: skip
        res.check("\x1b" not in answer and SECRET not in answer, "nothing raw, nothing private", answer[-300:])


def _in_range(res: Result, data: dict, now: float) -> None:
    windows = data.get("windows") or []
    res.check(len(windows) == 2, "the 5-hour and weekly windows", repr(data)[:300])
    for w in windows:
        used = w.get("used")
        res.check(used is None or 0 <= used <= 100, "every percent in 0-100 or absent", f"{w['name']}: {used!r}")
        for key in ("tokens_per_h", "usd_per_h", "cost_usd"):
            value = w.get(key)
            res.check(isinstance(value, int | float) and math.isfinite(value) and value >= 0,
                      "rates and costs finite", f"{w['name']} {key}: {value!r}")  # fmt: skip
        for s in w.get("sessions", []) + w.get("projects", []):
            share = s.get("share")
            res.check(share is None or 0 <= share <= 1.000001, "shares in 0-1", f"{s.get('key')}: {share!r}")
        r = w.get("runway")
        if r is not None:
            res.fig(f"{w['name']} runway samples", r["samples"])
            res.fig(f"{w['name']} runway", r["reason"] or "reaches 100%")
            hits = r.get("hits_at")
            res.check(hits is None or now - 60 < hits <= (w.get("end") or 0), "a runway ends before its reset",
                      repr(r))  # fmt: skip
            res.check(0 <= r.get("used_now", 0) <= 100, "every percent in 0-100 or absent", repr(r))
            res.check(hits is None and r["pct_per_hour"] is None, "samples that go backwards give no runway", repr(r))
    refusals = data.get("refusals") or []
    res.fig("refusals listed", len(refusals))
    good = [r for r in refusals if r.get("resets_at")]
    res.check(len(good) == 1 and good[0]["window"] == "five_hour", "only a reset in its window's reach is kept",
              repr(refusals)[:400])  # fmt: skip
    res.check(all(r.get("window") in (None, "five_hour", "seven_day") for r in refusals),
              "a window's name is one Claude Code reports", repr([r.get("window") for r in refusals])[:300])  # fmt: skip
