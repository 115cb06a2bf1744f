"""Model prices, in USD per million tokens, per model family.

Cache writes: 5-minute at 1.25x input, 1-hour at 2x input; cache reads at 0.1x input (the
published multipliers). Families with a long context price tokens above 200k per request at a
higher rate, as Anthropic bills them. A user file, ``$C3_HOME/prices.json`` (same shape,
``{"family-prefix": {"input": ..., "output": ..., ...}}``), adds or overrides families. A model
no family matches is reported as unpriced, never silently priced at zero.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import msgspec

from .. import safefs
from ..errors import DECODE_ERRORS
from ..paths import c3_home

__all__ = ("Price", "PriceTable", "load_prices")

TIER_TOKENS = 200_000


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


def load_prices() -> PriceTable:
    families = dict(SHIPPED)
    path = c3_home() / "prices.json"
    try:
        # A state file of ours: never a link, a FIFO or a device (safefs refuses them, clearly).
        user = msgspec.json.decode(safefs.read_bytes(path), type=dict[str, Price])
    except FileNotFoundError:
        user = {}
    except safefs.UnsafeState:
        raise
    except RecursionError:
        raise ValueError(f"{path} is not a valid price table (nested too deeply)") from None
    except (OSError, *DECODE_ERRORS) as exc:
        raise ValueError(f"{path} is not a valid price table ({exc})") from None
    families.update({normalise(k): v for k, v in user.items()})
    return PriceTable(families)
