"""The plugin's launcher (``plugin/launch.py``), run as Claude Code runs it: ``python3 -I
launch.py serve|hook`` with ``CLAUDE_PLUGIN_DATA`` set, from a clean copy of this checkout.

Real builds (pip, or uv where installed; the registry or its cache): the first start builds the
environment once however many windows start at once, a build outlives a launcher killed while
it waits (Claude Code gives up after 30 s), a new plugin version builds anew and keeps the one
before, nothing is written under the plugin's folder, and the folder Claude Code starts the
server in (a cloned repository) can never put a module on its path.

Plants, without a build: a ``CLAUDE_PLUGIN_DATA`` another account owns or could write (or below
a folder others could write), an ``env-<key>`` (the key computed by the launcher), its ``bin``,
``python`` or ``pyvenv.cfg`` theirs, writable by others or a link, a ``pycache`` likewise, and a
plugin folder, package or module others could change: each refused in one line naming it, the
planted ``python`` (which leaves a marker: a control shows it does run when nothing is wrong)
never run, a hook exiting 0.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[1]
INITIALIZE = json.dumps({
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}) + "\n"


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """A clean copy of the plugin's files (what a marketplace install holds)."""
    dest = tmp_path_factory.mktemp("plugin-root") / "c3async"
    shutil.copytree(REPO, dest, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", "tests", "stress"))
    return dest


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


def _env(claude, data: Path, project: str) -> dict[str, str]:
    env = claude.env(CLAUDE_PLUGIN_DATA=str(data), CLAUDE_PROJECT_DIR=project)
    env.pop("PYTHONPATH", None)
    return env


def _serve(root: Path, env: dict[str, str], cwd: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-I", str(root / "plugin" / "launch.py"), "serve"],
        cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def _initialize(proc: subprocess.Popen, timeout: float = 120) -> dict:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(INITIALIZE.encode())
    proc.stdin.flush()
    deadline = time.monotonic() + timeout
    line = proc.stdout.readline()  # the build runs before the server reads anything
    assert time.monotonic() < deadline
    proc.stdin.close()
    proc.stdin = None  # closed: EOF, the server stops
    _rest, err = proc.communicate(timeout=30)
    assert line, err.decode()
    return json.loads(line)


def _builds(data: Path) -> int:
    log = data / "build.log"
    return log.read_text().count(" building ") if log.exists() else 0


def test_windows_starting_at_once_build_once_and_all_connect(root, claude, tmp_path):
    before = _files(root)
    data = tmp_path / "data"
    project = claude.project("p")
    env = _env(claude, data, project)
    procs = [_serve(root, env, project) for _ in range(3)]
    replies = [_initialize(p) for p in procs]
    assert all(r["result"]["serverInfo"]["name"] == "c3async" for r in replies), replies
    assert _builds(data) == 1
    again = _initialize(_serve(root, env, project), timeout=30)  # a later start: no build
    assert again["result"]["serverInfo"]["name"] == "c3async" and _builds(data) == 1
    assert _files(root) == before, "the launcher wrote under the plugin's folder"
    assert len(list(data.glob("env-*/.c3async-ready"))) == 1


def test_a_build_outlives_the_launcher_claude_code_gave_up_on(root, claude, tmp_path):
    data = tmp_path / "data"
    project = claude.project("q")
    env = _env(claude, data, project)
    proc = _serve(root, env, project)
    deadline = time.monotonic() + 30
    while not (data / "build.log").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)  # what a timed-out MCP start comes to
    proc.communicate()
    deadline = time.monotonic() + 180
    while not list(data.glob("env-*/.c3async-ready")):
        assert time.monotonic() < deadline, (data / "build.log").read_text()
        time.sleep(0.2)
    assert _initialize(_serve(root, env, project), timeout=30)["result"]["serverInfo"]["name"] == "c3async"
    assert _builds(data) == 1


def test_a_new_version_builds_anew_and_keeps_the_one_before(root, claude, tmp_path):
    data = tmp_path / "data"
    project = claude.project("r")
    env = _env(claude, data, project)
    bumped = tmp_path / "bumped"
    shutil.copytree(root, bumped)
    manifest = bumped / ".claude-plugin" / "plugin.json"
    _initialize(_serve(root, env, project))
    doc = json.loads(manifest.read_text())
    doc["version"] = "99.0.0"
    manifest.write_text(json.dumps(doc))
    _initialize(_serve(bumped, env, project))
    assert _builds(data) == 2 and len(list(data.glob("env-*/.c3async-ready"))) == 2


def test_the_hook_records_through_the_plugins_environment(root, claude, tmp_path):
    data = tmp_path / "data"
    project = claude.project("h")
    env = _env(claude, data, project)
    _initialize(_serve(root, env, project))  # built
    sid = "abcd1234-0000-4000-8000-000000000001"
    payload = json.dumps({"hook_event_name": "SessionStart", "session_id": sid, "source": "startup", "cwd": project})
    out = subprocess.run([sys.executable, "-I", str(root / "plugin" / "launch.py"), "hook"], input=payload,
                         text=True, env=env, cwd=project, capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(x) for x in Path(project, ".c3", "activity.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["session_id"]) for r in rows] == [("session_start", sid)]


def test_the_folder_it_starts_in_never_puts_a_module_on_its_path(root, claude, tmp_path):
    data = tmp_path / "data"
    project = claude.project("hostile")
    marker = tmp_path / "pwned"
    for name in ("msgspec.py", "anyio.py", "c3async.py"):
        Path(project, name).write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    env = _env(claude, data, project)
    reply = _initialize(_serve(root, env, project))
    assert reply["result"]["serverInfo"]["name"] == "c3async"
    assert not marker.exists()
    assert os.path.isdir(data / "pycache") or os.environ.get("PYTHONDONTWRITEBYTECODE")


def _launch(root: Path, command: str, env: dict[str, str], cwd: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-I", str(root / "plugin" / "launch.py"), command], input="{}",
                          text=True, env=env, cwd=cwd, capture_output=True, timeout=timeout)


def _one_line(out: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in out.stderr, out.stderr
    lines = [x for x in out.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("c3async plugin: "), out.stderr
    return lines[0]


def test_a_bad_data_folder_is_one_line_and_a_hook_never_fails(root, claude, tmp_path):
    project = claude.project("bad")
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    outside = tmp_path / "outside"
    fifo_data, link_data = tmp_path / "fifo", tmp_path / "link"
    fifo_data.mkdir()
    os.mkfifo(fifo_data / "build.lock")
    link_data.mkdir()
    (link_data / "build.lock").symlink_to(outside)
    for data, said in ((a_file, "cannot use the data folder"), (a_file / "under", "cannot use the data folder"),
                       (fifo_data, "build.lock"), (link_data, "build.lock")):
        env = _env(claude, data, project)
        started = time.monotonic()
        hook = _launch(root, "hook", env, project)
        assert hook.returncode == 0 and time.monotonic() - started < 9.5
        serve = _launch(root, "serve", env, project)
        assert serve.returncode == 1
        for out in (serve,) if data in (fifo_data, link_data) else (hook, serve):
            assert said in _one_line(out)
    assert not outside.exists(), "the lock was created through a link"
    time.sleep(0.5)
    launcher = str(root / "plugin" / "launch.py")
    builders = [p.pid for p in psutil.process_iter(["cmdline"]) if launcher in (p.info["cmdline"] or []) and
                "build" in (p.info["cmdline"] or [])]
    assert builders == [], "a builder was left blocked"


def test_incomplete_plugin_files_are_said_in_one_line(root, claude, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(root, broken)
    (broken / "pyproject.toml").unlink()
    env = _env(claude, tmp_path / "data", claude.project("broken"))
    assert "incomplete" in _one_line(_launch(broken, "serve", env, str(tmp_path)))
    assert _launch(broken, "hook", env, str(tmp_path)).returncode == 0


def test_a_linked_environment_is_never_run(root, claude, tmp_path):
    key = _key_of(root)
    data, evil = tmp_path / "data", tmp_path / "evil"
    marker = tmp_path / "ran"
    (evil / "bin").mkdir(parents=True)
    (evil / ".c3async-ready").write_text(key)
    (evil / "bin" / "python").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (evil / "bin" / "python").chmod(0o755)
    data.mkdir()
    (data / f"env-{key}").symlink_to(evil)
    project = claude.project("linked")
    reply = _initialize(_serve(root, _env(claude, data, project), project))
    assert reply["result"]["serverInfo"]["name"] == "c3async"
    assert not marker.exists() and (evil / "bin" / "python").exists()  # not run, not followed to delete
    assert not (data / f"env-{key}").is_symlink()


# --- what another account could have changed is never run ---------------------------------------

NOBODY = 65534  # the account `nobody`: another local account, for the plants that need one
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="making a folder another account's needs root")


def _key_of(root: Path) -> str:
    """The environment's key, computed by the launcher itself (what a neighbour can compute too)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("launch_copy", root / "plugin" / "launch.py")
    assert spec is not None and spec.loader is not None
    launch = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launch)
    return launch._key(launch._dependencies())


def _plant(data: Path, key: str, marker: Path) -> Path:
    """A finished-looking ``env-<key>`` whose ``bin/python`` leaves ``marker`` when run: as it is
    (the user's, 0755), the launcher runs it, which is what a plant must never achieve."""
    env = data / f"env-{key}"
    (env / "bin").mkdir(parents=True)
    (env / ".c3async-ready").write_text(key + "\n")
    (env / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (env / "bin" / "python").write_text(f"#!/bin/sh\necho \"$@\" >> {marker}\n")
    for path in (data, env, env / "bin"):
        path.chmod(0o755 if path != data else 0o700)
    (env / "bin" / "python").chmod(0o755)
    return env


def _refused(root: Path, env: dict[str, str], cwd: str, said: Path | str) -> None:
    """The server exits 1 and the hook 0, each with one line naming ``said``."""
    serve = _launch(root, "serve", env, cwd)
    assert serve.returncode == 1 and str(said) in _one_line(serve), serve.stderr
    hook = _launch(root, "hook", env, cwd)
    assert hook.returncode == 0 and str(said) in _one_line(hook), hook.stderr


def test_the_plant_runs_when_nothing_is_wrong(root, claude, tmp_path):
    """The control of what follows: a planted environment that looks right is run, so a marker
    that stays away below means the launcher refused it."""
    data, marker = tmp_path / "data", tmp_path / "ran"
    data.mkdir()
    _plant(data, _key_of(root), marker)
    project = claude.project("control")
    assert _launch(root, "hook", _env(claude, data, project), project).returncode == 0
    assert marker.read_text() == "-P -m c3async hook\n"


@needs_root
def test_a_data_folder_of_another_account_is_refused(root, claude, tmp_path):
    data, marker = tmp_path / "data", tmp_path / "ran"
    data.mkdir()
    _plant(data, _key_of(root), marker)
    os.chown(data, NOBODY, -1)
    project = claude.project("theirs")
    _refused(root, _env(claude, data, project), project, f"{data} belongs to another account")
    assert not marker.exists() and sorted(os.listdir(data)) == [f"env-{_key_of(root)}"]


@needs_root
def test_a_data_folder_others_could_write_is_made_private_and_what_they_put_there_refused(root, claude, tmp_path):
    data, marker = tmp_path / "data", tmp_path / "ran"
    data.mkdir()
    env = _plant(data, _key_of(root), marker)
    for path in (env, env / "bin", env / "bin" / "python"):
        os.chown(path, NOBODY, -1, follow_symlinks=False)
    data.chmod(0o777)
    project = claude.project("loose")
    _refused(root, _env(claude, data, project), project, f"{env} belongs to another account")
    assert not marker.exists()
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    logged = (data / "hook-errors.log").read_text().splitlines()  # the data folder is safe now: the hook says it there
    assert len(logged) == 1 and "hook refused" in logged[0] and str(env) in logged[0]


def test_a_folder_above_the_data_folder_others_could_write_is_refused(root, claude, tmp_path):
    loose = tmp_path / "shared"
    loose.mkdir()
    loose.chmod(0o777)  # not sticky: anyone can replace what is in it
    project = claude.project("above")
    data = loose / "config" / "data"
    _refused(root, _env(claude, data, project), project, f"{loose} can be written by other accounts")
    assert os.listdir(loose) == [], "a folder was made below a folder that was refused"
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)  # /tmp: others cannot replace what the user made there
    assert _launch(root, "hook", _env(claude, sticky / "data", project), project).returncode == 0
    assert stat.S_IMODE((sticky / "data").stat().st_mode) == 0o700


@needs_root
@pytest.mark.parametrize("how", ["env theirs", "env loose", "bin theirs", "bin loose", "bin a link", "python loose",
                                 "pyvenv.cfg theirs", "pyvenv.cfg loose"])
def test_a_planted_environment_is_never_run(root, claude, tmp_path, how):
    data, marker, elsewhere = tmp_path / "data", tmp_path / "ran", tmp_path / "elsewhere"
    data.mkdir()
    env = _plant(data, _key_of(root), marker)
    what, change = how.split(" ", 1)
    path = {"env": env, "bin": env / "bin", "python": env / "bin" / "python", "pyvenv.cfg": env / "pyvenv.cfg"}[what]
    if change == "theirs":
        os.chown(path, NOBODY, -1)
    elif change == "loose":
        path.chmod(0o777 if path.is_dir() else 0o757)
    else:
        path.rename(elsewhere)
        path.symlink_to(elsewhere)
    project = claude.project("planted")
    _refused(root, _env(claude, data, project), project, path)
    assert not marker.exists()
    assert path.exists() and os.path.lexists(env / "bin" / "python"), "the plant was removed: nothing was said to"


@needs_root
@pytest.mark.parametrize("how", ["theirs", "loose", "a link", "a file"])
def test_a_planted_pycache_is_refused(root, claude, tmp_path, how):
    data, marker = tmp_path / "data", tmp_path / "ran"
    data.mkdir()
    _plant(data, _key_of(root), marker)
    pycache, elsewhere = data / "pycache", tmp_path / "elsewhere"
    elsewhere.mkdir()
    if how == "a link":
        pycache.symlink_to(elsewhere)
    elif how == "a file":
        pycache.write_text("")
    else:
        pycache.mkdir()
        (pycache / "planted.pyc").write_bytes(b"\0" * 16)
        os.chown(pycache, NOBODY, -1) if how == "theirs" else pycache.chmod(0o777)
    project = claude.project("pycache")
    _refused(root, _env(claude, data, project), project, pycache)
    assert not marker.exists()


@needs_root
@pytest.mark.parametrize("how", ["root loose", "root theirs", "package loose", "module loose", "module a link",
                                 "above loose"])
def test_a_plugin_folder_others_could_change_is_refused(root, claude, tmp_path, how):
    data, marker = tmp_path / "data", tmp_path / "ran"
    data.mkdir()
    _plant(data, _key_of(root), marker)
    above = tmp_path / "plugins"
    copy = above / "c3async"
    shutil.copytree(root, copy)
    what, change = how.split(" ", 1)
    path = {"root": copy, "package": copy / "c3async" / "sessions", "module": copy / "c3async" / "cli.py",
            "above": above}[what]
    if change == "theirs":
        os.chown(path, NOBODY, -1)
    elif change == "loose":
        path.chmod(0o777 if path.is_dir() else 0o666)
    else:
        path.rename(tmp_path / "cli.py")
        path.symlink_to(tmp_path / "cli.py")
    project = claude.project("root")
    _refused(copy, _env(claude, data, project), project, path)
    assert not marker.exists()
    logged = (data / "hook-errors.log").read_text()
    assert str(path) in logged and "hook refused" in logged


@needs_root
def test_a_hook_log_that_is_not_safe_to_write_is_left_alone(root, claude, tmp_path):
    data, outside = tmp_path / "data", tmp_path / "outside"
    data.mkdir()
    outside.write_text("the user's file\n")
    os.link(outside, data / "hook-errors.log")  # a hard link: appending would write the user's file
    copy = tmp_path / "c3async"
    shutil.copytree(root, copy)
    (copy / "c3async").chmod(0o777)
    project = claude.project("log")
    hook = _launch(copy, "hook", _env(claude, data, project), project)
    assert hook.returncode == 0 and str(copy / "c3async") in _one_line(hook)  # stderr only
    assert outside.read_text() == "the user's file\n"
