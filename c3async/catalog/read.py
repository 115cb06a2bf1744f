"""Stage 3: read a transcript's head and tail windows and turn them into a ``Transcript``.

Head 64 KiB, widened to 512 KiB when it holds no real first prompt (a pasted prompt pushed it
out); tail 256 KiB, then 1 MiB, then 4 MiB, until a custom title (which outranks every ai-title)
and a last prompt turn up. A long first prompt (over PROMPT_CAP characters, or cut by the head)
widens the head and the tail too (512 KiB first), so a file up to 1 MiB is then read whole.
Where the windows would meet, the file is small enough to read whole. So memory is bounded by
the windows, whatever the size of the file. A file that grew since it was cached (transcripts
are append-only) costs only its new bytes.

Every window counts the prompts in it and knows its last one, so the last prompt is the file's
last in what was read (the head's own, when the tails hold none), and ``user_turns`` counts the
prompts in every byte read (exact when that was the whole file, ``user_turns_exact``).

Custom and ai titles are kept to PROMPT_CAP characters, as prompts are (``*_truncated`` says
one was cut): a row, and the cache, stay small whatever a title line holds. ``whole_titles``
reads them uncut, for the one session a detail shows.

Only a regular file is read: it is opened with ``O_NONBLOCK | O_NOFOLLOW`` and the descriptor is
``fstat``-ed, so a FIFO, a device, a directory or a symlink put in a transcript's place (even
between the listing's stat and the open) is refused at once instead of blocking or being
followed out of the folder.
"""

from __future__ import annotations

import os

import msgspec

from ..ground import clock
from ..ground.safefs import open_regular, pread_all
from .extract import HEAD as HEAD_MODE
from .extract import TAIL, TITLES, WHOLE, Facts, cap, prompt_title, scan

__all__ = ("HEAD", "HEAD_WIDE", "TAILS", "TAILS_WIDE", "Transcript", "read_transcript")

HEAD = 64 * 1024
HEAD_WIDE = 512 * 1024
TAILS = (256 * 1024, 1024 * 1024, 4 * 1024 * 1024)
TAILS_WIDE = (512 * 1024, 1024 * 1024, 4 * 1024 * 1024)  # after a widened head


class Transcript(msgspec.Struct, omit_defaults=True):
    """What the catalog knows of one transcript file: the cache entry and the source of a row."""

    size: int
    mtime_ns: int
    ino: int = 0  # the file's identity when read: a file replaced at the same path is another file
    dev: int = 0
    skip: str | None = None  # why this file is not a session row (sidechain, metadata-only...)
    cwd: str | None = None
    entrypoint: str | None = None
    custom_title: str | None = None  # cut to PROMPT_CAP characters (unless read ``whole_titles``)
    custom_title_truncated: bool = False
    ai_title: str | None = None
    ai_title_truncated: bool = False
    first_prompt: str | None = None
    first_prompt_truncated: bool = False
    first_command: str | None = None
    last_prompt: str | None = None
    last_prompt_truncated: bool = False
    branch: str | None = None
    created_at: str | None = None
    last_activity: str | None = None
    created_ts: float | None = None  # the two above in epoch seconds, parsed once when read
    last_ts: float | None = None
    user_turns: int = 0
    user_turns_exact: bool = True  # False when the middle of a big file was never read
    began_with_clear: bool = False
    clean_end: int = 0  # where an append-only reader resumes
    bytes_read: int = 0  # by the read that produced this record (not cumulative)
    first_uuid: str | None = None  # of the first conversation line (a fork shares its parent's)
    forked_from: str | None = None  # the parent /branch wrote on the copied lines
    head_ts: str | None = None  # the latest time before the first conversation line (see ``sessions.forks``)
    handoff_from: str | None = None  # the session whose plan this one implements (a plan-mode handoff)
    account: str | None = None  # the login it ran under (the accountUuid of a session-owner line)

    def title(self) -> tuple[str | None, str | None]:
        """(title, where it came from): the last custom-title, else the last ai-title, else the
        first real prompt (else the last one, when the head held none), else a command."""
        if self.custom_title:
            return self.custom_title, "custom-title"
        if self.ai_title:
            return self.ai_title, "ai-title"
        if self.first_prompt:
            return prompt_title(self.first_prompt), "first-prompt"
        if self.last_prompt:
            return prompt_title(self.last_prompt), "last-prompt"
        return (self.first_command, "command") if self.first_command else (None, None)

    def title_truncated(self) -> bool:
        """Whether ``title()`` is a custom or ai title cut to PROMPT_CAP characters."""
        if self.custom_title:
            return self.custom_title_truncated
        return bool(self.ai_title) and self.ai_title_truncated

    def set_titles(self, custom: str | None, ai: str | None, *, whole: bool = False) -> None:
        """Take the titles a read found (None: none found, the old one stays), cut unless ``whole``."""
        if custom:
            self.custom_title, self.custom_title_truncated = (custom, False) if whole else cap(custom)
        if ai:
            self.ai_title, self.ai_title_truncated = (ai, False) if whole else cap(ai)


