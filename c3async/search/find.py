"""Answering a query from the index: one entry per session, best first, with snippets.

What a session is known by (its custom and AI titles and its name, from the index; its note and
tags, which the caller brings from the marks: ``Known``) is matched first, by the same query in
an FTS5 table in memory (the same tokenizer: the same words, accents and CJK match), and ranks
above what was said; each hit says which ``fields`` matched (``FIELDS``).

Every shard is asked the same question; matches are joined to their passages (so dead index
entries drop out), filtered (role, time, branch, folders), and grouped by session: a sub-agent's
passages count toward the session that ran it and are marked as such. A session's score is its
best passage's BM25, a little better for more hits; ties go to the most recent. Snippets are
cut from the text read back from the transcript line (the index holds no text): up to three per
session, around the first hit of each passage, with the hits' spans.
"""

from __future__ import annotations

import math
import os
import re
import sqlite3
import time
import unicodedata
from collections.abc import Callable

import msgspec

from ..ground.errors import BadArgument, DamagedIndex, IndexUnavailable
from ..ground.safefs import open_regular, pread_all
from . import store
from .passages import KINDS, TOOL, decode_line, index_text, line_texts
from .query import Query, fold

__all__ = ("FIELDS", "Filters", "Found", "Hit", "Known", "Snippet", "find")

SNIPPETS = 3
HITS_WEIGHT = 0.1  # a session's score: its best passage's (normalised) BM25, a little more per hit
BEFORE, AFTER = 80, 160  # characters of a snippet around its first hit
MAX_SNIPPET_LINE = 32 * 1024 * 1024
_WS = re.compile(r"\s+")
# What a session is known by, in the order a match ranks it; then what was said.
NAMED = ("title", "name", "tags", "note")
FIELDS = (*NAMED, "conversation")
MAX_NOTE = 20_000  # characters of a note matched


class Snippet(msgspec.Struct):
    text: str
    marks: list[tuple[int, int]]  # [start, end) of each hit in ``text``
    role: str  # user, assistant or tool
    sidechain: bool
    ts: int | None
    offset: int  # of its line in ``file``
    agent: str | None = None  # the sub-agent file it is in (its name without .jsonl)


class Hit(msgspec.Struct):
    id: str  # the session's id
    folder: str  # Claude Code's project folder (the slug of the cwd)
    path: str | None  # the session's own transcript (None: only its sub-agents' files are known)
    cwd: str | None
    title: str | None
    title_source: str | None  # custom, ai or prompt
    branch: str | None
    last_ts: int | None
    score: float
    hits: int
    snippets: list[Snippet] = msgspec.field(default_factory=list)
    also_in: list[str] = msgspec.field(default_factory=list)  # forks that carry these hits too (copied)
    fields: list[str] = msgspec.field(default_factory=list)  # what matched (``FIELDS``), in that order


class Known(msgspec.Struct):
    """What c3async's marks say of a session (the note, the tags), to be matched too."""

    note: str = ""
    tags: list[str] = msgspec.field(default_factory=list)


class Filters(msgspec.Struct):
    roles: tuple[int, ...] = ()  # kinds; empty: user and assistant (and tool with ``tools``)
    tools: bool = False
    since: int | None = None
    until: int | None = None
    branch: str | None = None
    folders: frozenset[str] | None = None  # None: every project
    sessions: frozenset[str] | None = None  # None: any session (else these only: a tag's)


class Found(msgspec.Struct):
    hits: list[Hit]
    total: int  # sessions that matched
    seconds: float
    problems: list[str] = msgspec.field(default_factory=list)  # shards that could not be read
    damaged: list[int] = msgspec.field(default_factory=list)  # shards to rebuild


class _Match(msgspec.Struct):
    shard: int
    file: int
    offset: int
    length: int
    kind: int
    sidechain: bool
    ts: int | None
    rank: float
    text: bytes = b""  # its text's hash: with ts and kind, the same passage in a fork's copy


class _File(msgspec.Struct, array_like=True):
    id: int
    path: str
    folder: str
    session: str | None
    sidechain: int
    ino: int
    cwd: str | None
    custom_title: str | None
    ai_title: str | None
    first_prompt: str | None
    last_ts: int | None
    last_branch: str | None
    agent_name: str | None = None


_FILE_COLUMNS = (
    "id, path, folder, session, sidechain, ino, cwd, custom_title, ai_title, first_prompt, last_ts, last_branch,"
    " agent_name"
)


def _scoped(column: str, expression: str) -> str:
    return column + "(" + expression + ")" if column else expression


