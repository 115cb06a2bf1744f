"""The sessions view: the chain from every source, marks and links on a session's first turn,
links stored by prefix, removed worktrees, and the house rule that the catalog knows nothing of
marks, liveness, tasks or records."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from c3async.ground.errors import AmbiguousSession, UnknownSession
from c3async.ground.project import resolve
from c3async.sessions import act, detail, refs, view
from c3async.stores import activity, records
from c3async.tasks import actions, store
from stress.transcripts import Conversation, simple_session, text, write_session

NOW = datetime.now(UTC)


@pytest.fixture(autouse=True)
def _in_process(claude, monkeypatch):
    """The library runs in this process: point it at the sandbox."""
    claude.activate(monkeypatch)


def _session(folder, cwd, prompts, *, start, first=None):
    conv = Conversation(cwd, start=start)
    lines = [conv.permission_mode()]
    if first == "clear":
        lines += [conv.caveat(), conv.clear(), conv.local_stdout()]
    for p in prompts:
        lines += conv.exchange(p)
    write_session(folder, conv.id, lines, mtime=conv.clock.timestamp())
    return conv.id, conv.clock


def rows_of(project: str) -> dict:
    _, rows = view.list_rows_sync([resolve(project)], processes=False)
    return {r.id: r for r in rows}


@pytest.mark.process
def test_the_chain_joins_every_source_and_walks_to_both_ends(claude) -> None:
    proj = claude.project("app")
    folder = claude.folder(proj)
    start = NOW - timedelta(hours=5)
    a, _ = _session(folder, proj, ["a1", "a2", "a3"], start=start)
    b, _ = _session(folder, proj, ["b1", "b2", "b3"], start=start + timedelta(hours=1))
    c, c_end = _session(folder, proj, ["c1", "c2", "c3"], start=start + timedelta(hours=2))
    d, _ = _session(folder, proj, ["d1", "d2", "d3"], start=c_end + timedelta(seconds=0.2), first="clear")
    act.mark(resolve(proj), a, "stale", reason="superseded", successor=b)  # a judgement
    activity.record(resolve(proj), "session_start", session_id=c, source="clear", predecessor=b)  # the hooks' fact
    # c -> d: only the timing says so (d began with /clear right after c's last line)
    rows = rows_of(proj)
    # A row names its neighbours; the detail walks the whole chain to both ends, nearest first.
    assert (rows[a].chain_prev, rows[a].chain_next) == ([], [b])
    assert (rows[b].chain_prev, rows[b].chain_next) == ([a], [c])
    assert (rows[d].chain_prev, rows[d].chain_next) == ([c], [])
    whole = {sid: detail.show(resolve(proj), sid).chain for sid in (a, b, d)}
    assert (whole[a].predecessors, whole[a].successors) == ([], [b, c, d])
    assert (whole[d].predecessors, whole[d].successors) == ([c, b, a], [])
    assert (whole[b].predecessors, whole[b].successors) == ([a], [c, d])
    # The same in `sessions --json` (neighbours, no whole chain) and in `show --json` and `show`.
    listed = claude.rows_by_id(proj)[b]
    assert (listed["chain_prev"], listed["chain_next"]) == ([a], [c]) and "chain" not in listed
    shown = claude.run("show", b[:8], "--project", proj, "--json")
    assert json.loads(shown.stdout)["chain"] == {"predecessors": [a], "successors": [c, d]}
    shown = detail.render(detail.show(resolve(proj), b[:8]))
    assert f"predecessors: {a}" in shown and f"successors: {c}, {d}" in shown
    # A cycle (a mistaken mark) never loops and lists each session once.
    act.mark(resolve(proj), d, "stale", reason="went back", successor=a)
    chained = detail.show(resolve(proj), b).chain
    assert chained.predecessors == [a, d, c] and chained.successors == [c, d, a]


@pytest.mark.process
def test_a_plan_handoff_joins_the_chain_both_ways(claude) -> None:
    # Accepting a plan with "clear context": a new session whose first prompt (the plan, over
    # the 2,000 characters a row keeps) names the previous session's transcript at its end.
    proj = claude.project("app")
    folder = claude.folder(proj)
    start = NOW - timedelta(hours=2)
    planned, _ = _session(folder, proj, ["plan the importer", "what about the errors?"], start=start)
    other, _ = _session(folder, proj, ["unrelated"], start=start + timedelta(minutes=5))
    conv = Conversation(proj, start=start + timedelta(minutes=30))
    plan = "\n".join(f"{i}. change the importer's step {i} " + "carefully " * 10 for i in range(40))
    lines = [
        conv.permission_mode(),
        conv.plan_handoff(plan, str(folder / f"{planned}.jsonl")),
        *conv.reply(),
        *conv.exchange("run the tests"),
    ]
    write_session(folder, conv.id, lines)
    rows = rows_of(proj)
    assert (rows[planned].chain_prev, rows[planned].chain_next) == ([], [conv.id])
    assert (rows[conv.id].chain_prev, rows[conv.id].chain_next) == ([planned], [])
    assert rows[conv.id].first_prompt_truncated and rows[conv.id].last_prompt == "run the tests"
    assert (rows[other].chain_prev, rows[other].chain_next) == ([], [])
    listed = claude.rows_by_id(proj)
    assert listed[planned]["chain_next"] == [conv.id] and listed[conv.id]["chain_prev"] == [planned]
    assert detail.show(resolve(proj), planned).chain.successors == [conv.id]
    assert f"predecessors: {planned}" in detail.render(detail.show(resolve(proj), conv.id))


def test_a_first_turn_note_needs_no_transcript(claude) -> None:
    proj = claude.project("app")
    simple_session(claude.folder(proj), proj, "someone else's session")
    host = str(uuid.uuid4())  # Claude Code has not flushed this session's transcript yet
    written, found = act.mark(
        resolve(proj), None, "note", host=host, by="agent", summary="first turn", next_steps="more"
    )
    assert written.id == host and written.by_session == host and not found.elsewhere
    written, _ = act.mark(resolve(proj), host[:8], "stale", host=host, by="agent", reason="done early")
    assert written.id == host
    task = act.run_task(resolve(proj), actions.Who(session=host), "add", title="from the first turn")
    linked = act.run_task(resolve(proj), actions.Who(session=host), "link", task_id=task["id"], ref="current")
    assert linked["sessions"] == [host]
    # A person's typed id still needs a transcript or a record.
    with pytest.raises(UnknownSession):
        act.mark(resolve(proj), str(uuid.uuid4()), "note", summary="typo")
    # Once the transcript appears, the row carries what was written before it existed.
    simple_session(claude.folder(proj), proj, "the first turn", session_id=host)
    row = rows_of(proj)[host]
    assert row.note is not None and row.note.summary == "first turn"
    assert [t.title for t in row.links.tasks] == ["from the first turn"]


def test_a_session_a_record_served_resolves_without_a_transcript(claude) -> None:
    proj = claude.project("app")
    served = str(uuid.uuid4())
    rec = records.new_record(str(uuid.uuid4()), "vscode", proj)
    rec.serve(served)
    records.save(resolve(proj), rec)
    assert refs.resolve_ref(resolve(proj), served[:8]) == served


def test_links_resolve_prefixes_once(claude) -> None:
    proj = claude.project("app")
    folder = claude.folder(proj)
    sid = simple_session(folder, proj, "the linked one")
    other = simple_session(folder, proj, "another")
    who = actions.Who(session=other)
    task = act.run_task(resolve(proj), who, "add", title="ship it")
    linked = act.run_task(resolve(proj), who, "link", task_id=task["id"], ref=sid[:8])
    assert sid in linked["sessions"]  # stored as the full id
    again = act.run_task(resolve(proj), who, "link", task_id=task["id"], ref=sid)
    assert again["sessions"].count(sid) == 1  # no duplicate link
    with pytest.raises(UnknownSession):
        act.run_task(resolve(proj), who, "link", task_id=task["id"], ref="ffff0000")
    # An earlier version stored the prefix as typed: it still shows on the row, once.
    path = store.file_path(resolve(proj))
    doc = json.loads(path.read_bytes())
    doc["tasks"][0]["sessions"].append(sid[:8])
    path.write_text(json.dumps(doc))
    assert [t.title for t in rows_of(proj)[sid].links.tasks] == ["ship it"]


def test_an_ambiguous_prefix_names_the_candidates(claude) -> None:
    proj = claude.project("app")
    folder = claude.folder(proj)
    a = simple_session(folder, proj, "one", session_id="abcd0000-0000-4000-8000-000000000001")
    b = simple_session(folder, proj, "two", session_id="abcd0000-0000-4000-8000-000000000002")
    with pytest.raises(AmbiguousSession) as err:
        refs.resolve_ref(resolve(proj), "abcd")
    assert a in str(err.value) and b in str(err.value)


def test_a_removed_worktree_keeps_its_sessions_with_a_hint(claude, monkeypatch) -> None:
    from test_state_root import git, repo, worktree

    base = claude.root / "work"
    base.mkdir(parents=True, exist_ok=True)
    proj = repo(base, "repo")
    gone = worktree(proj, "../repo-feature", "feature")
    sid = simple_session(claude.folder(gone), gone, "work on the feature", branch="feature")
    rec = records.new_record(str(uuid.uuid4()), "vscode", gone)
    rec.serve(sid)
    records.save(resolve(proj), rec)
    assert sid in rows_of(proj)  # seen while git lists it: remembered in $C3_HOME
    git("worktree", "remove", "--force", gone, cwd=proj)
    row = rows_of(proj)[sid]
    assert row.cwd == gone and row.cwd_gone and "worktree gone" in row.hints
    assert row.resume.startswith("git worktree add ") and "feature" in row.resume and sid in row.resume


def test_a_record_alone_does_not_vouch_for_a_folder(claude) -> None:
    """A C3 record (which a cloned repository can ship) naming a folder outside the project's
    checkouts brings none of that folder's sessions into the listing."""
    proj = claude.project("repo")
    elsewhere = claude.root / "work" / "elsewhere"
    sid = simple_session(claude.folder(str(elsewhere)), str(elsewhere), "not this project's")
    rec = records.new_record(str(uuid.uuid4()), "vscode", str(elsewhere))
    rec.serve(sid)
    records.save(resolve(proj), rec)
    assert sid not in rows_of(proj)


