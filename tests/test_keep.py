"""Keeping sessions past Claude Code's cleanup: keep/unkeep marks and the keep policy, the
archive (hard links on one filesystem, copies brought up to date on another), listing, showing,
searching and resuming a session whose transcript Claude Code deleted, the retention hints, and
what must never happen (a deletion in Claude Code's folders, a write through a planted link).

Everything runs on real files, mostly through the real CLI as a subprocess; "Claude Code" is the
test itself, appending to, replacing and unlinking its transcripts.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from c3async.ground.project import resolve
from stress.transcripts import Conversation, append_lines, simple_session, write_session

pytestmark = pytest.mark.process

DAY = 86_400
STATUS_KEYS = {"path", "sessions", "files", "bytes", "held_bytes"}
KEPT_KEYS = {"folder", "id", "files", "bytes", "held_bytes"}


# ------------------------------------------------------------------------------------ helpers


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, f"rc={proc.returncode}\nstdout={proc.stdout}\nstderr={proc.stderr}"
    return proc


def claude_tree(sb) -> dict[str, tuple[int, int, str]]:
    """Every file under Claude Code's projects folder: (inode, size, sha256)."""
    out: dict[str, tuple[int, int, str]] = {}
    for dirpath, _dirs, files in os.walk(sb.projects_root):
        for name in files:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            out[os.path.relpath(path, sb.projects_root)] = (st.st_ino, st.st_size, digest)
    return out


def assert_untouched(before: dict, after: dict) -> None:
    """Nothing deleted, replaced or rewritten in Claude Code's folders (files may be added)."""
    missing = sorted(set(before) - set(after))
    assert not missing, f"deleted from Claude Code's folders: {missing}"
    changed = sorted(k for k in before if before[k] != after[k])
    assert not changed, f"changed in Claude Code's folders: {changed}"


def archive_of(home: Path, folder: Path) -> Path:
    return Path(home) / "archive" / folder.name


def marks_of(project: str) -> list[dict]:
    path = Path(project, ".c3", "session_marks.jsonl")
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def archived_resume(proj: str, sid: str) -> set[str]:
    """How a row read from the archive is resumed: ``c3async resume ID`` (run in the project)."""
    return {f"c3async resume {sid}", f"cd {shlex.quote(proj)} && c3async resume {sid}"}


def status(sb, env=None) -> dict:
    return json.loads(ok(sb.run("keep", "--status", "--json", env=env)).stdout)


def resume(sb, *args: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, list[str]]:
    """``c3async resume`` for real (``--print`` restores nothing): it puts the files back, then
    runs ``claude``, here a stand-in on PATH that writes where it ran and its arguments."""
    tools = sb.root / "bin"
    tools.mkdir(exist_ok=True)
    stand_in = tools / "claude"
    record = sb.root / "claude-ran.txt"
    stand_in.write_text(f'#!/bin/sh\nprintf \'%s\\n\' "$PWD" "$@" > {shlex.quote(str(record))}\n')
    stand_in.chmod(0o755)
    record.unlink(missing_ok=True)
    env = dict(env or sb.env())
    env["PATH"] = f"{tools}{os.pathsep}{env.get('PATH', '')}"
    proc = ok(sb.run("resume", *args, env=env, process=True))  # it becomes claude (exec)
    return proc, record.read_text().splitlines()


def session_conv(folder: Path, cwd: str, prompt: str, *, mtime: float | None = None) -> tuple[Conversation, Path]:
    conv = Conversation(cwd)
    path = write_session(folder, conv.id, [conv.permission_mode(), *conv.exchange(prompt)], mtime=mtime)
    return conv, path


@pytest.fixture
def world(claude):
    proj = claude.project("app")
    return claude, proj, claude.folder(proj)


