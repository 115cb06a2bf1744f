"""The plugin's folders: another local account plants code where the plugin would run it. The
launcher runs as Claude Code runs it (``python3 -I plugin/launch.py serve|hook`` in a cloned
repository), from a clean copy of the plugin's files, with a ``CLAUDE_PLUGIN_DATA`` prepared for
each plant: the data folder another account's, or writable by all, or below such a folder; an
``env-<key>`` (the key computed as the launcher computes it) that is theirs, writable by others,
with its ``bin`` or ``pyvenv.cfg`` theirs or a link; a ``pycache`` that is theirs or writable by
all, holding byte code for c3async's ``__init__`` that the interpreter would take for its own;
the plugin's folder, a package or a module of it writable by others, theirs or a link; a
hard-linked ``hook-errors.log``. Every planted program appends to a decoy file.

Controls first: the plants as the user's own (a planted environment and a planted byte code
file each do run: the decoy is written), and a real server started by the launcher answers
``initialize`` from the cloned repository's folder, whose ``c3async/`` and ``msgspec.py`` are
never imported; the hook command ``install-hooks`` writes, fired from that folder, records its
row and imports nothing of it. Quick mode plants a ready environment (a venv sharing this
Python's packages) instead of building one; ``--full`` lets the launcher build it with pip.

Invariants: every plant is refused (the server exits 1, the hook 0, each with one line naming
the folder or file; no traceback, no hang), the decoy stays empty, a data folder others could
write is made private, nothing is created below a refused folder, the hard-linked file keeps
its bytes. Needs root for the plants that belong to another account (``nobody``).
"""

from __future__ import annotations

import importlib.util
import json
import marshal
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .harness import PY, REPO, Result, Sandbox
from .probe import initialize
from .venvs import sharing

CLASS = "the plugin's folders"
NOBODY = 65534
TIMEOUT_S = 60.0  # a refusal is immediate; a control with a real server a few seconds
BUILD_TIMEOUT_S = 900.0
INITIALIZE = initialize("t").decode()


@dataclass
class World:
    res: Result
    base: Path
    root: Path  # the plugin's files, as an install holds them
    decoy: Path
    project: str  # a cloned repository: Claude Code starts the server and the hooks here
    env: dict[str, str]
    key: str
    probes: int = 0

    def launch(
        self, command: str, data: Path, root: Path | None = None, stdin: str = "{}", timeout: float = TIMEOUT_S
    ) -> subprocess.CompletedProcess | None:
        self.probes += 1
        root = root or self.root
        try:
            return subprocess.run(
                [PY, "-I", str(root / "plugin" / "launch.py"), command],
                input=stdin,
                text=True,
                capture_output=True,
                cwd=self.project,
                timeout=timeout,
                env={**self.env, "CLAUDE_PLUGIN_DATA": str(data)},
            )
        except subprocess.TimeoutExpired:
            self.res.check(False, "no hang", f"launch.py {command} with {data}: no end in {timeout:.0f} s")
            return None

    def refused(self, label: str, data: Path, said: Path, root: Path | None = None) -> None:
        """Each door refuses in one line naming ``said``; nothing planted runs."""
        for command, status in (("serve", 1), ("hook", 0)):
            out = self.launch(command, data, root)
            if out is None:
                continue
            lines = [x for x in out.stderr.splitlines() if x.strip()]
            self.res.check(
                "Traceback" not in out.stderr + out.stdout, "no traceback", f"{label}, {command}: {out.stderr[-300:]!r}"
            )
            self.res.check(
                out.returncode == status,
                f"a refused {command} exits {status}",
                f"{label}: {out.returncode}: {out.stderr[-300:]!r}",
            )
            self.res.check(
                len(lines) == 1 and str(said) in lines[0],
                "a refusal is one line naming the folder",
                f"{label}, {command}: {out.stderr[-300:]!r}",
            )
            self.res.check(
                not self.decoy.exists(),
                "nothing planted ever runs",
                f"{label}, {command}: the decoy says {self._ran()!r}",
            )
            self.decoy.unlink(missing_ok=True)

    def _ran(self) -> str:
        try:
            return self.decoy.read_text()[:200]
        except OSError:
            return ""


