"""A session as one self-contained HTML page (``c3async export ID --html``): the steps of
``export`` as markup, one at a time.

Transcript text never becomes live: every piece of it is escaped (``html.escape``, quotes
included) and shown as text; no link is built from it (a URL is text), and the page loads
nothing: its Content-Security-Policy (a ``<meta>`` before any content) allows no script, no
image, font, frame, form or connection, and only the page's own style sheet (by its hash). Tool
calls are ``<details>`` folded with their input and output; a sub-agent's conversation sits
inside the call that ran it.
"""

from __future__ import annotations

import base64
import hashlib
from html import escape

from ..catalog.conversation import OUTPUT_CAP, TEXT_CAP, Item
from ..ground.term import inert, inert_line
from .detail import Detail
from .export_walk import Enter, Leave, Said, Step, cut, facts, kind_label, note, tool_label, when

__all__ = ("CSP", "MEDIA_TYPE", "head", "step", "tail")

MEDIA_TYPE = "text/html; charset=utf-8"

STYLE = """
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1d1d1f;background:#fff}
h1{font-size:1.5rem;overflow-wrap:anywhere}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem;font-size:.9rem}
dt{color:#666}dd{margin:0;overflow-wrap:anywhere}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:.3rem 0;font:13px/1.45 ui-monospace,monospace}
.item{margin:1rem 0;padding:.5rem .8rem;border-left:3px solid #ccc}
.user{border-color:#2f6fdf;background:#f3f7ff}.assistant{border-color:#3a9d5d}
.sidechain{border-style:dashed}.mark{color:#666;font-style:italic;border:0}
.when{color:#888;font-size:.8rem;margin-left:.5rem}
details.tool{margin:.3rem 0 .3rem .8rem;font-size:.9rem}
details.tool>summary{cursor:pointer;color:#444;overflow-wrap:anywhere}
details.error>summary{color:#b3261e}
h4{margin:.4rem 0 0;font-size:.8rem;color:#666}
section.agent{margin:.5rem 0 .5rem .5rem;padding-left:.8rem;border-left:3px double #999}
.note{background:#fffbe6;padding:.5rem .8rem}
@media (prefers-color-scheme:dark){body{background:#16171a;color:#e6e6e6}
.user{background:#1b2333}.note{background:#2a2616}dt,h4,.when,.mark{color:#999}}
"""
_STYLE_HASH = base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()
CSP = (
    f"default-src 'none'; style-src 'sha256-{_STYLE_HASH}'; img-src 'none'; "
    "base-uri 'none'; form-action 'none'; frame-src 'none'"
)


def _t(text: str | None) -> str:
    """Transcript text as HTML text: inert, then every markup character escaped."""
    return escape(inert(text or ""), quote=True)


def _line(text: str) -> str:
    return escape(inert_line(text), quote=True)


def head(d: Detail) -> str:
    title = d.row.title or d.row.id
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="referrer" content="no-referrer">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_line(title)}</title>",
        f"<style>{STYLE}</style>",
        "</head><body>",
        f"<header><h1>{_line(title)}</h1><dl>",
    ]
    out += [f"<dt>{label}</dt><dd>{_line(text)}</dd>" for label, text in facts(d)]
    out.append("</dl>")
    out += [f'<div class="note"><h4>{label}</h4><pre>{_t(text)}</pre></div>' for label, text in note(d)]
    out.append("</header><main>")
    return "\n".join(out) + "\n"


def _when(item: Item) -> str:
    at = when(item.ts)
    return f'<span class="when">{_line(at)}</span>' if at else ""


def _tool(item: Item) -> str:
    classes = "tool error" if item.is_error else "tool"
    out = [f'<details class="{classes}"><summary>{_line(tool_label(item))}{_when(item)}</summary>']
    if item.input is not None:
        out.append(f"<h4>{cut('Input', item.input_truncated, OUTPUT_CAP)}</h4><pre>{_t(item.input)}</pre>")
    if item.output is not None:
        what = cut("Error" if item.is_error else "Output", item.output_truncated, OUTPUT_CAP)
        out.append(f"<h4>{what}</h4><pre>{_t(item.output)}</pre>")
    else:
        out.append("<h4>(no result)</h4>")
    if not item.agent:
        out.append("</details>")  # else it stays open for the sub-agent's conversation (Leave closes it)
    return "".join(out) + "\n"


def _said(item: Item) -> str:
    side = " sidechain" if item.sidechain else ""
    if item.kind == "tool":
        return _tool(item)
    if item.kind in ("clear", "command", "long"):
        what = f"{item.text}: the context was cleared here" if item.kind == "clear" else item.text or item.kind
        return f'<p class="item mark{side}">{_line(what)}</p>\n'
    label = cut(kind_label(item), item.truncated, TEXT_CAP)
    if item.kind == "summary":
        return f'<details class="item mark"><summary>{label}</summary><pre>{_t(item.text)}</pre></details>\n'
    return f'<div class="item {item.kind}{side}"><b>{label}</b>{_when(item)}<pre>{_t(item.text)}</pre></div>\n'


def step(s: Step) -> str:
    if isinstance(s, Said):
        return _said(s.item)
    if isinstance(s, Enter):
        problem = f": {_line(s.problem)}" if s.problem else ""
        return f'<section class="agent"><h4>Sub-agent {_line(s.agent)}{problem}</h4>\n'
    assert isinstance(s, Leave)
    return "</section></details>\n"


def tail(changed: bool) -> str:
    said = '<p class="mark">The transcript changed while it was read: export it again.</p>\n' if changed else ""
    return f"</main>\n{said}</body></html>\n"