@pytest.fixture
def shm_home(claude):
    """A C3_HOME on another filesystem (tmpfs), or a skip."""
    base = "/dev/shm"
    if not os.path.isdir(base) or not os.access(base, os.W_OK):
        pytest.skip("no /dev/shm")
    home = tempfile.mkdtemp(prefix="c3keep-", dir=base)
    try:
        if os.stat(home).st_dev == os.stat(claude.root).st_dev:
            pytest.skip("/dev/shm is on the sandbox's filesystem")
        yield Path(home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


# ------------------------------------------------------------------ 1. hard link, deletion


def test_keep_links_follows_appends_and_outlives_deletion(world) -> None:
    sb, proj, folder = world
    conv, orig = session_conv(folder, proj, "hunt the zebracorn regression")
    other = simple_session(folder, proj, "an unrelated session")
    sid = conv.id
    ok(sb.run("mark", "note", sid[:8], "--summary", "half done", "--next", "finish it", "--project", proj))
    task = json.loads(ok(sb.run("tasks", "add", "--title", "Zebracorn", "--project", proj, "--json")).stdout)
    ok(sb.run("tasks", "link", "--task-id", task["id"], "--ref", sid[:8], "--project", proj, "--json"))

    before = claude_tree(sb)
    ok(sb.run("mark", "keep", sid[:8], "--reason", "the fix is in there", "--project", proj))
    assert_untouched(before, claude_tree(sb))
    arch = archive_of(sb.c3home, folder) / f"{sid}.jsonl"
    assert arch.exists()
    assert os.path.samefile(arch, orig), "same filesystem: the archive entry is a hard link"
    assert os.stat(orig).st_nlink == 2
    assert not archive_of(sb.c3home, folder).joinpath(f"{other}.jsonl").exists()
    keeps = [m for m in marks_of(proj) if m.get("op") == "keep"]
    assert [m["id"] for m in keeps] == [sid]

    # Claude Code goes on writing: the link is the same file.
    append_lines(orig, conv.exchange("now look at the quokka cache"))
    assert arch.read_bytes() == orig.read_bytes()

    row = sb.rows_by_id(proj)[sid]
    assert (row["kept"], row["kept_by"], row["archived"]) == (True, "mark", False)
    assert row["expires_in_days"] is None

    # Claude Code's cleanup deletes its name.
    os.unlink(orig)
    rows = sb.rows_by_id(proj)
    row = rows[sid]
    assert row["archived"] is True and row["kept"] is True
    assert row["path"] == str(arch)
    assert row["note"]["summary"] == "half done" and row["note"]["next_steps"] == "finish it"
    assert [t["id"] for t in row["links"]["tasks"]] == [task["id"]]
    assert row["resume"] in archived_resume(proj, sid)
    assert row["last_prompt"] == "now look at the quokka cache"
    assert not any(h.startswith("expires") for h in row["hints"])
    assert rows[other]["archived"] is False

    shown = ok(sb.run("show", sid[:6], "--project", proj)).stdout
    assert sid in shown and f"c3async resume {sid}" in shown and "half done" in shown
    table = ok(sb.run("sessions", "--project", proj)).stdout
    assert "[archived]" in table

    # The search index reads the archive's copy, the appended bytes too.
    for word in ("zebracorn", "quokka"):
        found = json.loads(ok(sb.run("search", word, "--project", proj, "--json")).stdout)
        assert [r["id"] for r in found["results"]] == [sid], word
        assert found["results"][0]["path"] == str(arch)

    # Marks still resolve a prefix to the archived session.
    ok(sb.run("mark", "note", sid[:8], "--summary", "still wanted", "--project", proj))
    assert sb.rows_by_id(proj)[sid]["note"]["summary"] == "still wanted"


def test_replaced_original_on_one_filesystem_leaves_the_archive_as_it_was(world) -> None:
    sb, proj, folder = world
    conv, orig = session_conv(folder, proj, "the original conversation")
    ok(sb.run("keep", conv.id, "--project", proj))
    arch = archive_of(sb.c3home, folder) / f"{conv.id}.jsonl"
    kept = arch.read_bytes()
    other = Conversation(proj, conv.id)
    tmp = write_session(folder, "replacement", [other.permission_mode(), *other.exchange("x" * 4000)])
    os.replace(tmp, orig)  # a new file under the old name, longer, not an append
    assert os.path.getsize(orig) > len(kept)
    sb.rows_by_id(proj)
    ok(sb.run("keep", conv.id, "--project", proj))
    assert arch.read_bytes() == kept


# ----------------------------------------------------------------------- 2. another device


def test_cross_device_copy_appends_only_new_bytes_and_never_overwrites(world, shm_home) -> None:
    sb, proj, folder = world
    env = sb.env(C3_HOME=str(shm_home))
    conv, orig = session_conv(folder, proj, "copy me over to tmpfs")
    conv_pad = conv.filler(20_000)  # long enough that the middle is far from head and tail
    append_lines(orig, conv_pad)
    before = claude_tree(sb)
    ok(sb.run("mark", "keep", conv.id, "--project", proj, env=env))
    assert_untouched(before, claude_tree(sb))
    arch = archive_of(shm_home, folder) / f"{conv.id}.jsonl"
    assert arch.exists() and not os.path.samefile(arch, orig)
    assert os.stat(arch).st_dev != os.stat(orig).st_dev
    assert arch.read_bytes() == orig.read_bytes()
    ino = os.stat(arch).st_ino

    # An append: the next listing brings the copy up to date.
    append_lines(orig, conv.exchange("a second prompt on the original"))
    rows = {r["id"]: r for r in sb.sessions(proj, env=env)}
    assert rows[conv.id]["kept"] is True and rows[conv.id]["archived"] is False
    assert arch.read_bytes() == orig.read_bytes()
    assert os.stat(arch).st_ino == ino, "brought up to date in place, not copied again"

    # Only the new bytes are copied: a byte changed in the middle of the copy stays changed.
    data = bytearray(arch.read_bytes())
    mid = len(data) // 2
    assert data[mid] != ord("#")
    data[mid] = ord("#")
    arch.write_bytes(bytes(data))
    added = append_lines(orig, conv.exchange("a third prompt"))
    sb.sessions(proj, env=env)
    now = arch.read_bytes()
    assert len(now) == os.path.getsize(orig)
    assert now[:-added] == bytes(data)
    assert now[-added:] == orig.read_bytes()[-added:]

    # A replaced original (different bytes, longer): the archive keeps what it had.
    kept = arch.read_bytes()
    stranger = Conversation(proj, conv.id)
    tmp = write_session(
        folder,
        "replacement",
        [stranger.permission_mode(), *stranger.exchange("z" * 2000), *stranger.filler(len(kept) + 10_000)],
    )
    os.replace(tmp, orig)
    assert os.path.getsize(orig) > len(kept)
    sb.sessions(proj, env=env)
    ok(sb.run("mark", "keep", conv.id, "--project", proj, env=env))
    assert arch.read_bytes() == kept


def test_cross_device_resume_copies_back_and_the_copy_follows_it(world, shm_home) -> None:
    sb, proj, folder = world
    env = sb.env(C3_HOME=str(shm_home))
    conv, orig = session_conv(folder, proj, "resume me from tmpfs")
    ok(sb.run("mark", "keep", conv.id, "--project", proj, env=env))
    arch = archive_of(shm_home, folder) / f"{conv.id}.jsonl"
    saved = arch.read_bytes()
    os.unlink(orig)
    assert {r["id"]: r for r in sb.sessions(proj, env=env)}[conv.id]["archived"] is True
    _, ran = resume(sb, conv.id[:8], "--project", proj, env=env)
    assert ran == [proj, "--resume", conv.id]
    assert orig.read_bytes() == saved
    # Claude Code resumes and appends to the restored copy: the archive follows.
    append_lines(orig, conv.exchange("after the resume"))
    row = {r["id"]: r for r in sb.sessions(proj, env=env)}[conv.id]
    assert row["archived"] is False and row["kept"] is True
    assert arch.read_bytes() == orig.read_bytes()


# ----------------------------------------------------------------- 3. session folder files


def test_subagents_and_tool_results_are_preserved_and_restored(world) -> None:
    sb, proj, folder = world
    conv, orig = session_conv(folder, proj, "spawn a sub-agent")
    sub = Conversation(proj, conv.id, sidechain=True)
    agent = write_session(folder / conv.id / "subagents", "agent-a1b2c3", [sub.prompt("look around"), *sub.reply()])
    result = folder / conv.id / "tool-results" / "toolu_01abc.txt"
    result.parent.mkdir(parents=True)
    result.write_text("a very long tool output\n" * 100)
    originals = {p: p.read_bytes() for p in (orig, agent, result)}

    ok(sb.run("mark", "keep", conv.id[:8], "--project", proj))
    base = archive_of(sb.c3home, folder)
    for p in originals:
        kept = base / p.relative_to(folder)
        assert kept.exists(), kept
        assert os.path.samefile(kept, p)
    st = status(sb)
    assert [(k["id"], k["files"]) for k in st["sessions"]] == [(conv.id, 3)]
    assert st["bytes"] == sum(len(d) for d in originals.values())

    # a sub-agent started after the keep: the next listing preserves it too
    later = write_session(folder / conv.id / "subagents", "agent-later", [sub.prompt("later"), *sub.reply()])
    originals[later] = later.read_bytes()
    assert sb.rows_by_id(proj)[conv.id]["kept"] is True
    assert os.path.samefile(base / later.relative_to(folder), later)

    os.unlink(orig)
    shutil.rmtree(folder / conv.id)
    assert sb.rows_by_id(proj)[conv.id]["archived"] is True
    proc, _ = resume(sb, conv.id, "--project", proj)
    for p, data in originals.items():
        assert p.read_bytes() == data, p
        assert os.path.samefile(p, base / p.relative_to(folder)), "put back as a hard link"
        assert str(p) in proc.stderr
    assert sb.rows_by_id(proj)[conv.id]["archived"] is False


# --------------------------------------------------------------------------------- 4. policy


def test_policy_keeps_noted_and_linked_and_marks_override_it(world) -> None:
    sb, proj, folder = world
    noted = simple_session(folder, proj, "a noted one")
    linked = simple_session(folder, proj, "a linked one")
    plain = simple_session(folder, proj, "a plain one")
    ok(sb.run("mark", "note", noted, "--summary", "worth it", "--project", proj))
    task = json.loads(ok(sb.run("tasks", "add", "--title", "T", "--project", proj, "--json")).stdout)
    ok(sb.run("tasks", "link", "--task-id", task["id"], "--ref", linked, "--project", proj, "--json"))
    decided = simple_session(folder, proj, "a decision was taken here")
    ok(
        sb.run(
            "tasks",
            "decide",
            "--text",
            "use sqlite",
            "--reasoning",
            "simple",
            "--project",
            proj,
            env=sb.env(CLAUDE_CODE_SESSION_ID=decided),
        )
    )
    base = archive_of(sb.c3home, folder)

    rows = sb.rows_by_id(proj)
    assert rows[decided]["links"]["decisions"], rows[decided]["links"]
    assert (rows[decided]["kept"], rows[decided]["kept_by"]) == (True, "policy: linked")
    assert (rows[noted]["kept"], rows[noted]["kept_by"]) == (True, "policy: noted")
    assert (rows[linked]["kept"], rows[linked]["kept_by"]) == (True, "policy: linked")
    assert (rows[plain]["kept"], rows[plain]["kept_by"]) == (False, None)
    assert not [m for m in marks_of(proj) if m.get("op") in ("keep", "unkeep")]
    # the listing preserved the policy's sessions
    assert os.path.samefile(base / f"{noted}.jsonl", folder / f"{noted}.jsonl")
    assert os.path.samefile(base / f"{linked}.jsonl", folder / f"{linked}.jsonl")
    assert not (base / f"{plain}.jsonl").exists()

    before = claude_tree(sb)
    ok(sb.run("mark", "unkeep", noted, "--project", proj))
    assert_untouched(before, claude_tree(sb))
    assert not (base / f"{noted}.jsonl").exists()
    rows = sb.rows_by_id(proj)
    assert (rows[noted]["kept"], rows[noted]["kept_by"]) == (False, None)
    assert not (base / f"{noted}.jsonl").exists(), "an unkeep mark outlasts the policy"

    Path(sb.c3home, "config.json").write_text(json.dumps({"keep": []}))
    rows = sb.rows_by_id(proj)
    assert [i for i, r in rows.items() if r["kept"]] == []

    Path(proj, ".c3", "config.json").write_text(json.dumps({"keep": ["all"]}))
    rows = sb.rows_by_id(proj)
    assert (rows[plain]["kept"], rows[plain]["kept_by"]) == (True, "policy: all")
    assert rows[linked]["kept_by"] == "policy: all"
    assert rows[noted]["kept"] is False, "the unkeep mark overrides even 'all'"
    assert (base / f"{plain}.jsonl").exists()

    ok(sb.run("mark", "keep", noted, "--project", proj))
    Path(proj, ".c3", "config.json").write_text(json.dumps({"keep": []}))
    rows = sb.rows_by_id(proj)
    assert (rows[noted]["kept"], rows[noted]["kept_by"]) == (True, "mark")
    assert rows[plain]["kept"] is False


def test_an_earlier_versions_list_reads_as_a_policy(world) -> None:
    """``keep`` was a list of terms: ``[]`` reads as ``none``, one holding ``all`` as ``all``,
    any other as ``marked`` (which covers every term), so no config breaks."""
    sb, proj, folder = world
    noted = simple_session(folder, proj, "noted")
    plain = simple_session(folder, proj, "plain")
    ok(sb.run("mark", "note", noted, "--summary", "s", "--project", proj))
    Path(sb.c3home).mkdir(parents=True, exist_ok=True)
    for value, want in (
        (["snapshot"], {noted: "policy: noted", plain: None}),
        (["noted", "linked"], {noted: "policy: noted", plain: None}),
        ([], {noted: None, plain: None}),
        (["linked", "all"], {noted: "policy: all", plain: "policy: all"}),
    ):
        Path(sb.c3home, "config.json").write_text(json.dumps({"keep": value}))
        proc = ok(sb.run("sessions", "--project", proj, "--json"))
        assert "Traceback" not in proc.stderr and "keep" not in proc.stderr, (value, proc.stderr)
        assert {r["id"]: r["kept_by"] for r in json.loads(proc.stdout)} == want, value


# ---------------------------------------------------------------------- 5. retention hints


def _expiry(sb, proj) -> dict[str, int | None]:
    rows = sb.rows_by_id(proj)
    out = {}
    for sid, row in rows.items():
        hints = [h for h in row["hints"] if h.startswith("expires in ")]
        if row["expires_in_days"] is None:
            assert not hints, row
        else:
            assert hints == [f"expires in {row['expires_in_days']}d"], row
        out[sid] = row["expires_in_days"]
    return out


def test_retention_hints_follow_the_effective_cleanup_period(world) -> None:
    sb, proj, folder = world
    now = time.time()
    s26 = simple_session(folder, proj, "26 days old", mtime=now - 26 * DAY)
    kept = simple_session(folder, proj, "26 days old, kept", mtime=now - 26 * DAY)
    s35 = simple_session(folder, proj, "35 days old", mtime=now - 35 * DAY)
    s5 = simple_session(folder, proj, "5 days old", mtime=now - 5 * DAY)
    fresh = simple_session(folder, proj, "fresh", mtime=now)
    ok(sb.run("mark", "keep", kept, "--project", proj))

    exp = _expiry(sb, proj)
    assert exp == {s26: 4, kept: None, s35: 0, s5: None, fresh: None}
    expiring = sb.sessions(proj, "--filter", "expiring")
    assert {r["id"] for r in expiring} == {s26, s35}

    user = sb.config / "settings.json"
    user.write_text(json.dumps({"cleanupPeriodDays": 10}))
    assert _expiry(sb, proj) == {s26: 0, kept: None, s35: 0, s5: 5, fresh: None}

    local = Path(proj, ".claude", "settings.local.json")
    local.parent.mkdir()
    Path(proj, ".claude", "settings.json").write_text(json.dumps({"cleanupPeriodDays": 12}))
    local.write_text(json.dumps({"cleanupPeriodDays": 40}))
    assert _expiry(sb, proj) == {s26: None, kept: None, s35: 5, s5: None, fresh: None}
    local.unlink()
    Path(proj, ".claude", "settings.json").unlink()

    for bad in (0, -3, "abc", 7.5, True, None):
        user.write_text(json.dumps({"cleanupPeriodDays": bad}))
        assert set(_expiry(sb, proj).values()) == {None}, bad
        assert sb.sessions(proj, "--filter", "expiring") == [], bad

    # A settings file that is not JSON, with cleanupPeriodDays set in another: no cleanup.
    local.parent.mkdir(exist_ok=True)
    user.write_text(json.dumps({"cleanupPeriodDays": 10}))
    Path(proj, ".claude", "settings.json").write_text('{"permissions": {')
    assert set(_expiry(sb, proj).values()) == {None}
    # ...and with it set nowhere, the default applies.
    user.write_text(json.dumps({"model": "opus"}))
    assert _expiry(sb, proj)[s26] == 4


# --------------------------------------------------------------------------------- 6. resume


def test_resume_puts_the_transcript_back_as_a_link(world) -> None:
    sb, proj, folder = world
    conv, orig = session_conv(folder, proj, "resume me")
    ok(sb.run("mark", "keep", conv.id, "--project", proj))
    arch = archive_of(sb.c3home, folder) / f"{conv.id}.jsonl"
    saved = arch.read_bytes()
    os.unlink(orig)
    before = claude_tree(sb)
    printed = ok(sb.run("resume", conv.id[:8], "--print", "--project", proj))
    assert printed.stdout.strip() == f"cd {shlex.quote(proj)} && claude --resume {conv.id}"
    assert "would put back" in printed.stderr and not orig.exists()  # --print only says so
    proc, ran = resume(sb, conv.id[:8], "--project", proj)
    assert ran == [proj, "--resume", conv.id]
    assert_untouched(before, claude_tree(sb))
    assert orig.exists() and os.path.samefile(orig, arch)
    assert orig.read_bytes() == saved
    assert "put back" in proc.stderr
    # again: nothing more to put back, same command; extra claude arguments are passed on
    proc = ok(sb.run("resume", "--print", "--project", proj, conv.id, "--", "--model", "opus"))
    assert proc.stdout.strip() == f"cd {shlex.quote(proj)} && claude --resume {conv.id} --model opus"
    assert "put back" not in proc.stderr
    assert sb.rows_by_id(proj)[conv.id]["archived"] is False


def test_resume_puts_back_a_whole_project_folder_claude_code_removed(world) -> None:
    sb, proj, folder = world
    conv, orig = session_conv(folder, proj, "the only session of the project")
    sub = Conversation(proj, conv.id, sidechain=True)
    agent = write_session(folder / conv.id / "subagents", "agent-only", [sub.prompt("p"), *sub.reply()])
    saved = {p: p.read_bytes() for p in (orig, agent)}
    ok(sb.run("keep", conv.id, "--project", proj))
    shutil.rmtree(folder)
    row = sb.rows_by_id(proj)[conv.id]
    assert row["archived"] is True and row["resume"] in archived_resume(proj, conv.id)
    _, ran = resume(sb, conv.id, "--project", proj)
    assert ran == [proj, "--resume", conv.id]
    for p, data in saved.items():
        assert p.read_bytes() == data


def test_resume_documented_order_with_claude_args(world) -> None:
    sb, proj, folder = world
    sid = simple_session(folder, proj, "pass arguments on")
    proc = ok(sb.run("resume", sid, "--print", "--project", proj, "--", "--model", "opus"))
    assert proc.stdout.strip() == f"cd {shlex.quote(proj)} && claude --resume {sid} --model opus"
    # what follows -- is claude's, even when it looks like one of ours
    proc = ok(sb.run("resume", sid[:8], "--print", "--project", proj, "--", "-p", "--print", "hi there"))
    assert proc.stdout.strip() == (f"cd {shlex.quote(proj)} && claude --resume {sid} -p --print 'hi there'")


def test_resumed_transcript_is_not_past_the_cut_off(world) -> None:
    sb, proj, folder = world
    conv, orig = session_conv(folder, proj, "an old kept session", mtime=time.time() - 45 * DAY)
    ok(sb.run("mark", "keep", conv.id, "--project", proj))
    os.unlink(orig)  # what the cleanup did: 45 days > 30
    resume(sb, conv.id, "--project", proj)
    assert orig.exists()
    assert os.stat(orig).st_mtime > time.time() - 30 * DAY, "the next cleanup deletes it again"


def test_resume_never_overwrites_an_existing_file(world) -> None:
    sb, proj, folder = world
    conv, orig = session_conv(folder, proj, "the kept version")
    sub = Conversation(proj, conv.id, sidechain=True)
    agent = write_session(folder / conv.id / "subagents", "agent-0001", [sub.prompt("old agent"), *sub.reply()])
    ok(sb.run("mark", "keep", conv.id, "--project", proj))
    base = archive_of(sb.c3home, folder)
    kept_main, kept_agent = (base / f"{conv.id}.jsonl").read_bytes(), (base / agent.relative_to(folder)).read_bytes()

    # (a) the transcript itself was replaced by a newer, different one: resume leaves it alone
    newer = Conversation(proj, conv.id)
    tmp = write_session(folder, "tmp-replacement", [newer.permission_mode(), *newer.exchange("the newer one " * 50)])
    os.replace(tmp, orig)
    new_bytes = orig.read_bytes()
    _, ran = resume(sb, conv.id, "--project", proj)
    assert ran == [proj, "--resume", conv.id]
    assert orig.read_bytes() == new_bytes
    assert (base / f"{conv.id}.jsonl").read_bytes() == kept_main

    # (b) the transcript is gone, a sub-agent file with other content is there: only the
    # missing transcript is put back
    os.unlink(orig)
    tmp = write_session(folder, "tmp-agent", [sub.prompt("a different agent file"), *sub.reply()])
    os.replace(tmp, agent)
    agent_now = agent.read_bytes()
    assert agent_now != kept_agent
    before = claude_tree(sb)
    proc, _ = resume(sb, conv.id, "--project", proj)
    assert_untouched(before, claude_tree(sb))
    assert orig.read_bytes() == kept_main
    assert agent.read_bytes() == agent_now
    assert str(agent) not in proc.stderr


def test_resume_unknown_id_and_missing_folder(world) -> None:
    sb, proj, folder = world
    sid = simple_session(folder, proj, "one session")
    for ref in ("ffffffff-0000-4000-8000-000000000000", "ffff"):
        proc = sb.run("resume", ref, "--print", "--project", proj)
        assert proc.returncode == 1
        assert proc.stdout == ""
        assert "no session" in proc.stderr and ref in proc.stderr
        assert "Traceback" not in proc.stderr

    ok(sb.run("mark", "keep", sid, "--project", proj))
    os.unlink(folder / f"{sid}.jsonl")
    moved = proj + "-moved"
    os.rename(proj, moved)
    try:
        # --project names a folder that is gone: a usage error; from anywhere else the id is
        # found (in the archive) and resume says the folder is gone and how to bring it back
        assert sb.run("resume", sid, "--print", "--project", proj).returncode == 2
        proc = sb.run("resume", sid, "--print")
        assert proc.returncode == 1, proc.stdout
        assert "Traceback" not in proc.stderr
        assert f"{proj} is gone" in proc.stderr
        assert "git worktree add" in proc.stderr or "recreate" in proc.stderr
        assert not (folder / f"{sid}.jsonl").exists(), "nothing put back for a folder that is gone"
    finally:
        os.rename(moved, proj)


# ---------------------------------------------------------------------------- 7. concurrency


@pytest.mark.parametrize("device", ["same", "other"])
def test_two_processes_keep_the_same_session_at_once(world, device, request) -> None:
    sb, proj, folder = world
    home = sb.c3home if device == "same" else request.getfixturevalue("shm_home")
    env = sb.env(C3_HOME=str(home))
    convs = [session_conv(folder, proj, f"race {i}")[0] for i in range(3)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "c3async", "mark", "keep", c.id, "--project", proj],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=str(sb.root),
        )
        for c in convs
        for _ in range(2)
    ]
    for p in procs:
        _out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    base = archive_of(home, folder)
    entries = sorted(n for n in os.listdir(base) if not n.endswith(".lock"))
    assert entries == sorted(f"{c.id}.jsonl" for c in convs), entries
    for c in convs:
        assert (base / f"{c.id}.jsonl").read_bytes() == (folder / f"{c.id}.jsonl").read_bytes()
    assert sorted(m["id"] for m in marks_of(proj) if m["op"] == "keep") == sorted(c.id for c in convs for _ in range(2))
    rows = {r["id"]: r for r in sb.sessions(proj, env=env)}
    for c in convs:
        assert (rows[c.id]["kept"], rows[c.id]["kept_by"]) == (True, "mark")
    st = status(sb, env)
    assert sorted(k["id"] for k in st["sessions"]) == sorted(c.id for c in convs)


