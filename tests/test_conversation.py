"""The conversation reader (``c3async.catalog.conversation``): a transcript read a page at a time,
by byte offsets, and ``c3async show ID --turns N``.

Transcripts are written with tests/transcripts.py as Claude Code writes them; the reader is
called as the Hub and the CLI call it, and the CLI runs as a subprocess.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import tracemalloc
from pathlib import Path

import msgspec
import pytest

from c3async.catalog import conversation
from c3async.catalog.conversation import LINE_CAP, MAX_LIMIT, OUTPUT_CAP, Page, open_subagent, page
from c3async.ground.errors import BadArgument
from c3async.ground.safefs import NotRegularFile
from stress.transcripts import (
    Conversation,
    append_lines,
    encode,
    text,
    tool_use,
    write_session,
)

HTML = '<img src=x onerror="alert(1)"><script>alert(2)</script>'


def kinds(p: Page) -> list[str]:
    return [i.kind for i in p.items]


def forward_all(path: Path, limit: int, **kw) -> tuple[list, list[Page]]:
    pages = [page(str(path), limit=limit, **kw)]
    while pages[-1].next is not None:
        assert len(pages) < 10_000
        pages.append(page(str(path), after=pages[-1].next, limit=limit, **kw))
    return [i for p in pages for i in p.items], pages


def backward_all(path: Path, limit: int, **kw) -> tuple[list, list[Page]]:
    pages = [page(str(path), before=1 << 62, limit=limit, **kw)]
    while pages[-1].prev is not None:
        assert len(pages) < 10_000
        pages.append(page(str(path), before=pages[-1].prev, limit=limit, **kw))
    return [i for p in reversed(pages) for i in p.items], pages


class Rich:
    """One session with one of everything the reader shows or skips."""

    def __init__(self, folder: Path) -> None:
        c = self.conv = Conversation("/home/dev/app")
        lines: list = [c.permission_mode(), c.mode()]
        lines += c.exchange("First prompt: " + HTML, "First answer")  # snapshot, prompt, thinking, text
        lines += c.tool_round("3 passed", input={"command": "npm test", "description": "Run the tests"})
        lines.append(c.meta("<system-reminder>meta text, never shown</system-reminder>"))
        lines.append(c.queue("enqueue", "queued prompt text, never shown"))
        # two tool calls in parallel, then their results
        a = tool_use("Read", {"file_path": "/home/dev/app/a.py"})
        b = tool_use("Grep", {"pattern": "retry", "path": "src"})
        lines += c.reply(a, b)
        lines.append(c.tool_result(a["id"], "contents of a.py"))
        lines.append(c.tool_result(b["id"], [{"type": "text", "text": "src/x.py:3: retry"}]))
        lines += c.reply(text("Second answer"))
        lines += [c.compact_boundary(), c.compact_summary()]
        lines += [c.caveat(), c.clear(), c.local_stdout()]
        lines += c.custom_command("/review", "PR 12")
        lines.append(c.command("/model", "model", "opus"))
        lines.append({**c.prompt("inline sidechain line"), "isSidechain": True})
        lines += c.exchange("Last prompt", "Last answer")
        lines += [c.custom_title("Rich session"), c.last_prompt("Last prompt")]
        self.path = write_session(folder, c.id, lines)
        self.tool_ids = (a["id"], b["id"])
        self.want = [
            ("user", "First prompt: " + HTML),
            ("assistant", "First answer"),
            ("tool", "Bash"),
            ("tool", "Read"),
            ("tool", "Grep"),
            ("assistant", "Second answer"),
            ("summary", None),
            ("clear", "/clear"),
            ("user", "/review PR 12"),
            ("command", "/model opus"),
            ("user", "inline sidechain line"),  # a 1.0.x sub-agent line in the session's file: marked
            ("user", "Last prompt"),
            ("assistant", "Last answer"),
        ]


def shape(items) -> list[tuple[str, str | None]]:
    return [(i.kind, i.name if i.kind == "tool" else (None if i.kind == "summary" else i.text)) for i in items]


@pytest.fixture
def rich(tmp_path: Path) -> Rich:
    return Rich(tmp_path)


# ------------------------------------------------------------------------------- items


def test_one_page_shows_turns_tools_and_markers_and_skips_the_rest(rich):
    p = page(str(rich.path), limit=MAX_LIMIT)
    assert shape(p.items) == rich.want
    assert (p.start, p.end, p.size, p.prev, p.next) == (0, rich.path.stat().st_size, p.size, None, None)
    raw = rich.path.read_bytes()
    for item in p.items:  # every offset is where its line starts
        assert item.offset == 0 or raw[item.offset - 1 : item.offset] == b"\n"
    bash, read, grep = p.items[2:5]
    assert bash.summary == "npm test" and json.loads(bash.input) == {
        "command": "npm test",
        "description": "Run the tests",
    }
    assert bash.output == "3 passed" and not bash.is_error and bash.result_offset > bash.offset
    assert (read.summary, read.output) == ("/home/dev/app/a.py", "contents of a.py")
    assert (grep.summary, grep.output) == ("retry", "src/x.py:3: retry")
    assert read.result_offset < grep.result_offset
    assert p.items[6].text.startswith("This session is being continued")
    assert p.items[0].ts == "2026-05-01T10:00:01.000Z"
    text_all = msgspec.json.encode(p).decode()
    for hidden in ("meta text", "queued prompt text", "Let me look at the code", "Rich session"):
        assert hidden not in text_all
    assert [i.sidechain for i in p.items] == [i.text == "inline sidechain line" for i in p.items]


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 50])
def test_paging_forward_and_backward_gives_every_item_once(rich, limit):
    whole = page(str(rich.path), limit=MAX_LIMIT).items
    fwd, fpages = forward_all(rich.path, limit)
    back, bpages = backward_all(rich.path, limit)
    assert shape(fwd) == shape(back) == rich.want
    assert [i.offset for i in fwd] == [i.offset for i in back] == [i.offset for i in whole]
    for pages in (fpages, bpages):
        assert all(len(p.items) <= limit + 1 for p in pages)  # (+1: a result alone, see below)
    # forward pages tile the file: each starts where the one before ended
    assert fpages[0].start == 0 and fpages[-1].end == rich.path.stat().st_size
    for a, b in itertools.pairwise(fpages):
        assert a.next == a.end == b.start == b.prev
    for later, earlier in itertools.pairwise(bpages):
        assert later.prev == later.start == earlier.end == earlier.next
    # a result never lands on a page without its call: tool items always have both
    assert all(i.name and i.output is not None for i in fwd + back if i.kind == "tool")


def test_a_page_asked_for_inside_a_pair_still_shows_both_halves(rich):
    """A page that starts at a result (``after=`` inside a pair) or ends before one: the other
    half is looked up, so the item shows the call with its result either way."""
    whole = page(str(rich.path), limit=MAX_LIMIT).items
    bash = whole[2]
    p = page(str(rich.path), after=bash.result_offset, limit=2)
    assert p.items[0].kind == "tool" and p.items[0].name == "Bash" and p.items[0].summary == "npm test"
    assert p.items[0].output == "3 passed" and p.items[0].offset == bash.result_offset
    assert p.items[0].tool_id == bash.tool_id
    p = page(str(rich.path), before=bash.result_offset, limit=1)  # the call, its result after the page
    assert p.items[-1].name == "Bash" and p.items[-1].output == "3 passed"


def test_at_an_offset_shows_its_line_and_names_it(rich):
    whole = page(str(rich.path), limit=MAX_LIMIT).items
    for n, item in enumerate(whole):
        for at in (item.offset, item.offset + 7):  # a byte inside the line means the line
            p = page(str(rich.path), at=at, limit=4)
            assert p.target == item.offset, (n, at)
            assert item.offset in [i.offset for i in p.items]
            calls = {i.tool_id for i in p.items if i.kind == "tool" and i.name}
            assert not [i for i in p.items if i.kind == "tool" and not i.name and i.tool_id in calls]
    # a tool_result line's hit is the call it joined
    bash = whole[2]
    p = page(str(rich.path), at=bash.result_offset + 3, limit=4)
    assert p.target == bash.offset and next(i for i in p.items if i.offset == p.target).output == "3 passed"
    # the page has context before the hit, and its cursors continue both ways
    p = page(str(rich.path), at=whole[8].offset, limit=8)
    assert [i.offset for i in p.items].index(whole[8].offset) >= 1
    before = page(str(rich.path), before=p.prev, limit=MAX_LIMIT).items
    after = page(str(rich.path), after=p.next, limit=MAX_LIMIT).items if p.next is not None else []
    assert [i.offset for i in before + p.items + after] == [i.offset for i in whole]


def test_at_a_skipped_line_names_the_next_item(rich):
    raw = rich.path.read_bytes()
    meta_at = raw.index(b'"isMeta":true')
    whole = page(str(rich.path), limit=MAX_LIMIT).items
    p = page(str(rich.path), at=meta_at, limit=4)
    assert p.target == whole[3].offset  # the parallel Read call follows the meta line


def test_offsets_past_the_end_and_bad_arguments(rich):
    size = rich.path.stat().st_size
    assert page(str(rich.path), after=size + 100).items == []
    assert page(str(rich.path), after=size).next is None
    assert shape(page(str(rich.path), before=size * 5, limit=2).items) == rich.want[-2:]
    assert page(str(rich.path), before=0).items == []
    assert page(str(rich.path), at=size * 2, limit=3).target == page(str(rich.path), limit=MAX_LIMIT).items[-1].offset
    for kw in ({"after": 0, "before": 5}, {"at": -1}, {"limit": 0}, {"limit": MAX_LIMIT + 1}, {"limit": True}):
        with pytest.raises(BadArgument):
            page(str(rich.path), **kw)


# ------------------------------------------------------------------------------- hostile input


def test_long_lines_torn_and_invalid_lines(tmp_path):
    c = Conversation("/w")
    big_call = tool_use("Bash", {"command": "cat big.log"})
    lines: list = [*c.exchange("before the big ones")]
    lines += c.reply(big_call)
    lines.append(c.tool_result(big_call["id"], "x" * (2 * 1024 * 1024)))  # under the cap: output cut
    huge = c.prompt("y" * (LINE_CAP + 1024 * 1024))  # over the cap: never loaded
    lines.append(huge)
    lines.append(b"this line is not JSON")
    lines.append(b"[1, 2, 3]")
    lines.append(b'{"type":"user","message":' + b"[" * 10_000 + b"]" * 10_000 + b"}")  # nested past the limit
    bad_utf8 = encode(c.prompt("bad bytes: XX here")).replace(b"XX", b"\xff\xfe")
    lines.append(bad_utf8)
    lines.append({"type": "user", "message": {"role": "user", "content": 42}})
    lines += c.exchange("after them", "the end")
    torn = encode(c.prompt("a line still being written"))[:-20]
    path = write_session(tmp_path, c.id, lines, unterminated=torn)
    size = path.stat().st_size
    want = ["user", "assistant", "tool", "long", "user", "user", "assistant"]
    for limit in (1, 3, MAX_LIMIT):
        fwd, fpages = forward_all(path, limit)
        back, _ = backward_all(path, limit)
        assert kinds(Page(fwd, 0, 0, 0, None, None)) == want, limit
        assert [i.offset for i in back] == [i.offset for i in fwd]
        assert fpages[-1].next is None and fpages[-1].end == size - len(torn)  # the torn line waits
    tool, long_item, bad = fwd[2], fwd[3], fwd[4]
    assert len(tool.output) == OUTPUT_CAP and tool.output_truncated
    assert long_item.text == "(line too long: 9.0 MiB)" and long_item.bytes > LINE_CAP
    assert bad.text == "bad bytes: \ufffd\ufffd here"
    assert "a line still being written" not in msgspec.json.encode(fwd).decode()
    p = page(str(path), at=long_item.offset + 5 * 1024 * 1024, limit=3)  # a hit inside the long line
    assert p.target == long_item.offset


def test_a_page_is_bounded_in_characters(tmp_path):
    c = Conversation("/w")
    lines: list = []
    for n in range(150):
        lines += c.tool_round(f"{n:04d}" + "z" * 40_000)
    path = write_session(tmp_path, c.id, lines)
    p = page(str(path), limit=MAX_LIMIT)
    assert 40 <= len(p.items) <= 60 and p.next is not None
    assert len(msgspec.json.encode(p)) < 1_500_000
    fwd, _ = forward_all(path, MAX_LIMIT)
    assert [i.output[:4] for i in fwd] == [f"{n:04d}" for n in range(150)]


def test_only_regular_files_are_read(tmp_path, rich):
    link = tmp_path / "link.jsonl"
    link.symlink_to(rich.path)
    with pytest.raises(NotRegularFile):
        page(str(link))
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    done: list = []

    def read() -> None:
        try:
            page(str(fifo))
        except NotRegularFile as exc:
            done.append(exc)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(10)
    assert done, "reading a FIFO blocked or did not refuse"
    with pytest.raises(FileNotFoundError):
        page(str(tmp_path / "gone.jsonl"))


@pytest.mark.parametrize("direction", ["after", "before"])
def test_a_file_that_shrinks_while_read_gives_a_short_page(tmp_path, direction):
    """The reader took the file's size when it opened it; the file is cut to half before the
    first read (Claude Code never does this, a person or a clean-up might)."""
    c = Conversation("/w")
    lines: list = []
    for n in range(40):
        lines += c.exchange(f"prompt {n} " + "p" * 20_000, f"answer {n}")
    path = write_session(tmp_path, c.id, lines)
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        os.truncate(path, size // 2)
        reading = conversation._Reading(fd, size)
        args = (0, None, None) if direction == "after" else (None, size, None)
        p = conversation._page(reading, *args, MAX_LIMIT, sidechain=False)
    finally:
        os.close(fd)
    assert p.changed
    assert all(i.offset < size // 2 for i in p.items)
    texts = [i.text for i in p.items]
    if direction == "after":
        assert texts[:2] == ["prompt 0 " + "p" * 20_000, "answer 0"]


# ------------------------------------------------------------------------------- sub-agents


def test_a_sub_agent_file_is_read_by_name(tmp_path):
    folder = tmp_path / "proj"
    parent = Conversation("/w")
    task = tool_use("Task", {"description": "Find the retry bug", "prompt": "Look for it", "subagent_type": "x"})
    lines: list = [*parent.exchange("Find it with an agent")]
    lines += parent.reply(task)
    result = parent.tool_result(task["id"], [{"type": "text", "text": "Found it in retry.py"}])
    result["toolUseResult"] = {"agentId": "a1b2c3d4e5f6a7b8c", "totalTokens": 10}
    lines.append(result)
    main = write_session(folder, parent.id, lines)
    agent = Conversation("/w", parent.id, sidechain=True)
    sub = folder / parent.id / "subagents"
    write_session(
        sub, "agent-a1b2c3d4e5f6a7b8c", [agent.prompt("Look for it"), *agent.reply(text("It is in retry.py"))]
    )
    p = page(str(main), limit=MAX_LIMIT)
    call = p.items[-1]
    assert (call.name, call.summary, call.agent) == ("Task", "Find the retry bug", "agent-a1b2c3d4e5f6a7b8c")
    a = page(str(main), agent=call.agent)
    assert [(i.kind, i.text) for i in a.items] == [("user", "Look for it"), ("assistant", "It is in retry.py")]
    fd, st = open_subagent(str(main), call.agent)
    os.close(fd)
    assert (st.st_ino, st.st_dev) == (os.stat(sub / f"{call.agent}.jsonl").st_ino, os.stat(sub).st_dev)
    for bad in ("../x", "agent-a/../../b", "agent-", "agent-a.b", "x", "agent-a\n", "agent-" + "a" * 200):
        with pytest.raises(BadArgument):
            page(str(main), agent=bad)
    with pytest.raises(FileNotFoundError):
        page(str(main), agent="agent-nothere")
    # a link in place of the subagents folder is not followed
    other = tmp_path / "elsewhere"
    (other / "subagents").mkdir(parents=True)
    (folder / parent.id / "subagents").rename(tmp_path / "moved")
    (folder / parent.id / "subagents").symlink_to(tmp_path / "moved")
    with pytest.raises(OSError):
        page(str(main), agent=call.agent)


# ------------------------------------------------------------------------------- a big file


def test_a_50_mb_transcript_is_read_page_by_page_in_bounded_memory(tmp_path):
    c = Conversation("/w")
    path = write_session(tmp_path, c.id, [c.permission_mode()])
    rounds = prompts = 0
    while path.stat().st_size < 50 * 1024 * 1024:
        batch: list = []
        if rounds % 100 == 0:
            batch += c.exchange(f"prompt {rounds}", f"answer {rounds}")
            prompts += 1
        for _ in range(20):
            batch += c.tool_round(f"round {rounds} " + "ok " * 16_000)
            rounds += 1
        append_lines(path, batch)
    size = path.stat().st_size
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        fwd, fpages = forward_all(path, MAX_LIMIT)
        peak_fwd = tracemalloc.get_traced_memory()[1] - base
        del fwd
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        back, bpages = backward_all(path, MAX_LIMIT)
        peak_back = tracemalloc.get_traced_memory()[1] - base
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        p = page(str(path), at=size // 2, limit=20)
        peak_at = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    print(
        f"{size / 2**20:.0f} MiB, {len(fpages)} pages: peak {peak_fwd / 2**20:.1f} MiB forward, "
        f"{peak_back / 2**20:.1f} MiB backward (all items kept), {peak_at / 2**20:.1f} MiB at"
    )
    tools = [i for i in back if i.kind == "tool"]
    assert len(tools) == rounds and all(i.name == "Bash" and i.output_truncated for i in tools)
    assert sum(1 for i in back if i.kind == "user") == prompts
    assert len(fpages) == len(bpages) > 10
    # forward_all and backward_all keep every page's items (~20 MB of capped outputs); a page
    # itself costs its windows and its items, never the file
    assert peak_fwd < 40 * 2**20 and peak_back < 40 * 2**20
    assert peak_at < 8 * 2**20  # one page: the windows and 20 items, never the file
    assert p.target is not None


# ------------------------------------------------------------------------------- the CLI


@pytest.mark.process
def test_show_turns_prints_the_detail_and_the_last_turns(claude):
    project = claude.project("cli")
    folder = claude.folder(project)
    c = Conversation(project)
    lines: list = [c.permission_mode()]
    for n in range(1, 6):
        lines += c.exchange(f"prompt {n}", f"answer {n}")
    lines += c.tool_round("all green", input={"command": "pytest -q\nsecond line", "description": "x"})
    lines += c.tool_round("oops", name="Read", input={"file_path": "/etc/\x1b[31mred"})
    lines += [c.clear()]
    lines += c.exchange("evil \x1b]52;c;aGk=\x07 prompt \u202e", "last answer")
    write_session(folder, c.id, lines)
    proc = claude.run("show", c.id[:8], "--project", project, "--turns", "3")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert out.startswith(c.id)
    head, _, tail = out.partition("last 3 turns:")
    assert "last turns:" not in head and "first prompt: prompt 1" in head
    assert [line.strip() for line in tail.strip().splitlines()] == [
        "[assistant 2026-05-01 10:00]",
        "answer 5",
        "\u25b8 Bash: pytest -q second line",
        "\u25b8 Read: /etc/\\x1b[31mred",
        "\u2500\u2500 /clear: context cleared \u2500\u2500",
        "[user 2026-05-01 10:00]",
        "evil \\x1b]52;c;aGk=\\x07 prompt \\u202e",
        "[assistant 2026-05-01 10:00]",
        "last answer",
    ]
    proc = claude.run("show", c.id, "--project", project, "--turns", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["row"]["id"] == c.id and len(data["turns"]) == 8  # the preview is still there
    assert [(i["kind"], i.get("text")) for i in data["conversation"]] == [
        ("user", "evil \x1b]52;c;aGk=\x07 prompt \u202e"),
        ("assistant", "last answer"),
    ]
    proc = claude.run("show", c.id, "--project", project)  # without --turns: as before
    assert "last turns:" in proc.stdout and "  [user] prompt 4" in proc.stdout
    proc = claude.run("show", c.id, "--project", project, "--turns", "100")
    assert "last 12 turns:" in proc.stdout and "prompt 1" in proc.stdout.partition("last 12 turns:")[2]
    proc = claude.run("show", c.id, "--project", project, "--turns", "-1")
    assert proc.returncode == 2


# ------------------------------------------------------------------------------- parallel batches


def _batches(seed: int, folder: Path) -> Path:
    """A session of random turns: prompts, single tool rounds, and parallel batches of 2 to 40
    calls (one line per call, or all in one line as older versions wrote them), their results
    one line each or all in one line, bookkeeping lines between."""
    import random

    rng = random.Random(seed)
    c = Conversation("/w")
    lines: list = [c.permission_mode()]
    for r in range(rng.randint(4, 20)):
        roll = rng.random()
        if roll < 0.3:
            lines += c.exchange(f"prompt {r}", f"answer {r}")
        elif roll < 0.7:
            blocks = [
                tool_use("Bash", {"command": f"cmd {r}.{i}"}) for i in range(rng.randint(2, 40 if roll < 0.4 else 6))
            ]
            calls = c.reply(*blocks)
            if rng.random() < 0.4:
                calls = calls[:1]
                calls[0]["message"]["content"] = blocks
            lines += (c.reply(text("running these")) if rng.random() < 0.3 else []) + calls
            if rng.random() < 0.5:
                for b in blocks:
                    lines.append(c.tool_result(b["id"], f"out {b['id'][-4:]}"))
                    if rng.random() < 0.2:
                        lines.append(c.snapshot())
            else:
                res = c.tool_result(blocks[0]["id"], "x")
                res["message"]["content"] = [
                    {"tool_use_id": b["id"], "type": "tool_result", "content": "o"} for b in blocks
                ]
                lines.append(res)
        else:
            lines += c.tool_round(f"single {r}")
    return write_session(folder, c.id, lines)


@pytest.mark.parametrize("seed", range(8))
def test_a_page_never_separates_a_tool_call_from_its_result(tmp_path, seed):
    """Forward, backward and around any line, at any limit: every tool call on a page has its
    result on the same page (the page grows to hold a batch), and no result is there without
    its call."""
    path = _batches(seed, tmp_path)
    raw = path.read_bytes()
    starts = [0] + [i + 1 for i, b in enumerate(raw[:-1]) if b == 10]

    def whole(p: Page) -> None:
        for it in p.items:
            if it.kind == "tool":
                assert it.name and it.output is not None, (seed, it)
                assert p.start <= it.offset < p.end and p.start <= it.result_offset < p.end, (seed, it)

    for limit in (1, 2, 3, 7):
        for pages in (forward_all(path, limit)[1], backward_all(path, limit)[1]):
            for p in pages:
                whole(p)
        for at in starts[::2]:
            whole(page(str(path), at=at, limit=limit))