def _idf_sum(conn: sqlite3.Connection, column: str, query: Query) -> float:
    """The sum of the query's terms' IDF in this shard, as FTS5's bm25() computes them: dividing
    a shard's scores by it makes them comparable with another shard's (each has its own
    statistics; a session alone in a small shard would otherwise score near 0)."""
    rows = conn.execute("SELECT count(*) FROM blobs").fetchone()[0]
    total = 0.0
    for term in query.terms:
        n = conn.execute("SELECT count(*) FROM fts WHERE fts MATCH ?", (_scoped(column, term.fts()),)).fetchone()[0]
        idf = math.log((rows - n + 0.5) / (n + 0.5))
        total += idf if idf > 0 else 1e-6
    return total or 1.0


def _sql(query: Query, f: Filters) -> tuple[str, list[object], str]:
    kinds = f.roles or ((0, 1, TOOL) if f.tools else (0, 1))
    if f.roles and TOOL not in f.roles:
        column = "talk : "
    elif f.roles == (TOOL,):
        column = "tool : "
    else:
        column = "" if f.tools or TOOL in kinds else "talk : "
    where = [f"p.kind IN ({','.join(str(k) for k in kinds)})"]
    args: list[object] = [_scoped(column, query.expression)]
    if f.since is not None:
        where.append("p.ts >= ?")
        args.append(f.since)
    if f.until is not None:
        where.append("p.ts < ?")
        args.append(f.until)
    if f.branch is not None:
        where.append("p.branch = ?")
        args.append(f.branch)
    sql = (
        "SELECT p.file, p.offset, p.length, p.kind, p.sidechain, p.ts, m.r, h.hash"
        " FROM (SELECT rowid AS b, bm25(fts) AS r FROM fts WHERE fts MATCH ?) AS m"
        " JOIN passages AS p ON p.blob = m.b JOIN blobs AS h ON h.id = m.b WHERE " + " AND ".join(where)
    )
    return sql, args, column


# Which of some sessions are forks of which: given {session: its cwd}, {fork: parent}.
Forks = Callable[[dict[str, str | None]], dict[str, str]]


def find(
    query: Query,
    filters: Filters,
    limit: int = 20,
    *,
    snippets: bool = True,
    forks: Forks | None = None,
    known: dict[str, Known] | None = None,
) -> Found:
    """``forks``: how to tell a fork's parent; a passage a fork copied from its parent (the same
    text and time) is then a hit of the parent only, which names the forks that carry it.
    ``known``: the notes and tags of sessions, matched with their titles and names."""
    started = time.perf_counter()
    sql, args, column = _sql(query, filters)
    by_session: dict[str, list[_Match]] = {}
    files: dict[tuple[int, int], _File] = {}
    problems: list[str] = []
    damaged: list[int] = []
    for k in range(store.SHARDS):
        try:
            conn = store.connect(k, create=False)
        except DamagedIndex as exc:
            problems.append(str(exc))
            damaged.append(k)
            continue
        except IndexUnavailable as exc:  # (a full disk is said as such by the caller's door)
            problems.append(str(exc))
            continue
        if conn is None:
            continue
        try:
            rows = conn.execute(sql, args).fetchall()
            scale = _idf_sum(conn, column, query) if rows else 1.0
            ids = sorted({r[0] for r in rows})
            shard_files = {}
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                for r in conn.execute(
                    f"SELECT {_FILE_COLUMNS} FROM files WHERE id IN ({','.join('?' * len(chunk))})", chunk
                ):
                    shard_files[r[0]] = _File(*r)
        except sqlite3.Error as exc:
            if "fts5" in str(exc) or "syntax" in str(exc):  # the query itself (too complex for FTS5)
                raise BadArgument(f"this search cannot be run ({exc}): use fewer words or brackets") from None
            why = store.failure(store.shard_path(k), exc)
            problems.append(str(why))
            if isinstance(why, DamagedIndex):
                damaged.append(k)
            continue
        finally:
            conn.close()
        for fid, row in shard_files.items():
            files[(k, fid)] = row
        folders, only = filters.folders, filters.sessions
        for fid, offset, length, kind, sidechain, ts, rank, digest in rows:
            fr = shard_files.get(fid)
            if fr is None or fr.session is None or (folders is not None and fr.folder not in folders):
                continue
            if only is not None and fr.session not in only:
                continue
            by_session.setdefault(fr.session, []).append(
                _Match(k, fid, offset, length, kind, bool(sidechain or fr.sidechain), ts, rank / scale, bytes(digest))
            )
    carried = _once(by_session, files, forks) if forks is not None else {}
    ranked = []
    mains: dict[str, _File | None] = {}
    for session, matches in by_session.items():
        if not any(not files[(m.shard, m.file)].sidechain for m in matches):
            # only a sub-agent's words matched: the session is a hit only if its own transcript
            # is known (an orphaned sub-agent folder is a hit nothing could open)
            main = mains[session] = _main_file(session, files[(matches[0].shard, matches[0].file)])
            if main is None:
                continue
        best = min(m.rank for m in matches)
        score = -best + HITS_WEIGHT * math.log1p(len(matches))
        last = max((m.ts or 0) for m in matches)
        ranked.append((score, last, session, matches))
    ranked.sort(key=lambda t: (-t[0], -t[1], t[2]))
    # What the session is known by ranks first (the question is rarely asked of what was said
    # when the session was named so); a role asks for what one side said, which a name is not.
    named = [] if filters.roles else _named(query, filters, known or {}, problems)
    said = {session: matches for _, _, session, matches in ranked}
    scores = {session: score for score, _, session, _ in ranked}
    order: list[tuple[_Named | None, str]] = [(n, n.file.session or "") for n in named]
    order += [(None, session) for _, _, session, _ in ranked]
    hits: list[Hit] = []
    shown: set[str] = set()
    marker, folded = query.marker(), query.marker(folded=True)
    for by_name, session in order:
        if session in shown:
            continue
        shown.add(session)
        if len(hits) >= limit:
            continue  # counted, not shown
        matches = said.get(session, [])
        if matches:
            hit = _hit(session, scores[session], matches, files, mains)
        else:
            assert by_name is not None
            hit = _titled(session, 0.0, 0, by_name.file, by_name.file)
        hit.fields = [*(by_name.fields if by_name is not None else ()), *(["conversation"] if matches else [])]
        hit.also_in = sorted(carried.get(session, ()))
        if snippets and matches:
            hit.snippets = _snippets(matches, files, marker, folded)
        hits.append(hit)
    return Found(hits, len(shown), time.perf_counter() - started, problems, damaged)