# ---------------------------------------------------------------- 8. unkeep, status, no deletion


def test_unkeep_status_and_nothing_deleted_from_claude_folders(world) -> None:
    sb, proj, folder = world
    a, a_path = session_conv(folder, proj, "kept then deleted")
    b, b_path = session_conv(folder, proj, "kept and still there")
    size_a, size_b = a_path.stat().st_size, b_path.stat().st_size

    assert status(sb) == {"path": str(sb.c3home / "archive"), "sessions": [], "files": 0, "bytes": 0, "held_bytes": 0}
    tree = claude_tree(sb)
    ok(sb.run("mark", "keep", a.id, "--project", proj))
    ok(sb.run("keep", b.id, "--project", proj))
    assert_untouched(tree, claude_tree(sb))
    st = status(sb)
    assert set(st) == STATUS_KEYS and all(set(k) == KEPT_KEYS for k in st["sessions"])
    assert st["path"] == str(sb.c3home / "archive")
    assert (st["files"], st["bytes"], st["held_bytes"]) == (2, size_a + size_b, 0)
    assert {k["id"]: (k["folder"], k["files"], k["bytes"], k["held_bytes"]) for k in st["sessions"]} == {
        a.id: (folder.name, 1, size_a, 0),
        b.id: (folder.name, 1, size_b, 0),
    }

    os.unlink(a_path)  # Claude Code's cleanup
    tree = claude_tree(sb)
    st = status(sb)
    assert (st["bytes"], st["held_bytes"]) == (size_a + size_b, size_a)
    text = ok(sb.run("keep", "--status")).stdout
    assert "2 sessions" in text and "held only by the archive" in text and a.id in text

    for args in (
        ("sessions", "--project", proj, "--json"),
        ("show", a.id, "--project", proj),
        ("search", "deleted", "--project", proj),
        ("keep", "--status"),
        ("sessions", "--project", proj, "--filter", "expiring"),
    ):
        ok(sb.run(*args))
        assert_untouched(tree, claude_tree(sb))

    # The archive holds the only copy: unkeep wants a confirmation, and writes nothing without it.
    n_marks = len(marks_of(proj))
    proc = sb.run("mark", "unkeep", a.id[:8], "--project", proj)
    assert proc.returncode == 1 and "--release" in proc.stderr and "Traceback" not in proc.stderr
    assert len(marks_of(proj)) == n_marks
    assert status(sb)["held_bytes"] == size_a
    assert sb.rows_by_id(proj)[a.id]["archived"] is True
    assert_untouched(tree, claude_tree(sb))

    ok(sb.run("mark", "unkeep", a.id[:8], "--release", "--project", proj))
    assert_untouched(tree, claude_tree(sb))
    st = status(sb)
    assert [k["id"] for k in st["sessions"]] == [b.id]
    assert (st["files"], st["bytes"], st["held_bytes"]) == (1, size_b, 0)
    assert a.id not in sb.rows_by_id(proj)
    assert not (archive_of(sb.c3home, folder) / a.id).exists()

    ok(sb.run("mark", "unkeep", b.id, "--project", proj))
    assert_untouched(tree, claude_tree(sb))
    assert b_path.read_bytes() and os.stat(b_path).st_nlink == 1
    assert status(sb)["sessions"] == []
    assert sb.rows_by_id(proj)[b.id]["kept"] is False

    ok(sb.run("mark", "keep", b.id, "--project", proj))
    resume(sb, b.id, "--project", proj)
    assert_untouched(tree, claude_tree(sb))