def _first(regions: list[Facts], field: str):
    for facts in regions:
        value = getattr(facts, field)
        if value:
            return value
    return None


def _last(regions: list[Facts], field: str):
    for facts in reversed(regions):
        value = getattr(facts, field)
        if value:
            return value
    return None


def _merge(
    size: int, mtime_ns: int, regions: list[Facts], whole: bool, bytes_read: int, whole_titles: bool = False
) -> Transcript:
    """Fold the facts of disjoint windows, given in file order, into one record."""
    head = regions[0]
    # Only the head knows the first prompt, unless the whole file was read.
    first_with_prompt = head if head.first_prompt else None
    last_with_prompt = next((r for r in reversed(regions) if r.last_prompt), None)
    rec = Transcript(
        size=size,
        mtime_ns=mtime_ns,
        cwd=_first(regions, "cwd"),
        entrypoint=_first(regions, "entrypoint"),
        first_command=_first(regions, "first_command"),
        branch=_last(regions, "last_branch") or _first(regions, "first_branch"),
        created_at=_first(regions, "first_ts"),
        last_activity=_last(regions, "last_ts"),
        user_turns=sum(r.prompts for r in regions),
        user_turns_exact=whole,
        began_with_clear=head.began_with_clear,
        clean_end=regions[-1].clean_end,
        bytes_read=bytes_read,
        first_uuid=head.first_uuid,
        forked_from=head.forked_from,
        head_ts=head.head_ts,
        handoff_from=head.handoff_from,
        account=_last(regions, "account"),
    )
    rec.set_titles(_last(regions, "custom_title"), _last(regions, "ai_title"), whole=whole_titles)
    if first_with_prompt is not None:
        rec.first_prompt = first_with_prompt.first_prompt
        rec.first_prompt_truncated = first_with_prompt.first_prompt_truncated
    if last_with_prompt is not None:
        rec.last_prompt = last_with_prompt.last_prompt
        rec.last_prompt_truncated = last_with_prompt.last_prompt_truncated
    else:
        rec.last_prompt = _last(regions, "last_prompt_meta")
    if not any(r.conversation for r in regions):
        rec.skip = "metadata-only"
    elif head.first_is_sidechain:
        rec.skip = "sidechain"
    return rec


def read_transcript(
    path: str, size: int, mtime_ns: int, cached: Transcript | None = None, *, whole_titles: bool = False
) -> Transcript:
    """Read one transcript, reusing ``cached`` when the same file (same device and inode) only
    grew since. The record holds what was read: the size, mtime and identity of the open file,
    which may differ from ``size`` and ``mtime_ns`` (the listing's stat) when the file changed
    in between. ``whole_titles``: titles uncut (a cold read; such a record is not for the cache).

    Raises OSError (NotRegularFile for a FIFO, a directory, a symlink...) when the file cannot be
    opened or read; the caller decides what that means.
    """
    fd, st = open_regular(path)
    try:
        cached = None if whole_titles else _same_file(cached, st)
        rec = _read_fd(fd, st.st_size, clock.file_ns(st.st_mtime_ns, path), cached, whole_titles)
    finally:
        os.close(fd)
    rec.ino, rec.dev = st.st_ino, st.st_dev
    _check_times(rec, path)
    return rec


def _check_times(rec: Transcript, path: str) -> None:
    """The record's times in epoch seconds; a time out of range (``ground.clock``) is dropped."""
    what = "a transcript's timestamp"
    rec.created_ts = clock.event_iso(rec.created_at, what, path)
    rec.last_ts = clock.event_iso(rec.last_activity, what, path)
    if rec.created_ts is None:
        rec.created_at = None
    if rec.last_ts is None:
        rec.last_activity = None
    if rec.head_ts is not None and clock.event_iso(rec.head_ts, what, path) is None:
        rec.head_ts = None


def _same_file(cached: Transcript | None, st: os.stat_result) -> Transcript | None:
    """``cached`` when it was read from this very file (a file replaced at the same path, even
    by a longer one that happens to extend it, is read from scratch)."""
    if cached is None or cached.ino != st.st_ino or cached.dev != st.st_dev:
        return None
    return cached


def _read_fd(fd: int, size: int, mtime_ns: int, cached: Transcript | None, whole_titles: bool) -> Transcript:
    if size == 0:
        return Transcript(size=0, mtime_ns=mtime_ns, skip="empty")
    if cached is not None and cached.skip is None and cached.size < size and cached.clean_end > 0:
        grown = _read_growth(fd, size, mtime_ns, cached)
        if grown is not None:
            return grown
    return _read_cold(fd, size, mtime_ns, whole_titles)


