"""One project, one state root: ``paths.project_root`` / ``project_state`` on real git
repositories (main checkout, worktrees, nested, bare, separate git dir, moved main, broken
``.git`` files), the read-only fallback, and the registry folded by root."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from c3async.ground import paths, stateroot
from c3async.ground.project import resolve
from c3async.stores import activity, registry


def git(*args: str, cwd: str | Path) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main", *args],
        cwd=str(cwd),
        env=env,
        check=True,
        capture_output=True,
    )


def repo(where: Path, name: str = "main") -> str:
    """A repository with one commit; returns the main checkout's real path."""
    path = where / name
    path.mkdir(parents=True)
    git("init", "-q", cwd=path)
    git("commit", "-q", "--allow-empty", "-m", "init", cwd=path)
    return os.path.realpath(path)


def worktree(main: str, target: str | Path, branch: str) -> str:
    git("worktree", "add", "-q", "-b", branch, str(target), cwd=main)
    return os.path.realpath(os.path.join(main, target))


@pytest.fixture
def world(claude, monkeypatch, tmp_path):
    """This process pointed at the sandbox, with paths' per-process caches empty."""
    claude.activate(monkeypatch)
    monkeypatch.setattr(paths, "_roots", {})
    monkeypatch.setattr(stateroot, "_states", {})
    monkeypatch.setattr(stateroot, "_resolved", set())
    monkeypatch.setattr(paths, "_warned", set())
    base = tmp_path / "w"
    base.mkdir()
    return Path(os.path.realpath(base))


# ---------------------------------------------------------------- project_root


def test_main_checkout_and_worktrees_share_the_main_checkout(world):
    main = repo(world)
    wt = worktree(main, "../wt", "feature")
    nested = worktree(main, "nested", "nested")  # a worktree inside the main checkout's folder
    assert paths.project_root(main) == main
    assert paths.project_root(wt) == main
    assert paths.project_root(nested) == main
    assert paths.project_root(main + "/") == main
    assert stateroot.project_state(wt) == stateroot.project_state(nested) == Path(main) / ".c3"


def test_a_subdirectory_and_a_folder_outside_git_are_their_own_projects(world):
    main = repo(world)
    sub = Path(main, "src")
    sub.mkdir()
    plain = world / "plain"
    plain.mkdir()
    assert paths.project_root(str(sub)) == str(sub)
    assert paths.project_root(str(plain)) == str(plain)
    assert stateroot.project_state(str(plain)) == plain / ".c3"


def test_relative_paths_and_symlinks_resolve_to_the_real_root(world, monkeypatch):
    main = repo(world)
    wt = worktree(main, "../wt", "feature")
    link = world / "link-to-wt"
    link.symlink_to(wt)
    assert paths.project_root(str(link)) == main
    monkeypatch.chdir(wt)
    assert paths.project_root(".") == main


def test_bare_repository_with_worktrees_is_rooted_in_the_bare_folder(world):
    main = repo(world, "origin")
    bare = world / "repo.git"
    git("clone", "-q", "--bare", main, str(bare), cwd=world)
    git("worktree", "add", "-q", str(world / "bwt-one"), "main", cwd=bare)
    git("worktree", "add", "-q", "-b", "two", str(world / "bwt-two"), cwd=bare)
    assert paths.project_root(str(world / "bwt-one")) == str(bare)
    assert paths.project_root(str(world / "bwt-two")) == str(bare)
    assert paths.project_root(str(bare)) == str(bare)
    assert stateroot.project_state(str(world / "bwt-one")) == bare / ".c3"


def test_separate_git_dir_checkout_is_its_own_root(world, caplog):
    main = world / "main"
    git("init", "-q", f"--separate-git-dir={world / 'store.git'}", str(main), cwd=world)
    git("commit", "-q", "--allow-empty", "-m", "init", cwd=main)
    wt = worktree(str(main), "../wt", "feature")
    assert paths.project_root(str(main)) == str(main)
    # The repository's files do not say where its main checkout is: each checkout keeps its own
    # state, and the worktree says so (once).
    with caplog.at_level(logging.WARNING, logger="c3async"):
        assert paths.project_root(wt) == wt
        paths._roots.clear()
        assert paths.project_root(wt) == wt
    said = [r.getMessage() for r in caplog.records if "do not name its main checkout" in r.getMessage()]
    assert len(said) == 1 and wt in said[0]
    # core.worktree names it: then the worktree joins the main checkout.
    git("config", "core.worktree", str(main), cwd=main)
    paths._roots.clear()
    assert paths.project_root(wt) == str(main)


def test_relative_and_absolute_commondir_and_gitdir(world):
    main = repo(world)
    wt = worktree(main, "../wt", "feature")
    admin = Path(main, ".git", "worktrees", "wt")
    assert (admin / "commondir").read_text().strip() == "../.."  # git writes it relative
    (admin / "commondir").write_text(str(Path(main, ".git")) + "\n")  # absolute
    paths._roots.clear()
    assert paths.project_root(wt) == main
    # A relative gitdir line in the worktree's .git file (git >= 2.48 can write those).
    Path(wt, ".git").write_text(f"gitdir: {os.path.relpath(admin, wt)}\n")
    paths._roots.clear()
    assert paths.project_root(wt) == main