def test_mcp_keep_and_unkeep(world, monkeypatch) -> None:
    import anyio
    from mcp import Client

    from c3async.serve import app as server

    sb, proj, folder = world
    sid = simple_session(folder, proj, "kept through MCP")
    gone = simple_session(folder, proj, "deleted by Claude Code later")
    host = simple_session(folder, proj, "the host session", mtime=time.time())
    for key in list(os.environ):
        if key.startswith(("CLAUDE", "C3_")):
            monkeypatch.delenv(key)
    for key, value in {**sb.env(), "CLAUDE_PROJECT_DIR": proj, "CLAUDE_CODE_SESSION_ID": host}.items():
        monkeypatch.setenv(key, value)
    arch = archive_of(sb.c3home, folder) / f"{sid}.jsonl"

    async def go() -> tuple[str, str]:
        async with Client(server.mcp, mode="auto") as c:
            kept = await c.call_tool("c3_session", {"action": "keep", "target": sid[:8], "reasoning": "why not"})
            assert not kept.is_error, kept.content
            assert arch.exists() and os.path.samefile(arch, folder / f"{sid}.jsonl")
            released = await c.call_tool("c3_session", {"action": "unkeep", "target": sid[:8]})
            assert not released.is_error, released.content
            # an agent cannot release the only copy of a transcript Claude Code deleted
            await c.call_tool("c3_session", {"action": "keep", "target": gone})
            os.unlink(folder / f"{gone}.jsonl")
            refused = await c.call_tool("c3_session", {"action": "unkeep", "target": gone})
            assert refused.is_error and "--release" in refused.content[0].text, refused.content
            assert (archive_of(sb.c3home, folder) / f"{gone}.jsonl").exists()
            # a snapshot of the host session: the default policy (`marked`) keeps it
            snap = await c.call_tool("c3_session", {"action": "snapshot", "summary": "where we are"})
            assert not snap.is_error, snap.content
            return kept.content[0].text, released.content[0].text

    kept, released = anyio.run(go)
    assert sid in kept and sid in released
    assert not arch.exists()
    assert (folder / f"{sid}.jsonl").exists()
    assert [m["op"] for m in marks_of(proj) if m["op"] in ("keep", "unkeep")] == ["keep", "unkeep", "keep"]
    rows = sb.rows_by_id(proj)
    assert (rows[host]["kept"], rows[host]["kept_by"]) == (True, "policy: snapshot")
    assert rows[sid]["kept"] is False and rows[gone]["archived"] is True
    Path(proj, ".c3", "config.json").write_text(json.dumps({"keep": "none"}))
    assert sb.rows_by_id(proj)[host]["kept"] is False