def _once(
    by_session: dict[str, list[_Match]], files: dict[tuple[int, int], _File], forks: Forks
) -> dict[str, set[str]]:
    """Drop the hits a fork copied from an ancestor that matched too (the same text, kind and
    time); a fork left with none drops out. Returns, per session, the forks that carry its hits."""
    owners: dict[tuple[bytes, int | None, int], set[str]] = {}
    for session, matches in by_session.items():
        for m in matches:
            owners.setdefault((m.text, m.ts, m.kind), set()).add(session)
    shared = {s for group in owners.values() if len(group) > 1 for s in group}
    if not shared:
        return {}
    cwds = {s: files[(by_session[s][0].shard, by_session[s][0].file)].cwd for s in shared}
    parents = forks(cwds)
    carried: dict[str, set[str]] = {}
    for fork in sorted(shared):
        ups = []
        at = parents.get(fork)
        while at is not None and at not in ups and at != fork:
            ups.append(at)
            at = parents.get(at)
        mine = [a for a in ups if a in by_session]
        if not mine:
            continue
        keep = []
        for m in by_session[fork]:
            said = next((a for a in mine if a in owners.get((m.text, m.ts, m.kind), ())), None)
            if said is None:
                keep.append(m)
            else:
                carried.setdefault(said, set()).add(fork)
        if keep:
            by_session[fork] = keep
        else:
            del by_session[fork]
    return carried


def _hit(
    session: str,
    score: float,
    matches: list[_Match],
    files: dict[tuple[int, int], _File],
    mains: dict[str, _File | None],
) -> Hit:
    own = [files[(m.shard, m.file)] for m in matches]
    main: _File | None = next((f for f in own if not f.sidechain), None)
    if main is None:
        main = mains[session] if session in mains else _main_file(session, own[0])
    return _titled(session, score, len(matches), main, main or own[0])


def _titled(session: str, score: float, hits: int, main: _File | None, src: _File) -> Hit:
    title, source = None, None
    if src.custom_title:
        title, source = src.custom_title, "custom"
    elif src.ai_title:
        title, source = src.ai_title, "ai"
    elif src.first_prompt:
        title, source = src.first_prompt, "prompt"
    return Hit(
        id=session,
        folder=src.folder,
        path=main.path if main is not None else None,
        cwd=src.cwd,
        title=title,
        title_source=source,
        branch=src.last_branch,
        last_ts=src.last_ts,
        score=round(score, 4),
        hits=hits,
    )


