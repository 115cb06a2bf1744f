"""Model prices, in USD per million tokens, per model family.

Cache writes: 5-minute at 1.25x input, 1-hour at 2x input; cache reads at 0.1x input (the
published multipliers). Families with a long context price tokens above 200k per request at a
higher rate, as Anthropic bills them. A user file, ``$C3_HOME/prices.json`` (same shape,
``{"family-prefix": {"input": ..., "output": ..., ...}}``), adds or overrides families. A model
no family matches is reported as unpriced, never silently priced at zero.

Costs are worked out when a report is made, from the tokens counted (``totals.ModelTokens``),
so a price added or changed in ``prices.json`` re-prices what was counted before it.
"""

from __future__ import annotations

import math
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from ..ground import safefs
from ..ground.errors import DECODE_ERRORS, PricesError, unknown_keys
from ..ground.home import c3_home

__all__ = ("Price", "PriceTable", "current_prices", "load_prices", "prices_path", "prices_signature")

TIER_TOKENS = 200_000
MAX_BYTES = 1 << 20  # a price table of ours is a few KiB


class Price(msgspec.Struct, kw_only=True):
    input: float
    output: float
    cache_write_5m: float | None = None
    cache_write_1h: float | None = None
    cache_read: float | None = None
    above_200k: Price | None = None

    def w5(self) -> float:
        return self.cache_write_5m if self.cache_write_5m is not None else self.input * 1.25

    def w1h(self) -> float:
        return self.cache_write_1h if self.cache_write_1h is not None else self.input * 2.0

    def read(self) -> float:
        return self.cache_read if self.cache_read is not None else self.input * 0.1

    def rates(self) -> tuple[float, float, float, float, float]:
        """USD per million tokens of each kind: input, output, cache write 5m and 1h, cache read."""
        return (self.input, self.output, self.w5(), self.w1h(), self.read())

    def usd(self, tokens: tuple[int, ...], above: tuple[int, ...] | None = None) -> float:
        """USD for tokens of each kind (``rates`` order) summed over responses; ``above``: the
        part of each kind above 200k tokens in a response, summed the same way, which a
        family with a long-context rate prices at that rate. Exact: a response's tiered cost
        is linear in its tokens and in its part above the tier, so sums price as the responses
        would one by one."""
        base = self.rates()
        total = sum(n * r for n, r in zip(tokens, base))
        hi = self.above_200k
        if hi is not None and above:
            total += sum(n * (h - r) for n, h, r in zip(above, hi.rates(), base))
        return total / 1_000_000


def _p(inp: float, out: float, long: tuple[float, float] | None = None) -> Price:
    return Price(input=inp, output=out, above_200k=Price(input=long[0], output=long[1]) if long else None)


# Longest matching prefix wins. Ids are normalised first: "claude-" kept, date suffixes and
# "[1m]"-style context tags dropped, dots in versions turned into dashes.
SHIPPED: dict[str, Price] = {
    "claude-opus-4-5": _p(5.0, 25.0),
    "claude-opus-4-6": _p(5.0, 25.0),
    "claude-opus-4-1": _p(15.0, 75.0),
    "claude-opus-4": _p(15.0, 75.0),
    "claude-sonnet-4-5": _p(3.0, 15.0, (6.0, 22.5)),
    "claude-sonnet-4": _p(3.0, 15.0, (6.0, 22.5)),
    "claude-haiku-4-5": _p(1.0, 5.0),
    "claude-3-7-sonnet": _p(3.0, 15.0),
    "claude-3-5-sonnet": _p(3.0, 15.0),
    "claude-3-5-haiku": _p(0.8, 4.0),
    "claude-3-opus": _p(15.0, 75.0),
    "claude-3-haiku": Price(input=0.25, output=1.25, cache_write_5m=0.30, cache_read=0.03),
}

_DATE = re.compile(r"-\d{8}")  # .fullmatch on the last 9 characters


def normalise(model: str) -> str:
    """``claude-sonnet-4-5-20250929[1m]`` -> ``claude-sonnet-4-5``: a trailing ``[...]`` tag and
    date dropped, dots as dashes. No pattern scans the id (it comes from a transcript): the tag
    is found with ``find``, the date in the last 9 characters."""
    m = model.strip().lower()
    if m.endswith("]"):  # from the first "[" after the "]" before the last one
        at = m.find("[", m.rfind("]", 0, len(m) - 1) + 1, len(m) - 1)
        if at >= 0:
            m = m[:at]
    if len(m) >= 9 and _DATE.fullmatch(m, len(m) - 9):
        m = m[:-9]
    return m.replace(".", "-")


