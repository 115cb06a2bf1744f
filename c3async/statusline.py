"""A door of its own: `statusline` (Claude Code's status-line command) and `install-statusline`
(setting it). Every window runs the status line after each response, so ``__main__`` runs it
without the command line's package (``main``), in a Python started isolated and without
``site`` (the command ``install-statusline`` writes), and its common case imports the standard
library alone (``sessions.statusline``).

``c3async statusline`` reads the JSON Claude Code writes on its stdin, records the rate limits it
carries (``usage.ratelimits``) and prints one line: this session's note or stale mark, how many
sessions wait for you in other windows and the longest wait, the binding rate-limit window. With
``--then CMD`` (what ``install-statusline`` writes over a status line you had) your command runs
first, on the same stdin, for at most ``THEIRS_S`` seconds; its lines come first.

It never breaks the status line: whatever fails prints a short line and exits 0. Every value
shown is inert (``ground.term``); ``NO_COLOR`` gives plain text.
"""

from __future__ import annotations

import json
import os
import sys
import time

from .ground.term import inert_line

TYPE_CHECKING = False  # typing itself costs the status line 2 ms
if TYPE_CHECKING:
    from typing import TextIO

__all__ = ("line", "main", "run")

MAX_INPUT = 1 << 20  # Claude Code's JSON is ~2 KB
THEIRS_S = 1.5  # your own status-line command's time limit
THEIRS_BYTES = 16 * 1024  # and the most of its output kept
THEIRS_LINES = 8
NOTE_CHARS = 40
_SHORT = {"five_hour": "5h", "seven_day": "7d"}


def main(argv: list[str]) -> int | None:
    """``c3async statusline ARGV`` as ``__main__`` runs it, for the arguments install writes;
    None for any others (``--help``: the command line's own parser answers)."""
    from .live.statusline import wrapped

    found = wrapped(argv)
    return None if found is None else run(found[0], sys.stdout)


def run(then: str | None, out: TextIO) -> int:
    """Always 0: a status line that fails shows Claude Code's users a broken bar."""
    theirs: list[str] = []
    try:
        data = sys.stdin.buffer.read(MAX_INPUT + 1)
        runner = _Theirs(then, data) if then and len(data) <= MAX_INPUT else None
        text = line(data, dict(os.environ), time.time())
        if runner is not None:
            theirs = runner.lines()
    except Exception as exc:  # never a traceback on Claude Code's bar
        text = f"c3async: {type(exc).__name__}"
    styled = not os.environ.get("NO_COLOR")
    shown = "".join(row + "\n" for row in theirs) + (text if styled else _plain(text)) + "\n"
    try:
        out.write(shown)
        out.flush()
    except (OSError, ValueError):  # Claude Code stopped reading: nothing to say it to
        pass
    return 0


def line(data: bytes, env: dict[str, str], now: float) -> str:
    """The status line for Claude Code's JSON ``data`` (coloured; ``_plain`` takes colour out)."""
    if len(data) > MAX_INPUT:
        return "c3async: status input too large"
    try:
        payload = json.loads(data) if data.strip() else {}
    except (ValueError, RecursionError):
        return "c3async: status input is not JSON"
    if not isinstance(payload, dict):
        return "c3async: status input is not a JSON object"
    from .ground.home import config_folder
    from .sessions.statusline import facts

    found = facts(payload, config_folder(), now)
    parts = []
    if found.mark and found.mark_text:
        parts.append(_dim(f"{found.mark}: {_clip(found.mark_text, NOTE_CHARS)}"))
    if found.waiting:
        first = found.waiting[0]
        text = f"{len(found.waiting)} waiting · {_clip(first.label, 24)}"
        if first.since is not None:
            text += f" {age(now - first.since)}"
        parts.append(_colour(33, text))
    binding = found.binding()
    if binding is not None:
        name = _SHORT.get(binding.window) or "7d " + binding.window.removeprefix("seven_day_").replace("_", " ")
        pct = f"{binding.used:g}%"
        level = 31 if binding.used >= 80 else 33 if binding.used >= 50 else 32
        parts.append(f"{name} {_colour(level, pct)} · resets {_when(binding.resets_at, now)}")
        from .usage.pace import left_at_pace  # a small file the accounting keeps

        left = left_at_pace(binding, now)
        if left is not None:
            parts[-1] += f" · ~{age(left)} left at this pace"
    return " · ".join(parts) if parts else _dim("none waiting")


def age(seconds: float) -> str:
    """A wait, as a person reads it: 45s, 4m, 1h05m, 2d."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86_400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86_400}d"


def _when(at: float, now: float) -> str:
    local = time.localtime(at)
    return time.strftime("%H:%M" if at - now < 20 * 3600 else "%a %H:%M", local)


def _clip(text: str, width: int) -> str:
    text = inert_line(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def _colour(code: int, text: str) -> str:
    return f"\x1b[{code}m{text}\x1b[0m"


def _dim(text: str) -> str:
    return f"\x1b[2m{text}\x1b[0m"


def _plain(text: str) -> str:
    """The line without our colours (what we add is the only escape in it: values are inert)."""
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", text)


class _Theirs:
    """Your status-line command, started at once on the same input (``/bin/sh -c``, as Claude
    Code runs it), read while ours is worked out; cut at ``THEIRS_S`` seconds or
    ``THEIRS_BYTES`` bytes, its whole process group ended then."""

    def __init__(self, command: str, data: bytes) -> None:
        import subprocess
        import threading

        self.deadline = time.monotonic() + THEIRS_S
        self.out = b""
        self.proc = subprocess.Popen(
            ["/bin/sh", "-c", command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.data = data
        self.thread = threading.Thread(target=self._talk, daemon=True)
        self.thread.start()

    def _talk(self) -> None:
        import selectors

        proc, data = self.proc, memoryview(self.data)
        assert proc.stdin is not None and proc.stdout is not None
        os.set_blocking(proc.stdin.fileno(), False)
        chunks: list[bytes] = []
        kept = 0
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            if data:
                sel.register(proc.stdin, selectors.EVENT_WRITE)
            else:
                proc.stdin.close()
            while sel.get_map() and kept <= THEIRS_BYTES:
                left = self.deadline - time.monotonic()
                if left <= 0:
                    break
                for key, _ in sel.select(left):
                    if key.fileobj is proc.stdin:
                        try:
                            data = data[os.write(proc.stdin.fileno(), data[:65536]) :]
                        except OSError:  # they did not read it all: fine
                            data = data[:0]
                        if not data:
                            sel.unregister(proc.stdin)
                            proc.stdin.close()
                    else:
                        chunk = os.read(proc.stdout.fileno(), 65536)
                        if not chunk:
                            sel.unregister(proc.stdout)
                        chunks.append(chunk)
                        kept += len(chunk)
        self.out = b"".join(chunks)[:THEIRS_BYTES]
        self._end()

    def _end(self) -> None:
        import signal

        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None and not stream.closed:
                stream.close()
        self.proc.wait()

    def lines(self) -> list[str]:
        """Your command's non-empty lines, as it printed them (its colours are yours)."""
        self.thread.join(max(0.0, self.deadline - time.monotonic()) + 0.5)
        text = self.out.decode("utf-8", "replace")
        return [row for row in text.splitlines() if row.strip()][:THEIRS_LINES]
