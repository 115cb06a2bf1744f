"""The token and cost accountant: deduplication as ccusage does it, sub-agents toward their
parent, prices and unknown models, and incremental reads that cost only new bytes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from c3async.ground.project import resolve
from c3async.usage import account as acc
from c3async.usage import reader
from c3async.usage.prices import SHIPPED, load_prices, normalise

SID = "aaaaaaaa-0000-4000-8000-000000000001"
OTHER = "bbbbbbbb-0000-4000-8000-000000000002"


def usage_line(
    msg_id,
    req,
    *,
    model="claude-sonnet-4-5-20250929",
    inp=10,
    out=20,
    w5=100,
    w1h=0,
    read=1000,
    session=SID,
    sidechain=False,
    cost=None,
    breakdown=True,
    ts="2026-11-01T10:00:00.000Z",
):
    usage = {
        "input_tokens": inp,
        "output_tokens": out,
        "cache_creation_input_tokens": w5 + w1h,
        "cache_read_input_tokens": read,
    }
    if breakdown:
        usage["cache_creation"] = {"ephemeral_5m_input_tokens": w5, "ephemeral_1h_input_tokens": w1h}
    line = {
        "parentUuid": None,
        "isSidechain": sidechain,
        "type": "assistant",
        "message": {
            "model": model,
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": "ok"}],
            "usage": usage,
        },
        "requestId": req,
        "uuid": "u",
        "timestamp": ts,
        "cwd": "/w",
        "sessionId": session,
        "version": "2.1.88",
    }
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
    t = acc.account(resolve(proj)).totals[SID]
    assert (t.input, t.output, t.cache_write_5m, t.cache_read, t.responses) == (20, 25, 200, 2000, 2)


def test_streaming_partial_and_sidechain_replay_keep_the_best_copy(project):
    proj, folder = project
    write(
        folder / f"{SID}.jsonl",
        [
            usage_line("msg_1", "req_1", out=3),  # a streaming partial
            usage_line("msg_1", "req_1", out=40),  # the final copy: higher total wins
            usage_line("msg_2", "req_2", out=7, sidechain=True),
            usage_line("msg_2", "req_2", out=7),  # the main-chain copy beats the sidechain one
        ],
    )
    t = acc.account(resolve(proj)).totals[SID]
    assert t.output == 47 and t.responses == 2


def test_lines_without_message_id_are_never_merged(project):
    proj, folder = project
    write(folder / f"{SID}.jsonl", [usage_line(None, "req_1")] * 2)
    assert acc.account(resolve(proj)).totals[SID].responses == 2


def test_synthetic_and_broken_lines_are_skipped(project):
    proj, folder = project
    write(
        folder / f"{SID}.jsonl",
        [
            usage_line("msg_s", "req_s", model="<synthetic>"),
            '{"type":"assistant","message":{"usage":{ broken',
            usage_line("msg_1", "req_1"),
        ],
    )
    assert acc.account(resolve(proj)).totals[SID].responses == 1


def test_subagent_files_count_toward_their_parent(project):
    proj, folder = project
    write(folder / f"{SID}.jsonl", [usage_line("msg_1", "req_1")])
    write(folder / SID / "subagents" / "agent-a1b2c3d4e5f6a7b8c.jsonl", [usage_line("msg_9", "req_9", sidechain=True)])
    write(folder / SID / "subagents" / "workflows" / "wf_1" / "journal.jsonl", [usage_line("msg_x", "req_x")])
    write(folder / "agent-1234abcd.jsonl", [usage_line("msg_8", "req_8", session=OTHER, sidechain=True)])
    totals = acc.account(resolve(proj)).totals
    assert totals[SID].responses == 2  # the journal is not a conversation
    assert totals[OTHER].responses == 1  # a legacy agent file: the session its lines name


def test_costs_follow_the_price_table_with_tiers(project):
    proj, folder = project
    write(
        folder / f"{SID}.jsonl",
        [
            usage_line("m1", "r1", model="claude-opus-4-5-20251101", inp=1_000_000, out=0, w5=0, w1h=1_000_000, read=0),
            usage_line("m2", "r2", model="claude-sonnet-4-5-20250929", inp=300_000, out=0, w5=0, read=0),
        ],
    )
    t = acc.account(resolve(proj)).priced()[SID]
    opus = 5.0 + 10.0  # input, and the 1-hour cache write at twice the input price
    sonnet = 200_000 * 3 / 1e6 + 100_000 * 6 / 1e6  # above 200k tokens, the long-context rate
    assert t.cost_by_model["claude-opus-4-5-20251101"] == pytest.approx(opus)
    assert t.cost_by_model["claude-sonnet-4-5-20250929"] == pytest.approx(sonnet)
    assert t.cost_usd == pytest.approx(opus + sonnet)


def test_recorded_cost_wins_and_unknown_models_are_reported(project):
    proj, folder = project
    write(folder / f"{SID}.jsonl", [usage_line("m1", "r1", cost=1.25), usage_line("m2", "r2", model="gpt-9-turbo")])
    t = acc.account(resolve(proj)).priced()[SID]
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
    first = acc.account(resolve(proj))
    assert first.bytes_read == path.stat().st_size + (folder / f"{OTHER}.jsonl").stat().st_size
    added = usage_line("m50", "r50")
    write(path, [added], mode="a")
    second = acc.account(resolve(proj))
    assert second.bytes_read == len(added) + 1
    assert second.changed == [SID]
    assert second.totals[SID].responses == 51
    rows = [json.loads(x) for x in acc.stats_path(resolve(proj)).read_text().splitlines()]
    assert [r["session_id"] for r in rows] == [SID, OTHER, SID] or [r["session_id"] for r in rows] == [OTHER, SID, SID]
    assert acc.account(resolve(proj)).bytes_read == 0


def test_an_unchanged_project_is_not_accounted_again_and_new_usage_is(project):
    """``account_if_changed`` (the Hub's and the server's minute): nothing read while nothing
    moved; a new line in a transcript, a sub-agent's new file and a catalog cache written since
    each bring a pass."""
    proj, folder = project
    path = folder / f"{SID}.jsonl"
    write(path, [usage_line("m1", "r1")])
    first = acc.account_if_changed(resolve(proj), processes=False)
    assert first is not None and first.totals[SID].responses == 1
    assert acc.account_if_changed(resolve(proj), processes=False) is None
    write(path, [usage_line("m2", "r2")], mode="a")
    again = acc.account_if_changed(resolve(proj), processes=False)
    assert again is not None and again.bytes_read > 0 and again.totals[SID].responses == 2
    assert acc.account_if_changed(resolve(proj), processes=False) is None
    write(folder / SID / "subagents" / "agent-a1.jsonl", [usage_line("s1", "t1", sidechain=True)])
    third = acc.account_if_changed(resolve(proj), processes=False)
    assert third is not None and third.totals[SID].responses == 3
    assert acc.account_if_changed(resolve(proj), processes=False) is None
    acc.catalog_cache_path(resolve(proj)).parent.mkdir(parents=True, exist_ok=True)
    acc.catalog_cache_path(resolve(proj)).write_text("{}")  # titles and forks come from the catalog's cache
    assert acc.account_if_changed(resolve(proj), processes=False) is not None
    assert acc.account_if_changed(resolve(proj), processes=False) is None


def test_latest_totals_follow_the_log_and_hand_out_copies(project):
    """The stats log is folded (read once, then tailed): new rows show, a rewritten log is read
    again, and a caller that changes what it got (``status`` fills in titles) changes no one
    else's."""
    proj, folder = project
    path = folder / f"{SID}.jsonl"
    write(path, [usage_line("m1", "r1")])
    acc.account(resolve(proj))
    got = acc.latest_totals(resolve(proj))
    assert got[SID].responses == 1
    got[SID].title = "changed by the caller"
    got[SID].cost_usd = -1.0
    assert acc.latest_totals(resolve(proj))[SID].title is None and acc.latest_totals(resolve(proj))[SID].cost_usd > 0
    write(path, [usage_line("m2", "r2")], mode="a")
    acc.account(resolve(proj))
    assert acc.latest_totals(resolve(proj))[SID].responses == 2
    stats = acc.stats_path(resolve(proj))
    tmp = stats.with_suffix(".tmp")
    tmp.write_text(json.dumps({"session_id": OTHER, "ts": 5.0, "output": 7}) + "\n")
    os.replace(tmp, stats)  # rewritten (another inode): folded again from the start
    assert {sid: t.output for sid, t in acc.latest_totals(resolve(proj)).items()} == {OTHER: 7}


