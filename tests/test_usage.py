"""The token and cost accountant: deduplication as ccusage does it, sub-agents toward their
parent, prices and unknown models, and incremental reads that cost only new bytes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from c3async.usage import account as acc
from c3async.usage.prices import SHIPPED, load_prices, normalise

SID = "aaaaaaaa-0000-4000-8000-000000000001"
OTHER = "bbbbbbbb-0000-4000-8000-000000000002"


def usage_line(msg_id, req, *, model="claude-sonnet-4-5-20250929", inp=10, out=20, w5=100, w1h=0, read=1000,
               session=SID, sidechain=False, cost=None, breakdown=True, ts="2026-11-01T10:00:00.000Z"):
    usage = {"input_tokens": inp, "output_tokens": out, "cache_creation_input_tokens": w5 + w1h,
             "cache_read_input_tokens": read}
    if breakdown:
        usage["cache_creation"] = {"ephemeral_5m_input_tokens": w5, "ephemeral_1h_input_tokens": w1h}
    line = {"parentUuid": None, "isSidechain": sidechain, "type": "assistant",
            "message": {"model": model, "id": msg_id, "type": "message", "role": "assistant",
                        "content": [{"type": "text", "text": "ok"}], "usage": usage},
            "requestId": req, "uuid": "u", "timestamp": ts, "cwd": "/w", "sessionId": session, "version": "2.1.88"}
    if msg_id is None:
        del line["message"]["id"]
    if cost is not None:
        line["costUSD"] = cost
    return json.dumps(line, separators=(",", ":"))


@pytest.fixture
def project(claude, monkeypatch):
    for k, v in claude.env().items():
        monkeypatch.setenv(k, v)
    proj = claude.project("app")
    return proj, claude.folder(proj)


def write(path: Path, lines: list[str], mode: str = "w") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, mode) as f:
        f.write("".join(line + "\n" for line in lines))


def test_one_response_written_as_several_lines_counts_once(project):
    proj, folder = project
    write(folder / f"{SID}.jsonl", [usage_line("msg_1", "req_1")] * 3 + [usage_line("msg_2", "req_2", out=5)])
    t = acc.account(proj).totals[SID]
    assert (t.input, t.output, t.cache_write_5m, t.cache_read, t.responses) == (20, 25, 200, 2000, 2)


def test_streaming_partial_and_sidechain_replay_keep_the_best_copy(project):
    proj, folder = project
    write(folder / f"{SID}.jsonl", [
        usage_line("msg_1", "req_1", out=3),  # a streaming partial
        usage_line("msg_1", "req_1", out=40),  # the final copy: higher total wins
        usage_line("msg_2", "req_2", out=7, sidechain=True),
        usage_line("msg_2", "req_2", out=7),  # the main-chain copy beats the sidechain one
    ])
    t = acc.account(proj).totals[SID]
    assert t.output == 47 and t.responses == 2


def test_lines_without_message_id_are_never_merged(project):
    proj, folder = project
    write(folder / f"{SID}.jsonl", [usage_line(None, "req_1")] * 2)
    assert acc.account(proj).totals[SID].responses == 2


def test_synthetic_and_broken_lines_are_skipped(project):
    proj, folder = project
    write(folder / f"{SID}.jsonl", [
        usage_line("msg_s", "req_s", model="<synthetic>"),
        '{"type":"assistant","message":{"usage":{ broken',
        usage_line("msg_1", "req_1"),
    ])
    assert acc.account(proj).totals[SID].responses == 1


def test_subagent_files_count_toward_their_parent(project):
    proj, folder = project
    write(folder / f"{SID}.jsonl", [usage_line("msg_1", "req_1")])
    write(folder / SID / "subagents" / "agent-a1b2c3d4e5f6a7b8c.jsonl",
          [usage_line("msg_9", "req_9", sidechain=True)])
    write(folder / SID / "subagents" / "workflows" / "wf_1" / "journal.jsonl", [usage_line("msg_x", "req_x")])
    write(folder / "agent-1234abcd.jsonl", [usage_line("msg_8", "req_8", session=OTHER, sidechain=True)])
    totals = acc.account(proj).totals
    assert totals[SID].responses == 2  # the journal is not a conversation
    assert totals[OTHER].responses == 1  # a legacy agent file: the session its lines name


def test_costs_follow_the_price_table_with_tiers(project):
    proj, folder = project
    write(folder / f"{SID}.jsonl", [
        usage_line("m1", "r1", model="claude-opus-4-5-20251101", inp=1_000_000, out=0, w5=0, w1h=1_000_000, read=0),
        usage_line("m2", "r2", model="claude-sonnet-4-5-20250929", inp=300_000, out=0, w5=0, read=0),
    ])
    t = acc.account(proj).totals[SID]
    opus = 5.0 + 10.0  # input, and the 1-hour cache write at twice the input price
    sonnet = 200_000 * 3 / 1e6 + 100_000 * 6 / 1e6  # above 200k tokens, the long-context rate
    assert t.cost_by_model["claude-opus-4-5-20251101"] == pytest.approx(opus)
    assert t.cost_by_model["claude-sonnet-4-5-20250929"] == pytest.approx(sonnet)
    assert t.cost_usd == pytest.approx(opus + sonnet)


def test_recorded_cost_wins_and_unknown_models_are_reported(project):
    proj, folder = project
    write(folder / f"{SID}.jsonl", [usage_line("m1", "r1", cost=1.25),
                                    usage_line("m2", "r2", model="gpt-9-turbo")])
    t = acc.account(proj).totals[SID]
    assert t.cost_usd == pytest.approx(1.25)
    assert t.unknown_models == ["gpt-9-turbo"]


def test_user_price_file_overrides_and_adds(project, claude):
    (claude.c3home).mkdir(parents=True, exist_ok=True)
    (claude.c3home / "prices.json").write_text(json.dumps({"gpt-9": {"input": 1.0, "output": 2.0}}))
    table = load_prices()
    assert table.find("gpt-9-turbo").output == 2.0
    assert table.find("claude-opus-4-5-20251101") is SHIPPED["claude-opus-4-5"]
    assert normalise("claude-sonnet-4.5[1m]") == "claude-sonnet-4-5"


def test_incremental_run_reads_only_new_bytes_and_appends_changed_sessions(project):
    proj, folder = project
    path = folder / f"{SID}.jsonl"
    write(path, [usage_line(f"m{i}", f"r{i}") for i in range(50)])
    write(folder / f"{OTHER}.jsonl", [usage_line("o1", "q1", session=OTHER)])
    first = acc.account(proj)
    assert first.bytes_read == path.stat().st_size + (folder / f"{OTHER}.jsonl").stat().st_size
    added = usage_line("m50", "r50")
    write(path, [added], mode="a")
    second = acc.account(proj)
    assert second.bytes_read == len(added) + 1
    assert second.changed == [SID]
    assert second.totals[SID].responses == 51
    rows = [json.loads(x) for x in acc.stats_path(proj).read_text().splitlines()]
    assert [r["session_id"] for r in rows] == [SID, OTHER, SID] or [r["session_id"] for r in rows] == [OTHER, SID, SID]
    assert acc.account(proj).bytes_read == 0


def test_a_replaced_file_is_read_again_from_the_start(project):
    proj, folder = project
    path = folder / f"{SID}.jsonl"
    write(path, [usage_line(f"m{i}", f"r{i}") for i in range(5)])
    acc.account(proj)
    tmp = path.with_suffix(".tmp")
    write(tmp, [usage_line("z1", "y1")])
    os.replace(tmp, path)  # shorter, another inode
    t = acc.account(proj).totals[SID]
    assert t.responses == 1


def test_unterminated_last_line_waits_for_its_newline(project):
    proj, folder = project
    path = folder / f"{SID}.jsonl"
    write(path, [usage_line("m1", "r1")])
    with open(path, "a") as f:
        f.write(usage_line("m2", "r2")[:-10])
    assert acc.account(proj).totals[SID].responses == 1
    with open(path, "a") as f:
        f.write(usage_line("m2", "r2")[-10:] + "\n")
    assert acc.account(proj).totals[SID].responses == 2


def test_stats_cli_and_status_view(project, claude):
    proj, folder = project
    write(folder / f"{SID}.jsonl", [usage_line("m1", "r1")])
    proc = claude.run("stats", "--project", proj, "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert rows[0]["session_id"] == SID and rows[0]["output"] == 20
    table = claude.run("stats", "--project", proj)
    assert table.stdout.splitlines()[-1].split()[0] == "total"
    from c3async.status import run as status_run

    assert SID[:8] in status_run(proj, "sessions")


def test_status_view_without_stats(project):
    proj, _ = project
    from c3async.status import run as status_run

    assert status_run(proj, "sessions").startswith("no stats yet")
