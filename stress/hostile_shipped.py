"""Shipped state: a repository whose ``.c3`` logs name 50,000 folders, relative folders and
another project's folder; a ``.git`` whose config moves the root to the parent; a ``.git``
folder listing another project as its worktree; a ``.claude`` linked outside; folder names with a
newline and ``;``: no other folder's session is served, the parent gets no ``.c3``, nothing is
written through the link, and every resume command parses to its words."""

from __future__ import annotations

import json
import shlex
import time
import uuid
from pathlib import Path

from .harness import Result
from .probe import mcp, probe

CLASS = "shipped .c3 and .git"


def check(res: Result, sb, quick: bool) -> None:
    p = probe(res, sb, "shipped")
    victim = p.project("victim")
    secret = p.session(victim, "the victim's private prompt")
    repo = Path(p.project("shipped"))
    own = p.session(str(repo), "the shipped repository's own session")
    c3 = repo / ".c3"
    c3.mkdir()
    n = 20_000 if quick else 200_000
    rows = [
        json.dumps({"ts": i, "kind": "session_start", "session_id": str(uuid.UUID(int=i)), "cwd": f"{repo}/d{i}"})
        for i in range(n)
    ]
    for cwd in ("..", "../victim", victim, f"{repo}/../victim", "victim"):
        rows.append(json.dumps({"ts": n, "kind": "session_start", "session_id": secret, "cwd": cwd}))
    (c3 / "activity.jsonl").write_text("\n".join(rows) + "\n")
    (c3 / "sessions").mkdir()
    (c3 / "sessions" / f"{uuid.uuid4()}.json").write_text(
        json.dumps({"c3_session_id": str(uuid.uuid4()), "cwd": victim, "host_session_ids": [secret]})
    )
    t0 = time.perf_counter()
    listed = p.rows(str(repo))
    res.fig(f"listing with {n:,} shipped folders in its log", f"{time.perf_counter() - t0:.2f} s (whole process)")
    res.check(set(listed) == {own}, "a shipped log serves no other folder's sessions", f"listed {sorted(listed)}")
    found = p.run("search from the shipped repository", "search", "private", "--project", str(repo), "--json")
    res.check(
        '"results":[]' in found.stdout.replace(" ", ""),
        "a shipped log brings no other folder into search",
        found.stdout[:200],
    )
    answers = mcp(
        p, str(repo), [("c3_session", {"action": "list"}), ("c3_session", {"action": "search", "target": "private"})]
    )
    res.check(
        all("private prompt" not in text for _, text in answers),
        "the MCP server serves no other folder",
        "; ".join(t[:120] for _, t in answers),
    )
    # a .git whose config moves the root to the parent
    parent = Path(p.project("parent"))
    inner = parent / "cloned"
    fake = inner / ".fakegit" / "worktrees" / "w"
    fake.mkdir(parents=True)
    (inner / ".git").write_text("gitdir: .fakegit/worktrees/w\n")
    (fake / "commondir").write_text("../..\n")
    (fake / "gitdir").write_text(f"{inner}/.git\n")
    (inner / ".fakegit" / "config").write_text("[core]\n\tworktree = ../..\n\tbare = false\n")
    cloned = p.session(str(inner), "in the cloned folder")
    p.run(
        "mark note in a folder whose .git names the parent",
        "mark",
        "note",
        cloned,
        "--summary",
        "here",
        "--project",
        str(inner),
    )
    res.check(
        not (parent / ".c3").exists(),
        "a repository's own config never moves the root outside it",
        "the parent got a .c3",
    )
    # a .claude linked outside
    outside = p.root / "outside"
    outside.mkdir()
    (repo / ".claude").symlink_to(outside)
    p.run(
        "install-hooks through a linked .claude",
        "install-hooks",
        "--project",
        str(repo),
        expect=(1,),
        says=("symlink",),
    )
    res.check(
        list(outside.iterdir()) == [], "nothing under .claude is written through a link", str(list(outside.iterdir()))
    )
    # folder names that would run something when a resume command is pasted
    bad = 0
    for name in ("a\nrm -rf ~", "b; touch pwned #", "c $(id)", "d'\"q"):
        folder = p.project(name)
        sid = p.session(folder, "quoted")
        for row in p.rows(folder).values():
            ok = shlex.split(row["resume"]) == ["cd", folder, "&&", "claude", "--resume", sid]
            bad += not ok
            res.check(ok, "every printed or copied command quotes every part", repr(row["resume"]))
    res.fig("probes", f"{p.runs} commands, 1 MCP server; {bad} resume commands that parse wrong")
