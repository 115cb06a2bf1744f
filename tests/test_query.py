"""The one query every door runs (``sessions.query``), in process: filters, words, evidence, fork
trees, orders and the per-project counts, over rows built by hand."""

from __future__ import annotations

from c3async.sessions import query
from c3async.sessions.rows import Row, RowTokens
from c3async.stores.marks import Note, Stale


def row(sid: str, *, project: str = "/p", ns: int = 0, **fields) -> Row:
    base = dict(
        id=sid,
        title=f"title of {sid}",
        title_truncated=False,
        title_source="custom",
        first_prompt=None,
        first_prompt_truncated=False,
        last_prompt=None,
        last_prompt_truncated=False,
        branch="main",
        cwd=project,
        project=project,
        created_at=None,
        last_activity=None,
        mtime="2026-12-01T00:00:00.000Z",
        mtime_ns=ns,
        size=1,
        user_turns=1,
        user_turns_exact=True,
        began_with_clear=False,
        entrypoint="cli",
        path=f"/t/{sid}",
        resume="",
    )
    base.update(fields)
    return Row(**base)


def test_filters_and_words() -> None:
    rows = [
        row("a", hints=["idle 9d"], ns=5),
        row(
            "b", hints=["short"], marked=True, note=Note(summary="budget for the retry", next_steps=None, ts=1.0), ns=4
        ),
        row("c", stale=Stale(reason="superseded", successor=None, by="user", ts=1.0), marked=True, ns=3),
        row("d", live=True, state="waiting", ns=2),
        row("e", expires_in_days=3, ns=1),
    ]
    assert [query.filters_of(r) for r in rows] == [
        {"all", "likely"},
        {"all"},
        {"all", "stale"},
        {"all", "live", "waiting"},
        {"all", "expiring"},
    ]
    # Every word, in any order, anywhere in the row's text (casefolded).
    assert [r.id for r in rows if query.matches(query.haystack(r), query.words("Retry BUDGET"))] == ["b"]
    assert [r.id for r in rows if query.matches(query.haystack(r), query.words("retry nothing"))] == []


def test_evidence_orders_the_likely_filter() -> None:
    rows = [
        row("new", branch="feat", ns=9),
        row("idle", hints=["idle 10d"], branch="feat", ns=8),  # a newer session on its branch too
        row("cleared", hints=["ended by /clear"], branch="other", ns=7),
    ]
    found = query.select(query.entries(rows), query.Query(filter="likely"))
    assert found.sort == "evidence" and [e.row.id for e in found.hits] == ["cleared", "idle"]
    idle = next(e for e in found.hits if e.row.id == "idle")
    assert idle.why == ["idle 10d", "newer on branch feat"] and idle.score == 40


def test_forks_sit_under_their_root() -> None:
    rows = [row("root", ns=3), row("fork", forked_from="root", ns=2), row("forkfork", forked_from="fork", ns=1)]
    entries = query.entries(rows)
    assert {e.row.id: (e.root, e.fork_count) for e in entries} == {
        "root": (None, 2),
        "fork": ("root", 0),
        "forkfork": ("root", 0),
    }
    listed = query.select(entries, query.Query())
    assert [e.row.id for e in listed.hits] == ["root"] and listed.matched == 3
    under = query.select(entries, query.Query(forks_of="root"))
    assert sorted(e.row.id for e in under.hits) == ["fork", "forkfork"]
    flat = query.select(entries, query.Query(grouped=False))
    assert [e.row.id for e in flat.hits] == ["root", "fork", "forkfork"]


def test_orders_and_counts_per_project() -> None:
    tokens = RowTokens(input=1, output=1, cache_write=0, cache_read=0, total=2)
    rows = [
        row("x1", project="/x", size=30, title="beta", ns=3, live=True, state="waiting"),
        row("y1", project="/y", size=10, title="Alpha", ns=2, tokens=tokens, cost_usd=0.5),
        row("x2", project="/x", size=20, title="gamma", ns=1),
    ]
    entries = query.entries(rows)
    ids = lambda q: [e.row.id for e in query.select(entries, q).hits]  # noqa: E731
    assert ids(query.Query(sort="size")) == ["x1", "x2", "y1"]
    assert ids(query.Query(sort="title", order="asc")) == ["y1", "x1", "x2"]
    assert ids(query.Query(sort="cost")) == ["y1", "x1", "x2"]
    only_x = query.select(entries, query.Query(project="/x", q="a"))
    assert [e.row.id for e in only_x.hits] == ["x1", "x2"]
    assert only_x.by_project == {"/x": 2, "/y": 1}  # whatever the project asked: the rail's counts
    assert only_x.counts["all"] == 2 and only_x.waiting == {"/x": 1}
