"""The shell's completion of session ids under attack: a title of escapes, tabs and newlines,
markup typed for an id, then the ids' cache
replaced by garbage, invalid UTF-8, lines of the wrong shape, a file over its bound, a FIFO, a
link to a decoy and a cache folder that is a link; words of the command line that are absurd (a
negative index, one past the end, 100,000 words). Each Tab is the fast path as the script of
``c3async completion bash`` runs it, in a cloned repository that plants modules of its own: an
answer comes in time, exit 0 or 1, no traceback, every line one candidate with no raw control
character; nothing planted runs; nothing is written through a link.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time

from .harness import Result
from .probe import probe as _probe

CLASS = "the shell's completion of session ids and its cache"
TIMEOUT_S = 20.0


def _clean(text: str) -> bool:
    return not any((ord(c) < 32 and c != "\n") or 0x7F <= ord(c) <= 0x9F for c in text)


def check(res: Result, sb, quick: bool) -> None:
    from c3async.completion import command
    from c3async.sessions.completion import CACHE

    p = _probe(res, sb, "completion")
    app = p.project("cloned")
    hostile = p.session(app, "\x1b]52;c;ZXZpbA==\x07\x1b[2J wipe\tthe\nscreen \x9b31m")
    plain = p.session(app, "wire the billing webhook")
    p.run("a full listing writes the ids' cache", "sessions", "--project", app)
    planted = p.root / "planted"
    for name in ("re.py", "sitecustomize.py", "os.py"):
        (p.root / "work" / "cloned" / name).write_text(f"open({str(planted)!r}, 'w').write({name!r})\n")
    fast = shlex.split(command())
    took: list[float] = []

    def tab(what: str, *words: str, at: int | None = None, expect_ids: set[str] | None = None) -> list[str]:
        p.runs += 1
        index = len(words) - 1 if at is None else at
        t0 = time.monotonic()
        try:
            proc = subprocess.run(
                [*fast, "bash", str(index), *words],
                capture_output=True,
                text=True,
                errors="replace",
                env={**p.env, "PYTHONPATH": app, "PYTHONSTARTUP": str(planted)},
                cwd=app,
                timeout=TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            res.check(False, "no hang", f"{what}: no answer in {TIMEOUT_S:.0f} s")
            return []
        took.append(time.monotonic() - t0)
        res.check(proc.returncode in (0, 1, 2), "exit 0, 1 or 2", f"{what}: {proc.returncode}")
        res.check(
            "Traceback" not in proc.stderr and not proc.stderr, "nothing on stderr", f"{what}: {proc.stderr[-300:]!r}"
        )
        res.check(_clean(proc.stdout), "no raw control character", f"{what}: {proc.stdout[:200]!r}")
        lines = proc.stdout.splitlines()
        if expect_ids is not None:
            got = {line.split()[0] for line in lines if line.strip()}
            res.check(got == expect_ids, "the ids offered", f"{what}: {sorted(got)} != {sorted(expect_ids)}")
        return lines

    offered = tab("ids with a title of escapes", "c3async", "show", "", expect_ids={hostile, plain})
    res.check(len(offered) == 2, "one line a candidate", repr(offered))
    res.check(not planted.exists(), "nothing the cloned repository plants runs", planted.name)

    for what, words, at in (
        ("a negative index", ("c3async", "show", ""), -5),
        ("an index past the end", ("c3async", "show", ""), 9),
        ("markup for an id", ("c3async", "show", "<script>\x1b[2J"), None),
        ("100,000 words", ("c3async", "show", *(["x"] * (2_000 if quick else 100_000))), None),
    ):
        tab(what, *words, at=at)

    cache = p.home.joinpath(*CACHE)
    for what, body in (
        ("garbage", b"\x00\xff{not a cache"),
        ("invalid UTF-8 after the header", b"c3async-completion 1\n\xff\xfe\t\xc0\t\x80\t\x81\n"),
        ("lines of the wrong shape", b"c3async-completion 1\nnot-an-id\tx\ty\tz\n\t\t\t\n" + b"a\t" * 10_000),
        ("a line of 3 MiB", b"c3async-completion 1\n" + b"x" * (3 << 20)),
        ("larger than its bound", b"c3async-completion 1\n" + b"\n" * (5 << 20)),
    ):
        cache.unlink()
        cache.write_bytes(body)
        tab(f"a cache of {what}", "c3async", "show", "", expect_ids=set())
    # one id under two projects (a project moved), with two titles of shell syntax: bash would
    # insert what its candidates have in common, the titles' common start included
    cache.unlink()
    twice = f"2026-01-02T00:00:00Z\t{hostile}\t/new/app\tok; rm -rf ~ x\n2026-01-01T00:00:00Z\t{hostile}\t/old\tok; rm -rf ~\n"
    cache.write_text("c3async-completion 1\n" + twice)
    once = tab("an id cached twice", "c3async", "show", hostile[:6], expect_ids={hostile})
    res.check(once == [hostile], "one id once, bare: no title reaches the command line", repr(once))
    cache.unlink()
    os.mkfifo(cache)
    tab("a cache that is a FIFO", "c3async", "show", "", expect_ids=set())
    os.unlink(cache)
    decoy = p.root / "decoy.tsv"
    decoy.write_text(f"c3async-completion 1\n2026\t{plain}\t{app}\tdecoy\n")
    cache.symlink_to(decoy)
    tab("a cache that is a link", "c3async", "show", "", expect_ids=set())
    p.run("a listing over a linked cache", "sessions", "--project", app)
    res.check(decoy.read_text().endswith("decoy\n"), "nothing written through a link", decoy.read_text()[:200])
    os.unlink(cache)
    folder = cache.parent
    elsewhere = p.root / "elsewhere"
    elsewhere.mkdir()
    os.rename(folder, p.root / "old-cache")
    folder.symlink_to(elsewhere)
    tab("a cache folder that is a link", "c3async", "show", "", expect_ids=set())
    p.run("a listing over a linked cache folder", "sessions", "--project", app, expect=(0, 1))
    res.check(not os.listdir(elsewhere), "nothing written into a linked folder", repr(os.listdir(elsewhere)))
    res.fig("tabs", len(took))
    res.fig("slowest tab", f"{max(took) * 1000:.0f} ms" if took else "-")
