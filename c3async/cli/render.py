"""Everything the CLI shows: where it is written (:class:`Screen`: the asked-for output and the
messages for a person), how (made inert, JSON escaped, bold only on a terminal that wants it,
a counter while work takes a moment) and the renderings of what the commands found.

Text printed for a person goes through :mod:`c3async.ground.term`, so a title, branch, note,
task or path cannot drive the terminal. ``--json`` goes through
:func:`~c3async.ground.term.json_inert`: the same data to any parser, with DEL, C1 and
bidi/format characters written as ``\\u`` escapes.
"""

from __future__ import annotations

import logging
import os
import shlex
import time
from typing import Any, TextIO

from ..ground.term import inert, inert_line, json_inert


class Screen:
    """A command's two streams: ``out`` for what was asked (tables, JSON) and ``err`` for what
    a person is told (notices, warnings, errors)."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err

    def write(self, text: str) -> None:
        """Text already made inert (a rendering of this module's), as it is."""
        self.out.write(text)

    def print(self, line: str = "") -> None:
        """A line already made inert, on ``out``."""
        self.out.write(line + "\n")

    def say(self, message: str) -> None:
        """A message for a person on ``err``; it may quote ids, paths and text, so it is made inert."""
        self.err.write(inert(message) + "\n")

    def json(self, data: bytes) -> None:
        """JSON on ``out``: the data exactly as encoded, DEL/C1/bidi escaped so it is inert too;
        UTF-8 bytes on a stream that has them (whatever the terminal's encoding), else text."""
        data = json_inert(data) + b"\n"
        buffer = getattr(self.out, "buffer", None)
        if buffer is None:
            self.out.write(data.decode("utf-8"))
            return
        self.out.flush()
        buffer.write(data)
        buffer.flush()

    def flush(self) -> None:
        self.out.flush()
        self.err.flush()

    def styled(self) -> bool:
        """Bold and colour only on a terminal that wants them (https://no-color.org: a NO_COLOR
        that is set and not empty turns them off, as does TERM=dumb)."""
        return _isatty(self.out) and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"

    def progress(self, what: str) -> Progress:
        return Progress(what, self.err)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError):  # a closed stream
        return False


class Progress:
    """A one-line counter on ``err``, shown only on a terminal and only once work takes a moment."""

    def __init__(self, what: str, stream: TextIO, delay: float = 0.3) -> None:
        self.what = what
        self.stream = stream
        self.enabled = _isatty(stream)
        self.start = time.monotonic()
        self.delay = delay
        self.shown = False
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.start < self.delay or (now - self.last < 0.05 and done < total):
            return
        self.last = now
        self.shown = True
        self.stream.write(f"\r{self.what} {done}/{total}")
        self.stream.flush()

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()


class InertFormatter(logging.Formatter):
    """Log lines (warnings of the floors below) as inert as every other message."""

    def format(self, record: logging.LogRecord) -> str:
        return inert(super().format(record))


def safe_streams(*streams: TextIO) -> None:
    """Never die of UnicodeEncodeError: an ASCII or Latin-1 stdout (LANG=C, PYTHONIOENCODING)
    gets ``\\u`` escapes for what it cannot show."""
    for stream in streams:
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # pragma: no cover - a closed or exotic stream
                pass


def size(n: float) -> str:
    for unit in ("B", "K", "M", "G"):
        if n < 1024 or unit == "G":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return str(n)


def clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "\u2026"


def plural(n: int, word: str) -> str:
    return f"{word}{'s' if n != 1 else ''}"


def _grouped(rows: list) -> list[tuple[Any, int]]:
    """Rows in their order, with each fork moved under its root when the root is listed too:
    (row, depth), depth 0 for a root or a row whose root is not listed."""
    by_id = {r.id: r for r in rows}
    children: dict[str, list] = {}
    top = []
    for r in rows:
        parent = r.forked_from if r.forked_from in by_id else None
        if parent is None:
            top.append(r)
        else:
            children.setdefault(parent, []).append(r)
    out: list[tuple[Any, int]] = []
    placed: set[str] = set()

    def put(row, depth: int) -> None:
        if row.id in placed:
            return
        placed.add(row.id)
        out.append((row, depth))
        for child in children.get(row.id, ()):
            put(child, depth + 1)

    for r in top:
        put(r, 0)
    for r in rows:  # what a loop of forks left out (never expected): in its place
        put(r, 0)
    return out


