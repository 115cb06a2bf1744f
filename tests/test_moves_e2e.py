"""End to end with the real Claude Code CLI, offline against the stand-in API: a session made with
``claude -p`` in a git project, the folder moved, ``c3async projects --move OLD NEW``, then
``claude -p --resume <id>`` and ``claude -p --continue`` run in NEW continue that very session (its
transcript grows, the stand-in API sees the earlier turns), and c3async lists it under NEW with
NEW as its cwd.

What the CLI does on its own, seen here: run in NEW, ``--resume <id>`` finds a session of OLD's
folder by its id but goes on writing it there (lines with cwd NEW in OLD's folder), and
``--continue`` does not see it at all; once the move linked it into NEW's folder, both use that
name (the same file as OLD's)."""

from __future__ import annotations

import json
import os
import subprocess

from fake_api import FakeAPI, claude_cli, needs_claude

pytestmark = needs_claude


def test_a_moved_folder_resumes_its_session_in_the_new_folder(claude, tmp_path):
    cli = claude_cli()
    old = claude.project("shop")
    subprocess.run(["git", "init", "-q", old], check=True)
    api = FakeAPI.started(tmp_path)
    log = api.log
    env = api.env(claude)
    try:

        def ask(where: str, *args: str) -> str:
            out = subprocess.run(
                [cli, "-p", *args, "--output-format", "json"],
                cwd=where,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert out.returncode == 0, out.stderr
            return json.loads(out.stdout)["session_id"]

        sid = ask(old, "the first turn: pick a payment provider")
        new = os.path.join(os.path.dirname(old), "shop-v2")
        os.rename(old, new)
        moved = claude.run("projects", "--move", old, new)
        assert moved.returncode == 0, moved.stderr
        theirs, ours = claude.folder(old) / f"{sid}.jsonl", claude.folder(new) / f"{sid}.jsonl"
        size = ours.stat().st_size
        assert ours.stat().st_ino == theirs.stat().st_ino

        assert ask(new, "--resume", sid, "the second turn: wire it") == sid
        assert ask(new, "--continue", "the third turn: test it") == sid  # the newest session of NEW's folder
        assert ours.stat().st_size > size and ours.stat().st_ino == theirs.stat().st_ino
        last = json.loads(log.read_text().splitlines()[-1])
        said = json.dumps(last["messages"])
        assert "the first turn: pick a payment provider" in said and "the second turn: wire it" in said

        rows = claude.rows_by_id(new)
        assert list(rows) == [sid]
        row = rows[sid]
        assert row["cwd"] == new and row["resume"] == f"cd {new} && claude --resume {sid}"
        assert row["last_prompt"] == "the third turn: test it" and row["user_turns"] == 3
        listed = {p["path"]: p for p in json.loads(claude.run("projects", "--json").stdout)}
        assert old not in listed and listed[new]["moved_from"] == [old]
    finally:
        api.stop()
