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

Nothing is run from a folder another account could have changed. The plugin's folder (the code
on ``PYTHONPATH``, this launcher, the manifest and the dependency list) and every folder above
it must be root's or the user's and writable by no other account; so must every folder above
the data folder (a sticky one such as ``/tmp`` may be writable by all), and the data folder,
each ``env-<key>`` with its ``bin`` (so the ``python`` link there is the user's), its
``pyvenv.cfg``, and the ``pycache`` folder of byte code must be the user's own. A group
write bit counts as writable by others unless only the user (and root) are in that group (a
user private group, as ``umask 002`` distributions make them). The folders are opened one
component at a time from ``/`` without following a link and checked on the open descriptor.
The data folder and ``pycache`` are made private (0700): an existing data folder of the user's
that others could write or read is tightened, what is in it then checked entry by entry. The
build runs with ``umask 022`` at least, from inside the data folder (a cloned repository's
``pip.py`` or ``uv.toml`` is never picked up). What is refused is said in one line naming the
folder and what to do; the server then exits 1.

What is in the data folder is checked before use: the lock and the logs are opened only as
regular files of the user's with one name (never through a link, never a FIFO or a hard link),
an ``env-*`` that is a link or not a folder is never run from but removed. Every problem is one
line on stderr; a hook never waits long for a build (Claude Code gives it 10 s: past
``HOOK_WAIT_S`` it gives up) and never fails Claude Code: it exits 0, its problem recorded in
``hook-errors.log`` in the data folder when that folder and file are safe to write.
"""

from __future__ import annotations

import errno
import fcntl
import functools
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
ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # no link: the folder checked is the one used
READY = ".c3async-ready"
# What of the plugin's folder is run or read to decide what runs: c3async's code, this launcher,
# the dependency list, the manifest and hooks Claude Code starts us from.
CODE = ("c3async", "plugin", "pyproject.toml", ".claude-plugin", "hooks")
_DIR = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PASS = getattr(os, "O_PATH", os.O_RDONLY)  # a folder above: walked through, never read


class Problem(Exception):
    """Something the user must fix, said in one line."""


def _printable(text: str) -> str:
    """``text`` with control characters escaped (a folder's name can hold any), lines kept."""
    return "".join(ch if ch.isprintable() or ch == "\n" else ascii(ch)[1:-1] for ch in text)


def _say(text: str) -> None:
    sys.stderr.write(f"c3async plugin: {_printable(text)}\n")
    sys.stderr.flush()


def _newer_python() -> str | None:
    for name in ("python3.14", "python3.13", "python3.12", "python3.11"):
        found = shutil.which(name)
        if found:
            return found
    return None


@functools.cache
def _harmless_group(gid: int) -> bool:
    """Whether only the user and root are in group ``gid``, as members or by their primary group
    (a user private group: ``umask 002`` makes everything of the user's group-writable)."""
    import grp
    import pwd

    me = os.geteuid()
    try:
        mine = {pwd.getpwuid(me).pw_name, "root"}
        members = grp.getgrgid(gid).gr_mem
    except KeyError:
        return False
    if any(name not in mine for name in members):
        return False
    return all(p.pw_uid in (me, 0) for p in pwd.getpwall() if p.pw_gid == gid)


def _fault(st: os.stat_result, *, mine: bool, above: bool = False) -> str | None:
    """What makes an entry unsafe to run code from (it belongs to another account, or another
    account can change what it holds), or None. ``mine``: root's is not enough; ``above``: a
    folder on the way, where the sticky bit (``/tmp``) keeps others from replacing what is in it."""
    if st.st_uid != os.geteuid() and (mine or st.st_uid != 0):
        return f"belongs to another account (uid {st.st_uid})"
    mode = st.st_mode
    loose = mode & stat.S_IWOTH or (mode & stat.S_IWGRP and not _harmless_group(st.st_gid))
    if loose and not (above and mode & stat.S_ISVTX):
        return f"can be written by other accounts (mode {stat.S_IMODE(mode):o})"
    return None


def _refusal(path: str, fault: str, fix: str) -> Problem:
    return Problem(f"{path} {fault}: nothing is run from it; {fix}")


def _open_folder(path: str, *, mine: bool, fix: str) -> tuple[str, int]:
    """``path``, resolved and opened one folder at a time from ``/`` without following a link
    (a link changed meanwhile is refused), every folder above it checked on its descriptor and
    ``path`` itself too (``mine``: the user's own, made where missing, private: an existing one
    others may read or write is tightened): its real path and a descriptor of it. Problem names
    what is refused and ``fix``; nothing is made below a folder that is refused."""
    real = os.path.realpath(path)
    names = [n for n in real.split(os.sep) if n]
    here = os.sep
    fd = os.open(here, _PASS | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, name in enumerate(names):
            st = os.fstat(fd)
            fault = _fault(st, mine=False, above=True)
            if fault:
                ours = st.st_uid in (os.geteuid(), 0)
                raise _refusal(here, fault, f"chmod go-w {here}" if ours else "keep the plugin and its data out of it")
            last = i == len(names) - 1
            if mine:
                try:
                    os.mkdir(name, 0o700 if last else 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            below = os.open(name, (os.O_RDONLY if last else _PASS) | _DIR, dir_fd=fd)
            os.close(fd)
            fd = below
            here = os.path.join(here, name)
        st = os.fstat(fd)
        fault = _fault(st, mine=mine)
        if fault and not (mine and st.st_uid == os.geteuid()):
            raise _refusal(here, fault, fix)
        if mine and stat.S_IMODE(st.st_mode) & 0o077:
            os.fchmod(fd, 0o700)  # the user's: tightened, what is in it checked as it is used
    except BaseException:
        os.close(fd)
        raise
    return here, fd


class Data:
    """The data folder, checked: its real path and a descriptor of it."""

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self.fd = fd


def _data_dir() -> Data:
    data = os.environ.get("CLAUDE_PLUGIN_DATA") or os.path.join(
        os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share"), "c3async-plugin"
    )
    try:
        real, fd = _open_folder(data, mine=True, fix="remove it (the plugin makes it again)")
        if not os.access(real, os.W_OK | os.X_OK):
            os.close(fd)
            raise PermissionError(errno.EACCES, "not writable")
    except OSError as exc:
        raise Problem(f"cannot use the data folder {data}: {exc.strerror or exc}") from None
    return Data(real, fd)


def _check_plugin() -> None:
    """The plugin's folder and what of it is run (``CODE``): root's or the user's, writable by
    no other account, no link inside."""
    fix = "chmod go-w it, or reinstall the plugin in a folder of yours"
    real, fd = _open_folder(ROOT, mine=False, fix=fix)
    try:
        for top in CODE:
            if _check_entry(fd, top, real, fix):
                for folder, dirs, files, dir_fd in os.fwalk(top, dir_fd=fd):
                    for name in dirs + files:
                        _check_entry(dir_fd, name, os.path.join(real, folder), fix)
    finally:
        os.close(fd)


def _check_entry(dir_fd: int, name: str, folder: str, fix: str) -> bool:
    """An entry of the plugin's folder, checked (Problem if refused): whether it is a folder."""
    path = os.path.join(folder, name)
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    fault = "is a link" if stat.S_ISLNK(st.st_mode) else _fault(st, mine=False)
    if fault:
        raise _refusal(path, fault, fix)
    return stat.S_ISDIR(st.st_mode)


def _open_own(data: Data, name: str, flags: int) -> int:
    """A file of the data folder, opened only if it is a regular file of the user's with no other
    name, that no other account can write (not through a link, not a FIFO, a device or a hard
    link to a file elsewhere): a descriptor, or Problem."""
    path = os.path.join(data.path, name)
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600, dir_fd=data.fd)
    except OSError as exc:
        raise Problem(f"cannot open {path}: {exc.strerror or exc} (a link or a special file is refused)") from None
    st = os.fstat(fd)
    fault = _fault(st, mine=True) or ("has another name (a hard link)" if st.st_nlink > 1 else None)
    if not stat.S_ISREG(st.st_mode) or fault:
        os.close(fd)
        raise Problem(f"{path} {fault or 'is not a regular file'}: remove it")
    os.set_blocking(fd, True)
    return fd


def _append(data: Data, name: str, text: str) -> None:
    fd = _open_own(data, name, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, _printable(text).encode("utf-8", "replace"))
    finally:
        os.close(fd)


def _record(data: Data, text: str) -> bool:
    """A hook's problem, one line in ``hook-errors.log`` (where a hook's problems go): False when
    that file is not safe to write (then stderr is all there is)."""
    try:
        _append(data, "hook-errors.log", f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {text}\n")
    except (Problem, OSError):
        return False
    return True


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
    """A folder a build finished: a real folder (not a link), holding its regular ready marker."""
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


def _lock(data: Data) -> int:
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


def build(data: Data) -> int:
    """``launch.py build``: make ``env-<key>`` if it is not there (under the lock); 0 when ready."""
    os.umask(os.umask(0o022) | 0o022)  # nothing it makes is writable by another account
    os.fchdir(data.fd)  # venv, pip and uv start here: never in a cloned repository (its pip.py, uv.toml)
    deps = _dependencies()
    key = _key(deps)
    final = os.path.join(data.path, f"env-{key}")
    lock = _lock(data)
    try:
        if _ready(data):
            return 0
        tmp = f"{final}.build-{os.getpid()}"
        for name in os.listdir(data.path):  # a build killed half-way, a link or a file in the way
            if name.startswith(f"env-{key}"):
                _remove(os.path.join(data.path, name))
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


def _prune(data: Data, keep: str) -> None:
    """Other keys' environments: the newest finished one stays (a server started before an
    update may still import from it); older ones, and leftovers of builds whose process is gone,
    go."""
    finished: list[tuple[float, str]] = []
    for name in os.listdir(data.path):
        path = os.path.join(data.path, name)
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


def _folder_in(dir_fd: int, name: str, path: str, fix: str) -> int:
    """The folder ``name`` of the folder ``dir_fd``, opened without following a link, the user's
    and writable by no other account: its descriptor, or Problem (FileNotFoundError if missing)."""
    try:
        fd = os.open(name, os.O_RDONLY | _DIR, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        kind = exc.errno in (errno.ELOOP, errno.ENOTDIR)
        raise Problem(f"{path} {'is a link or not a folder' if kind else exc.strerror}: {fix}") from None
    fault = _fault(os.fstat(fd), mine=True)
    if fault:
        os.close(fd)
        raise _refusal(path, fault, fix)
    return fd


def _ready(data: Data) -> str | None:
    """This key's environment when a build finished it and it is safe to run from: the folder
    and its ``bin`` the user's and writable by no other account (so a ``python`` link there is
    the user's), ``bin/python`` a link or such a file, ``pyvenv.cfg`` such a file. None when it
    is not there or not finished (a link, a file or a half-made folder in its place: the build
    replaces it); Problem when another account owns it or could have changed it."""
    name = f"env-{_key(_dependencies())}"
    env = os.path.join(data.path, name)
    fix = f"remove {env} (the next start builds it again)"
    try:
        if not stat.S_ISDIR(os.stat(name, dir_fd=data.fd, follow_symlinks=False).st_mode):
            return None
        env_fd = _folder_in(data.fd, name, env, fix)
    except FileNotFoundError:
        return None
    try:
        if not stat.S_ISREG(os.stat(READY, dir_fd=env_fd, follow_symlinks=False).st_mode):
            return None
        bin_fd = _folder_in(env_fd, "bin", os.path.join(env, "bin"), fix)
        try:
            python = os.stat("python", dir_fd=bin_fd, follow_symlinks=False)
        finally:
            os.close(bin_fd)
        cfg = os.stat("pyvenv.cfg", dir_fd=env_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None  # not a whole environment: the build makes it again
    finally:
        os.close(env_fd)
    for what, st in (("bin/python", python), ("pyvenv.cfg", cfg)):
        if stat.S_ISLNK(st.st_mode) and what == "bin/python":
            continue  # where it leads was chosen by the user's build: only the user can change it
        fault = _fault(st, mine=True) if stat.S_ISREG(st.st_mode) else "is not a regular file"
        if fault:
            raise _refusal(os.path.join(env, what), fault, fix)
    return env


def _pycache(data: Data) -> str:
    """The folder of c3async's byte code (Python runs what it finds there): made private, the
    user's and writable by no other account."""
    path = os.path.join(data.path, "pycache")
    try:
        os.mkdir("pycache", 0o700, dir_fd=data.fd)
    except FileExistsError:
        pass
    fd = _folder_in(data.fd, "pycache", path, "remove it (the byte code is made again)")
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) & 0o077:
            os.fchmod(fd, 0o700)  # nothing below it is reachable by another account
    finally:
        os.close(fd)
    return path


def _wait_for_build(data: Data, limit: float) -> tuple[str | None, int | None]:
    """Start a detached build and wait for it (at most ``limit`` seconds): (the environment or
    None, the builder's exit status or None while it still runs)."""
    with open(os.devnull, "rb") as null:
        builder = subprocess.Popen(
            [sys.executable, "-I", os.path.join(ROOT, "plugin", "launch.py"), "build"],
            stdin=null,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # outlives this process if Claude Code gives up on it
        )
    deadline = time.monotonic() + limit
    while builder.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return _ready(data), builder.poll()


def _log_tail(data: Data, lines: int = 15) -> str:
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
    try:
        return _start(data, command, args)
    except Problem as exc:
        if command == "hook":
            _record(data, f"hook refused: {exc}")
        raise


def _start(data: Data, command: str, args: list[str]) -> int:
    _check_plugin()
    pycache = _pycache(data)
    env_dir = _ready(data)
    if env_dir is None:
        for name in ("build.lock", "build.log"):  # what the builder needs, checked here: said here
            os.close(_open_own(data, name, os.O_RDWR | os.O_CREAT))
        if command == "hook":
            env_dir, status = _wait_for_build(data, HOOK_WAIT_S)
            if env_dir is None:
                why = "the environment is still being built" if status is None else "the build failed (see build.log)"
                if not _record(data, f"hook skipped: {why}"):
                    _say(f"hook skipped: {why}")
                return 0
        else:
            _say(f"first start: building c3async's environment in {data.path} (about 5-30 s; log: build.log)")
            env_dir, status = _wait_for_build(data, SERVE_WAIT_S)
            if env_dir is None:
                if status is None:
                    _say(f"the build is still running after {SERVE_WAIT_S:.0f} s; see {data.path}/build.log")
                else:
                    _say("the environment could not be built; the end of build.log:\n" + _log_tail(data))
                return 1
    python = _python_of(env_dir)
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT  # the plugin's own code, whatever else is installed
    env["PYTHONPYCACHEPREFIX"] = pycache  # byte code: not under the plugin root
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
            data = _data_dir()
            _check_plugin()
            return build(data)
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
