"""What one window's status line says: this session's mark or note, who waits for you in the
other windows, and the account's binding rate-limit window.

Claude Code runs the status-line command after each response of every window (and every
``refreshInterval`` seconds), so this has one fast path, for the common case: the rate limits as
last recorded, this session's mark as last read. It reads Claude Code's registry of running
processes (``live.registry_file``: no catalog, no listing), the tail of the rate-limit log and
the marks cache, with the standard library alone (``json``, ``os``, ``re``: no ``pathlib``,
``logging``, ``dataclasses`` or msgspec). What the common case does not need is imported only
when needed: a change of the rate limits to record (``ground.jsonl``), a ``/usage`` snapshot in
``.claude.json`` to read (only when that file moved since it was last read, its ``stat`` kept in
``$C3_HOME/cache/statusline_snapshot.json``; then only the snapshot is decoded, never the file
whole: it grows with every project), and a marks log read again (``stores.marks``).

The marks cache, ``$C3_HOME/cache/statusline_marks.json``, keeps per folder a window runs in
what this session's note or stale mark says, keyed on the ``lstat`` of the folder's ``.git``
and of both places its project's marks log can be (the project's ``.c3``, or its state under
``$C3_HOME`` when the folder cannot be written): while none of them moved, the marks are not
read. A project c3async was never used in has no marks log, and that is cached too. The cache
is ours and private, but read as untrusted (a value of the wrong kind is a miss); it is
rewritten whole (``safefs.write_atomic``), at most ``CACHE_FOLDERS`` folders of
``CACHE_SESSIONS`` sessions each. Every value read from Claude Code's JSON is range-checked;
what fails a check is left out, never shown.
"""

from __future__ import annotations

import json
import os
import re

from ..ground import peek
from ..ground.home import c3_folder, claude_json_file
from ..live import registry_file
from ..usage import ratelimits

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ("Facts", "Waiting", "facts", "record_limits")

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
MAX_PATH = 4096
CACHE = ("cache", "statusline_marks.json")  # below $C3_HOME
SNAPSHOT_READ = ("cache", "statusline_snapshot.json")  # the stat of the .claude.json last read
CACHE_BYTES = 1 << 20
CACHE_FOLDERS = 64
CACHE_SESSIONS = 64
TEXT_CHARS = 200  # of a note or a reason kept (the line shows 40)
MARKS = "session_marks.jsonl"


class Waiting:
    """A session waiting for you in another window."""

    __slots__ = ("label", "session_id", "since")

    def __init__(self, session_id: str, label: str, since: float | None) -> None:
        self.session_id = session_id
        self.label = label  # its project folder's name (or its name, when it has no cwd)
        self.since = since  # epoch seconds


class Facts:
    __slots__ = ("mark", "mark_text", "waiting", "windows")

    def __init__(self) -> None:
        self.mark: str | None = None  # "stale" or "note"
        self.mark_text: str | None = None  # the note's summary, or the stale mark's reason
        self.waiting: list[Waiting] = []  # the longest waiting first
        self.windows: dict[str, ratelimits.Sample] = {}  # current, by window

    def binding(self) -> ratelimits.Sample | None:
        """The window nearest its limit (a tie: the one that resets last)."""
        if not self.windows:
            return None
        return max(self.windows.values(), key=lambda s: (s.used, s.resets_at))


def session_id(payload: Any) -> str | None:
    value = payload.get("session_id") if isinstance(payload, dict) else None
    return value if isinstance(value, str) and _UUID.fullmatch(value) else None


def folder(payload: Any) -> str | None:
    """The project folder the window runs in: ``workspace.project_dir``, else ``cwd``."""
    if not isinstance(payload, dict):
        return None
    workspace = payload.get("workspace")
    for value in (workspace.get("project_dir") if isinstance(workspace, dict) else None, payload.get("cwd")):
        if isinstance(value, str) and 0 < len(value) <= MAX_PATH and "\0" not in value and os.path.isabs(value):
            return value
    return None


def record_limits(payload: Any, config: str, now: float) -> list[ratelimits.Sample]:
    """Record the windows this JSON (and a ``/usage`` snapshot in ``.claude.json``, when that
    file moved since it was last read: what it held then is in the log) report; returns them,
    recorded or not."""
    seen = ratelimits.from_status(payload, now)
    reported = {s.window for s in seen}
    snapshot = claude_json_file(config)
    stamp = _stamp(snapshot, follow=True)  # .claude.json is often a link to a dotfiles checkout
    moved = stamp is not None and stamp != _snapshot_read()
    if moved:  # the snapshot's windows that the JSON does not carry (per-model weeklies)
        seen += [s for s in ratelimits.from_snapshot(snapshot, now) if s.window not in reported]
    try:
        ratelimits.record(seen, now)
    except OSError:  # a full disk, a log that is a link or a FIFO: the numbers are still shown
        return seen
    if moved:
        _keep_json(SNAPSHOT_READ, stamp)
    return seen


def _snapshot_read() -> Any:
    """The stamp of the ``.claude.json`` last read for its snapshot (None: none kept)."""
    try:
        return json.loads(peek.read_below(1024, c3_folder(), *SNAPSHOT_READ))
    except (OSError, ValueError, RecursionError):
        return None


def facts(payload: Any, config: str, now: float) -> Facts:
    """Everything the line shows, for the window whose JSON is ``payload`` (``config``: Claude
    Code's config folder); a part that cannot be read is left empty (the line never fails for it)."""
    out = Facts()
    seen = record_limits(payload, config, now)
    known = ratelimits.current(now)  # what every window recorded: this one's numbers may be older
    out.windows = {
        **known,
        **{s.window: s for s in seen if s.resets_at > now and not ratelimits.stale(s, known.get(s.window))},
    }
    sid = session_id(payload)
    out.waiting = _waiting(os.path.join(config, "sessions"), sid)
    where = folder(payload)
    if sid and where:
        out.mark, out.mark_text = _mark(where, sid)
    return out


