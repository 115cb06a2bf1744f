"""A person's query, made into an FTS5 expression that cannot be anything else.

    words          every word must appear (in any order)
    "exact phrase" the words in this order, side by side
    pref*          a word starting with ``pref``
    a OR b, a AND b, NOT a, -a, ( ... )
    retry_budget, src/http/client.py
                   an identifier or a path is the phrase of its parts, so it matches inside
                   longer ones (``self.retry_budget_ms``, ``/repo/src/http/client.py``)

Every word and phrase reaches FTS5 as a quoted string (``"`` doubled), so nothing a person types
is FTS syntax or SQL: operators are recognised here, by us. Unbalanced quotes close at the end,
unbalanced brackets are ignored, and a query of only punctuation is refused with a message.
The same terms give the pattern that marks hits in a snippet (``Query.marker``).
"""

from __future__ import annotations

import re

import msgspec

from ..ground.errors import BadArgument, check_text
from .passages import cjk, index_text

__all__ = ("MAX_QUERY", "Query", "parse")

MAX_QUERY = 2000  # characters
MAX_TERMS = 64

_TOKEN = re.compile(r"[^\W_]+")  # what the unicode61 tokenizer keeps: letters and digits
_LEX = re.compile(r'(?P<neg>-(?=["(]))|"(?P<phrase>[^"]*)"?|(?P<open>\()|(?P<close>\))|(?P<word>[^\s"()]+)')


class _Term(msgspec.Struct):
    text: str
    prefix: bool = False

    def fts(self) -> str:
        quoted = '"' + index_text(self.text).replace('"', '""') + '"'
        return quoted + " *" if self.prefix else quoted

    def pattern(self, folded: bool = False) -> str:
        text = fold(self.text)[0] if folded else self.text
        tokens = _TOKEN.findall(text)
        ascii_only = text.isascii()

        def has_cjk(t: str) -> bool:
            return not ascii_only and cjk().search(t) is not None

        parts = []
        for t in tokens:
            # a CJK run is matched character by character, as it is indexed
            parts.append(r"[\W_]*".join(re.escape(c) for c in t) if has_cjk(t) else re.escape(t))
        body = r"[\W_]*".join(parts)
        start = "" if has_cjk(tokens[0][0]) else r"(?<![^\W_])"
        end = r"[^\W_]*" if self.prefix else ("" if has_cjk(tokens[-1][-1]) else r"(?![^\W_])")
        return start + body + end


class Query(msgspec.Struct):
    text: str  # as typed
    expression: str  # for FTS5 MATCH
    terms: list[_Term] = msgspec.field(default_factory=list)  # the ones that must or may match

    def marker(self, folded: bool = False) -> re.Pattern[str]:
        """Finds the hits of this query's terms in a passage's text (case-insensitive);
        ``folded``: in text without its accents (``fold``), as the index matched them."""
        return re.compile("|".join(f"(?:{t.pattern(folded)})" for t in self.terms), re.IGNORECASE)


def fold(text: str) -> tuple[str, list[int] | None]:
    """``text`` without accents (``café`` -> ``cafe``, composed or not), as the index's
    ``remove_diacritics`` sees it, and for each character kept the index of the one it came
    from (None: ASCII text, unchanged)."""
    if text.isascii():
        return text, None
    import unicodedata

    out: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(text):
        if ch.isascii():
            out.append(ch)
            where.append(i)
            continue
        for c in unicodedata.normalize("NFD", ch):
            if not unicodedata.combining(c):
                out.append(c)
                where.append(i)
    return "".join(out), where


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.terms: list[_Term] = []
        self.count = 0  # every word and phrase, excluded ones too (each costs FTS5 a level)

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def expr(self, depth: int = 0) -> str | None:
        parts = [p for p in [self.conj(depth)] if p]
        while (tok := self.peek()) is not None and tok == ("op", "OR"):
            self.pos += 1
            part = self.conj(depth)
            if part:
                parts.append(part)
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"

    def conj(self, depth: int) -> str | None:
        must: list[str] = []
        must_not: list[str] = []
        while (tok := self.peek()) is not None:
            if tok == ("op", "OR") or (tok[0] == "close" and depth > 0):
                break
            if tok[0] == "close":  # a stray ')': ignored
                self.pos += 1
                continue
            if tok == ("op", "AND"):
                self.pos += 1
                continue
            negate = False
            if tok == ("op", "NOT"):
                negate = True
                self.pos += 1
                if self.peek() is None:
                    break
            item = self.unary(depth, negate)
            if item is None:
                continue
            (must_not if negate else must).append(item)
        if not must:
            if must_not:
                raise BadArgument("a search needs at least one word it must find; NOT and - only exclude")
            return None
        out = must[0] if len(must) == 1 else "(" + " AND ".join(must) + ")"
        if must_not:  # one NOT of an OR: flat, however many words are excluded
            out = f"({out} NOT " + (must_not[0] if len(must_not) == 1 else "(" + " OR ".join(must_not) + ")") + ")"
        return out

    def unary(self, depth: int, negate: bool) -> str | None:
        kind, value = self.tokens[self.pos]
        self.pos += 1
        if kind == "open":
            if depth >= 16:
                raise BadArgument("the search nests brackets too deeply")
            inner = self.expr(depth + 1)
            if self.peek() is not None and self.peek()[0] == "close":  # type: ignore[index]
                self.pos += 1
            return inner
        if kind == "op":  # an operator where a word belongs: search for the word
            kind = "word"
        prefix = kind == "word" and value.endswith("*")
        text = value.rstrip("*") if prefix else value
        if not _TOKEN.search(text):
            return None  # punctuation only: nothing to find
        self.count += 1
        if self.count > MAX_TERMS:
            raise BadArgument(f"the search has too many words (the limit is {MAX_TERMS})")
        term = _Term(text, prefix)
        if not negate:
            self.terms.append(term)
        return term.fts()


def _lex(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for m in _LEX.finditer(text):
        if m.group("neg"):
            out.append(("op", "NOT"))  # -"phrase", -(group)
        elif m.group("phrase") is not None:
            out.append(("phrase", m.group("phrase")))
        elif m.group("open"):
            out.append(("open", "("))
        elif m.group("close"):
            out.append(("close", ")"))
        else:
            word = m.group("word")
            out.append(("op", word) if word in ("AND", "OR", "NOT") else ("word", word))
    return out


def parse(text: str) -> Query:
    """The FTS5 expression for ``text``; BadArgument with a message a person can act on."""
    if not isinstance(text, str) or not text.strip():
        raise BadArgument("give something to search for")
    check_text(text, "the search", MAX_QUERY)
    tokens = []
    for kind, value in _lex(text):
        if kind == "word" and value.startswith("-") and len(value) > 1:
            tokens += [("op", "NOT"), ("word", value[1:])]  # -word: NOT word
        else:
            tokens.append((kind, value))
    parser = _Parser(tokens)
    expression = parser.expr()
    if expression is None or not parser.terms:
        raise BadArgument(f"nothing to search for in {text[:80]!r}: give a word with letters or digits")
    return Query(text, expression, parser.terms)
