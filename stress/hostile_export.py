"""``c3async export`` fed what no transcript of Claude Code's holds, and pointed at hostile files:

- a session whose every text is hostile: markup and script, links, images and autolinks, runs
  of backticks longer than any fence, terminal controls, invalid UTF-8, a NUL run, a line
  nested 100,000 deep, a line past the reader's 8 MiB cap, a torn line and an unterminated one;
- its sub-agents: one whose ``subagents`` folder is a symlink to a private folder (holding a
  secret under the right name), one whose file is a FIFO (no writer: a read would block);
- ``-o`` at a symlink to a private file (with and without ``--force``), at a FIFO, at a file that
  exists, in a folder that does not, and at a name with control characters;
- a session whose transcript is a FIFO.

Invariants: every call exits 0, 1 or 2 at once with no traceback and a one-line reason; the
Markdown's fences stay closed around every hostile text and nothing outside them opens markup;
the HTML holds no tag, link or script of the transcript's; no control character reaches either;
the secret is never shown and the private file never written; nothing but the file asked for
is left behind.
"""

from __future__ import annotations

import os
import re
import uuid

from .harness import Result
from .probe import probe as _probe
from .transcripts import Conversation, claude_slug, encode, tool_use

CLASS = "export of hostile transcripts, to hostile files"
SECRET = "PRIVATE-KEY-3b5d9f"
HOSTILE = (
    "<script>alert(1)</script><img src=x onerror=alert(2)> [a](javascript:alert(3)) ![i](http://evil.example/i) "
    "<http://evil.example> www.evil.example x@evil.example &lt; `` ```````````` \n```\n# h\n> q\n"
    "\x1b]52;c;aGk=\x07\x1b[2J\u202e\x9b"
)
OUR_TAGS = {"!doctype", "html", "head", "meta", "title", "style", "body", "header", "h1", "dl", "dt", "dd"}
OUR_TAGS |= {"div", "h4", "pre", "main", "b", "span", "details", "summary", "section", "p"}
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]")