def sessions_table(rows: list, show_project: bool) -> str:
    """The listing: one row a session, forks under their root, the title clipped to the terminal."""
    import shutil

    from ..sessions.rows import age

    grouped = _grouped(rows)
    rows = [r for r, _ in grouped]
    depths = [d for _, d in grouped]
    now = time.time()
    width = shutil.get_terminal_size((120, 24)).columns
    cols = [
        (
            inert_line(r.id[:8]),
            age(r.last_activity or r.mtime, now),
            size(r.size),
            inert_line(r.branch or "-"),
            inert_line(os.path.basename(r.project)) if show_project else None,
            r.title,
        )
        for r in rows
    ]
    branch_w = min(24, max([len(c[3]) for c in cols] + [6]))
    proj_w = min(20, max([len(c[4] or "") for c in cols] + [7])) if show_project else 0
    # The title gets at least 40% of the width: on a narrow terminal the branch and project
    # columns give way first (the wider one a character at a time), then the size.
    title_least = (width * 2 + 4) // 5
    with_size = True

    def head_w() -> int:
        return 16 + (8 if with_size else 0) + branch_w + 2 + (proj_w + 2 if show_project else 0)

    while width - head_w() < title_least and (branch_w > 6 or proj_w > 7):  # the headings' widths
        if branch_w > 6 and (branch_w >= proj_w or proj_w <= 7):
            branch_w -= 1
        else:
            proj_w -= 1
    with_size = width - head_w() >= title_least
    head = f"{'ID':8}  {'AGE':>4}  " + (f"{'SIZE':>6}  " if with_size else "") + f"{'BRANCH':{branch_w}}  "
    if show_project:
        head += f"{'PROJECT':{proj_w}}  "
    title_w = max(20, width - len(head))
    out = [head + "TITLE"]
    for row, depth, (sid, ago, sz, branch, proj, title) in zip(rows, depths, cols):
        line = f"{sid:8}  {ago:>4}  " + (f"{sz:>6}  " if with_size else "") + f"{clip(branch, branch_w):{branch_w}}  "
        if show_project:
            line += f"{clip(proj or '', proj_w):{proj_w}}  "
        text = inert_line(title)
        if depth:  # a fork, under the session it was forked from
            text = "  " * (depth - 1) + "└ fork: " + text
        if row.live:
            state = ""
            if row.state == "waiting":
                state = f" WAITING {age(row.state_since, now)}" if row.state_since else " WAITING"
            elif row.state:
                state = f" {row.state}"
            text = f"[LIVE{'' if row.mcp_count < 2 else f' MCP×{row.mcp_count}'}{state}] {text}"
        if row.archived:
            text = f"[archived] {text}"
        if row.stale is not None:
            text += f"  [stale: {inert_line(row.stale.reason or '')}]"
        elif row.hints:
            text += f"  [{', '.join(inert_line(h) for h in row.hints)}]"
        out.append(line + clip(text, title_w))
    return "\n".join(out) + "\n"


def projects_lines(listed: list) -> list[str]:
    """``projects``: one line a project, and a ``moved?`` line under a missing one that moved."""
    from ..sessions.rows import age

    now = time.time()
    out = []
    for p in listed:
        count = f"{p.sessions} {plural(p.sessions, 'session')}"
        active = f", last active {age(p.last_activity, now)} ago" if p.last_activity else ""
        kind = "registered" if p.registered else "found"
        missing = ""
        if p.missing:
            missing = "; missing: its folder is gone" + (
                " (`c3async projects --prune` forgets it)" if p.registered and not p.moved_to else ""
            )
        moved = f"; moved from {inert_line(', '.join(p.moved_from))}" if p.moved_from else ""
        out.append(f"{inert_line(p.path)}  {count}{active} ({kind}{missing}{moved})")
        if p.moved_to:
            out.append(
                f"  moved? {inert_line(p.path)} \u2192 {inert_line(p.moved_to)} ({p.moved_why}): "
                f"`c3async projects --move {inert_line(shlex.quote(p.path))} {inert_line(shlex.quote(p.moved_to))}` "
                "makes its sessions that folder's"
            )
    return out


def move_lines(done: Any, old: str, new: str) -> list[str]:
    """``projects --move``: what was moved (or undone), and the command that undoes it."""
    if done.undone:
        return [
            f"undone: the move of {inert_line(new)} to {inert_line(old)}; {done.removed} file"
            f"{'s' if done.removed != 1 else ''} it added taken out of Claude Code's folders"
            f"{f', {len(done.kept)} kept' if done.kept else ''} (marks, notes and tasks folded into "
            f"{inert_line(old)} stay there)"
        ]
    files = [f"{done.linked} {plural(done.linked, 'file')} linked"]
    files += [f"{done.copied} copied"] if done.copied else []
    files += [f"{done.present} there already"] if done.present else []
    return [
        f"moved {inert_line(done.old)} \u2192 {inert_line(done.new)}: {done.sessions} "
        f"{plural(done.sessions, 'session')} listed and resumed there ({', '.join(files)} in "
        "Claude Code's folders, nothing changed in place)"
        + (f"; marks, notes and tasks folded from {inert_line(', '.join(done.folded))}" if done.folded else ""),
        f"undo: c3async projects --move {inert_line(shlex.quote(done.new))} {inert_line(shlex.quote(done.old))}",
    ]


