"""The shell's completion of session ids, with their titles: ``c3async completion bash|zsh|fish``
loaded into the real shells, after a ``c3async sessions`` listing wrote the ids' cache. Where an
id goes (``show``, ``resume``, ``mark note``, ``--successor``) the ids of the project the shell
is in come first, with titles; elsewhere argcomplete's completion of commands still answers. A
cache holding garbage, a hostile title, or none at all never breaks a Tab."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from c3async.sessions.completion import CACHE, id_wanted
from stress.transcripts import simple_session

pytestmark = pytest.mark.process

FIRST = "aaaa1111-0000-4000-8000-000000000001"
SECOND = "aaaa2222-0000-4000-8000-000000000002"
ELSEWHERE = "bbbb3333-0000-4000-8000-000000000003"


@pytest.fixture
def world(claude):
    app, other = claude.project("app"), claude.project("other")
    simple_session(claude.folder(app), app, "wire the billing webhook", session_id=FIRST)
    simple_session(claude.folder(app), app, "tidy \x1b[31mthe\x1b[0m logs\tnow", session_id=SECOND)
    simple_session(claude.folder(other), other, "the other project's work", session_id=ELSEWHERE)
    for proj in (app, other):
        listed = claude.run("sessions", "--project", proj)
        assert listed.returncode == 0, listed.stderr
    script = claude.root / "c3async.completion"
    made = claude.run("completion", "bash")
    assert made.returncode == 0, made.stderr
    script.write_text(made.stdout)
    return claude, app, other, script


def _bash(claude, cwd: str, script: Path, line: str) -> list[str]:
    """What Tab offers after ``line`` in an interactive bash that loaded ``script``: the
    completion function bash registered for c3async, called as bash calls it."""
    words = line.split(" ")
    probe = (
        f"source {script}\n"
        "spec=$(complete -p c3async) || exit 3\n"
        "fn=${spec##*-F }; fn=${fn%% *}\n"
        f"COMP_LINE={line!r}; COMP_POINT=${{#COMP_LINE}}\n"
        f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
        f'"$fn" c3async {words[-1]!r} {words[-2]!r}\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {**claude.env(), "HOME": str(claude.root), "PS1": "$ "}
    out = subprocess.run(
        ["bash", "--norc", "--noprofile", "-i", "-c", probe],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    return [x.rstrip(" ") for x in out.stdout.splitlines() if x]


def test_bash_completes_the_projects_ids_first_with_their_titles(world):
    claude, app, _other, script = world
    offered = _bash(claude, app, script, "c3async show ")
    assert [x.split()[0] for x in offered] == [SECOND, FIRST, ELSEWHERE]
    assert f"{FIRST}  wire the billing webhook" in offered
    tidy = next(x for x in offered if x.startswith(SECOND))
    assert "\x1b" not in tidy and "\t" not in tidy and "tidy" in tidy and "logs now" in tidy


def test_one_match_inserts_the_bare_id_and_options_take_ids_too(world):
    claude, app, _other, script = world
    assert _bash(claude, app, script, "c3async resume aaaa1") == [FIRST]
    assert _bash(claude, app, script, "c3async mark note AAAA2") == [SECOND]  # as refs, any case
    assert _bash(claude, app, script, "c3async mark stale aaaa1111 --successor aaaa2") == [SECOND]
    assert _bash(claude, app, script, "c3async show zzzz") == []


def test_where_no_id_goes_argcomplete_still_completes_commands(world):
    claude, app, _other, script = world
    assert "sessions" in _bash(claude, app, script, "c3async sess")
    assert "--project" in _bash(claude, app, script, "c3async show --proj")


def test_a_damaged_or_missing_cache_offers_nothing_and_breaks_nothing(world):
    claude, app, _other, script = world
    cache = claude.c3home.joinpath(*CACHE)
    cache.write_bytes(b"c3async-completion 1\n\xff\xfe garbage\tno\nnot-an-id\tx\ty\tz\n" + os.urandom(2000))
    assert _bash(claude, app, script, "c3async show ") == []
    cache.unlink()
    assert _bash(claude, app, script, "c3async show ") == []
    cache.symlink_to("/etc/passwd")
    assert _bash(claude, app, script, "c3async show ") == []


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_and_fish_offer_ids_with_titles(world):
    claude, app, _other, _script = world
    env = {**claude.env(), "HOME": str(claude.root)}
    fish_script = claude.run("completion", "fish").stdout
    if shutil.which("fish"):
        fish = subprocess.run(
            ["fish", "--no-config", "-c", fish_script + "\ncomplete -C 'c3async show aaaa'"],
            cwd=app,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert fish.returncode == 0, fish.stderr
        assert f"{FIRST}\twire the billing webhook" in fish.stdout.splitlines()
    zsh_script = claude.run("completion", "zsh").stdout
    probe = (
        "autoload -U compinit && compinit -u\n"
        + zsh_script
        + "\nfunction _describe { shift $(( $# - 1 )); print -l -- ${(P)1} }\n"
        + "words=(c3async show aaaa); CURRENT=3; _c3async_complete\n"
    )
    zsh = subprocess.run(["zsh", "-f", "-c", probe], cwd=app, env=env, capture_output=True, text=True, timeout=60)
    assert zsh.returncode == 0, zsh.stderr
    assert f"{FIRST}:wire the billing webhook" in zsh.stdout.splitlines()


def test_which_words_take_an_id():
    assert id_wanted(["c3async", "show", ""], 2)
    assert id_wanted(["c3async", "show", "--project", "/x", "ab"], 4)  # an option's value is not an argument
    assert not id_wanted(["c3async", "show", "--pro"], 2)
    assert id_wanted(["c3async", "mark", "note", ""], 3)
    assert not id_wanted(["c3async", "mark", ""], 2)
    assert not id_wanted(["c3async", "sessions", ""], 2)
    assert not id_wanted(["c3async", "show", "abcd", ""], 3)
    assert id_wanted(["c3async", "mark", "stale", "x", "--successor", ""], 5)
    assert not id_wanted([], 0) and not id_wanted(["c3async"], 5)


def test_an_id_cached_twice_is_offered_once_so_no_title_reaches_the_command_line(tmp_path, monkeypatch, capfdbinary):
    # The same session under two projects (a project moved, the old path's rows kept) with two
    # titles: bash inserts what its candidates have in common, which would be the id, two spaces
    # and the titles' common start, as words of the command line.
    from c3async import completion

    monkeypatch.setenv("C3_HOME", str(tmp_path))
    tmp_path.joinpath("cache").mkdir()
    tmp_path.joinpath(*CACHE).write_text(
        "c3async-completion 1\n"
        f"2026-01-02T00:00:00Z\t{FIRST}\t/new/app\tfix it; rm -rf ~ now\n"
        f"2026-01-01T00:00:00Z\t{FIRST}\t/old/app\tfix it; rm -rf ~\n"
    )
    assert completion.main(["bash", "2", "c3async", "show", "aaaa1"]) == 0
    assert capfdbinary.readouterr().out == f"{FIRST}\n".encode()
    assert completion.main(["zsh", "2", "c3async", "show", "aaaa"]) == 0
    assert capfdbinary.readouterr().out == f"{FIRST}:fix it; rm -rf ~ now\n".encode()


def test_an_output_file_is_no_session_id():
    assert id_wanted(["c3async", "export", "-o", "out.md", "aaaa"], 4)
    assert id_wanted(["c3async", "export", "--output", "out.md", ""], 4)