def check(res: Result, sb, quick: bool) -> None:
    p = _probe(res, sb, "export")
    app = p.project("app")
    folder = p.config / "projects" / claude_slug(app)
    folder.mkdir(parents=True)
    c = Conversation(app)
    lines = [*c.exchange("Prompt " + HOSTILE, "Answer " + HOSTILE)]
    calls = []
    for agent in ("linked", "fifo"):
        call = tool_use("Task", {"description": HOSTILE, "prompt": "look"})
        res_line = c.tool_result(call["id"], "Output " + HOSTILE)
        res_line["toolUseResult"] = {"agentId": agent}
        calls += [*c.reply(call), res_line]
    lines += calls
    lines.append(c.custom_title("Title " + HOSTILE.split("\n")[0]))
    raw = b"".join(encode(x) + b"\n" for x in lines)
    raw += b'{"type":"user","message":{"content":"bad \xff\xfe utf-8 ' + b"<script>" + b'"}}\n'
    raw += b"\x00" * 4096 + b"\n"
    raw += b"[" * 100_000 + b"\n"
    raw += b'{"type":"user","message":{"content":"' + b"x" * (9 << 20) + b'"}}\n'
    raw += b'{"type":"user","message":{"content":[{"ty\n'
    raw += b'{"type":"assistant","message":{"content":"unterminated'
    (folder / f"{c.id}.jsonl").write_bytes(raw)
    private = p.root / "private"
    private.mkdir(mode=0o700)
    (private / "agent-linked.jsonl").write_text(encode(Conversation(app, c.id).prompt(SECRET)).decode() + "\n")
    subagents = folder / c.id / "subagents"
    subagents.parent.mkdir()
    subagents.symlink_to(private)
    os.mkfifo(folder / "agent-fifo.jsonl")  # the flat name Claude Code wrote before 2.1.2, as a FIFO

    md = p.run("export md", "export", c.id, cwd=app).stdout
    html = p.run("export html", "export", c.id, "--html", cwd=app).stdout
    res.fig("Markdown / HTML exported", f"{len(md):,} / {len(html):,} characters")
    res.check(bool(md) and bool(html), "an export of every readable line", "an export came out empty")
    for name, out in (("md", md), ("html", html)):
        res.check(not CONTROL.search(out), "no control character in an export", f"{name}: {CONTROL.search(out)!r}")
        res.check(SECRET not in out, "no link followed", f"{name}: the secret behind a linked folder was shown")
        res.check("unterminated" not in out, "a write in flight is not shown", name)
    said = md.replace("\\", "")
    for agent in ("linked", "fifo"):  # a linked folder and a FIFO alike: refused, not followed
        named = f"Sub-agent agent-{agent}**: its transcript is not a regular file: not read" in said
        res.check(named, "a hostile sub-agent is named, not read", agent)
    res.check(
        "(line too long: 9.0 MiB)" in said, "a line past the cap is named, not read", "no mention of the long line"
    )
    _fences_hold(res, md)
    tags = re.findall(r"<[^<>]*>", html)
    names = {re.match(r"</?([a-zA-Z0-9!]*)", t).group(1).lower() for t in tags}  # type: ignore[union-attr]
    odd = names - OUR_TAGS
    res.check(not odd, "no markup of a transcript's in the HTML", f"tags {sorted(odd)}")
    attrs = [t for t in tags if re.search(r"\s(on\w+|href|src|action|style)\s*=", t)]
    res.check(not attrs, "no markup of a transcript's in the HTML", f"attributes in {attrs[:3]}")

    out = p.root / "out"
    out.mkdir()
    victim = p.root / "victim.txt"
    victim.write_text("keep me")
    victim.chmod(0o600)
    (out / "link.md").symlink_to(victim)
    os.mkfifo(out / "fifo.md")
    (out / "there.md").write_text("mine")
    for what, target, extra, code, says in (
        ("-o a link", out / "link.md", (), 1, "a symlink is there"),
        ("-o a link --force", out / "link.md", ("--force",), 1, "a symlink is there"),
        ("-o a FIFO --force", out / "fifo.md", ("--force",), 1, "a FIFO is there"),
        ("-o a file there", out / "there.md", (), 1, "exists: give --force"),
        ("-o in no folder", out / "none" / "x.md", (), 1, "No such file or directory"),
        ("-o a name with controls", out / "bad\x1b[2J\x07.md", (), 0, "wrote"),
    ):
        proc = p.run(what, "export", c.id, "-o", str(target), *extra, cwd=app, expect=(code,), says=(says,))
        res.check(not CONTROL.search(proc.stderr), "no control character in a message", f"{what}: {proc.stderr!r}")
        res.check(proc.stderr.count("\n") == 1, "a one-line reason", f"{what}: {proc.stderr!r}")
    res.check(victim.read_text() == "keep me", "no write through a link", "the linked file changed")
    left = sorted(n for n in os.listdir(out))
    want = sorted(["link.md", "fifo.md", "there.md", "bad\x1b[2J\x07.md"])
    res.check(left == want, "nothing left behind", f"{left!r}")
    res.check((out / "there.md").read_text() == "mine", "no file replaced without --force", "there.md changed")

    fifo_sid = str(uuid.uuid4())
    os.mkfifo(folder / f"{fifo_sid}.jsonl")
    p.run("export a FIFO transcript", "export", fifo_sid, cwd=app, expect=(1,))


def _fences_hold(res: Result, md: str) -> None:
    """Each hostile text whole inside one fence, and nothing outside the fences opening markup."""
    fence: str | None = None
    outside: list[str] = []
    for raw in md.split("\n"):
        line = raw.lstrip("> ") if fence is None else raw
        if fence is None:
            m = re.fullmatch(r"(`{3,})", line)
            if m:
                fence = m.group(1)
            else:
                outside.append(line)
        elif re.fullmatch(r"(?:> )*" + fence + "`*", raw):
            fence = None
    res.check(fence is None, "every fence closes", "a fence was left open")
    for line in outside:
        bare = re.sub(r"\\.", "", line)
        for opener in ("<", "[", "://", "www.", "@", "&", "`"):
            if opener in bare:
                res.check(False, "nothing outside a fence opens markup", f"{opener!r} in {line[:120]!r}")
                return
    res.check(True, "nothing outside a fence opens markup", "")
