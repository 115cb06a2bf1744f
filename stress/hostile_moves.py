"""Moved folders: ``c3async projects --move OLD NEW`` and its undo when what it is given, or what
it finds, is wrong or hostile. Through the CLI, each call a process:

- NEW a symlink (to a private folder), the home folder, ``/``, Claude Code's own config folder,
  a folder inside OLD: refused, naming why, and nothing is put anywhere;
- NEW's transcript folder in Claude Code's projects folder a symlink to a private folder:
  nothing is written through it (the private folder is unchanged);
- a session of OLD's folder that is a symlink to a private file: never linked or copied;
- NEW another project with sessions of its own, one of them holding a name OLD's session has:
  never overwritten; the undo takes out only what the move added, and keeps a file it added that
  was replaced meanwhile or whose original in OLD's folder is gone (it is the only copy then);
- eight moves of one folder at once: one record, each file linked once, the listing whole;
- a ``moves.json`` that does not parse: listings go on (said once), ``--move`` refuses and
  never rewrites it; one whose record moves ``/etc`` into a project and names a private file and
  ``/etc`` as what it added and made: the listing lists, the undo touches neither;
- many sessions: ``--move`` and its undo in bounded time (figures), the undo exact.

Every probe: no traceback, no hang, exit 0, 1 or 2, and the expected outcome.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from .harness import PY, Result
from .probe import Probe, probe
from .transcripts import claude_slug

CLASS = "moved folders"

MANY, FEW = 2000, 300  # sessions moved at once (full run, quick run)
MOVE_S = 60.0  # a hang guard for moving thousands of sessions (measured: a few seconds)


def check(res: Result, sb, quick: bool) -> None:
    p = probe(res, sb, "moves")
    _refused_targets(p)
    _linked_folders(p)
    _another_project(p)
    _at_once(p)
    _bad_record(p)
    _git_asks_nothing(p)
    _many(p, FEW if quick else MANY)
    res.fig("probes", f"{p.runs} commands")


def _folder(p: Probe, project: str) -> Path:
    return p.config / "projects" / claude_slug(project)


def _tree(root: Path) -> dict[str, object]:
    """Every name under ``root``: a folder as such, a file or link with its inode, size and mtime."""
    out: dict[str, object] = {}
    for here, dirs, files in os.walk(root):
        for name in dirs:
            out[os.path.relpath(os.path.join(here, name), root)] = "folder"
        for name in files:
            st = os.lstat(os.path.join(here, name))
            out[os.path.relpath(os.path.join(here, name), root)] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return out


def _moves(p: Probe) -> list[dict]:
    path = p.home / "moves.json"
    try:
        return json.loads(path.read_text())["moves"]
    except (OSError, ValueError, KeyError):
        return []


def _refused_targets(p: Probe) -> None:
    old = p.project("refused-src")
    p.session(old, "a session to move")
    private = p.root / "home" / "private-folder"
    private.mkdir()
    link = Path(p.project("refused-base")) / "link"
    link.symlink_to(private)
    inner = Path(old) / "inner"
    inner.mkdir()
    before = _tree(p.config)
    for what, new, word in (
        ("into a symlink", str(link), "symlink"),
        ("into the home folder", str(p.root / "home"), "home folder"),
        ("into /", "/", "not a project"),
        ("into Claude Code's folder", str(p.config), "not a project"),
        ("into a folder inside OLD", str(inner), "inside"),
        ("into a folder that is not there", str(p.root / "work" / "nowhere"), "not a folder"),
    ):
        p.run(f"--move {what}", "projects", "--move", old, new, expect=(1, 2), says=(word,))
    p.res.check(_tree(p.config) == before, "a refused move puts nothing into Claude Code's folders", "")
    p.res.check(not any(private.iterdir()), "nothing is written through a link", str(private))
    p.res.check(_moves(p) == [], "a refused move records nothing", str(_moves(p))[:300])


def _linked_folders(p: Probe) -> None:
    old, new = p.project("links-src"), p.project("links-dst")
    kept = p.session(old, "a plain session")
    secret = p.root / "home" / "secret.jsonl"
    secret.write_text(
        json.dumps({"type": "user", "cwd": old, "message": {"role": "user", "content": "the private words"}}) + "\n"
    )
    planted = "0badc0de-0000-4000-8000-000000000001"
    (_folder(p, old) / f"{planted}.jsonl").symlink_to(secret)
    private = p.root / "home" / "private-target"
    private.mkdir()
    _folder(p, new).symlink_to(private)  # NEW's transcript folder: a link out
    p.run("--move into a linked transcript folder", "projects", "--move", old, new, expect=(1,), says=("symlink",))
    p.res.check(not any(private.iterdir()), "nothing is written through a linked transcript folder", str(private))
    _folder(p, new).unlink()
    proc = p.run("--move past a linked session file", "projects", "--move", old, new, "--json")
    done = json.loads(proc.stdout or "{}")
    p.res.check(done.get("sessions") == 1, "the real session is moved", proc.stdout[-300:])
    p.res.check(not (_folder(p, new) / f"{planted}.jsonl").exists(), "a linked session file is never moved", "")
    rows = p.rows(new)
    p.res.check(set(rows) == {kept}, "the new folder lists the old folder's session only", str(list(rows)))
    shown = p.run("sessions of the new folder", "sessions", "--project", new)
    p.res.check("private words" not in shown.stdout + shown.stderr, "the linked file is never shown", "")


def _another_project(p: Probe) -> None:
    old, new = p.project("merge-src"), p.project("merge-dst")
    ours = [p.session(old, f"ours {i}") for i in range(3)]
    theirs = p.session(new, "theirs")
    clash = _folder(p, new) / f"{ours[0]}.jsonl"
    clash.write_bytes(b'{"their":"own bytes"}\n')
    own = _tree(_folder(p, new))
    proc = p.run("--move into a project with sessions of its own", "projects", "--move", old, new)
    p.res.check(f"kept {clash}" in proc.stderr, "a name NEW's folder has is said and kept", proc.stderr[-300:])
    p.res.check(clash.read_bytes() == b'{"their":"own bytes"}\n', "a file of NEW's is never overwritten", "")
    rows = p.rows(new)
    p.res.check({theirs, *ours[1:]} <= set(rows), "NEW lists its own sessions and OLD's", str(sorted(rows)))
    # one added file replaced by another file, another's original deleted: both stay
    replaced = _folder(p, new) / f"{ours[1]}.jsonl"
    data = replaced.read_bytes()
    replaced.unlink()
    replaced.write_bytes(data)
    (_folder(p, old) / f"{ours[2]}.jsonl").unlink()
    proc = p.run("the undo of a move into a project with sessions", "projects", "--move", new, old)
    p.res.check(proc.stderr.count("kept") == 2, "the undo keeps what is no longer what it added", proc.stderr[-400:])
    p.res.check(replaced.read_bytes() == data, "a replaced file stays", str(replaced))
    p.res.check((_folder(p, new) / f"{ours[2]}.jsonl").exists(), "the only copy stays", ours[2])
    left = {k for k in _tree(_folder(p, new)) if k not in own}
    p.res.check(left == {f"{ours[1]}.jsonl", f"{ours[2]}.jsonl"}, "the undo takes out what it added", str(left))
    p.res.check(not [m for m in _moves(p) if m["old"] == old], "the undo drops the record", "")


def _at_once(p: Probe) -> None:
    old, new = p.project("race-src"), p.project("race-dst")
    ids = {p.session(old, f"race {i}") for i in range(20)}
    procs = [
        subprocess.Popen(
            [PY, "-m", "c3async", "projects", "--move", old, new, "--json"],
            env=p.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    outs = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        outs.append((proc.returncode, out, err))
    p.runs += len(procs)
    p.res.check(
        all(code == 0 and "Traceback" not in err for code, _, err in outs),
        "moves at once all succeed",
        str([(c, e[-200:]) for c, _, e in outs if c != 0])[:400],
    )
    linked = sum(json.loads(out or "{}").get("linked", 0) for _, out, _ in outs)
    p.res.check(linked == len(ids), "each file is linked once", f"{linked} links for {len(ids)} sessions")
    records = [m for m in _moves(p) if m["old"] == old]
    p.res.check(
        len(records) == 1 and len(records[0]["added"]) == len(ids),
        "one record of the move",
        str([(len(m["added"])) for m in records]),
    )
    p.res.check(set(p.rows(new)) == ids, "the listing is whole", "")
    p.run("the undo after moves at once", "projects", "--move", new, old)
    p.res.check(not any(_folder(p, new).glob("*.jsonl")), "the undo takes out every link", "")


def _bad_record(p: Probe) -> None:
    old, new = p.project("record-src"), p.project("record-dst")
    sid = p.session(old, "work")
    moves = p.home / "moves.json"
    moves.parent.mkdir(parents=True, exist_ok=True)
    moves.write_text('{"version": 1, "moves": [')
    proc = p.run("sessions under a corrupt moves.json", "sessions", "--project", old, "--json")
    p.res.check(sid in proc.stdout, "a listing goes on without the moves", proc.stderr[-300:])
    p.res.check(proc.stderr.count("moves.json") == 1, "a corrupt moves.json is said once", proc.stderr[-300:])
    p.run("--move under a corrupt moves.json", "projects", "--move", old, new, expect=(1,), says=("moves.json",))
    p.res.check(moves.read_text() == '{"version": 1, "moves": [', "a corrupt moves.json is never rewritten", "")

    victim = p.root / "home" / "victim.txt"
    victim.write_text("keep me")
    st = victim.stat()
    added = {
        "path": str(victim),
        "source": str(victim),
        "dev": st.st_dev,
        "ino": st.st_ino,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "linked": True,
        "digest": "",
    }
    forged = {"id": "forged", "old": "/etc", "new": new, "at": 0, "added": [added], "made": ["/etc", str(p.root)]}
    moves.write_text(json.dumps({"version": 1, "moves": [forged]}))
    p.run("sessions with a record moving /etc", "sessions", "--project", new, "--json")
    p.run("projects with a record moving /etc", "projects", "--json")
    p.run("the undo of a forged record", "projects", "--move", new, "/etc", says=("not touched",))
    p.res.check(victim.read_text() == "keep me", "a file the record names outside NEW's folder is never removed", "")
    p.res.check(os.path.isdir("/etc") and p.root.is_dir(), "a folder the record names elsewhere is never removed", "")
    loop = [{"id": "a", "old": old, "new": new, "at": 0}, {"id": "b", "old": new, "new": old, "at": 0}]
    moves.write_text(json.dumps({"version": 1, "moves": loop}))
    proc = p.run("sessions with moves in a loop", "sessions", "--project", new, "--json")
    p.res.check(sid in proc.stdout, "moves in a loop end", proc.stderr[-300:])
    moves.unlink()


def _git_asks_nothing(p: Probe) -> None:
    """A found project whose repository's config names commands (as one unpacked from an archive
    can): listing it, which asks git for its root commit, runs none of them."""
    proj = p.project("git-config")
    p.session(proj, "work in a booby-trapped repository")
    marker = p.root / "home" / "ran"
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", proj], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "start"], cwd=proj, check=True)
    for key in ("core.fsmonitor", "core.pager", "gpg.program", "core.sshCommand", "core.askPass"):
        subprocess.run(["git", "config", key, f"touch {marker}"], cwd=proj, check=True)
    subprocess.run(["git", "config", "log.showSignature", "true"], cwd=proj, check=True)
    proc = p.run("projects over a repository whose config names commands", "projects", "--json")
    listed = {e["path"]: e for e in json.loads(proc.stdout or "[]")}
    p.res.check(proj in listed, "the project is listed", str(list(listed))[:300])
    p.res.check(not marker.exists(), "asking git for a root commit runs no command a repository names", str(marker))


def _many(p: Probe, n: int) -> None:
    old, new = p.project("many-src"), p.project("many-dst")
    for i in range(n):
        p.session(old, f"session {i} of a big project")
    p.run("list before the move", "sessions", "--project", old, "--json")
    before = _tree(p.config / "projects")
    started = time.perf_counter()
    proc = p.run(f"--move {n:,} sessions", "projects", "--move", old, new, "--json")
    took = time.perf_counter() - started
    p.res.fig(f"--move, {n:,} sessions", f"{took:.2f} s")
    p.res.check(took < MOVE_S, "a move is bounded in time", f"{took:.1f} s")
    p.res.check(json.loads(proc.stdout or "{}").get("linked") == n, "every session is linked", proc.stdout[-200:])
    started = time.perf_counter()
    rows = p.rows(new)
    p.res.fig(f"the new folder's first listing, {n:,} moved sessions", f"{time.perf_counter() - started:.2f} s")
    p.res.check(len(rows) == min(n, 200), "the new folder lists them (the newest 200)", str(len(rows)))
    started = time.perf_counter()
    p.run(f"the undo of {n:,} sessions", "projects", "--move", new, old)
    p.res.fig(f"the undo, {n:,} sessions", f"{time.perf_counter() - started:.2f} s")
    after = _tree(p.config / "projects")
    p.res.check(
        after == before, "the undo leaves Claude Code's folders as they were", str(set(after) ^ set(before))[:300]
    )
