"""Which session is a fork of which.

Claude Code forks a session two ways, both copying the parent's lines with their uuids and
timestamps into a new transcript: ``/branch`` writes ``forkedFrom {sessionId, messageUuid}`` on
the copies (the parent is named), ``claude --resume ID --fork-session`` writes nothing that
names the parent. The second kind is known by its first conversation line, whose uuid it shares
with the parent (the catalog keeps each transcript's ``first_uuid`` from its head window, so no
file is read whole). Among the sessions sharing one, the original is the one that started
first: a fork writes lines of its own (a queue operation, a file-history snapshot) before the
copies, at the fork's time (``head_ts``), later than anything the original wrote before its
first line. A fork of a fork shares the same first uuid, so implicit forks are put under the
root of their group; a ``/branch`` names its real parent.

What a ``/branch`` names is a fact and the timing a guess, so the fact wins: a session that
names its parent is never the original of its group, nor anyone's guessed parent (a /branch
made right after the first prompt copies lines timed before its parent's own first snapshot),
and a loop is broken at a guessed link first.

A fork's copied lines hold its parent's prompts, so its first prompt and titles are its parent's:
``own_first_prompt`` finds the first prompt the fork itself was given, read back from the end
(the copies come first, the fork's own lines after them), in bounded windows.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from ..ground.peek import pread_all
from ..ground.safefs import open_regular
from .extract import HEAD as HEAD_MODE
from .extract import _decode, classify_prompt, prompt_title, scan
from .read import HEAD, TAILS, Transcript

__all__ = ("ancestors", "fork_parents", "own_first_prompt")

_USER = b'"type":"user"'


def _started(item: tuple[str, Transcript]) -> tuple[str, str, int, str]:
    sid, rec = item
    first = rec.created_at or ""
    return (max(rec.head_ts or "", first), first, rec.mtime_ns, sid)


def fork_parents(records: Iterable[tuple[str, Transcript]]) -> dict[str, str]:
    """fork id -> parent id, for the forks among ``records`` (session id, catalog record) whose
    parent is among them too."""
    listed = list(records)
    ids = {sid for sid, _ in listed}
    named: dict[str, str] = {}  # what /branch wrote
    groups: dict[str, list[tuple[str, Transcript]]] = {}
    for sid, rec in listed:
        if rec.forked_from and rec.forked_from != sid and rec.forked_from in ids:
            named[sid] = rec.forked_from
        if rec.first_uuid:
            groups.setdefault(rec.first_uuid, []).append((sid, rec))
    guessed: dict[str, str] = {}
    for group in groups.values():
        unnamed = sorted((item for item in group if item[0] not in named), key=_started)
        if len(group) < 2 or not unnamed:
            continue
        root = unnamed[0][0]
        for sid, _ in unnamed[1:]:
            guessed[sid] = root
    parents = {**guessed, **named}
    # A mistaken pair must never make a loop (a /branch naming its own fork): break each at a
    # guessed link if it has one, else at the link that closes it. Each session is walked once
    # (one parent each: at most one loop above it), so a long line of forks costs its length.
    done: set[str] = set()
    for start in list(parents):
        path: list[str] = []
        on_path: set[str] = set()
        at: str | None = start
        while at is not None and at not in done and at not in on_path:
            path.append(at)
            on_path.add(at)
            at = parents.get(at)
        if at is not None and at in on_path:
            loop = path[path.index(at) :]
            del parents[next((sid for sid in loop if sid in guessed), loop[-1])]
        done.update(path)
    return parents


def ancestors(parents: dict[str, str], sid: str) -> list[str]:
    """The sessions ``sid`` was forked from, nearest first (``parents`` holds no loop)."""
    out = []
    at = parents.get(sid)
    while at is not None and at not in out:
        out.append(at)
        at = parents.get(at)
    return out


def _copied(line, fork_time: str | None) -> bool:
    """A line the fork copied from its parent: /branch names the parent on it; a
    ``--fork-session`` copy keeps the parent's time, earlier than the fork's own first lines."""
    if line.forkedFrom is not None:
        return True
    ts = line.timestamp if isinstance(line.timestamp, str) else None
    return fork_time is not None and ts is not None and ts < fork_time


def own_first_prompt(path: str) -> str | None:
    """The first prompt of the fork at ``path`` that is its own (not copied from its parent), as a
    one-line title; None when it has none yet or the file cannot be read. Read back from the end,
    256 KiB, 1 MiB, then 4 MiB: when no copied line is that near the end, the earliest own prompt
    in the widest window stands for it."""
    try:
        fd, st = open_regular(path)
    except OSError:
        return None
    try:
        head = scan(pread_all(fd, 0, HEAD), 0, from_start=True, mode=HEAD_MODE, at_eof=st.st_size <= HEAD)
        size = st.st_size
        for window in TAILS:
            start = max(0, size - window)
            buf = pread_all(fd, start, size - start)
            found, ended = _own_in(buf, from_start=start == 0, fork_time=head.head_ts)
            if ended or start == 0 or window == TAILS[-1]:
                return prompt_title(found) if found else None
    except OSError:
        return None
    finally:
        os.close(fd)
    return None


def _own_in(buf: bytes, *, from_start: bool, fork_time: str | None) -> tuple[str | None, bool]:
    """(the first own prompt after the last copied line of ``buf``, whether a copied line was
    seen). Only user lines are decoded; the window's cut first line and unterminated last line
    are skipped."""
    begin = 0 if from_start else buf.find(b"\n") + 1
    end = buf.rfind(b"\n")
    found: str | None = None
    copies = False
    pos = begin
    while 0 <= pos < end:
        stop = buf.find(b"\n", pos, end + 1)
        raw = buf[pos:stop]
        pos = stop + 1
        if _USER not in raw:
            continue
        line = _decode(raw)
        if line is None or line.type != "user":
            continue
        if _copied(line, fork_time):
            copies, found = True, None
            continue
        prompt = classify_prompt(line)
        if found is None and prompt is not None and prompt[0] == "prompt":
            found = prompt[1]
    return found, copies
