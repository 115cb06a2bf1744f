"""``c3async hub``: serve the Hub with uvicorn on a loopback address, and nowhere else.

Each start makes a new token (``secrets.token_urlsafe(32)``). It reaches the user in two ways
only: the URL printed on stderr (``http://127.0.0.1:PORT/?token=T``) and the token file
``$C3_HOME/hub/hub-PORT.json`` (``{"url", "port", "pid", "token"}``), created 0600 in a 0700
directory that must not be a symlink, and removed when the Hub stops cleanly. ``--open`` does
not put the token on a browser's command line (other accounts can read command lines): as
Jupyter does, it opens a 0600 file next to the token file, ``hub-PORT-open.html``, that
redirects to the URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import html
import ipaddress
import json
import os
import re
import secrets
import signal
import socket
import stat
import sys
from pathlib import Path
from types import FrameType
from typing import Any, NamedTuple

from ..ground import disk
from ..ground.errors import C3Error, Unavailable, UnsafeHubFolder, UsageError
from ..ground.term import inert_line

__all__ = ("HubFiles", "RunningHub", "is_loopback", "run_hub", "running_hubs")

_OURS = re.compile(r"^hub-(\d{1,5})(?:\.json|-open\.html)$")  # the only names this module deletes
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# openat() and friends; where missing (Windows), paths are used after the same lstat checks.
_DIR_FD = sys.platform != "win32" and {os.open, os.unlink, os.rename} <= os.supports_dir_fd
REQUEST_S = 5.0  # a connection that has not sent a whole request (headers) by then is closed
MAX_CONNECTIONS = 4096  # held at once; past it the oldest connection with no request under way goes
# asyncio accepts up to the backlog's worth of connections in one go: where the file limit is low,
# a smaller one keeps a burst of a neighbour's connects from running the Hub out of descriptors.
BACKLOG = 1024


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class HubFiles:
    """The token file (and the ``--open`` redirect file) of the Hub on one port, in
    ``$C3_HOME/hub``. Everything goes through a descriptor of that directory, opened without
    following a symlink, so no file is ever written, read or removed through a link."""

    def __init__(self, port: int, url: str, token: str) -> None:
        from ..ground.home import c3_home

        self.port, self.url, self.token = port, url, token
        self.dir = c3_home() / "hub"
        self.name = f"hub-{port}.json"
        self.open_name = f"hub-{port}-open.html"
        self.path = self.dir / self.name
        self._dir_fd: int | None = None
        self._written: list[str] = []

    def _open_dir(self) -> int:
        """The directory's descriptor (-1 where the platform has no openat: paths are used)."""
        if self._dir_fd is not None:
            return self._dir_fd
        self.dir.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(self.dir, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(self.dir)
        if stat.S_ISLNK(st.st_mode):
            raise UnsafeHubFolder(
                f"{self.dir} is a symbolic link; refusing to put the Hub's token there. "
                "Remove it (c3async creates a private directory in its place)."
            )
        if not stat.S_ISDIR(st.st_mode):
            raise UnsafeHubFolder(f"{self.dir} is not a directory; remove it and start the Hub again")
        if not _DIR_FD:
            self._dir_fd = -1
            return -1
        fd = os.open(self.dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW)
        try:
            st = os.fstat(fd)
            if st.st_uid != os.geteuid():
                raise UnsafeHubFolder(
                    f"{self.dir} belongs to another account (uid {st.st_uid}); refusing to put the Hub's token "
                    "there. Remove it (c3async creates a private one in its place)."
                )
            if stat.S_IMODE(st.st_mode) & 0o077:
                raise UnsafeHubFolder(
                    f"{self.dir} can be read or entered by other accounts (mode {stat.S_IMODE(st.st_mode):o}); "
                    f"refusing to put the Hub's token there. Make it private (chmod 700 {self.dir}) or remove it."
                )
        except BaseException:
            os.close(fd)
            raise
        self._dir_fd = fd
        return fd

    def _at(self, name: str) -> tuple[str, int | None]:
        """``name`` relative to the directory's descriptor, or as a path where there is none."""
        fd_dir = self._open_dir()
        return (name, fd_dir) if fd_dir >= 0 else (str(self.dir / name), None)

    def _read(self, name: str, limit: int = 65536) -> bytes | None:
        """A regular file's first bytes, never through a link; None for anything else."""
        path, dfd = self._at(name)
        try:
            fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0), dir_fd=dfd)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            return f.read(limit)

    def _write(self, name: str, data: bytes) -> Path:
        """Write ``name``: a private temp file (0600 from its creation, O_EXCL, no following a
        link), then a rename over whatever was there (say, a file left by a killed Hub), whose
        temp files go too once they are old (``disk.clear_stale_temps``)."""
        tmp, dfd = self._at(f".{name}.{secrets.token_hex(8)}.tmp")
        disk.clear_stale_temps(self.dir if dfd is None else dfd, name)
        dst, _ = self._at(name)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(tmp, flags, 0o600, dir_fd=dfd)
        try:
            with os.fdopen(fd, "wb") as f:
                if hasattr(os, "fchmod"):
                    os.fchmod(f.fileno(), 0o600)  # whatever the umask said
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, dst, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException as exc:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            if disk.is_full(exc):
                raise disk.full(self.dir) from exc
            raise
        self._written.append(name)
        return self.dir / name

    def write_token(self) -> Path:
        self._prune()
        doc = {"url": self.url, "port": self.port, "pid": os.getpid(), "token": self.token}
        return self._write(self.name, (json.dumps(doc, indent=1) + "\n").encode())

    def write_opener(self) -> Path:
        """A page that sends the browser on to the URL: what ``--open`` opens."""
        url = html.escape(self.url, quote=True)
        page = (
            f'<!doctype html>\n<html><head><meta charset="utf-8">\n'
            f'<meta http-equiv="refresh" content="0;url={url}">\n<title>c3async Hub</title></head>\n'
            f'<body><p>Opening the c3async Hub: <a href="{url}">continue</a>.</p></body></html>\n'
        )
        return self._write(self.open_name, page.encode())

    def _prune(self) -> None:
        """Remove the files of Hubs whose process is gone (killed, they could not clean up).
        Only names this module creates are touched."""
        path, dfd = self._at(".")
        for name in os.listdir(dfd if dfd is not None else path):
            m = _OURS.match(name)
            if not m or not name.endswith(".json") or int(m.group(1)) == self.port:
                continue
            try:
                pid = int(json.loads(self._read(name) or b"null").get("pid"))
            except (ValueError, TypeError, AttributeError, RecursionError, OverflowError):
                continue
            if pid <= 0 or _alive(pid):
                continue
            for stale in (name, f"hub-{m.group(1)}-open.html"):
                stale_path, stale_dfd = self._at(stale)
                try:
                    os.unlink(stale_path, dir_fd=stale_dfd)
                except OSError:
                    pass

    def remove(self) -> None:
        """Remove what this process wrote, if it is still this process's (it holds our token)."""
        if self._dir_fd is None:
            return
        for name in self._written:
            data = self._read(name)
            if data is not None and self.token.encode() in data:
                path, dfd = self._at(name)
                try:
                    os.unlink(path, dir_fd=dfd)
                except OSError:
                    pass
        self._written.clear()
        if self._dir_fd >= 0:
            os.close(self._dir_fd)
        self._dir_fd = None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process: alive
    return True