def archive_lines(st: Any) -> list[str]:
    """``keep --status``: the archive, then each session it holds."""
    mib = 1024 * 1024
    out = [
        f"archive {inert_line(st.path)}: {len(st.sessions)} {plural(len(st.sessions), 'session')}, "
        f"{st.files} files, {st.bytes / mib:.1f} MiB; {st.held_bytes / mib:.1f} MiB held only by the archive "
        "(Claude Code deleted the originals, or a copy on another device)"
    ]
    for k in st.sessions:
        only = f", {k.held_bytes / mib:.1f} MiB only here" if k.held_bytes else ""
        out.append(f"  {inert_line(k.id)}  {inert_line(k.folder)}  {k.files} files, {k.bytes / mib:.1f} MiB{only}")
    return out


def kept_lines(done: Any, several: bool) -> list[str]:
    """``keep --expiring``: each session given a keep mark, and whether the archive holds it."""
    out = []
    for k in done.kept:
        where = f"  {inert_line(os.path.basename(k.project.rstrip('/')) or k.project)}" if several else ""
        said = "kept" if k.preserved else f"marked keep, not preserved yet ({inert_line(k.error or '')})"
        out.append(f"{said} {k.id}{where}  expires in {k.expires_in_days}d")
    return out


def _marked(text: str, marks: list[tuple[int, int]], tty: bool) -> str:
    """A snippet with its hits shown: bold where styling is wanted, else between « and »; each
    piece is made inert first, so a hit's marker is never inside an escape."""
    on, off = ("\033[1m", "\033[0m") if tty else ("\u00ab", "\u00bb")
    out, pos = [], 0
    for a, b in marks:
        if a < pos:
            continue
        out += [inert(text[pos:a]), on, inert(text[a:b]), off]
        pos = b
    out.append(inert(text[pos:]))
    return "".join(out)


def search_lines(found: Any, styled: bool) -> list[str]:
    """``search``: how many sessions match, then each with its snippets and resume command."""
    shown = len(found.results)
    more = f", showing {shown}" if found.total > shown else ""
    out = [f"{found.total} {plural(found.total, 'session')} match{more} ({found.seconds:.2f} s)"]
    for r in found.results:
        where = os.path.basename(r.project) or r.project
        branch = f"  {inert_line(r.branch)}" if r.branch else ""
        title = inert_line(clip(r.title or "(untitled)", 80))
        named = [f for f in r.fields if f != "conversation"]  # the conversation's say their hits
        why = ([f"matched {', '.join(named)}"] if named else []) + (
            [f"{r.hits} {plural(r.hits, 'hit')}"] if r.hits else []
        )
        out.append(f"\n{title}  [{inert_line(where)}{branch}  {r.age}  {', '.join(why)}]")
        for sn in r.snippets:
            who = sn.role + (" (sub-agent)" if sn.sidechain else "")
            out.append(f"  {who}: {_marked(sn.text, sn.marks, styled)}")
        if r.also_in:  # copied into forks: said here, listed once
            out.append(
                f"  also in its fork{'s' if len(r.also_in) > 1 else ''} {', '.join(inert_line(f[:8]) for f in r.also_in)}"
            )
        out.append(f"  {inert_line(r.resume)}")
    return out


def files_lines(found: Any) -> list[str]:
    """``files``: how many sessions changed the path, then each: when, how often, with what, the
    paths (for a folder), and its resume command."""
    shown = len(found.sessions)
    more = f", showing {shown}" if found.total > shown else ""
    gone = " (no longer on disk)" if found.kind == "gone" else ""
    out = [
        f"{found.total} {plural(found.total, 'session')} changed {inert_line(found.paths[0])}{gone}{more} "
        f"({found.seconds:.2f} s)"
    ]
    for t in found.sessions:
        where = os.path.basename(t.project) or t.project
        title = inert_line(clip(t.title or "(untitled)", 80))
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(t.last_ts)) if t.last_ts else "?"
        sub = ", some by a sub-agent" if t.by_subagent else ""
        fork = f"fork of {inert_line(t.forked_from[:8])}  " if t.forked_from else ""
        out.append(
            f"\n{title}  [{inert_line(where)}  {t.id[:8]}  {fork}last {when} ({t.age} ago)  "
            f"{t.count} {plural(t.count, 'change')}: {', '.join(t.tools)}{sub}]"
        )
        if found.kind == "folder" or len(t.files) > 1:
            for c in t.files:
                out.append(f"  {c.count:>4}  {inert_line(c.path)}")
            if t.more_files:
                out.append(f"        ... {t.more_files} more {plural(t.more_files, 'file')}")
        out.append(f"  {inert_line(t.resume)}")
    return out


def indexed_line(done: Any, index_bytes: int) -> str:
    """``index``: what the pass read and what the index weighs."""
    return (
        f"{done.files} transcripts; indexed {done.read} ({done.bytes_read / 2**20:.1f} MiB, "
        f"{done.passages} passages) in {done.seconds:.2f} s; index {index_bytes / 2**20:.1f} MiB"
    )