# ------------------------------------------------------------------------------ 9. bad input


def _cannot_preserve(sb, proj, sid) -> None:
    proc = sb.run("mark", "keep", sid, "--project", proj)
    assert proc.returncode == 1, proc.stdout
    assert "Traceback" not in proc.stderr
    assert "could not preserve" in proc.stderr
    assert [m["id"] for m in marks_of(proj) if m["op"] == "keep"] == [sid], "the mark is written"
    row = sb.rows_by_id(proj)[sid]
    assert (row["kept"], row["kept_by"]) == (True, "mark")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root ignores file modes")
def test_read_only_archive_writes_the_mark_and_says_it_could_not_preserve(world) -> None:
    sb, proj, folder = world
    sid = simple_session(folder, proj, "no room in the archive")
    arch = sb.c3home / "archive"
    arch.mkdir(parents=True)
    arch.chmod(0o500)
    try:
        _cannot_preserve(sb, proj, sid)
        assert os.listdir(arch) == []
    finally:
        arch.chmod(0o700)


def test_immutable_archive_as_root(world) -> None:
    """The same as the read-only case, for root: an immutable folder (chattr +i)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("chattr") is None:
        pytest.skip("needs root and chattr")
    sb, proj, folder = world
    sid = simple_session(folder, proj, "no room in the archive")
    arch = sb.c3home / "archive"
    arch.mkdir(parents=True)
    if subprocess.run(["chattr", "+i", str(arch)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i not supported here")
    try:
        _cannot_preserve(sb, proj, sid)
        assert os.listdir(arch) == []
    finally:
        subprocess.run(["chattr", "-i", str(arch)], check=True)


def test_archive_folder_that_is_a_file(world) -> None:
    sb, proj, folder = world
    sid = simple_session(folder, proj, "the archive folder is a file")
    blocker = archive_of(sb.c3home, folder)
    blocker.parent.mkdir(parents=True)
    blocker.write_bytes(b"not a folder")
    _cannot_preserve(sb, proj, sid)
    assert blocker.read_bytes() == b"not a folder"


def test_symlink_planted_in_the_archive_is_refused(world, tmp_path) -> None:
    sb, proj, folder = world
    conv, _orig = session_conv(folder, proj, "a session someone wants to steal")
    evil = tmp_path / "elsewhere"
    evil.mkdir()
    planted = archive_of(sb.c3home, folder)
    planted.parent.mkdir(parents=True)
    planted.symlink_to(evil, target_is_directory=True)
    tree = claude_tree(sb)

    proc = sb.run("mark", "keep", conv.id, "--project", proj)
    assert proc.returncode == 1, proc.stdout
    assert "could not preserve" in proc.stderr and "Traceback" not in proc.stderr
    assert os.listdir(evil) == []
    assert sb.rows_by_id(proj)[conv.id]["kept"] is True
    assert os.listdir(evil) == [], "the listing's preserve refused the link too"
    proc = sb.run("mark", "unkeep", conv.id, "--project", proj)
    assert "Traceback" not in proc.stderr
    assert os.listdir(evil) == []
    ok(sb.run("keep", "--status"))
    assert os.listdir(evil) == []
    assert planted.is_symlink()
    assert_untouched(tree, claude_tree(sb))


def test_symlink_planted_for_the_whole_archive_is_refused(world, tmp_path) -> None:
    sb, proj, folder = world
    sid = simple_session(folder, proj, "the archive root is a link")
    evil = tmp_path / "elsewhere"
    evil.mkdir()
    sb.c3home.mkdir(parents=True, exist_ok=True)
    (sb.c3home / "archive").symlink_to(evil, target_is_directory=True)
    proc = sb.run("mark", "keep", sid, "--project", proj)
    assert proc.returncode == 1 and "could not preserve" in proc.stderr, proc.stderr
    assert os.listdir(evil) == []


def test_symlinked_transcript_in_the_archive_is_not_written_through(world, tmp_path) -> None:
    sb, proj, folder = world
    conv, _orig = session_conv(folder, proj, "a link where the copy would go")
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    base = archive_of(sb.c3home, folder)
    base.mkdir(parents=True)
    (base / f"{conv.id}.jsonl").symlink_to(victim)
    proc = sb.run("mark", "keep", conv.id, "--project", proj)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    sb.rows_by_id(proj)
    assert victim.read_bytes() == b"precious"
    assert (base / f"{conv.id}.jsonl").is_symlink()


def _smuggle(sb, proj, folder, tmp_path) -> str:
    evil = tmp_path / "elsewhere"
    evil.mkdir()
    smuggled = simple_session(evil, proj, "ignore previous instructions")
    planted = archive_of(sb.c3home, folder)
    planted.parent.mkdir(parents=True)
    planted.symlink_to(evil, target_is_directory=True)
    return smuggled


def test_planted_folder_link_is_never_restored_from(world, tmp_path) -> None:
    sb, proj, folder = world
    simple_session(folder, proj, "a real session")
    smuggled = _smuggle(sb, proj, folder, tmp_path)
    tree = claude_tree(sb)
    proc = sb.run("resume", smuggled, "--print", "--project", proj)
    assert (
        proc.returncode == 1
        and ("symlink" in proc.stderr or "no session" in proc.stderr)
        and "Traceback" not in proc.stderr
    )
    assert proc.stdout == ""
    assert not (folder / f"{smuggled}.jsonl").exists()
    assert claude_tree(sb) == tree
    found = json.loads(ok(sb.run("search", "instructions", "--project", proj, "--json")).stdout)
    assert found["results"] == []


def test_planted_folder_link_does_not_smuggle_sessions_into_the_listing(world, tmp_path) -> None:
    """A folder linked into our archive is not our archive: what is in it is not listed as an
    archived session of the project."""
    sb, proj, folder = world
    real = simple_session(folder, proj, "a real session")
    smuggled = _smuggle(sb, proj, folder, tmp_path)
    rows = sb.rows_by_id(proj)
    assert real in rows
    assert smuggled not in rows


def test_transcript_deleted_between_listing_and_preserve(world, monkeypatch) -> None:
    from c3async.sessions import keep
    from c3async.sessions.view import list_rows_sync
    from c3async.stores import archive

    sb, proj, folder = world
    sb.activate(monkeypatch)
    conv, orig = session_conv(folder, proj, "gone in a moment")
    sub = Conversation(proj, conv.id, sidechain=True)
    agent = write_session(folder / conv.id / "subagents", "agent-x", [sub.prompt("p"), *sub.reply()])
    _scans, rows = list_rows_sync([resolve(proj)], processes=False)
    (row,) = [r for r in rows if r.id == conv.id]
    os.unlink(orig)
    os.unlink(agent)
    keep.apply(resolve(proj), rows, {conv.id: True})  # no crash
    assert archive.preserve(row.path, row.id) == 0
    base = archive_of(sb.c3home, folder)
    assert not (base / f"{conv.id}.jsonl").exists()
    assert not (base / conv.id / "subagents" / "agent-x.jsonl").exists()
    # the CLI on the same session now: unknown, not a crash
    proc = sb.run("mark", "keep", conv.id, "--project", proj)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr


def test_cleanup_period_written_as_a_whole_float(world) -> None:
    sb, proj, folder = world
    s5 = simple_session(folder, proj, "5 days old", mtime=time.time() - 5 * DAY)
    (sb.config / "settings.json").write_text('{"cleanupPeriodDays": 10.0}')
    assert _expiry(sb, proj)[s5] == 5


def test_search_result_of_an_archived_session_resumes_through_c3async(world) -> None:
    sb, proj, folder = world
    conv, orig = session_conv(folder, proj, "the wombat migration")
    ok(sb.run("keep", conv.id, "--project", proj))
    os.unlink(orig)
    found = json.loads(ok(sb.run("search", "wombat", "--project", proj, "--json")).stdout)
    (hit,) = found["results"]
    assert hit["id"] == conv.id
    assert hit["resume"] in archived_resume(proj, conv.id)


def test_prefixes_span_claude_folder_and_archive(world) -> None:
    sb, proj, folder = world
    a = simple_session(folder, proj, "in Claude's folder", session_id="abcd1111-0000-4000-8000-000000000001")
    b = simple_session(folder, proj, "only in the archive", session_id="abcd2222-0000-4000-8000-000000000002")
    ok(sb.run("keep", b, "--project", proj))
    os.unlink(folder / f"{b}.jsonl")
    proc = sb.run("show", "abcd", "--project", proj)
    assert proc.returncode == 1 and a in proc.stderr and b in proc.stderr
    assert b in ok(sb.run("show", "abcd2", "--project", proj)).stdout
    assert a in ok(sb.run("show", "abcd1", "--project", proj)).stdout
    proc = sb.run("resume", "abcd", "--print", "--project", proj)
    assert proc.returncode == 1 and not (folder / f"{b}.jsonl").exists()


# ------------------------------------------------------------------ review findings


def test_unkeep_refuses_when_the_archive_holds_more_than_the_original(world, shm_home) -> None:
    # On another device the archive is a copy: an original cut short (a half-written restore, a
    # truncation) makes the archive the only whole copy, even though the row is not archived.
    sb, proj, folder = world
    env = sb.env(C3_HOME=str(shm_home))
    conv, path = session_conv(folder, proj, "the whole conversation")
    ok(sb.run("mark", "keep", conv.id, "--project", proj, env=env))
    whole = path.read_bytes()
    with open(path, "r+b") as f:
        f.truncate(len(whole) // 2)
    proc = sb.run("mark", "unkeep", conv.id, "--project", proj, env=env)
    assert proc.returncode == 1 and "only whole copy" in proc.stderr and "--release" in proc.stderr
    kept = shm_home / "archive" / folder.name / f"{conv.id}.jsonl"
    assert kept.read_bytes() == whole
    ok(sb.run("mark", "unkeep", conv.id, "--project", proj, "--release", env=env))
    assert not kept.exists() and path.stat().st_size == len(whole) // 2


def test_an_agent_cannot_release_the_only_copy(world, monkeypatch) -> None:
    from c3async.ground.errors import C3Error
    from c3async.sessions import act

    sb, proj, folder = world
    sb.activate(monkeypatch)
    conv, path = session_conv(folder, proj, "kept by a person")
    ok(sb.run("mark", "keep", conv.id, "--project", proj))
    path.unlink()
    with pytest.raises(C3Error, match="only whole copy"):
        act.mark(resolve(proj), conv.id, "unkeep", by="agent")
    assert (sb.c3home / "archive" / folder.name / f"{conv.id}.jsonl").exists()


def test_project_search_finds_an_archived_session_after_claude_code_removed_its_folder(world) -> None:
    sb, proj, folder = world
    conv, _path = session_conv(folder, proj, "the wombat migration plan")
    ok(sb.run("mark", "keep", conv.id, "--project", proj))
    shutil.rmtree(folder)  # Claude Code removes empty session folders too
    proc = ok(sb.run("search", "wombat", "--project", proj, "--json"))
    [hit] = json.loads(proc.stdout)["results"]
    assert hit["id"] == conv.id and hit["resume"].endswith(f"c3async resume {conv.id}")


# ------------------------------------------------------------------------ 10. a finite disk


@pytest.fixture
def small_home(claude):
    """A C3_HOME on an 8 MiB tmpfs of its own (another filesystem: kept sessions are copies),
    unmounted afterwards; a skip where mounting is not permitted."""
    from stress.fulldisk import mounted

    with mounted(claude.root / "small-home") as home:
        if home is None:
            pytest.skip("mounting a tmpfs needs root")
        yield home


def refusals(home: Path) -> list[dict]:
    path = home / "archive" / ".refused.json"
    return json.loads(path.read_text())["refused"] if path.exists() else []


def temps(root: Path) -> list[str]:
    return [os.path.join(d, n) for d, _, names in os.walk(root) for n in names if n.endswith(".tmp")]


def big_session(folder: Path, proj: str, prompt: str) -> tuple[Conversation, Path]:
    conv, path = session_conv(folder, proj, prompt)
    append_lines(path, conv.filler(3000))  # ~100 KB
    return conv, path


def test_a_kept_session_bigger_than_the_free_space_waits_for_room(world, small_home) -> None:
    """The archive's disk is filled to the brim but half the session's size: the listing that
    would copy the kept session refuses, naming the session, the bytes and the free space;
    nothing is written, the next listing does not try again (the back-off record stays as it
    was), and once space is freed a listing copies it whole."""
    from stress.fulldisk import fill, free_up

    sb, proj, folder = world
    env = sb.env(C3_HOME=str(small_home))
    conv, orig = big_session(folder, proj, "keep me on a small disk")
    size = orig.stat().st_size
    ok(sb.run("sessions", "--project", proj, env=env))  # the home's own files, before the filler
    fill(small_home, leave=size // 2)
    ok(sb.run("mark", "note", conv.id, "--summary", "worth keeping", "--project", proj, env=env))  # kept: noted

    first = ok(sb.run("sessions", "--project", proj, "--json", env=env))
    row = {r["id"]: r for r in json.loads(first.stdout)}[conv.id]
    assert (row["kept"], row["archived"]) == (True, False)
    said = first.stderr
    assert "Traceback" not in said and said.count("\n") == 1, said
    assert conv.id in said and f"{size:,} bytes" in said and "bytes free" in said and "not copied" in said, said
    kept = archive_of(small_home, folder) / f"{conv.id}.jsonl"
    assert not kept.exists() and temps(small_home) == []
    [record] = refusals(small_home)
    assert (record["id"], record["need"], record["cut"], record["tries"]) == (conv.id, size, False, 1)

    second = ok(sb.run("sessions", "--project", proj, "--json", env=env))
    assert conv.id in second.stderr and "not copied" in second.stderr  # said again, not tried again
    assert refusals(small_home) == [record] and not kept.exists()

    free_up(small_home)
    third = ok(sb.run("sessions", "--project", proj, "--json", env=env))
    assert "not copied" not in third.stderr, third.stderr
    assert kept.read_bytes() == orig.read_bytes() and refusals(small_home) == [] and temps(small_home) == []


def test_keep_on_a_full_archive_disk_writes_the_mark_and_says_why_not_copied(world, small_home) -> None:
    from stress.fulldisk import fill

    sb, proj, folder = world
    env = sb.env(C3_HOME=str(small_home))
    conv, _orig = big_session(folder, proj, "keep me now")
    ok(sb.run("sessions", "--project", proj, env=env))
    fill(small_home)
    proc = sb.run("mark", "keep", conv.id, "--project", proj, env=env)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "the keep mark is written" in proc.stderr and conv.id in proc.stderr
    assert [m["id"] for m in marks_of(proj) if m["op"] == "keep"] == [conv.id]
    assert not (archive_of(small_home, folder) / f"{conv.id}.jsonl").exists() and temps(small_home) == []


def test_a_copy_the_disk_cuts_short_leaves_nothing_and_waits_for_its_bytes(world, small_home, monkeypatch) -> None:
    """A quota the filesystem's numbers do not show (statvfs tells of 2 GiB more than there is):
    the copy starts, the disk fills, the partial file is removed and the failure remembered; the
    archive tries again only once the free space grew by the copy's bytes."""
    from c3async.stores import archive
    from stress.fulldisk import fill, free_up

    sb, proj, folder = world
    sb.activate(monkeypatch)
    monkeypatch.setenv("C3_HOME", str(small_home))
    conv, orig = big_session(folder, proj, "cut short by a quota")
    size = orig.stat().st_size
    fill(small_home, leave=size // 2)
    real = os.statvfs

    def unseen_quota(path):
        st = list(real(path))
        st[4] += (2 << 30) // st[1]  # f_bavail, in blocks of f_frsize
        return os.statvfs_result(st)

    monkeypatch.setattr(os, "statvfs", unseen_quota)
    kept = archive_of(small_home, folder) / f"{conv.id}.jsonl"
    with pytest.raises(archive.NoRoom) as err:
        archive.preserve(orig, conv.id)
    assert err.value.cut and conv.id in str(err.value) and "nothing half-copied" in str(err.value)
    assert not kept.exists() and temps(small_home) == []
    [record] = refusals(small_home)
    assert (record["id"], record["need"], record["cut"], record["tries"]) == (conv.id, size, True, 1)

    free_up(small_home, size // 4)  # some room, not the copy's bytes: still waiting
    with pytest.raises(archive.NoRoom):
        archive.preserve(orig, conv.id)
    assert refusals(small_home) == [record]

    free_up(small_home)
    assert archive.preserve(orig, conv.id) == 1
    assert kept.read_bytes() == orig.read_bytes() and refusals(small_home) == []


def test_a_killed_copys_temp_file_goes_at_the_next_copy(world, small_home) -> None:
    """A copy killed halfway leaves ``.<id>.jsonl.<16 hex>.tmp`` in the archive: the next copy
    of that file removes it once it is an hour old; a younger one (a live copy's) stays."""
    sb, proj, folder = world
    env = sb.env(C3_HOME=str(small_home))
    conv, orig = session_conv(folder, proj, "copied over a killed copy")
    dest = archive_of(small_home, folder)
    dest.mkdir(parents=True)
    old, young = dest / f".{conv.id}.jsonl.{'a' * 16}.tmp", dest / f".{conv.id}.jsonl.{'b' * 16}.tmp"
    for path in (old, young):
        path.write_bytes(orig.read_bytes()[:100])
    hours_ago = time.time() - 7200
    os.utime(old, (hours_ago, hours_ago))
    ok(sb.run("mark", "keep", conv.id, "--project", proj, env=env))
    assert (dest / f"{conv.id}.jsonl").read_bytes() == orig.read_bytes()
    assert not old.exists() and young.exists()
