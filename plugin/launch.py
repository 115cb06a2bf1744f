"""Start c3async from its Claude Code plugin: ``python3 launch.py serve|hook|build``.

Claude Code runs this with whatever ``python3`` is on PATH, so it uses the standard library only.
It keeps c3async's dependencies in an environment of its own under ``${CLAUDE_PLUGIN_DATA}``
(``env-<key>``, the key a hash of the plugin's version, the dependency list and this Python),
built on first use and again when the key changes, and runs c3async's code from the plugin's
folder with its byte code cached under the data folder too: nothing is written under
``${CLAUDE_PLUGIN_ROOT}``. A later start costs one small Python process before ``exec``.

The build runs as a process of its own, detached, under a lock: several windows starting at
once build once, and a build that outlasts Claude Code's 30 s wait for the server goes on and
finishes; the next start (``/mcp`` reconnect, or the next session) then connects at once. It
uses ``uv`` when it is on PATH, else pip. Its log is ``build.log`` in the data folder.

A hook never waits long for a build (Claude Code gives it 10 s): past ``HOOK_WAIT_S`` it gives
up and says so in ``hook-errors.log`` there.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

MIN_PYTHON = (3, 11)
HOOK_WAIT_S = 8.0
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READY = ".c3async-ready"


def _say(text: str) -> None:
    sys.stderr.write(f"c3async plugin: {text}\n")
    sys.stderr.flush()


def _newer_python() -> str | None:
    for name in ("python3.14", "python3.13", "python3.12", "python3.11"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _data_dir() -> str:
    data = os.environ.get("CLAUDE_PLUGIN_DATA") or os.path.join(
        os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share"), "c3async-plugin"
    )
    os.makedirs(data, mode=0o700, exist_ok=True)
    return data


def _dependencies() -> list[str]:
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return list(tomllib.load(f)["project"]["dependencies"])


def _key(deps: list[str]) -> str:
    with open(os.path.join(ROOT, ".claude-plugin", "plugin.json"), "rb") as f:
        version = str(json.load(f).get("version", ""))
    seed = json.dumps([version, deps, sys.version, sys.platform, os.path.realpath(sys.executable)])
    return hashlib.sha256(seed.encode()).hexdigest()[:16]


def _python_of(env: str) -> str:
    return os.path.join(env, "Scripts" if os.name == "nt" else "bin", "python")


def _install(tmp: str, deps: list[str], log) -> None:
    """Dependencies into the new environment: uv if present, else this Python's pip aimed at it,
    else the environment's own pip (bootstrapped, slower)."""
    run = lambda cmd: subprocess.run(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL, check=True)  # noqa: E731
    uv = shutil.which("uv")
    if uv:
        run([uv, "venv", "--quiet", "--python", sys.executable, tmp])
        run([uv, "pip", "install", "--quiet", "--python", _python_of(tmp), *deps])
        return
    outer_pip = subprocess.run(
        [sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    version = outer_pip.stdout.split()[1] if outer_pip.returncode == 0 and outer_pip.stdout.split()[1:] else "0"
    if tuple(int(p) for p in version.split(".")[:2] if p.isdigit()) >= (22, 3):
        run([sys.executable, "-m", "venv", "--without-pip", tmp])
        pip = [sys.executable, "-m", "pip", "--python", _python_of(tmp)]
    else:
        run([sys.executable, "-m", "venv", tmp])
        pip = [_python_of(tmp), "-m", "pip"]
    run([*pip, "install", "--quiet", "--disable-pip-version-check", "--no-input", *deps])


def build(data: str) -> int:
    """``launch.py build``: make ``env-<key>`` if it is not there (under the lock); 0 when ready."""
    deps = _dependencies()
    key = _key(deps)
    final = os.path.join(data, f"env-{key}")
    with open(os.path.join(data, "build.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(final, READY)):
            return 0
        tmp = f"{final}.build-{os.getpid()}"
        for old in os.listdir(data):  # a build killed half-way, or an old copy of this one
            if old.startswith(f"env-{key}"):
                shutil.rmtree(os.path.join(data, old), ignore_errors=True)
        started = time.monotonic()
        with open(os.path.join(data, "build.log"), "a") as log:
            log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} building {final} for {sys.executable}\n")
            log.flush()
            try:
                _install(tmp, deps, log)
            except (OSError, subprocess.CalledProcessError) as exc:
                log.write(f"--- failed: {exc}\n")
                shutil.rmtree(tmp, ignore_errors=True)
                return 1
            with open(os.path.join(tmp, READY), "w") as f:
                f.write(key + "\n")
            os.rename(tmp, final)
            log.write(f"--- ready in {time.monotonic() - started:.1f} s\n")
        _prune(data, keep=final)
    return 0


def _prune(data: str, keep: str) -> None:
    """Environments of other keys: the newest one stays (a server started before an update may
    still import from it), older ones go."""
    others = [os.path.join(data, d) for d in os.listdir(data) if d.startswith("env-") and os.path.join(data, d) != keep]
    others.sort(key=lambda p: os.stat(p).st_mtime, reverse=True)
    for old in others[1:]:
        shutil.rmtree(old, ignore_errors=True)


def _ready(data: str) -> str | None:
    env = os.path.join(data, f"env-{_key(_dependencies())}")
    return env if os.path.exists(os.path.join(env, READY)) else None


def _wait_for_build(data: str, limit: float | None) -> str | None:
    """Start a detached build and wait for it (at most ``limit`` seconds): the environment, or
    None when it failed or is not ready in time."""
    with open(os.devnull, "rb") as null:
        builder = subprocess.Popen(
            [sys.executable, "-I", os.path.abspath(__file__), "build"],
            stdin=null,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # outlives this process if Claude Code gives up on it
        )
    deadline = None if limit is None else time.monotonic() + limit
    while builder.poll() is None and (deadline is None or time.monotonic() < deadline):
        time.sleep(0.05)
    return _ready(data)


def _log_tail(data: str, lines: int = 15) -> str:
    try:
        with open(os.path.join(data, "build.log"), errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def run(command: str, args: list[str]) -> int:
    data = _data_dir()
    env_dir = _ready(data)
    if env_dir is None:
        if command == "hook":
            env_dir = _wait_for_build(data, HOOK_WAIT_S)
            if env_dir is None:
                with open(os.path.join(data, "hook-errors.log"), "a") as f:
                    f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} hook skipped: the environment is still being built\n")
                return 0  # a hook never fails Claude Code
        else:
            _say(f"first start: building c3async's environment in {data} (about 5-30 s; log: build.log)")
            env_dir = _wait_for_build(data, None)
            if env_dir is None:
                _say("the environment could not be built; the end of build.log:\n" + _log_tail(data))
                return 1
    python = _python_of(env_dir)
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT  # the plugin's own code, whatever else is installed
    env["PYTHONPYCACHEPREFIX"] = os.path.join(data, "pycache")  # byte code: not under the plugin root
    env["PYTHONNOUSERSITE"] = "1"
    env["C3_PLUGIN"] = "1"
    # -P: the directory Claude Code starts us in (a cloned repository) is never on sys.path.
    os.execve(python, [python, "-P", "-m", "c3async", command, *args], env)
    return 1  # not reached


def main() -> int:
    if sys.version_info < MIN_PYTHON:
        newer = _newer_python()
        if newer and os.path.realpath(newer) != os.path.realpath(sys.executable):
            os.execv(newer, [newer, "-I", os.path.abspath(__file__), *sys.argv[1:]])
        _say(f"needs Python {'.'.join(map(str, MIN_PYTHON))} or newer; python3 here is {sys.version.split()[0]}")
        return 0 if sys.argv[1:2] == ["hook"] else 1
    command, args = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("serve", [])
    if command == "build":
        return build(_data_dir())
    if command not in ("serve", "hook"):
        _say(f"unknown command {command!r}: use serve, hook or build")
        return 2
    return run(command, args)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
