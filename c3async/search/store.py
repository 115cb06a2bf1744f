"""The full-text index on disk: SQLite FTS5, one index per user under ``$C3_HOME/search/``.

The index is ``SHARDS`` database files, each a whole index of the transcripts whose path hashes
to it (its ``files``, their ``passages`` and the ``fts`` table over them, and the ``edits``: per
transcript and path its edit and write calls, keyed by path so a file or a folder is a range), so a first build
writes every shard at once from its own process: FTS5 tokenizes inside SQLite's single writer,
and one writer keeps to one core (measured here: ~55 MB/s of text). A query asks every shard
and merges. Each file is WAL: any number of readers (the MCP servers, the Hub, the CLI) query
while the one updater (under ``index.lock``) writes.

The FTS table is contentless: it holds the inverted index only, and a passage's text is read
back from its transcript line (``passages`` keeps each line's offset and length), so the index
stays a fraction of the transcripts' size. Each distinct text is indexed once (``blobs``, by
its BLAKE2b hash): the same file read, the same test output, the same pasted log in fifty
sessions is one FTS row that fifty passages point to. Contentless rows cannot be deleted one by
one here (that needs SQLite 3.43): the passages of a replaced or deleted transcript are
deleted, index entries no passage points to are dead and never joined, and a shard whose dead
passages outnumber a third of its live ones is emptied (FTS5's ``delete-all``) and indexed
again.

A file that is not ours (another application's database, a corrupt one, an older schema) is
never trusted: it is put aside (``.index-K.db.aside``, for whoever wants to look, until the next
run removes it) and rebuilt. Only SQLite saying so makes a file damaged (``DamagedIndex``): a
full disk (``DiskFull``), a lock held too long or a failing disk (``IndexUnavailable``) leave a
healthy shard as it is. A symlink, FIFO or device in its place is refused (``UnsafeState``), as
everywhere in our state.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import zlib
from functools import cache
from pathlib import Path

import msgspec

from ..ground import disk, memo, safefs
from ..ground.errors import C3Error, DamagedIndex, IndexUnavailable, NoFTS5, UnsafeState
from ..ground.home import c3_home

__all__ = (
    "SHARDS",
    "FileRow",
    "aside_path",
    "check_fts5",
    "clear_asides",
    "connect",
    "failure",
    "files",
    "index_dir",
    "remove",
    "shard_of",
    "shard_path",
)

SHARDS = 4
SCHEMA_VERSION = 5  # 3: files.searched; 4: files.agent_name, edits; 5: edits the tool refused left out
APPLICATION_ID = 0x63337378  # "c3sx": ours, and this file format
BUSY_MS = 5000

_SCHEMA = """
CREATE TABLE files(
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    folder TEXT NOT NULL,
    session TEXT,
    sidechain INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL DEFAULT 0,
    offset INTEGER NOT NULL,
    tail BLOB NOT NULL,
    skipped INTEGER NOT NULL DEFAULT 0,
    cwd TEXT,
    custom_title TEXT,
    ai_title TEXT,
    first_prompt TEXT,
    last_ts INTEGER,
    last_branch TEXT,
    searched INTEGER NOT NULL DEFAULT 0,
    agent_name TEXT
);
CREATE TABLE blobs(id INTEGER PRIMARY KEY, hash BLOB NOT NULL UNIQUE);
CREATE TABLE passages(
    id INTEGER PRIMARY KEY,
    file INTEGER NOT NULL,
    blob INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    length INTEGER NOT NULL,
    kind INTEGER NOT NULL,
    sidechain INTEGER NOT NULL,
    ts INTEGER,
    branch TEXT
);
CREATE INDEX passages_file ON passages(file);
CREATE INDEX passages_blob ON passages(blob);
CREATE TABLE edits(
    file INTEGER NOT NULL,
    path TEXT NOT NULL,
    count INTEGER NOT NULL,
    tools INTEGER NOT NULL,
    first_ts INTEGER,
    last_ts INTEGER,
    PRIMARY KEY (path, file)
) WITHOUT ROWID;
CREATE INDEX edits_file ON edits(file);
CREATE VIRTUAL TABLE fts USING fts5(
    talk, tool, content='', detail=full, tokenize='unicode61 remove_diacritics 2'
);
CREATE TABLE meta(key TEXT PRIMARY KEY, value);
INSERT INTO meta VALUES ('dead', 0);
"""


# SQLite's primary result codes that mean the file itself is bad (SQLITE_CORRUPT, SQLITE_NOTADB)
_DAMAGED = (11, 26)
_IOERR = 10
NEARLY_FULL = 1 << 20  # an I/O error with less room than this is taken for a full disk


def failure(path: Path, exc: sqlite3.Error, doing: str = "read") -> C3Error:
    """What a SQLite error on the shard ``path`` means: DamagedIndex only when SQLite says the
    file is damaged or not a database; a full disk (SQLITE_FULL, or an I/O error with next to no
    room left: SQLite reports a shared-memory file it cannot grow so) a ``DiskFull``; anything
    else IndexUnavailable."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary in _DAMAGED:
        return DamagedIndex(f"the search index {path} is damaged: {exc}")
    if disk.is_full(exc) or (primary == _IOERR and (disk.free_bytes(path.parent) or 0) < NEARLY_FULL):
        return disk.full(path.parent)
    return IndexUnavailable(f"the search index {path} could not be {doing}: {exc}")


