"""``c3async files`` over a folder 100,000 changed files sit under: the edit rows are read as
they come and the session's titles once, so its peak RSS (read from the kernel for its own
process) stays far below what holding every row with its session's titles took (over 350 MiB)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import sys

import pytest

from stress.bench_catalog import run_child
from stress.transcripts import Conversation, tool_use, write_session

pytestmark = pytest.mark.process  # the command's own process, for its peak RSS

MiB = 1 << 20
ROWS = 100_000


def test_files_over_a_folder_of_100000_changed_files_stays_small(claude, tmp_path):
    proj = claude.project("app")
    conv = Conversation(proj)
    lines = [conv.permission_mode(), conv.prompt("p " * 2000)]
    lines += conv.reply(tool_use("Write", {"file_path": f"{proj}/x.py", "content": "1"}))
    lines += [conv.custom_title("t" * 900), conv.ai_title("a" * 900)]
    write_session(claude.folder(proj), conv.id, lines)
    assert claude.run("files", "x.py", "--project", proj).returncode == 0  # the index is built
    for shard in claude.c3home.joinpath("search").glob("*.db"):
        with contextlib.closing(sqlite3.connect(shard)) as conn, conn:
            own = conn.execute("SELECT id FROM files WHERE session IS NOT NULL AND sidechain=0").fetchone()
            if own:  # as many changed files as a generated tree's: a path each
                rows = (
                    (own[0], f"{proj}/gen/{i:06d}/{'n' * 150}.py", 1, 4, 1777629602, 1777629602 + i)
                    for i in range(ROWS)
                )
                conn.executemany("INSERT INTO edits VALUES (?,?,?,?,?,?)", rows)
    # run_child: the command's own peak (a child's ru_maxrss starts from its parent's high-water mark)
    run = run_child([sys.executable, "-m", "c3async", "files", proj, "--json"], claude.env(), proj)
    assert run.rc == 0, run.err.decode(errors="replace")
    found = json.loads(run.out)
    assert found["sessions"][0]["id"] == conv.id and found["sessions"][0]["more_files"] == ROWS + 1 - 20
    assert found["sessions"][0]["files"][0]["path"] == f"{proj}/gen/{ROWS - 1:06d}/{'n' * 150}.py"  # the newest
    rss = run.maxrss
    assert rss < 150 * MiB, f"peak RSS {rss / MiB:.0f} MiB listing {ROWS:,} changed files"
