"""Bad values are messages: out-of-range dates, wrong-typed settings and prices, a planted search
database, an absurd cleanup period. Each door says what is wrong, naming the file and the key:
the CLI on stderr (exit 1 or 2, no traceback), the Hub with a 4xx, the MCP server with a tool
error."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from hubproc import Hub

from c3async.ground.project import resolve
from stress.transcripts import simple_session

pytestmark = pytest.mark.process

OUT_OF_RANGE = (
    "99999999999d",
    "99999999999999999999999999d",
    "9" * 5000 + "m",
    "0001-01-01",
    "9999-12-31T23:59:59-14:00",
)


@pytest.fixture
def project(claude) -> str:
    project = claude.project("app")
    simple_session(
        claude.folder(project), project, "fix the retry budget", start=datetime.now(UTC) - timedelta(hours=1)
    )
    return project


def _no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr


@pytest.mark.parametrize("when", OUT_OF_RANGE)
def test_a_date_out_of_range_is_a_message(claude, project, when):
    for flag in ("--since", "--until"):
        proc = claude.run("search", "retry", "--project", project, flag, when)
        _no_traceback(proc)
        assert proc.returncode in (1, 2), proc.stderr
        assert "out of range" in proc.stderr and flag.lstrip("-") in proc.stderr, proc.stderr


def test_dates_in_range_still_work(claude, project):
    for when in ("7d", "12h", "2w", "90m", "2020-01-01", "1970-01-01T00:00:00Z"):
        proc = claude.run("search", "retry", "--project", project, "--since", when, "--json")
        assert proc.returncode == 0, proc.stderr
        assert len(json.loads(proc.stdout)["results"]) == 1, when


BAD_SETTINGS = [
    ({"idle_days": "seven"}, "idle_days", "wrong type"),
    ({"idle_days": 0}, "idle_days", "from 1 to"),
    ({"idle_days": 10**30}, "idle_days", "from 1 to"),
    ({"idle_days": True}, "idle_days", "wrong type"),
]


@pytest.mark.parametrize(("doc", "key", "said"), BAD_SETTINGS)
def test_a_wrong_setting_names_its_file_and_key(claude, project, doc, key, said):
    for where in (claude.c3home / "config.json", Path(project, ".c3", "config.json")):
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_text(json.dumps(doc))
        proc = claude.run("sessions", "--project", project)
        _no_traceback(proc)
        assert proc.returncode == 1, proc.stderr
        assert str(where) in proc.stderr and key in proc.stderr and said in proc.stderr, proc.stderr
        where.unlink()
    assert claude.run("sessions", "--project", project).returncode == 0


BAD_KEEPS = [
    ("marekd", "'marekd' (did you mean 'marked'?)"),
    ("", "''"),
    (7, "the int 7"),
    (None, "the NoneType null"),
    ({"policy": "all"}, "the dict"),
    (["noted", "forever"], "'forever'"),
    ([1], "the list [1]"),
]


@pytest.mark.parametrize(("value", "said"), BAD_KEEPS)
def test_a_wrong_keep_policy_is_named_and_reads_as_the_default(claude, project, value, said):
    """Not an error, unlike other settings: an error would stop every pass that keeps sessions
    before Claude Code's cleanup. The default (``marked``) applies, said once."""
    for where in (claude.c3home / "config.json", Path(project, ".c3", "config.json")):
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_text(json.dumps({"keep": value}))
        proc = claude.run("sessions", "--project", project, "--json")
        _no_traceback(proc)
        assert proc.returncode == 0, proc.stderr
        assert str(where) in proc.stderr and "keep" in proc.stderr and said in proc.stderr, proc.stderr
        assert proc.stderr.count(str(where)) == 1, proc.stderr
        where.unlink()


def test_a_config_that_is_not_json_is_ignored_with_a_warning(claude, project):
    claude.c3home.mkdir(parents=True, exist_ok=True)
    (claude.c3home / "config.json").write_text("{not json")
    proc = claude.run("sessions", "--project", project, "--json")
    assert proc.returncode == 0, proc.stderr
    assert "ignoring" in proc.stderr and "config.json" in proc.stderr
    assert len(json.loads(proc.stdout)) == 1


BAD_PRICES = [
    ({"gpt-9": {"input": "cheap", "output": 2}}, "'gpt-9'", "$.input"),
    ({"gpt-9": {"input": 1}}, "'gpt-9'", "output"),
    ({"gpt-9": {"input": -1, "output": 2}}, "'gpt-9'", "input is -1"),
    ({"gpt-9": {"input": 1, "output": 2, "above_200k": {"input": 1, "output": 1e12}}}, "'gpt-9'", "above_200k"),
    (["not", "an", "object"], "prices.json", "object of model families"),
    ({"": {"input": 1, "output": 1}}, "''", "not a model family"),
]


@pytest.mark.parametrize(("doc", "key", "said"), BAD_PRICES)
def test_a_wrong_price_table_names_its_file_and_key(claude, project, doc, key, said):
    claude.c3home.mkdir(parents=True, exist_ok=True)
    (claude.c3home / "prices.json").write_text(json.dumps(doc))
    proc = claude.run("stats", "--project", project)
    _no_traceback(proc)
    assert proc.returncode == 1, proc.stderr
    assert "prices.json" in proc.stderr and key in proc.stderr and said in proc.stderr, proc.stderr