def test_missing_commondir_reads_as_a_separate_git_dir(world):
    main = repo(world)
    wt = worktree(main, "../wt", "feature")
    Path(main, ".git", "worktrees", "wt", "commondir").unlink()
    assert paths.project_root(wt) == wt


@pytest.mark.parametrize("how", ["moved", "deleted"])
def test_worktree_of_a_moved_or_deleted_main_checkout_keeps_its_own_state(world, caplog, how):
    main = repo(world)
    wt = worktree(main, "../wt", "feature")
    assert paths.project_root(wt) == main  # cached, before the main checkout goes
    if how == "moved":
        shutil.move(main, world / "elsewhere")
    else:
        shutil.rmtree(main)
    with caplog.at_level(logging.WARNING, logger="c3async"):
        assert paths.project_root(wt) == wt
        assert stateroot.project_state(wt) == Path(wt) / ".c3"
        activity.record(resolve(wt), "session_start", session_id="s1")
    assert [r.kind for r in activity.read_rows(resolve(wt)).records] == ["session_start"]
    said = [r.getMessage() for r in caplog.records if "moved or deleted" in r.getMessage()]
    assert len(said) == 1 and wt in said[0]
    if how == "moved":  # `git worktree repair` re-links it: the worktree joins the moved main,
        git("worktree", "repair", wt, cwd=world / "elsewhere")  # and what it wrote meanwhile is folded
        moved = str(world / "elsewhere")
        assert paths.project_root(wt) == moved
        assert [r.session_id for r in activity.read_rows(resolve(wt)).records] == ["s1"]
        assert stateroot.project_state(wt) == Path(moved, ".c3") and not Path(wt, ".c3").exists()


@pytest.mark.parametrize(
    "content",
    [
        b"gitdir: /nowhere/at/all\n",
        b"gitdir:\n",
        b"",
        b"\x00\xff garbage \x00",
        b"gitdir: relative/nowhere",
        b"gitdir: /tmp/\x00nul\n",
        b"ref: refs/heads/main\n",
    ],
)
def test_a_git_file_pointing_nowhere_or_garbage_is_its_own_project(world, content):
    folder = world / "odd"
    folder.mkdir()
    (folder / ".git").write_bytes(content)
    assert paths.project_root(str(folder)) == str(folder)
    assert stateroot.project_state(str(folder)) == folder / ".c3"


def test_a_git_fifo_or_unreadable_git_file_never_blocks(world):
    folder = world / "fifo"
    folder.mkdir()
    os.mkfifo(folder / ".git")  # opening it for reading would block forever
    started = time.monotonic()
    assert paths.project_root(str(folder)) == str(folder)
    assert time.monotonic() - started < 5
    other = world / "dir-git-file"
    other.mkdir()
    (other / ".git").write_text(f"gitdir: {folder / '.git'}\n")  # a gitdir that is a FIFO
    assert paths.project_root(str(other)) == str(other)
    locked = world / "locked"
    locked.mkdir()
    (locked / ".git").write_text("gitdir: /x\n")
    (locked / ".git").chmod(0)
    assert paths.project_root(str(locked)) == str(locked)


def test_a_worktree_whose_commondir_is_a_fifo_or_missing_folder(world):
    main = repo(world)
    wt = worktree(main, "../wt", "feature")
    commondir = Path(main, ".git", "worktrees", "wt", "commondir")
    commondir.unlink()
    os.mkfifo(commondir)
    assert paths.project_root(wt) == wt
    commondir.unlink()
    commondir.write_text("../../../gone/.git\n")
    paths._roots.clear()
    assert paths.project_root(wt) == wt


def test_repeated_calls_cost_one_lstat_and_see_a_changed_git_file(world, monkeypatch):
    main = repo(world)
    wt = worktree(main, "../wt", "feature")
    calls = []
    real = paths._resolve_root
    monkeypatch.setattr(paths, "_resolve_root", lambda p: calls.append(p) or real(p))
    assert paths.project_root(wt) == main
    for _ in range(100):
        assert paths.project_root(wt) == main
    assert calls == [wt]
    other = repo(world, "other")
    target = Path(other, ".git", "worktrees", "wt")
    target.mkdir(parents=True)
    (target / "commondir").write_text("../..\n")
    (target / "gitdir").write_text(f"{wt}/.git\n")  # the repository names the worktree back
    dot_git = Path(wt, ".git")
    dot_git.write_text(f"gitdir: {target}\n")
    st = dot_git.stat()
    os.utime(dot_git, ns=(st.st_atime_ns, st.st_mtime_ns + 10_000_000))
    assert paths.project_root(wt) == other
    assert len(calls) == 2