@dataclass
class PriceTable:
    families: dict[str, Price]
    _found: dict[str, Price | None] = field(default_factory=dict, repr=False, compare=False)

    def find(self, model: str) -> Price | None:
        """The family price of a model id (None: unpriced); each id is looked up once."""
        try:
            return self._found[model]
        except KeyError:
            found = self._found[model] = self._find(model)
            return found

    def _find(self, model: str) -> Price | None:
        m = normalise(model)
        best = None
        for family in self.families:
            if (m == family or m.startswith(family + "-")) and (best is None or len(family) > len(best)):
                best = family
        return self.families[best] if best else None


MAX_PRICE = 10_000.0  # USD per million tokens: far above any model's; more is a typo


def _price_problem(price: Price) -> str | None:
    for name in ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read"):
        value = getattr(price, name)
        if value is not None and not (math.isfinite(value) and 0 <= value <= MAX_PRICE):
            return f"{name} is {value!r}: a price is USD per million tokens, from 0 to {MAX_PRICE:,.0f}"
    if price.above_200k is not None:
        inner = _price_problem(price.above_200k)
        return f"above_200k: {inner}" if inner else None
    return None


def _name_unknown_keys(path: Path, family: str, value: object) -> None:
    """Warn once of the keys of a family's price (and of its ``above_200k``) that are none of
    ``Price``'s: a misspelt one would otherwise leave that price at its default, silently."""
    inner = value.get("above_200k") if isinstance(value, dict) else None
    for where, price in ((family, value), (f"{family}.above_200k", inner)):
        strange = unknown_keys(price, Price.__struct_fields__) if isinstance(price, dict) else None
        if strange:
            keys = ", ".join(Price.__struct_fields__)
            safefs.warn_once(f"{path}: {where!r}: ignoring {strange}: not a price key (they are {keys})")


def prices_path() -> Path:
    return c3_home() / "prices.json"


_current: tuple[tuple[int, int, int, str] | None, PriceTable] | None = None
_current_lock = threading.Lock()


def prices_signature(path: Path | None = None) -> tuple[int, int, int, str] | None:
    """What tells one ``prices.json`` from another (None: there is none): a change of it
    re-prices every report (the Hub's change feed watches it)."""
    path = prices_path() if path is None else path
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, str(path))


def current_prices() -> PriceTable:
    """The table as ``prices.json`` says now: loaded again only when the file changed (one
    ``stat`` a report otherwise), so every report prices with the newest table. Raises
    PricesError as ``load_prices`` does."""
    global _current
    path = prices_path()
    sig = prices_signature(path)
    held = _current
    if held is not None and held[0] == sig:
        return held[1]
    with _current_lock:
        table = load_prices()
        _current = (sig, table)
    return table


def load_prices() -> PriceTable:
    """The shipped table with ``$C3_HOME/prices.json`` over it. A file that is not a price table
    (not JSON, a value of the wrong type, a price out of range) is a PricesError naming the file
    and the key: a price someone set must never be silently replaced."""
    families = dict(SHIPPED)
    path = prices_path()
    try:
        # A state file of ours: never a link, a FIFO or a device (safefs refuses them, clearly).
        data = safefs.read_bytes(path, limit=MAX_BYTES + 1)
    except FileNotFoundError:
        return PriceTable(families)
    if len(data) > MAX_BYTES:
        raise PricesError(f"{path} is larger than {MAX_BYTES >> 20} MiB: not a price table")
    try:
        raw = msgspec.json.decode(data)
    except DECODE_ERRORS as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise PricesError(f"{path} is not valid JSON ({why}); fix or remove it") from None
    if not isinstance(raw, dict):
        raise PricesError(
            f'{path} must be an object of model families, like {{"claude-x": {{"input": 3, "output": 15}}}}'
        )
    for key, value in raw.items():
        shown = key[:60]
        if not key.strip() or len(key) > 200:
            raise PricesError(f"{path}: {shown!r} is not a model family (a model id's prefix, at most 200 characters)")
        _name_unknown_keys(path, shown, value)
        try:
            price = msgspec.convert(value, Price)
        except msgspec.ValidationError as exc:
            raise PricesError(
                f"{path}: {shown!r}: {exc}; each family needs input and output prices (numbers)"
            ) from None
        problem = _price_problem(price)
        if problem:
            raise PricesError(f"{path}: {shown!r}: {problem}")
        families[normalise(key)] = price
    return PriceTable(families)
