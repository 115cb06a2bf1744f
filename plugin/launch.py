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

The data folder is Claude Code's; what is in it is still checked before use: the lock and the
logs are opened only as regular files (never through a link, never a FIFO), an ``env-*`` that
is a link or not a folder is never run from but removed. Every problem is one line on stderr;
a hook never waits long for a build (Claude Code gives it 10 s: past ``HOOK_WAIT_S`` it gives
up and says why in ``hook-errors.log`` there) and never fails Claude Code: it exits 0.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import time

MIN_PYTHON = (3, 11)
HOOK_WAIT_S = 8.0
SERVE_WAIT_S = 900.0  # a server waits this long for a build (Claude Code gives up after 30 s)
LOCK_WAIT_S = 1800.0  # a build waits this long for another one to finish
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READY = ".c3async-ready"


class Problem(Exception):
    """Something the user must fix, said in one line."""


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
    try:
        os.makedirs(data, mode=0o700, exist_ok=True)
        if not os.access(data, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, "not writable")
    except OSError as exc:
        raise Problem(f"cannot use the data folder {data}: {exc.strerror or exc}") from None
    return data


def _open_own(data: str, name: str, flags: int) -> int:
    """A file of the data folder, opened only if it is a regular file (not through a link, not a
    FIFO or a device): a descriptor, or Problem."""
    path = os.path.join(data, name)
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise Problem(f"cannot open {path}: {exc.strerror or exc} (a link or a special file is refused)") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Problem(f"{path} is not a regular file: remove it")
    os.set_blocking(fd, True)
    return fd


def _append(data: str, name: str, text: str) -> None:
    fd = _open_own(data, name, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, text.encode("utf-8", "replace"))
    finally:
        os.close(fd)


