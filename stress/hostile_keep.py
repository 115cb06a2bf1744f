"""The cleanup and the keep policy: what keeps sessions before Claude Code deletes them, when what
it is given is wrong, when the archive cannot take them, when thousands expire at once, and when
a kept transcript is swapped for a link. Through the CLI, the hook (as Claude Code runs it: a
JSON payload on stdin) and ``c3async stats``:

- a wrong ``keep`` (a typo, a number, an object) in ``$C3_HOME/config.json`` or a project's
  ``.c3/config.json``: named once in a warning with the file, read as the default (``marked``),
  and the noted session is still preserved: the listings, the hook and ``keep --expiring`` go on;
- an archive that cannot be written (its folder for the project is a file): the listing says so
  in one line however many sessions it refuses, and counts them as not kept; ``keep --expiring``
  writes the keep marks, says the archive refused and exits 1; the hook exits 0 and notes it in
  ``hook-errors.log``, printing nothing;
- 2,000 sessions expiring at once (beyond the 200 a listing reads): the warning is one line, the
  hook's pass stays within its budget, ``keep --expiring`` keeps them all in bounded time (one
  append of marks), and nothing is left to warn of;
- a kept session's transcript replaced by a symlink to a private file, before and after it was
  preserved: the link is never followed (the archive keeps what it had or nothing, the private
  text is never shown or copied).

Every probe: no traceback, no hang, exit 0, 1 or 2, and the expected outcome.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

from .harness import Result
from .probe import Probe, probe
from .transcripts import claude_slug

CLASS = "the cleanup and the keep policy"

DAY = 86_400
MANY = 2000
KEEP_ALL_S = 30.0  # a hang guard for 2,000 sessions kept at once (measured: a few seconds)
HOOK_S = 8.0  # the hook's whole process, its pass bounded at 2 s; Claude Code waits 10 s for it


def _aged(p: Probe, project: str, prompt: str, days: float) -> str:
    sid = p.session(project, prompt)
    when = time.time() - days * DAY
    os.utime(p.config / "projects" / claude_slug(project) / f"{sid}.jsonl", (when, when))
    return sid


def _archived(p: Probe, project: str, sid: str) -> Path:
    return p.home / "archive" / claude_slug(project) / f"{sid}.jsonl"


def _hook(p: Probe, what: str, project: str) -> tuple[float, str]:
    payload = {"hook_event_name": "SessionStart", "session_id": str(uuid.uuid4()), "cwd": project, "source": "startup"}
    started = time.perf_counter()
    proc = p.run(what, "hook", stdin=json.dumps(payload), cwd=project)
    took = time.perf_counter() - started
    p.res.check(proc.stdout == "", "a hook prints nothing (its stdout goes into Claude Code's context)", what)
    return took, proc.stderr


def check(res: Result, sb, quick: bool) -> None:
    p = probe(res, sb, "keep")
    _wrong_policy(p)
    _archive_refuses(p)
    _many(p)
    _linked(p)
    res.fig("probes", f"{p.runs} commands")


def _wrong_policy(p: Probe) -> None:
    proj = p.project("typo")
    noted = _aged(p, proj, "a noted session", 26)
    plain = _aged(p, proj, "a plain session", 26)
    p.run("mark note", "mark", "note", noted, "--summary", "worth it", "--project", proj)
    p.home.mkdir(parents=True, exist_ok=True)
    for where, value in (
        (p.home / "config.json", "forver"),
        (p.home / "config.json", 30),
        (Path(proj, ".c3", "config.json"), {"keep": "all"}),
        (Path(proj, ".c3", "config.json"), ["noted", "\x1b[31mred"]),
    ):
        where.write_text(json.dumps({"keep": value}))
        proc = p.run(f"sessions with keep = {value!r}", "sessions", "--project", proj, "--json", says=(str(where),))
        p.res.check(
            proc.stderr.count(str(where)) == 1 and "\x1b" not in proc.stderr,
            "a wrong keep value is named once, inert",
            repr(proc.stderr[-300:]),
        )
        rows = {r["id"]: r for r in json.loads(proc.stdout or "[]")}
        p.res.check(
            rows.get(noted, {}).get("kept_by") == "policy: noted" and rows.get(plain, {}).get("kept") is False,
            "a wrong keep value reads as the default, marked",
            f"{value!r}: {[(r.get('kept_by')) for r in rows.values()]}",
        )
        _hook(p, f"the hook with keep = {value!r}", proj)
        where.unlink()
    p.res.check(_archived(p, proj, noted).is_file(), "the noted session is preserved whatever keep says", noted)
    p.res.check(not _archived(p, proj, plain).exists(), "a plain session is not", plain)


def _archive_refuses(p: Probe) -> None:
    proj = p.project("refused")
    n = 40
    kept = [_aged(p, proj, f"kept {i}", 27) for i in range(n)]
    for sid in kept:  # the policy keeps noted sessions
        p.run(f"note {sid[:8]}", "mark", "note", sid, "--summary", "s", "--project", proj)
    blocker = p.home / "archive" / claude_slug(proj)
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_bytes(b"not a folder")
    proc = p.run("sessions over an archive that cannot be written", "sessions", "--project", proj)
    said = [line for line in proc.stderr.splitlines() if "could not preserve" in line or "archive" in line.lower()]
    p.res.check(len(said) == 1, "one line for the archive's refusal, however many sessions", repr(said[:3]))
    p.res.check(
        f"{n} sessions expire within 7 days (0 kept)" in proc.stderr,
        "what was refused is not counted kept",
        proc.stderr[-300:],
    )
    _took, err = _hook(p, "the hook over an archive that cannot be written", proj)
    log = p.home / "hook-errors.log"
    p.res.check(
        err == "" and log.is_file() and "could not preserve" in log.read_text(),
        "the hook notes the refusal in hook-errors.log, not on Claude Code's screen",
        repr(err[-200:]),
    )
    proc = p.run(
        "keep --expiring over an archive that cannot be written",
        "keep",
        "--expiring",
        "--project",
        proj,
        "--json",
        expect=(1,),
    )
    done = json.loads(proc.stdout or "{}")
    refused = [k for k in done.get("kept", []) if not k["preserved"]]
    p.res.check(
        len(refused) == n and all(k["error"] for k in refused),
        "keep --expiring says every one it could not",
        f"{len(refused)} of {n}",
    )
    marks = Path(proj, ".c3", "session_marks.jsonl").read_text().splitlines()
    p.res.check(sum('"op":"keep"' in m for m in marks) == n, "the keep marks are written all the same", f"{len(marks)}")
    p.res.check(blocker.read_bytes() == b"not a folder", "what blocks the archive is left as it is", "")
    blocker.unlink()
    p.run("sessions once the archive can be written", "sessions", "--project", proj)
    p.res.check(all(_archived(p, proj, sid).is_file() for sid in kept), "a later listing preserves them", "")


def _many(p: Probe) -> None:
    proj = p.project("many")
    old = [_aged(p, proj, f"old {i}", 24 + (i % 6)) for i in range(MANY)]
    for i in range(5):
        _aged(p, proj, f"fresh {i}", 0.01)
    proc = p.run(f"sessions with {MANY:,} sessions expiring", "sessions", "--project", proj)
    lines = [line for line in proc.stderr.splitlines() if "expire within" in line]
    p.res.check(
        len(lines) == 1 and f"{MANY:,} sessions expire within 7 days (0 kept)" in lines[0],
        "the warning is one line with the numbers",
        repr(proc.stderr[-400:]),
    )
    p.res.check(len(proc.stderr.splitlines()) <= 3, "a listing's stderr stays a few lines", repr(proc.stderr[-400:]))
    took, _ = _hook(p, f"the hook with {MANY:,} sessions expiring", proj)
    p.res.fig("the hook's whole process, 2,000 expiring", f"{took:.2f} s")
    p.res.check(took < HOOK_S, "the hook stays within Claude Code's wait", f"{took:.2f} s")
    started = time.perf_counter()
    proc = p.run(f"keep --expiring, {MANY:,} sessions", "keep", "--expiring", "--project", proj, "--json")
    took = time.perf_counter() - started
    p.res.fig(f"keep --expiring, {MANY:,} sessions", f"{took:.2f} s")
    p.res.check(took < KEEP_ALL_S, "keep --expiring is bounded in time", f"{took:.1f} s")
    done = json.loads(proc.stdout or "{}")
    p.res.check(
        len(done.get("kept", [])) == MANY and all(k["preserved"] for k in done["kept"]),
        "every expiring session is kept",
        f"{len(done.get('kept', []))} of {MANY}",
    )
    p.res.check(all(_archived(p, proj, sid).is_file() for sid in old), "the archive holds every one", "")
    proc = p.run("sessions after keep --expiring", "sessions", "--project", proj)
    p.res.check("expire within" not in proc.stderr, "nothing is left to warn of", proc.stderr[-300:])
    # the policy `all` over as many, none preserved yet: the hook's last chance, nothing listed before
    every = p.project("many-all")
    Path(every, ".c3").mkdir(parents=True, exist_ok=True)
    Path(every, ".c3", "config.json").write_text(json.dumps({"keep": "all"}))
    old = [_aged(p, every, f"old {i}", 24 + (i % 6)) for i in range(MANY)]
    took, _ = _hook(p, f"the hook with {MANY:,} sessions to preserve", every)
    held = sum(_archived(p, every, sid).is_file() for sid in old)
    p.res.fig(f"the hook preserving {MANY:,} sessions", f"{held:,} in {took:.2f} s")
    p.res.check(took < HOOK_S and held > 0, "the hook preserves what it can within its budget", f"{held}, {took:.2f} s")


def _linked(p: Probe) -> None:
    proj = p.project("linked")
    secret = p.root / "home" / "private.jsonl"
    secret.write_text('{"type":"user","message":{"role":"user","content":"the private words"}}\n')
    folder = p.config / "projects" / claude_slug(proj)
    kept = _aged(p, proj, "kept and preserved, then swapped", 26)
    early = _aged(p, proj, "noted, swapped before any pass", 26)
    p.run("keep", "keep", kept, "--project", proj)
    original = _archived(p, proj, kept).read_bytes()
    p.run("note", "mark", "note", early, "--summary", "s", "--project", proj)  # a note: no pass preserves it yet
    for sid in (kept, early):
        (folder / f"{sid}.jsonl").unlink()
        (folder / f"{sid}.jsonl").symlink_to(secret)
    outputs = [
        p.run("sessions over a swapped transcript", "sessions", "--project", proj, "--json"),
        p.run("keep --expiring over a swapped transcript", "keep", "--expiring", "--project", proj),
        p.run("stats over a swapped transcript", "stats", "--project", proj),
    ]
    _hook(p, "the hook over a swapped transcript", proj)
    rows = {r["id"]: r for r in json.loads(outputs[0].stdout or "[]")}
    p.res.check(rows.get(kept, {}).get("archived") is True, "a preserved session is listed from the archive", kept)
    p.res.check(early not in rows, "a link in Claude Code's folder is no session", early)
    p.res.check(_archived(p, proj, kept).read_bytes() == original, "the archive keeps what it had", kept)
    p.res.check(not _archived(p, proj, early).exists(), "a link is never followed into the archive", early)
    p.res.check(not any("private words" in o.stdout + o.stderr for o in outputs), "the linked file is never shown", "")