class _Named(msgspec.Struct):
    file: _File  # the session's own transcript
    fields: list[str]  # what matched, in ``NAMED`` order


def _named(query: Query, filters: Filters, known: dict[str, Known], problems: list[str]) -> list[_Named]:
    """The sessions whose titles, name, tags or note match ``query``, best field first, then the
    most recent: every session's own transcript row is read (a short row each), the ones with
    anything to match are put in an FTS5 table in memory and asked, then asked per field."""
    rows: list[_File] = []
    for k in range(store.SHARDS):
        try:
            conn = store.connect(k, create=False)
        except (DamagedIndex, IndexUnavailable):
            continue  # said by the conversation's pass
        if conn is None:
            continue
        try:
            # a few noted or tagged sessions are asked for by id; many, by reading every row
            ids = list(known) if len(known) <= 500 else []
            wanted = f" OR session IN ({','.join('?' * len(ids))})" if ids else ""
            every = "" if len(known) <= 500 else " OR 1"
            rows += [
                _File(*r)
                for r in conn.execute(
                    f"SELECT {_FILE_COLUMNS} FROM files WHERE sidechain=0 AND session IS NOT NULL"
                    f" AND (custom_title IS NOT NULL OR ai_title IS NOT NULL OR agent_name IS NOT NULL{wanted}{every})",
                    ids,
                )
            ]
        except sqlite3.Error as exc:
            problems.append(str(store.failure(store.shard_path(k), exc)))
        finally:
            conn.close()
    # Only a row that holds one of the words can match (every branch of the query needs one):
    # a regex over the few short strings, before any FTS work.
    marker = query.marker(folded=True)
    chosen = [
        f
        for f in rows
        if marker.search(_flat("\n".join(_texts(f, known.get(f.session or "")))))
        and (filters.folders is None or f.folder in filters.folders)
        and (filters.sessions is None or f.session in filters.sessions)
        and (filters.since is None or (f.last_ts is not None and f.last_ts >= filters.since))
        and (filters.until is None or (f.last_ts is not None and f.last_ts < filters.until))
        and (filters.branch is None or f.last_branch == filters.branch)
    ]
    if not chosen:
        return []
    mem = sqlite3.connect(":memory:", isolation_level=None)
    try:
        mem.execute(f"CREATE VIRTUAL TABLE m USING fts5({', '.join(NAMED)}, tokenize='unicode61 remove_diacritics 2')")
        mem.executemany(
            "INSERT INTO m(rowid, title, name, tags, note) VALUES (?,?,?,?,?)",
            [(i, *(index_text(t) for t in _texts(f, known.get(f.session or "")))) for i, f in enumerate(chosen)],
        )
        try:
            hit = {r[0] for r in mem.execute("SELECT rowid FROM m WHERE m MATCH ?", (query.expression,))}
            by_field = {
                name: {
                    r[0]
                    for r in mem.execute(
                        "SELECT rowid FROM m WHERE m MATCH ?", (_scoped(name + " : ", query.expression),)
                    )
                }
                for name in NAMED
            }
        except sqlite3.Error as exc:
            raise BadArgument(f"this search cannot be run ({exc}): use fewer words or brackets") from None
    finally:
        mem.close()
    out = []
    for i in hit:
        fields = [name for name in NAMED if i in by_field[name]]
        if not fields:  # its words are spread over several fields: each that holds one
            texts = _texts(chosen[i], known.get(chosen[i].session or ""))
            fields = [name for name, text in zip(NAMED, texts, strict=True) if text and marker.search(_flat(text))]
        out.append(_Named(chosen[i], fields or list(NAMED[:1])))
    out.sort(key=lambda n: (NAMED.index(n.fields[0]), -(n.file.last_ts or 0), n.file.session or ""))
    return out


_MARKS = re.compile("[\u0300-\u036f]+")


def _flat(text: str) -> str:
    """``text`` without its accents (as ``fold``, at C speed: no offsets needed here)."""
    return text if text.isascii() else _MARKS.sub("", unicodedata.normalize("NFD", text))


def _texts(f: _File, known: Known | None) -> tuple[str, str, str, str]:
    """A session's title, name, tags and note, as matched (the custom and the AI title both)."""
    title = "\n".join(t for t in (f.custom_title, f.ai_title) if t)
    note = known.note[:MAX_NOTE] if known is not None else ""
    return title, f.agent_name or "", " ".join(known.tags) if known is not None else "", note


