"""``c3async export``: a session's whole conversation as Markdown or as one HTML page
(``c3async.sessions.export``, ``export_md``, ``export_html``), run in this process as the CLI.

Transcripts are written as Claude Code writes them (stress/transcripts.py), with hostile text in
every place a transcript can put it: markup, script, links and images, autolinks, entities,
runs of backticks longer than a fence, terminal controls, a torn line. The Markdown is read
back by the rules of CommonMark's fences (a small reader here); the HTML by Python's HTML parser.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import stat
from html.parser import HTMLParser
from pathlib import Path

import pytest

from c3async.ground.term import inert
from stress.transcripts import Conversation, text, tool_use, write_session

HOSTILE = (
    "<script>window.pwned=1</script><img src=x onerror=alert(1)> [click](javascript:alert(2)) "
    "![img](http://evil.example/i.png) <http://evil.example/a> http://evil.example/b www.evil.example "
    "a@evil.example &amp; &#60;b&#62; *em* _em_ `code` ``` ``````````\n"
    "```\n``````````````\n# heading\n- list\n> quote\n"
    "<!-- comment --> \x1b]52;c;aGk=\x07\x1b[2J \u202eevil\u202c \x9b31m end"
)
AGENT = "agent-a1b2c3d4e5f6"
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


class World:
    def __init__(self, claude) -> None:
        self.claude = claude
        self.proj = claude.project("app")
        folder = self.folder = claude.folder(self.proj)
        c = self.conv = Conversation(self.proj)
        lines: list = [c.permission_mode(), *c.exchange("Prompt " + HOSTILE, "Answer " + HOSTILE)]
        task = tool_use("Task", {"description": "Find " + HOSTILE, "prompt": "Look"})
        lines += c.reply(task)
        result = c.tool_result(task["id"], [{"type": "text", "text": "Agent said " + HOSTILE}])
        result["toolUseResult"] = {"agentId": AGENT[len("agent-") :], "totalTokens": 1}
        lines.append(result)
        lines += c.tool_round("Output " + HOSTILE, input={"command": "echo " + HOSTILE})
        lines += c.exchange("Second prompt", "Second answer")
        lines.append(c.custom_title("Title " + HOSTILE.split("\n")[0]))
        self.path = write_session(folder, c.id, lines)
        with open(self.path, "ab") as f:  # a torn line, then a write in flight
            f.write(b'{"type":"user","message":{"content":[{"type":"text","te\n')
            f.write(b'{"type":"assistant","message":{"content":"unterminated')
        a = Conversation(self.proj, c.id, sidechain=True)
        self.sub = write_session(
            folder / c.id / "subagents", AGENT, [a.prompt("Sub prompt " + HOSTILE), *a.reply(text("Sub answer"))]
        )
        self.id = c.id

    def export(self, *args: str) -> str:
        proc = self.claude.run("export", self.id, *args, cwd=self.proj)
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr
        return proc.stdout


@pytest.fixture
def world(claude) -> World:
    return World(claude)


# ------------------------------------------------------------------ Markdown, read back


def markdown_blocks(md: str) -> tuple[list[str], list[str]]:
    """(the fenced blocks' contents, the lines outside fences), each line's block-quote markers
    taken off, by CommonMark's rules for backtick fences: a fence closes only on a line of at
    least as many backticks and nothing else."""
    blocks: list[str] = []
    outside: list[str] = []
    fence: str | None = None
    quote = ""  # the block quote's markers the open fence stands in
    held: list[str] = []
    for raw in md.split("\n"):
        if fence is None:
            quote = re.match(r"(> ?)*", raw).group()  # type: ignore[union-attr]
            line = raw[len(quote) :]
            m = re.fullmatch(r" {0,3}(`{3,})([^`]*)", line)
            if m:
                fence, held = m.group(1), []
            else:
                outside.append(line)
            continue
        assert raw.startswith(quote), "a line of a quoted fence left the quote"
        line = raw[len(quote) :]
        m = re.fullmatch(r" {0,3}(`{3,}) *", line)
        if m and len(m.group(1)) >= len(fence):
            blocks.append("\n".join(held))
            fence = None
        else:
            held.append(line)
    assert fence is None, "a fence was left open"
    return blocks, outside


def test_markdown_holds_every_text_inert_and_whole(world):
    md = world.export()
    assert not CONTROL.search(md)
    blocks, outside = markdown_blocks(md)
    shown = inert(HOSTILE)
    # each prompt, answer and tool text is one fenced block, whole: nothing in it closed the fence
    assert f"Prompt {shown}" in blocks and f"Answer {shown}" in blocks
    assert f"Sub prompt {shown}" in blocks
    assert any(b.startswith("input:\n") and f"Output {shown}" in b for b in blocks)
    assert any(f"Agent said {shown}" in b for b in blocks)
    # outside the fences, every character that could open markup is escaped
    for line in outside:
        bare = re.sub(r"\\.", "", line)
        for opener in ("<", "[", "](", "![", "&", "://", "www.", "@", "`", "*em*", "_em_"):
            assert opener not in bare, (opener, line)
    title = outside[0]
    assert title.startswith("# Title ") and "\\<script\\>" in title
    # the conversation first, in order; the sub-agent quoted under the call that ran it
    order = [md.index(s) for s in ("**Prompt**", "**Answer**", "▸ Task", f"> **Sub-agent {AGENT[:5]}", "▸ Bash")]
    assert order == sorted(order)
    assert "Second answer" in md and "unterminated" not in md


def test_html_is_inert_escaped_and_loads_nothing(world):
    page = world.export("--html")
    assert not CONTROL.search(page)

    class Read(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tags: list[tuple[str, dict]] = []
            self.text: list[str] = []
            self.style = ""
            self.in_style = False

        def handle_starttag(self, tag, attrs):
            self.tags.append((tag, dict(attrs)))
            self.in_style = tag == "style"

        def handle_endtag(self, tag):
            self.in_style = False

        def handle_data(self, data):
            if self.in_style:
                self.style += data
            else:
                self.text.append(data)

        def handle_comment(self, data):
            raise AssertionError(f"a comment in the page: {data!r}")

    r = Read()
    r.feed(page)
    allowed = {"html", "head", "meta", "title", "style", "body", "header", "h1", "dl", "dt", "dd", "div", "h4"}
    allowed |= {"pre", "main", "b", "span", "details", "summary", "section", "p"}
    assert {t for t, _ in r.tags} <= allowed
    for tag, attrs in r.tags:
        assert not any(a.startswith("on") or a in ("href", "src", "action", "style") for a in attrs), (tag, attrs)
    metas = [a for t, a in r.tags if t == "meta"]
    csp = next(a["content"] for a in metas if a.get("http-equiv") == "Content-Security-Policy")
    assert r.tags[:3] == [("html", {"lang": "en"}), ("head", {}), ("meta", {"charset": "utf-8"})]
    assert r.tags[3] == ("meta", {"http-equiv": "Content-Security-Policy", "content": csp})
    assert "default-src 'none'" in csp and "script" not in csp
    digest = base64.b64encode(hashlib.sha256(r.style.encode()).digest()).decode()
    assert f"style-src 'sha256-{digest}'" in csp
    said = "".join(r.text)
    shown = inert(HOSTILE)
    for piece in (f"Prompt {shown}", f"Answer {shown}", f"Sub prompt {shown}", f"Agent said {shown}"):
        assert piece in said  # as text, every character of it
    # the sub-agent's conversation sits inside the call that ran it
    at = page.index("Sub prompt")
    assert page.rfind("<details", 0, at) > page.rfind("</details>", 0, at)


def test_sub_agents_missing_or_repeated_are_named_not_read(world):
    world.sub.unlink()
    md = world.export()
    assert f"**Sub-agent {AGENT.replace('-', '-')}**: its transcript was not kept" in md.replace("\\", "")
    # a sub-agent whose own transcript names it again is shown once
    c = Conversation(world.proj, world.id, sidechain=True)
    again = tool_use("Task", {"description": "again", "prompt": "x"})
    res = c.tool_result(again["id"], "ran")
    res["toolUseResult"] = {"agentId": AGENT[len("agent-") :]}
    write_session(world.sub.parent, AGENT, [c.prompt("inside"), *c.reply(again), res])
    md = world.export().replace("\\", "")
    assert md.count("> **Sub-agent agent-a1b2c3d4e5f6**\n") == 1
    assert "> > **Sub-agent agent-a1b2c3d4e5f6**: shown above" in md


def test_the_note_and_the_chain_are_on_top(world):
    c = world.claude
    before = Conversation(world.proj)
    write_session(world.folder, before.id, before.exchange("the earlier session"))
    args = ("--project", world.proj)
    assert c.run("mark", "stale", before.id, "--reason", "went on", "--successor", world.id, *args).returncode == 0
    note = "Done: the parser <b>[x](y)</b>\n```\nnext line"
    assert c.run("mark", "note", world.id, "--summary", note, "--next", "ship it", *args).returncode == 0
    md = world.export()
    top = md[: md.index("**Prompt**")]
    assert f"**Resumed from (before it)**: {before.id}" in top.replace("\\", "")
    blocks, _ = markdown_blocks(top)
    assert blocks == [inert(note), "ship it"]
    page = world.export("--html")
    head = page[: page.index("<main>")]
    assert before.id in head and "Done: the parser &lt;b&gt;[x](y)&lt;/b&gt;" in head


# ------------------------------------------------------------------ -o FILE


def test_output_file_is_private_whole_and_never_over_a_file_or_through_a_link(world, tmp_path):
    c, out = world.claude, tmp_path / "out" / "s.html"
    out.parent.mkdir()
    proc = c.run("export", world.id, "--html", "-o", str(out), "--project", world.proj)
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert out.read_text().endswith("</body></html>\n")
    proc = c.run("export", world.id, "-o", str(out), "--project", world.proj)
    assert proc.returncode == 1 and "exists: give --force to replace it" in proc.stderr
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert c.run("export", world.id, "-o", str(out), "--force", "--project", world.proj).returncode == 0
    assert out.read_text().startswith("# Title")
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    link = out.parent / "link.md"
    link.symlink_to(victim)
    for extra in ((), ("--force",)):
        proc = c.run("export", world.id, "-o", str(link), *extra, "--project", world.proj)
        assert proc.returncode == 1 and "a symlink is there (never written through)" in proc.stderr
        assert victim.read_text() == "keep me" and link.is_symlink()
    proc = c.run("export", world.id, "-o", str(out.parent), "--force", "--project", world.proj)
    assert proc.returncode == 1 and "a directory is there" in proc.stderr
    fifo = out.parent / "fifo"
    os.mkfifo(fifo)
    proc = c.run("export", world.id, "-o", str(fifo), "--force", "--project", world.proj)
    assert proc.returncode == 1 and "a FIFO is there" in proc.stderr
    assert sorted(p.name for p in out.parent.iterdir()) == ["fifo", "link.md", "s.html"]  # no temp file left
    proc = c.run("export", world.id, "--force", "--project", world.proj)
    assert proc.returncode == 2 and "give -o FILE too" in proc.stderr
    proc = c.run("export", world.id, "-o", "", "--project", world.proj)
    assert proc.returncode == 2 and "-o needs a file name" in proc.stderr and proc.stdout == ""
    proc = c.run("export", world.id, "-o", str(tmp_path / "none" / "x.md"), "--project", world.proj)
    assert proc.returncode == 1 and proc.stderr.endswith("x.md: No such file or directory\n")


def test_bad_ids_and_unreadable_transcripts_are_one_line_errors(world):
    c = world.claude
    for ref, said in (("zzzz", "no session"), ("", "give a session id")):
        proc = c.run("export", *([ref] if ref else []), "--project", world.proj)
        assert proc.returncode == 1 and said in proc.stderr and "Traceback" not in proc.stderr
        assert proc.stderr.count("\n") == 1
    target = Path(str(world.path) + ".moved")
    world.path.rename(target)
    world.path.symlink_to(target)  # the transcript swapped for a link: never followed
    proc = c.run("export", world.id, "--project", world.proj)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr


def test_the_walk_gives_what_the_pages_give(world):
    from c3async.catalog.conversation import MAX_LIMIT, Walk, page

    pages, after = [], 0
    while after is not None:
        pages.append(page(str(world.path), after=after, limit=MAX_LIMIT))
        after = pages[-1].next
    with Walk(str(world.path)) as walk:
        assert list(walk.items()) == [i for p in pages for i in p.items]
    with Walk(str(world.path), AGENT) as walk:
        assert [i.kind for i in walk.items()] == ["user", "assistant"]
