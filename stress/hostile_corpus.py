"""The hostile world of ``python -m stress --only hostile``, generated from a seed.

- a decoy HOME (dot-files older than 180 s, ``.ssh``, ``*.json`` named like heartbeats, a fake
  pm.json, a fake ``.c3``), checksummed before and after the run (``checksum``/``diff``);
- real git repositories (``git init``, a commit, one ``git worktree add``) whose ``.c3/`` ships
  one family of traps each (symlinks into the decoy home, FIFOs, JSON nested 100,000 deep, a
  pm.json from a newer version, a FIFO for git's ``packed-refs``...), and a clean project;
- hostile transcripts in ``$CLAUDE_CONFIG_DIR/projects/<slug>/``: terminal escapes (OSC 52,
  OSC 0, OSC 8, CSI, C1, bidi, NUL), HTML, a line nested 100,000 deep, binary junk, a torn last
  line, a lone surrogate, FIFOs as a transcript and as a sub-agent file, a symlinked transcript
  pointing at a decoy file, a directory named like a transcript, a symlink loop in the
  projects root;
- the strings and payloads the doors are driven with.

Everything here is written with the standard library only (no c3async import): the world must
not depend on the code it attacks.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import stat
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .harness import Project, Sandbox, SessionTruth
from .transcripts import ai_title_line, assistant_line, claude_slug, custom_title_line, render, user_line

DEPTH = 100_000  # "nested 100,000 deep"
OLD = 86400 + 3600  # the decoy's files are this much older than now (well past the 180 s TTL)

# ----------------------------------------------------------------------------- hostile strings

ESC, BEL, ST = "\x1b", "\x07", "\x1b\\"
OSC52 = f"{ESC}]52;c;ZWNobyBIQUNLRUQgfCBzaA=={BEL}"  # writes the clipboard
OSC0 = f"{ESC}]0;pwned window title{BEL}"
OSC8 = f"{ESC}]8;;https://evil.example/steal{ST}innocent link{ESC}]8;;{ST}"
CSI_CLEAR = f"{ESC}[2J{ESC}[3J{ESC}[H"
CSI_COLOR = f"{ESC}[31;1;5m"
CSI_HIDE = f"{ESC}[8m"  # invisible text
C1_CSI = "\x9b2J"  # the 8-bit CSI, as a code point
C1_OSC = "\x9d0;c1 title\x9c"
BIDI = "\u202etxt.exe\u202c"
ISOLATE = "\u2066isolate\u2069"
NUL = "\x00"
BACKSPACE = "\x08\x08\x08"
CR = "\roverwritten"
DEL = "\x7f"
HTML = "<img src=x onerror=alert(1)>"
SCRIPT = "</script><script>alert(document.domain)</script>"
SHELL = "$(touch /tmp/c3-hostile-pwned)`id`"

# Every fragment that must never reach a terminal raw. ``argv`` ones hold no NUL (exec refuses).
FRAGMENTS = (
    OSC52,
    OSC0,
    OSC8,
    CSI_CLEAR,
    CSI_COLOR,
    CSI_HIDE,
    C1_CSI,
    C1_OSC,
    BIDI,
    ISOLATE,
    BEL,
    BACKSPACE,
    CR,
    DEL,
    HTML,
    SCRIPT,
    SHELL,
)
HOSTILE = f"note {OSC52}{OSC0}{OSC8}{CSI_CLEAR}{CSI_COLOR}{C1_CSI}{C1_OSC}{BIDI}{ISOLATE}{CR}{DEL} {HTML} {SHELL}"
HOSTILE_NUL = HOSTILE + NUL + "after nul"

# Raw bytes of what a terminal would act on: C0 controls but TAB and LF, DEL, C1 (as code
# points, and as raw bytes that are not UTF-8: surrogateescape maps them to U+DC80..U+DC9F),
# and the bidi controls.
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\udc80-\udc9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def control_hits(data: bytes) -> list[str]:
    """Where raw control characters are in ``data``: up to three, each shown with repr()."""
    text = data.decode("utf-8", "surrogateescape")
    hits = []
    for m in FORBIDDEN.finditer(text):
        start = max(0, m.start() - 16)
        hits.append(f"{m.group()!r} at {m.start()} in {text[start : m.start() + 16]!r}")
        if len(hits) == 3:
            break
    return hits


def random_hostile(rng: random.Random, words: int = 3) -> str:
    """A seed-chosen mix of escape fragments and words (no NUL: fit for argv)."""
    parts = []
    for _ in range(rng.randint(2, 5)):
        parts.append(rng.choice(FRAGMENTS))
        parts.append(
            " ".join(rng.choice(("fix", "retry", "parser", "cache", "deploy", "token", "queue")) for _ in range(words))
        )
    return "".join(parts)


def deep_array(depth: int = DEPTH) -> str:
    return "[" * depth + "]" * depth


def deep_object(depth: int = DEPTH) -> str:
    return '{"a":' * depth + "1" + "}" * depth


# ----------------------------------------------------------------------------- checksum


def checksum(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (lstat, never following a link): a regular file's bytes
    (sha256), mode, size and mtime; a symlink's target; a directory's mode, mtime and listing;
    any other kind by its mode."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel = os.path.relpath(dirpath, root)
        st = os.lstat(dirpath)
        out[rel + "/"] = ("dir", oct(st.st_mode), st.st_mtime_ns, tuple(sorted(dirnames + filenames)))
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            key = os.path.normpath(os.path.join(rel, name))
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                out[key] = ("symlink", os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
                out[key] = ("file", oct(st.st_mode), st.st_size, st.st_mtime_ns, digest)
            elif not stat.S_ISDIR(st.st_mode):
                out[key] = ("special", oct(st.st_mode))
    return out


def diff(before: dict[str, tuple], after: dict[str, tuple]) -> list[str]:
    """What changed, one short line per entry."""
    lines = []
    for key in sorted(before.keys() | after.keys()):
        a, b = before.get(key), after.get(key)
        if a == b:
            continue
        if a is None:
            lines.append(f"{key!r} appeared ({b[0]})")
        elif b is None:
            lines.append(f"{key!r} vanished (was {a[0]})")
        elif a[0] != b[0]:
            lines.append(f"{key!r} changed kind {a[0]} -> {b[0]}")
        elif a[0] == "file":
            what = [n for n, x, y in zip(("mode", "size", "mtime", "bytes"), a[1:], b[1:]) if x != y]
            lines.append(f"{key!r} {', '.join(what)} changed (size {a[2]} -> {b[2]})")
        elif a[0] == "dir":
            gone = sorted(set(a[3]) - set(b[3]))
            new = sorted(set(b[3]) - set(a[3]))
            lines.append(
                f"dir {key!r} changed: removed {gone[:4]!r}, added {new[:4]!r}"
                + ("" if gone or new else " (mode/mtime)")
            )
        else:
            lines.append(f"{key!r} {a!r} -> {b!r}")
    return lines


# ----------------------------------------------------------------------------- world


@dataclass
class Repo:
    """One project of the world: its path, transcripts and the trap it ships."""

    name: str
    path: Path
    folder: Path  # its transcripts folder
    trap: str  # what it ships, for messages
    sessions: list[str] = field(default_factory=list)  # legit sessions that must be listed
    names: tuple[str, ...] = ()  # what a refusal or warning about the trap must mention
    worktree: Path | None = None
    worktree_sessions: list[str] = field(default_factory=list)


@dataclass
class World:
    home: Path
    secret: str  # in decoy files only: never in any output
    canary: str  # in every transcript prompt: never in a Hub answer without the token
    clean: Project
    hostile: Repo
    repos: dict[str, Repo]
    hostile_listed: dict[str, str]  # label -> session id: hostile but real, must be listed
    hostile_never: dict[str, str]  # label -> id: special files / links, never listed
    hostile_titles: dict[str, str]  # label -> the title as written (--json must give it back as is)
    files_to_keep: dict[Path, bytes]  # documents c3async must never rewrite (content now)
    pm_unknown: Path | None = None
    counts: dict[str, int] = field(default_factory=dict)


GIT = [
    "git",
    "-c",
    "user.name=stress",
    "-c",
    "user.email=stress@example.invalid",
    "-c",
    "commit.gpgsign=false",
    "-c",
    "init.defaultBranch=main",
    "-c",
    "core.hooksPath=/dev/null",
]


def _git(sb: Sandbox, cwd: Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(HOME=str(sb.root / "git-home"), GIT_CONFIG_NOSYSTEM="1")
    subprocess.run([*GIT, *args], cwd=cwd, env=env, check=True, capture_output=True, timeout=60)


def _set_old(path: Path, now: float, rng: random.Random) -> None:
    when = now - OLD - rng.randint(0, 86400)
    os.utime(path, (when, when), follow_symlinks=False)


def _decoy_home(sb: Sandbox, rng: random.Random, secret: str, now: float) -> Path:
    home = sb.root / "decoy-home"
    home.mkdir()
    files = {
        ".bashrc": "# decoy .bashrc: sourcing this must never run anything c3async wrote\nalias ll='ls -l'\n",
        ".profile": '# decoy .profile\nexport PATH="$HOME/bin:$PATH"\n',
        ".bash_history": "ls\ncd work\n",
        ".viminfo": "# decoy viminfo\n",
        ".lesshst": ".less-history-file:\n",
        ".netrc": f"machine example.invalid login decoy password {secret}\n",
        ".ssh/authorized_keys": f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{secret} decoy@home\n",
        ".ssh/id_ed25519": f"-----BEGIN OPENSSH PRIVATE KEY-----\n{secret}\n-----END OPENSSH PRIVATE KEY-----\n",
        "settings.json": json.dumps({"theme": "dark", "token": secret}) + "\n",
        "notes.json": json.dumps({"notes": [secret]}) + "\n",
        ".config/app.json": json.dumps({"version": 1, "tasks": [{"id": "decoy", "title": secret}]}) + "\n",
        ".cache/keep.json": json.dumps({"cache": secret}) + "\n",
        "pmdir/pm.json": json.dumps(
            {
                "version": 1,
                "tasks": [{"id": "0decoy00", "title": f"DECOY TASK {secret}", "status": "backlog", "priority": "p0"}],
                "milestones": [],
                "decisions": [],
                "events": [],
            }
        )
        + "\n",
    }
    # *.json named like heartbeats, with an old ts: exactly what a pruner of .c3/live removes
    for _ in range(3):
        sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        files[f"{sid}.json"] = (
            json.dumps({"session_id": sid, "host_session_id": None, "ide": "decoy", "pid": 1, "ts": now - OLD}) + "\n"
        )
    # the target of a symlinked .c3: a whole fake state folder
    files["dotc3/session_marks.jsonl"] = (
        json.dumps(
            {
                "ts": now - OLD,
                "provider": "claude",
                "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                "op": "note",
                "summary": secret,
                "by": "user",
            }
        )
        + "\n"
    )
    files["dotc3/activity.jsonl"] = json.dumps({"ts": now - OLD, "kind": "decoy", "text": secret}) + "\n"
    hb = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    files[f"dotc3/live/{hb}.json"] = json.dumps({"session_id": hb, "ts": now - OLD, "pid": 1}) + "\n"
    files["dotc3/pm/pm.json"] = files["pmdir/pm.json"]
    for rel, text in files.items():
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    os.chmod(home / ".ssh", 0o700)
    for rel in (".ssh/authorized_keys", ".ssh/id_ed25519", ".netrc"):
        os.chmod(home / rel, 0o600)
    os.symlink(".bashrc", home / ".bash_profile")  # a symlink of its own, checksummed by target
    # a transcript-looking file for the symlinked transcript to point at
    (home / "secret-transcript.jsonl").write_bytes(b"")  # filled in when the hostile repo exists
    return home


def _finish_decoy(home: Path, now: float, rng: random.Random) -> None:
    """Age every entry (files first, then directories bottom-up, so listings keep old mtimes)."""
    for dirpath, dirnames, filenames in os.walk(home, topdown=False):
        for name in filenames + dirnames:
            _set_old(Path(dirpath) / name, now, rng)
        _set_old(Path(dirpath), now, rng)


def _sid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _session_lines(
    sid: str, cwd: str, prompt: str, ts: float, *, title: str | None = None, custom: bool = False, branch: str = "main"
) -> list[dict]:
    u = user_line(sid, cwd, prompt, ts)
    a = assistant_line(sid, cwd, f"Looking into it: {prompt[:40]}", ts + 1, u["uuid"])
    for line in (u, a):
        line["gitBranch"] = branch
    lines: list[dict] = [{"type": "permission-mode", "permissionMode": "default", "sessionId": sid}, u, a]
    if title is not None:
        lines.append(custom_title_line(sid, title) if custom else ai_title_line(sid, title))
    return lines


def _write(folder: Path, sid: str, chunks: list[dict | bytes], mtime: float) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{sid}.jsonl"
    path.write_bytes(b"".join(c if isinstance(c, bytes) else render([c]) for c in chunks))
    os.utime(path, (mtime, mtime))
    return path


def _git_repo(sb: Sandbox, path: Path) -> None:
    path.mkdir(parents=True)
    _git(sb, path, "init", "-q")
    (path / "README.md").write_text(f"# {path.name}\n")
    _git(sb, path, "add", "README.md")
    _git(sb, path, "commit", "-q", "-m", "init")


def build_world(sb: Sandbox, rng: random.Random, *, quick: bool) -> World:
    now = time.time()
    secret = f"DECOY-SECRET-{rng.getrandbits(48):012x}"
    canary = f"CANARY{rng.getrandbits(40):010x}"
    home = _decoy_home(sb, rng, secret, now)
    (sb.root / "git-home").mkdir()
    base = sb.work / "hostile"
    projects_root = sb.config / "projects"
    projects_root.mkdir(parents=True, exist_ok=True)
    counts = {"transcripts": 0, "special files": 0, "symlinks": 0, "deep documents": 0}

    def folder_of(path: Path) -> Path:
        return projects_root / claude_slug(str(path))

    def legit(
        repo: Repo, n: int, hostile_title: bool = True, *, cwd: Path | None = None, branch: str = "main"
    ) -> list[str]:
        cwd = cwd or repo.path
        folder = folder_of(cwd)
        ids = []
        for i in range(n):
            sid = _sid(rng)
            ts = now - 7200 + i * 60
            title = random_hostile(rng) if hostile_title and i == n - 1 else f"{repo.name} work {i}"
            lines = _session_lines(sid, str(cwd), f"{repo.name} task {i} {canary}", ts, title=title, branch=branch)
            _write(folder, sid, lines, ts + 30)
            counts["transcripts"] += 1
            ids.append(sid)
        return ids

    # --- the clean project: normal transcripts; marks are written during the run
    clean_path = base / "clean"
    _git_repo(sb, clean_path)
    clean = Project(str(clean_path), folder_of(clean_path))
    for i in range(6):
        sid = _sid(rng)
        ts = now - 3 * 86400 + i * 600
        prompt = f"clean task {i}: fix the {rng.choice(('retry', 'cache', 'queue', 'parser'))} bug {canary}"
        _write(
            clean.folder, sid, _session_lines(sid, str(clean_path), prompt, ts, title=f"AI title clean {i}"), ts + 60
        )
        clean.sessions[sid] = SessionTruth(
            sid, clean.folder / f"{sid}.jsonl", prompt, prompt, ai_title=f"AI title clean {i}"
        )
        counts["transcripts"] += 1

    # --- the hostile-transcripts project (a git repo with no .c3 of its own)
    hpath = base / "hostile-transcripts"
    _git_repo(sb, hpath)
    hostile = Repo(
        "hostile-transcripts",
        hpath,
        folder_of(hpath),
        "hostile transcripts (escapes, deep, binary, "
        "torn, lone surrogate, FIFOs, symlinked transcript, directory named like one)",
    )
    hf, cwd = hostile.folder, str(hpath)
    listed: dict[str, str] = {}
    never: dict[str, str] = {}
    t = now - 5000

    def add(label: str, build) -> str:
        nonlocal t
        sid = _sid(rng)
        t += 60
        _write(hf, sid, build(sid), t)
        counts["transcripts"] += 1
        listed[label] = sid
        return sid

    def lines(
        sid: str, prompt: str, title: str | None = None, custom: bool = False, branch: str = "main"
    ) -> list[dict]:
        return _session_lines(sid, cwd, prompt, t, title=title, custom=custom, branch=branch)

    add("osc52", lambda s: lines(s, f"osc {OSC0} prompt {canary}", f"{OSC52}clipboard title", True, f"br{OSC8}"))
    add(
        "csi",
        lambda s: lines(
            s,
            f"csi {C1_CSI}{C1_OSC} prompt {canary}",
            f"{CSI_CLEAR}{CSI_COLOR}red title{CSI_HIDE}",
            branch=f"main{CSI_CLEAR}",
        ),
    )
    add("bidi", lambda s: lines(s, f"bidi {BIDI}{ISOLATE}{BEL}{BACKSPACE}{CR}{DEL} {canary}", f"title {BIDI} reversed"))
    add("nul", lambda s: lines(s, f"nul {NUL} prompt {canary}", f"nul{NUL}title", branch=f"ma{NUL}in"))
    add("html", lambda s: lines(s, f"{SCRIPT} {canary}", HTML, True, branch='"><svg onload=alert(1)>'))
    deep_line = ('{"type":"user","message":{"role":"user","content":' + deep_array() + '},"sessionId":"x"}\n').encode()
    add(
        "deep",
        lambda s: [
            *lines(s, f"deep survivor {canary}"),
            deep_line,
            (deep_object() + "\n").encode(),
            ai_title_line(s, "deep survivor title"),
        ],
    )
    junk = rng.randbytes(8192)
    add(
        "binary",
        lambda s: [
            *lines(s, f"binary survivor {canary}"),
            junk + b"\n",
            b"\xff\xfe\x00\x9b[2J\n",
            ai_title_line(s, "binary survivor title"),
        ],
    )
    add(
        "torn",
        lambda s: [
            *lines(s, f"torn survivor {canary}", "torn survivor title"),
            b'{"type":"custom-title","customTitle":"torn \\u001b]52;c;AAAA',
        ],
    )

    def surrogate(s: str) -> list[dict | bytes]:
        perm, u, a = lines(s, "SURROGATE")
        return [
            perm,
            render([u]).replace(b"SURROGATE", b"lone \\udfff\\ud800 survivor " + canary.encode()),
            a,
            render([custom_title_line(s, "lone SURR surrogate")]).replace(b"SURR", b"\\ud800"),
        ]

    add("surrogate", surrogate)
    huge = "A" * (3 << 20)
    add("huge-line", lambda s: lines(s, f"huge line survivor {canary} {huge}", f"huge {OSC52}"))
    for k in range(4 if quick else 24):
        prompt, title, branch = random_hostile(rng), random_hostile(rng), random_hostile(rng, 1)[:60]
        custom = rng.random() < 0.5
        add(f"random-{k}", lambda s, p=prompt, ti=title, b=branch, c=custom: lines(s, f"{p} {canary}", ti, c, b))
    # sub-agent files of a real session: a FIFO and a normal one
    sub = hf / listed["osc52"] / "subagents"
    sub.mkdir(parents=True)
    os.mkfifo(sub / "agent-x.jsonl")
    (sub / "agent-y.jsonl").write_bytes(render([user_line(listed["osc52"], cwd, f"subagent {OSC52}", t)]))
    # special entries that must never become rows
    fifo = _sid(rng)
    os.mkfifo(hf / f"{fifo}.jsonl")
    never["fifo"] = fifo
    link = _sid(rng)
    secret_tx = home / "secret-transcript.jsonl"
    secret_tx.write_bytes(render(_session_lines(link, cwd, f"{secret} prompt", t, title=f"{secret} title")))
    os.symlink(secret_tx, hf / f"{link}.jsonl")
    never["symlink"] = link
    dirlike = _sid(rng)
    (hf / f"{dirlike}.jsonl").mkdir()
    never["directory"] = dirlike
    # a file whose NAME carries escapes (not a uuid: not a session, but it is in the folder)
    (hf / f"{ESC}]0;pwn{BEL}{BIDI}.jsonl").write_bytes(render([user_line("x", cwd, "named", t)]))
    counts["special files"] += 3
    counts["symlinks"] += 1

    # --- the trap repositories, one family of traps each
    repos: dict[str, Repo] = {}
    keep: dict[Path, bytes] = {}

    def trap_repo(name: str, trap: str, names: tuple[str, ...] = ()) -> Repo:
        path = base / name
        _git_repo(sb, path)
        repo = Repo(name, path, folder_of(path), trap, names=names)
        repo.sessions = legit(repo, 3)
        repos[name] = repo
        return repo

    def c3(repo: Repo) -> Path:
        d = repo.path / ".c3"
        d.mkdir(exist_ok=True)
        return d

    r = trap_repo("trap-live", ".c3/live -> the decoy home", ("symlink", "symbolic link", ".c3/live"))
    os.symlink(home, c3(r) / "live")

    r = trap_repo(
        "trap-logs",
        ".c3/session_marks.jsonl -> ~/.bashrc, .c3/activity.jsonl -> ~/.profile",
        ("symlink", "symbolic link", "session_marks.jsonl", "activity.jsonl"),
    )
    os.symlink(home / ".bashrc", c3(r) / "session_marks.jsonl")
    os.symlink(home / ".profile", c3(r) / "activity.jsonl")
    wt = base / "trap-logs-wt"
    _git(sb, r.path, "worktree", "add", "-q", "-b", "wt-branch", str(wt))
    r.worktree = wt
    r.worktree_sessions = legit(r, 1, cwd=wt, branch="wt-branch")

    r = trap_repo("trap-c3link", ".c3 -> a decoy folder (its own marks, live, pm)", ("symlink", "symbolic link", ".c3"))
    os.symlink(home / "dotc3", r.path / ".c3")

    r = trap_repo("trap-cache", ".c3/cache -> ~/.cache", ("symlink", "symbolic link", "cache"))
    os.symlink(home / ".cache", c3(r) / "cache")

    r = trap_repo("trap-sessions", ".c3/sessions -> the decoy home", ("symlink", "symbolic link", "sessions"))
    os.symlink(home, c3(r) / "sessions")

    r = trap_repo("trap-pmdir", ".c3/pm -> a decoy folder holding a pm.json", ("symlink", "symbolic link", "pm"))
    os.symlink(home / "pmdir", c3(r) / "pm")

    r = trap_repo("trap-pmfile", ".c3/pm/pm.json -> ~/.config/app.json", ("symlink", "symbolic link", "pm.json"))
    (c3(r) / "pm").mkdir()
    os.symlink(home / ".config" / "app.json", c3(r) / "pm" / "pm.json")
    counts["symlinks"] += 8

    r = trap_repo(
        "trap-fifo", "a FIFO named .c3/activity.jsonl", ("fifo", "regular file", "special file", "activity.jsonl")
    )
    os.mkfifo(c3(r) / "activity.jsonl")

    r = trap_repo("trap-deepcfg", ".c3/config.json nested 100,000 deep")
    (c3(r) / "config.json").write_text(deep_object())

    r = trap_repo(
        "trap-deepdata",
        "a marks line, an activity line, the catalog cache, a heartbeat, a session "
        "record and pm.json nested 100,000 deep",
        ("pm.json", "deep", "nest"),
    )
    d = c3(r)
    for sub_dir in ("cache", "live", "sessions", "pm"):
        (d / sub_dir).mkdir()
    mark = {
        "ts": now - 60,
        "provider": "claude",
        "id": r.sessions[0],
        "op": "note",
        "summary": "before-deep",
        "next_steps": None,
        "by": "user",
        "by_session": None,
    }
    after = dict(mark, ts=now - 30, summary="after-deep")
    (d / "session_marks.jsonl").write_bytes(
        render([mark]) + (deep_array() + "\n").encode() + ('{"id":' + deep_object() + "}\n").encode() + render([after])
    )
    (d / "activity.jsonl").write_bytes(
        (deep_array() + "\n").encode() + render([{"ts": now - 20, "kind": "session_start", "session_id": _sid(rng)}])
    )
    (d / "cache" / "session_catalog.json").write_text(deep_object())
    (d / "live" / f"{_sid(rng)}.json").write_text(deep_object())
    (d / "sessions" / f"{_sid(rng)}.json").write_text(deep_object())
    (d / "pm" / "pm.json").write_text('{"version":1,"tasks":' + deep_array() + "}")
    keep[d / "pm" / "pm.json"] = (d / "pm" / "pm.json").read_bytes()
    counts["deep documents"] += 7

    r = trap_repo(
        "trap-specials",
        "FIFOs as a heartbeat, a session record, pm.json and session_stats.jsonl; a directory as the catalog cache",
        ("fifo", "regular file", "special file", "not a file", "pm.json", "session_stats", "session_catalog"),
    )
    d = c3(r)
    for sub_dir in ("cache", "live", "sessions", "pm"):
        (d / sub_dir).mkdir()
    os.mkfifo(d / "live" / f"{_sid(rng)}.json")
    os.mkfifo(d / "sessions" / f"{_sid(rng)}.json")
    os.mkfifo(d / "pm" / "pm.json")
    os.mkfifo(d / "session_stats.jsonl")
    (d / "cache" / "session_catalog.json").mkdir()
    counts["special files"] += 5

    r = trap_repo(
        "trap-pmfuture", "pm.json of version 99 with fields this version does not know", ("version", "upgrade", "newer")
    )
    (c3(r) / "pm").mkdir()
    future = {
        "version": 99,
        "tasks": [
            {
                "id": "f0000001",
                "title": "from the future",
                "status": "backlog",
                "priority": "p2",
                "x_estimate": {"points": 3},
            }
        ],
        "milestones": [],
        "decisions": [],
        "events": [],
        "x_sprints": [{"name": "s1"}],
    }
    (c3(r) / "pm" / "pm.json").write_text(json.dumps(future))
    keep[c3(r) / "pm" / "pm.json"] = (c3(r) / "pm" / "pm.json").read_bytes()

    r = trap_repo("trap-pmunknown", "pm.json of this version with unknown fields (kept on every rewrite)")
    (c3(r) / "pm").mkdir()
    unknown = {
        "version": 1,
        "tasks": [
            {
                "id": "a0000001",
                "title": "has unknown fields",
                "status": "backlog",
                "priority": "p2",
                "x_color": "teal",
                "x_estimate": {"points": 5},
            }
        ],
        "milestones": [],
        "decisions": [],
        "events": [],
        "x_sprints": [{"name": "sprint-7"}],
    }
    (c3(r) / "pm" / "pm.json").write_text(json.dumps(unknown))
    pm_unknown = c3(r) / "pm" / "pm.json"

    r = trap_repo("trap-gitfifo", "a FIFO as the repository's .git/packed-refs")
    os.mkfifo(r.path / ".git" / "packed-refs")
    counts["special files"] += 5

    _finish_decoy(home, now, rng)
    counts["repositories"] = len(repos) + 2
    titles = {
        "osc52": f"{OSC52}clipboard title",
        "csi": f"{CSI_CLEAR}{CSI_COLOR}red title{CSI_HIDE}",
        "bidi": f"title {BIDI} reversed",
        "html": HTML,
        "nul": f"nul{NUL}title",
    }
    return World(home, secret, canary, clean, hostile, repos, listed, never, titles, keep, pm_unknown, counts)


def projects_root_traps(sb: Sandbox) -> list[Path]:
    """Entries of ``$CLAUDE_CONFIG_DIR/projects`` that must cost only themselves: a symlink loop
    (``loop -> loop``), a FIFO and a plain file where folders belong. Returns what was made."""
    root = sb.config / "projects"
    made = [root / "loop", root / "-fifo-where-a-folder-belongs", root / "-a-file-where-a-folder-belongs"]
    os.symlink("loop", made[0])
    os.mkfifo(made[1])
    made[2].write_bytes(b"not a folder\n")
    return made