def _waiting(registry: str, me: str | None) -> list[Waiting]:
    found = []
    with registry_file.listed(registry) as listed:
        if listed is None:
            return []
        dfd, _, names = listed
        for name in names:
            reg = registry_file.read(dfd, registry, name)
            sid = reg.session_id if reg is not None else None
            if reg is None or sid is None or sid == me or reg.state != "waiting":
                continue
            where = os.path.join(registry, name)
            if not registry_file.holds(reg, int(name[:-5]), where):
                continue
            cwd = reg.folder
            label = os.path.basename(cwd.rstrip("/")) if cwd else registry_file.clean(reg.name)
            found.append(Waiting(sid, label or sid[:8], reg.since(where)))
    found.sort(key=lambda w: (w.since is None, w.since or 0.0, w.label))
    return found


# ---------------------------------------------------------------- this session's mark


def _mark(where: str, sid: str) -> tuple[str | None, str | None]:
    """This session's note (else its stale mark) and its text: from the cache while nothing it
    rests on moved, else from its project's marks log (the cache then written again)."""
    cache = _read_cache()
    found = _cached(cache.get(where), where, sid)
    if found is not None:
        return found
    git = _stamp(os.path.join(where, ".git"))
    logs = _marks_logs(where)
    stamps = [_stamp(p) for p in logs]  # before the read: a mark written meanwhile is a miss next time
    mark = _read_mark(where, sid) if any(s is not None for s in stamps) else (None, None)
    _keep(cache, where, sid, git, list(zip(logs, stamps, strict=True)), mark)
    return mark


def _stamp(path: str, follow: bool = False) -> list[int] | None:
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except (OSError, ValueError):
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode]


def _read_cache() -> dict[str, Any]:
    try:
        cache = json.loads(peek.read_below(CACHE_BYTES, c3_folder(), *CACHE))
    except (OSError, ValueError, RecursionError):  # none yet, a link, too large, garbage
        return {}
    folders = cache.get("folders") if isinstance(cache, dict) and cache.get("v") == 1 else None
    return folders if isinstance(folders, dict) else {}


def _cached(entry: Any, where: str, sid: str) -> tuple[str | None, str | None] | None:
    """The mark the cache holds for ``sid`` in ``where`` (``(None, None)``: none), or None when
    it holds none that is still true."""
    if not isinstance(entry, dict) or entry.get("git") != _stamp(os.path.join(where, ".git")):
        return None
    logs = entry.get("logs")
    if not isinstance(logs, list) or not logs:
        return None
    for log in logs:
        if not (isinstance(log, list) and len(log) == 2 and isinstance(log[0], str)) or _stamp(log[0]) != log[1]:
            return None
    if all(log[1] is None for log in logs):
        return None, None  # no marks log: no mark, whoever asks
    marks = entry.get("marks")
    if not isinstance(marks, dict) or sid not in marks:
        return None
    value = marks[sid]
    if value is None:
        return None, None
    if (
        isinstance(value, list)
        and len(value) == 2
        and value[0] in ("note", "stale")
        and (value[1] is None or (isinstance(value[1], str) and len(value[1]) <= TEXT_CHARS))
    ):
        return value[0], value[1]
    return None


def _marks_logs(where: str) -> list[str]:
    """Where the marks log of the project of ``where`` can be: its ``.c3``, or its state kept
    under ``$C3_HOME`` when the folder cannot be written."""
    from ..ground.paths import state_slug
    from ..ground.project import resolve

    root = resolve(where).root
    return [os.path.join(root, ".c3", MARKS), os.path.join(c3_folder(), "state", state_slug(root), MARKS)]


def _read_mark(where: str, sid: str) -> tuple[str | None, str | None]:
    from ..ground.project import resolve
    from ..stores.marks import MarkBook

    try:
        state = MarkBook(resolve(where)).refresh().get(sid)
    except OSError:  # a marks log that is a link, or unreadable: no mark shown
        return None, None
    if state is None:
        return None, None
    if state.note is not None:
        return "note", _cut(state.note.summary or state.note.next_steps)
    if state.stale is not None:
        return "stale", _cut(state.stale.reason)
    return None, None


def _cut(text: str | None) -> str | None:
    return text[:TEXT_CHARS] if text else None


def _keep(
    cache: dict[str, Any],
    where: str,
    sid: str,
    git: list[int] | None,
    logs: list[tuple[str, list[int] | None]],
    mark: tuple[str | None, str | None],
) -> None:
    """Write the cache again with this mark (best effort: a cache not written is read again)."""
    entry = cache.pop(where, None)
    same = isinstance(entry, dict) and entry.get("git") == git and entry.get("logs") == [list(x) for x in logs]
    marks = entry.get("marks") if same and isinstance(entry, dict) else None
    marks = {k: v for k, v in marks.items() if k != sid} if isinstance(marks, dict) else {}
    marks[sid] = list(mark) if mark[0] else None
    cache[where] = {"git": git, "logs": logs, "marks": dict(list(marks.items())[-CACHE_SESSIONS:])}
    kept = dict(list(cache.items())[-CACHE_FOLDERS:])
    _keep_json(CACHE, {"v": 1, "folders": kept})


def _keep_json(where: tuple[str, ...], value: Any) -> None:
    """Write a file of ours below ``$C3_HOME`` again (best effort: one not written is a miss)."""
    from ..ground.home import c3_home
    from ..ground.safefs import write_atomic

    try:
        write_atomic(c3_home().joinpath(*where), json.dumps(value).encode(), fsync=False)
    except OSError:
        pass
