"""A shipped ``.c3`` or ``.git`` chooses nothing: folders read from logs are used only when
absolute and inside the project's own checkouts; git's files move a project's root only when
both ends of a worktree link agree; nothing under ``.claude/`` is written through a link; every
printed resume command quotes every part."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_state_root import git, repo, worktree

from stress.transcripts import simple_session

pytestmark = pytest.mark.process


def _log(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def _start(cwd: str, sid: str = "0a0a0a0a-0000-4000-8000-00000000000a", ts: float = 1.0) -> dict:
    return {"ts": ts, "kind": "session_start", "session_id": sid, "cwd": cwd}


def test_a_log_cannot_send_a_listing_to_another_folder(claude):
    """Rows (and a C3 record) whose cwd is relative, ``..``-laden or another project's folder
    do not bring that folder's sessions into this project: not in the listing, not in ``show``,
    not in the search, not over MCP."""
    victim = claude.project("victim")
    secret = simple_session(claude.folder(victim), victim, "the victim's private prompt")
    shipped = claude.project("shipped")
    own = simple_session(claude.folder(shipped), shipped, "the shipped repository's own session")
    state = Path(shipped, ".c3")
    _log(
        state / "activity.jsonl",
        [
            _start(".."),
            _start("../victim"),
            _start(victim),
            _start(shipped + "/../victim"),
            _start(victim + "/"),
            _start("victim"),
        ],
    )
    (state / "sessions").mkdir(parents=True)
    (state / "sessions" / "0b0b0b0b-0000-4000-8000-00000000000b.json").write_text(
        json.dumps(
            {"c3_session_id": "0b0b0b0b-0000-4000-8000-00000000000b", "cwd": victim, "host_session_ids": [secret]}
        )
    )
    rows = claude.sessions(shipped)
    assert [r["id"] for r in rows] == [own]
    proc = claude.run("show", secret[:8], "--project", shipped)
    assert proc.returncode != 0 or "victim" in proc.stderr  # found elsewhere (and said so) or not at all
    assert "the victim's private prompt" not in claude.run("sessions", "--project", shipped).stdout
    found = json.loads(claude.run("search", "private", "--project", shipped, "--json").stdout)
    assert found["results"] == []


def test_a_log_of_200000_folders_costs_a_listing_what_an_empty_one_does(claude):
    """A shipped activity log naming 200,000 distinct folders: cwds are deduplicated with sets
    and capped, so the listing finishes (it took minutes). The time limit is a hang guard."""
    project = claude.project("big")
    sid = simple_session(claude.folder(project), project, "one session")
    rows = (json.dumps(_start(f"{project}/sub{i}", ts=i)) + "\n" for i in range(200_000))
    Path(project, ".c3").mkdir()
    Path(project, ".c3", "activity.jsonl").write_text("".join(rows))
    proc = subprocess.run(
        [sys.executable, "-m", "c3async", "sessions", "--project", project, "--json"],
        capture_output=True,
        text=True,
        env=claude.env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert [r["id"] for r in json.loads(proc.stdout)] == [sid]


def test_core_worktree_in_a_shipped_git_file_does_not_move_the_root(claude):
    """``.git`` names a git dir shipped inside the folder, whose config says ``core.worktree =
    ../..``: the parent would become the project and ``mark note`` would write there."""
    parent = Path(claude.project("parent"))
    folder = parent / "cloned"
    fake = folder / ".fakegit"
    (fake / "worktrees" / "w").mkdir(parents=True)
    (folder / ".git").write_text("gitdir: .fakegit/worktrees/w\n")
    (fake / "worktrees" / "w" / "commondir").write_text("../..\n")
    (fake / "worktrees" / "w" / "gitdir").write_text(f"{folder}/.git\n")
    (fake / "config").write_text("[core]\n\tworktree = ../..\n\tbare = false\n")
    (fake / "HEAD").write_text("ref: refs/heads/main\n")
    sid = simple_session(claude.folder(str(folder)), str(folder), "in the cloned folder")
    proc = claude.run("mark", "note", sid, "--summary", "here", "--project", str(folder))
    assert proc.returncode == 0, proc.stderr
    assert Path(folder, ".c3", "session_marks.jsonl").is_file()
    assert not (parent / ".c3").exists()


def test_a_git_file_naming_another_repositorys_worktree_is_its_own_project(claude):
    """``.git: gitdir: <a real repository's worktree entry>``: that repository does not name this
    folder back, so the folder is its own project (its marks stay in it)."""
    base = Path(claude.root, "work")
    base.mkdir(parents=True, exist_ok=True)
    main = repo(base, "real")
    wt = worktree(main, "../real-wt", "feature")
    intruder = base / "intruder"
    intruder.mkdir()
    (intruder / ".git").write_text(f"gitdir: {main}/.git/worktrees/real-wt\n")
    sid = simple_session(claude.folder(str(intruder)), str(intruder), "intruder session")
    assert claude.run("mark", "note", sid, "--summary", "mine", "--project", str(intruder)).returncode == 0
    assert Path(intruder, ".c3", "session_marks.jsonl").is_file()
    assert not Path(main, ".c3", "session_marks.jsonl").exists()
    wt_sid = simple_session(claude.folder(wt), wt, "the real worktree's session")
    assert [r["id"] for r in claude.sessions(wt)] == [wt_sid]  # the real worktree is still the repository's


def test_a_shipped_git_folder_cannot_list_another_project_as_its_worktree(claude):
    base = Path(claude.root, "work")
    base.mkdir(parents=True, exist_ok=True)
    victim = base / "victim"
    victim.mkdir()
    simple_session(claude.folder(str(victim)), str(victim), "the victim's session")
    shipped = Path(repo(base, "shipped"))
    entry = shipped / ".git" / "worktrees" / "victim"
    entry.mkdir(parents=True)
    (entry / "gitdir").write_text(f"{victim}/.git\n")
    (entry / "commondir").write_text("../..\n")
    own = simple_session(claude.folder(str(shipped)), str(shipped), "shipped's own")
    assert [r["id"] for r in claude.sessions(str(shipped))] == [own]


def test_a_removed_worktree_stays_listed(claude):
    """The worktree was seen (and vouched for by git's files from both ends) before it was
    removed: its sessions stay listed from the main checkout, with the ``worktree gone`` hint
    and a resume command that brings the worktree back first."""
    base = Path(claude.root, "work")
    base.mkdir(parents=True, exist_ok=True)
    main = repo(base, "app")
    wt = worktree(main, "../app-feature", "feature")
    in_main = simple_session(claude.folder(main), main, "on main")
    in_wt = simple_session(claude.folder(wt), wt, "on the feature", branch="feature")
    assert {r["id"] for r in claude.sessions(main)} == {in_main, in_wt}
    git("worktree", "remove", "--force", wt, cwd=main)
    rows = claude.rows_by_id(main)
    assert set(rows) == {in_main, in_wt}
    assert "worktree gone" in rows[in_wt]["hints"]
    assert shlex.split(rows[in_wt]["resume"])[:3] == ["git", "worktree", "add"]


def test_nothing_under_claude_is_written_through_a_link(claude):
    project = Path(claude.project("cloned"))
    outside = Path(claude.root, "outside")
    outside.mkdir()
    (project / ".claude").symlink_to(outside)
    proc = claude.run("install-hooks", "--project", str(project))
    assert proc.returncode == 1 and "symlink" in proc.stderr and '"SessionStart"' in proc.stderr, proc.stderr
    assert list(outside.iterdir()) == []
    (project / ".claude").unlink()
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.local.json").symlink_to(outside / "target.json")
    proc = claude.run("install-hooks", "--project", str(project))
    assert proc.returncode == 1 and "symlink" in proc.stderr, proc.stderr
    assert list(outside.iterdir()) == []
    (project / ".claude" / "settings.local.json").unlink()
    assert claude.run("install-hooks", "--project", str(project)).returncode == 0
    settings = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert set(settings["hooks"]) == {"SessionStart", "SessionEnd"}


HOSTILE_NAMES = ["a\nrm -rf ~", "b; touch pwned #", "c $(id) `id`", "d'quote\"", "e\\ space\t"]


def test_every_resume_command_quotes_every_part(claude):
    """Folder names with a newline, ``;``, ``$( )``, quotes: every resume command a row, a search
    result or a removed worktree gets parses back (POSIX shell rules) into exactly its words,
    with nothing in a comment."""
    for name in HOSTILE_NAMES:
        folder = Path(claude.root, "work", name)
        folder.mkdir(parents=True)
        sid = simple_session(claude.folder(str(folder)), str(folder), f"work in {name!r}")
        (row,) = claude.sessions(str(folder))
        assert shlex.split(row["resume"]) == ["cd", str(folder), "&&", "claude", "--resume", sid]
        found = json.loads(claude.run("search", "work", "--project", str(folder), "--json").stdout)["results"]
        assert shlex.split(found[0]["resume"]) == ["cd", str(folder), "&&", "claude", "--resume", sid]
    from c3async.sessions.resume import resume_command

    for name in HOSTILE_NAMES:
        for branch in (None, "HEAD", "feat; rm -rf /"):
            cmd = resume_command(f"/gone/{name}", "0c0c0c0c-0000-4000-8000-00000000000c", branch, gone=True)
            words = shlex.split(cmd, comments=True)
            assert words == shlex.split(cmd), cmd  # no comment hides anything
            assert words[-3:] in (
                ["claude", "--resume", "0c0c0c0c-0000-4000-8000-00000000000c"],
                ["c3async", "resume", "0c0c0c0c-0000-4000-8000-00000000000c"],
            ), cmd
            if branch and branch != "HEAD":
                assert words[:5] == ["git", "worktree", "add", f"/gone/{name}", branch]
    shutil.rmtree(Path(claude.root, "work"))
