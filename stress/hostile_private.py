"""Private text in readable places: another local account (``nobody``) walks a project folder and
a c3async home that are open to everyone (a shared checkout; a home made 0755, as Debian made them
until 12) after every door that copies transcript text has run (listing, note, stats, search, a
task, the MCP server's list). It must read none of it; a ``.c3`` left 0755 with 0644 files by an
older version is closed by the next command; one that belongs to another account is said once.

Needs root (to run as another account and to hand a folder to it); without it the scenario
checks the modes alone and says so.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from .harness import SYSTEM_PYTHON, Result, as_nobody
from .probe import mcp, probe

CLASS = "private text and another account"
SECRET = "wombat-private-needle-8830"

# Run as the other account: read every file it can below the folders given; print how many it
# read and the paths that held the secret.
WALK = """
import os, sys
secret = sys.argv[1].encode()
read, seen = 0, []
for top in sys.argv[2:]:
    for root, dirs, files in os.walk(top, onerror=lambda e: None):
        for name in files:
            try:
                with open(os.path.join(root, name), "rb") as f:
                    data = f.read()
            except OSError:
                continue
            read += 1
            if secret in data:
                seen.append(os.path.join(root, name))
print(read, *seen)
"""


def _walk_as_nobody(*folders: str) -> tuple[int, list[str]] | None:
    if os.geteuid() != 0 or SYSTEM_PYTHON is None:
        return None
    proc = as_nobody(WALK, SECRET, *folders, timeout=120)
    read, *seen = proc.stdout.split() or ["0"]
    return int(read), seen


def _loose(folder: Path) -> list[str]:
    """Entries below ``folder`` (itself included) that others may read, write or enter."""
    out = []
    for root, dirs, files in os.walk(folder):
        for name in [".", *dirs, *files]:
            path = Path(root, name)
            if name == ".gitignore":
                continue
            mode = stat.S_IMODE(path.lstat().st_mode)
            if mode & 0o077 and (name != "." or path == folder):
                out.append(f"{path.relative_to(folder.parent)} {mode:o}")
    return out


def check(res: Result, sb, quick: bool) -> None:
    p = probe(res, sb, "private")
    opened = Path(tempfile.mkdtemp(prefix="c3-private-"))
    old_umask = os.umask(0o022)
    try:
        opened.chmod(0o755)
        home = opened / "c3home"
        home.mkdir(mode=0o755)  # as an older version, or a person, left it
        home.chmod(0o755)
        p.env["C3_HOME"] = str(home)
        project = str(opened / "app")
        os.mkdir(project)
        sid = p.session(project, f"the first prompt holds {SECRET}")
        p.run("sessions", "sessions", "--project", project)
        p.run("mark note", "mark", "note", sid, "--project", project, "--summary", f"note {SECRET}")
        p.run("stats", "stats", "--project", project)
        p.run("search", "search", SECRET, "--project", project)
        p.run("tasks add", "tasks", "add", "--project", project, "--title", f"task {SECRET}")
        mcp(p, project, [("c3_session", {"action": "list"}), ("c3_session", {"action": "show", "target": sid})])
        state = Path(project, ".c3")
        res.check(
            not _loose(state),
            "what c3async writes in a project is private (0700 folders, 0600 files)",
            "; ".join(_loose(state)[:5]),
        )
        res.check(
            stat.S_IMODE(home.lstat().st_mode) == 0o700,
            "a c3async home open to others is closed",
            f"{stat.S_IMODE(home.lstat().st_mode):o}",
        )
        walked = _walk_as_nobody(project, str(home))
        if walked is None:
            res.note("not root: the second account's walk was skipped (modes checked alone)")
        else:
            read, seen = walked
            res.check(not seen, "another account reads no text copied from a transcript", ", ".join(seen[:5]))
            subprocess.run(["chmod", "-R", "go+rX", project, str(home)], check=True)  # the control
            read_open, seen_open = _walk_as_nobody(project, str(home)) or (0, [])
            res.check(
                bool(seen_open), "the walk finds the text where it is left open (control)", f"{read_open} files read"
            )
            res.fig("files the other account could open / with the secret", f"{read} / {len(seen)}")
        # An older version's .c3: 0755 with 0644 files; the next listing closes it.
        for root, dirs, files in os.walk(state):
            for name in dirs + files:
                os.chmod(os.path.join(root, name), 0o755 if name in dirs else 0o644)
        state.chmod(0o755)
        p.run("sessions after a loosened .c3", "sessions", "--project", project)
        res.check(
            stat.S_IMODE(state.lstat().st_mode) == 0o700,
            "a loose .c3 of this account is closed",
            f"{stat.S_IMODE(state.lstat().st_mode):o}",
        )
        if os.geteuid() == 0:
            other = str(opened / "theirs")
            os.mkdir(other)
            p.session(other, "their prompt")
            os.mkdir(Path(other, ".c3"), 0o755)
            Path(other, ".c3").chmod(0o755)
            os.chown(Path(other, ".c3"), pwd.getpwnam("nobody").pw_uid, -1)
            proc = p.run("sessions in a .c3 of another account", "sessions", "--project", other)
            said = [line for line in proc.stderr.splitlines() if "can be read by other accounts" in line]
            res.check(
                len(said) == 1 and "chmod go-rwx" in said[0],
                "another account's open .c3 is said once",
                proc.stderr[-300:],
            )
    finally:
        os.umask(old_umask)
        shutil.rmtree(opened, ignore_errors=True)
    res.fig("probes", f"{p.runs} commands, 1 MCP server")
