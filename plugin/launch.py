"""Start c3async from its Claude Code plugin: ``python3 launch.py serve|hook|build|replay``.

Claude Code runs this with whatever ``python3`` is on PATH, so it uses the standard library only.
It keeps c3async's dependencies in an environment of its own under ``${CLAUDE_PLUGIN_DATA}``
(``env-<key>``, the key a hash of the plugin's version, the dependency list and the kind of
Python: implementation, major.minor version, ABI, platform; not its path, so every ``python3.11``
of the machine, pyenv's, the system's or an activated venv's, shares one environment), built on
first use and again when the key changes, and runs c3async's code from the plugin's folder with
its byte code cached under the data folder too: nothing is written under ``${CLAUDE_PLUGIN_ROOT}``.
A later start costs one small Python process before ``exec``.

The build runs as a process of its own, detached, under a lock: several windows starting at
once build once, and a build goes on when Claude Code gives up on a start. It uses ``uv`` when it
is on PATH, else pip; its log is ``build.log`` in the data folder. While it runs, the server's
start answers MCP itself (``proxy.py``: the tools, prompts and resources from ``manifest.json``,
a call waiting for the build) and hands the conversation to the real server once the environment
is ready, so the first session has c3async's tools however long the build takes; Claude Code
never sees a start that outlasts its 30 s wait. A hook that fires meanwhile is not lost: its input
and the variables that matter are saved in ``pending-hooks/`` (private) and replayed in order,
with the time it fired, when the environment is ready (by the build, or the next start). The
SessionEnd hook (``hook --detach``) is always saved so and replayed by a detached ``replay``:
Claude Code cancels SessionEnd hooks 1.5 s into its exit, sooner than c3async starts on a loaded
machine. After a build, other keys' environments that no process runs from (each start holds
its environment's ready marker with a shared ``flock`` for as long as it runs) go when they were built for this
kind of Python (a version of the plugin or its dependencies since replaced) or when they have
not been started for ``IDLE_ENV_S`` (another Python's).

Nothing is run from a folder another account could have changed. The plugin's folder (the code
on ``PYTHONPATH``, this launcher, the manifest and the dependency list) and every folder above
it must be root's or the user's and writable by no other account; so must every folder above
the data folder (a sticky one such as ``/tmp`` may be writable by all), and the data folder,
each ``env-<key>`` with its ``bin`` (so the ``python`` link there is the user's), its
``pyvenv.cfg``, and the ``pycache`` and ``pending-hooks`` folders must be the user's own. The
interpreter an environment's ``python`` leads to, and its folder, must be root's or the user's
and writable by no other account (an environment made by one ``python3`` is run by another's
start). A group write bit counts as writable by others unless only the user (and root) are in
that group (a user private group, as ``umask 002`` distributions make them). The folders are
opened one component at a time from ``/`` without following a link and checked on the open
descriptor. The data folder, ``pycache`` and ``pending-hooks`` are made private (0700): an
existing data folder of the user's that others could write or read is tightened, what is in it
then checked entry by entry. The build runs with ``umask 022`` at least, from inside the data
folder (a cloned repository's ``pip.py`` or ``uv.toml`` is never picked up). What is refused is
said in one line naming the folder and what to do; the server then exits 1.

What is in the data folder is checked before use: the lock, the logs and the saved hook events
are opened only as regular files of the user's with one name (never through a link, never a
FIFO or a hard link), an ``env-*`` that is a link or not a folder is never run from but removed.
Every problem is one line on stderr; a hook never waits for a build and never fails Claude Code:
it exits 0, its problem recorded in ``hook-errors.log`` in the data folder when that folder and
file are safe to write.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import hashlib
import json
import math
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
import types
from typing import Any

MIN_PYTHON = (3, 11)
LOCK_WAIT_S = 1800.0  # a build waits this long for another one to finish
IDLE_ENV_S = 30 * 86400.0  # another Python's environment not started for this long goes
ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # no link: the folder checked is the one used
READY = ".c3async-ready"
PENDING = "pending-hooks"
DETACH = "--detach"  # a hook saved and replayed by a process of its own (SessionEnd)
PENDING_NAME = re.compile(r"(\d{20})-(\d{1,10})\.hook")  # <time in ns>-<pid>: sorted, the order they came
MAX_PENDING = 500  # hook events kept while the environment cannot be built
MAX_HOOK_INPUT = 1 << 20  # what `c3async hook` reads at most
REPLAY_WAIT_S = 60.0  # one replayed hook
# What a hook's row depends on besides its input (c3async reads these): saved with the event. Not
# the rest of the environment: it can hold credentials, and the file would keep them.
HOOK_ENV = (
    "CLAUDE_PROJECT_DIR",
    "CLAUDE_PID",
    "CLAUDE_CONFIG_DIR",
    "CLAUDE_CONFIG_DIRS",
    "CLAUDE_CODE_SESSION_ID",
    "C3_HOME",
)
MANIFEST_LISTS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")
HOOK_TIME = "C3_HOOK_EVENT_TIME"  # when a replayed event fired (c3async.live.hooks reads it)
# What of the plugin's folder is run or read to decide what runs: c3async's code, this launcher,
# the dependency list, the manifest and hooks Claude Code starts us from.
CODE = ("c3async", "plugin", "pyproject.toml", ".claude-plugin", "hooks")
_DIR = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PASS = getattr(os, "O_PATH", os.O_RDONLY)  # a folder above: walked through, never read
_ENV_NAME = re.compile(r"env-([0-9a-f]{16})(?:\.(build|old)-(\d{1,10}))?")


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


def _interpreter() -> str:
    """What an environment's packages depend on of the Python that runs them: its
    implementation, major.minor version and ABI flags, the platform and the machine."""
    v = sys.version_info
    return f"{sys.implementation.name}-{v.major}.{v.minor}{getattr(sys, 'abiflags', '')}-{sys.platform}-{os.uname().machine}"


def _key(deps: list[str]) -> str:
    """The environment's name: the plugin's version, the dependency list and ``_interpreter()``
    (not the interpreter's path: every python3 of one version shares the environment)."""
    try:
        with open(os.path.join(ROOT, ".claude-plugin", "plugin.json"), "rb") as f:
            version = str(json.load(f).get("version", ""))
    except (OSError, ValueError, AttributeError) as exc:
        raise Problem(
            f"the plugin's files are incomplete ({ROOT}/.claude-plugin/plugin.json: {exc}): reinstall it"
        ) from None
    seed = json.dumps([version, deps, _interpreter()])
    return hashlib.sha256(seed.encode()).hexdigest()[:16]


def _python_of(env: str) -> str:
    return os.path.join(env, "Scripts" if os.name == "nt" else "bin", "python")


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


def _lock(data: Data, name: str = "build.lock", wait: float = LOCK_WAIT_S) -> int:
    """A lock of the data folder, held: waits for its holder at most ``wait`` seconds."""
    fd = _open_own(data, name, os.O_RDWR | os.O_CREAT)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise Problem(f"another process has held {name} for {wait / 60:.0f} minutes: see build.log") from None
            time.sleep(0.2)


def build(data: Data) -> int:
    """``launch.py build``: make ``env-<key>`` if it is not there (under the lock), remove the
    environments it replaces, then replay the hook events that waited for it; 0 when ready."""
    os.umask(os.umask(0o022) | 0o022)  # nothing it makes is writable by another account
    os.fchdir(data.fd)  # venv, pip and uv start here: never in a cloned repository (its pip.py, uv.toml)
    deps = _dependencies()
    key = _key(deps)
    final = os.path.join(data.path, f"env-{key}")
    lock = _lock(data)
    try:
        found = _use(data, key)
        if found is not None:
            found.close()
        elif not _build(data, key, deps, final):
            return 1
        _prune(data, keep=final)
    finally:
        os.close(lock)
    env = _use(data, key)
    if env is None:
        return 1
    try:
        _replay_hooks(data, env, _pycache(data))
    finally:
        env.close()
    return 0


def replay(data: Data) -> int:
    """``launch.py replay``: the saved hook events, through the environment when it is ready
    (else the build, which replays them when it is)."""
    env = _use(data, _key(_dependencies()))
    if env is None:
        return build(data)
    try:
        _replay_hooks(data, env, _pycache(data))
    finally:
        env.close()
    return 0


def _build(data: Data, key: str, deps: list[str], final: str) -> bool:
    """``env-<key>``, made in a folder of its own then renamed into place: whether it was."""
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
                f.write(json.dumps({"key": key, "python": _interpreter()}) + "\n")
            os.rename(tmp, final)
        except (OSError, subprocess.CalledProcessError) as exc:
            os.write(log, f"--- failed: {exc}\n".encode("utf-8", "replace"))
            _remove(tmp)
            return False
        os.write(log, f"--- ready in {time.monotonic() - started:.1f} s\n".encode())
    finally:
        os.close(log)
    return True


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def _prune(data: Data, keep: str) -> None:
    """Other keys' environments that no process runs from go when they were built for this kind
    of Python (a plugin or dependency version since replaced) or have not been started for
    ``IDLE_ENV_S`` (another Python's: kept while in use, so two Pythons do not rebuild in turn);
    so do leftovers of builds and removals whose process is gone, and whatever else is named
    ``env-*`` (a link, a file, a folder never finished)."""
    for name in os.listdir(data.path):
        path = os.path.join(data.path, name)
        if not name.startswith("env-") or path == keep:
            continue
        match = _ENV_NAME.fullmatch(name)
        if match is None:
            _remove(path)
        elif match.group(3):
            if not _alive(match.group(3)):
                _remove(path)  # a build or a removal cut short
        elif _unused(data, name):
            _remove(os.path.join(data.path, f"{name}.old-{os.getpid()}"))


def _unused(data: Data, name: str) -> bool:
    """Whether the finished environment ``name`` may go (then it is renamed to
    ``<name>.old-<pid>`` while its marker is held exclusively, so no start takes it meanwhile):
    no process holds its marker and it is this Python's kind, or idle. Not a folder, or never
    finished: True too."""
    try:
        fd = os.open(name, os.O_RDONLY | _DIR, dir_fd=data.fd)
    except OSError:
        return _set_aside(data, name)  # a link or a file: renamed, never followed
    try:
        try:
            marker = os.open(READY, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
        except OSError:
            return _set_aside(data, name)
        try:
            fcntl.flock(marker, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(marker)
            return False  # in use
        try:
            st = os.fstat(marker)
            try:
                made_for = json.loads(os.pread(marker, 4096, 0)).get("python")
            except (ValueError, AttributeError, RecursionError):
                made_for = None  # an older launcher's marker: its environment is replaced
            idle = time.time() - st.st_mtime > IDLE_ENV_S
            return (made_for in (None, _interpreter()) or idle) and _set_aside(data, name)
        finally:
            os.close(marker)
    finally:
        os.close(fd)


def _set_aside(data: Data, name: str) -> bool:
    try:
        os.rename(name, f"{name}.old-{os.getpid()}", src_dir_fd=data.fd, dst_dir_fd=data.fd)
    except OSError:
        return False
    return True


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


class Env:
    """An environment in use: its folder and its ready marker, held with a shared ``flock`` for
    as long as a process runs from it (the descriptor goes through ``exec`` to the server, or to
    the child the proxy starts): a build removes only environments no one holds."""

    def __init__(self, path: str, marker: int) -> None:
        self.path = path
        self.marker = marker
        self.python = _python_of(path)

    def close(self) -> None:
        os.close(self.marker)


def _use(data: Data, key: str) -> Env | None:
    """This key's environment, held (``Env``), when a build finished it and it is safe to run
    from: the folder and its ``bin`` the user's and writable by no other account (so a ``python``
    link there is the user's), ``bin/python`` a link or such a file, ``pyvenv.cfg`` such a file,
    the interpreter it leads to root's or the user's (``_interpreter_fault``). None when it is
    not there or not whole (a link, a file or a half-made folder in its place, an interpreter
    since removed: the build replaces it); Problem when another account owns it or could have
    changed it."""
    name = f"env-{key}"
    env = os.path.join(data.path, name)
    fix = f"remove {env} (the next start builds it again)"
    try:
        if not stat.S_ISDIR(os.stat(name, dir_fd=data.fd, follow_symlinks=False).st_mode):
            return None
        env_fd = _folder_in(data.fd, name, env, fix)
    except FileNotFoundError:
        return None
    marker = -1
    try:
        try:
            marker = os.open(READY, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=env_fd)
        except OSError:
            raise FileNotFoundError(READY) from None  # missing, or a link: not finished
        if not stat.S_ISREG(os.fstat(marker).st_mode):
            raise FileNotFoundError(READY)  # not finished: the build makes it again
        fcntl.flock(marker, fcntl.LOCK_SH)  # a build setting it aside holds it exclusively for a rename
        here = os.stat(name, dir_fd=data.fd, follow_symlinks=False)
        held = os.fstat(env_fd)
        if (here.st_dev, here.st_ino) != (held.st_dev, held.st_ino):
            raise FileNotFoundError(name)  # set aside meanwhile: not the folder checked
        bin_fd = _folder_in(env_fd, "bin", os.path.join(env, "bin"), fix)
        try:
            python = os.stat("python", dir_fd=bin_fd, follow_symlinks=False)
        finally:
            os.close(bin_fd)
        cfg = os.stat("pyvenv.cfg", dir_fd=env_fd, follow_symlinks=False)
        for what, st in (("bin/python", python), ("pyvenv.cfg", cfg)):
            if stat.S_ISLNK(st.st_mode) and what == "bin/python":
                continue  # where it leads was chosen by the user's build: checked below
            fault = _fault(st, mine=True) if stat.S_ISREG(st.st_mode) else "is not a regular file"
            if fault:
                raise _refusal(os.path.join(env, what), fault, fix)
        if stat.S_ISLNK(python.st_mode) and _interpreter_fault(os.path.join(env, "bin", "python")):
            raise FileNotFoundError(name)  # the interpreter is gone: built again
        try:
            os.utime(marker)  # when it was last started: an idle environment of another Python goes
        except OSError:
            pass
    except FileNotFoundError:
        if marker >= 0:
            os.close(marker)
        return None
    except BaseException:
        if marker >= 0:
            os.close(marker)
        raise
    finally:
        os.close(env_fd)
    return Env(env, marker)


def _interpreter_fault(link: str) -> bool:
    """The interpreter an environment's ``python`` link leads to, and its folder, must be root's
    or the user's and writable by no other account: Problem when not; True when it is gone (a
    Python uninstalled since the build)."""
    real = os.path.realpath(link)
    try:
        st = os.stat(real)
        folder = os.stat(os.path.dirname(real))
    except OSError:
        return True
    fault = _fault(st, mine=False) or ("is not a regular file" if not stat.S_ISREG(st.st_mode) else None)
    where = real
    if fault is None:
        fault, where = _fault(folder, mine=False), os.path.dirname(real)
    if fault:
        fix = "chmod go-w it, or put another python3 first on Claude Code's PATH"
        raise _refusal(f"{where} (the Python of {os.path.dirname(os.path.dirname(link))})", fault, fix)
    return False


def _private_folder(data: Data, name: str, fix: str) -> Data:
    """A folder of the data folder, made where missing, private (0700), the user's and writable
    by no other account: its path and a descriptor of it (Problem otherwise)."""
    path = os.path.join(data.path, name)
    try:
        os.mkdir(name, 0o700, dir_fd=data.fd)
    except FileExistsError:
        pass
    fd = _folder_in(data.fd, name, path, fix)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) & 0o077:
            os.fchmod(fd, 0o700)  # nothing below it is reachable by another account
    except BaseException:
        os.close(fd)
        raise
    return Data(path, fd)


def _pycache(data: Data) -> str:
    """The folder of c3async's byte code (Python runs what it finds there): made private, the
    user's and writable by no other account."""
    folder = _private_folder(data, "pycache", "remove it (the byte code is made again)")
    os.close(folder.fd)
    return folder.path


def _spawn(command: str) -> subprocess.Popen[bytes]:
    """``launch.py <command>`` as a process of its own, detached: it outlives this one."""
    with open(os.devnull, "rb") as null:
        return subprocess.Popen(
            [sys.executable, "-I", os.path.join(ROOT, "plugin", "launch.py"), command],
            stdin=null,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # outlives this process if Claude Code gives up on it
        )


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


def _has_pending(data: Data) -> bool:
    """Whether hook events wait in ``pending-hooks`` (one being saved counts: it came first)."""
    try:
        fd = os.open(PENDING, os.O_RDONLY | _DIR, dir_fd=data.fd)
    except OSError:
        return False
    try:
        return bool(os.listdir(fd))
    finally:
        os.close(fd)


def _save_hook(data: Data) -> None:
    """This hook's input, saved for the replay with when it fired, the folder it ran in and the
    variables of ``HOOK_ENV``: one private file, ``pending-hooks/<time>-<pid>.hook`` (a line of
    JSON, then the input as it came), written under another name then renamed, so a replay never
    reads half of one."""
    payload = _read_limited(0, MAX_HOOK_INPUT + 1)
    if len(payload) > MAX_HOOK_INPUT:
        raise Problem(f"hook input over {MAX_HOOK_INPUT} bytes: not recorded")
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = ""
    meta = {"time": time.time(), "cwd": cwd, "env": {k: os.environ[k] for k in HOOK_ENV if k in os.environ}}
    pending = _private_folder(data, PENDING, "remove it (hook events waiting there are lost)")
    try:
        if len(os.listdir(pending.fd)) >= MAX_PENDING:
            raise Problem(f"{MAX_PENDING} hook events already wait in {pending.path} for the build: not recorded")
        name = f"{time.time_ns():020d}-{os.getpid()}.hook"
        tmp = f".{name}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=pending.fd)
        try:
            _write_all(fd, json.dumps(meta, ensure_ascii=True).encode() + b"\n" + payload)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=pending.fd, dst_dir_fd=pending.fd)
    finally:
        os.close(pending.fd)


def _read_limited(fd: int, limit: int) -> bytes:
    chunks, size = [], 0
    while size < limit:
        chunk = os.read(fd, min(1 << 16, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _replay_hooks(data: Data, env: Env, pycache: str) -> None:
    """The hook events saved while the environment was built, through ``c3async hook`` in the
    order they came (one replayer at a time: ``hooks.lock``), each with the variables and the
    folder it had and its own time (``C3_HOOK_EVENT_TIME``); each file removed once it ran. A
    file that cannot be read as one is removed and said in ``hook-errors.log``."""
    if not _has_pending(data):
        return
    pending = _private_folder(data, PENDING, "remove it (hook events waiting there are lost)")
    lock = _lock(data, "hooks.lock", REPLAY_WAIT_S * MAX_PENDING)
    try:
        for name in sorted(os.listdir(pending.fd)):
            match = PENDING_NAME.fullmatch(name)
            if match is None:
                writer = PENDING_NAME.fullmatch(name[1:-4]) if name.startswith(".") and name.endswith(".tmp") else None
                if writer is None or not _alive(writer.group(2)):
                    _forget(pending, name)  # a hook killed while saving, or something not ours
                continue
            event = _saved_event(data, pending, name)
            if event is not None and not _replay(event, env, pycache):
                return  # the environment cannot run it now: kept for the next replay
            _forget(pending, name)
    finally:
        os.close(lock)
        os.close(pending.fd)


def _forget(pending: Data, name: str) -> None:
    try:
        os.unlink(name, dir_fd=pending.fd)
    except IsADirectoryError:
        _remove(os.path.join(pending.path, name))
    except OSError:
        pass


def _saved_event(data: Data, pending: Data, name: str) -> tuple[dict[str, Any], bytes] | None:
    """A saved hook event: (its record, its input), or None (said) when it is not one."""
    try:
        fd = _open_own(pending, name, os.O_RDONLY)
    except Problem as exc:
        _record(data, f"a saved hook event is not replayed: {exc}")
        return None
    try:
        raw = _read_limited(fd, MAX_HOOK_INPUT + (1 << 16))
    finally:
        os.close(fd)
    head, _, payload = raw.partition(b"\n")
    try:
        meta = json.loads(head)
    except (ValueError, RecursionError):
        meta = None
    ok = (
        isinstance(meta, dict)
        and isinstance(meta.get("time"), int | float)
        and math.isfinite(meta["time"])
        and isinstance(meta.get("cwd"), str)
        and isinstance(meta.get("env"), dict)
        and all(k in HOOK_ENV and isinstance(v, str) and "\0" not in v for k, v in meta["env"].items())
        and "\0" not in meta["cwd"]
        and len(payload) <= MAX_HOOK_INPUT
    )
    if not ok:
        _record(data, f"{pending.path}/{name} is not a saved hook event: removed")
        return None
    return meta, payload


def _replay(event: tuple[dict[str, Any], bytes], env: Env, pycache: str) -> bool:
    """Run one saved event through ``c3async hook``: False when it could not be started."""
    meta, payload = event
    variables = {k: v for k, v in _server_env(pycache).items() if k not in HOOK_ENV}
    variables.update(meta["env"])
    variables[HOOK_TIME] = f"{meta['time']:.3f}"
    cwd = meta["cwd"] if meta["cwd"] and os.path.isdir(meta["cwd"]) else None
    try:
        subprocess.run(
            [env.python, "-P", "-m", "c3async", "hook"],
            input=payload,
            env=variables,
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=REPLAY_WAIT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return True  # it ran (and hung): not run again
    except OSError:
        return False
    return True


def _server_env(pycache: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT  # the plugin's own code, whatever else is installed
    env["PYTHONPYCACHEPREFIX"] = pycache  # byte code: not under the plugin root
    env["PYTHONNOUSERSITE"] = "1"
    env["C3_PLUGIN"] = "1"
    return env


def _manifest() -> dict[str, Any]:
    """``plugin/manifest.json``: what the server answers to ``initialize`` and the lists."""
    path = os.path.join(ROOT, "plugin", "manifest.json")
    try:
        with open(path, "rb") as f:
            doc = json.load(f)
        versions = doc.get("protocolVersions")
        ok = (
            isinstance(doc.get("initialize"), dict)
            and isinstance(doc["initialize"].get("capabilities"), dict)
            and isinstance(versions, list)
            and all(isinstance(v, str) for v in versions)
            and isinstance(doc.get("fallbackProtocolVersion"), str)
            and all(isinstance(doc.get(m), dict) for m in MANIFEST_LISTS)
        )
    except (OSError, ValueError, AttributeError, TypeError, RecursionError) as exc:
        raise Problem(f"the plugin's files are incomplete ({path}: {exc}): reinstall it") from None
    if not ok:
        raise Problem(f"the plugin's files are incomplete ({path} is not a manifest): reinstall it")
    return dict(doc)


def _plugin_module(name: str) -> types.ModuleType:
    """``plugin/<name>.py``, run from its source (checked with the plugin's folder): no byte code
    is read from or written under the plugin's folder."""
    path = os.path.join(ROOT, "plugin", f"{name}.py")
    with open(path, "rb") as f:
        code = compile(f.read(), path, "exec")
    module = types.ModuleType(f"c3async_plugin_{name}")
    module.__file__ = path
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(code, module.__dict__)
    return module


def _proxy(
    data: Data, key: str, manifest: dict[str, Any], builder: subprocess.Popen[bytes], pycache: str, args: list[str]
) -> int:
    """Speak MCP from the manifest while the build runs, then through the real server."""
    log = os.path.join(data.path, "build.log")
    ready: list[Env] = []

    def poll_build() -> str | None:
        try:
            env = _use(data, key)
        except (Problem, OSError) as exc:
            return str(exc)
        if env is not None:
            ready.append(env)
            return ""
        if builder.poll() is None:
            return None
        _say("the environment could not be built; the end of build.log:\n" + _log_tail(data))
        return f"c3async's environment could not be built (see {log})"

    def start_server() -> subprocess.Popen[bytes]:
        env = ready[-1]
        return subprocess.Popen(
            [env.python, "-P", "-m", "c3async", "serve", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=_server_env(pycache),
            pass_fds=(env.marker,),  # the server holds its environment too
        )

    signal.signal(signal.SIGCHLD, lambda signum, frame: builder.poll())  # a builder that ended leaves no zombie
    status = _plugin_module("proxy").Proxy(manifest, poll_build, start_server, log).run()
    return int(status) if status >= 0 else 128 - status


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
    key = _key(_dependencies())
    env = _use(data, key)
    if env is not None:
        if command == "hook" and args == [DETACH]:
            # SessionEnd: Claude Code cancels its hooks 1.5 s after it begins to exit, whatever
            # their timeout; on a loaded machine c3async's start can take longer. Saved at once,
            # replayed by a process of its own that outlives the cancel.
            try:
                _save_hook(data)
            finally:
                _spawn("replay")
            return 0
        if _has_pending(data):  # events saved during a build: replayed first, this one after them
            if command == "hook":
                try:
                    _save_hook(data)
                finally:
                    _spawn("build")
                return 0
            _spawn("build")
        os.set_inheritable(env.marker, True)  # held by the server for as long as it runs
        # -P: the directory Claude Code starts us in (a cloned repository) is never on sys.path.
        os.execve(env.python, [env.python, "-P", "-m", "c3async", command, *args], _server_env(pycache))
    for name in ("build.lock", "build.log"):  # what the builder needs, checked here: said here
        os.close(_open_own(data, name, os.O_RDWR | os.O_CREAT))
    if command == "hook":
        try:
            _save_hook(data)
        finally:
            _spawn("build")  # which replays it when the environment is ready
        return 0
    manifest = _manifest()  # said before anything starts when it is broken
    builder = _spawn("build")
    _say(
        f"first start: building c3async's environment in {data.path} (log: build.log); "
        "until it is ready the plugin answers from its manifest and tool calls wait"
    )
    return _proxy(data, key, manifest, builder, pycache, args)


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
        if command in ("build", "replay"):
            data = _data_dir()
            _check_plugin()
            return build(data) if command == "build" else replay(data)
        if command not in ("serve", "hook"):
            _say(f"unknown command {command!r}: use serve, hook, build or replay")
            return 2
        if command == "hook" and args not in ([], [DETACH]):
            _say(f"hook takes no arguments but {DETACH}")
            return 0
        return run(command, args)
    except (Problem, OSError) as exc:
        _say(str(exc) if isinstance(exc, Problem) else f"{exc.strerror or exc}: {getattr(exc, 'filename', '')}")
        return 0 if hook else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
