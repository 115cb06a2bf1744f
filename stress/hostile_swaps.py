"""Check-then-use: a process swapping a session's folders for links while ``keep`` runs, a
linked session folder in Claude Code's folder for ``resume``, ``resume --print``, an archive
other accounts can write."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .harness import Result
from .probe import probe
from .transcripts import claude_slug, render, user_line

CLASS = "check-then-use"


@contextmanager
def swapping(folder: Path, foreign: Path) -> Iterator[None]:
    """While the block runs, another thread keeps swapping ``folder`` for a link to ``foreign``
    and back (the race a check-then-use loses); ``folder`` is back in place after."""
    real = folder.with_name(folder.name + ".real")
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            try:
                os.rename(folder, real)
                folder.symlink_to(foreign)
                folder.unlink()
                os.rename(real, folder)
            except OSError:
                pass

    t = threading.Thread(target=swap)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()
        if folder.is_symlink():
            folder.unlink()
        if not folder.exists():
            os.rename(real, folder)


def check(res: Result, sb, quick: bool) -> None:
    p = probe(res, sb, "check-then-use")
    project = p.project("app")
    sid = p.session(project, "keep me")
    folder = p.config / "projects" / claude_slug(project)
    side = folder / sid / "subagents"
    side.mkdir(parents=True)
    (side / "agent-a.jsonl").write_bytes(render([user_line(sid, project, "sub-agent work", time.time())]))
    foreign = p.root / "foreign"
    foreign.mkdir()
    (foreign / "agent-a.jsonl").write_text('{"secret":"the foreign file"}\n')
    with swapping(side, foreign):
        for _ in range(6 if quick else 20):
            p.run("mark keep while its folders are swapped", "mark", "keep", sid, "--project", project, expect=(0, 1))
    foreign_ino = os.stat(foreign / "agent-a.jsonl").st_ino
    kept = [f for f in (p.home / "archive").rglob("*") if f.is_file()]
    res.check(
        all(os.lstat(f).st_ino != foreign_ino and b"foreign file" not in f.read_bytes() for f in kept),
        "keep never archives a file a swapped folder leads to",
        str(kept),
    )
    (folder / f"{sid}.jsonl").unlink()
    shutil.rmtree(folder / sid)
    proc = p.run("resume --print", "resume", sid, "--print", "--project", project)
    res.check(
        not (folder / f"{sid}.jsonl").exists() and "would put back" in proc.stderr,
        "resume --print puts nothing back",
        proc.stderr[-200:],
    )
    elsewhere = p.root / "elsewhere"
    elsewhere.mkdir()
    (folder / sid).symlink_to(elsewhere)
    p.run(
        "resume through a linked session folder",
        "resume",
        sid,
        "--project",
        project,
        expect=(1,),
        says=("not followed",),
    )
    res.check(
        list(elsewhere.iterdir()) == [], "resume never writes through a linked folder", str(list(elsewhere.iterdir()))
    )
    (folder / sid).unlink()
    os.chmod(p.home, 0o777)
    try:
        proc = p.run(
            "sessions with an archive others can write",
            "sessions",
            "--project",
            project,
            "--json",
            says=("refusing the archive",),
        )
        res.check(sid not in proc.stdout, "an archive others can write is not listed from", proc.stdout[:200])
        p.run("resume from an archive others can write", "resume", sid, "--project", project, expect=(1,))
        res.check(not (folder / f"{sid}.jsonl").exists(), "nothing is restored from an archive others can write")
    finally:
        os.chmod(p.home, 0o700)
    res.fig("probes", f"{p.runs} commands (keep raced by a folder swapper)")