class RunningHub(NamedTuple):
    url: str
    port: int
    pid: int


def running_hubs() -> list[RunningHub]:
    """The Hubs of this account that run now (their token file names a live process that
    listens on its port), the newest first. Reads ``$C3_HOME/hub`` as ``HubFiles`` does: never
    through a link, only a private directory of ours; creates nothing."""
    from ..ground.home import c3_home

    folder = c3_home() / "hub"
    try:
        st = os.lstat(folder)
    except OSError:
        return []
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) & 0o077:
        return []
    found: list[tuple[float, RunningHub]] = []
    reader = HubFiles(0, "", "")
    try:
        for name in os.listdir(folder):
            m = _OURS.match(name)
            if not m or not name.endswith(".json"):
                continue
            try:
                doc = json.loads(reader._read(name) or b"null")
                hub = RunningHub(str(doc["url"]), int(doc["port"]), int(doc["pid"]))
                when = os.lstat(folder / name).st_mtime
            except (OSError, ValueError, TypeError, KeyError, RecursionError, OverflowError):  # "port": 1e400
                continue
            if hub.port == int(m.group(1)) and _ours_running(hub.pid, when) and _listening(hub.url, hub.port):
                found.append((when, hub))
    except (OSError, UnsafeHubFolder):
        return []
    finally:
        reader.remove()
    return [hub for _, hub in sorted(found, reverse=True)]


