"""The status line's fast path under attack: the command install-statusline writes (``python
-I -S -c BOOT statusline``), run as Claude Code runs it, in a cloned repository that plants
``json.py``, ``sitecustomize.py`` and a ``c3async`` package of its own; a marks cache that is
garbage, nested 100,000 deep, a FIFO, a link to a decoy, in a folder that is a link, or that
holds a note of escapes; a rate-limit log that is a FIFO; registry files whose fields have the
wrong types. The line always comes, one short line with no raw control character, in time;
nothing planted runs; nothing is followed or written through a link.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from .harness import Result
from .probe import probe as _probe

CLASS = "the status line's installed command and its marks cache"


def check(res: Result, sb, quick: bool) -> None:
    p = _probe(res, sb, "statusline_fast")
    app = p.project("cloned")
    sid = p.session(app, "a real session")
    p.run("a note", "mark", "note", sid, "--summary", "the truth", "--project", app)
    planted = p.root / "planted"
    for name in ("json.py", "sitecustomize.py", "usercustomize.py"):
        (p.root / "work" / "cloned" / name).write_text(f"open({str(planted)!r}, 'w').write({name!r})\n")
    os.makedirs(os.path.join(app, "c3async"), exist_ok=True)
    with open(os.path.join(app, "c3async", "__init__.py"), "w") as f:
        f.write(f"open({str(planted)!r}, 'w').write('c3async')\n")
    reset = int(time.time()) + 3600
    data = json.dumps(
        {"session_id": sid, "cwd": app, "rate_limits": {"five_hour": {"used_percentage": 42, "resets_at": reset}}}
    )
    took: list[float] = []

    def line(what: str) -> str:
        return p.statusline(what, data, app, took, PYTHONPATH=app, PYTHONSTARTUP=str(planted))

    first = line("the first run (marks read, cache written)")
    res.check(first.startswith("note: the truth · 5h 42%"), "the note and the window shown", repr(first))
    res.check(not planted.exists(), "nothing the cloned repository plants runs", planted.name)

    cache = p.home / "cache" / "statusline_marks.json"
    held = json.loads(cache.read_text())
    entry = held["folders"][app]
    entry["marks"][sid] = ["note", "\x1b]52;c;ZXZpbA==\x07\x1b[2J\x9b31m"]
    cache.write_text(json.dumps(held))
    shown = line("a cached note of escapes")
    res.check(shown.startswith("note: \\x1b]52"), "a cached value is made inert", repr(shown))

    for what, body in (
        ("garbage", b"\x00\xff{not json"),
        ("nested 100,000 deep", b"[" * 100_000),
        ("larger than its bound", b" " * (2 << 20)),
        ("values of the wrong types", json.dumps({"v": 1, "folders": {app: {"git": 1, "logs": "x"}}}).encode()),
        (
            "marks of the wrong types",
            json.dumps({"v": 1, "folders": {app: {**entry, "marks": {sid: [1, 2]}}}}).encode(),
        ),
    ):
        cache.unlink()
        cache.write_bytes(body)
        out = line(f"a marks cache of {what}")
        res.check(out.startswith("note: the truth"), "a bad cache is read again from the marks", f"{what}: {out!r}")

    cache.unlink()
    os.mkfifo(cache)
    out = line("a marks cache that is a FIFO")
    res.check(out.startswith("note: the truth"), "a FIFO is never waited on", repr(out))

    decoy = p.root / "home" / "decoy.json"
    decoy.write_text('{"v": 1, "folders": {}}')
    os.unlink(cache)
    cache.symlink_to(decoy)
    out = line("a marks cache that is a link")
    res.check(out.startswith("note: the truth"), "the note shown", repr(out))
    res.check(decoy.read_text() == '{"v": 1, "folders": {}}', "nothing written through a link", decoy.read_text())

    folder = p.home / "cache"
    elsewhere = p.root / "home" / "elsewhere"
    elsewhere.mkdir()
    os.rename(folder, p.root / "home" / "old-cache")
    folder.symlink_to(elsewhere)
    out = line("a cache folder that is a link")
    res.check(out.startswith("note: the truth"), "the note shown", repr(out))
    res.check(not os.listdir(elsewhere), "nothing written into a linked folder", repr(os.listdir(elsewhere)))

    log = p.home / "usage" / "rate_limits.jsonl"
    os.rename(log, p.root / "home" / "old-log")
    os.mkfifo(log)
    out = line("a rate-limit log that is a FIFO")
    res.check("5h 42%" in out, "the window Claude Code reports still shown", repr(out))

    from c3async.live.running import proc_start_ticks

    registry = p.config / "sessions"
    registry.mkdir(parents=True, exist_ok=True)
    sleepers = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(6)]
    try:
        for n, (proc, odd) in enumerate(
            zip(sleepers, ({}, {"pid": "1"}, {"sessionId": 7}, {"status": ["waiting"]}, {"cwd": {"a": 1}}, None))
        ):
            body = {
                "pid": proc.pid,
                "sessionId": f"aaaaaaaa-0000-4000-8000-00000000000{n}",
                "cwd": app,
                "procStart": str(proc_start_ticks(proc.pid)),
                "status": "waiting",
                "statusUpdatedAt": time.time() * 1000,
            }
            (registry / f"{proc.pid}.json").write_text(json.dumps([1] if odd is None else {**body, **odd}))
        out = line("registry files of the wrong types beside a good one")
        res.check("1 waiting" in out, "the good file counted, the others not read", repr(out))
    finally:
        for proc in sleepers:
            proc.kill()
            proc.wait()
    res.check(not planted.exists(), "nothing the cloned repository plants runs", planted.name)
    res.fig(
        "installed command, median (nearly every run here reads the marks again)",
        f"{sorted(took)[len(took) // 2] * 1e3:.0f} ms over {len(took)} runs",
    )
    res.fig("probes", f"{p.runs} commands")