def test_a_replaced_file_is_read_again_from_the_start(project):
    proj, folder = project
    path = folder / f"{SID}.jsonl"
    write(path, [usage_line(f"m{i}", f"r{i}") for i in range(5)])
    acc.account(resolve(proj))
    tmp = path.with_suffix(".tmp")
    write(tmp, [usage_line("z1", "y1")])
    os.replace(tmp, path)  # shorter, another inode
    t = acc.account(resolve(proj)).totals[SID]
    assert t.responses == 1


def test_unterminated_last_line_waits_for_its_newline(project):
    proj, folder = project
    path = folder / f"{SID}.jsonl"
    write(path, [usage_line("m1", "r1")])
    with open(path, "a") as f:
        f.write(usage_line("m2", "r2")[:-10])
    assert acc.account(resolve(proj)).totals[SID].responses == 1
    with open(path, "a") as f:
        f.write(usage_line("m2", "r2")[-10:] + "\n")
    assert acc.account(resolve(proj)).totals[SID].responses == 2


@pytest.mark.process
def test_stats_cli_and_status_view(project, claude):
    proj, folder = project
    write(folder / f"{SID}.jsonl", [usage_line("m1", "r1")])
    proc = claude.run("stats", "--project", proj, "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert rows[0]["id"] == SID and rows[0]["output"] == 20 and rows[0]["project"] == proj
    table = claude.run("stats", "--project", proj)
    assert table.stdout.splitlines()[-1].split()[0] == "total"
    from c3async.sessions.reports import run as status_run

    assert SID[:8] in status_run(resolve(proj), "sessions")


def test_status_view_without_stats(project):
    proj, _ = project
    from c3async.sessions.reports import run as status_run

    assert status_run(resolve(proj), "sessions").startswith("no stats yet")


# --- the first pass at ccusage speed: bounded pieces, narrow decoding, worker processes ---


def _totals(result):
    return {
        sid: (
            t.input,
            t.output,
            t.cache_write_5m,
            t.cache_write_1h,
            t.cache_read,
            t.responses,
            t.cost_usd,
            t.first_ts,
            t.last_ts,
            t.tokens_by_model,
            t.models,
        )
        for sid, t in result.priced().items()
    }


def _mixed_lines(n=40):
    """Usage lines between long non-usage lines (a pasted prompt, a tool result) and copies."""
    lines = []
    for i in range(n):
        lines.append(
            json.dumps(
                {"type": "user", "message": {"role": "user", "content": "x" * (i * 97 % 3000)}}, separators=(",", ":")
            )
        )
        lines += [usage_line(f"m{i}", f"r{i}", out=i, read=i * 1000)] * (1 + i % 3)
        if i % 7 == 0:
            lines.append(usage_line(None, f"loose{i}", out=1))
    return lines


@pytest.mark.parametrize("size", [1, 13, 200, 4096])
def test_any_piece_size_gives_the_same_totals(project, monkeypatch, size):
    proj, folder = project
    write(folder / f"{SID}.jsonl", _mixed_lines())
    whole = _totals(acc.account(resolve(proj), write=False))
    real = reader.read_files

    def small(jobs):  # every file through a buffer of ``size`` bytes (it grows per long line)
        return [(i, reader.read_file(job, bytearray(size))) for i, job in jobs]

    monkeypatch.setattr(acc, "read_files", small)
    assert _totals(acc.account(resolve(proj), write=False)) == whole
    monkeypatch.setattr(acc, "read_files", real)


def test_a_line_longer_than_the_limit_is_skipped_in_bounded_memory(tmp_path):
    path = tmp_path / "t.jsonl"
    big = json.loads(usage_line("m_big", "r_big"))
    big["message"]["content"] = [{"type": "text", "text": "y" * 5000}]
    lines = [usage_line("m1", "r1"), json.dumps(big, separators=(",", ":")), usage_line("m2", "r2")]
    path.write_text("".join(line + "\n" for line in lines))
    scan = reader.read_file(reader.Job(str(path), SID), bytearray(256), max_line=1024)
    assert [h.key for h in scan.best] == ["m1:r1", "m2:r2"] and scan.skipped == 1
    assert scan.offset == path.stat().st_size
    # unfinished at the end of the file: the next pass starts at that line again, not inside it
    with open(path, "a") as f:
        f.write(json.dumps(big, separators=(",", ":"))[:3000])
    again = reader.read_file(reader.Job(str(path), SID, scan.offset, scan.ino), bytearray(256), max_line=1024)
    assert again.offset == scan.offset and again.best == [] and again.bytes_read == 3000


def test_hostile_lines_are_skipped_and_never_glued(project):
    proj, folder = project
    deep = '{"message":{"usage":{"input_tokens":1}},"x":' + "[" * 100_000 + "]" * 100_000 + "}"
    torn = usage_line("m_torn", "r_torn")[:-40]
    binary = '{"message":{"usage":{"input_tokens":7}}}\x00\xff\xfe'
    lines = [usage_line("m1", "r1"), deep, torn, usage_line("m2", "r2")]
    path = folder / f"{SID}.jsonl"
    path.write_bytes("".join(line + "\n" for line in lines).encode() + binary.encode("latin-1") + b"\n")
    # Lines that are not valid alone but would make a valid JSON array together (A opens what B
    # closes, C holds two values: three lines, three values), in a file of their own so that
    # nothing else fails the piece's one-call decode: each is skipped, as ccusage skips them.
    glue_a = '{"message":{"model":"claude-sonnet-4-5","usage":{"input_tokens":1000}},"k":[{"usage":{}}'
    glue_b = '{"usage":{}}]}'
    glue_c = (
        '{"usage":{}},{"sessionId":"' + OTHER + '","message":{"id":"evil","model":"claude-sonnet-4-5",'
        '"usage":{"input_tokens":99999}}}'
    )
    write(folder / f"{OTHER}.jsonl", [usage_line("o1", "q1", session=OTHER), glue_a, glue_b, glue_c])
    result = acc.account(resolve(proj))
    t = result.totals[SID]
    assert (t.responses, t.input) == (2, 20)
    assert (result.totals[OTHER].responses, result.totals[OTHER].input) == (1, 10)
    assert result.lines_skipped == 6  # deep, torn, binary, and the three glue lines


def _force_processes(monkeypatch):
    if acc.can_fork_workers() < 2:
        pytest.skip("worker processes need two cores and a process with no other thread")
    monkeypatch.setattr(acc, "PROCESS_MIN_BYTES", 0)
    monkeypatch.setattr(acc, "HANDOFF_FILES", 2)


def _many_sessions(folder, n=12):
    sids = [f"{i:08x}-0000-4000-8000-{i:012x}" for i in range(n)]
    for k, sid in enumerate(sids):
        write(
            folder / f"{sid}.jsonl",
            [usage_line(f"m{k}_{j}", f"r{k}_{j}", session=sid, out=j) for j in range(5)]
            + [usage_line("shared", "req_shared", session=sid, out=k % 3)],
        )  # one response copied across
        write(
            folder / sid / "subagents" / "agent-a1.jsonl", [usage_line(f"a{k}", f"ra{k}", session=sid, sidechain=True)]
        )
    return sids


def test_worker_processes_give_the_same_totals_as_one_process(project, monkeypatch):
    proj, folder = project
    _many_sessions(folder)
    alone = acc.account(resolve(proj), write=False, processes=False)
    assert alone.workers == 0
    _force_processes(monkeypatch)
    pooled = acc.account(resolve(proj), write=False)
    assert pooled.workers >= 2
    assert _totals(pooled) == _totals(alone)
    assert (pooled.bytes_read, pooled.files_read, pooled.bytes_decoded) == (
        alone.bytes_read,
        alone.files_read,
        alone.bytes_decoded,
    )


def _die(*args):
    os._exit(3)  # a worker killed mid-hand-off


def test_a_broken_pool_falls_back_to_reading_here_with_one_warning(project, monkeypatch, caplog):
    proj, folder = project
    _many_sessions(folder)
    alone = _totals(acc.account(resolve(proj), write=False, processes=False))
    _force_processes(monkeypatch)
    monkeypatch.setattr(acc, "read_files_packed", _die)
    with caplog.at_level("WARNING", logger="c3async.usage"):
        result = acc.account(resolve(proj), write=False)
    assert _totals(result) == alone
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "worker processes failed" in caplog.records[0].message


def test_a_caller_with_threads_never_forks(project, monkeypatch):
    import threading

    proj, folder = project
    _many_sessions(folder)
    monkeypatch.setattr(acc, "PROCESS_MIN_BYTES", 0)
    out = []
    t = threading.Thread(target=lambda: out.append(acc.account(resolve(proj), write=False)))
    t.start()
    t.join()
    assert out[0].workers == 0 and len(out[0].totals) == 12


def test_a_deleted_transcript_keeps_its_totals_and_later_passes_read_only_new_bytes(project, monkeypatch):
    proj, folder = project
    sids = _many_sessions(folder)
    _force_processes(monkeypatch)
    first = acc.account(resolve(proj))
    assert first.workers >= 2
    (folder / f"{sids[0]}.jsonl").unlink()
    line = usage_line("late", "req_late", session=sids[1])
    write(folder / f"{sids[1]}.jsonl", [line], mode="a")
    second = acc.account(resolve(proj))
    assert second.workers == 0  # one file to read: no worker processes for that
    assert second.bytes_read == len(line) + 1 and second.changed == [sids[1]]
    assert _totals(second)[sids[0]] == _totals(first)[sids[0]]  # what it spent was spent
    assert second.totals[sids[1]].responses == first.totals[sids[1]].responses + 1