# ---------------------------------------------------------------- project_state


def test_state_written_from_a_worktree_is_read_from_the_main_checkout(world):
    main = repo(world)
    wt = worktree(main, "../wt", "feature")
    activity.record(resolve(wt), "session_start", session_id="from-the-worktree")
    activity.record(resolve(main), "session_start", session_id="from-main")
    assert [r.session_id for r in activity.read_rows(resolve(main)).records] == ["from-the-worktree", "from-main"]
    assert [r.session_id for r in activity.read_rows(resolve(wt)).records] == ["from-the-worktree", "from-main"]
    assert not Path(wt, ".c3").exists()


@contextlib.contextmanager
def read_only_place(base: Path):
    """A folder that can be made read-only for real: a chmod for an ordinary user; for root (whom
    a mode does not stop), a small tmpfs remounted read-only. Yields (folder, make_ro, make_rw)."""
    place = base / "ro"
    place.mkdir()
    if os.geteuid() != 0:
        yield place, lambda p: os.chmod(p, 0o555), lambda p: os.chmod(p, 0o755)
        return
    if sys.platform != "linux":
        pytest.skip("a read-only folder for root needs a Linux mount")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(place)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")

    def remount(mode: str):
        def run(_path):
            subprocess.run(["mount", "-o", f"remount,{mode}", str(place)], check=True, timeout=30)

        return run

    try:
        yield place, remount("ro"), remount("rw")
    finally:
        subprocess.run(["umount", "-l", str(place)], capture_output=True, timeout=30, check=False)


def test_read_only_main_checkout_falls_back_to_c3_home_and_says_so(world, caplog, monkeypatch):
    with read_only_place(world) as (place, make_ro, make_rw):
        main = repo(place)
        wt = worktree(main, str(world / "wt"), "feature")  # the worktree itself stays writable
        make_ro(main)
        try:
            fallback = Path(os.environ["C3_HOME"]) / "state" / paths.state_slug(main)
            with caplog.at_level(logging.WARNING, logger="c3async"):
                assert stateroot.project_state(wt) == fallback
                assert stateroot.project_state(main) == fallback
                activity.record(resolve(wt), "session_start", session_id="while-read-only")
            said = [r.getMessage() for r in caplog.records if "cannot be written" in r.getMessage()]
            assert len(said) == 1 and main in said[0] and str(fallback) in said[0]
            assert len(paths.state_slug(main)) <= paths.STATE_SLUG_LENGTH
            assert [r.session_id for r in activity.read_rows(resolve(main)).records] == ["while-read-only"]
            assert not Path(wt, ".c3").exists()  # never split into the worktree
        finally:
            make_rw(main)
        # Writable again: a new process folds the fallback into the main checkout's .c3.
        for module, name in ((paths, "_roots"), (stateroot, "_states"), (stateroot, "_resolved")):
            monkeypatch.setattr(module, name, type(getattr(module, name))())
        assert stateroot.project_state(wt) == Path(main) / ".c3"
        assert [r.session_id for r in activity.read_rows(resolve(main)).records] == ["while-read-only"]
        assert not fallback.exists()
        assert [p.name.startswith(fallback.name + ".folded-") for p in fallback.parent.iterdir()] == [True]


# ---------------------------------------------------------------- registry


def _write_registry(entries: list[dict]) -> Path:
    path = Path(os.environ["C3_HOME"]) / "projects.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 1, "projects": entries}))
    return path


def test_registry_lists_each_project_once_by_its_root(world):
    main = repo(world)
    wt1 = worktree(main, "../wt1", "one")
    wt2 = worktree(main, "../wt2", "two")
    plain = world / "plain"
    plain.mkdir()
    old = time.time() - 10 * 3600
    path = _write_registry(
        [
            {"path": wt1, "added": 1.0, "last_seen": old},
            {"path": main, "added": 2.0, "last_seen": old},
            {"path": str(plain), "added": 3.0, "last_seen": old},
            {"path": wt2, "added": 4.0, "last_seen": old + 5},
        ]
    )
    assert registry.projects() == [main, str(plain)]
    before = path.read_bytes()
    registry.register(resolve(plain))  # a change: the file is stored folded
    assert path.read_bytes() != before
    stored = json.loads(path.read_text())["projects"]
    assert [p["path"] for p in stored] == [main, str(plain)]
    assert stored[0]["added"] == 1.0  # the earliest entry's
    assert stored[0]["last_seen"] == old + 5
    registry.register(resolve(wt2))  # a worktree registers its root
    assert [p["path"] for p in json.loads(path.read_text())["projects"]] == [main, str(plain)]


def test_register_stores_the_root(world):
    main = repo(world)
    wt = worktree(main, "../wt", "feature")
    registry.register(resolve(wt))
    assert registry.projects() == [main]
    registry.register(resolve(main))
    registry.register(resolve(os.path.join(main, ".") + "/"))
    assert registry.projects() == [main]
