"""Special files among Claude Code's transcripts: only regular files are read, nothing blocks,
no symlink leads the catalog or the accountant out of the transcript folders, and an entry that
cannot be examined (a symlink loop, a vanished file) costs that entry only.

Every command runs as a subprocess with a timeout: a FIFO that is opened for reading blocks
forever, so a regression shows as a timeout, not as a hung test run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import msgspec
import pytest

from c3async.catalog import cache as catalog_cache
from c3async.catalog.read import read_transcript
from c3async.ground.project import resolve
from c3async.ground.safefs import NotRegularFile, open_regular
from c3async.usage import account as acc
from stress.transcripts import (
    Conversation,
    new_id,
    render,
    set_mtime,
    simple_session,
    write_session,
)

pytestmark = pytest.mark.process

T0 = 1_700_000_000
TIMEOUT = 30  # seconds: far above what any of these commands needs


def run(claude, *args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            [sys.executable, "-m", "c3async", *args],
            capture_output=True,
            text=True,
            env=claude.env(),
            cwd=str(claude.root),
            timeout=TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"`c3async {' '.join(args)}` hung for {TIMEOUT} s (a FIFO opened for reading?)")


def usage_line(session: str, msg_id: str, out: int = 20) -> str:
    usage = {"input_tokens": 10, "output_tokens": out, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    return json.dumps(
        {
            "type": "assistant",
            "isSidechain": False,
            "sessionId": session,
            "requestId": "r" + msg_id,
            "timestamp": "2026-11-01T10:00:00.000Z",
            "message": {
                "model": "claude-sonnet-4-5-20250929",
                "id": msg_id,
                "role": "assistant",
                "content": [{"type": "text", "text": "ok"}],
                "usage": usage,
            },
        },
        separators=(",", ":"),
    )


def write_lines(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))
    return path


def stats(claude, project: str) -> dict[str, dict]:
    proc = run(claude, "stats", "--project", project, "--json")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return {row["id"]: row for row in json.loads(proc.stdout)}


def sessions(claude, project: str) -> dict[str, dict]:
    proc = run(claude, "sessions", "--project", project, "--json")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return {row["id"]: row for row in json.loads(proc.stdout)}


# ------------------------------------------------------------------------ the accountant


def session_with_a_subagent(claude):
    """A project with one session (one response) and one real sub-agent file (one response):
    (project, its transcript folder, the session id, the subagents folder)."""
    project = claude.project("app")
    folder = claude.folder(project)
    sid = new_id()
    write_lines(folder / f"{sid}.jsonl", [usage_line(sid, "msg_main")])
    sub = folder / sid / "subagents"
    write_lines(sub / "agent-1.jsonl", [usage_line(sid, "msg_sub", out=5)])
    return project, folder, sid, sub


def test_fifo_under_subagents_does_not_hang_stats(claude):
    project, folder, sid, sub = session_with_a_subagent(claude)
    os.mkfifo(sub / "x.jsonl")  # nobody will ever write to it
    (sub / "deeper").mkdir()
    os.mkfifo(sub / "deeper" / "y.jsonl")
    os.mkfifo(folder / f"{new_id()}.jsonl")  # one named like a session, too
    os.mkfifo(folder / "agent-legacy.jsonl")
    rows = stats(claude, project)
    assert set(rows) == {sid}
    assert (rows[sid]["output"], rows[sid]["responses"]) == (25, 2)  # the main file and the real sub-agent


def test_subagent_walk_follows_no_symlink(claude, tmp_path):
    project, folder, sid, sub = session_with_a_subagent(claude)
    outside = tmp_path / "outside"
    write_lines(outside / "agent-9.jsonl", [usage_line(sid, "msg_outside", out=1000)])
    (sub / "loop").symlink_to(sub, target_is_directory=True)  # a loop
    (sub / "up").symlink_to(folder, target_is_directory=True)  # a loop through the parent
    (sub / "out").symlink_to(outside, target_is_directory=True)  # out of the folder
    (sub / "link.jsonl").symlink_to(outside / "agent-9.jsonl")  # a file out of the folder
    (sub / "dangling.jsonl").symlink_to(tmp_path / "missing.jsonl")
    rows = stats(claude, project)
    assert (rows[sid]["output"], rows[sid]["responses"]) == (25, 2)


def test_symlinked_session_file_and_session_folder_are_not_accounted(claude, tmp_path):
    project = claude.project("app")
    folder = claude.folder(project)
    sid = new_id()
    write_lines(folder / f"{sid}.jsonl", [usage_line(sid, "msg_main")])
    elsewhere = new_id()
    target = write_lines(tmp_path / "outside" / f"{elsewhere}.jsonl", [usage_line(elsewhere, "msg_x", out=1000)])
    (folder / f"{elsewhere}.jsonl").symlink_to(target)
    other = new_id()
    write_lines(tmp_path / "outside" / other / "subagents" / "agent-1.jsonl", [usage_line(other, "msg_y")])
    (folder / other).symlink_to(tmp_path / "outside" / other, target_is_directory=True)
    assert set(stats(claude, project)) == {sid}


def test_a_file_replaced_by_a_fifo_after_the_listing_is_skipped(claude, monkeypatch):
    """The race the listing cannot see: the accountant's own open must not block."""
    claude.activate(monkeypatch)
    project = claude.project("app")
    folder = claude.folder(project)
    good, racy = new_id(), new_id()
    write_lines(folder / f"{good}.jsonl", [usage_line(good, "msg_1")])
    write_lines(folder / f"{racy}.jsonl", [usage_line(racy, "msg_2")])
    real_files = acc._files

    def files_then_swap(proj):
        listed = list(real_files(proj))
        path = folder / f"{racy}.jsonl"
        path.unlink()
        os.mkfifo(path)
        return iter(listed)

    monkeypatch.setattr(acc, "_files", files_then_swap)
    result = _in_thread(lambda: acc.account(resolve(project), write=False))
    assert set(result.totals) == {good}


