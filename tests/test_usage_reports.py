"""The token and cost reports, door by door: `c3async stats` (one project or `--all` in one
pass), `stats --json` and `sessions --json`, the MCP sessions view and the Hub. Costs are worked
out from the price table of the moment, so a price added to prices.json re-prices what was
counted before without reading a transcript again; usage of a model with no price is marked the
same way everywhere: the cost followed by "+", and `unpriced_models` in JSON."""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec
import pytest
from hubproc import Hub, wait_for
from test_usage import OTHER, SID, usage_line, write

from c3async.ground.project import resolve
from c3async.usage import account as acc
from stress.transcripts import Conversation

pytestmark = pytest.mark.process

FUTURE = "claude-future-9-20270101"  # no shipped family prices it
OPUS = "claude-opus-4-5-20251101"
OPUS_USD = 5.0  # 1M input tokens of claude-opus-4-5 at $5 per million
FUTURE_USD = 1.0 + 0.2  # 1M input and 100k output at the price written below: $1 and $2 per million


def _lines(session: str = SID, cwd: str = "/w") -> list[str]:
    prompt = Conversation(cwd, session).prompt("price these")  # a session the catalog lists
    return [
        json.dumps(prompt, separators=(",", ":")),
        usage_line("m1", "r1", session=session, model=OPUS, inp=1_000_000, out=0, w5=0, read=0),
        usage_line("m2", "r2", session=session, model=FUTURE, inp=1_000_000, out=100_000, w5=0, read=0),
    ]


