"""Full-text search: real transcripts, real SQLite shards, the real CLI and MCP server.

A module corpus (two projects, ~5.5 MB of transcripts) is written and indexed once; the recall,
precision, query-syntax, filter and door tests search it. Incremental indexing, hostile files,
damaged shards, the lock, ranking and the parallel first build each get a sandbox of their own
(``claude`` + ``activate``: the library in this process, on that sandbox). Nothing of ours is
mocked; the only patched values are size thresholds (``PROCESS_MIN_BYTES``, ``INLINE_BYTES``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from c3async.ground import safefs
from c3async.ground.errors import BadArgument, C3Error
from c3async.ground.project import resolve
from c3async.search import index, store
from c3async.search.query import parse
from c3async.sessions import search as search_mod
from c3async.sessions.search import search
from stress.transcripts import (
    Conversation,
    append_lines,
    claude_slug,
    encode,
    text,
    thinking,
    tool_use,
    write_session,
)

T0 = datetime(2026, 5, 1, 10, 0, tzinfo=UTC)


@pytest.fixture
def anyio_backend():
    return "asyncio"


# ------------------------------------------------------------------------------------ helpers


def id_in_shard(folder: Path, k: int) -> str:
    """A fresh session id whose transcript in ``folder`` lands in shard ``k`` (shards hash paths)."""
    while True:
        sid = str(uuid.uuid4())
        if store.shard_of(str(folder / f"{sid}.jsonl")) == k:
            return sid


def session_file(
    folder: Path,
    prompts: list[str],
    *,
    sid: str | None = None,
    start: datetime = T0,
    cwd: str,
    answer: str = "Done.",
    **kw,
) -> tuple[str, Path]:
    conv = Conversation(cwd, sid, start=start, **kw)
    lines = [conv.permission_mode()]
    for p in prompts:
        lines += conv.exchange(p, answer)
    return conv.id, write_session(folder, conv.id, lines)


def ids(result) -> list[str]:
    return [r.id for r in result.results]


def marked(snippet) -> list[str]:
    return [snippet.text[a:b] for a, b in snippet.marks]


def shard_mtimes() -> dict[str, int]:
    out = {}
    for k in range(store.SHARDS):
        for suffix in ("", "-wal", "-shm"):
            p = f"{store.shard_path(k)}{suffix}"
            if os.path.exists(p):
                out[p] = os.stat(p).st_mtime_ns
    return out


def hits_summary(result) -> list[tuple]:
    return [
        (r.id, r.score, r.hits, [(s.text, s.marks, s.role, s.sidechain) for s in r.snippets]) for r in result.results
    ]


# ------------------------------------------------------------------------------------ the corpus


@dataclass
class Corpus:
    claude: object  # conftest.Sandbox
    app: str
    docs: str
    folder: Path
    ids: dict[str, str]
    paths: dict[str, Path]
    first: index.Update


HOSTILE_PROMPT = "\x1b]0;pwned\x07 kestrel alert \x1b[31mred\x1b[0m"
CJK_ZH = "我们需要修复数据库连接池的超时问题，然后再部署"
CJK_JA = "データベースの接続を確認してください"


def _build_corpus(claude) -> Corpus:
    app = claude.project("app")
    docs = claude.project("docs")
    folder = claude.folder(app)
    dfolder = claude.folder(docs)
    ids: dict[str, str] = {}
    paths: dict[str, Path] = {}

    def put(name: str, conv: Conversation, lines, where: Path = folder) -> None:
        ids[name] = conv.id
        paths[name] = write_session(where, conv.id, lines)

    # a prompt after 5 MB of other lines (tool rounds: no prompts, no titles)
    c = Conversation(app, start=T0)
    put(
        "big",
        c,
        [
            c.permission_mode(),
            *c.exchange("Start the data migration"),
            *c.filler(5 * 1024 * 1024),
            *c.exchange("Now plant the silver quokka migration flag", "Planted."),
        ],
    )
    # assistant text only
    c = Conversation(app, start=T0 + timedelta(minutes=1))
    put(
        "assistant",
        c,
        [c.permission_mode(), *c.exchange("Explain the time machine", "The flux capacitor needs recalibration first.")],
    )
    # JSON escapes: \n, \", \u00e9 and an emoji as a surrogate pair (json.dumps' ensure_ascii)
    c = Conversation(app, start=T0 + timedelta(minutes=2))
    line = c.prompt('line one\nsecond "quoted marmot" caf\u00e9 party\U0001f389time')
    raw = json.dumps(line, separators=(",", ":")).encode()
    assert b"\\n" in raw and b'\\"quoted' in raw and b"\\u00e9" in raw and b"\\ud83c\\udf89" in raw
    put("escapes", c, [c.permission_mode(), raw, *c.reply(text("Noted."))])
    # CJK
    c = Conversation(app, start=T0 + timedelta(minutes=3))
    put("cjk", c, [c.permission_mode(), *c.exchange(CJK_ZH), *c.exchange(CJK_JA)])
    # a parent session whose sub-agent file alone holds the word
    c = Conversation(app, start=T0 + timedelta(minutes=4))
    put("parent", c, [c.permission_mode(), *c.exchange("Review the code base")])
    sub = Conversation(app, c.id, start=T0 + timedelta(minutes=5), sidechain=True)
    sub_lines = [
        sub.prompt("Search for the heliotrope manifest"),
        *sub.reply(text("Found the heliotrope manifest in config/.")),
    ]
    paths["agent"] = write_session(folder / c.id / "subagents", "agent-a1b2c3", sub_lines)
    # a word only in a tool's output, another only in a tool's input
    c = Conversation(app, start=T0 + timedelta(minutes=6))
    put(
        "tool",
        c,
        [
            c.permission_mode(),
            *c.exchange("Run the tests"),
            *c.tool_round(
                "FAILED zanzibar_stacktrace in test_io",
                input={"command": "pytest --frobnicate-widget", "description": "Run them"},
            ),
        ],
    )
    # words only in metadata, meta lines, markup, thinking, summaries
    c = Conversation(app + "/iguana_dir", start=T0 + timedelta(minutes=7), branch="feature/pelican")
    snap = c.snapshot()
    snap["snapshot"]["trackedFileBackups"] = {"/src/bandicoot.py": {"backupFileName": "bandicoot@v1", "version": 1}}
    call = c.reply(tool_use("Bash", {"command": "ls", "description": "List"}))
    result = c.tool_result(call[0]["message"]["content"][0]["id"], "plain listing output", source=call[0]["uuid"])
    result["toolUseResult"]["stdout"] = "copy only armadillo"
    put(
        "meta",
        c,
        [
            c.permission_mode(),
            snap,
            c.caveat(),
            c.meta("meta lemming instructions"),
            c.clear(),
            c.local_stdout("gazelle printed this"),
            *c.exchange("A normal prompt about lists"),
            *c.reply(thinking("thinking about the mongoose"), text("Here are the lists.")),
            *call,
            result,
            c.compact_summary("Summary:\n1. the hyena request"),
            c.summary("wolverine summary"),
            c.custom_title("Tapir investigations"),
            c.ai_title("Okapi work"),
            c.last_prompt("A normal prompt about lists"),
            c.agent_name("Tapir"),
            c.mode(),
        ],
    )
    # query syntax
    c = Conversation(app, start=T0 + timedelta(minutes=8))
    put(
        "syntax",
        c,
        [
            c.permission_mode(),
            *c.exchange("the quick brown fox jumps"),
            *c.exchange(
                "Where is the budget?", "Set self.retry_budget_ms = 300 in /repo/src/http/client.py and restart."
            ),
            *c.exchange("call NEAR(alpha beta) on a:b with {talk} and ^startle then x'; DROP TABLE files; --"),
        ],
    )
    c = Conversation(app, start=T0 + timedelta(minutes=9))
    put("staging", c, [c.permission_mode(), *c.exchange("deploy the canary to staging")])
    c = Conversation(app, start=T0 + timedelta(minutes=10))
    put("production", c, [c.permission_mode(), *c.exchange("deploy the canary to production")])
    # roles
    c = Conversation(app, start=T0 + timedelta(minutes=11))
    put("role_user", c, [c.permission_mode(), *c.exchange("pangolin scales please", "Sure.")])
    c = Conversation(app, start=T0 + timedelta(minutes=12))
    put(
        "role_assistant",
        c,
        [c.permission_mode(), *c.exchange("tell me about animals", "The pangolin is covered in scales.")],
    )
    # time and branch
    c = Conversation(app, start=datetime(2026, 3, 1, tzinfo=UTC))
    put("march", c, [c.permission_mode(), *c.exchange("chinchilla in march")])
    c = Conversation(app, start=datetime(2026, 6, 1, tzinfo=UTC))
    put("june", c, [c.permission_mode(), *c.exchange("chinchilla in june")])
    c = Conversation(app, start=T0 + timedelta(minutes=13), branch="main")
    put("on_main", c, [c.permission_mode(), *c.exchange("axolotl on main")])
    c = Conversation(app, start=T0 + timedelta(minutes=14), branch="feature/axo")
    put("on_feature", c, [c.permission_mode(), *c.exchange("axolotl on the feature branch")])
    # two projects
    c = Conversation(app, start=T0 + timedelta(minutes=15))
    put("lynx_app", c, [c.permission_mode(), *c.exchange("the lynx in the app")])
    c = Conversation(docs, start=T0 + timedelta(minutes=16))
    put("lynx_docs", c, [c.permission_mode(), *c.exchange("the lynx in the docs")], where=dfolder)
    # limit and total
    for i in range(5):
        c = Conversation(app, start=T0 + timedelta(minutes=20 + i))
        put(f"heron{i}", c, [c.permission_mode(), *c.exchange(f"the heron number {i}")])
    # hostile terminal text
    c = Conversation(app, start=T0 + timedelta(minutes=30))
    put("hostile", c, [c.permission_mode(), *c.exchange(HOSTILE_PROMPT)])

    first = index.update()
    return Corpus(claude, app, docs, folder, ids, paths, first)


@pytest.fixture(scope="module")
def corpus(module_claude):
    with pytest.MonkeyPatch.context() as mp:
        module_claude.activate(mp)
        yield _build_corpus(module_claude)


def by_name(c: Corpus, result) -> list[str]:
    names = {v: k for k, v in c.ids.items()}
    return [names.get(s, s) for s in ids(result)]


# ------------------------------------------------------------------------------------ 1. recall / precision


def test_first_build_indexes_every_transcript(corpus):
    u = corpus.first
    assert not u.busy and not u.errors and u.skipped_lines == 0
    assert u.files == len(corpus.paths)  # the sub-agent file too
    assert u.read == u.files and u.bytes_read == sum(p.stat().st_size for p in corpus.paths.values())


def test_a_prompt_after_5mb_of_other_lines(corpus):
    found = search("quokka")
    assert by_name(corpus, found) == ["big"] and found.total == 1
    (r,) = found.results
    assert r.snippets[0].role == "user" and marked(r.snippets[0]) == ["quokka"]
    assert "silver quokka migration" in r.snippets[0].text
    assert r.title == "Start the data migration" and r.path == str(corpus.paths["big"])
    assert search('"silver quokka migration"').total == 1
    assert search('"quokka silver"').total == 0


def test_assistant_text(corpus):
    found = search("flux capacitor recalibration")
    assert by_name(corpus, found) == ["assistant"]
    assert found.results[0].snippets[0].role == "assistant"
    assert marked(found.results[0].snippets[0]) == ["flux", "capacitor", "recalibration"]


def test_json_escapes_are_decoded(corpus):
    for q in ('"quoted marmot"', '"one second"', "café", "cafe", '"party time"'):
        assert by_name(corpus, search(q)) == ["escapes"], q
    sn = search("marmot").results[0].snippets[0]
    assert 'second "quoted marmot" café party\U0001f389time' in sn.text
    # the raw escapes are not what was said
    for q in ("u00e9", "ud83c", "udf89time", "nsecond"):
        assert search(q).total == 0, q


@pytest.mark.parametrize("q", ["数据库", "连接池", "库连接", "超时问题", "接続", "データ", "確認して"])
def test_cjk_substrings_match(corpus, q):
    found = search(q)
    assert by_name(corpus, found) == ["cjk"], q
    assert any(q in "".join(marked(s)) or marked(s) == [q] for s in found.results[0].snippets)


def test_cjk_non_substring_does_not_match(corpus):
    assert search("库数据").total == 0  # the characters, in another order
    assert search('"数据 超时"').total == 0


def test_a_hit_found_without_its_accents_is_marked(corpus):
    (r,) = search("cafe").results
    assert [marked(s) for s in r.snippets] == [["café"]]


def test_sub_agent_file_counts_for_its_parent_session(corpus):
    found = search("heliotrope")
    assert by_name(corpus, found) == ["parent"] and found.total == 1
    (r,) = found.results
    assert r.hits == 2
    assert r.path == str(corpus.paths["parent"]) and r.title == "Review the code base"
    assert {s.role for s in r.snippets} == {"user", "assistant"}
    assert all(s.sidechain and s.agent == "agent-a1b2c3" for s in r.snippets)
    assert r.resume.endswith(f"claude --resume {corpus.ids['parent']}")


def test_tool_text_only_with_tools(corpus):
    for q in ("zanzibar", "zanzibar_stacktrace", "frobnicate", "frobnicate-widget"):
        assert search(q).total == 0, q
        found = search(q, tools=True)
        assert by_name(corpus, found) == ["tool"], q
        assert found.results[0].snippets[0].role == "tool"
    assert search("zanzibar", role="tool").total == 1
    assert by_name(corpus, search("FAILED zanzibar", role="tool")) == ["tool"]
    assert search("ok ok ok").total == 0  # 5 MB of tool output stays out of a default search


@pytest.mark.parametrize(
    "word",
    [
        "iguana",  # cwd
        "pelican",  # gitBranch
        "bandicoot",  # file-history-snapshot
        "armadillo",  # toolUseResult (Claude Code's copy of the output)
        "lemming",  # isMeta
        "gazelle",  # local command stdout (a system line)
        "hyena",  # compact summary
        "mongoose",  # thinking
        "wolverine",  # summary line
        '"command name"',
        "command-message",
        "local-command-caveat",
        '"DO NOT respond to these messages"',
    ],
)
def test_metadata_markup_and_meta_lines_do_not_match(corpus, word):
    assert search(word).total == 0
    assert search(word, tools=True).total == 0


def test_titles_and_name_match_as_what_the_session_is_known_by(corpus):
    """Not as something said: no snippet, no role, the field that matched."""
    for word, fields in (("tapir", ["title", "name"]), ("okapi", ["title"])):
        found = search(word)
        assert found.total == 1 and found.results[0].fields == fields, word
        assert found.results[0].snippets == [] and found.results[0].hits == 0
        assert search(word, role="user").total == 0


def test_the_metadata_session_is_indexed(corpus):
    assert by_name(corpus, search("lists")) == ["meta"]
    assert by_name(corpus, search('"plain listing output"', tools=True)) == ["meta"]


# ------------------------------------------------------------------------------------ 2. query syntax


def test_phrase_versus_words(corpus):
    assert by_name(corpus, search("brown quick")) == ["syntax"]
    assert by_name(corpus, search('"quick brown"')) == ["syntax"]
    assert search('"brown quick"').total == 0
    assert search('"quick fox"').total == 0  # not side by side


def test_prefix(corpus):
    assert by_name(corpus, search("quokk*")) == ["big"]
    assert search("quokk").total == 0
    sn = search("recalib*").results[0].snippets[0]
    assert marked(sn) == ["recalibration"]


def test_or_not_and_minus(corpus):
    assert set(by_name(corpus, search("marmot OR quokka"))) == {"escapes", "big"}
    assert set(by_name(corpus, search("deploy canary"))) == {"staging", "production"}
    assert by_name(corpus, search("deploy canary -staging")) == ["production"]
    assert by_name(corpus, search("deploy canary NOT production")) == ["staging"]
    assert by_name(corpus, search("deploy AND canary AND staging")) == ["staging"]
    assert by_name(corpus, search("canary (staging OR nothingatall)")) == ["staging"]
    assert set(by_name(corpus, search("(staging OR production) canary"))) == {"staging", "production"}


def test_minus_before_a_phrase_or_group_excludes_it(corpus):
    assert by_name(corpus, search('deploy canary -"to staging"')) == ["production"]
    assert by_name(corpus, search("deploy canary -(staging)")) == ["production"]


def test_identifiers_and_paths_are_phrases_of_their_parts(corpus):
    found = search("retry_budget")
    assert by_name(corpus, found) == ["syntax"]
    sn = found.results[0].snippets[0]
    assert marked(sn) == ["retry_budget"] and "self.retry_budget_ms" in sn.text
    found = search("src/http/client.py")
    assert by_name(corpus, found) == ["syntax"]
    assert marked(found.results[0].snippets[0]) == ["src/http/client.py"]
    assert by_name(corpus, search("self.retry_budget_ms")) == ["syntax"]
    assert search("budget_retry").total == 0
    assert search("http/src").total == 0


@pytest.mark.parametrize(
    "q",
    [
        '"a" OR (',
        "x'; DROP TABLE files; --",
        "NEAR(alpha beta)",
        "a:b",
        "{talk}",
        "^start",
        "talk:alpha",
        'alpha"',
        '"""',
        "((alpha",
        "alpha))",
        "* OR *",
        "alpha*beta",
        '"NEAR" \'',
        "rowid=1",
        "fts MATCH 'x'",
        "-- comment",
        "alpha AND",
        "OR alpha",
        "(-x)",
        "a -",
        "'",
        ";",
        "%_",
    ],
)
def test_fts_and_sql_syntax_is_literal_or_refused(corpus, q):
    try:
        found = search(q)
    except BadArgument as exc:
        assert str(exc)
        return
    assert found.problems == []
    assert search("quokka").total == 1  # the index is still whole


