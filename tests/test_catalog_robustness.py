"""Bad input never crashes the listing and never changes another row.

One project holds a good "neighbour" session and one bad file per case; it is listed once through
the CLI. Each test checks its own file's row (or absence) and the neighbour stays exact.
"""

from __future__ import annotations

import json
import os
import random
import stat
import threading

import pytest

from c3async.ground.project import resolve
from stress.transcripts import Conversation, encode, new_id, set_mtime, text, write_session

pytestmark = pytest.mark.process

MiB = 1024 * 1024
T0 = 1_700_000_000

ODD_PROMPT = 'Fix "quotes", C:\\Users\\x\\proj\\a.py, emoji 😀 and a line\u2028separator'


def _build(claude):
    project = claude.project("robust")
    folder = claude.folder(project)
    ids: dict[str, str] = {}
    mtime = iter(range(T0, T0 + 1000, 10))

    def add(name, conv, lines, **kw):
        write_session(folder, conv.id, lines, mtime=next(mtime), **kw)
        ids[name] = conv.id

    def add_raw(name, data: bytes):
        sid = new_id()
        path = folder / f"{sid}.jsonl"
        path.write_bytes(data)
        set_mtime(path, next(mtime))
        ids[name] = sid

    c = Conversation(project)
    add(
        "neighbour",
        c,
        [
            c.permission_mode(),
            *c.exchange("the neighbour's first"),
            *c.exchange("the neighbour's last"),
            c.custom_title("neighbour"),
        ],
    )

    c = Conversation(project)
    add(
        "malformed_mid_file",
        c,
        [
            *c.exchange("before the junk"),
            b'{"parentUuid":"x","type":"user","message":{"role":"user","content":"broken',
            b"not json at all",
            b"",
            b"}{",
            *c.exchange("after the junk"),
        ],
    )

    c = Conversation(project)
    add(
        "truncated_last_line",
        c,
        [*c.exchange("complete prompt")],
        unterminated=encode(c.prompt("cut off in the middle of a write"))[:-40],
    )

    c = Conversation(project)
    add(
        "truncated_only_prompt",
        c,
        [c.mode(), c.snapshot(), c.caveat(), c.clear(), c.local_stdout()],
        unterminated=encode(c.prompt("Refactor the parser so that it streams"))[:-25],
    )

    add_raw("empty", b"")
    add_raw("binary_junk", random.Random(7).randbytes(200_000))
    add_raw("binary_junk_with_newlines", b"\n".join(random.Random(8).randbytes(300) for _ in range(400)))

    c = Conversation(project)
    bad_utf8 = encode(c.reply(text("The file contains MARKER bytes"))[0]).replace(b"MARKER", b"\xff\xfe\xc3")
    add("invalid_utf8_in_a_line", c, [*c.exchange("first prompt"), bad_utf8, *c.exchange("last prompt")])

    c = Conversation(project)
    bad_prompt = encode(c.prompt("a prompt with MARKER inside")).replace(b"MARKER", b"\xed\xa0\x80")
    add("invalid_utf8_in_the_only_prompt", c, [c.permission_mode(), bad_prompt, *c.reply(text("ok"))])

    c = Conversation(project)
    # JSON.stringify writes a lone surrogate (an emoji cut by a 200-unit slice) as an escape.
    lone = b'{"type":"last-prompt","lastPrompt":"fix the emoji \\ud83d\\u2026","sessionId":"' + c.id.encode() + b'"}'
    add("lone_surrogate_escape", c, [*c.exchange("first prompt"), lone, c.custom_title("surrogates")])

    c = Conversation(project)
    add("single_10mb_line", c, [c.prompt("Analyse this: " + "0123456789abcdef" * (10 * MiB // 16))])

    c = Conversation(project)
    add(
        "huge_line_mid_file",
        c,
        [
            *c.exchange("before the big tool output"),
            *c.reply(text("Reading.")),
            c.tool_result("toolu_01Z", "x" * (6 * MiB)),
            *c.exchange("after the big tool output"),
            c.custom_title("big-output"),
        ],
    )

    c = Conversation(project)
    add(
        "unknown_and_odd_lines",
        c,
        [
            {"type": "cost-state", "totalCostUSD": 0.12, "modelUsage": {"opus": {"inputTokens": 3}}},
            {"type": "atis-latch", "value": [1, 2, 3]},
            {"type": "api-request", "request": {"messages": [{"role": "user", "content": "not a prompt"}]}},
            {"type": "tools-used", "tools": ["Bash"]},
            {"type": "from-the-future", "message": {"role": "user", "content": "not a prompt either"}},
            *c.exchange("the real first prompt"),
            {"type": "user", "message": "a message that is a string"},
            {"type": "user", "message": {"role": "user", "content": {"an": "object"}}},
            {"type": "user", "message": {"role": "user", "content": [1, "two", None]}},
            {"type": 42, "message": {"content": "type is a number"}},
            b"[1,2,3]",
            b'"just a string"',
            b"null",
            b"12345",
            *c.exchange("the real last prompt"),
        ],
    )

    c = Conversation(project)
    add("adversarial_text", c, [*c.exchange(ODD_PROMPT)])

    # Things named like a session that are not regular files.
    os.mkfifo(folder / f"{new_id()}.jsonl")
    (folder / f"{new_id()}.jsonl").mkdir()
    (folder / f"{new_id()}.jsonl").symlink_to(folder / "missing-target.jsonl")

    proc = claude.run("sessions", "--project", project, "--json")
    return proc, ids


@pytest.fixture(scope="module")
def listing(module_claude):
    proc, ids = _build(module_claude)
    rows = {r["id"]: r for r in json.loads(proc.stdout)} if proc.returncode == 0 else {}
    return proc, {name: rows.get(sid) for name, sid in ids.items()}


def test_listing_with_every_kind_of_bad_file_exits_0(listing):
    proc, _ = listing
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr


def test_neighbour_row_is_unaffected(listing):
    row = listing[1]["neighbour"]
    assert (row["title"], row["first_prompt"], row["last_prompt"], row["user_turns"]) == (
        "neighbour",
        "the neighbour's first",
        "the neighbour's last",
        2,
    )


def test_malformed_lines_mid_file_are_skipped(listing):
    row = listing[1]["malformed_mid_file"]
    assert (row["first_prompt"], row["last_prompt"], row["user_turns"]) == ("before the junk", "after the junk", 2)


def test_truncated_unterminated_last_line_is_ignored(listing):
    row = listing[1]["truncated_last_line"]
    assert (row["last_prompt"], row["user_turns"]) == ("complete prompt", 1)


def test_truncated_last_line_is_ignored_even_when_it_is_the_only_prompt(listing):
    row = listing[1]["truncated_only_prompt"]
    assert (row["title"], row["title_source"], row["first_prompt"], row["user_turns"]) == ("/clear", "command", None, 0)


def test_empty_file_is_skipped(listing):
    assert listing[1]["empty"] is None


@pytest.mark.parametrize("name", ["binary_junk", "binary_junk_with_newlines"])
def test_binary_junk_is_skipped(listing, name):
    assert listing[1][name] is None


def test_invalid_utf8_in_one_line_leaves_the_other_lines_readable(listing):
    row = listing[1]["invalid_utf8_in_a_line"]
    assert (row["first_prompt"], row["last_prompt"], row["user_turns"]) == ("first prompt", "last prompt", 2)


def test_invalid_utf8_in_the_only_prompt_still_lists_the_session(listing):
    row = listing[1]["invalid_utf8_in_the_only_prompt"]
    # the bad bytes are replaced; the rest of the prompt is kept
    assert row["first_prompt"].startswith("a prompt with ") and row["first_prompt"].endswith(" inside")
    assert row["title_source"] == "first-prompt"


def test_lone_surrogate_escape_does_not_hide_the_session(listing):
    row = listing[1]["lone_surrogate_escape"]
    assert (row["title"], row["first_prompt"]) == ("surrogates", "first prompt")


def test_single_10mb_line_does_not_break_the_listing(listing):
    proc, rows = listing
    assert proc.returncode == 0
    row = rows["single_10mb_line"]
    if row is not None:  # listed with what could be read
        assert row["size"] > 10 * MiB
        assert row["first_prompt"] is None or row["first_prompt"].startswith("Analyse this: 0123456789abcdef")


def test_huge_line_mid_file_keeps_head_and_tail_facts(listing):
    row = listing[1]["huge_line_mid_file"]
    assert (row["title"], row["first_prompt"], row["last_prompt"]) == (
        "big-output",
        "before the big tool output",
        "after the big tool output",
    )


def test_unknown_line_types_and_odd_shapes_are_ignored(listing):
    row = listing[1]["unknown_and_odd_lines"]
    assert (row["first_prompt"], row["last_prompt"], row["user_turns"]) == (
        "the real first prompt",
        "the real last prompt",
        2,
    )


def test_quotes_backslashes_emoji_and_line_separators_survive_exactly(listing):
    row = listing[1]["adversarial_text"]
    assert row["first_prompt"] == ODD_PROMPT
    assert row["title"] == " ".join(ODD_PROMPT.split())


def test_non_regular_files_named_like_sessions_are_ignored(listing):
    proc, rows = listing
    assert len(json.loads(proc.stdout)) == sum(r is not None for r in rows.values())


def test_unreadable_file_is_skipped_and_the_others_listed(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    c = Conversation(project)
    good = write_session(folder, c.id, [*c.exchange("readable")], mtime=T0)
    c2 = Conversation(project)
    bad = write_session(folder, c2.id, [*c2.exchange("secret")], mtime=T0 + 10)
    bad.chmod(0)
    try:
        if os.access(bad, os.R_OK):
            pytest.skip("running as root: a mode-000 file is still readable")
        proc = claude.run("sessions", "--project", project, "--json")
        assert proc.returncode == 0, proc.stderr
        assert [r["id"] for r in json.loads(proc.stdout)] == [good.stem]
    finally:
        bad.chmod(stat.S_IRUSR | stat.S_IWUSR)


def _swap(path, how: str, outside) -> None:
    """What can happen to a listed transcript before it is read."""
    path.unlink()
    if how == "fifo":
        os.mkfifo(path)  # opened for reading, it would block forever
    elif how == "directory":
        path.mkdir()
    elif how == "symlink":
        path.symlink_to(outside)  # a transcript outside the folder: never followed


@pytest.mark.parametrize("how", ["deleted", "fifo", "directory", "symlink"])
def test_file_deleted_between_listing_and_reading(claude, monkeypatch, tmp_path, how):
    """The listing has stat-ed the files; one is deleted (or replaced by a FIFO, a folder or a
    symlink) before it is read. The library's scan leaves it out, lists the others, and never
    blocks. Driven in process: the scan's listing step is wrapped to do the damage right after."""
    from c3async.catalog import scan

    claude.activate(monkeypatch)
    project = claude.project("app")
    folder = claude.folder(project)
    c = Conversation(project)
    good = write_session(folder, c.id, [*c.exchange("the neighbour")], mtime=T0)
    c2 = Conversation(project)
    doomed = write_session(folder, c2.id, [*c2.exchange("read too late")], mtime=T0 + 10)
    c3 = Conversation(project)
    outside = write_session(tmp_path, c3.id, [*c3.exchange("SECRET outside the folder")], mtime=T0 + 20)
    real_candidates = scan.candidates
    listed = []

    def candidates_then_swap(folders):
        cands = real_candidates(folders)
        listed.extend(c.session_id for c in cands)
        _swap(doomed, how, outside)
        return cands

    monkeypatch.setattr(scan, "candidates", candidates_then_swap)
    result = {}

    def body():
        result["scan"] = scan.scan_projects_sync([resolve(project)], processes=False)[0]

    worker = threading.Thread(target=body, daemon=True)
    worker.start()
    worker.join(30)
    if worker.is_alive():
        if how == "fifo":
            with open(doomed, "wb"):  # unblock the reader so the thread can end
                pass
        pytest.fail("the scan blocked on a file replaced after the listing")
    assert "scan" in result, "the scan raised"
    assert sorted(listed) == sorted([good.stem, doomed.stem])  # both were listed...
    res = result["scan"]
    assert [s.session_id for s in res.sessions] == [good.stem]  # ...only the neighbour is a row
    assert res.sessions[0].record.first_prompt == "the neighbour"
    assert res.skipped == {"unreadable": 1}
    # Nothing of the swapped file was cached: the next listing looks at it afresh.
    from c3async.catalog import cache

    assert str(doomed) not in cache.load(res.cache_path)