def check(res: Result, sb: Sandbox, quick: bool) -> None:
    base = sb.root / "class-plugin"
    base.mkdir()
    w = _world(res, base)
    root_user = os.geteuid() == 0
    if not root_user:
        res.note("not root: the plants that belong to another account are skipped")
    t0 = time.perf_counter()
    ready = _controls(w, quick)
    res.fig("controls (plants of the user's run; the server answers)", f"{time.perf_counter() - t0:.1f} s")
    if ready is None:
        return
    t0 = time.perf_counter()
    _data_plants(w, root_user)
    _env_plants(w, root_user)
    _pycache_plants(w, root_user)
    _root_plants(w, root_user)
    _log_plant(w)
    res.fig("plants refused", f"{w.probes} launches in {time.perf_counter() - t0:.1f} s")


def _world(res: Result, base: Path) -> World:
    root = base / "plugins" / "c3async"
    shutil.copytree(REPO, root, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", "tests", "stress"))
    project = base / "cloned"
    (project / "c3async").mkdir(parents=True)
    decoy = base / "decoy"
    for name in ("c3async/__init__.py", "msgspec.py", "anyio.py"):
        (project / name).write_text(
            f"open({str(decoy)!r}, 'a').write('imported {name} from the cloned repository\\n')\n"
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "C3_", "PYTHON"))}
    env.update(
        CLAUDE_CONFIG_DIR=str(base / "claude"),
        C3_HOME=str(base / "c3home"),
        HOME=str(base / "home"),
        CLAUDE_PROJECT_DIR=str(project),
    )
    (base / "home").mkdir()
    spec = importlib.util.spec_from_file_location("launch_of_the_copy", root / "plugin" / "launch.py")
    assert spec is not None and spec.loader is not None
    launch = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launch)
    return World(res, base, root, decoy, str(project), env, launch._key(launch._dependencies()))


