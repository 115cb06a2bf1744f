"""Real full file systems for the tests and the hostile suite: a small tmpfs mounted on a folder
(root only: ``mounted`` yields None where mounting is not permitted), filled to the brim by a
file holding all of its free space (``fill``), and given some of it back (``free_up``); and a
command killed in the middle of a write (``killed_halfway``)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

FILLER = "filler.bin"


@contextmanager
def mounted(folder: Path, size: str = "8m") -> Iterator[Path | None]:
    """``folder`` (made if missing) as a tmpfs of ``size``, unmounted afterwards; None when this
    process may not mount (not root, or in a container that forbids it)."""
    folder.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
        yield None
        return
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=700", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if done.returncode != 0:
        yield None
        return
    try:
        yield folder
    finally:
        if subprocess.run(["umount", str(folder)], capture_output=True, timeout=30).returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True, timeout=30)


def free(folder: Path) -> int:
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


def fill(folder: Path, leave: int = 0) -> Path:
    """A file in ``folder`` taking all of its filesystem's free space but ``leave`` bytes (to the
    brim: written until not even one byte more fits)."""
    path = folder / FILLER
    with open(path, "ab", buffering=0) as f:
        chunk = 1 << 20
        while chunk:
            n = chunk if not leave else min(chunk, free(folder) - leave)
            if n <= 0:
                break
            try:
                f.write(b"\0" * n)
            except OSError:
                chunk //= 2
    return path


def free_up(folder: Path, nbytes: int | None = None) -> None:
    """Give back ``nbytes`` of the filler (all of it: None)."""
    path = folder / FILLER
    if nbytes is None:
        path.unlink(missing_ok=True)
        return
    size = path.stat().st_size
    os.truncate(path, max(0, size - nbytes))


# A c3async command held in the middle of writing a document (its temp file written, not yet
# synced and renamed): os.fsync of a temp file says so and waits to be killed.
_HELD = """
import os, sys, time
synced = os.fsync
def held(fd):
    if os.readlink(f"/proc/self/fd/{fd}").endswith(".tmp"):
        print("writing", flush=True)
        time.sleep(120)
    synced(fd)
os.fsync = held
from c3async.cli import main
main(sys.argv[1:])
"""


def killed_halfway(args: list[str], env: dict[str, str]) -> bool:
    """Run ``c3async ARGS`` and SIGKILL it while it writes a document, as a power cut would;
    False when it finished without writing one."""
    proc = subprocess.Popen([sys.executable, "-c", _HELD, *args], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        held = proc.stdout.readline().strip() == "writing"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    return held
