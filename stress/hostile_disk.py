"""A full disk: ``$C3_HOME`` and a project (its ``.c3``) on a small tmpfs filled to the brim, Claude
Code's folders on the sandbox's disk, driven through every door: ``sessions`` with a kept session
bigger than the free space (policy ``all``, the transcript written after the disk filled),
``index`` and ``search`` over a healthy index, ``mark``, ``tasks add``, a real ``c3async serve``
(a note and a task), the Hub's mark POST (a Hub started before the disk filled), and a Hub
started on the full disk. Then a writer killed halfway (SIGKILL while ``tasks add`` writes
``pm.json``), and the space freed.

Every probe: no traceback, no hang, exit 0 or 1 as expected, and a full disk said as such
("is full", the bytes free), never as a damaged index; nothing half-written (the marks log and
``pm.json`` byte for byte as they were, no temp file, no partial copy in the archive, no shard
put aside or replaced); the kept session not tried again by the next listing (the free space and
the tree stay as they were); a decoy HOME checksummed before and after. Once space is freed,
each door works again and the kept session is copied whole. Needs root (to mount); without it
the scenario says so.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from . import hostile_corpus as hc
from .fulldisk import fill, free, free_up, killed_halfway, mounted
from .harness import PY, Result
from .hostile_neighbour import start_hub
from .probe import Probe, mcp, probe
from .transcripts import assistant_line, claude_slug, render, user_line

CLASS = "a full disk"
FULL = ("is full", "bytes free")


def _transcript(p: Probe, project: str, prompt: str, filler: int = 0) -> tuple[str, Path]:
    """A session of ``project`` in Claude Code's folder (on the sandbox's disk), ``filler``
    assistant lines of ~100 bytes after its first exchange."""
    sid = str(uuid.uuid4())
    folder = p.config / "projects" / claude_slug(project)
    folder.mkdir(parents=True, exist_ok=True)
    ts = time.time() - 3600
    u = user_line(sid, project, prompt, ts)
    lines = [u, assistant_line(sid, project, f"on it: {prompt}", ts + 1, u["uuid"])]
    lines += [assistant_line(sid, project, f"step {i} of the zeppelin work " + "z" * 40, ts + 2) for i in range(filler)]
    path = folder / f"{sid}.jsonl"
    path.write_bytes(render(lines))
    return sid, path


def _decoy(home: Path) -> None:
    for rel, text in {".bashrc": "alias ll='ls -l'\n", ".ssh/id_ed25519": "decoy key\n", "notes.json": "{}\n"}.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text)


def _tree(root: Path) -> dict[str, int]:
    """Every file under ``root`` but the filler: its size."""
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            path = Path(d, n)
            if n != "filler.bin":
                out[str(path.relative_to(root))] = path.lstat().st_size
    return out


def _whole_lines(data: bytes) -> bool:
    try:
        return all(isinstance(json.loads(line), dict) for line in data.splitlines()) and data[-1:] in (b"", b"\n")
    except ValueError:
        return False


def _post_mark(port: int, token: str, sid: str, project: str) -> tuple[int, str]:
    body = json.dumps({"op": "note", "summary": "from the Hub " * 600, "project": project}).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/sessions/{sid}/marks",
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


def check(res: Result, sb, quick: bool) -> None:
    p = probe(res, sb, "disk")
    _decoy(p.root / "home")
    decoy = hc.checksum(p.root / "home")
    with mounted(p.root / "small", "16m") as small:
        if small is None:
            res.note("mounting a tmpfs needs root: the full disk was not tried")
            return
        _full_disk(p, small, quick)
    res.check(
        not hc.diff(decoy, hc.checksum(p.root / "home")),
        "the decoy HOME is untouched",
        "; ".join(hc.diff(decoy, hc.checksum(p.root / "home"))[:4]),
    )
    res.fig("probes", f"{p.runs} commands")


def _full_disk(p: Probe, small: Path, quick: bool) -> None:
    res = p.res
    p.env["C3_HOME"] = str(small / "c3home")
    project = str(small / "work" / "app")
    Path(project).mkdir(parents=True)
    state = Path(project, ".c3")
    state.mkdir()
    (state / "config.json").write_text('{"keep": ["all"]}')
    first, _ = _transcript(p, project, "the first zeppelin")
    p.run("sessions (before)", "sessions", "--project", project)
    p.run("index (before)", "index", "--quiet")
    p.run("tasks add (before)", "tasks", "add", "--title", "before", "--project", project)
    p.run("mark note (before)", "mark", "note", first, "--summary", "before", "--project", project)
    hub, port, token = start_hub(p.env)
    try:
        shards = small / "c3home" / "search"
        inodes = {n: (shards / n).stat().st_ino for n in os.listdir(shards) if n.endswith(".db")}
        marks, pm = state / "session_marks.jsonl", state / "pm" / "pm.json"
        kept = {f: f.read_bytes() for f in (marks, pm)}
        fill(small)
        res.fig("free after the fill", f"{free(small)} bytes")
        big, big_path = _transcript(p, project, "the big zeppelin", filler=3000)
        before = _tree(small)

        listed = p.run(
            "sessions with a kept session bigger than the free space",
            "sessions",
            "--project",
            project,
            says=(big, "not copied", "bytes free"),
        )
        res.check(listed.stderr.count("\n") == 1, "one line says it", repr(listed.stderr[-400:]))
        tried = _tree(small)
        p.run("sessions again", "sessions", "--project", project, "--json", says=(big,))
        res.check(
            free(small) == 0 and _tree(small) == tried,
            "the next listing does not try the copy again",
            f"{free(small)} bytes free; changed: {sorted(set(_tree(small).items()) ^ set(tried.items()))[:4]}",
        )
        for what, args in (
            ("index", ["index"]),
            ("search", ["search", "zeppelin", "--project", project]),
            ("mark note", ["mark", "note", first, "--summary", "after " * 1300, "--project", project]),
            ("tasks add", ["tasks", "add", "--title", "after", "--project", project]),
            ("mark keep", ["mark", "keep", big, "--project", project]),  # its short line may fit: then "not copied"
        ):
            done = p.run(f"{what} on the full disk", *args, expect=(1,), says=FULL[1:] if what == "mark keep" else FULL)
            res.check(
                "damaged" not in done.stderr and done.stderr.count("\n") == 1,
                "a full disk is one line, no damage",
                f"{what}: {done.stderr[-300:]!r}",
            )
        answers = mcp(
            p,
            project,
            [
                (
                    "c3_session",
                    {"action": "note", "target": first, "data": "after " * 1300, "reasoning": "then " * 1500},
                ),
                ("c3_task", {"action": "add", "title": "after"}),
            ],
        )
        for is_error, text in answers:
            res.check(is_error and all(w in text for w in FULL), "an MCP tool error says the disk is full", text[:300])
        status, body = _post_mark(port, token, first, project)
        res.check(
            status == 507 and all(w in body for w in FULL),
            "the Hub answers 507 saying the disk is full",
            f"{status} {body[:300]}",
        )
        second = subprocess.run(
            [PY, "-m", "c3async", "hub", "--port", "0"],
            env=p.env,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=p.root,
        )
        res.check(
            second.returncode == 1 and "Traceback" not in second.stderr and "is full" in second.stderr,
            "a Hub started on the full disk says so",
            f"{second.returncode}: {second.stderr[-300:]!r}",
        )

        res.check(pm.read_bytes() == kept[pm], "nothing half-written: pm.json", "changed")
        added = marks.read_bytes()[len(kept[marks]) :]
        res.check(
            marks.read_bytes().startswith(kept[marks]) and _whole_lines(added),
            "nothing half-written: the marks log (at most whole lines added)",
            repr(added[-200:]),
        )
        res.check(
            not (small / "c3home" / "archive" / big_path.parent.name / big_path.name).exists(),
            "no partial copy in the archive",
            big,
        )
        now = {n: (shards / n).stat().st_ino for n in os.listdir(shards) if n.endswith(".db")}
        res.check(
            now == inodes and not [n for n in os.listdir(shards) if "aside" in n],
            "no healthy shard put aside or replaced",
            f"{sorted(inodes)} -> {sorted(now)}",
        )
    finally:
        hub.send_signal(signal.SIGTERM)
        try:
            hub.wait(10)
        except subprocess.TimeoutExpired:
            hub.kill()
            hub.wait()
    # Looked at once the Hub has stopped: a live writer's temp file exists for the moment of its
    # write; one left after every process ended is stray.
    stray = [
        n
        for n, size in _tree(small).items()
        if n.endswith(".tmp") or (n not in before and size > 0 and not n.endswith(("-wal", "-shm")))
    ]
    res.check(not stray, "no stray file", ", ".join(stray[:4]))

    free_up(small)
    p.run("sessions once space is freed", "sessions", "--project", project)
    copy = small / "c3home" / "archive" / big_path.parent.name / big_path.name
    res.check(
        copy.exists() and copy.read_bytes() == big_path.read_bytes(),
        "the kept session is copied whole once there is room",
        str(copy),
    )
    found = p.run("search once space is freed", "search", "zeppelin", "--project", project, "--json")
    ids = {r["id"] for r in json.loads(found.stdout or '{"results": []}')["results"]}
    res.check(ids == {first, big}, "search finds both sessions", str(ids))
    p.run("mark note once space is freed", "mark", "note", first, "--summary", "after", "--project", project)
    _killed_writer(p, project)


def _killed_writer(p: Probe, project: str) -> None:
    """``tasks add`` killed while its temp file is written: the temp stays (a killed writer cannot
    clean up), and the next write of pm.json removes it once it is an hour old."""
    res = p.res
    held = killed_halfway(["tasks", "add", "--title", "killed halfway", "--project", project], p.env)
    res.check(held, "the writer is held halfway", "it wrote no document")
    pm = Path(project, ".c3", "pm")
    left = [pm / n for n in os.listdir(pm) if n.endswith(".tmp")]
    res.check(len(left) == 1, "a killed writer leaves its temp file", str(left))
    hour_ago = time.time() - 3660
    for path in left:
        os.utime(path, (hour_ago, hour_ago))
    young = pm / f".pm.json.{os.urandom(8).hex()}.tmp"
    young.write_bytes(b"a live writer's")
    p.run("tasks add after a killed writer", "tasks", "add", "--title", "next", "--project", project)
    res.check(
        not any(path.exists() for path in left) and young.exists(),
        "the next write removes the killed writer's temp file, not a live one's",
        f"left: {[x.name for x in left if x.exists()]}, young there: {young.exists()}",
    )
    young.unlink()
