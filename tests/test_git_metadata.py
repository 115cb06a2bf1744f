"""Git metadata is bounded input: the readers of git's files (``paths``, ``catalog.gitrefs``)
on every trap of ``stress/hostile_git.py`` (a branch 1,000 folders deep, a gitdir in a symlink
loop or 2,000 links away, a ``.git`` FIFO or of 1 GiB, ``commondir`` naming ``/`` or another
project, 100 MB of packed-refs, 100,001 packed branches, a thousand and more worktrees, gitdir
lines with a NUL or a newline, HEAD linked to ``/dev/zero`` or to itself, branch names with
control characters), in-process; each bound on both sides; and the doors a user meets in such a
checkout, as processes: ``c3async sessions`` (the row with the hint, no traceback), ``sessions
--all`` beside a clean repository, ``c3async serve`` (``initialize`` and ``c3_session list``)
and the Hub's ``/api/rows``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from c3async.catalog import gitrefs, locate
from c3async.ground import paths
from c3async.ground.project import resolve
from c3async.stores import registry
from stress.hostile_git import CONTROL_BRANCH, EVIL_BRANCH, HINT, TRAPS, build, dismantle, git, repository
from stress.transcripts import Conversation, simple_session, write_session

LOOP = "a gitdir in a symlink loop"
DEEP = "a branch 1,000 folders deep"


@pytest.fixture(scope="module")
def traps(module_claude):
    """Every trap built once, each with a session, beside a clean repository with one."""
    clean = Path(module_claude.project("clean"))
    repository(clean)
    built = build(Path(module_claude.root, "work", "traps"), clean)
    sids = {"clean": simple_session(module_claude.folder(str(clean)), str(clean), "the clean session")}
    for name, folder in built.items():
        conv = Conversation(str(folder), branch=EVIL_BRANCH if name == CONTROL_BRANCH else "main")
        write_session(module_claude.folder(str(folder)), conv.id, [conv.permission_mode(), *conv.exchange(name)])
        sids[name] = conv.id
    yield clean, built, sids
    for folder in built.values():
        dismantle(folder)  # pytest's rmtree recurses once per folder


@pytest.fixture
def fresh(monkeypatch):
    """paths' per-process caches empty (a trap's root is resolved, not remembered)."""
    monkeypatch.setattr(paths, "_roots", {})
    monkeypatch.setattr(paths, "_warned", set())


# ---------------------------------------------------------------- the readers, in-process


@pytest.mark.parametrize("name", list(TRAPS))
def test_every_trap_reads_as_a_value(traps, fresh, name):
    clean, built, _ = traps
    folder = str(built[name])
    assert paths.project_root(folder) == folder  # never another project's root, never a crash
    assert clean.as_posix() not in locate.worktrees(folder)
    refs = gitrefs.branches(folder)
    assert refs is not None
    assert (refs.unreadable is not None) == TRAPS[name][1], refs.unreadable
    branch = gitrefs.current_branch(folder)
    assert branch is None or (branch.isprintable() and len(branch) <= gitrefs.MAX_HEAD_BYTES)


def test_a_clean_repository_reads_whole(claude, fresh, tmp_path):
    main = tmp_path / "main"
    main.mkdir()
    repository(main)
    git("branch", "packed/one", cwd=main)
    git("tag", "-a", "-m", "t", "v1", cwd=main)  # a peeled line "^oid" follows the tag's
    git("pack-refs", "--all", cwd=main)
    deepest = "/".join(["d"] * gitrefs.MAX_REF_DEPTH) + "/x"  # as deep as is read
    git("branch", deepest, cwd=main)
    git("worktree", "add", "-q", "--detach", str(tmp_path / "wt"), cwd=main)
    git("checkout", "-q", "--orphan", "unborn", cwd=tmp_path / "wt")  # a branch with no commit: no ref yet
    (main / ".git" / "refs" / "heads" / "half-written.lock").write_text("")
    refs = gitrefs.branches(str(main))
    assert refs == gitrefs.Branches(frozenset({"main", "packed/one", deepest, "unborn"}))
    assert gitrefs.current_branch(str(main)) == "main"
    assert gitrefs.current_branch(str(tmp_path / "wt")) == "unborn"
    assert gitrefs.branches(str(tmp_path / "wt")) == refs
    assert gitrefs.branches(str(tmp_path)) is None  # no .git: not in git


def test_one_folder_deeper_than_the_bound_is_unreadable(tmp_path):
    main = tmp_path / "main"
    main.mkdir()
    heads = repository(main) / "refs" / "heads"
    deeper = heads.joinpath(*["d"] * (gitrefs.MAX_REF_DEPTH + 1))
    deeper.mkdir(parents=True)
    (deeper / "x").write_text("0" * 40 + "\n")
    refs = gitrefs.branches(str(main))
    assert refs is not None and "folders deep" in (refs.unreadable or "")


def test_a_head_or_packed_refs_larger_than_git_writes_is_unreadable(tmp_path):
    main = tmp_path / "main"
    main.mkdir()
    dot = repository(main)
    (dot / "HEAD").write_text("ref: refs/heads/main\n" + " " * gitrefs.MAX_HEAD_BYTES)
    refs = gitrefs.branches(str(main))
    assert refs is not None and f"{dot / 'HEAD'} is over" in (refs.unreadable or "")
    assert gitrefs.current_branch(str(main)) is None
    (dot / "HEAD").write_text("ref: refs/heads/main\n")
    with open(dot / "packed-refs", "wb") as f:
        f.truncate(gitrefs.MAX_PACKED_BYTES + 1)
    refs = gitrefs.branches(str(main))
    assert refs is not None and f"{dot / 'packed-refs'} is over" in (refs.unreadable or "")
    oid = (dot / "refs" / "heads" / "main").read_bytes().strip()
    last, tag = oid + b" refs/heads/last\n", oid + b" refs/tags/t\n"
    lines, pad = divmod(gitrefs.MAX_PACKED_BYTES - len(last), len(tag))
    body = tag * lines + (b"#" + b" " * (pad - 2) + b"\n" if pad else b"") + last  # exactly as large as is read
    (dot / "packed-refs").write_bytes(body)
    assert gitrefs.branches(str(main)) == gitrefs.Branches(frozenset({"main", "last"}))


def test_worktrees_are_read_up_to_the_bound(tmp_path):
    main = tmp_path / "main"
    main.mkdir()
    worktrees = repository(main) / "worktrees"
    worktrees.mkdir()
    for i in range(paths.MAX_WORKTREES):
        (worktrees / f"w{i}").mkdir()
    assert paths.worktree_entries(str(main / ".git")) == (sorted(f"w{i}" for i in range(paths.MAX_WORKTREES)), False)
    assert gitrefs.branches(str(main)) == gitrefs.Branches(frozenset({"main"}))
    (worktrees / "one-more").mkdir()
    assert paths.worktree_entries(str(main / ".git"))[1] is True
    refs = gitrefs.branches(str(main))
    assert refs is not None and "more than 1,000 worktrees" in (refs.unreadable or "")
    assert paths.linked_worktrees(str(main / ".git")) == []  # entries without a gitdir file


def test_a_link_chain_too_long_to_resolve_is_a_path_that_leads_nowhere(tmp_path):
    for i in range(2000):
        (tmp_path / f"l{i}").symlink_to(f"l{i + 1}")
    (tmp_path / "l2000").mkdir()
    assert paths.canonical(str(tmp_path / "l1990")) == str(tmp_path / "l2000")  # a short chain resolves
    # before 3.13 realpath recurses once per link: the chain is left as it is (the kernel gives
    # up on it too, ELOOP); 3.13 resolves it without recursion
    assert paths.canonical(str(tmp_path / "l0")) in (str(tmp_path / "l0"), str(tmp_path / "l2000"))


def test_refs_heads_as_a_link_is_not_walked(tmp_path):
    main = tmp_path / "main"
    main.mkdir()
    heads = repository(main) / "refs" / "heads"
    os.rename(heads, tmp_path / "elsewhere")
    heads.symlink_to(tmp_path / "elsewhere")
    refs = gitrefs.branches(str(main))
    assert refs is not None and "symlink" in (refs.unreadable or "")


def test_a_head_that_is_a_fifo_is_unreadable(tmp_path, fresh):
    main = tmp_path / "main"
    main.mkdir()
    head = repository(main) / "HEAD"
    head.unlink()
    os.mkfifo(head)
    refs = gitrefs.branches(str(main))
    assert refs is not None and "HEAD" in (refs.unreadable or "")
    assert gitrefs.current_branch(str(main)) is None


# ---------------------------------------------------------------- the doors, as processes


@pytest.mark.process
def test_sessions_in_a_trap_lists_its_rows_with_the_hint(module_claude, traps):
    _, built, sids = traps
    for name in (DEEP, LOOP):
        proc = module_claude.run("sessions", cwd=str(built[name]))
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        assert sids[name][:8] in proc.stdout and HINT in proc.stdout, proc.stdout
        assert HINT in proc.stderr  # why, said once
        rows = module_claude.rows_by_id(str(built[name]))
        assert HINT in rows[sids[name]]["hints"] and "branch gone" not in rows[sids[name]]["hints"]


@pytest.mark.process
def test_a_branch_named_with_control_characters_prints_inert(module_claude, traps):
    _, built, sids = traps
    proc = module_claude.run("sessions", "--project", str(built[CONTROL_BRANCH]))
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout + proc.stderr and "\x07" not in proc.stdout
    assert sids[CONTROL_BRANCH][:8] in proc.stdout
    rows = module_claude.rows_by_id(str(built[CONTROL_BRANCH]))
    assert rows[sids[CONTROL_BRANCH]]["branch"] == EVIL_BRANCH  # --json gives it back as it is, escaped


@pytest.mark.process
def test_all_lists_every_project_beside_the_traps(module_claude, traps, monkeypatch):
    clean, built, sids = traps
    module_claude.activate(monkeypatch)
    for project in (str(clean), *map(str, built.values())):
        registry.register(resolve(project))
    proc = module_claude.run("sessions", "--all", "--json")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    listed = {row["id"]: row for row in json.loads(proc.stdout)}
    assert set(sids.values()) <= set(listed)
    assert HINT not in listed[sids["clean"]]["hints"]
    for name, (_, unreadable) in TRAPS.items():
        assert (HINT in listed[sids[name]]["hints"]) == unreadable, name


@pytest.mark.process
def test_the_hub_lists_every_project_beside_the_traps(module_claude, traps, monkeypatch):
    from hubproc import Hub

    clean, built, sids = traps
    module_claude.activate(monkeypatch)
    for project in (str(clean), *map(str, built.values())):
        registry.register(resolve(project))
    with Hub(module_claude) as hub, hub.client() as c:
        r = c.get("/api/rows", params={"limit": 200})
        assert r.status_code == 200, r.text
        rows = {row["id"]: row for row in r.json()["rows"]}
    assert set(sids.values()) <= set(rows)
    assert HINT in rows[sids[DEEP]]["hints"] and HINT not in rows[sids["clean"]]["hints"]


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.process
async def test_serve_in_a_trap_answers_initialize_and_list(module_claude, traps):
    _, built, sids = traps
    folder = str(built[LOOP])
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "c3async", "serve"],
        env=module_claude.env(CLAUDE_PROJECT_DIR=folder),
        cwd=folder,
    )
    with open(Path(module_claude.root, "serve.err"), "a") as err:
        async with Client(stdio_client(params, errlog=err), mode="legacy") as c:
            listed = await c.call_tool("c3_session", {"action": "list"})
    text = "".join(getattr(block, "text", "") for block in listed.content)
    assert not listed.is_error, text
    assert sids[LOOP][:8] in text and HINT in text
