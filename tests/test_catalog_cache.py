"""The per-project cache: written, reused, never trusted when foreign or corrupt, and kept right
when a transcript grows or is rewritten. A cached listing must always equal a cold one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgspec
import pytest

from c3async.catalog.read import read_transcript
from stress.transcripts import Conversation, append_lines, encode, set_mtime, write_session

pytestmark = pytest.mark.process

T0 = 1_700_000_000
MiB = 1024 * 1024


def cache_file(project: str) -> Path:
    return Path(project) / ".c3" / "cache" / "session_catalog.json"


def cold_rows(claude, project: str) -> list[dict]:
    """The listing with the cache thrown away first."""
    shutil.rmtree(cache_file(project).parent, ignore_errors=True)
    return claude.sessions(project)


def differences(warm: list[dict], cold: list[dict]) -> dict:
    """Per row id, the keys whose values differ: {id: {key: (warm, cold)}}; {} when equal."""
    assert [r["id"] for r in warm] == [r["id"] for r in cold]
    out = {}
    for w, c in zip(warm, cold):
        diff = {k: (w.get(k), c.get(k)) for k in set(w) | set(c) if w.get(k) != c.get(k)}
        if diff:
            out[w["id"]] = diff
    return out


@pytest.fixture
def app(claude):
    """A project with three sessions; returns (project, folder, [conversations])."""
    project = claude.project("app")
    folder = claude.folder(project)
    convs = []
    for i, (prompt, title) in enumerate(
        [("alpha prompt", None), ("beta prompt", "beta-title"), ("gamma prompt", None)]
    ):
        c = Conversation(project)
        lines = [c.permission_mode(), *c.exchange(prompt)]
        if title:
            lines.append(c.custom_title(title))
        write_session(folder, c.id, lines, mtime=T0 + i)
        convs.append(c)
    return project, folder, convs


def test_second_listing_returns_identical_rows(claude, app):
    project, _, _ = app
    first = claude.sessions(project)
    assert cache_file(project).exists()
    assert claude.sessions(project) == first


def test_unchanged_transcript_is_served_from_the_cache_without_reading_it(claude, app):
    project, folder, convs = app
    claude.sessions(project)
    doc = json.loads(cache_file(project).read_bytes())
    path = str(folder / f"{convs[0].id}.jsonl")
    entries = [v for v in doc.values() if isinstance(v, dict) and path in v]
    assert len(entries) == 1, "the cache is expected to key its entries by transcript path"
    entries[0][path]["custom_title"] = "served-from-cache"
    cache_file(project).write_text(json.dumps(doc))
    rows = {r["id"]: r for r in claude.sessions(project)}
    assert rows[convs[0].id]["title"] == "served-from-cache"


def _planted(doc: dict, folder, sid: str) -> dict:
    """The real cache with one entry's title replaced, so trusting it would show."""
    doc = json.loads(json.dumps(doc))
    path = str(folder / f"{sid}.jsonl")
    for value in doc.values():
        if isinstance(value, dict) and path in value:
            value[path]["custom_title"] = "PLANTED"
    return doc


CORRUPTIONS = {
    "junk_bytes": lambda doc, folder, sid: b"\x00\xff{{{ not json \x89PNG",
    "json_array": lambda doc, folder, sid: b"[1, 2, 3]",
    "json_of_another_shape": lambda doc, folder, sid: json.dumps({"entries": [1, 2], "version": "x"}).encode(),
    "another_format": lambda doc, folder, sid: json.dumps(
        {**_planted(doc, folder, sid), "format": "someone-else.session_catalog"}
    ).encode(),
    "another_version": lambda doc, folder, sid: json.dumps({**_planted(doc, folder, sid), "version": 999_999}).encode(),
    "empty_file": lambda doc, folder, sid: b"",
}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_corrupt_or_foreign_cache_is_ignored_and_rebuilt(claude, app, corruption):
    project, folder, convs = app
    fresh = claude.sessions(project)
    doc = json.loads(cache_file(project).read_bytes())
    cache_file(project).write_bytes(CORRUPTIONS[corruption](doc, folder, convs[0].id))
    assert claude.sessions(project) == fresh
    assert json.loads(cache_file(project).read_bytes()) == doc