def _main_file(session: str, sub: _File) -> _File | None:
    """The session's own transcript, when only its sub-agents' passages matched."""
    inside = os.sep + session + os.sep  # <folder>/<session>/subagents/..., else a legacy agent-*.jsonl
    folder_path = sub.path.split(inside)[0] if inside in sub.path else os.path.dirname(sub.path)
    path = os.path.join(folder_path, session + ".jsonl")
    k = store.shard_of(path)
    try:
        conn = store.connect(k, create=False)
    except (DamagedIndex, IndexUnavailable):
        return None
    if conn is None:
        return None
    try:
        r = conn.execute(f"SELECT {_FILE_COLUMNS} FROM files WHERE path=?", (path,)).fetchone()
    except sqlite3.DatabaseError:
        return None
    finally:
        conn.close()
    return _File(*r) if r else None


def _snippets(
    matches: list[_Match], files: dict[tuple[int, int], _File], marker: re.Pattern[str], folded: re.Pattern[str]
) -> list[Snippet]:
    out: list[Snippet] = []
    seen: set[str] = set()
    for m in sorted(matches, key=lambda m: (m.rank, -(m.ts or 0))):
        if len(out) >= SNIPPETS:
            break
        f = files[(m.shard, m.file)]
        text = _passage_text(f, m)
        if text is None:
            continue
        snippet, marks = cut(text, marker, folded)
        if snippet in seen:
            continue  # the same words said again: one snippet is enough
        seen.add(snippet)
        agent = os.path.basename(f.path)[:-6] if f.sidechain else None
        out.append(Snippet(snippet, marks, KINDS[m.kind], m.sidechain, m.ts, m.offset, agent))
    return out


def _passage_text(f: _File, m: _Match) -> str | None:
    """The passage's text, read back from its line; None when the file changed under us."""
    if m.length > MAX_SNIPPET_LINE:
        return None
    try:
        fd, st = open_regular(f.path)
    except OSError:
        return None
    try:
        if st.st_ino != f.ino or st.st_size < m.offset + m.length:
            return None
        raw = pread_all(fd, m.offset, m.length)
    except OSError:
        return None
    finally:
        os.close(fd)
    line = decode_line(raw)
    if line is None:
        return None
    for kind, text in line_texts(line):
        if kind == m.kind:
            return text
    return None


FOLD_MAX = 1 << 20  # characters of a passage looked at again without accents


def cut(text: str, marker: re.Pattern[str], folded: re.Pattern[str] | None = None) -> tuple[str, list[tuple[int, int]]]:
    """A one-line piece of ``text`` around its first hit, and where the hits are in it.
    ``folded``: the marker for text without accents, tried when ``marker`` finds nothing (the
    index matched ``cafe`` to ``café``)."""
    first = marker.search(text)
    if first is None and folded is not None and not text.isascii():
        return _cut_folded(text[:FOLD_MAX], folded)
    if first is None:
        piece = _WS.sub(" ", text[: AFTER + BEFORE]).strip()
        return (piece + ("\u2026" if len(text) > AFTER + BEFORE else ""), [])
    a = max(0, first.start() - BEFORE)
    b = min(len(text), first.end() + AFTER)
    if a > 0:  # start at a word
        space = text.find(" ", a, first.start())
        a = space + 1 if space >= 0 else a
    piece = _WS.sub(" ", text[a:b]).strip()
    lead = "\u2026" if a > 0 else ""
    piece = lead + piece + ("\u2026" if b < len(text) else "")
    return piece, [(h.start(), h.end()) for h in marker.finditer(piece)]


def _cut_folded(text: str, folded: re.Pattern[str]) -> tuple[str, list[tuple[int, int]]]:
    import unicodedata

    flat, where = fold(text)
    first = folded.search(flat)
    if first is None or where is None:
        piece = _WS.sub(" ", text[: AFTER + BEFORE]).strip()
        return (piece + ("\u2026" if len(text) > AFTER + BEFORE else ""), [])
    a = max(0, where[first.start()] - BEFORE)
    b = min(len(text), where[first.end() - 1] + 1 + AFTER)
    window = _WS.sub(" ", text[a:b]).strip()
    piece_flat, piece_where = fold(window)
    marks = []
    for h in folded.finditer(piece_flat):
        if piece_where is None:
            marks.append((h.start(), h.end()))
        else:
            end = piece_where[h.end() - 1] + 1
            while end < len(window) and unicodedata.combining(window[end]):
                end += 1  # the accents of the last letter belong to the hit
            marks.append((piece_where[h.start()], end))
    lead = "\u2026" if a > 0 else ""
    return lead + window + ("\u2026" if b < len(text) else ""), [(s + len(lead), e + len(lead)) for s, e in marks]