def _ours_running(pid: int, written: float) -> bool:
    """The Hub's process still runs: a process of this account with that pid, started before it
    wrote its file (a pid reused since, or another account's process, is not it)."""
    import psutil

    if not 0 < pid < 1 << 31:
        return False
    try:
        proc = psutil.Process(pid)
        return proc.uids().real == os.getuid() and proc.create_time() <= written + 1.0
    except (psutil.Error, AttributeError, OSError):
        return False


def _listening(url: str, port: int) -> bool:
    host = url.split("//", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0].strip("[]") or "127.0.0.1"
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _holder(port: int) -> str:
    """Who listens on ``port``, in words: one of our Hubs, a named process, or unknown."""
    for hub in running_hubs():
        if hub.port == port:
            return f"another c3async Hub (pid {hub.pid}) is serving on it; `c3async hub --url` prints its URL"
    import psutil

    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                try:
                    name = psutil.Process(conn.pid).name()
                except psutil.Error:
                    name = "a process"
                return f"{inert_line(name)} (pid {conn.pid}) listens on it"
    except (OSError, psutil.Error):
        pass
    return "another program listens on it (one this account cannot see)"


def _browser_can_open() -> bool:
    """Whether ``webbrowser`` may find a graphical browser: on Linux and the BSDs, a display
    or $BROWSER is needed (without one it would run a text browser in the Hub's terminal)."""
    if sys.platform in ("darwin", "win32") or os.environ.get("BROWSER"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


class _Stopped(Exception):
    """SIGTERM, from ``_stop`` to ``run_hub``'s serving loop: it never leaves this module."""


def _stop(signum, frame) -> None:  # a signal handler
    raise _Stopped


def _raise_file_limit() -> None:
    """The soft limit on open files raised to the hard one: another account holding a thousand
    idle connections must not leave the Hub without descriptors for the user's own."""
    try:
        import resource
    except ImportError:  # Windows
        return
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 16)
        if soft != resource.RLIM_INFINITY and soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (OSError, ValueError):
        pass


def guarded_protocol() -> type:
    """uvicorn's h11 protocol with two limits a neighbour cannot exhaust: a connection must send
    a whole request's headers within REQUEST_S of opening (or of its last answer), else it is
    closed; and at most MAX_CONNECTIONS are held, a new one past that closing the oldest that
    has no request under way (an idle one: the user's request, sent as soon as its connection
    opens, is never idle long enough to be chosen)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Guarded(H11Protocol):
        deadline: asyncio.TimerHandle | None = None
        opened = 0.0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.opened = self.loop.time()
            self._arm()
            if len(self.connections) > _connection_cap():
                self._evict()

        def _busy(self) -> bool:
            return self.cycle is not None and not self.cycle.response_complete

        def _arm(self) -> None:
            self._disarm()
            self.deadline = self.loop.call_later(REQUEST_S, self._expire)

        def _disarm(self) -> None:
            if self.deadline is not None:
                self.deadline.cancel()
                self.deadline = None

        def _expire(self) -> None:
            self.deadline = None
            if not self._busy() and not self.transport.is_closing():
                self.transport.close()

        def _evict(self) -> None:
            idle = [
                c
                for c in self.connections
                if c is not self and isinstance(c, Guarded) and not c._busy() and not c.transport.is_closing()
            ]
            if idle:
                min(idle, key=lambda c: c.opened).transport.close()
            else:  # every one is answering a request: this one waits for none of them
                self.transport.close()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._busy():
                self._disarm()  # a request is under way: its answer may take as long as it takes

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request on this connection gets its REQUEST_S too

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return Guarded


def quiet_server(config: Any) -> Any:
    """uvicorn's server, woken by a stop instead of ten times a second: it ticks once a second
    (the Date header it keeps), and a signal's handler wakes it at once. An idle Hub's event
    loop then sleeps between the watcher's news (each wake-up costs, most on a virtual machine)."""
    import uvicorn

    class Quiet(uvicorn.Server):
        _wake: asyncio.Event | None = None
        _loop: asyncio.AbstractEventLoop | None = None

        async def main_loop(self) -> None:
            self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
            counter = 0
            while not await self.on_tick(counter):
                counter = (counter + 10) % 864000  # on_tick renews the Date header at multiples of ten
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), 1.0)

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            super().handle_exit(sig, frame)
            if self._loop is not None and self._wake is not None:  # a signal handler: the loop may sit in select
                with contextlib.suppress(RuntimeError):  # a loop already closed
                    self._loop.call_soon_threadsafe(self._wake.set)

    return Quiet(config)