def check_fts5() -> None:
    """Full-text search needs SQLite's FTS5, which most Python builds have; say so when not."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
    except sqlite3.Error as exc:
        raise NoFTS5(
            f"full-text search needs SQLite's FTS5 extension, which this Python's sqlite3 "
            f"(SQLite {sqlite3.sqlite_version}) lacks ({exc}); use a Python built with it "
            "(python.org, Debian and Homebrew builds have it)"
        ) from None
    finally:
        conn.close()  # Python 3.13 warns of a connection left to the garbage collector


def index_dir() -> Path:
    return c3_home() / "search"


def shard_path(k: int) -> Path:
    return index_dir() / f"index-{k}.db"


def shard_of(path: str) -> int:
    return zlib.crc32(path.encode("utf-8", "surrogateescape")) % SHARDS


def _check_names(path: Path) -> bool:
    """Is the shard there? Refuses (UnsafeState) a link, FIFO or device at its name or at its
    WAL's: SQLite opens names, so they are checked before it does."""
    exists = False
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            st = os.lstat(name)
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeState(name, safefs._kind(st.st_mode))
        exists = exists or name == path
    return exists


def connect(k: int, *, create: bool) -> sqlite3.Connection | None:
    """Shard ``k``, checked to be ours; None when it does not exist and ``create`` is false.
    Raises DamagedIndex for a file that is not an index of ours (the caller may ``remove`` it)."""
    path = shard_path(k)
    safefs.ensure_dir(path.parent)  # every folder on the way: real folders, no links
    if not _check_names(path) and not create:
        return None
    try:
        conn = sqlite3.connect(path, timeout=BUSY_MS / 1000, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise failure(path, exc, "opened") from None
    try:
        # Nothing in a schema runs a function of ours or the application's; a trigger or a view
        # someone planted is refused below before any statement could fire it.
        conn.execute("PRAGMA trusted_schema=OFF")
        conn.execute(f"PRAGMA busy_timeout={BUSY_MS}")
        app, version = (
            conn.execute("PRAGMA application_id").fetchone()[0],
            conn.execute("PRAGMA user_version").fetchone()[0],
        )
        if app == APPLICATION_ID and version == SCHEMA_VERSION:
            if _schema(conn) != _our_schema():
                raise DamagedIndex(f"{path} has our format's id but not exactly our schema (something was added)")
            return conn
        if (
            app == 0
            and version == 0
            and create
            and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
        ):
            _create(conn)
            return conn
        raise DamagedIndex(f"{path} is not a c3async search index of this version")
    except sqlite3.Error as exc:
        conn.close()
        raise failure(path, exc, "opened") from None
    except DamagedIndex:
        conn.close()
        raise


def _schema(conn: sqlite3.Connection) -> list[tuple]:
    """Every table, index, trigger and view of the database, with its SQL."""
    return conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name").fetchall()


@cache
def _our_schema() -> list[tuple]:
    """What ``_create`` makes (FTS5's shadow tables included), read from a database in memory."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        _create(conn)
        return _schema(conn)
    finally:
        conn.close()


def _create(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def aside_path(k: int) -> Path:
    path = shard_path(k)
    return path.with_name(f".{path.name}.aside")


_put_aside: set[Path] = memo.kept(set())  # copies this process put aside: they stay for its run


def remove(k: int, *, aside: bool = True) -> None:
    """Take shard ``k`` (a damaged or foreign file in our folder) away so the next pass builds it
    anew: put aside as ``.index-K.db.aside`` (replacing an older one), or deleted (``aside``
    false: a rebuild asked for); held under the index lock."""
    path = shard_path(k)
    for name in (Path(f"{path}-wal"), Path(f"{path}-shm"), *(() if aside else (path,))):
        try:
            safefs.unlink(name)
        except FileNotFoundError:
            pass
    if not aside:
        return
    try:
        safefs.rename(path, aside_path(k))
        _put_aside.add(aside_path(k))
    except FileNotFoundError:
        pass


def asides() -> list[int]:
    """The shards with a copy put aside by an earlier run (one ``lstat`` each)."""
    return [k for k in range(SHARDS) if aside_path(k) not in _put_aside and os.path.lexists(aside_path(k))]


def clear_asides() -> None:
    """Remove the copies earlier runs put aside (only our own names, a link as a link); held
    under the index lock."""
    for k in asides():
        try:
            safefs.unlink(aside_path(k))
        except OSError:
            pass


class FileRow(msgspec.Struct, array_like=True, gc=False):
    """A transcript as the index last saw it."""

    id: int
    path: str
    session: str | None
    ino: int
    size: int
    mtime_ns: int
    offset: int
    tail: bytes
    searched: int = 0


def files(conn: sqlite3.Connection) -> dict[str, FileRow]:
    rows = conn.execute("SELECT id, path, session, ino, size, mtime_ns, offset, tail, searched FROM files").fetchall()
    return {r[1]: FileRow(*r) for r in rows}
