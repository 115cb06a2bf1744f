"""Git metadata as hostile input: cloned checkouts whose git files are traps, each a project with
a session, beside a clean repository that must still list. c3async reads git's own files (to find
a project's root across worktrees, its worktrees and its branches); each trap is read by every
door: ``c3async sessions`` in the trap, ``sessions --all`` with every trap registered, a real
``c3async serve`` started in the trap (``initialize``, then ``c3_session list``), and the Hub's
``/api/rows``.

The traps (``TRAPS``: a name, how to build it in an empty folder, and whether its rows must say
``git metadata unreadable``): a default branch 1,000 folders deep that HEAD names; a ``.git``
file naming a symlink loop, one naming a chain of 2,000 links, and 1,000 worktree entries
naming one; a ``.git`` that is a FIFO, and
one of 1 GiB; a gitdir line of 64 KB; a ``commondir`` naming ``/``, and one naming the clean repository; a 100 MB
``packed-refs``; ``worktrees/`` with 100,000 entries (5,000 in quick mode); gitdir lines with a
NUL or a newline; a HEAD linked to ``/dev/zero``, and one linked to itself; 100,001 packed
branches; and a branch named with terminal control characters, which every door prints inert.

Every probe: no traceback, no hang, exit 0, the trap's session listed (with the hint where its
files cannot be read whole), the clean project's session listed everywhere, and no raw control
character on a terminal.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

from .harness import Result
from .hostile_neighbour import start_hub
from .probe import Probe, mcp, probe
from .transcripts import user_line

CLASS = "git metadata"
HINT = "git metadata unreadable"
EVIL_BRANCH = "evil\x1b]0;pwned\x07\x1b[2J"
CONTROL_BRANCH = "a branch named with control characters"
MAX_SAID = 4096  # bytes on stderr for one listing of a trap: its warnings, each naming a path
_RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # what a terminal acts on (tab and newline aside)


def git(*args: str, cwd: str | Path) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main", *args],
        cwd=str(cwd),
        env=env,
        check=True,
        capture_output=True,
    )


def repository(folder: Path) -> Path:
    """A real repository with one commit on ``main`` in ``folder``; returns its ``.git``."""
    git("init", "-q", cwd=folder)
    git("commit", "-q", "--allow-empty", "-m", "init", cwd=folder)
    return folder / ".git"


DEEP = 1000


def _deep_branch(folder: Path, clean: Path, big: bool) -> None:
    """refs/heads/a/a/.../a, 1,000 components, and HEAD naming it (made folder by folder: even
    os.makedirs recurses once per component)."""
    dot = repository(folder)
    oid = (dot / "refs" / "heads" / "main").read_bytes()
    fd = os.open(dot / "refs" / "heads", os.O_RDONLY)
    try:
        for _ in range(DEEP - 1):
            os.mkdir("a", dir_fd=fd)
            inner = os.open("a", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        ref = os.open("a", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(ref, oid)
        os.close(ref)
    finally:
        os.close(fd)
    (dot / "HEAD").write_text("ref: refs/heads/" + "/".join(["a"] * DEEP) + "\n")


def dismantle(folder: Path) -> None:
    """Remove the deep branch of a trap folder, deepest first (shutil.rmtree recurses once per
    folder, and would fail where c3async once did); the rest is rmtree's."""
    heads = folder / ".git" / "refs" / "heads"
    if not (heads / "a").is_dir():
        return
    (heads.joinpath(*["a"] * DEEP)).unlink()
    for depth in range(DEEP - 1, 0, -1):
        os.rmdir(heads.joinpath(*["a"] * depth))


def _gitdir_loop(folder: Path, clean: Path, big: bool) -> None:
    (folder / "loop").symlink_to("loop")
    (folder / ".git").write_text("gitdir: loop/x\n")


def _chain(folder: Path) -> Path:
    """links/l0 -> l1 -> ... -> l2000, a folder; returns l0."""
    links = folder / "links"
    links.mkdir()
    for i in range(2000):
        (links / f"l{i}").symlink_to(f"l{i + 1}")
    (links / "l2000").mkdir()
    return links / "l0"


def _gitdir_chain(folder: Path, clean: Path, big: bool) -> None:
    _chain(folder)
    (folder / ".git").write_text("gitdir: links/l0\n")


def _worktrees_chained(folder: Path, clean: Path, big: bool) -> None:
    """A thousand worktree entries, each naming a folder 2,000 links away."""
    worktrees = repository(folder) / "worktrees"
    worktrees.mkdir()
    far = _chain(folder)
    for i in range(1000):
        (worktrees / f"w{i}").mkdir()
        (worktrees / f"w{i}" / "gitdir").write_text(f"{far}/.git\n")


def _git_fifo(folder: Path, clean: Path, big: bool) -> None:
    os.mkfifo(folder / ".git")


