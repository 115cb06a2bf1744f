"""Stage 1: which transcript folders belong to a project (slug, long paths, collisions, worktrees)."""

from __future__ import annotations

import os
import shlex
import subprocess

import pytest

from c3async.catalog.locate import slug
from c3async.ground.project import resolve
from stress.transcripts import claude_slug, simple_session

pytestmark = pytest.mark.process

# --- the slug rule (pure) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, expected",
    [
        ("/Users/alice/src/app", "-Users-alice-src-app"),
        ("/Users/me/foo/.worktrees/bar", "-Users-me-foo--worktrees-bar"),
        ("C:\\Users\\x\\my_proj.v2", "C--Users-x-my-proj-v2"),
        ("E:\\MatLab_HomeWork", "E--MatLab-HomeWork"),
        ("/home/u/日本語/proj", "-home-u-----proj"),
        ("/home/u/emoji😀dir", "-home-u-emoji--dir"),
        ("/srv/data analysis/v1.2", "-srv-data-analysis-v1-2"),
    ],
)
def test_slug_replaces_every_utf16_unit_outside_ascii_alphanumerics(path, expected):
    assert slug(path) == expected


@pytest.mark.parametrize("path", ["/tmp/café", "/tmp/ǅungla", "/tmp/x²", "/tmp/٣d", "/tmp/Ｆull"])
def test_slug_treats_non_ascii_letters_and_digits_as_separators(path):
    assert slug(path) == claude_slug(path)
    assert slug(path).count("-") == len(path) - sum(c.isascii() and c.isalnum() for c in path)


def test_slug_of_a_non_bmp_character_is_two_dashes():
    assert slug("/a/𝕏") == "-a---"


def test_slug_keeps_the_length_in_utf16_units():
    path = "/home/u/日本語/😀/proj"
    assert len(slug(path)) == len(path.encode("utf-16-le")) // 2


# --- where the transcripts live ---------------------------------------------------------------


def test_sessions_are_read_from_claude_config_dir(claude):
    project = claude.project("app")
    sid = simple_session(claude.folder(project), project)
    rows = claude.sessions(project)
    assert [r["id"] for r in rows] == [sid]
    assert rows[0]["path"] == str(claude.folder(project) / f"{sid}.jsonl")


def test_home_dot_claude_is_not_read_when_claude_config_dir_is_set(claude):
    project = claude.project("app")
    home = claude.root / "home"
    decoy = home / ".claude" / "projects" / claude_slug(project)
    simple_session(decoy, project, "decoy")
    sid = simple_session(claude.folder(project), project)
    rows = claude.sessions(project, env=claude.env(HOME=str(home)))
    assert [r["id"] for r in rows] == [sid]


def test_empty_claude_config_dir_counts_as_unset(claude):
    project = claude.project("app")
    home = claude.root / "home"
    sid = simple_session(home / ".claude" / "projects" / claude_slug(project), project)
    simple_session(claude.folder(project), project, "decoy in the sandbox config dir")
    rows = claude.sessions(project, env=claude.env(CLAUDE_CONFIG_DIR="", HOME=str(home)))
    assert [r["id"] for r in rows] == [sid]


def test_cjk_project_folder_has_one_dash_per_character(claude):
    project = claude.project("日本語", "proj")
    folder = claude.folder(project)
    assert folder.name.endswith("-----proj")
    sid = simple_session(folder, project)
    assert [r["id"] for r in claude.sessions(project)] == [sid]


def test_emoji_project_folder_has_two_dashes_for_the_emoji(claude):
    project = claude.project("emoji😀dir")
    folder = claude.folder(project)
    assert folder.name.endswith("-emoji--dir")
    sid = simple_session(folder, project)
    assert [r["id"] for r in claude.sessions(project)] == [sid]


# --- long paths -------------------------------------------------------------------------------


def _long_project(claude, last: str = "averyveryverylongdirectoryname06") -> str:
    parts = [f"averyveryverylongdirectoryname{i:02d}" for i in range(6)] + [last]
    project = claude.project(*parts)
    assert len(claude_slug(project)) > 220
    return project


def test_long_path_sessions_from_every_hash_suffix_folder_are_listed(claude):
    project = _long_project(claude)
    prefix = claude_slug(project)[:200]
    bun = simple_session(claude.folder(project, prefix + "-nry64f"), project, "from the CLI", mtime=1_700_000_100)
    node = simple_session(claude.folder(project, prefix + "-1k2j3h4g"), project, "from the SDK", mtime=1_700_000_000)
    assert [r["id"] for r in claude.sessions(project)] == [bun, node]


def test_long_path_cut_inside_an_emoji_keeps_half_of_it(claude):
    base = claude.project()
    filler = "d" * (199 - len(claude_slug(base)) - 1)
    project = claude.project(filler + "😀" + "tail" * 10)
    slug_units = claude_slug(project)
    assert slug_units[198:201] == "d--"  # the cut at 200 falls between the emoji's two units
    sid = simple_session(claude.folder(project, slug_units[:200] + "-5k1x"), project)
    assert [r["id"] for r in claude.sessions(project)] == [sid]


def test_long_path_folder_named_with_the_full_slug_is_not_required(claude):
    project = _long_project(claude)
    sid = simple_session(claude.folder(project, claude_slug(project)[:200] + "-0"), project)
    assert [r["id"] for r in claude.sessions(project)] == [sid]


