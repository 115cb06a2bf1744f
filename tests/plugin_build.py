"""The plugin's build, held or failed at will: what the launcher's and the end-to-end tests share."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def wait_for(what: str, ready: Callable[[], object], timeout: float = 120) -> None:
    """Wait for another process's doing (a file appears): ``ready()`` true within ``timeout``."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s"
        time.sleep(0.05)


class Gate:
    """A ``uv`` first on PATH that builds the environment from this Python's packages
    (``stress.venvs``: no download), its ``venv`` held until the test opens the gate (a FIFO) when
    there is one: ``held`` appears when it waits; ``open("fail")`` fails the build. A ``python3``
    beside it is this Python: the one Claude Code runs the launcher with, so the environment the
    launcher asks for is of this Python's version."""

    def __init__(self, tmp: Path, held: bool = True) -> None:
        self.bin = tmp / "uv-bin"
        self.bin.mkdir()
        (self.bin / "python3").symlink_to(sys.executable)
        self.fifo, self.held = tmp / "gate", tmp / "gate.held"
        if held:
            os.mkfifo(self.fifo)
        shim = self.bin / "uv"
        shim.write_text(
            f"#!{sys.executable}\n"
            "import os, sys\n"
            f"sys.path.insert(0, {str(REPO)!r})\n"
            "from pathlib import Path\n"
            "from stress.venvs import sharing\n"
            "if sys.argv[1] == 'venv':\n"
            f"    if os.path.exists({str(self.fifo)!r}):\n"
            f"        open({str(self.held)!r}, 'w').close()\n"
            f"        with open({str(self.fifo)!r}) as gate:\n"
            "            if gate.read() == 'fail':\n"
            "                sys.exit(1)\n"
            "    sys.exit(sharing(Path(sys.argv[-1]), sys.argv[sys.argv.index('--python') + 1]))\n"
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