def test_sql_looking_text_is_searched_literally(corpus):
    for q in ("x'; DROP TABLE files; --", "NEAR(alpha beta)", "a:b", "{talk}", "^startle"):
        assert by_name(corpus, search(q)) == ["syntax"], q
    known = 0
    for k in range(store.SHARDS):  # nothing was dropped
        conn = store.connect(k, create=False)
        assert conn is not None
        known += conn.execute("SELECT count(*) FROM files").fetchone()[0]
        conn.close()
    assert known == len(corpus.paths)


@pytest.mark.parametrize(
    "q",
    [
        "",
        "   ",
        "!!! ---",
        "-word",
        "NOT word",
        "NOT",
        "AND",
        "*",
        "x" * 10_000,
        "a" * 2001,
        "alpha\x00beta",
        "(((((((((((((((((alpha)))))))))))))))))",
        " ".join(f"w{i}" for i in range(65)),
    ],
)
def test_bad_queries_are_bad_arguments(corpus, q):
    with pytest.raises(BadArgument):
        search(q)
    with pytest.raises(BadArgument):
        parse(q)


def test_a_2000_character_query_is_accepted(corpus):
    q = "quokka " + "z" * 1993
    assert len(q) == 2000
    assert search(q).total == 0


def test_many_negated_words_are_refused_or_searched(corpus):
    q = "quokka " + " ".join(f"-n{i}" for i in range(100))
    assert len(q) < 2000
    try:
        found = search(q)
    except BadArgument:
        return
    assert found.total == 1