def test_long_path_sibling_sharing_the_200_char_prefix_is_filtered_by_cwd(claude):
    project = _long_project(claude, "averyveryverylongdirectoryname06")
    sibling = _long_project(claude, "averyveryverylongdirectoryname07")
    prefix = claude_slug(project)[:200]
    assert claude_slug(sibling)[:200] == prefix
    mine = simple_session(claude.folder(project, prefix + "-abc123"), project, "mine")
    simple_session(claude.folder(sibling, prefix + "-zz9"), sibling, "the sibling's")
    assert [r["id"] for r in claude.sessions(project)] == [mine]


def test_same_session_id_in_two_hash_folders_is_listed_once_newest_wins(claude):
    project = _long_project(claude)
    prefix = claude_slug(project)[:200]
    sid = simple_session(claude.folder(project, prefix + "-aaa"), project, "older copy", mtime=1_700_000_000)
    simple_session(claude.folder(project, prefix + "-bbb"), project, "newer copy", mtime=1_700_000_500, session_id=sid)
    rows = claude.sessions(project)
    assert len(rows) == 1
    assert rows[0]["first_prompt"] == "newer copy"
    assert rows[0]["path"] == str(claude.projects_root / (prefix + "-bbb") / f"{sid}.jsonl")


# --- exact folders only -----------------------------------------------------------------------


def test_alphanumeric_match_folder_with_other_separators_is_used(claude):
    project = claude.project("my_proj", "v2")
    name = claude_slug(project).replace("-", "_")
    sid = simple_session(claude.folder(project, name), project)
    assert [r["id"] for r in claude.sessions(project)] == [sid]


@pytest.mark.parametrize(
    "decorate",
    [
        lambda s: s + "-old",
        lambda s: s + "2",
        lambda s: "-backup" + s,
        lambda s: s[:-1],
        lambda s: s[:-1] + "X",
    ],
)
def test_folder_that_merely_resembles_the_project_name_is_never_used(claude, decorate):
    project = claude.project("x", "proj")
    simple_session(claude.folder(project, decorate(claude_slug(project))), project)
    assert claude.sessions(project) == []


def test_folder_containing_the_name_is_not_used_next_to_the_exact_one(claude):
    project = claude.project("x", "proj")
    sid = simple_session(claude.folder(project), project)
    simple_session(claude.folder(project, claude_slug(project) + "-old"), project, "from the old folder")
    assert [r["id"] for r in claude.sessions(project)] == [sid]


# --- cwd filter and canonical paths -----------------------------------------------------------


def test_colliding_slugs_list_only_each_projects_own_sessions(claude):
    projects = [claude.project("x", name) for name in ("my_app", "my-app", "my.app")]
    folder = claude.folder(projects[0])
    assert {claude_slug(p) for p in projects} == {folder.name}
    ids = {p: simple_session(folder, p, f"work in {os.path.basename(p)}") for p in projects}
    for project in projects:
        rows = claude.sessions(project)
        assert [r["id"] for r in rows] == [ids[project]]
        assert rows[0]["cwd"] == project


def test_symlinked_project_lists_sessions_recorded_under_the_resolved_path(claude):
    real = claude.project("real", "app")
    link = claude.root / "work" / "link"
    link.symlink_to(real, target_is_directory=True)
    sid = simple_session(claude.folder(real), real)
    rows = claude.sessions(str(link))
    assert [r["id"] for r in rows] == [sid]
    assert rows[0]["project"] == real
    assert rows[0]["cwd"] == real


def _git(*args: str, cwd: str) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
    )


def test_worktree_sessions_are_listed_with_the_worktree_as_cwd(claude):
    repo = claude.project("repo")
    _git("init", "-q", cwd=repo)
    _git("commit", "-q", "--allow-empty", "-m", "init", cwd=repo)
    _git("worktree", "add", "-q", "-b", "feature", "../repo-wt", cwd=repo)
    worktree = os.path.realpath(os.path.join(repo, "..", "repo-wt"))
    main = simple_session(claude.folder(repo), repo, "on main", mtime=1_700_000_000)
    feature = simple_session(
        claude.folder(worktree), worktree, "on the feature branch", mtime=1_700_000_100, branch="feature"
    )
    rows = {r["id"]: r for r in claude.sessions(repo)}
    assert set(rows) == {main, feature}
    assert rows[feature]["cwd"] == worktree
    assert rows[feature]["project"] == repo
    assert rows[feature]["resume"] == f"cd {shlex.quote(worktree)} && claude --resume {feature}"
    assert rows[main]["cwd"] == repo


def test_windows_cwd_is_matched_in_its_folder_case_insensitively(claude, monkeypatch):
    project = "C:\\Users\\x\\proj"
    folder = claude.folder(project)
    assert folder.name == "C--Users-x-proj"
    exact = simple_session(folder, project, "exact", mtime=1_700_000_200)
    lower = simple_session(folder, "c:\\users\\x\\proj", "other case", mtime=1_700_000_100)
    simple_session(folder, "C:\\Users\\x.proj", "a colliding sibling", mtime=1_700_000_000)
    # In process: on this (POSIX) machine no folder has that name, so the CLI refuses it as a
    # --project; the catalog itself matches Windows cwds as Windows would.
    claude.activate(monkeypatch)
    from c3async.catalog.scan import scan_projects_sync

    (scan,) = scan_projects_sync([resolve(project)], processes=False)
    assert [s.session_id for s in scan.sessions] == [exact, lower]
    assert scan.sessions[0].record.cwd == project