def test_deeply_nested_usage_line_is_skipped(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    sid = new_id()
    # nested in a field the decoder skips (a typed field would fail fast on the first '[')
    deep = usage_line(sid, "msg_deep", out=1000).replace(
        '"type":"assistant"', '"type":"assistant","x":' + "[" * 100_000 + "]" * 100_000, 1
    )
    write_lines(folder / f"{sid}.jsonl", [usage_line(sid, "msg_1"), deep, usage_line(sid, "msg_2", out=5)])
    assert stats(claude, project)[sid]["output"] == 25


def test_usage_state_file_that_is_a_fifo_is_ignored(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    sid = new_id()
    write_lines(folder / f"{sid}.jsonl", [usage_line(sid, "msg_1")])
    (Path(project) / ".c3" / "cache").mkdir(parents=True)
    os.mkfifo(Path(project) / ".c3" / "cache" / "usage.json")
    assert stats(claude, project)[sid]["output"] == 20


# ------------------------------------------------------------------------ the catalog


def test_symlink_loops_in_the_projects_root_leave_other_projects_listed(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    sid = simple_session(folder, project, "still listed", mtime=T0)
    root = claude.projects_root
    (root / "loop").symlink_to("loop")
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")
    # A loop whose name matches this project's folder too (an "exact alphanumeric match": only
    # the separators differ), so that it is examined, not just skipped by name.
    variant = folder.name.replace("-", "_")
    assert variant != folder.name
    (root / variant).symlink_to(variant)
    (root / "dangling").symlink_to(root / "nowhere")
    rows = sessions(claude, project)
    assert list(rows) == [sid]
    assert rows[sid]["first_prompt"] == "still listed"


def test_a_symlinked_projects_root_and_transcript_folder_are_followed(claude, tmp_path):
    """People symlink ~/.claude into a dotfiles repository: the root and a project's folder may
    be links. Only the files inside are refused when they are links."""
    real_root = tmp_path / "dotfiles" / "claude"
    (real_root / "projects").mkdir(parents=True)
    project = claude.project("app")
    real_folder = tmp_path / "dotfiles" / "app-transcripts"
    real_folder.mkdir()
    sid = simple_session(real_folder, project, "through two links", mtime=T0)
    (real_root / "projects" / claude.folder(project).name).symlink_to(real_folder, target_is_directory=True)
    link = tmp_path / "claude-link"
    link.symlink_to(real_root, target_is_directory=True)
    proc = subprocess.run(
        [sys.executable, "-m", "c3async", "sessions", "--project", project, "--json"],
        capture_output=True,
        text=True,
        env=claude.env(CLAUDE_CONFIG_DIR=str(link)),
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert [r["id"] for r in json.loads(proc.stdout)] == [sid]


def test_symlinked_session_file_is_not_listed(claude, tmp_path):
    """A link named like a session, pointing at a transcript outside the folder (or at any file
    the user can read), is never read, so its content never reaches a listing or the Hub."""
    project = claude.project("app")
    folder = claude.folder(project)
    good = simple_session(folder, project, "a real session", mtime=T0)
    c = Conversation(project)
    outside = write_session(tmp_path, c.id, [*c.exchange("SECRET from outside the folder")], mtime=T0 + 10)
    (folder / f"{c.id}.jsonl").symlink_to(outside)
    proc = run(claude, "sessions", "--project", project, "--json")
    assert proc.returncode == 0, proc.stderr
    assert [r["id"] for r in json.loads(proc.stdout)] == [good]
    assert "SECRET" not in proc.stdout
    marked = run(claude, "mark", "note", c.id, "--project", project, "--summary", "x")
    assert marked.returncode == 1 and "no session" in marked.stderr, marked.stderr
    assert "SECRET" not in marked.stderr and "Traceback" not in marked.stderr


def test_fifo_as_the_catalog_cache_does_not_hang_the_listing(claude):
    project = claude.project("app")
    sid = simple_session(claude.folder(project), project, "listed anyway", mtime=T0)
    cache_dir = Path(project) / ".c3" / "cache"
    cache_dir.mkdir(parents=True)
    os.mkfifo(cache_dir / "session_catalog.json")
    assert list(sessions(claude, project)) == [sid]


def test_deeply_nested_transcript_line_is_skipped_like_a_malformed_one(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    c = Conversation(project)

    def deep(prompt: str, nest: bytes, close: bytes) -> bytes:
        line = json.dumps(c.prompt(prompt), separators=(",", ":")).encode()
        return line.replace(b'"type":"user"', b'"type":"user","x":' + nest * 50_000 + b"1" + close * 50_000, 1)

    # The first and the last user lines are the ones decoded: make those the deep ones.
    write_session(
        folder,
        c.id,
        [
            c.permission_mode(),
            deep("DEEP first", b"[", b"]"),
            *c.exchange("before the deep line"),
            *c.exchange("after the deep line"),
            deep("DEEP last", b'{"a":', b"}"),
        ],
        mtime=T0,
    )
    row = sessions(claude, project)[c.id]
    assert (row["first_prompt"], row["last_prompt"], row["user_turns"]) == (
        "before the deep line",
        "after the deep line",
        2,
    )


def test_deeply_nested_catalog_cache_is_rebuilt(claude):
    project = claude.project("app")
    sid = simple_session(claude.folder(project), project, "from the transcript", mtime=T0)
    cache_dir = Path(project) / ".c3" / "cache"
    cache_dir.mkdir(parents=True)
    (cache_dir / "session_catalog.json").write_bytes(
        b'{"format":"c3async.session_catalog","x":' + b"[" * 100_000 + b"]" * 100_000 + b',"version":7,"entries":{}}'
    )
    assert sessions(claude, project)[sid]["first_prompt"] == "from the transcript"
    assert catalog_cache.load(cache_dir / "session_catalog.json") != {}  # rebuilt, and ours again


def test_transcript_replaced_by_a_longer_file_shows_the_new_first_prompt(claude):
    """Another file at the same path (another inode) that is longer than the cached one, and
    even extends it byte for byte at the cached end: it must be read from scratch."""
    project = claude.project("app")
    folder = claude.folder(project)
    c = Conversation(project)
    path = write_session(folder, c.id, [c.permission_mode(), *c.exchange("the OLD first prompt")], mtime=T0)
    assert sessions(claude, project)[c.id]["first_prompt"] == "the OLD first prompt"
    old = path.read_bytes()
    more = render(c.exchange("a later prompt"))
    new = old.replace(b"the OLD first prompt", b"the NEW first prompt") + more
    assert len(new) > len(old) and new[len(old) - 1 : len(old)] == b"\n"
    tmp = folder / "replacement.tmp"
    tmp.write_bytes(new)
    old_ino = path.stat().st_ino
    os.replace(tmp, path)
    assert path.stat().st_ino != old_ino
    set_mtime(path, T0 + 10)
    row = sessions(claude, project)[c.id]
    assert (row["first_prompt"], row["last_prompt"], row["user_turns"]) == ("the NEW first prompt", "a later prompt", 2)


def test_the_cache_records_the_file_identity(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    sid = simple_session(folder, project, "x", mtime=T0)
    sessions(claude, project)
    entries = catalog_cache.load(Path(project) / ".c3" / "cache" / "session_catalog.json")
    st = (folder / f"{sid}.jsonl").stat()
    (rec,) = entries.values()
    assert (rec.ino, rec.dev) == (st.st_ino, st.st_dev)
    assert catalog_cache.VERSION >= 7


# ------------------------------------------------------------------------ open_regular itself


def _in_thread(fn, timeout: float = TIMEOUT):
    """Run ``fn`` in a thread; fail (instead of hanging the run) when it blocks."""
    out: dict = {}

    def target():
        try:
            out["value"] = fn()
        except BaseException as exc:  # handed to the test thread
            out["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        pytest.fail(f"blocked for {timeout} s")
    if "error" in out:
        raise out["error"]
    return out["value"]


@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink", "dangling symlink", "symlink loop"])
def test_read_transcript_refuses_what_is_not_a_regular_file(tmp_path, kind):
    c = Conversation("/w/app")
    real = write_session(tmp_path, c.id, [*c.exchange("hello")])
    path = tmp_path / "x.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "symlink":
        path.symlink_to(real)
    elif kind == "dangling symlink":
        path.symlink_to(tmp_path / "missing")
    else:
        path.symlink_to(path)
    with pytest.raises(NotRegularFile):
        _in_thread(lambda: read_transcript(str(path), 100, 0))
    with pytest.raises(NotRegularFile):
        _in_thread(lambda: open_regular(path, lstat_first=True))


def test_read_transcript_records_what_it_read(tmp_path):
    """Size, mtime and identity come from the open file, not from the caller's older stat."""
    c = Conversation("/w/app")
    path = write_session(tmp_path, c.id, [*c.exchange("hello")])
    st = path.stat()
    rec = read_transcript(str(path), 1, 2)  # a stale stat from the listing
    assert (rec.size, rec.mtime_ns, rec.ino, rec.dev) == (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)
    assert msgspec.json.decode(msgspec.json.encode(rec), type=type(rec)) == rec
