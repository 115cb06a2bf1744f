"""The keep policy and the sessions near Claude Code's cleanup: which sessions ``marked``, ``all``
and ``none`` cover (listed rows, and the older sessions a listing never reads), the pass that
preserves them, the counts every door warns with, ``keep --expiring``, the Hub's "keep them
all", ``c3_status``, and ``stats`` keeping what a deleted transcript spent.

"Claude Code" here is the test: it writes transcripts with old mtimes (the cleanup goes by them)
and deletes what its cleanup would. The real CLI's cleanup is in tests/test_keep_e2e.py.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from hubproc import Hub, wait_for

from c3async.ground.project import resolve
from c3async.sessions import keep
from c3async.sessions.act import keep_expiring, survey
from c3async.sessions.view import list_rows_sync
from c3async.stores import config, records
from c3async.stores.marks import write_mark
from c3async.tasks import actions
from c3async.tasks import store as task_store
from stress.transcripts import simple_session

DAY = 86_400


def ok(proc):
    assert proc.returncode == 0, f"rc={proc.returncode}\nstdout={proc.stdout}\nstderr={proc.stderr}"
    assert "Traceback" not in proc.stderr
    return proc


def aged(folder: Path, proj: str, prompt: str, days: float) -> str:
    """A session Claude Code last wrote ``days`` ago (the default cleanup: 30 days)."""
    return simple_session(folder, proj, prompt, mtime=time.time() - days * DAY)


def archived(sb, folder: Path, sid: str) -> bool:
    return Path(sb.c3home, "archive", folder.name, f"{sid}.jsonl").is_file()


def set_policy(sb, value) -> None:
    sb.c3home.mkdir(parents=True, exist_ok=True)
    (sb.c3home / "config.json").write_text(json.dumps({"keep": value}))


@pytest.fixture
def world(claude, monkeypatch):
    claude.activate(monkeypatch)
    proj = claude.project("app")
    return claude, proj, claude.folder(proj)


# ------------------------------------------------------------------------------- the policy


@pytest.mark.parametrize(
    ("value", "policy", "warned"),
    [
        ("marked", "marked", None),
        ("all", "all", None),
        ("none", "none", None),
        ([], "none", None),
        (["noted", "linked"], "marked", None),
        (["snapshot"], "marked", None),
        (["noted", "all"], "all", None),
        (["noted", "forevr"], "marked", "'forevr'"),
        ("marekd", "marked", "did you mean 'marked'"),
        ("ALL", "marked", "'ALL'"),
        (7, "marked", "the int 7"),
        ({"keep": "all"}, "marked", "the dict"),
    ],
)
def test_each_value_of_keep_reads_as_a_policy(tmp_path, caplog, value, policy, warned) -> None:
    where = tmp_path / f"config-{len(caplog.records)}-{abs(hash(json.dumps(value)))}.json"
    with caplog.at_level(logging.WARNING):
        assert config.keep_value(where, value) == policy
    said = [r.getMessage() for r in caplog.records if str(where) in r.getMessage()]
    if warned is None:
        assert said == []
    else:
        assert len(said) == 1 and warned in said[0] and "marked, all, none" in said[0], said


def test_a_wrong_other_setting_does_not_stop_the_keep_policy(world) -> None:
    sb, proj, _folder = world
    set_policy(sb, "all")
    (sb.c3home / "config.json").write_text(json.dumps({"keep": "all", "idle_days": "seven"}))
    assert config.keep_policy(resolve(proj)) == "all"
    Path(proj, ".c3").mkdir(exist_ok=True)
    Path(proj, ".c3", "config.json").write_text(json.dumps({"keep": "none"}))
    assert config.keep_policy(resolve(proj)) == "none", "the project's config wins"


# ------------------------------------------------------------------ which sessions are covered


def _judged_world(sb, proj: str, folder: Path) -> dict[str, str]:
    """One old session of each kind (26 days: within a week of the 30-day cut-off), and three
    fresh ones that a listing of 3 rows shows instead of them."""
    s = {
        k: aged(folder, proj, f"the {k} one", 26)
        for k in ("noted", "stale", "unstaled", "linked", "decided", "snapshot", "kept", "unkept", "plain")
    }
    for i in range(3):
        aged(folder, proj, f"fresh {i}", 0.1)
    write_mark(resolve(proj), s["noted"], "note", summary="worth coming back to")
    write_mark(resolve(proj), s["stale"], "stale", reason="superseded")
    write_mark(resolve(proj), s["unstaled"], "stale", reason="oops")
    write_mark(resolve(proj), s["unstaled"], "unstale")
    write_mark(resolve(proj), s["kept"], "keep")
    write_mark(resolve(proj), s["unkept"], "note", summary="noted, then unkept")
    write_mark(resolve(proj), s["unkept"], "unkeep")
    who = actions.Who(by="user")
    task = actions.run(resolve(proj), who, "add", title="a task")
    actions.run(resolve(proj), who, "link", task_id=task["id"], ref=s["linked"])

    def as_typed(pm) -> None:  # an earlier version stored the prefix a person typed
        pm.tasks[0].sessions = [s["linked"][:8]]

    task_store.change(resolve(proj), as_typed)
    actions.run(
        resolve(proj), actions.Who(session=s["decided"], by="agent"), "decide", text="use sqlite", reasoning="why"
    )
    rec = records.new_record("c3-" + s["snapshot"][:8], "test", proj)
    rec.snapshots.append(records.Snapshot(ts=time.time(), host_session_id=s["snapshot"], summary="where we are"))
    records.save(resolve(proj), rec)
    return s


MARKED = {
    "noted": "policy: noted",
    "stale": "policy: stale",
    "unstaled": "policy: stale",
    "linked": "policy: linked",
    "decided": "policy: linked",
    "snapshot": "policy: snapshot",
    "kept": "mark",
}


@pytest.mark.parametrize("limit", [100, 3])
def test_marked_covers_what_someone_said_something_about_listed_or_not(world, limit) -> None:
    """The same sessions are kept whether the listing reads them (rows) or only stats them
    (older than its newest ``limit``): the archive holds exactly those."""
    sb, proj, folder = world
    s = _judged_world(sb, proj, folder)
    _, rows = list_rows_sync([resolve(proj)], limit=limit, processes=False)
    by_id = {r.id: r for r in rows}
    if limit == 100:
        assert {k: by_id[sid].kept_by for k, sid in s.items()} == {**dict.fromkeys(s), **MARKED}
        assert by_id[s["plain"]].expires_in_days == 4 and "expires in 4d" in by_id[s["plain"]].hints
        assert by_id[s["noted"]].expires_in_days is None
    else:
        assert not set(s.values()) & set(by_id), "the old sessions are beyond this listing's rows"
    assert {k for k, sid in s.items() if archived(sb, folder, sid)} == set(MARKED)
    found = keep.surveyed(resolve(proj))
    assert found is not None
    assert (found.expiring, found.kept, found.waived) == (9, 7, 1)
    assert [e.id for e in found.unkept] == [s["plain"]] and found.unkept[0].expires_in_days == 4


def test_all_keeps_every_session_but_one_a_person_unkept_and_none_only_the_keep_marks(world) -> None:
    sb, proj, folder = world
    s = _judged_world(sb, proj, folder)
    set_policy(sb, "all")
    list_rows_sync([resolve(proj)], limit=3, processes=False)
    assert {k for k, sid in s.items() if not archived(sb, folder, sid)} == {"unkept"}
    assert (keep.surveyed(resolve(proj)).kept, keep.surveyed(resolve(proj)).waived) == (8, 1)
    set_policy(sb, "none")
    _, rows = list_rows_sync([resolve(proj)], processes=False)
    assert {r.id for r in rows if r.kept} == {s["kept"]}
    found = keep.surveyed(resolve(proj))
    # what an earlier policy preserved is still held: counted as kept only where it is kept now
    assert (found.expiring, found.kept, found.waived, len(found.unkept)) == (9, 1, 1, 7)


def test_a_session_far_from_the_cut_off_beyond_the_rows_is_not_touched(world) -> None:
    sb, proj, folder = world
    far = aged(folder, proj, "noted, 10 days old", 10)
    write_mark(resolve(proj), far, "note", summary="later")
    for i in range(2):
        aged(folder, proj, f"fresh {i}", 0.1)
    list_rows_sync([resolve(proj)], limit=2, processes=False)
    assert not archived(sb, folder, far), "20 days from the cut-off: the next weeks' listings keep it"
    assert keep.surveyed(resolve(proj)).expiring == 0
    list_rows_sync([resolve(proj)], processes=False)
    assert archived(sb, folder, far), "a listed kept row is preserved whatever its age"


def test_the_survey_of_a_door_counts_without_a_listing_and_a_report_writes_nothing(world) -> None:
    sb, proj, folder = world
    s = _judged_world(sb, proj, folder)
    read_only = survey(resolve(proj), preserve=False)
    assert (read_only.expiring, read_only.kept, read_only.waived, len(read_only.unkept)) == (9, 0, 1, 8)
    assert not any(archived(sb, folder, sid) for sid in s.values())
    assert {e.kept_by for e in read_only.unkept} == {None, *MARKED.values()}
    done = survey(resolve(proj))
    assert (done.expiring, done.kept, done.waived) == (9, 7, 1)
    assert survey(resolve(proj), preserve=False).kept == 7, "a report counts what the archive holds"


def test_the_warning_says_the_numbers_and_the_soonest(world) -> None:
    _sb, proj, folder = world
    aged(folder, proj, "deleted at the next start", 31)
    aged(folder, proj, "in two days", 28)
    noted = aged(folder, proj, "noted", 27)
    write_mark(resolve(proj), noted, "note", summary="s")
    list_rows_sync([resolve(proj)], processes=False)
    found = keep.surveyed(resolve(proj))
    assert [e.expires_in_days for e in found.unkept] == [0, 2]
    assert keep.warning(found) == (
        "3 sessions expire within 7 days (1 kept): Claude Code deletes the 2 others, the first at its "
        "next start; `c3async keep --expiring` keeps them"
    )
    two = keep.total([found, found, None])
    assert (two.expiring, two.kept, len(two.unkept)) == (6, 2, 4)
    assert keep.warning(keep.Survey(expiring=5, kept=5)) is None, "all kept: nothing to warn of"


def test_keep_expiring_marks_and_preserves_all_but_a_person_unkept(world) -> None:
    sb, proj, folder = world
    s = _judged_world(sb, proj, folder)
    done = keep_expiring([resolve(proj)])
    assert {k.id for k in done.kept} == {s["plain"]} and all(k.preserved for k in done.kept)
    assert (done.expiring, done.held, done.waived) == (9, 7, 1)
    assert archived(sb, folder, s["plain"]) and not archived(sb, folder, s["unkept"])
    marks = [json.loads(x) for x in Path(proj, ".c3", "session_marks.jsonl").read_text().splitlines()]
    assert [(m["id"], m["op"], m["by"]) for m in marks if m["op"] == "keep"][-1] == (s["plain"], "keep", "user")
    rows = {r.id: r for r in list_rows_sync([resolve(proj)], processes=False)[1]}
    assert rows[s["plain"]].kept_by == "mark"
    assert keep.surveyed(resolve(proj)).unkept == []
    assert keep_expiring([resolve(proj)]).kept == [], "nothing left to keep"


# -------------------------------------------------------------------------- the CLI's doors


@pytest.mark.process
def test_listings_warn_once_on_stderr_with_json_too_and_sum_the_projects(world) -> None:
    sb, proj, folder = world
    other = sb.project("other")
    for i in range(3):
        aged(folder, proj, f"old {i}", 27)
    aged(sb.folder(other), other, "old elsewhere", 29)
    noted = aged(folder, proj, "noted", 26)
    ok(sb.run("mark", "note", noted, "--summary", "s", "--project", proj))
    env = sb.env()
    one = ok(sb.run("sessions", "--project", proj, env=env))
    line = "4 sessions expire within 7 days (1 kept): Claude Code deletes the 3 others, the first in 3 days"
    assert one.stderr.count(line) == 1, one.stderr
    assert f"`c3async keep --expiring --project {proj}` keeps them" in one.stderr
    as_json = ok(sb.run("sessions", "--project", proj, "--json"))
    assert as_json.stderr.count("expire within 7 days") == 1 and json.loads(as_json.stdout)
    ok(sb.run("sessions", "--project", other))  # registered
    both = ok(sb.run("sessions", "--all"))
    assert both.stderr.count("5 sessions expire within 7 days (1 kept)") == 1, both.stderr
    assert "`c3async keep --expiring --all`" in both.stderr
    filtered = ok(sb.run("sessions", "--project", proj, "--filter", "live"))
    assert filtered.stderr.count("expire within 7 days") == 1, "the cleanup deletes what the filter hides"

    kept = ok(sb.run("keep", "--expiring", "--project", proj))
    assert kept.stdout.count("kept ") == 3 and "expires in 3d" in kept.stdout, kept.stdout
    assert "3 of 3 sessions that Claude Code deletes within 7 days kept now (1 kept already)" in kept.stderr
    assert "expire" not in ok(sb.run("sessions", "--project", proj)).stderr
    everywhere = json.loads(ok(sb.run("keep", "--expiring", "--all", "--json")).stdout)
    assert [k["project"] for k in everywhere["kept"]] == [other] and everywhere["kept"][0]["preserved"] is True
    assert (everywhere["expiring"], everywhere["held"], everywhere["waived"]) == (5, 4, 0)
    again = ok(sb.run("keep", "--expiring", "--all"))
    assert again.stdout == "" and "nothing to keep: 5 sessions expire within 7 days (5 kept already)" in again.stderr


@pytest.mark.process
@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((), "one of ID, --status or --expiring"),
        (("--expiring", "--status"), "got --status and --expiring"),
        (("0123abcd", "--expiring"), "got ID and --expiring"),
        (("--status", "--all"), "--all goes with --expiring"),
    ],
)
def test_keep_takes_one_thing_to_do(world, args, said) -> None:
    sb, proj, _folder = world
    proc = sb.run("keep", *args, "--project", proj)
    assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


# ------------------------------------------------------------------------------- the Hub's door


@pytest.mark.process
def test_the_hub_counts_the_expiring_and_keeps_them_all_under_its_rules(world) -> None:
    sb, proj, folder = world
    other = sb.project("other")
    plain = [aged(folder, proj, f"old {i}", 27) for i in range(2)]
    elsewhere = aged(sb.folder(other), other, "old elsewhere", 25)
    for p in (proj, other):
        ok(sb.run("sessions", "--project", p))
    with Hub(sb) as hub, hub.client() as c:
        every = c.get("/api/rows").json()["expiring"]
        assert every == {"sessions": 3, "kept": 0, "waived": 0, "unkept": 3, "soonest": 3, "days": 7}
        assert c.get("/api/rows", params={"project": other}).json()["expiring"]["unkept"] == 1
        page = hub.login()
        try:
            for headers, status in (
                ({"Origin": "http://evil.example"}, 403),
                ({"Origin": hub.url}, 403),  # a browser's POST without X-C3-Request
                ({"Sec-Fetch-Site": "cross-site"}, 403),
            ):
                r = c.post("/api/keep/expiring", json={"project": proj}, headers=headers)
                assert r.status_code == status, (headers, r.text)
            with hub.client(auth=False) as stranger:
                assert stranger.post("/api/keep/expiring", json={}).status_code == 401
            assert c.post("/api/keep/expiring", json={"project": "/nowhere"}).status_code == 400
            assert c.post("/api/keep/expiring", content=b"[1]").status_code == 400
            assert not any(archived(sb, folder, sid) for sid in plain), "a refused request keeps nothing"
            r = page.post("/api/keep/expiring", json={"project": proj}, headers={"X-C3-Request": "1"})
        finally:
            page.close()
        assert r.status_code == 200, r.text
        assert r.json() == {"kept": 2, "marked": 2, "failed": 0, "error": None, "expiring": 2, "held": 0, "waived": 0}
        assert all(archived(sb, folder, sid) for sid in plain) and not archived(sb, sb.folder(other), elsewhere)
        left = wait_for(lambda: (e := c.get("/api/rows").json()["expiring"])["unkept"] == 1 and e)
        assert (left["sessions"], left["kept"]) == (3, 2)
        r = c.post("/api/keep/expiring")  # no body: every registered project
        assert r.status_code == 200 and r.json()["kept"] == 1, r.text
        assert archived(sb, sb.folder(other), elsewhere)


# ------------------------------------------------------------------- c3_status and the stats


@pytest.mark.process
def test_stats_keep_a_deleted_transcripts_tokens_marked_deleted(world) -> None:
    sb, proj, folder = world
    gone = aged(folder, proj, "deleted by the cleanup", 40)
    held = aged(folder, proj, "kept, then deleted", 40)
    here = aged(folder, proj, "still here", 1)
    ok(sb.run("keep", held, "--project", proj))
    ok(sb.run("sessions", "--project", proj))  # the catalog knows the titles the accountant takes
    before = {r["id"]: r for r in json.loads(ok(sb.run("stats", "--project", proj, "--json")).stdout)}
    assert set(before) == {gone, held, here} and not any(r["deleted"] for r in before.values())
    os.unlink(folder / f"{gone}.jsonl")  # Claude Code's cleanup
    os.unlink(folder / f"{held}.jsonl")
    (Path(proj, ".c3", "cache") / "usage.json").unlink()  # a cache: the ledger must not need it
    after = {r["id"]: r for r in json.loads(ok(sb.run("stats", "--project", proj, "--json")).stdout)}
    assert {i: r["deleted"] for i, r in after.items()} == {gone: True, held: False, here: False}
    for key in ("input", "output", "cache_read", "cost_usd"):
        assert after[gone][key] == before[gone][key], key
    table = ok(sb.run("stats", "--project", proj)).stdout.splitlines()
    assert next(line for line in table if line.startswith(gone[:8])).endswith("[deleted] deleted by the cleanup")
    total = next(line for line in table if line.startswith("total"))
    assert f"{sum(r['input'] for r in before.values()):>8}" in total, (total, before)
    assert "[deleted]: 1 session whose transcript Claude Code deleted" in "\n".join(table)
    every = {r["id"]: r for r in json.loads(ok(sb.run("stats", "--all", "--json")).stdout)}
    assert every[gone]["deleted"] is True and every[held]["deleted"] is False


@pytest.mark.process
def test_c3_status_says_what_expires_and_what_was_deleted(world, monkeypatch) -> None:
    import anyio
    from mcp import Client

    from c3async.serve import app as server

    sb, proj, folder = world
    gone = aged(folder, proj, "spent, then deleted", 40)
    aged(folder, proj, "expiring", 27)
    ok(sb.run("sessions", "--project", proj))
    ok(sb.run("stats", "--project", proj))
    os.unlink(folder / f"{gone}.jsonl")
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", proj)

    async def go() -> str:
        async with Client(server.mcp, mode="auto") as c:
            r = await c.call_tool("c3_status", {"view": "sessions"})
            assert not r.is_error, r.content
            return r.content[0].text

    text = anyio.run(go)
    assert "[deleted] spent, then deleted" in text, text
    assert "1 session expires within 7 days (0 kept): Claude Code deletes it, the first in 3 days" in text
    assert not Path(sb.c3home, "archive").exists(), "a report preserves nothing"


def test_the_runtime_keeps_the_archive_current_when_the_project_moves_and_every_hour(world, monkeypatch) -> None:
    """The background keep pass of the doors that stay up (``sessions.runtime``, which the MCP
    server and the Hub both start): at its first run, when the project's version moves, and when
    KEEP_S has passed with nothing moving (a session nears the cut-off as time passes, not as
    files change)."""
    from c3async.sessions import runtime

    sb, proj, folder = world
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", proj)
    noted = aged(folder, proj, "noted long ago", 26)
    for i in range(3):
        aged(folder, proj, f"fresh {i}", 0.1)
    here = resolve(proj)
    write_mark(here, noted, "note", summary="s")
    rt = runtime.Runtime(lambda: [here])
    kept = Path(sb.c3home, "archive", folder.name, f"{noted}.jsonl")
    assert rt.account_once(here)
    assert kept.is_file(), "the first pass preserves it"
    kept.unlink()  # the archive is not part of the project's position: nothing moves
    rt.account_once(here)
    assert not kept.exists(), "within the hour, an unmoved project is not listed again"
    rt.feed.versions[here] = rt.feed.version(here) + 1  # the watcher saw it move
    rt.account_once(here)
    assert kept.is_file(), "a moved project is listed again"
    kept.unlink()
    at, version = rt.kept_at[here]
    rt.kept_at[here] = (at - runtime.KEEP_S - 1, version)
    rt.account_once(here)
    assert kept.is_file(), "an hour on, the pass runs again"


@pytest.mark.process
def test_the_hook_preserves_what_is_kept_when_claude_starts_not_on_clear(world) -> None:
    sb, proj, folder = world
    other = sb.project("other")
    here = aged(folder, proj, "noted here", 27)
    there = aged(sb.folder(other), other, "noted elsewhere", 29)
    write_mark(resolve(proj), here, "note", summary="s")
    write_mark(resolve(other), there, "note", summary="s")
    ok(sb.run("sessions", "--project", other))  # registered; its listing preserves it: undo that
    Path(sb.c3home, "archive", sb.folder(other).name, f"{there}.jsonl").unlink()

    def hook(source: str) -> None:
        payload = {"hook_event_name": "SessionStart", "session_id": str(uuid.uuid4()), "cwd": proj, "source": source}
        proc = ok(
            subprocess.run(
                [sys.executable, "-m", "c3async", "hook"],
                input=json.dumps(payload),
                capture_output=True,
                text=True,
                env=sb.env(),
                cwd=proj,
                timeout=60,
            )
        )
        assert proc.stdout == "" and proc.stderr == "", proc

    hook("clear")
    assert not archived(sb, folder, here), "a /clear is no start of claude: no cleanup follows it"
    hook("startup")
    assert archived(sb, folder, here) and archived(sb, sb.folder(other), there)
    assert not Path(sb.c3home, "hook-errors.log").exists()
