"""Real full file systems for the tests and the hostile suite: a small tmpfs mounted on a folder
(root only: ``mounted`` yields None where mounting is not permitted), filled to the brim by a
file holding all of its free space (``fill``), and given some of it back (``free_up``)."""

from __future__ import annotations

import os
import shutil
import subprocess
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
