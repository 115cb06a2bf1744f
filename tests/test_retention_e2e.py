"""Issue "Keep what Claude Code would delete", end to end with the real Claude Code CLI.

Claude Code deletes every ``$CLAUDE_CONFIG_DIR/projects/*/*.jsonl`` whose mtime is older than
``cleanupPeriodDays`` in its start-up housekeeping (claude-code-facts.md §5 "Retention").
c3async keeps a session marked ``keep`` or kept by its policy (a noted session) in
``$C3_HOME/archive/<folder>/`` (hard links), lists it after the deletion with ``archived: true``
and puts it back with ``c3async resume``.

One module-scoped world (~15 s in all), the real ``claude -p`` run offline against
tests/fake_anthropic.py, as tests/test_claude_e2e.py does:

- four real sessions in a sandbox project: ``kept``, ``noted``, ``doomed`` (their mtimes set to
  3 days ago) and ``fresh`` (left as written); ``cleanupPeriodDays: 1`` in the user settings;
- ``c3async mark keep <kept>``, ``c3async mark note <noted> --summary ...`` (the default policy
  keeps noted sessions), ``c3async stats`` and one ``c3async sessions --json`` (the "before"
  listing: kept rows preserved, the doomed one with an ``expires in 0d`` hint);
- then Claude Code's OWN cleanup, by one more real ``claude -p`` in the project.

How the cleanup runs in 2.1.332 (found by running it, and read in the binary's bundled JS):
``-p`` runs the start-up housekeeping too, but the retention sweep is scheduled on an unref'd
``setTimeout(..., 5000)`` (``startBackgroundHousekeeping``): a ``claude -p`` that answers and
exits within 5 s (every run against the stand-in API does) never sweeps. The sweep is also
skipped while ``$CLAUDE_CONFIG_DIR/.last-cleanup`` is younger than 24 h (it is written after each
sweep). So the triggering session is held mid-turn by the stand-in API (``hold``) until the sweep
has visibly deleted the old unkept transcript (polled, at most ``SWEEP_WAIT`` s), then let go.
No file is deleted by the test: every deletion asserted here is Claude Code's.

Skipped where no ``claude`` binary is installed (CI sets C3_CLAUDE), as the other e2e modules.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fake_api import FakeAPI, KeptWorld, claude_cli, held_run, needs_claude, write_script

HERE = Path(__file__).resolve().parent

DAY = 86_400
SWEEP_WAIT = 25  # s: the sweep starts 5 s after start-up; generous for a loaded 2-core machine
OLD = ("kept", "noted", "doomed")  # mtimes set 3 days back, past a 1-day cleanupPeriodDays
NOTE = "retention e2e: kept by the noted policy"
RESUMED_PROMPT = "continue please"
RESUMED_REPLY = "Resumed reply from the stand-in API [c3ret-resumed]"


_claude = claude_cli
pytestmark = needs_claude


def _marker(key: str) -> str:
    return f"[c3ret:{key}]"


@dataclass
class World(KeptWorld):
    sandbox: object
    proj: str
    folder: Path  # Claude Code's transcript folder for proj
    env: dict[str, str]  # for claude
    c3env: dict[str, str]  # for c3async (claude on PATH)
    script: Path
    tmp: Path
    ids: dict[str, str] = field(default_factory=dict)  # key -> session id
    before: dict[str, dict] = field(default_factory=dict)  # the listing before the sweep, by key
    after: dict[str, dict] = field(default_factory=dict)  # the listing after the sweep, by id
    stats: list[dict] = field(default_factory=list)
    linked: dict[str, bool | None] = field(default_factory=dict)  # before the sweep: archive file is Claude Code's
    sweep_seconds: float | None = None
    trigger_id: str = ""
    trigger_error: str = ""
    still_there: list[str] = field(default_factory=list)  # old transcripts the sweep left

    def c3(self, *args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
        return self.sandbox.run(*args, env=self.c3env, cwd=cwd)

    def rows(self) -> dict[str, dict]:
        proc = self.c3("sessions", "--project", self.proj, "--json")
        assert proc.returncode == 0, proc.stderr
        return {row["id"]: row for row in json.loads(proc.stdout)}

    def claude(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(
            [_claude(), *args],
            cwd=self.proj,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def _session_id(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, f"claude exited {proc.returncode}: {proc.stderr[-1500:]} {proc.stdout[-500:]}"
    return json.loads(proc.stdout)["session_id"]


def _conversations(world: World, extra: dict) -> None:
    convs = {_marker(k): [{"text": f"Answer of {k}."}] for k in (*OLD, "fresh")}
    convs.update(extra)
    write_script(world.script, json.dumps({"conversations": convs}))


def _trigger_cleanup(world: World) -> None:
    """One more real ``claude -p`` in the project, held mid-turn (alive past the 5 s timer of the
    housekeeping) until the old transcripts are gone, or ``SWEEP_WAIT`` s have passed."""
    release = world.tmp / "release-trigger"
    _conversations(
        world, {_marker("trigger"): [{"hold": str(release), "hold_s": SWEEP_WAIT + 30, "then": {"text": "Swept."}}]}
    )
    # A sweep writes .last-cleanup, and none runs again for 24 h. The sessions above exit in well
    # under 5 s, so none of them swept; should one have (a very slow machine), the sentinel is
    # aged so that this start sweeps, as it would a day later.
    sentinel = world.sandbox.config / ".last-cleanup"
    if sentinel.exists():
        past = time.time() - 2 * DAY
        os.utime(sentinel, (past, past))
    code, out, err, waited = held_run(
        [_claude(), "-p", f"{_marker('trigger')} hi", "--output-format", "json"],
        world.proj,
        world.env,
        # the sweep's end: the old transcripts gone and the sentinel written (2.1.337 writes it
        # after the deletions; released at the first, claude could exit before the second)
        until=lambda: not any(world.transcript(k).exists() for k in OLD) and sentinel.exists(),
        release=release,
        wait=SWEEP_WAIT,
    )
    if waited is not None:
        world.sweep_seconds = round(waited, 1)
    if code != 0:
        world.trigger_error = f"claude exited {code}: {err[-1500:]} {out[-500:]}"
    else:
        world.trigger_id = json.loads(out)["session_id"]
    world.still_there = [k for k in OLD if world.transcript(k).exists()]


@pytest.fixture(scope="module")
def world(module_claude, tmp_path_factory):
    sandbox = module_claude
    tmp = tmp_path_factory.mktemp("retention")
    proj = sandbox.project("retention")
    api = FakeAPI.started(tmp)
    script = api.script
    env = api.env(sandbox)
    # c3async resume runs `claude` from PATH: a folder holding just a `claude` naming the binary
    # under test (C3_CLAUDE may name a file called otherwise), first on PATH.
    bindir = tmp / "bin"
    bindir.mkdir()
    (bindir / "claude").symlink_to(os.path.realpath(_claude()))
    c3env = dict(env, PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}")
    w = World(sandbox, proj, sandbox.folder(proj), env, c3env, script, tmp)
    try:
        _conversations(w, {})
        for key in (*OLD, "fresh"):
            w.ids[key] = _session_id(w.claude("-p", f"{_marker(key)} the {key} session", "--output-format", "json"))
        for key in w.ids:
            assert w.transcript(key).is_file(), f"claude wrote no {w.transcript(key)}"
        (sandbox.config / "settings.json").write_text(json.dumps({"cleanupPeriodDays": 1}))
        old = time.time() - 3 * DAY
        for key in OLD:
            os.utime(w.transcript(key), (old, old))

        kept = w.c3("mark", "keep", w.ids["kept"], "--project", proj)
        assert kept.returncode == 0, kept.stderr
        noted = w.c3("mark", "note", w.ids["noted"], "--summary", NOTE, "--project", proj)
        assert noted.returncode == 0, noted.stderr
        stats = w.c3("stats", "--project", proj, "--json")
        assert stats.returncode == 0, stats.stderr
        w.stats = json.loads(stats.stdout)
        rows = w.rows()  # the one listing before the sweep: it preserves the kept rows
        w.before = {key: rows.get(sid) for key, sid in w.ids.items()}
        for key in w.ids:
            kept_path = w.archived(key)
            w.linked[key] = (
                os.path.samestat(os.stat(w.transcript(key)), os.stat(kept_path)) if kept_path.exists() else None
            )

        _trigger_cleanup(w)
        w.after = w.rows()
        yield w
    finally:
        api.stop()


# ------------------------------------------------------------------------------------ before


def test_before_the_sweep_kept_rows_are_preserved_and_the_doomed_one_warned(world):
    rows = world.before
    assert all(rows[k] is not None for k in rows), {k: bool(v) for k, v in rows.items()}
    assert (rows["kept"]["kept"], rows["kept"]["kept_by"]) == (True, "mark")
    assert (rows["noted"]["kept"], rows["noted"]["kept_by"]) == (True, "policy: noted")
    assert rows["noted"]["note"]["summary"] == NOTE
    for key in ("kept", "noted"):
        row = rows[key]
        assert row["archived"] is False and row["expires_in_days"] is None, row
        assert not any(h.startswith("expires in") for h in row["hints"]), row["hints"]
        # Preserved as a hard link: the very file Claude Code had then.
        assert world.linked[key] is True, f"{key}: archive entry {world.archived(key)}: {world.linked[key]}"
    doomed = rows["doomed"]
    assert (doomed["kept"], doomed["archived"], doomed["expires_in_days"]) == (False, False, 0), doomed
    assert "expires in 0d" in doomed["hints"], doomed["hints"]
    assert world.linked["doomed"] is None and world.linked["fresh"] is None, world.linked
    fresh = rows["fresh"]
    assert (fresh["kept"], fresh["expires_in_days"]) == (False, 1), fresh
    assert "expires in 1d" in fresh["hints"], fresh["hints"]
    # c3async stats counted every real session (the kept and noted ones among them).
    counted = {r["id"] for r in world.stats}
    assert {world.ids["kept"], world.ids["noted"]} <= counted, world.stats


# ------------------------------------------------------------------------------------ Claude Code's sweep


def test_claude_code_itself_deletes_every_old_transcript(world):
    """The real sweep ran (in ``-p`` mode, offline): the three old transcripts are gone from
    Claude Code's folder, the two recent ones are not."""
    assert not world.trigger_error, world.trigger_error
    sentinel = world.sandbox.config / ".last-cleanup"
    assert world.still_there == [], (
        f"Claude Code's sweep did not delete {world.still_there} within {SWEEP_WAIT} s "
        f"(.last-cleanup {'written' if sentinel.exists() else 'absent'}; folder holds "
        f"{sorted(p.name for p in world.folder.iterdir())})"
    )
    assert sentinel.is_file(), "a sweep writes $CLAUDE_CONFIG_DIR/.last-cleanup"
    for key in OLD:
        assert not world.transcript(key).exists(), key
    assert world.transcript("fresh").is_file(), "a transcript younger than cleanupPeriodDays was deleted"
    assert (world.folder / f"{world.trigger_id}.jsonl").is_file()