def _git_huge(folder: Path, clean: Path, big: bool) -> None:
    with open(folder / ".git", "wb") as f:
        f.write(b"gitdir: ")
        f.truncate(1 << 30)  # sparse: 1 GiB of NULs after the prefix


def _fake_worktree(folder: Path, commondir: str) -> None:
    """A ``.git`` file naming a worktree entry of the checkout's own, whose commondir is given."""
    entry = folder / ".gd"
    entry.mkdir()
    (entry / "HEAD").write_text("ref: refs/heads/main\n")
    (entry / "commondir").write_text(commondir + "\n")
    (entry / "gitdir").write_text(f"{folder / '.git'}\n")
    (folder / ".git").write_text("gitdir: .gd\n")


def _commondir_root(folder: Path, clean: Path, big: bool) -> None:
    _fake_worktree(folder, "/")


def _commondir_other(folder: Path, clean: Path, big: bool) -> None:
    _fake_worktree(folder, str(clean / ".git"))


def _packed_refs_huge(folder: Path, clean: Path, big: bool) -> None:
    dot = repository(folder)
    with open(dot / "packed-refs", "wb") as f:
        f.write(b"# pack-refs with: peeled fully-peeled sorted \n")
        f.truncate(100 << 20)


def _packed_refs_many(folder: Path, clean: Path, big: bool) -> None:
    dot = repository(folder)
    oid = (dot / "refs" / "heads" / "main").read_bytes().strip()
    lines = b"".join(oid + b" refs/heads/b%d\n" % i for i in range(100_001))
    (dot / "packed-refs").write_bytes(b"# pack-refs with: peeled fully-peeled sorted \n" + lines)


def _many_worktrees(folder: Path, clean: Path, big: bool) -> None:
    worktrees = repository(folder) / "worktrees"
    worktrees.mkdir()
    for i in range(100_000 if big else 5_000):
        os.mkdir(worktrees / f"w{i}")


def _gitdir_nul(folder: Path, clean: Path, big: bool) -> None:
    (folder / ".git").write_bytes(b"gitdir: " + str(clean).encode() + b"\x00/.git\n")


def _gitdir_long(folder: Path, clean: Path, big: bool) -> None:
    (folder / ".git").write_text("gitdir: " + "a/" * 32_000 + "\n")


def _gitdir_newline(folder: Path, clean: Path, big: bool) -> None:
    (folder / ".git").write_bytes(b"gitdir: nowhere\n" + str(clean / ".git").encode() + b"\n")


def _head_dev_zero(folder: Path, clean: Path, big: bool) -> None:
    head = repository(folder) / "HEAD"
    head.unlink()
    head.symlink_to("/dev/zero")


def _head_loop(folder: Path, clean: Path, big: bool) -> None:
    head = repository(folder) / "HEAD"
    head.unlink()
    head.symlink_to("HEAD")


def _control_branch(folder: Path, clean: Path, big: bool) -> None:
    dot = repository(folder)
    (dot / "refs" / "heads" / EVIL_BRANCH).write_bytes((dot / "refs" / "heads" / "main").read_bytes())
    (dot / "HEAD").write_text(f"ref: refs/heads/{EVIL_BRANCH}\n")


# name -> (builder(folder, clean repository, full size), whether its rows say the hint)
TRAPS: dict[str, tuple[Callable[[Path, Path, bool], None], bool]] = {
    "a branch 1,000 folders deep": (_deep_branch, True),
    "a gitdir in a symlink loop": (_gitdir_loop, True),
    "a gitdir 2,000 links away": (_gitdir_chain, True),
    "1,000 worktrees 2,000 links away": (_worktrees_chained, False),
    "a .git FIFO": (_git_fifo, True),
    "a .git of 1 GiB": (_git_huge, True),
    "a commondir of /": (_commondir_root, True),
    "a commondir naming another project": (_commondir_other, False),
    "a packed-refs of 100 MB": (_packed_refs_huge, True),
    "100,001 packed branches": (_packed_refs_many, True),
    "worktrees/ with 100,000 entries": (_many_worktrees, True),
    "a gitdir line with a NUL": (_gitdir_nul, True),
    "a gitdir line with a newline": (_gitdir_newline, True),
    "a gitdir line of 64 KB": (_gitdir_long, True),
    "HEAD linked to /dev/zero": (_head_dev_zero, True),
    "HEAD linked to itself": (_head_loop, True),
    CONTROL_BRANCH: (_control_branch, False),
}


def build(work: Path, clean: Path, big: bool = False) -> dict[str, Path]:
    """Every trap in its own folder under ``work``: name -> folder (``clean``: a repository the
    traps may name)."""
    out = {}
    for i, (name, (make, _)) in enumerate(TRAPS.items()):
        folder = work / f"trap{i:02d}"
        folder.mkdir(parents=True)
        make(folder, clean, big)
        out[name] = Path(os.path.realpath(folder))
    return out