def test_grown_transcript_shows_the_new_title_and_prompt(claude, app):
    project, folder, convs = app
    c = convs[0]
    before = {r["id"]: r for r in claude.sessions(project)}[c.id]
    append_lines(
        folder / f"{c.id}.jsonl",
        [c.ai_title("Alpha, now named by AI"), *c.exchange("the appended prompt")],
        mtime=T0 + 100,
    )
    after = {r["id"]: r for r in claude.sessions(project)}[c.id]
    assert (after["title"], after["title_source"]) == ("Alpha, now named by AI", "ai-title")
    assert after["last_prompt"] == "the appended prompt"
    assert after["user_turns"] == before["user_turns"] + 1
    assert after["first_prompt"] == before["first_prompt"] == "alpha prompt"


def test_grown_transcript_counts_exactly_the_appended_prompts(claude, app):
    project, folder, convs = app
    c = convs[1]
    before = {r["id"]: r for r in claude.sessions(project)}[c.id]
    append_lines(
        folder / f"{c.id}.jsonl",
        [*c.exchange("two"), *c.tool_round("ok"), *c.exchange("three"), c.prompt("[Request interrupted by user]")],
        mtime=T0 + 100,
    )
    after = {r["id"]: r for r in claude.sessions(project)}[c.id]
    assert after["user_turns"] == before["user_turns"] + 2
    assert (after["title"], after["last_prompt"]) == ("beta-title", "three")


def test_grown_transcript_listing_equals_a_cold_listing(claude, app):
    project, folder, convs = app
    claude.sessions(project)
    c = convs[2]
    c.branch = "feature"
    append_lines(folder / f"{c.id}.jsonl", [c.custom_title("gamma-renamed"), *c.exchange("more gamma")], mtime=T0 + 100)
    warm = claude.sessions(project)
    assert differences(warm, cold_rows(claude, project)) == {}
    assert {r["id"]: r for r in warm}[c.id]["branch"] == "feature"