def test_a_huge_cleanup_period_means_nothing_expires(claude, project):
    claude.config.mkdir(parents=True, exist_ok=True)
    (claude.config / "settings.json").write_text('{"cleanupPeriodDays": ' + "9" * 400 + "}")
    proc = claude.run("sessions", "--project", project, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["expires_in_days"] is None


# ------------------------------------------------------------------ the search store

PLANTED = """
CREATE TRIGGER planted AFTER INSERT ON files BEGIN
  SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c);
END;
"""


def test_a_planted_trigger_in_the_index_is_never_run(claude, project):
    """A shard with our application id and schema plus a trigger that never ends: the store
    refuses it (its whole schema must be ours), puts it aside and builds the shard anew, so the
    search answers instead of hanging."""
    assert claude.run("index", "--quiet").returncode == 0
    search_dir = claude.c3home / "search"
    for k in range(4):
        conn = sqlite3.connect(search_dir / f"index-{k}.db")
        conn.executescript(PLANTED)
        conn.close()
    simple_session(claude.folder(project), project, "a newer prompt about the retry budget")
    proc = subprocess.run(
        [sys.executable, "-m", "c3async", "search", "retry", "--project", project, "--json"],
        capture_output=True,
        text=True,
        env=claude.env(),
        timeout=120,
    )  # a hang guard
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["results"]) == 2
    for k in range(4):
        conn = sqlite3.connect(search_dir / f"index-{k}.db")
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE type='trigger'").fetchone()[0] == 0
        conn.close()
        assert (search_dir / f".index-{k}.db.aside").is_file()  # kept aside, for whoever wants to look


# ------------------------------------------------------------------ the Hub and the MCP server


def test_the_hub_answers_bad_values_with_4xx(claude, project):
    """A value asked for out of range is a 400; a setting out of range, a file to repair, a 409."""
    assert claude.run("sessions", "--project", project).returncode == 0  # registers it
    with Hub(claude) as hub, hub.client() as c:
        for when in OUT_OF_RANGE[:2]:
            r = c.get("/api/search", params={"q": "retry", "since": when})
            assert r.status_code == 400 and "out of range" in r.json()["error"], r.text
        Path(project, ".c3", "config.json").write_text(json.dumps({"idle_days": "x"}))
        r = c.get("/api/sessions", params={"project": project})
        assert r.status_code == 409 and "idle_days" in r.json()["error"] and "config.json" in r.json()["error"]


def test_the_mcp_server_answers_bad_values_with_tool_errors(claude, project, monkeypatch):
    from mcp import Client

    from c3async.serve import app as server

    for key, value in {**claude.env(), "CLAUDE_PROJECT_DIR": project}.items():
        monkeypatch.setenv(key, value)

    config = Path(project, ".c3", "config.json")

    async def main() -> list[tuple[bool, str]]:
        out = []
        async with Client(server.mcp) as c:
            for data in (f"since={OUT_OF_RANGE[0]}", f"until={OUT_OF_RANGE[3]}"):
                r = await c.call_tool("c3_session", {"action": "search", "target": "retry", "data": data})
                out.append((r.is_error, r.content[0].text))
            await anyio.to_thread.run_sync(config.write_text, json.dumps({"idle_days": "forever"}))
            r = await c.call_tool("c3_session", {"action": "list"})
            out.append((r.is_error, r.content[0].text))
        return out

    answers = anyio.run(main)
    for is_error, text in answers[:2]:
        assert is_error and "out of range" in text and "failed inside c3async" not in text, text
    is_error, text = answers[2]
    assert is_error and "config.json" in text and "idle_days" in text, text


# ------------------------------------------------------------------ a 50 GB sparse transcript


def test_a_50_gb_sparse_transcript_costs_its_data_not_its_size(claude, project, monkeypatch):
    """A transcript whose last line is a 50 GB hole (no newline): ``show --turns`` reads the
    windows it needs (a hole holds no newline, so none is read), and the accountant and the
    indexer keep their place in the unterminated tail instead of reading it again each pass.
    The time limit on each command is a hang guard."""
    folder = claude.folder(project)
    sid = simple_session(folder, project, "the sparse one", start=datetime.now(UTC) - timedelta(hours=2))
    path = folder / f"{sid}.jsonl"
    with open(path, "ab") as f:
        f.write(b'{"type":"user","message":{"content":"')  # a line that never ends
    os.truncate(path, 50 * 2**30)
    for args in (["sessions", "--project", project, "--json"], ["show", sid, "--project", project, "--turns", "5"]):
        proc = subprocess.run(
            [sys.executable, "-m", "c3async", *args], capture_output=True, text=True, env=claude.env(), timeout=120
        )
        assert proc.returncode == 0, proc.stderr
    assert "the sparse one" in proc.stdout
    claude.activate(monkeypatch)
    from c3async.search import index
    from c3async.usage.account import account

    first, again = account(resolve(project)), account(resolve(project))
    assert first.totals[sid].responses == 1
    assert first.bytes_read < 2**20  # the hole is never read
    assert again.bytes_read == 0 and again.files_read == 0  # its place in the tail is kept
    built, rebuilt = index.update(), index.update()
    assert built.bytes_read < 2**20 and rebuilt.bytes_read == 0