def _connection_cap() -> int:
    """MAX_CONNECTIONS, or fewer where the file limit leaves less room."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return MAX_CONNECTIONS
    return MAX_CONNECTIONS if soft == resource.RLIM_INFINITY else max(16, min(MAX_CONNECTIONS, soft // 2))


def _open(files: HubFiles) -> None:
    """``--open``: the opener page in a browser, or say there is none (the URL is printed)."""
    import webbrowser

    opened = False
    try:
        opened = _browser_can_open() and webbrowser.open(files.write_opener().as_uri())
    except (OSError, UnsafeHubFolder, webbrowser.Error) as exc:
        print(f"c3async: could not open a browser ({exc}); open the URL above", file=sys.stderr)
        return
    if not opened:
        print("c3async: no browser found to open (no display, no $BROWSER); open the URL above", file=sys.stderr)


def run_hub(host: str, port: int, open_browser: bool) -> int:
    """Serve the Hub until Ctrl-C or SIGTERM (0). Raises a C3Error for a Hub that cannot start
    (the CLI says it): a host that is not loopback, a port in use, a token folder refused."""
    if not is_loopback(host):
        raise UsageError(
            f"refusing to serve the Hub on {host!r}: it shows transcript text and "
            "must stay on this machine; use 127.0.0.1 (or ::1)"
        )
    if not 0 <= port <= 65535:
        raise UsageError(f"--port {port} is not a TCP port (0 to 65535; 0 picks a free one)")
    import uvicorn

    from .app import create_app

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: the connections accepted inherit it, and asyncio turns Nagle's algorithm
    # off only on a socket that says TCP (an answer written as head and body would otherwise wait
    # for the client's delayed ACK, 40 ms)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except (OSError, OverflowError) as exc:
        sock.close()
        if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
            raise Unavailable(
                f"port {port} on {host} is in use: {_holder(port)}. "
                "Give another with --port N (--port 0 picks a free one)."
            ) from None
        raise Unavailable(f"cannot listen on {host}:{port}: {exc}") from None
    bound = sock.getsockname()[1]
    _raise_file_limit()
    backlog = max(64, min(BACKLOG, _connection_cap() // 4))
    sock.listen(backlog)  # listening before the URL and the token file exist: the URL always answers
    token = secrets.token_urlsafe(32)
    base = f"http://{'[' + host.strip('[]') + ']' if ':' in host else host}:{bound}/"
    url = f"{base}?token={token}"
    files = HubFiles(bound, url, token)
    try:
        where = files.write_token()
    except (OSError, C3Error) as exc:
        sock.close()
        files.remove()
        if isinstance(exc, C3Error):  # a refused folder, a full disk: the message says it all
            raise
        raise Unavailable(f"cannot write the Hub's token file: {exc}") from None
    # uvicorn stops gracefully on SIGTERM, then raises the signal again with the handler it
    # found: make that handler ours, so the token file is removed on a plain `kill` too.
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        print(
            f"c3async Hub on {url}  (Ctrl-C to stop)\n  open that URL; it is also in {where} (readable by you only)",
            file=sys.stderr,
            flush=True,
        )
        if open_browser:
            _open(files)
        config = uvicorn.Config(
            create_app(token),
            http=guarded_protocol(),
            log_level="warning",
            timeout_graceful_shutdown=1,
            backlog=backlog,
        )
        quiet_server(config).run(sockets=[sock])
    except (_Stopped, KeyboardInterrupt):
        pass
    finally:
        files.remove()
        signal.signal(signal.SIGTERM, previous)
        sock.close()
    return 0