@pytest.mark.process
def test_the_catalog_imports_nothing_above_it() -> None:
    code = (
        "import sys, c3async.catalog, c3async.catalog.scan, c3async.catalog.resolve, "
        "c3async.catalog.gitrefs; print(sorted(m for m in sys.modules if m.startswith('c3async')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = set(eval(out))
    for above in (
        "c3async.stores.marks",
        "c3async.live",
        "c3async.tasks",
        "c3async.stores.records",
        "c3async.sessions",
        "c3async.stores.activity",
    ):
        assert not any(m == above or m.startswith(above + ".") for m in loaded), (above, loaded)


def _usage_session(folder, cwd, replies: int, *, start) -> tuple[str, Conversation, object]:
    """A session of ``replies`` exchanges; each reply is two block lines that count once, with
    tests/transcripts.py's usage (opus 4.5)."""
    conv = Conversation(cwd, start=start)
    lines = [conv.permission_mode()]
    for i in range(replies):
        lines += [conv.prompt(f"step {i}"), *conv.reply(text("Looking."), text("Done."))]
    path = write_session(folder, conv.id, lines, mtime=conv.clock.timestamp())
    return conv.id, conv, path


PER_REPLY = (3, 28, 3296, 11331)  # input, output, cache write (5 min), cache read
PER_REPLY_USD = (3 * 5 + 28 * 25 + 3296 * 6.25 + 11331 * 0.5) / 1e6


def _expect(row, replies: int) -> None:
    t = row.tokens
    assert t is not None and row.cost_usd is not None
    assert (t.input, t.output, t.cache_write, t.cache_read) == tuple(n * replies for n in PER_REPLY)
    assert t.total == sum(PER_REPLY) * replies and row.unpriced_models == []
    assert abs(row.cost_usd - PER_REPLY_USD * replies) < 1e-6


@pytest.mark.process
def test_rows_carry_what_the_accountant_last_wrote(claude) -> None:
    from c3async.usage import totals
    from c3async.usage.account import account

    proj = claude.project("app")
    folder = claude.folder(proj)
    start = NOW - timedelta(hours=3)
    two, _, _ = _usage_session(folder, proj, 2, start=start)
    five, conv, path = _usage_session(folder, proj, 5, start=start + timedelta(hours=1))
    # Not accounted yet: the listing shows nothing, and never runs the accountant itself.
    rows = rows_of(proj)
    assert (rows[two].tokens, rows[two].cost_usd) == (None, None)
    assert not totals.stats_path(resolve(proj)).exists()
    assert view.project_usage(resolve(proj)) == view.ProjectUsage()
    account(resolve(proj), processes=False)
    rows = rows_of(proj)
    _expect(rows[two], 2)
    _expect(rows[five], 5)
    assert rows[five].tokens is not None and rows[five].tokens.as_of > start.timestamp()
    # A session appended to: this process's listing tails the stats log once the accountant ran.
    from stress.transcripts import append_lines

    append_lines(path, [conv.prompt("one more"), *conv.reply(text("Done."))])
    assert rows_of(proj)[five].tokens == rows[five].tokens  # what it last wrote, until it runs
    account(resolve(proj), processes=False)
    _expect(rows_of(proj)[five], 6)
    # A row folded in from a worktree's old state (older, written after) changes nothing.
    with open(totals.stats_path(resolve(proj)), "a") as f:
        f.write(json.dumps({"session_id": five, "ts": 1.0, "input": 1, "cost_usd": 9.0}) + "\n")
    _expect(rows_of(proj)[five], 6)
    # The project's sum, for the Hub's rail; the detail as text.
    usage = view.project_usage(resolve(proj))
    assert usage.sessions == 2 and usage.tokens is not None and usage.tokens.total == sum(PER_REPLY) * 8
    assert usage.cost_usd is not None and abs(usage.cost_usd - PER_REPLY_USD * 8) < 1e-6
    shown = detail.render(detail.show(resolve(proj), two[:8])).splitlines()
    assert "tokens: 29,316 (input 6, output 56, cache write 6,592, cache read 22,662); cost $0.05" in shown
    # Another process (the CLI) starts from the fold's checkpoint or the log: the same figures.
    (cli,) = [r for r in claude.sessions(proj) if r["id"] == five]
    assert cli["tokens"] == msgspec.to_builtins(rows_of(proj)[five].tokens)


def test_an_unpriced_model_shows_its_tokens_but_no_cost(claude) -> None:
    from c3async.usage.account import account

    proj = claude.project("app")
    conv = Conversation(proj, start=NOW - timedelta(hours=1))
    lines = [conv.permission_mode(), conv.prompt("hi"), *conv.reply(text("Done."), model="claude-future-9")]
    write_session(claude.folder(proj), conv.id, lines, mtime=conv.clock.timestamp())
    account(resolve(proj), processes=False)
    row = rows_of(proj)[conv.id]
    assert row.tokens is not None and row.unpriced_models == ["claude-future-9"] and row.cost_usd == 0.0
    assert row.tokens.total == sum(PER_REPLY)
    shown = detail.render(detail.show(resolve(proj), conv.id))
    assert "cost $0.00+ (not counting claude-future-9: no price known; prices.json gives one)" in shown


@pytest.mark.process
def test_a_listing_never_loads_the_accountant(claude) -> None:
    proj = claude.project("app")
    simple_session(claude.folder(proj), proj, "hello")
    code = (
        "import sys; from c3async.ground.project import resolve; from c3async.sessions import view; "
        f"view.list_rows_sync([resolve({proj!r})], processes=False); "
        "print(sorted(m for m in sys.modules if m.startswith('c3async.usage')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=claude.env()
    ).stdout
    # the totals and the price table (a listing prices them), never the accountant or its reader
    assert eval(out) == ["c3async.usage", "c3async.usage.prices", "c3async.usage.totals"]
