"""A virtual environment that shares this Python's packages, made in a moment and without a
download: what the plugin's tests and scenarios give its launcher in place of a build from PyPI.

``python -m venv --system-site-packages`` gives the new environment its base interpreter's
packages. When this Python is itself a virtual environment (CI's, a developer's), its own
packages are not its base's: a ``.pth`` file in the new environment names them. The launcher's
interpreter must be this Python's version (compiled packages fit one version alone).

    python -m stress.venvs DEST [PYTHON]
"""

from __future__ import annotations

import site
import subprocess
import sys
from pathlib import Path


def sharing(dest: Path, python: str = sys.executable) -> int:
    """Make ``dest`` with ``python``, sharing this Python's packages; the venv module's exit code."""
    code = subprocess.call([python, "-m", "venv", "--without-pip", "--system-site-packages", str(dest)])
    if code == 0 and sys.prefix != sys.base_prefix:
        lines = "".join(f"import site; site.addsitedir({d!r})\n" for d in site.getsitepackages())
        for lib in dest.glob("lib/python*/site-packages"):
            (lib / "this-pythons.pth").write_text(lines)
    return code


if __name__ == "__main__":
    sys.exit(sharing(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else sys.executable))