def test_after_the_sweep_kept_sessions_are_listed_from_the_archive(world):
    assert world.still_there == [], f"no sweep (see the test above): {world.still_there}"
    rows = world.after
    base = os.fspath(world.sandbox.c3home / "archive") + os.sep
    assert world.ids["doomed"] not in rows, "an unkept session Claude Code deleted is still listed"
    for key in ("kept", "noted"):
        sid = world.ids[key]
        row = rows.get(sid)
        assert row is not None, f"{key} ({sid}) not listed after Claude Code deleted it: {sorted(rows)}"
        assert (row["archived"], row["kept"]) == (True, True), row
        assert row["path"] == os.fspath(world.archived(key)) and row["path"].startswith(base), row["path"]
        assert row["resume"] == f"cd {world.proj} && c3async resume {sid}", row["resume"]
        assert row["cwd"] == world.proj and row["title"] == f"{_marker(key)} the {key} session", row
        tokens = row["tokens"]
        assert tokens is not None and tokens["total"] > 0, f"{key}: tokens {tokens!r} (c3async stats ran before)"
        assert tokens["input"] >= 12 and tokens["output"] >= 8, tokens  # the stand-in API's usage
        assert world.archived(key).is_file()
        assert os.stat(world.archived(key)).st_nlink == 1, "Claude Code's name is gone: only the archive holds it"
    assert rows[world.ids["kept"]]["kept_by"] == "mark"
    noted = rows[world.ids["noted"]]
    assert noted["kept_by"] == "policy: noted" and noted["note"]["summary"] == NOTE, noted
    fresh = rows.get(world.ids["fresh"])
    assert fresh is not None and fresh["archived"] is False, fresh


