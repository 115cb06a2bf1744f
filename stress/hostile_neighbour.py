"""The Hub stays up under a neighbour: another local account (``nobody``) opens 1,100
connections to the Hub and sends nothing, reopening each one the Hub closes, while the Hub runs
with the soft file limit a desktop has (1,024). The user's authenticated requests must still be
answered; a connection that trickles its request a byte at a time is closed; the Hub refuses a
``hub/`` folder that is not its own and private.

Needs root (to run as another account); without it the scenario says so and checks the rest.
Figures: the user's answer times under the flood, and how many connections the neighbour opened
and the Hub closed.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path

from .harness import PY, REPO, SYSTEM_PYTHON, Result, as_nobody

CLASS = "the Hub under a neighbour"

IDLE = 1100

# Run as the other account: hold ``n`` idle connections for ``hold`` seconds (one closed, one more).
FLOOD = textwrap.dedent(
    """
    import selectors, socket, sys, time, resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    port, n, hold, ready = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    conns, opened, closed, t0, said = [], 0, 0, time.time(), False
    while time.time() - t0 < hold:
        while len(conns) < n:
            try:
                conns.append(socket.create_connection(("127.0.0.1", port), timeout=2))
                opened += 1
            except OSError:
                time.sleep(0.01)
                break
        if not said and len(conns) >= n:
            open(ready, "w").close()
            said = True
        sel = selectors.DefaultSelector()
        for c in conns:
            sel.register(c, selectors.EVENT_READ)
        for key, _ in sel.select(0.05):
            try:
                gone = key.fileobj.recv(1) == b""
            except OSError:
                gone = True
            if gone:
                conns.remove(key.fileobj)
                key.fileobj.close()
                closed += 1
        sel.close()
    print(opened, closed, len(conns))
    """
)


class Flood:
    """The neighbour: ``nobody`` holding ``n`` idle connections to ``port`` for ``hold`` s."""

    def __init__(self, port: int, n: int = IDLE, hold: float = 10.0) -> None:
        assert SYSTEM_PYTHON is not None
        self.shared = Path(tempfile.mkdtemp(prefix="c3flood-"))  # where it can say it is ready
        os.chmod(self.shared, 0o777)
        self.ready = self.shared / "ready"
        self.proc = as_nobody(FLOOD, str(port), str(n), str(hold), str(self.ready), wait=False)

    def wait_ready(self, timeout: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout
        while not self.ready.exists() and time.monotonic() < deadline and self.proc.poll() is None:
            time.sleep(0.05)
        return self.ready.exists()

    def finish(self) -> tuple[int, int, int]:
        """(connections opened, closed by the Hub, held at the end)."""
        try:
            out, _ = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        finally:
            shutil.rmtree(self.shared, ignore_errors=True)
        parts = out.split()
        return (int(parts[0]), int(parts[1]), int(parts[2])) if len(parts) == 3 else (0, 0, 0)


def _lowered() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))


def start_hub(env: dict[str, str], hard_limit: bool = False) -> tuple[subprocess.Popen, int, str]:
    """``c3async hub`` with a desktop's soft file limit (``hard_limit``: and no room above it,
    so the Hub holds fewer connections than the neighbour opens); (process, port, token)."""
    proc = subprocess.Popen(
        [PY, "-m", "c3async", "hub", "--port", "0"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        preexec_fn=_capped if hard_limit else _lowered,
    )
    line = proc.stderr.readline() if proc.stderr is not None else ""
    m = re.search(r"127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]+)", line)
    if m is None:
        proc.kill()
        raise RuntimeError(f"the Hub did not start: {line!r}")
    return proc, int(m.group(1)), m.group(2)


def _get(port: int, token: str) -> tuple[float, int | str]:
    t0 = time.monotonic()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/projects", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            r.read()
            return time.monotonic() - t0, r.status
    except OSError as exc:
        return time.monotonic() - t0, type(exc).__name__


def _trickle(port: int) -> float:
    """Send a request a byte every half second: how long until the Hub closes the connection."""
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    t0 = time.monotonic()
    try:
        for ch in b"GET /api/projects HTTP/1.1\r\nHost: 127.0.0.1\r\n" * 4:
            s.sendall(bytes([ch]))
            s.settimeout(0.5)
            try:
                if s.recv(1) == b"":
                    break
            except TimeoutError:
                pass
    except OSError:
        pass
    finally:
        s.close()
    return time.monotonic() - t0


def _under_flood(res: Result, port: int, token: str, quick: bool, label: str) -> None:
    flood = Flood(port, IDLE, 10.0 if quick else 30.0)
    held = flood.wait_ready()
    res.check(held, f"the neighbour holds {IDLE} idle connections", f"{label}: it never did")
    answers = [_get(port, token) for _ in range(10 if quick else 40)]
    opened, closed, left = flood.finish()
    ok = [t for t, status in answers if status == 200]
    res.check(
        len(ok) == len(answers),
        "the user's requests are answered under the flood",
        f"{label}: {len(answers) - len(ok)} of {len(answers)} not: {[s for _, s in answers if s != 200][:3]}",
    )
    if ok:
        res.fig(
            f"answer time, {label}",
            f"median {statistics.median(ok) * 1e3:.0f} ms, slowest {max(ok) * 1e3:.0f} ms "
            f"({len(ok)} requests; the neighbour opened {opened}, the Hub closed {closed}, {left} held at the end)",
        )


def _stop(hub: subprocess.Popen) -> None:
    hub.terminate()
    try:
        hub.wait(10)
    except subprocess.TimeoutExpired:
        hub.kill()
    if hub.stderr is not None:
        hub.stderr.close()


def check(res: Result, sb, quick: bool) -> None:
    env = sb.env()
    hub, port, token = start_hub(env)
    try:
        closed_after = _trickle(port)
        res.check(closed_after < 8, "a connection that trickles its request is closed", f"after {closed_after:.1f} s")
        res.fig("a trickled request closed after", f"{closed_after:.1f} s")
        if os.geteuid() != 0 or SYSTEM_PYTHON is None:
            res.note("not root (or no system Python): the other-account flood was not run")
        else:
            _under_flood(res, port, token, quick, f"{IDLE} idle connections, soft limit 1,024 (raised)")
    finally:
        _stop(hub)
    if os.geteuid() == 0 and SYSTEM_PYTHON is not None:  # no room above 1,024: the Hub makes room by closing
        hub, port, token = start_hub(env, hard_limit=True)
        try:
            _under_flood(res, port, token, quick, f"{IDLE} idle connections, hard limit 1,024 (held: 512)")
        finally:
            _stop(hub)
    folder = Path(env["C3_HOME"], "hub")
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o755)
    try:
        proc = subprocess.run(
            [PY, "-m", "c3async", "hub", "--port", "0"], env=env, capture_output=True, text=True, cwd=REPO, timeout=60
        )
        res.check(
            proc.returncode == 1 and "chmod 700" in proc.stderr,
            "a hub/ folder others can enter is refused",
            f"rc {proc.returncode}: {proc.stderr[-200:]!r}",
        )
    finally:
        os.chmod(folder, 0o700)
