"""What c3async copies from transcripts (first prompts in the catalog cache, notes in the marks
log, token totals, snapshot summaries) stays as private as the transcripts: ``.c3`` is made
0700 and its files 0600, a looser ``.c3`` or ``$C3_HOME`` of this account is closed, and one
that belongs to another account is said once. The last test reads everything as a real second
account (``nobody``), which needs root."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from stress.harness import SYSTEM_PYTHON, as_nobody
from stress.transcripts import simple_session

pytestmark = pytest.mark.process

SECRET = "quokka-private-prompt-5521"


def modes(folder: Path) -> dict[str, int]:
    """Every entry below ``folder`` (and the folder itself): its permission bits."""
    out = {".": stat.S_IMODE(folder.lstat().st_mode)}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = Path(root, name)
            out[str(p.relative_to(folder))] = stat.S_IMODE(p.lstat().st_mode)
    return out


def busy_project(claude) -> tuple[str, str]:
    """A project with a session, listed, noted and accounted: every kind of state file exists."""
    project = claude.project("app")
    sid = simple_session(claude.folder(project), project, f"the first prompt {SECRET}")
    for args in (
        ("sessions", "--project", project),
        ("mark", "note", sid, "--project", project, "--summary", f"note {SECRET}"),
        ("stats", "--project", project),
        ("tasks", "add", "--project", project, "--title", f"task {SECRET}"),
    ):
        proc = claude.run(*args)
        assert proc.returncode == 0, (args, proc.stderr)
    return project, sid


def test_a_new_project_state_is_private(claude) -> None:
    old = os.umask(0o022)  # the usual umask: what c3async makes must not depend on it
    try:
        project, _ = busy_project(claude)
    finally:
        os.umask(old)
    state = Path(project, ".c3")
    found = modes(state)
    assert found["."] == 0o700
    loose = {name: f"{mode:o}" for name, mode in found.items() if name != ".gitignore" and mode & 0o077}
    assert not loose, loose
    assert stat.S_IMODE(claude.c3home.lstat().st_mode) == 0o700


def test_a_loose_state_of_this_account_is_closed_by_the_next_command(claude) -> None:
    project, _ = busy_project(claude)
    state = Path(project, ".c3")
    # As an older version (or a checkout of a shared .c3) leaves it: open to everyone.
    for path in (state, claude.c3home):
        os.chmod(path, 0o755)
    (state / "session_marks.jsonl").chmod(0o644)
    proc = claude.run("sessions", "--project", project)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(state.lstat().st_mode) == 0o700
    assert stat.S_IMODE(claude.c3home.lstat().st_mode) == 0o700
    assert "can be read by other accounts" not in proc.stderr  # closed, nothing to say


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another account needs root")
def test_a_loose_state_of_another_account_is_said_once(claude) -> None:
    project, _ = busy_project(claude)
    state = Path(project, ".c3")
    nobody = pwd.getpwnam("nobody")
    os.chmod(state, 0o755)  # another account's, readable by all: we may use it but cannot close it
    os.chown(state, nobody.pw_uid, nobody.pw_gid)
    proc = claude.run("sessions", "--project", project)
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stderr.splitlines() if "can be read by other accounts" in line]
    assert len(said) == 1, proc.stderr
    assert str(state) in said[0] and "another account" in said[0] and "chmod go-rwx" in said[0]
    assert stat.S_IMODE(state.lstat().st_mode) == 0o755  # not ours to change


def test_a_state_others_can_write_is_said_and_left_as_it_is(claude) -> None:
    """What others could write may not be ours: closing it would make it look trusted (the
    archive refuses such a home until a person has looked), so it is said, not changed."""
    project, _ = busy_project(claude)
    state = Path(project, ".c3")
    os.chmod(state, 0o777)
    proc = claude.run("sessions", "--project", project)
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stderr.splitlines() if "can be written by other accounts" in line]
    assert len(said) == 1 and str(state) in said[0] and "chmod go-rwx" in said[0], proc.stderr
    assert stat.S_IMODE(state.lstat().st_mode) == 0o777


PROBE = """
import os, sys
secret = sys.argv[1].encode()
seen, read, refused = [], 0, 0
for top in sys.argv[2:]:
    for root, dirs, files in os.walk(top, onerror=lambda e: None):
        for name in files:
            try:
                with open(os.path.join(root, name), "rb") as f:
                    data = f.read()
            except OSError:
                refused += 1
                continue
            read += 1
            if secret in data:
                seen.append(os.path.join(root, name))
print(read, refused, *seen)
"""


def probe_as_nobody(*args: str) -> subprocess.CompletedProcess:
    return as_nobody(PROBE, SECRET, *args)


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another account needs root")
@pytest.mark.skipif(SYSTEM_PYTHON is None, reason="no system Python for the other account")
def test_another_account_reads_nothing_copied_from_a_transcript(claude, tmp_path_factory) -> None:
    """A project folder and a home open to everyone (a shared checkout; Debian made homes 0755
    until 12); the transcripts are Claude Code's and private. Everything c3async wrote stays out
    of the other account's reach."""
    old = os.umask(0o022)
    try:
        opened = Path(tempfile.mkdtemp(prefix="c3-open-"))  # not under pytest's private folder
        opened.chmod(0o755)
        home = opened / "c3home"
        project = str(opened / "app")
        os.mkdir(project)
        env = claude.env(C3_HOME=str(home))
        sid = simple_session(claude.folder(project), project, f"the first prompt {SECRET}")
        for args in (
            ("sessions", "--project", project),
            ("mark", "note", sid, "--project", project, "--summary", f"note {SECRET}"),
            ("stats", "--project", project),
            ("search", SECRET, "--project", project),
        ):
            proc = claude.run(*args, env=env)
            assert proc.returncode == 0, (args, proc.stderr)
        _read, _refused, *seen = probe_as_nobody(project, str(home)).stdout.split()
        assert not seen, f"another account read the prompt in {seen}"
        # The control: the same folders opened by hand are read, so the probe sees what it seeks.
        subprocess.run(["chmod", "-R", "go+rX", project, str(home)], check=True)
        _read, _refused, *seen = probe_as_nobody(project, str(home)).stdout.split()
        assert seen, "the probe found nothing even in folders open to it"
    finally:
        os.umask(old)
        shutil.rmtree(opened, ignore_errors=True)