# ------------------------------------------------------------------------------------ 3. filters


def test_role_filter(corpus):
    assert set(by_name(corpus, search("pangolin scales"))) == {"role_user", "role_assistant"}
    assert by_name(corpus, search("pangolin scales", role="user")) == ["role_user"]
    assert by_name(corpus, search("pangolin scales", role="assistant")) == ["role_assistant"]
    assert search("pangolin", role="tool").total == 0
    with pytest.raises(BadArgument):
        search("pangolin", role="system")


def test_since_and_until_use_the_transcripts_timestamps(corpus):
    assert set(by_name(corpus, search("chinchilla"))) == {"march", "june"}
    assert by_name(corpus, search("chinchilla", since="2026-05-01")) == ["june"]
    assert by_name(corpus, search("chinchilla", until="2026-05-01")) == ["march"]
    assert search("chinchilla", since="2026-04-01", until="2026-05-01").total == 0
    # June 2026 is within 26 weeks of the run, March is not: relative times are from now
    weeks = int((time.time() - datetime(2026, 4, 15, tzinfo=UTC).timestamp()) // (7 * 86400))
    assert by_name(corpus, search("chinchilla", since=f"{weeks}w")) == ["june"]
    with pytest.raises(BadArgument):
        search("chinchilla", since="last tuesday")


def test_branch_filter(corpus):
    assert set(by_name(corpus, search("axolotl"))) == {"on_main", "on_feature"}
    found = search("axolotl", branch="feature/axo")
    assert by_name(corpus, found) == ["on_feature"] and found.results[0].branch == "feature/axo"
    assert by_name(corpus, search("axolotl", branch="main")) == ["on_main"]
    assert search("axolotl", branch="nope").total == 0


def test_project_filter(corpus):
    assert set(by_name(corpus, search("lynx"))) == {"lynx_app", "lynx_docs"}
    found = search("lynx", projects=[resolve(corpus.app)])
    assert by_name(corpus, found) == ["lynx_app"]
    assert found.results[0].project == corpus.app and found.results[0].cwd == corpus.app
    assert found.results[0].resume == f"cd {corpus.app} && claude --resume {corpus.ids['lynx_app']}"
    found = search("lynx", projects=[resolve(corpus.docs)])
    assert by_name(corpus, found) == ["lynx_docs"] and found.results[0].project == corpus.docs
    assert set(by_name(corpus, search("lynx", projects=[resolve(corpus.app), resolve(corpus.docs)]))) == {
        "lynx_app",
        "lynx_docs",
    }
    assert search("quokka", projects=[resolve(corpus.docs)]).total == 0


def test_limit_total_and_order(corpus):
    everything = search("heron")
    assert everything.total == 5 and len(everything.results) == 5
    scores = [r.score for r in everything.results]
    assert scores == sorted(scores, reverse=True)  # best first
    two = search("heron", limit=2)
    assert two.total == 5 and len(two.results) == 2
    assert ids(two) == ids(everything)[:2]
    assert ids(search("heron")) == ids(everything)  # deterministic
    for bad in (0, -1, 201):
        with pytest.raises(BadArgument):
            search("heron", limit=bad)


def test_results_carry_age_and_resume(corpus):
    (r,) = search("quokka").results
    assert r.age.endswith("d") and int(r.age[:-1]) >= 100  # May 2026, searched months later
    assert r.resume == f"cd {corpus.app} && claude --resume {corpus.ids['big']}"
    assert r.folder == claude_slug(corpus.app) and r.id == corpus.ids["big"]


# ------------------------------------------------------------------------------------ 3b. ranking


@pytest.fixture
def sandbox(claude, monkeypatch):
    claude.activate(monkeypatch)
    return claude


def test_more_hits_rank_before_one_weak_hit_and_order_is_deterministic(sandbox):
    app = sandbox.project("app")
    folder = sandbox.folder(app)
    many, _ = session_file(
        folder,
        [f"sprocket alignment step {i} of the gearbox" for i in range(4)],
        sid=id_in_shard(folder, 2),
        cwd=app,
        start=T0,
    )
    filler = " ".join(f"word{i}" for i in range(300))
    weak, _ = session_file(
        folder, [f"{filler} sprocket {filler}"], sid=id_in_shard(folder, 2), cwd=app, start=T0 + timedelta(days=3)
    )  # newer, but a weaker match
    for i in range(6):
        session_file(folder, [f"unrelated chat number {i}"], sid=id_in_shard(folder, 2), cwd=app)
    first = search("sprocket")
    assert ids(first) == [many, weak]
    assert first.results[0].hits == 4 and first.results[1].hits == 1
    assert first.results[0].score > first.results[1].score
    for _ in range(3):
        assert hits_summary(search("sprocket")) == hits_summary(first)


def test_equal_relevance_goes_to_the_most_recent_within_a_shard(sandbox):
    app = sandbox.project("app")
    folder = sandbox.folder(app)
    old, _ = session_file(folder, ["rotate the signing keys"], sid=id_in_shard(folder, 1), cwd=app, start=T0)
    new, _ = session_file(
        folder, ["rotate the signing keys"], sid=id_in_shard(folder, 1), cwd=app, start=T0 + timedelta(days=5)
    )
    for i in range(6):
        session_file(folder, [f"unrelated chat number {i}"], sid=id_in_shard(folder, 1), cwd=app)
    assert ids(search("signing keys")) == [new, old]


def test_identical_text_scores_alike_across_shards(sandbox):
    # Each shard's bm25() has its own statistics; scores are divided by the shard's IDF sum so a
    # session alone in a small shard does not score near 0 (unnormalised: 3.92 against 0.35).
    # Document lengths still differ per shard, so tiny shards are close, not equal.
    app = sandbox.project("app")
    folder = sandbox.folder(app)
    old, _ = session_file(folder, ["rotate the signing keys"], sid=id_in_shard(folder, 0), cwd=app, start=T0)
    for i in range(8):
        session_file(folder, [f"unrelated chat number {i}"], sid=id_in_shard(folder, 0), cwd=app)
    new, _ = session_file(
        folder, ["rotate the signing keys"], sid=id_in_shard(folder, 3), cwd=app, start=T0 + timedelta(days=5)
    )
    found = search("signing keys")
    scores = {r.id: r.score for r in found.results}
    assert set(scores) == {new, old}
    assert 0.75 < scores[new] / scores[old] < 1.34, scores


def test_legacy_agent_file_beside_the_sessions_counts_for_its_session(sandbox):
    app = sandbox.project("app")
    folder = sandbox.folder(app)
    parent, _ = session_file(folder, ["Plan the release"], cwd=app)
    sub = Conversation(app, parent, start=T0 + timedelta(minutes=1), sidechain=True)
    write_session(
        folder,
        "agent-0f1e2d3c",
        [sub.prompt("Find the cassowary config"), *sub.reply(text("The cassowary config is in etc/."))],
    )
    found = search("cassowary")
    assert ids(found) == [parent] and found.total == 1
    (r,) = found.results
    assert r.hits == 2 and r.resume == f"cd {app} && claude --resume {parent}"
    assert all(s.sidechain and s.agent == "agent-0f1e2d3c" for s in r.snippets)


def test_legacy_agent_hit_names_its_sessions_transcript_and_title(sandbox):
    app = sandbox.project("app")
    folder = sandbox.folder(app)
    parent, _ = session_file(folder, ["Plan the release"], cwd=app)
    sub = Conversation(app, parent, start=T0 + timedelta(minutes=1), sidechain=True)
    write_session(folder, "agent-0f1e2d3c", [sub.prompt("Find the cassowary config")])
    (r,) = search("cassowary").results
    assert (r.path, r.title) == (str(folder / f"{parent}.jsonl"), "Plan the release")


def test_the_same_text_in_many_sessions_is_indexed_once_per_shard(sandbox):
    app = sandbox.project("app")
    folder = sandbox.folder(app)
    log = "Traceback (most recent call last): KeyError: 'dingo_config' " + "at frame " * 200
    made = [session_file(folder, [log], cwd=app, answer="Same answer.")[0] for _ in range(12)]
    u = index.update()
    assert u.passages == 24
    assert set(ids(search("dingo_config", limit=50))) == set(made)
    blobs = 0
    for k in range(store.SHARDS):
        conn = store.connect(k, create=False)
        if conn is not None:
            blobs += conn.execute("SELECT count(*) FROM blobs").fetchone()[0]
            conn.close()
    assert blobs <= 2 * store.SHARDS  # the prompt and the answer, once in each shard at most


# ------------------------------------------------------------------------------------ 4. incremental


def test_append_reads_only_the_new_bytes(sandbox):
    app = sandbox.project("app")
    folder = sandbox.folder(app)
    conv = Conversation(app, start=T0)
    path = write_session(
        folder, conv.id, [conv.permission_mode(), *conv.exchange("first prompt"), *conv.filler(1024 * 1024)]
    )
    first = index.update()
    assert first.read == 1 and first.bytes_read == path.stat().st_size
    added = append_lines(path, conv.exchange("the appended wallaby question"))
    second = index.update()
    assert (second.read, second.bytes_read, second.dropped) == (1, added, 0)
    assert second.passages == 2
    found = search("wallaby")
    assert ids(found) == [conv.id] and found.index.indexed_now == 0
    assert search("first prompt").total == 1  # the old passages stayed


def test_unchanged_update_reads_and_writes_nothing(sandbox):
    app = sandbox.project("app")
    folder = sandbox.folder(app)
    for i in range(6):
        session_file(folder, [f"prompt {i}"], cwd=app)
    index.update()
    before = shard_mtimes()
    listing = sorted(os.listdir(store.index_dir()))
    time.sleep(0.02)
    again = index.update()
    assert (again.read, again.bytes_read, again.passages, again.dropped) == (0, 0, 0, 0)
    found = search("prompt")
    assert found.total == 6 and found.index.indexed_now == 0
    assert shard_mtimes() == before
    assert sorted(os.listdir(store.index_dir())) == listing


def test_truncate_and_rewrite_in_place(sandbox):
    app = sandbox.project("app")
    folder = sandbox.folder(app)
    sid, path = session_file(folder, ["the old ferret phrase"], cwd=app)
    ino = path.stat().st_ino
    index.update()
    conv = Conversation(app, sid, start=T0 + timedelta(days=1))
    with open(path, "r+b") as f:  # same path, same inode, other (longer) content
        f.truncate(0)
        f.write(
            b"".join(
                encode(x) + b"\n"
                for x in [conv.permission_mode(), *conv.exchange("a brand new hamster phrase, longer")]
            )
        )
    assert path.stat().st_ino == ino
    u = index.update()
    assert u.read == 1 and u.bytes_read == path.stat().st_size
    assert search("ferret").total == 0
    found = search("hamster")
    assert ids(found) == [sid] and found.results[0].hits == 1
    assert found.results[0].title == "a brand new hamster phrase, longer"
    # and shorter than before
    with open(path, "r+b") as f:
        f.truncate(0)
        f.write(b"".join(encode(x) + b"\n" for x in conv.exchange("tiny gecko")))
    index.update()
    assert search("hamster").total == 0 and ids(search("gecko")) == [sid]


def test_rewrite_in_place_to_the_same_size(sandbox):
    app = sandbox.project("app")
    folder = sandbox.folder(app)
    _sid, path = session_file(folder, ["my password is hunter2secret"], cwd=app)
    index.update()
    data = path.read_bytes()
    path.write_bytes(data.replace(b"hunter2secret", b"xxxxxxxxxxxxx"))
    assert path.stat().st_size == len(data)
    index.update()
    assert search("hunter2secret").total == 0


def test_deleted_transcript_leaves_the_results(sandbox):
    app = sandbox.project("app")
    folder = sandbox.folder(app)
    _gone, path = session_file(folder, ["the doomed dodo"], cwd=app)
    kept, _ = session_file(folder, ["the surviving dodo"], cwd=app)
    index.update()
    assert search("dodo").total == 2
    path.unlink()
    u = index.update()
    assert u.dropped == 1 and u.files == 1
    assert ids(search("dodo")) == [kept]


def test_replaced_by_rename_is_read_again(sandbox):
    app = sandbox.project("app")
    folder = sandbox.folder(app)
    sid, path = session_file(folder, ["original moose text"], cwd=app)
    index.update()
    data = path.read_bytes().replace(b"original moose text", b"replaced bison text")  # the same size
    tmp = folder / "incoming.tmp"
    tmp.write_bytes(data)
    old_ino = path.stat().st_ino
    os.replace(tmp, path)
    assert path.stat().st_ino != old_ino and path.stat().st_size == len(data)
    u = index.update()
    assert u.read == 1 and u.bytes_read == len(data)
    assert search("moose").total == 0
    assert ids(search("bison")) == [sid] and search("bison").results[0].hits == 1


def test_rebuild_and_progress_status(sandbox):
    app = sandbox.project("app")
    folder = sandbox.folder(app)
    for i in range(5):
        session_file(folder, [f"rebuild target {i}"], cwd=app)
    index.update()
    before = hits_summary(search("rebuild target"))
    assert index.progress_status().updating is False
    done = index.rebuild()
    assert done.read == 5 and not done.busy
    assert hits_summary(search("rebuild target")) == before
    assert index.size() > 0


# ------------------------------------------------------------------------------------ 5. hostile files


def test_hostile_transcript_lines(sandbox):
    app = sandbox.project("app")
    folder = sandbox.folder(app)
    conv = Conversation(app, start=T0)
    bad = encode(conv.prompt("invalid PLACEHOLDER bytes ocelot")).replace(b"PLACEHOLDER", b"\xff\xfe\xc3")
    nested = b'{"type":"user","message":{"role":"user","content":' + b"[" * 10_000 + b"]" * 10_000 + b"}}"
    huge = conv.prompt("x " * (5 * 1024 * 1024) + "narwhal at the very end")
    path = write_session(
        folder, conv.id, [conv.permission_mode(), bad, nested, huge, *conv.exchange("after the nest comes the puffin")]
    )
    assert path.stat().st_size > 10 * 1024 * 1024
    u = index.update()
    assert u.skipped_lines == 1 and u.read == 1
    found = search("ocelot")
    assert ids(found) == [conv.id]
    assert "\ufffd" in found.results[0].snippets[0].text
    found = search('"narwhal at the very end"')
    assert ids(found) == [conv.id]
    assert marked(found.results[0].snippets[0]) == ["narwhal at the very end"]
    assert ids(search("puffin")) == [conv.id]


def test_a_torn_last_line_is_indexed_once_completed(sandbox):
    app = sandbox.project("app")
    folder = sandbox.folder(app)
    conv = Conversation(app, start=T0)
    torn = encode(conv.prompt("the torn toucan line")) + b"\n"
    path = write_session(
        folder, conv.id, [conv.permission_mode(), *conv.exchange("complete start")], unterminated=torn[:-20]
    )
    u = index.update()
    assert u.skipped_lines == 0
    assert search("toucan").total == 0 and search("complete start").total == 1
    assert index.update().bytes_read == 0  # nothing new: not read again
    with open(path, "ab") as f:
        f.write(torn[-20:])
    u = index.update()
    assert u.passages == 1 and u.bytes_read == len(torn)
    found = search("toucan")
    assert ids(found) == [conv.id] and found.results[0].hits == 1
    assert index.update().bytes_read == 0
    assert search("toucan").results[0].hits == 1


@pytest.mark.process
def test_fifo_and_symlinked_transcripts_are_not_read(sandbox):
    app = sandbox.project("app")
    folder = sandbox.folder(app)
    real, _ = session_file(folder, ["a real emu transcript"], cwd=app)
    os.mkfifo(folder / f"{uuid.uuid4()}.jsonl")
    elsewhere = sandbox.root / "elsewhere"
    target_id, target = session_file(elsewhere, ["a symlinked emu capybara"], cwd=app)
    os.symlink(target, folder / f"{target_id}.jsonl")
    (folder / real / "subagents").mkdir(parents=True)
    os.mkfifo(folder / real / "subagents" / "agent-fifo.jsonl")
    done = sandbox.run("index", "--json")  # a subprocess: a hang would fail, not freeze, the run
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["files"] == 1 and report["read"] == 1 and report["errors"] == []
    assert ids(search("emu")) == [real]
    assert search("capybara").total == 0


def _shard_with_data(sandbox, k: int) -> tuple[str, str]:
    app = sandbox.project("app")
    folder = sandbox.folder(app)
    sid, _ = session_file(folder, ["the shard resident jackal"], sid=id_in_shard(folder, k), cwd=app)
    for i in range(4):
        session_file(folder, [f"jackal neighbour {i}"], sid=id_in_shard(folder, (k + 1 + i) % store.SHARDS), cwd=app)
    assert index.update().read == 5
    assert search("jackal").total == 5
    return app, sid


def _is_ours(k: int) -> bool:
    conn = sqlite3.connect(store.shard_path(k))
    try:
        return conn.execute("PRAGMA application_id").fetchone()[0] == store.APPLICATION_ID
    finally:
        conn.close()


def test_a_corrupt_shard_is_rebuilt_by_the_next_search(sandbox):
    _, sid = _shard_with_data(sandbox, 0)
    for suffix in ("-wal", "-shm"):
        Path(f"{store.shard_path(0)}{suffix}").unlink(missing_ok=True)
    store.shard_path(0).write_bytes(os.urandom(64) + b"not a database " * 4096)
    found = search("resident jackal")
    assert ids(found) == [sid] and found.problems == []
    assert search("jackal").total == 5
    assert _is_ours(0)


def test_a_foreign_sqlite_database_is_rebuilt(sandbox):
    _, sid = _shard_with_data(sandbox, 0)
    store.remove(0)
    conn = sqlite3.connect(store.shard_path(0))
    conn.execute("CREATE TABLE files(path TEXT, secret TEXT)")
    conn.execute("INSERT INTO files VALUES ('x', 'y')")
    conn.commit()
    conn.close()
    found = search("resident jackal")
    assert ids(found) == [sid] and found.problems == []
    assert _is_ours(0)
    conn = sqlite3.connect(store.shard_path(0))
    assert (
        conn.execute("SELECT count(*) FROM sqlite_master WHERE name='files' AND sql LIKE '%secret%'").fetchone()[0] == 0
    )
    conn.close()


@pytest.mark.process
def test_a_symlink_in_place_of_a_shard_is_refused(sandbox):
    _shard_with_data(sandbox, 1)
    store.remove(1)
    victim = sandbox.root / "victim.db"
    os.symlink(victim, store.shard_path(1))
    with pytest.raises(safefs.UnsafeState) as err:
        search("jackal")
    assert isinstance(err.value, C3Error) and "symlink" in str(err.value)
    assert not victim.exists() and store.shard_path(1).is_symlink()
    done = sandbox.run("search", "--all", "jackal")
    assert done.returncode == 1 and "symlink" in done.stderr and "Traceback" not in done.stderr
    assert not victim.exists()


@pytest.mark.process
def test_a_copy_put_aside_by_an_earlier_run_is_removed(sandbox):
    _shard_with_data(sandbox, 0)
    store.aside_path(0).write_bytes(b"a damaged shard an earlier run put aside")
    decoy = sandbox.root / "decoy.db"
    decoy.write_bytes(b"not ours")
    os.symlink(decoy, store.aside_path(1))
    done = sandbox.run("index")  # nothing to index: the copies go all the same
    assert done.returncode == 0, done.stderr
    assert not os.path.lexists(store.aside_path(0)) and not os.path.lexists(store.aside_path(1))
    assert decoy.read_bytes() == b"not ours"


@pytest.mark.process
@pytest.mark.parametrize("left", [0, 96 * 1024], ids=["brim-full", "full-while-writing"])
def test_a_full_disk_is_said_and_a_healthy_shard_kept_as_it_is(claude, left):
    """The index's disk full, to the brim or while a big transcript is written into a shard:
    ``index`` and ``search`` say the disk is full (never that the index is damaged), no shard is
    put aside or replaced, and both work once space is freed."""
    from stress.fulldisk import fill, free_up, mounted

    with mounted(claude.root / "small-home") as home:
        if home is None:
            pytest.skip("mounting a tmpfs needs root")
        env = claude.env(C3_HOME=str(home))
        app = claude.project("app")
        folder = claude.folder(app)
        first, _ = session_file(folder, ["the first lemur"], cwd=app)
        assert claude.run("index", env=env).returncode == 0
        shards = home / "search"
        inodes = {k: (shards / f"index-{k}.db").stat().st_ino for k in range(store.SHARDS)}
        fill(home, leave=left)
        words = " ".join(f"lemur{i}x{uuid.uuid4().hex}" for i in range(20_000))  # ~900 KB to index
        later, _ = session_file(folder, ["the later lemur", words], cwd=app)
        for args in (["index"], ["search", "lemur", "--all"]) if not left else (["index"],):
            done = claude.run(*args, env=env)
            assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
            assert "is full" in done.stderr and "bytes free" in done.stderr, done.stderr
            assert "damaged" not in done.stderr, done.stderr
        assert not [n for n in os.listdir(shards) if "aside" in n]
        assert {k: (shards / f"index-{k}.db").stat().st_ino for k in range(store.SHARDS)} == inodes
        free_up(home)
        assert claude.run("index", env=env).returncode == 0
        done = claude.run("search", "lemur", "--all", "--json", env=env)
        assert done.returncode == 0, done.stderr
        assert {r["id"] for r in json.loads(done.stdout)["results"]} == {first, later}
        assert {k: (shards / f"index-{k}.db").stat().st_ino for k in range(store.SHARDS)} == inodes


@pytest.mark.process
def test_a_held_lock_does_not_make_search_wait(sandbox):
    app = sandbox.project("app")
    folder = sandbox.folder(app)
    indexed, _ = session_file(folder, ["the indexed meerkat"], cwd=app)
    index.update()
    later, _ = session_file(folder, ["the later meerkat"], cwd=app)
    code = (
        "import sys, time\nfrom c3async.ground.locking import locked\nfrom c3async.search import index\n"
        "with locked(index.lock_path()):\n    print('held', flush=True)\n    time.sleep(60)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], env=sandbox.env(), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        found = search("meerkat")
        assert time.monotonic() - started < 30  # the holder keeps the lock for 60 s
        assert ids(found) == [indexed]
        assert found.index.updating is True and found.index.pending_bytes > 0
        u = index.update()
        assert u.busy and u.read == 0
        assert index.progress_status().updating is False  # a lock holder that is no first build: no progress
        cli = sandbox.run("search", "--all", "meerkat")
        assert cli.returncode == 0 and "being built by another process" in cli.stderr
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    found = search("meerkat")
    assert set(ids(found)) == {indexed, later} and found.index.updating is False


@pytest.mark.process
def test_background_build_for_threaded_doors(sandbox, monkeypatch):
    app = sandbox.project("app")
    folder = sandbox.folder(app)
    sid, _ = session_file(folder, ["the background beaver"], cwd=app)
    monkeypatch.setattr(search_mod, "INLINE_BYTES", 1)
    found = search("beaver", background=True)
    assert found.total == 0 and found.index.pending_bytes > 0  # answered from the (empty) index
    for proc in list(index._spawned):
        assert proc.wait(timeout=60) == 0
    assert ids(search("beaver", background=True)) == [sid]


# ------------------------------------------------------------------------------------ 7. parallel first build


PARALLEL_BUILD = """
import sys, msgspec
from c3async.search import index
index.PROCESS_MIN_BYTES = 1
sys.stdout.buffer.write(msgspec.json.encode(index.update()))
"""


@pytest.mark.process
def test_parallel_first_build_equals_a_serial_one(sandbox, monkeypatch):
    app = sandbox.project("app")
    folder = sandbox.folder(app)
    for i in range(16):
        conv = Conversation(app, start=T0 + timedelta(hours=i))
        write_session(
            folder,
            conv.id,
            [
                conv.permission_mode(),
                *conv.exchange(f"common word number{i}"),
                *conv.tool_round(f"tool output serial{i}"),
                *conv.filler(64 * 1024),
                *conv.exchange(f"closing common remark {i % 3}"),
            ],
        )
    # in a process of its own: one with threads (this one may have some left) never forks workers
    built = subprocess.run(
        [sys.executable, "-c", PARALLEL_BUILD], env=sandbox.env(), capture_output=True, text=True, timeout=120
    )
    assert built.returncode == 0, built.stderr
    parallel = SimpleNamespace(**json.loads(built.stdout))
    cores = len(os.sched_getaffinity(0))
    if cores >= 2:
        assert parallel.workers >= 1, "a machine with 2+ cores builds with worker processes"
    queries = [
        ("common", {}),
        ("number7", {}),
        ("closing remark", {}),
        ("serial3", {"tools": True}),
        ("ok*", {"tools": True}),
    ]
    want = {q: hits_summary(search(q, limit=200, **kw)) for q, kw in queries}
    monkeypatch.setenv("C3_HOME", str(sandbox.root / "c3home-serial"))
    serial = index.update(processes=False)
    assert serial.workers == 0
    for field in ("files", "read", "bytes_read", "passages", "skipped_lines"):
        assert getattr(serial, field) == getattr(parallel, field), field
    for q, kw in queries:
        assert hits_summary(search(q, limit=200, **kw)) == want[q], q
    assert len(want["common"]) == 16


# ------------------------------------------------------------------------------------ 6. doors: CLI


@pytest.mark.process
def test_cli_search_text_output(corpus):
    c = corpus.claude
    done = c.run("search", "quokka", "--project", corpus.app)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("1 session match")
    assert "Start the data migration" in out
    assert "user: " in out and "silver «quokka» migration" in out
    assert f"cd {corpus.app} && claude --resume {corpus.ids['big']}" in out
    # the default project is the current directory's
    here = c.run("search", "lynx", cwd=corpus.docs)
    assert here.returncode == 0 and corpus.ids["lynx_docs"] in here.stdout and corpus.ids["lynx_app"] not in here.stdout
    every = c.run("search", "lynx", "--all", "--json")
    assert {r["id"] for r in json.loads(every.stdout)["results"]} == {corpus.ids["lynx_app"], corpus.ids["lynx_docs"]}
    sub = c.run("search", "heliotrope", "--project", corpus.app)
    assert "user (sub-agent): " in sub.stdout and "«heliotrope»" in sub.stdout
    none = c.run("search", "nosuchwordanywhere", "--project", corpus.app)
    assert none.returncode == 0 and none.stdout == "" and "no session matches" in none.stderr


@pytest.mark.process
def test_cli_escapes_hostile_text(corpus):
    done = corpus.claude.run("search", "kestrel", "--project", corpus.app)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "\\x1b]0;pwned\\x07" in done.stdout and "«kestrel»" in done.stdout
    js = corpus.claude.run("search", "kestrel", "--project", corpus.app, "--json")
    assert "\x1b" not in js.stdout
    (r,) = json.loads(js.stdout)["results"]
    assert r["snippets"][0]["text"] == HOSTILE_PROMPT


@pytest.mark.process
def test_cli_search_json_shape(corpus):
    done = corpus.claude.run("search", "pangolin", "--all", "--json", "--role", "user", "--limit", "5")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["query"] == "pangolin" and doc["total"] == 1 and doc["problems"] == []
    assert set(doc["index"]) >= {"files", "updating", "pending_bytes", "indexed_now"}
    assert doc["index"]["files"] == len(corpus.paths) and doc["index"]["updating"] is False
    (r,) = doc["results"]
    assert r["id"] == corpus.ids["role_user"]
    assert {
        "id",
        "folder",
        "path",
        "cwd",
        "title",
        "title_source",
        "branch",
        "last_ts",
        "score",
        "hits",
        "snippets",
        "project",
        "age",
        "resume",
    } <= set(r)
    assert r["project"] == corpus.app and r["title_source"] == "prompt"
    (sn,) = r["snippets"]
    assert sn["role"] == "user" and sn["sidechain"] is False
    assert [sn["text"][a:b] for a, b in sn["marks"]] == ["pangolin"]
    for flag, value in (("--since", "2026-06-01"), ("--until", "2026-04-01"), ("--branch", "feature/axo")):
        got = json.loads(corpus.claude.run("search", "chinchilla OR axolotl", "--all", "--json", flag, value).stdout)
        expect = {"--since": {"june"}, "--until": {"march"}, "--branch": {"on_feature"}}[flag]
        assert {r["id"] for r in got["results"]} == {corpus.ids[n] for n in expect}, flag
    tools = json.loads(corpus.claude.run("search", "zanzibar", "--all", "--json", "--tools").stdout)
    assert [r["id"] for r in tools["results"]] == [corpus.ids["tool"]]


@pytest.mark.process
@pytest.mark.parametrize(
    "argv",
    [
        ["search"],
        ["search", "x", "--role", "system"],
        ["search", "x", "--limit", "many"],
        ["search", "x", "--limit", "-3"],
        ["search", "x", "--bogus"],
        ["index", "--bogus"],
    ],
)
def test_cli_usage_errors_exit_2(corpus, argv):
    done = corpus.claude.run(*argv)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "usage" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.process
@pytest.mark.parametrize(
    "query, message",
    [
        ("!!! ---", "nothing to search for"),
        ("-only", "at least one word"),
        ("x" * 10_000, "too long"),
    ],
)
def test_cli_bad_query_exits_1_with_a_message(corpus, query, message):
    done = corpus.claude.run("search", "--all", "--", query)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("c3async: error: ") and message in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.process
def test_cli_bad_since_exits_1(corpus):
    done = corpus.claude.run("search", "quokka", "--all", "--since", "last tuesday")
    assert done.returncode == 1 and "since" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.process
def test_cli_index_json(corpus):
    done = corpus.claude.run("index", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["files"] == len(corpus.paths)
    assert (doc["read"], doc["bytes_read"], doc["busy"], doc["errors"]) == (0, 0, False, [])
    assert doc["size_bytes"] > 0 and doc["size_bytes"] == index.size()
    quiet = corpus.claude.run("index", "--quiet")
    assert quiet.returncode == 0 and quiet.stdout == ""
    plain = corpus.claude.run("index")
    assert plain.returncode == 0 and plain.stdout.startswith(f"{len(corpus.paths)} transcripts; indexed 0")


# ------------------------------------------------------------------------------------ 6. doors: MCP over stdio


@pytest.mark.process
async def test_mcp_search_over_stdio(corpus):
    from mcp import Client, StdioServerParameters

    c = corpus.claude
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "c3async", "serve"],
        env=c.env(CLAUDE_PROJECT_DIR=corpus.app, C3_HEARTBEAT_INTERVAL_S="0.2"),
        cwd=corpus.app,
    )

    def text_of(result) -> str:
        return "\n".join(block.text for block in result.content)

    async with Client(params, mode="legacy") as client:
        got = await client.call_tool("c3_session", {"action": "search", "target": "quokka"})
        out = text_of(got)
        assert not got.is_error, out
        assert "1 session(s) match 'quokka'" in out
        assert f"1. {corpus.ids['big'][:8]}" in out and "Start the data migration" in out
        assert "user: " in out and "silver «quokka» migration" in out
        assert f"resume: cd {corpus.app} && claude --resume {corpus.ids['big']}" in out

        got = await client.call_tool("c3_session", {"action": "search", "target": "lynx"})
        out = text_of(got)
        assert corpus.ids["lynx_app"][:8] in out and corpus.ids["lynx_docs"][:8] not in out
        got = await client.call_tool("c3_session", {"action": "search", "target": "lynx", "data": "all limit=1"})
        out = text_of(got)
        assert not got.is_error and "2 session(s) match" in out and "... 1 more" in out

        got = await client.call_tool(
            "c3_session",
            {"action": "search", "target": "pangolin scales", "data": "all role=assistant since=2026-04-01 limit=5"},
        )
        out = text_of(got)
        assert not got.is_error and corpus.ids["role_assistant"][:8] in out and corpus.ids["role_user"][:8] not in out
        got = await client.call_tool("c3_session", {"action": "search", "target": "zanzibar", "data": "tools"})
        assert corpus.ids["tool"][:8] in text_of(got)

        got = await client.call_tool("c3_session", {"action": "search", "target": "heliotrope"})
        assert "(sub-agent)" in text_of(got) and corpus.ids["parent"][:8] in text_of(got)

        got = await client.call_tool("c3_session", {"action": "search", "target": "nosuchwordanywhere"})
        assert not got.is_error and "no session matches" in text_of(got)

        for data, message in (
            ("bogus=1", "unknown option"),
            ("limit=many", "limit=N takes a number"),
            ("role=system", "role"),
            ("since=whenever", "since"),
        ):
            got = await client.call_tool("c3_session", {"action": "search", "target": "quokka", "data": data})
            out = text_of(got)
            assert got.is_error, out
            assert message in out and "Traceback" not in out and "failed inside" not in out, out
        got = await client.call_tool("c3_session", {"action": "search", "target": "!!!"})
        assert got.is_error and "nothing to search for" in text_of(got)
        got = await client.call_tool("c3_session", {"action": "search"})
        assert got.is_error and "target" in text_of(got)


# ------------------------------------------------------------------------------------ review findings


def test_two_values_on_a_line_and_a_blank_line_keep_passages_on_their_lines(sandbox):
    # decode_lines skips blank lines, so two values on one line plus a blank line elsewhere
    # made the counts agree one line off: hits then pointed at the wrong lines.
    app = sandbox.project("app")
    folder = sandbox.folder(app)
    conv = Conversation(app, start=T0)
    first = encode(conv.prompt("the first okapi prompt"))
    glued = encode(conv.prompt("glued one")) + encode(conv.prompt("glued two"))
    last = encode(conv.prompt("the last pangolin prompt"))
    path = folder / f"{conv.id}.jsonl"
    path.write_bytes(first + b"\n" + glued + b"\n\n" + last + b"\n")
    for word, line in (("okapi", first), ("pangolin", last)):
        [hit] = search(word).results
        [snippet] = hit.snippets
        assert word in marked(snippet)[0]
        data = path.read_bytes()
        assert data[snippet.offset : snippet.offset + len(line)] == line


def test_a_legacy_agent_files_session_id_must_be_an_id(sandbox):
    # The id in a legacy agent-*.jsonl's lines ends up in a shell command: anything else is refused.
    app = sandbox.project("app")
    folder = sandbox.folder(app)
    conv = Conversation(app, "x$(touch /tmp/pwned)", start=T0, sidechain=True)
    write_session(folder, "agent-0a1b2c3d", [conv.prompt("the tapir incident")])
    found = search("tapir")
    assert found.results == [] or all("$(" not in r.resume for r in found.results)
