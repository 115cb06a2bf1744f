"""One open, then the descriptor: the archive, ``keep``, ``resume`` and the reader open each file
of Claude Code's folder once, without following a link at any level below the project folder,
and work from that descriptor; ``resume --print`` puts nothing back; an archive that another
account can write is refused."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from test_keep import archive_of, ok, resume, session_conv

from c3async.ground import safefs
from c3async.stores import archive
from stress.hostile_swaps import swapping
from stress.transcripts import Conversation, write_session

pytestmark = pytest.mark.process


@pytest.fixture
def world(claude):
    proj = claude.project("app")
    return claude, proj, claude.folder(proj)


@pytest.fixture
def inproc(claude, monkeypatch):
    claude.activate(monkeypatch)
    return claude


def test_a_link_is_made_from_the_descriptor_not_the_name(tmp_path):
    """The name is swapped for another file after the open: the link holds the opened file; an
    opened file whose every name is gone cannot be linked (the caller copies from the fd)."""
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "t.jsonl").write_text("the real transcript\n")
    fd, _ = safefs.open_regular(folder / "t.jsonl")
    out = os.open(tmp_path, os.O_RDONLY)
    try:
        os.rename(folder / "t.jsonl", folder / "moved.jsonl")
        (folder / "t.jsonl").write_text("someone else's file\n")
        assert safefs.link_fd(fd, out, "kept.jsonl")
        assert (tmp_path / "kept.jsonl").read_text() == "the real transcript\n"
        os.unlink(folder / "moved.jsonl")
        os.unlink(tmp_path / "kept.jsonl")
        assert safefs.link_fd(fd, out, "again.jsonl") is False  # no name left to link
        assert not (tmp_path / "again.jsonl").exists()
    finally:
        os.close(out)
        os.close(fd)


def test_no_folder_below_the_project_folder_is_followed(tmp_path):
    base = tmp_path / "proj"
    (base / "s" / "subagents").mkdir(parents=True)
    (base / "s" / "subagents" / "agent-a.jsonl").write_text("x\n")
    (tmp_path / "elsewhere" / "subagents").mkdir(parents=True)
    (tmp_path / "elsewhere" / "subagents" / "agent-a.jsonl").write_text("foreign\n")
    fd, _ = safefs.open_regular(base / "s" / "subagents" / "agent-a.jsonl", depth=3)
    os.close(fd)
    shutil.rmtree(base / "s")
    (base / "s").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(safefs.NotRegularFile):
        safefs.open_regular(base / "s" / "subagents" / "agent-a.jsonl", depth=3)


def test_keep_never_archives_a_file_a_swapped_folder_leads_to(world, inproc):
    """While ``mark keep`` preserves a session, another process keeps swapping its sub-agents'
    folder for a link to a folder of foreign files: the archive never holds one of them."""
    sb, proj, folder = world
    conv, _ = session_conv(folder, proj, "keep me while someone swaps folders")
    side = folder / conv.id / "subagents"
    sub = Conversation(proj, conv.id, sidechain=True)
    write_session(side, "agent-real", [sub.prompt("real"), *sub.reply()])
    foreign = Path(sb.root, "foreign")
    foreign.mkdir()
    (foreign / "agent-real.jsonl").write_text('{"secret": "the foreign file"}\n')
    with swapping(side, foreign):
        for _ in range(200):
            try:
                archive.preserve(folder / f"{conv.id}.jsonl", conv.id)
            except OSError:
                pass
    kept = archive_of(sb.c3home, folder)
    foreign_ino = os.stat(foreign / "agent-real.jsonl").st_ino
    for path in kept.rglob("*"):
        if path.is_file():
            assert os.lstat(path).st_ino != foreign_ino, path
            assert b"the foreign file" not in path.read_bytes(), path


def test_resume_never_writes_through_a_linked_session_folder(world):
    sb, proj, folder = world
    conv, orig = session_conv(folder, proj, "resume me")
    sub = Conversation(proj, conv.id, sidechain=True)
    write_session(folder / conv.id / "subagents", "agent-a", [sub.prompt("p"), *sub.reply()])
    ok(sb.run("mark", "keep", conv.id, "--project", proj))
    orig.unlink()
    shutil.rmtree(folder / conv.id)
    elsewhere = Path(sb.root, "elsewhere")
    elsewhere.mkdir()
    (folder / conv.id).symlink_to(elsewhere)  # planted: Claude Code's session folder is a link
    proc = sb.run("resume", conv.id, "--project", proj, process=True)  # it would become claude
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "not followed" in proc.stderr
    assert list(elsewhere.iterdir()) == []


def test_resume_print_puts_nothing_back(world):
    sb, proj, folder = world
    conv, orig = session_conv(folder, proj, "print only")
    ok(sb.run("mark", "keep", conv.id, "--project", proj))
    orig.unlink()
    proc = ok(sb.run("resume", conv.id, "--print", "--project", proj))
    assert "would put back" in proc.stderr and str(orig) in proc.stderr
    assert not orig.exists()
    _, ran = resume(sb, conv.id, "--project", proj)
    assert orig.exists() and ran[0] == proj


@pytest.mark.parametrize("how", ["world-writable home", "world-writable archive", "foreign owner"])
def test_an_archive_others_can_write_is_refused(world, how):
    """A kept session Claude Code deleted is listed from the archive; once another account could
    have written there, nothing in it is listed, searched, kept to or put back."""
    sb, proj, folder = world
    conv, orig = session_conv(folder, proj, "kept before the archive was opened up")
    ok(sb.run("mark", "keep", conv.id, "--project", proj))
    orig.unlink()
    assert sb.rows_by_id(proj)[conv.id]["archived"] is True
    target = sb.c3home if how == "world-writable home" else sb.c3home / "archive"
    if how == "foreign owner":
        os.chown(target, 65534, 65534)
    else:
        os.chmod(target, 0o777)
    try:
        proc = sb.run("sessions", "--project", proj, "--json")
        assert proc.returncode == 0 and "refusing the archive" in proc.stderr, proc.stderr
        assert conv.id not in {r["id"] for r in json.loads(proc.stdout)}
        found = json.loads(sb.run("search", "opened", "--project", proj, "--json").stdout)
        assert found["results"] == []
        other, _ = session_conv(folder, proj, "another one")
        proc = sb.run("mark", "keep", other.id, "--project", proj)
        assert proc.returncode == 1 and "refusing the archive" in proc.stderr, proc.stderr
        proc = sb.run("resume", conv.id, "--project", proj, process=True)  # it would become claude
        assert proc.returncode == 1 and not orig.exists(), proc.stderr
    finally:
        os.chown(target, os.geteuid(), os.getegid())
        os.chmod(target, 0o700)
    assert sb.rows_by_id(proj)[conv.id]["archived"] is True  # made private again: used again
