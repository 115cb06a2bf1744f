"""Stage 5: the per-project cache, ``.c3/cache/session_catalog.json``.

Keyed per transcript path on (size, mtime, device, inode): an unchanged file costs one stat, a
grown one only its new bytes, and a file replaced at the same path (another inode, even a longer
one that happens to extend the old content) is read again from scratch. It is only a cache:
written by atomic replace without a lock (the last writer wins, and losing it costs time, never
data), and anything that does not decode as our own format, version and entry shape (or is not
a regular file, or nests too deep, or is larger than MAX_BYTES) is thrown away and rebuilt,
never trusted.
"""

from __future__ import annotations

import time
from pathlib import Path

import msgspec

from ..ground import clock, safefs
from ..ground.errors import DECODE_ERRORS
from ..ground.jsondoc import write_atomic
from .read import Transcript

__all__ = ("FORMAT", "VERSION", "load", "save")

FORMAT = "c3async.session_catalog"
MAX_BYTES = 64 * 1024 * 1024  # far above 200 entries per project: a bigger file is not ours
RETRY_S = 30.0  # a write that failed is not tried again with the same bytes for this long
VERSION = 10  # bump whenever extraction changes what a record holds: old caches are then rebuilt


class _CacheFile(msgspec.Struct):
    format: str
    version: int
    entries: dict[str, Transcript]


_decoder = msgspec.json.Decoder(_CacheFile)
_encoder = msgspec.json.Encoder()


def load(path: Path) -> dict[str, Transcript]:
    try:
        # Never a link or a FIFO (which would block every listing): safefs refuses both.
        doc = _decoder.decode(safefs.read_bytes(path, MAX_BYTES + 1))
    except (OSError, *DECODE_ERRORS):
        return {}
    if doc.format != FORMAT or doc.version != VERSION:
        return {}
    # An entry whose times no read would have kept (``read._check_times``) is not ours: read again.
    low, high = clock.EARLIEST, clock.latest()
    return {
        path: e
        for path, e in doc.entries.items()
        if 0 <= e.mtime_ns <= clock.MAX_NS
        and (low < e.created_ts <= high if e.created_ts is not None else e.created_at is None)
        and (low < e.last_ts <= high if e.last_ts is not None else e.last_activity is None)
    }


# path -> (hash of the bytes that failed, when): a Hub over a full disk lists every second, and
# each listing would write (and remove) a temp file of the whole cache again.
_failed: dict[Path, tuple[int, float]] = {}


def save(path: Path, entries: dict[str, Transcript]) -> bool:
    """Write the cache; False (and no error) when the folder is not writable. The same bytes
    are not tried again for ``RETRY_S`` after a failure."""
    data = _encoder.encode(_CacheFile(FORMAT, VERSION, entries))
    key, now = hash(data), time.monotonic()
    failed = _failed.get(path)
    if failed is not None and failed[0] == key and now - failed[1] < RETRY_S:
        return False
    try:
        write_atomic(path, data, fsync=False)
    except OSError:
        _failed[path] = (key, now)
        return False
    _failed.pop(path, None)
    return True