def _dependencies() -> list[str]:
    import tomllib

    try:
        with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
            return [str(d) for d in tomllib.load(f)["project"]["dependencies"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise Problem(f"the plugin's files are incomplete ({ROOT}/pyproject.toml: {exc}): reinstall it") from None


def _key(deps: list[str]) -> str:
    try:
        with open(os.path.join(ROOT, ".claude-plugin", "plugin.json"), "rb") as f:
            version = str(json.load(f).get("version", ""))
    except (OSError, ValueError, AttributeError) as exc:
        raise Problem(f"the plugin's files are incomplete ({ROOT}/.claude-plugin/plugin.json: {exc}): reinstall it") from None
    seed = json.dumps([version, deps, sys.version, sys.platform, os.path.realpath(sys.executable)])
    return hashlib.sha256(seed.encode()).hexdigest()[:16]


def _python_of(env: str) -> str:
    return os.path.join(env, "Scripts" if os.name == "nt" else "bin", "python")


def _is_ready(env: str) -> bool:
    """A folder we built: a real folder (not a link), holding its regular ready marker."""
    try:
        return stat.S_ISDIR(os.lstat(env).st_mode) and stat.S_ISREG(os.lstat(os.path.join(env, READY)).st_mode)
    except OSError:
        return False


def _remove(path: str) -> None:
    """Remove an entry of the data folder: a link or a file is unlinked (never followed), a
    folder removed with what it holds."""
    try:
        st = os.lstat(path)
    except OSError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except OSError:
            pass


def _install(tmp: str, deps: list[str], log: int) -> None:
    """Dependencies into the new environment: uv if present, else this Python's pip aimed at it,
    else the environment's own pip (bootstrapped, slower)."""

    def run(cmd: list[str]) -> None:
        subprocess.run(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL, check=True)

    uv = shutil.which("uv")
    if uv:
        run([uv, "venv", "--quiet", "--python", sys.executable, tmp])
        run([uv, "pip", "install", "--quiet", "--python", _python_of(tmp), *deps])
        return
    outer_pip = subprocess.run(
        [sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    words = outer_pip.stdout.split()
    version = words[1] if outer_pip.returncode == 0 and len(words) > 1 else "0"
    if tuple(int(p) for p in version.split(".")[:2] if p.isdigit()) >= (22, 3):
        run([sys.executable, "-m", "venv", "--without-pip", tmp])
        pip = [sys.executable, "-m", "pip", "--python", _python_of(tmp)]
    else:
        run([sys.executable, "-m", "venv", tmp])
        pip = [_python_of(tmp), "-m", "pip"]
    run([*pip, "install", "--quiet", "--disable-pip-version-check", "--no-input", *deps])


def _lock(data: str) -> int:
    """The build lock, held: waits for another build at most LOCK_WAIT_S."""
    fd = _open_own(data, "build.lock", os.O_RDWR | os.O_CREAT)
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise Problem("another build has held the lock for 30 minutes: see build.log") from None
            time.sleep(0.2)


def build(data: str) -> int:
    """``launch.py build``: make ``env-<key>`` if it is not there (under the lock); 0 when ready."""
    deps = _dependencies()
    key = _key(deps)
    final = os.path.join(data, f"env-{key}")
    lock = _lock(data)
    try:
        if _is_ready(final):
            return 0
        tmp = f"{final}.build-{os.getpid()}"
        for name in os.listdir(data):  # a build killed half-way, a link or a file in the way
            if name.startswith(f"env-{key}"):
                _remove(os.path.join(data, name))
        log = _open_own(data, "build.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        started = time.monotonic()
        try:
            os.write(log, f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} building {final} for {sys.executable}\n".encode())
            try:
                _install(tmp, deps, log)
                with open(os.path.join(tmp, READY), "w") as f:
                    f.write(key + "\n")
                os.rename(tmp, final)
            except (OSError, subprocess.CalledProcessError) as exc:
                os.write(log, f"--- failed: {exc}\n".encode("utf-8", "replace"))
                _remove(tmp)
                return 1
            os.write(log, f"--- ready in {time.monotonic() - started:.1f} s\n".encode())
        finally:
            os.close(log)
        _prune(data, keep=final)
    finally:
        os.close(lock)
    return 0


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def _prune(data: str, keep: str) -> None:
    """Other keys' environments: the newest finished one stays (a server started before an
    update may still import from it); older ones, and leftovers of builds whose process is gone,
    go."""
    finished: list[tuple[float, str]] = []
    for name in os.listdir(data):
        path = os.path.join(data, name)
        if not name.startswith("env-") or path == keep:
            continue
        _name, _, pid = name.partition(".build-")
        if pid:
            if not _alive(pid):
                _remove(path)
            continue
        if _is_ready(path):
            finished.append((os.lstat(path).st_mtime, path))
        else:
            _remove(path)  # a link, a file, a folder that was never finished
    finished.sort(reverse=True)
    for _mtime, old in finished[1:]:
        _remove(old)


def _ready(data: str) -> str | None:
    env = os.path.join(data, f"env-{_key(_dependencies())}")
    return env if _is_ready(env) else None


def _wait_for_build(data: str, limit: float) -> tuple[str | None, int | None]:
    """Start a detached build and wait for it (at most ``limit`` seconds): (the environment or
    None, the builder's exit status or None while it still runs)."""
    with open(os.devnull, "rb") as null:
        builder = subprocess.Popen(
            [sys.executable, "-I", os.path.abspath(__file__), "build"],
            stdin=null,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # outlives this process if Claude Code gives up on it
        )
    deadline = time.monotonic() + limit
    while builder.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return _ready(data), builder.poll()


def _log_tail(data: str, lines: int = 15) -> str:
    try:
        fd = _open_own(data, "build.log", os.O_RDONLY)
    except Problem:
        return ""
    try:
        size = os.fstat(fd).st_size
        text = os.pread(fd, 16384, max(0, size - 16384)).decode("utf-8", "replace")
    finally:
        os.close(fd)
    return "".join(text.splitlines(keepends=True)[-lines:])


def run(command: str, args: list[str]) -> int:
    data = _data_dir()
    env_dir = _ready(data)
    if env_dir is None:
        for name in ("build.lock", "build.log"):  # what the builder needs, checked here: said here
            os.close(_open_own(data, name, os.O_RDWR | os.O_CREAT))
        if command == "hook":
            env_dir, status = _wait_for_build(data, HOOK_WAIT_S)
            if env_dir is None:
                why = "the environment is still being built" if status is None else "the build failed (see build.log)"
                _append(data, "hook-errors.log", f"{time.strftime('%Y-%m-%dT%H:%M:%S')} hook skipped: {why}\n")
                return 0
        else:
            _say(f"first start: building c3async's environment in {data} (about 5-30 s; log: build.log)")
            env_dir, status = _wait_for_build(data, SERVE_WAIT_S)
            if env_dir is None:
                if status is None:
                    _say(f"the build is still running after {SERVE_WAIT_S:.0f} s; see {data}/build.log")
                else:
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
    hook = sys.argv[1:2] == ["hook"]
    if sys.version_info < MIN_PYTHON:
        newer = _newer_python()
        if newer and os.path.realpath(newer) != os.path.realpath(sys.executable):
            os.execv(newer, [newer, "-I", os.path.abspath(__file__), *sys.argv[1:]])
        _say(f"needs Python {'.'.join(map(str, MIN_PYTHON))} or newer; python3 here is {sys.version.split()[0]}")
        return 0 if hook else 1
    command, args = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("serve", [])
    try:
        if command == "build":
            return build(_data_dir())
        if command not in ("serve", "hook"):
            _say(f"unknown command {command!r}: use serve, hook or build")
            return 2
        return run(command, args)
    except (Problem, OSError) as exc:
        _say(str(exc) if isinstance(exc, Problem) else f"{exc.strerror or exc}: {getattr(exc, 'filename', '')}")
        return 0 if hook else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