def _plant_env(w: World, data: Path) -> Path:
    """A finished-looking ``env-<key>`` whose ``bin/python`` appends to the decoy."""
    env = data / f"env-{w.key}"
    (env / "bin").mkdir(parents=True)
    (env / ".c3async-ready").write_text(w.key + "\n")
    (env / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (env / "bin" / "python").write_text(f'#!/bin/sh\necho "planted python: $*" >> {shlex.quote(str(w.decoy))}\n')
    (env / "bin" / "python").chmod(0o755)
    data.chmod(0o700)
    return env


def _data(w: World, name: str) -> Path:
    data = w.base / "data" / name
    data.mkdir(parents=True)
    return data


def _ready_env(w: World, data: Path, quick: bool) -> bool:
    """A real environment for this key in ``data``: quick, a venv sharing this Python's packages,
    marked ready as a build marks it; full, built by the launcher itself (pip)."""
    if quick:
        env = data / f"env-{w.key}"
        made = sharing(env)
        (env / ".c3async-ready").write_text(w.key + "\n")
        return made == 0
    out = w.launch("build", data, timeout=BUILD_TIMEOUT_S)
    return out is not None and out.returncode == 0


def _pyc_plant(w: World, pycache: Path) -> None:
    """Byte code for the plugin's ``c3async/__init__.py`` (its source's size and time in the
    header, as the interpreter checks them) that appends to the decoy instead."""
    source = w.root / "c3async" / "__init__.py"
    st = source.stat()
    code = compile(f"open({str(w.decoy)!r}, 'a').write('planted byte code ran\\n')\n", str(source), "exec")
    tag = sys.implementation.cache_tag
    where = pycache / str(source.parent).lstrip(os.sep)
    where.mkdir(parents=True, exist_ok=True)
    header = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
    header += (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    (where / f"__init__.{tag}.pyc").write_bytes(header + marshal.dumps(code))


def _controls(w: World, quick: bool) -> Path | None:
    """The plants do run when they are the user's own; a real server answers from the cloned
    repository without importing it; an installed hook records from there without importing it."""
    res = w.res
    data = _data(w, "control-env")
    _plant_env(w, data)
    out = w.launch("hook", data)
    res.check(
        out is not None and out.returncode == 0 and "planted python" in w._ran(),
        "control: a planted environment of the user's is run (the plants are real)",
        repr(w._ran()),
    )
    w.decoy.unlink(missing_ok=True)

    data = _data(w, "control-real")
    t0 = time.perf_counter()
    if not res.check(_ready_env(w, data, quick), "control: a ready environment", "venv or build failed"):
        return None
    res.fig(
        "ready environment (" + ("a venv sharing this Python's packages" if quick else "built by the launcher") + ")",
        f"{time.perf_counter() - t0:.1f} s",
    )
    out = w.launch("serve", data, stdin=INITIALIZE)
    answer = (out.stdout.splitlines() or [""])[0] if out is not None else ""
    res.check(
        '"serverInfo"' in answer and '"c3async"' in answer,
        "control: the server the launcher starts answers initialize",
        f"{answer[:200]!r} {out and out.stderr[-300:]!r}",
    )
    res.check(not w.decoy.exists(), "the folder Claude Code starts the server in is never on its path", w._ran())
    w.decoy.unlink(missing_ok=True)

    _pyc_plant(w, data / "pycache")
    out = w.launch("serve", data, stdin=INITIALIZE)
    res.check(
        "planted byte code ran" in w._ran(),
        "control: byte code planted in the user's pycache is run",
        f"{w._ran()!r} {out and out.stderr[-300:]!r}",
    )
    w.decoy.unlink(missing_ok=True)
    shutil.rmtree(data / "pycache")

    _hook_command(w)
    return data


def _hook_command(w: World) -> None:
    """``install-hooks`` in the cloned repository, then its command fired there (as Claude Code
    does): the row is recorded and nothing of the repository is imported."""
    env = {**w.env, "PYTHONPATH": str(REPO)}
    installed = subprocess.run(
        [PY, "-m", "c3async", "install-hooks", "--project", w.project],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(w.base),
        timeout=TIMEOUT_S,
    )
    if not w.res.check(installed.returncode == 0, "install-hooks works", installed.stderr[-300:]):
        return
    settings = json.loads(Path(w.project, ".claude", "settings.local.json").read_text())
    command = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    sid = "abcd1234-0000-4000-8000-00000000c3c3"
    payload = json.dumps({"hook_event_name": "SessionStart", "session_id": sid, "source": "startup", "cwd": w.project})
    fired = subprocess.run(
        ["/bin/sh", "-c", command],
        input=payload,
        text=True,
        capture_output=True,
        env=env,
        cwd=w.project,
        timeout=TIMEOUT_S,
    )
    activity = Path(w.project, ".c3", "activity.jsonl")
    rows = activity.read_text() if activity.exists() else ""
    w.res.check(
        fired.returncode == 0 and sid in rows,
        "the installed hook records from a cloned repository",
        f"{fired.returncode} {fired.stderr[-300:]!r}",
    )
    w.res.check(
        not w.decoy.exists(), "the installed hook imports nothing from the project's folder", f"{command}: {w._ran()!r}"
    )
    w.decoy.unlink(missing_ok=True)


def _data_plants(w: World, root_user: bool) -> None:
    if root_user:
        data = _data(w, "theirs")
        _plant_env(w, data)
        os.chown(data, NOBODY, -1)
        before = sorted(os.listdir(data))
        w.refused("a data folder another account owns", data, data)
        w.res.check(
            sorted(os.listdir(data)) == before,
            "nothing is written in a refused data folder",
            f"{sorted(os.listdir(data))}",
        )

        data = _data(w, "loose")
        env = _plant_env(w, data)
        for path in (env, env / "bin", env / "bin" / "python"):
            os.chown(path, NOBODY, -1)
        data.chmod(0o777)
        w.refused("a data folder writable by all, an environment planted in it", data, env)
        mode = data.stat().st_mode & 0o777
        w.res.check(mode == 0o700, "a data folder of the user's that others could write is made private", f"{mode:o}")

    shared = w.base / "data" / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    w.refused("a data folder below a folder writable by all", shared / "plugins" / "data", shared)
    w.res.check(os.listdir(shared) == [], "nothing is made below a refused folder", f"{os.listdir(shared)}")


def _env_plants(w: World, root_user: bool) -> None:
    elsewhere = w.base / "elsewhere"
    elsewhere.mkdir()
    cases = [("env", "loose"), ("bin", "loose"), ("bin", "a link"), ("python", "loose"), ("pyvenv.cfg", "loose")]
    if root_user:
        cases += [("env", "theirs"), ("bin", "theirs"), ("pyvenv.cfg", "theirs")]
    for what, how in cases:
        data = _data(w, f"env-{what}-{how.replace(' ', '-')}")
        env = _plant_env(w, data)
        path = {"env": env, "bin": env / "bin", "python": env / "bin" / "python", "pyvenv.cfg": env / "pyvenv.cfg"}[
            what
        ]
        if how == "theirs":
            os.chown(path, NOBODY, -1)
        elif how == "loose":
            path.chmod(0o777 if path.is_dir() else 0o757)
        else:
            target = elsewhere / f"{what}-{how}"
            path.rename(target)
            path.symlink_to(target)
        w.refused(f"an environment whose {what} is {how}", data, path)


def _pycache_plants(w: World, root_user: bool) -> None:
    for how in ("loose", "a link", *(("theirs",) if root_user else ())):
        data = _data(w, f"pycache-{how.replace(' ', '-')}")
        _plant_env(w, data)
        pycache = data / "pycache"
        if how == "a link":
            target = w.base / "elsewhere" / "pycache"
            _pyc_plant(w, target)
            pycache.symlink_to(target)
        else:
            _pyc_plant(w, pycache)
            os.chown(pycache, NOBODY, -1) if how == "theirs" else pycache.chmod(0o777)
        w.refused(f"a pycache that is {how}", data, pycache)


def _root_plants(w: World, root_user: bool) -> None:
    cases = [("root", "loose"), ("package", "loose"), ("module", "loose"), ("module", "a link"), ("above", "loose")]
    if root_user:
        cases += [("root", "theirs"), ("module", "theirs")]
    data = _data(w, "for-roots")
    _plant_env(w, data)
    for n, (what, how) in enumerate(cases):
        above = w.base / "roots" / str(n)
        copy = above / "c3async"
        shutil.copytree(w.root, copy)
        path = {
            "root": copy,
            "package": copy / "c3async" / "sessions",
            "module": copy / "c3async" / "server.py",
            "above": above,
        }[what]
        if how == "theirs":
            os.chown(path, NOBODY, -1)
        elif how == "loose":
            path.chmod(0o777 if path.is_dir() else 0o666)
        else:
            moved = w.base / "elsewhere" / f"server-{n}.py"
            path.rename(moved)
            path.symlink_to(moved)
        w.refused(f"the plugin's {what} {how}", data, path, root=copy)


def _log_plant(w: World) -> None:
    """A ``hook-errors.log`` that is a hard link to a file of the user's elsewhere: the hook's
    refusal goes to stderr only, the file keeps its bytes."""
    data = _data(w, "hard-link")
    kept = w.base / "home" / ".bashrc"
    kept.write_text("# the user's own file\n")
    os.link(kept, data / "hook-errors.log")
    loose = w.base / "roots" / "log" / "c3async"
    shutil.copytree(w.root, loose)
    (loose / "c3async").chmod(0o777)
    w.refused("a hook log hard-linked to a file of the user's", data, loose / "c3async", root=loose)
    w.res.check(
        kept.read_text() == "# the user's own file\n",
        "a hook never appends through a hard link",
        kept.read_text()[:200],
    )
