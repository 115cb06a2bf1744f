"""``c3async hub``: serve the Hub with uvicorn on a loopback address, and nowhere else."""

from __future__ import annotations

import ipaddress
import socket
import sys

__all__ = ("is_loopback", "run_hub")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def run_hub(host: str, port: int, open_browser: bool) -> int:
    if not is_loopback(host):
        print(f"c3async: error: refusing to serve the Hub on {host!r}: it shows transcript text and "
              "must stay on this machine; use 127.0.0.1 (or ::1)", file=sys.stderr)
        return 2
    import uvicorn

    from .app import create_app

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        print(f"c3async: error: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
        return 1
    bound = sock.getsockname()[1]
    url = f"http://{'[' + host.strip('[]') + ']' if ':' in host else host}:{bound}/"
    print(f"c3async Hub on {url}  (Ctrl-C to stop)", file=sys.stderr, flush=True)
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    config = uvicorn.Config(create_app(), log_level="warning", timeout_graceful_shutdown=1)
    uvicorn.Server(config).run(sockets=[sock])
    return 0
