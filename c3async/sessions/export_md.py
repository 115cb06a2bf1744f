"""A session as Markdown (``c3async export ID``): the steps of ``export_walk`` as text, one at a time.

Transcript text never becomes markup. Prompts, replies, summaries, the note and each tool call
(its input and output in one compact block) are fenced code blocks, whose fence is longer than
any run of backticks in the text it holds (nothing inside can close it, and nothing inside a
fence is a link, an image or HTML, whatever the renderer: autolinking leaves code alone). A
text outside a fence (the title, a tool call's summary, a path) stands after a marker of ours,
never at a line's start, and has each character that could open markup there escaped with a
backslash, so no ``<``, ``[``, ``!``, ``*``, ``:``, ``@`` or ``&`` of it opens HTML, a link, an
image, emphasis, an autolink or an entity. A sub-agent's conversation
is a block quote (one ``>`` a level) under the call that ran it.
"""

from __future__ import annotations

import re

from ..catalog.conversation import OUTPUT_CAP, TEXT_CAP, Item
from ..ground.term import inert, inert_line
from .detail import Detail
from .export_walk import Enter, Leave, Said, Step, cut, facts, kind_label, note, tool_label, when

__all__ = ("MEDIA_TYPE", "escape", "fenced", "head", "step", "tail")

MEDIA_TYPE = "text/markdown; charset=utf-8"

# What can open markup inline: HTML, entities, links, images, emphasis, code, autolinks (``:``
# after a scheme, ``@``, ``.`` after www), and a heading's ``#``. (``-``, ``+``, ``=`` and digits
# matter only at a line's start, where this text never stands.)
_ESCAPED = str.maketrans({c: "\\" + c for c in "\\`*_[]<>!&:@~|{}()#."})
_TICKS = re.compile(r"`+")


def escape(text: str) -> str:
    """One line of text, inert as Markdown after a marker of ours: whitespace folded, each
    character that could open markup escaped."""
    return inert_line(text).translate(_ESCAPED)


def fenced(text: str, quote: str = "") -> str:
    """``text`` as a fenced code block, each line after ``quote`` (a block quote's ``> ``)."""
    body = inert(text)
    longest = max((m.end() - m.start() for m in _TICKS.finditer(body)), default=0)
    fence = "`" * max(3, longest + 1)
    lines = body.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return "".join(f"{quote}{line}\n" for line in [fence, *lines, fence])


def _quote(depth: int) -> str:
    return "> " * depth


def head(d: Detail) -> str:
    out = [f"# {escape(d.row.title or d.row.id)}", ""]
    out += [f"- **{label}**: {escape(text)}" for label, text in facts(d)]
    out.append("")
    text = "\n".join(out) + "\n"
    for label, body in note(d):
        text += f"**{label}**\n\n" + fenced(body) + "\n"
    return text + "---\n\n"


def _title(label: str, item: Item) -> str:
    at = when(item.ts)
    return f"**{label}**" + (f" \u00b7 {escape(at)}" if at else "")


def _said(item: Item, depth: int) -> str:
    q = _quote(depth)
    if item.kind == "tool":
        label = "\u25b8 " + escape(tool_label(item)) + (" (error)" if item.is_error else "")
        parts = []
        if item.input is not None:
            parts.append(cut("input", item.input_truncated, OUTPUT_CAP) + ":\n" + item.input)
        if item.output is not None:
            what = "error" if item.is_error else "output"
            parts.append(cut(what, item.output_truncated, OUTPUT_CAP) + ":\n" + item.output)
        else:
            parts.append("(no result)")
        return f"{q}{label}\n{q}\n" + fenced("\n".join(parts), q) + f"{q}\n"
    if item.kind in ("clear", "command", "long"):
        what = f"{item.text}: the context was cleared here" if item.kind == "clear" else item.text or item.kind
        return f"{q}\u2014 {escape(what)} \u2014\n{q}\n"
    label = cut(kind_label(item), item.truncated, TEXT_CAP)
    return f"{q}{_title(label, item)}\n{q}\n" + fenced(item.text or "", q) + f"{q}\n"


def step(s: Step) -> str:
    if isinstance(s, Said):
        return _said(s.item, s.depth)
    q = _quote(s.depth)
    if isinstance(s, Enter):
        line = f"{q}**Sub-agent {escape(s.agent)}**"
        return f"{line}: {escape(s.problem)}\n{q}\n" if s.problem else f"{line}\n{q}\n"
    assert isinstance(s, Leave)
    return "" if s.depth > 1 else "\n"  # a blank line ends the block quote


def tail(changed: bool) -> str:
    return "---\n\n*The transcript changed while it was read: export it again.*\n" if changed else ""