# ------------------------------------------------------------------------------ the scenario


def _listed(p: Probe, what: str, stdout: str) -> dict[str, dict]:
    try:
        return {r["id"]: r for r in json.loads(stdout or "[]")}
    except ValueError:
        p.res.check(False, "--json parses", f"{what}: {stdout[:200]!r}")
        return {}


def _inert(p: Probe, what: str, text: str) -> None:
    p.res.check(not _RAW_CONTROL.search(text), "no raw control character on a terminal", f"{what}: {text[-300:]!r}")


def _api_rows(port: int, token: str) -> tuple[int, dict]:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/rows?limit=200", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except OSError as exc:
        return getattr(exc, "code", 0) or 0, {"error": str(exc)}


def check(res: Result, sb, quick: bool) -> None:
    p = probe(res, sb, "git")
    clean = Path(p.project("clean"))
    repository(clean)
    t0 = time.perf_counter()
    traps = build(p.root / "work" / "traps", clean, big=not quick)
    res.fig("traps built", f"{len(traps)} in {time.perf_counter() - t0:.1f} s")
    try:
        _doors(p, clean, traps, quick)
    finally:
        for folder in traps.values():
            dismantle(folder)


def _doors(p: Probe, clean: Path, traps: dict[str, Path], quick: bool) -> None:
    res = p.res
    clean_sid = p.session(str(clean), "the clean repository's session")
    p.run("sessions in the clean project (registers it)", "sessions", "--json", cwd=str(clean))
    sids: dict[str, str] = {}
    for name, folder in traps.items():
        sid = str(uuid.uuid4())
        later = user_line(sid, str(folder), "on the evil branch", time.time() - 3000)
        later["gitBranch"] = EVIL_BRANCH  # the branch a row shows is its transcript's last
        sids[name] = p.session(
            str(folder), f"a session in the trap {name}", sid, lines=[later] if name == CONTROL_BRANCH else None
        )
    slowest = (0.0, "")
    for name, folder in traps.items():
        t = time.perf_counter()
        proc = p.run(f"sessions in {name}", "sessions", "--json", cwd=str(folder))
        slowest = max(slowest, (time.perf_counter() - t, name))
        res.check(
            len(proc.stderr) < MAX_SAID, "what is said of a trap stays short", f"{name}: {len(proc.stderr):,} bytes"
        )
        row = _listed(p, name, proc.stdout).get(sids[name])
        res.check(row is not None, "the trap's session is listed", name)
        if row is not None:
            wants = TRAPS[name][1]
            res.check(
                (HINT in row["hints"]) == wants,
                f"the rows say '{HINT}' exactly where git's files cannot be read",
                f"{name}: {row['hints']}",
            )
        _inert(p, f"sessions --json in {name}", proc.stderr)
    text = p.run("sessions (text) in the trap", "sessions", cwd=str(traps[CONTROL_BRANCH]))
    _inert(p, "sessions in the trap", text.stdout + text.stderr)
    res.fig("slowest `sessions --json` in a trap", f"{slowest[0]:.2f} s (whole process: {slowest[1]})")
    every = p.run("sessions --all", "sessions", "--all", "--json")
    listed = _listed(p, "--all", every.stdout)
    res.check(clean_sid in listed, "the clean project lists beside every trap", "sessions --all")
    res.check(
        all(s in listed for s in sids.values()),
        "every trap's session is listed by --all",
        ", ".join(n for n, s in sids.items() if s not in listed),
    )
    text = p.run("sessions --all (text)", "sessions", "--all")
    _inert(p, "sessions --all", text.stdout + text.stderr)
    served = ["a branch 1,000 folders deep", "a gitdir in a symlink loop"] if quick else list(traps)
    for name in served:
        answers = mcp(p, str(traps[name]), [("c3_session", {"action": "list"})])
        res.check(
            bool(answers) and not answers[0][0] and sids[name][:8] in answers[0][1],
            "the MCP server in a trap starts and lists its session",
            f"{name}: {answers[:1]!r}",
        )
    hub, port, token = start_hub(p.env)
    try:
        status, body = _api_rows(port, token)
        ids = {r["id"] for r in body.get("rows", [])}
        res.check(
            status == 200 and clean_sid in ids,
            "the Hub lists the clean project beside the traps",
            f"{status}: {str(body)[:200]}",
        )
        res.check(
            all(s in ids for s in sids.values()),
            "the Hub lists every trap's session",
            ", ".join(n for n, s in sids.items() if s not in ids),
        )
    finally:
        hub.terminate()
        hub.wait(10)
        if hub.stderr is not None:
            _inert(p, "the Hub's stderr", hub.stderr.read())
            hub.stderr.close()
    res.fig("probes", f"{p.runs} commands, {len(served)} MCP servers, 1 Hub over {len(traps)} traps")