# ------------------------------------------------------------------------------------ resume


def test_resume_puts_the_transcript_back_and_claude_appends_to_it(world):
    assert world.still_there == [], f"no sweep (see above): {world.still_there}"
    sid = world.ids["kept"]
    live, kept = world.transcript("kept"), world.archived("kept")
    size_before = kept.stat().st_size
    others = {p.name for p in world.folder.glob("*.jsonl")}
    # The resumed conversation's first user message is the kept session's: its marker picks the
    # reply to its second turn. That turn is held until the resumed claude's own start-up sweep
    # has run (the sentinel aged as a day later): the transcript put back, 3 days old, must not
    # be deleted by the very claude that resumes it.
    sentinel = world.sandbox.config / ".last-cleanup"
    aged = time.time() - 2 * DAY
    os.utime(sentinel, (aged, aged))
    release = world.tmp / "release-resume"
    _conversations(
        world,
        {
            _marker("kept"): [
                {"text": "Answer of kept."},
                {"hold": str(release), "hold_s": SWEEP_WAIT + 30, "then": {"text": RESUMED_REPLY}},
            ]
        },
    )
    # As the archived row's resume command says (`c3async resume ID`), run in the project, with
    # claude's arguments after `--`. (Not `resume ID --project DIR -- ...`: any option between the
    # id and `--` makes argparse reject everything after `--`; see the report.)
    code, stdout, stderr, _ = held_run(
        [sys.executable, "-m", "c3async", "resume", sid, "--", "-p", RESUMED_PROMPT, "--output-format", "json"],
        world.proj,
        world.c3env,
        until=lambda: sentinel.stat().st_mtime > aged + DAY,  # rewritten: this start swept
        release=release,
        wait=SWEEP_WAIT,
    )
    swept = sentinel.stat().st_mtime > aged + DAY
    assert code == 0, f"exit {code}: {stderr[-2000:]} {stdout[-500:]}"
    assert "put back" in stderr and os.fspath(live) in stderr, stderr
    assert swept, f"the resumed claude did not sweep within {SWEEP_WAIT} s (.last-cleanup not rewritten)"
    out = json.loads(stdout)
    assert out["session_id"] == sid, f"claude resumed into another session: {out['session_id']} (want {sid})"
    assert RESUMED_REPLY in out.get("result", ""), out.get("result")

    assert live.is_file(), "the transcript is not back in Claude Code's folder"
    assert os.path.samestat(os.stat(live), os.stat(kept)), "put back as a copy, not the archive's file"
    assert {p.name for p in world.folder.glob("*.jsonl")} == others | {live.name}, "claude wrote another file"
    text = live.read_text()
    assert live.stat().st_size > size_before, "the transcript did not grow"
    assert RESUMED_PROMPT in text and RESUMED_REPLY in text, "the new turn is not in the same transcript"
    lines = [json.loads(x) for x in text.splitlines() if x.strip()]
    ids = {x.get("sessionId") for x in lines if x.get("sessionId")}
    assert ids == {sid}, f"session ids in the transcript: {ids}"
    # The archive's name is the same file: it has the new turn too.
    assert kept.stat().st_size == live.stat().st_size
    assert RESUMED_PROMPT in kept.read_text() and RESUMED_REPLY in kept.read_text()

    rows = world.rows()
    row = rows.get(sid)
    assert row is not None and row["archived"] is False and row["path"] == os.fspath(live), row
    assert row["kept"] is True and row["kept_by"] == "mark", row
    # That second sweep left the archive alone: the noted session is still listed from it.
    noted = rows.get(world.ids["noted"])
    assert noted is not None and noted["archived"] is True and world.archived("noted").is_file(), noted