def test_line_completed_after_a_torn_write_is_counted_once(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    c = Conversation(project)
    last = encode(c.prompt("finish the migration"))
    path = write_session(folder, c.id, [*c.exchange("start")], unterminated=last[:70], mtime=T0)
    assert claude.sessions(project)[0]["user_turns"] == 1
    append_lines(path, [*c.reply()], raw=last[70:] + b"\n", mtime=T0 + 10)
    row = claude.sessions(project)[0]
    assert (row["last_prompt"], row["user_turns"]) == ("finish the migration", 2)
    assert differences(claude.sessions(project), cold_rows(claude, project)) == {}


def test_clear_only_file_that_gains_a_prompt_listing_equals_a_cold_listing(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    c = Conversation(project)
    path = write_session(folder, c.id, [c.caveat(), c.clear(), c.local_stdout()], mtime=T0)
    assert claude.sessions(project)[0]["title"] == "/clear"
    append_lines(path, [*c.exchange("the first real prompt")], mtime=T0 + 10)
    row = claude.sessions(project)[0]
    assert (row["title"], row["began_with_clear"], row["user_turns"]) == ("the first real prompt", True, 1)
    assert differences(claude.sessions(project), cold_rows(claude, project)) == {}


def test_file_cached_before_its_clear_line_was_written_listing_equals_a_cold_listing(claude):
    # /clear writes the caveat, then the command line: a listing can run in between.
    project = claude.project("app")
    folder = claude.folder(project)
    c = Conversation(project)
    path = write_session(folder, c.id, [c.mode(), c.snapshot(), c.caveat()], mtime=T0)
    claude.sessions(project)
    append_lines(path, [c.clear(), c.local_stdout(), *c.exchange("after the clear")], mtime=T0 + 10)
    warm = claude.sessions(project)
    assert differences(warm, cold_rows(claude, project)) == {}
    assert warm[0]["began_with_clear"] is True


def test_torn_first_prompt_completed_later_listing_equals_a_cold_listing(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    c = Conversation(project)
    prompt = encode(c.prompt("Refactor the parser so that it streams"))
    path = write_session(folder, c.id, [c.caveat(), c.clear(), c.local_stdout()], unterminated=prompt[:-25], mtime=T0)
    claude.sessions(project)
    append_lines(path, [*c.reply()], raw=prompt[-25:] + b"\n", mtime=T0 + 10)
    warm = claude.sessions(project)
    assert differences(warm, cold_rows(claude, project)) == {}


def test_transcript_rewritten_shorter_is_read_again(claude, app):
    project, folder, convs = app
    claude.sessions(project)
    c = Conversation(project, convs[1].id)
    write_session(folder, c.id, [*c.exchange("short")], mtime=T0 + 100)
    row = {r["id"]: r for r in claude.sessions(project)}[c.id]
    assert (row["title"], row["user_turns"]) == ("short", 1)


def test_transcript_rewritten_with_the_same_size_is_read_again(claude, app):
    project, folder, convs = app
    claude.sessions(project)
    path = folder / f"{convs[0].id}.jsonl"
    path.write_bytes(path.read_bytes().replace(b"alpha prompt", b"omega prompt"))
    set_mtime(path, T0 + 100)
    row = {r["id"]: r for r in claude.sessions(project)}[convs[0].id]
    assert row["first_prompt"] == "omega prompt"


def test_deleted_transcript_leaves_the_listing(claude, app):
    project, folder, convs = app
    claude.sessions(project)
    (folder / f"{convs[0].id}.jsonl").unlink()
    assert {r["id"] for r in claude.sessions(project)} == {convs[1].id, convs[2].id}


# --- read_transcript on a grown file (unit) --------------------------------------------------------


def _stat(path):
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def test_growth_read_costs_only_the_appended_bytes_and_matches_a_cold_read(tmp_path):
    c = Conversation("/w/app")
    path = write_session(tmp_path, c.id, [c.permission_mode(), *c.exchange("first"), *c.tool_round("ok " * 5000)])
    cached = read_transcript(str(path), *_stat(path))
    added = append_lines(path, [c.ai_title("Grown"), *c.exchange("second")], mtime=T0 + 10)
    grown = read_transcript(str(path), *_stat(path), cached)
    assert grown.bytes_read <= added + 1
    cold = read_transcript(str(path), *_stat(path))
    assert msgspec.structs.replace(grown, bytes_read=0) == msgspec.structs.replace(cold, bytes_read=0)


def test_growth_read_of_a_big_file_costs_only_the_appended_bytes(tmp_path):
    c = Conversation("/w/app")
    path = write_session(tmp_path, c.id, [*c.exchange("first"), *c.filler(5 * MiB), c.custom_title("big")])
    cached = read_transcript(str(path), *_stat(path))
    added = append_lines(path, [c.ai_title("ignored: the custom title wins"), *c.exchange("latest")], mtime=T0 + 10)
    grown = read_transcript(str(path), *_stat(path), cached)
    assert grown.bytes_read <= added + 1
    assert (grown.title()[0], grown.last_prompt, grown.user_turns) == ("big", "latest", cached.user_turns + 1)


def _renamed_then_long_tool_output(folder, cwd):
    """A session renamed after its first prompt (/rename, no clean exit), then one long turn of
    tool output (over 256 KiB, no prompt in it), then an ai-title."""
    c = Conversation(cwd)
    lines = [c.permission_mode(), *c.exchange("fix the bug"), c.custom_title("my name")]
    for _ in range(8):
        lines += c.tool_round("ok " * 16000)
    lines.append(c.ai_title("auto title"))
    return c, write_session(folder, c.id, lines)


def test_a_cold_listing_keeps_a_mid_file_custom_title_and_the_last_prompt(claude):
    project = claude.project("app")
    c, path = _renamed_then_long_tool_output(claude.folder(project), project)
    assert path.stat().st_size > 320 * 1024
    row = claude.rows_by_id(project)[c.id]
    assert (row["title"], row["title_source"], row["last_prompt"]) == ("my name", "custom-title", "fix the bug")


@pytest.mark.fast
def test_a_failed_write_is_not_tried_again_with_the_same_bytes(tmp_path, monkeypatch):
    """A Hub over a full disk lists every second: the same cache is not written (a temp file of
    it made and removed) again until ``RETRY_S`` passed; other bytes, or a freed disk after it, are."""
    from c3async.catalog import cache

    convo = Conversation(str(tmp_path))
    written = write_session(tmp_path / "claude", convo.id, [convo.prompt("hi")])
    entry = read_transcript(str(written), *_stat(written))
    assert entry is not None
    folder = tmp_path / "cache"
    path = folder / "session_catalog.json"
    folder.write_text("")  # a file where the folder should be: every write fails (also as root)
    assert cache.save(path, {"a": entry}) is False
    folder.unlink()
    folder.mkdir()
    assert cache.save(path, {"a": entry}) is False and not path.exists()  # the same bytes: not tried
    assert cache.save(path, {"b": entry}) is True and set(cache.load(path)) == {"b"}  # other bytes
    monkeypatch.setattr(cache, "RETRY_S", 0.0)
    assert cache.save(path, {"a": entry}) is True and set(cache.load(path)) == {"a"}