def _read_whole(fd: int, size: int, mtime_ns: int, whole_titles: bool) -> Transcript:
    buf = pread_all(fd, 0, size)
    return _merge(size, mtime_ns, [scan(buf, 0, from_start=True, mode=WHOLE)], True, len(buf), whole_titles)


def _read_cold(fd: int, size: int, mtime_ns: int, whole_titles: bool) -> Transcript:
    tails = TAILS
    if size <= HEAD + tails[0]:
        return _read_whole(fd, size, mtime_ns, whole_titles)
    head_buf = pread_all(fd, 0, HEAD)
    head = scan(head_buf, 0, from_start=True, mode=HEAD_MODE, at_eof=False)
    read = len(head_buf)
    if head.first_prompt is None or head.first_prompt_truncated:
        # A long first prompt (a paste, a plan handoff) that may have pushed the rest out: the
        # tail widens with the head, so a file up to 1 MiB is read whole (its last prompt and
        # its count of prompts exact, wherever they stand).
        tails = TAILS_WIDE
        if size <= HEAD_WIDE + tails[0]:
            return _read_whole(fd, size, mtime_ns, whole_titles)
        head_buf = pread_all(fd, 0, HEAD_WIDE)
        head = scan(head_buf, 0, from_start=True, mode=HEAD_MODE, at_eof=False)
        read += len(head_buf)
    # Where the head's last whole line ends: a tail that reaches back to it starts on a line
    # boundary, so the line the head's edge cut is read whole there (none is lost at the seam).
    head_end = head.clean_end
    tail_start = size - tails[0]
    buf = pread_all(fd, tail_start, tails[0])
    read += len(buf)
    regions = [scan(buf, tail_start, from_start=False, mode=TAIL)]  # newest region first
    seam = tail_start + buf.find(b"\n") + 1  # where the scanned tail's first whole line starts
    for window in tails[1:]:
        # A custom-title outranks any ai-title, and a /rename mid-session (no clean exit to
        # re-append it) can sit far back: widen for one even when an ai-title was found.
        need_title = not any(t.custom_title for t in regions)
        need_prompt = not any(t.last_prompt for t in regions)  # one long turn of tool output
        if not (need_title or need_prompt) or seam <= head_end:
            break
        # Widen: read back to the previous region's first whole line (or to the end of the
        # head, when the windows meet), so no line is lost or read twice; look only for what
        # is still missing.
        new_start = max(size - window, head_end)
        buf = pread_all(fd, new_start, seam - new_start)
        read += len(buf)
        at_head = new_start == head_end
        regions.append(scan(buf, new_start, from_start=at_head, mode=TAIL if need_prompt else TITLES))
        seam = new_start if at_head else new_start + buf.find(b"\n") + 1
    regions = [head, *regions[:0:-1], regions[0]]
    return _merge(size, mtime_ns, regions, False, read, whole_titles)  # clean_end: the newest region's


def _read_growth(fd: int, size: int, mtime_ns: int, cached: Transcript) -> Transcript | None:
    """Scan only what was appended since ``cached``; None when a cold read is needed instead."""
    start = cached.clean_end
    if size - start > TAILS[-1]:
        return None
    if not (cached.first_prompt or cached.first_command):
        return None  # the first user line may be among the new bytes: how it began is unknown
    buf = pread_all(fd, start - 1, size - start + 1)
    if not buf.startswith(b"\n"):
        return None  # the file was rewritten, not appended to
    new = scan(buf[1:], start, from_start=True, mode=WHOLE)
    rec = msgspec.structs.replace(cached, size=size, mtime_ns=mtime_ns, bytes_read=len(buf))
    rec.set_titles(new.custom_title, new.ai_title)
    if new.last_prompt:
        rec.last_prompt, rec.last_prompt_truncated = new.last_prompt, new.last_prompt_truncated
    elif new.last_prompt_meta and not rec.last_prompt:
        rec.last_prompt = new.last_prompt_meta
    if not rec.first_prompt and new.first_prompt:
        rec.first_prompt, rec.first_prompt_truncated = new.first_prompt, new.first_prompt_truncated
        rec.handoff_from = new.handoff_from
    rec.first_command = rec.first_command or new.first_command
    rec.branch = new.last_branch or new.first_branch or rec.branch
    rec.last_activity = new.last_ts or rec.last_activity
    rec.created_at = rec.created_at or new.first_ts
    rec.cwd = rec.cwd or new.cwd
    rec.first_uuid = rec.first_uuid or new.first_uuid
    rec.account = new.account or rec.account
    rec.user_turns += new.prompts
    rec.clean_end = new.clean_end if new.clean_end > start else start
    return rec