def _stats(claude, *args: str) -> list[dict]:
    proc = claude.run("stats", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _table(claude, *args: str) -> list[str]:
    proc = claude.run("stats", *args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def _hub_row(hub: Hub, project: str) -> dict:
    with hub.client() as c:
        rows = c.get("/api/sessions", params={"project": project}).json()["rows"]
    return next(r for r in rows if r["id"] == SID)


def test_a_new_price_reprices_what_was_counted_in_every_report(claude, monkeypatch):
    claude.activate(monkeypatch)
    proj = claude.project("app")
    write(claude.folder(proj) / f"{SID}.jsonl", _lines(SID, proj))
    assert claude.run("sessions", "--project", proj).returncode == 0  # registered: the Hub lists it
    from c3async.sessions.reports import run as status_run

    # Counted with no price for the future model: its tokens count, its cost is left out, said.
    (row,) = _stats(claude, "--project", proj)
    assert (row["id"], row["project"]) == (SID, proj) and "session_id" not in row
    assert row["cost_usd"] == pytest.approx(OPUS_USD) and row["unpriced_models"] == [FUTURE]
    assert row["tokens_by_model"][FUTURE] == 1_100_000
    table = _table(claude, "--project", proj)
    assert table[0].split() == ["ID", "INPUT", "OUTPUT", "CACHE-W", "CACHE-R", "COST", "TITLE"]
    assert table[1].split()[:6] == [SID[:8], "2000000", "100000", "0", "0", "5.00+"]
    assert table[2].split() == ["total", "2000000", "100000", "0", "0", "5.00+"]
    assert table[3].startswith(f"+ not in the cost: the usage of models with no price: {FUTURE} (1,100,000 tokens).")
    prices = claude.c3home / "prices.json"
    assert str(prices) in table[3] and '{"claude-future-9": {"input": IN, "output": OUT}}' in table[3]
    (listed,) = claude.sessions(proj)
    assert listed["cost_usd"] == pytest.approx(OPUS_USD) and listed["unpriced_models"] == [FUTURE]
    assert status_run(resolve(proj), "sessions").splitlines()[1].split()[5] == "5.00+"
    stats_log = acc.stats_path(resolve(proj))
    logged = stats_log.read_bytes()

    with Hub(claude) as hub:
        row = wait_for(lambda: _hub_row(hub, proj))
        assert row["cost_usd"] == pytest.approx(OPUS_USD) and row["unpriced_models"] == [FUTURE]

        # A price for it: everything counted is re-priced, and no transcript is read again.
        prices.write_text(json.dumps({"claude-future": {"input": 1.0, "output": 2.0}}))
        again = acc.account(resolve(proj))
        assert (again.bytes_read, again.changed) == (0, [])
        assert stats_log.read_bytes() == logged  # a row holds tokens, not a cost: nothing to rewrite
        both = OPUS_USD + FUTURE_USD
        (row,) = _stats(claude, "--project", proj)
        assert row["cost_usd"] == pytest.approx(both) and row["unpriced_models"] == []
        assert row["cost_by_model"] == {OPUS: pytest.approx(OPUS_USD), FUTURE: pytest.approx(FUTURE_USD)}
        table = _table(claude, "--project", proj)
        assert table[-1].split() == ["total", "2000000", "100000", "0", "0", f"{both:.2f}"]  # no "+", no footnote
        (listed,) = claude.sessions(proj)
        assert listed["cost_usd"] == pytest.approx(both) and listed["unpriced_models"] == []
        assert status_run(resolve(proj), "sessions").splitlines()[1].split()[5] == f"{both:.2f}"
        # the Hub's change feed watches prices.json: its rows are rebuilt with the new price
        row = wait_for(lambda: (r := _hub_row(hub, proj))["cost_usd"] == pytest.approx(both) and r)
        assert row["unpriced_models"] == []


def test_a_broken_price_file_is_an_error_for_stats_and_prices_nothing_in_a_listing(claude):
    proj = claude.project("app")
    write(claude.folder(proj) / f"{SID}.jsonl", _lines(SID, proj))
    assert claude.run("stats", "--project", proj).returncode == 0
    claude.c3home.mkdir(parents=True, exist_ok=True)
    (claude.c3home / "prices.json").write_text('{"claude-future": {"input": "cheap"}}')
    proc = claude.run("stats", "--project", proj)
    assert proc.returncode == 1 and proc.stderr.startswith("c3async: error: ") and "prices.json" in proc.stderr
    # A listing goes on, every model unpriced rather than at a price nobody set, and says why.
    proc = claude.run("sessions", "--project", proj, "--json")
    assert proc.returncode == 0 and "prices.json" in proc.stderr
    (row,) = json.loads(proc.stdout)
    assert row["cost_usd"] == 0.0 and sorted(row["unpriced_models"]) == sorted([FUTURE, OPUS])


def test_stats_all_reads_every_registered_project_in_one_pass(claude):
    projects = {name: claude.project(name) for name in ("app", "svc", "lib")}
    sessions = {"app": SID, "svc": OTHER, "lib": "cccccccc-0000-4000-8000-000000000003"}
    for name, proj in projects.items():
        write(claude.folder(proj) / f"{sessions[name]}.jsonl", _lines(sessions[name], proj))
        assert claude.run("sessions", "--project", proj).returncode == 0  # registers it
    rows = _stats(claude, "--all")
    assert {(r["project"], r["id"]) for r in rows} == {(projects[n], sessions[n]) for n in projects}
    table = _table(claude, "--all")
    assert table[0].split() == ["ID", "PROJECT", "INPUT", "OUTPUT", "CACHE-W", "CACHE-R", "COST", "TITLE"]
    body = [line.split() for line in table[1:4]]
    assert {(cols[0], cols[1]) for cols in body} == {(sessions[n][:8], n) for n in projects}
    assert [line for line in table if line.startswith("total")] == [table[4]]
    assert table[4].split() == ["total", "6000000", "300000", "0", "0", f"{3 * OPUS_USD:.2f}+"]
    assert table[5].startswith(f"+ not in the cost: the usage of models with no price: {FUTURE} (3,300,000 tokens).")
    # One project that cannot be accounted (its .c3 is a file) costs that project only: said, exit 1.
    broken = Path(projects["svc"], ".c3")
    os.rename(broken, broken.with_name("c3-was"))
    broken.write_text("not a folder")
    proc = claude.run("stats", "--all", "--json")
    assert proc.returncode == 1
    assert any(line.startswith(f"c3async: error: {projects['svc']}: ") for line in proc.stderr.splitlines())
    assert {r["project"] for r in json.loads(proc.stdout)} == {projects["app"], projects["lib"]}


def test_many_projects_share_one_pool_and_give_what_each_alone_gives(claude, monkeypatch):
    claude.activate(monkeypatch)
    projects = [claude.project(name) for name in ("app", "svc", "lib")]
    for k, proj in enumerate(projects):
        for j in range(4):
            sid = f"{k:08x}-0000-4000-8000-{j:012x}"
            write(
                claude.folder(proj) / f"{sid}.jsonl",
                [usage_line(f"m{k}_{j}_{i}", f"r{i}", session=sid, out=i) for i in range(5)] + _lines(sid),
            )

    def counted(result):  # everything but when it was counted
        return {sid: msgspec.structs.replace(t, ts=0.0) for sid, t in result.priced().items()}

    alone = {p: counted(acc.account(resolve(p), write=False, processes=False)) for p in projects}
    if acc.can_fork_workers() < 2:
        pytest.skip("worker processes need two cores and a process with no other thread")
    monkeypatch.setattr(acc, "PROCESS_MIN_BYTES", 0)  # the three projects' few KiB, together
    monkeypatch.setattr(acc, "HANDOFF_FILES", 2)
    together = acc.account_projects([resolve(p) for p in projects], write=False)
    assert [r.project.root for r in together] == projects
    assert all(r.workers >= 2 for r in together)
    for r in together:
        assert counted(r) == alone[r.project.root]


def test_old_state_is_rebuilt_once_and_old_rows_keep_their_cost(claude, monkeypatch):
    claude.activate(monkeypatch)
    proj = claude.project("app")
    path = claude.folder(proj) / f"{SID}.jsonl"
    write(path, _lines())
    acc.account(resolve(proj))
    state = acc._state_path(resolve(proj))
    old = json.loads(state.read_text())
    old["version"] = 2  # what c3async wrote before costs were worked out by each report
    state.write_text(json.dumps(old))
    rebuilt = acc.account(resolve(proj))
    assert rebuilt.bytes_read == path.stat().st_size
    assert acc.account(resolve(proj)).bytes_read == 0  # once
    # A row of the old format (a cost, no tokens per model) reads as it did, named `id` in reports.
    with open(acc.stats_path(resolve(proj)), "a") as f:
        f.write(
            json.dumps(
                {
                    "session_id": OTHER,
                    "ts": 1.0,
                    "input": 5,
                    "cost_usd": 0.25,
                    "cost_by_model": {FUTURE: 0.25},
                    "unknown_models": ["gpt-9"],
                }
            )
            + "\n"
        )
    from c3async.usage.prices import current_prices
    from c3async.usage.totals import latest, stats_rows

    rows = {r.id: r for r in stats_rows(resolve(proj), latest(resolve(proj)), current_prices())}
    assert (rows[OTHER].cost_usd, rows[OTHER].unpriced_models, rows[OTHER].input) == (0.25, ["gpt-9"], 5)
    assert rows[SID].cost_usd == pytest.approx(OPUS_USD) and rows[SID].unpriced_models == [FUTURE]
