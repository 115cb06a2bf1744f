"""The plugin's build, held or failed at will: what the launcher's and the end-to-end tests share."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path


def wait_for(what: str, ready: Callable[[], object], timeout: float = 120) -> None:
    """Wait for another process's doing (a file appears): ``ready()`` true within ``timeout``."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s"
        time.sleep(0.05)


class Gate:
    """A ``uv`` first on PATH that builds the environment from this Python's packages (a venv
    with its site-packages: no download), its ``venv`` held until the test opens the gate (a
    FIFO) when there is one: ``held`` appears when it waits; ``open("fail")`` fails the build."""

    def __init__(self, tmp: Path, held: bool = True) -> None:
        self.bin = tmp / "uv-bin"
        self.bin.mkdir()
        self.fifo, self.held = tmp / "gate", tmp / "gate.held"
        if held:
            os.mkfifo(self.fifo)
        shim = self.bin / "uv"
        shim.write_text(
            f"#!{sys.executable}\n"
            "import os, subprocess, sys\n"
            "if sys.argv[1] == 'venv':\n"
            f"    if os.path.exists({str(self.fifo)!r}):\n"
            f"        open({str(self.held)!r}, 'w').close()\n"
            f"        with open({str(self.fifo)!r}) as gate:\n"
            "            if gate.read() == 'fail':\n"
            "                sys.exit(1)\n"
            "    python = sys.argv[sys.argv.index('--python') + 1]\n"
            "    cmd = [python, '-m', 'venv', '--without-pip', '--system-site-packages', sys.argv[-1]]\n"
            "    code = subprocess.call(cmd)\n"
            # When this Python is itself a venv, --system-site-packages gives its base's packages:
            # this Python's are added by a .pth file (the launcher builds for this same Python).
            "    if code == 0 and sys.prefix != sys.base_prefix:\n"
            "        import site\n"
            "        lib = os.path.join(sys.argv[-1], 'lib', f'python{sys.version_info[0]}.{sys.version_info[1]}')\n"
            "        with open(os.path.join(lib, 'site-packages', 'this-pythons.pth'), 'w') as pth:\n"
            "            pth.write(''.join(f'import site; site.addsitedir({d!r})\\n' for d in site.getsitepackages()))\n"
            "    sys.exit(code)\n"
            "sys.exit(0)  # pip install: the packages are this Python's own\n"
        )
        shim.chmod(0o755)

    def env(self, env: dict[str, str]) -> dict[str, str]:
        return {**env, "PATH": f"{self.bin}{os.pathsep}{env.get('PATH', '')}"}

    def wait_held(self) -> None:
        wait_for("the build reached the gate", self.held.exists)

    def open(self, verdict: str = "go") -> None:
        with open(self.fifo, "w") as gate:  # the build waits on the other end
            gate.write(verdict)
