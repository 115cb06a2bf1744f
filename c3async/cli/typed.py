"""What is typed on the command line, read as what it stands for: a whole number, a port, UTF-8
text. A value that is none is refused naming what it got (argparse then exits 2, naming the
option); bytes of argv or of the environment that are not UTF-8 are found here.
"""

from __future__ import annotations

import argparse

from .render import clip


def shown(text: str) -> str:
    """What the user typed, quoted for a message: repr (controls escaped), at most 40 characters."""
    return repr(clip(text, 40))


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:  # also more than 4,300 digits
        raise argparse.ArgumentTypeError(f"expected a whole number, got {shown(text)}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


def port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {shown(text)}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535 (0 picks a free one), got {clip(str(value), 40)}")
    return value


def not_utf8(text: str) -> tuple[int, str] | None:
    """Where ``text`` stops being UTF-8: (character index, the byte or code point shown), or None.

    Bytes of argv (and the environment) that are not UTF-8 arrive as lone surrogates
    (``surrogateescape``); no JSON file can hold them and msgspec refuses to encode them."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        cp = ord(text[exc.start])
        return exc.start, (f"byte 0x{cp - 0xDC00:02x}" if 0xDC80 <= cp <= 0xDCFF else f"U+{cp:04X}")
    return None


def text_arg(text: str) -> str:
    """A free-text option (stored in marks, tasks and logs, or matched against them): refused,
    naming the option, if it is not UTF-8; argparse then exits 2."""
    bad = not_utf8(text)
    if bad is not None:
        raise argparse.ArgumentTypeError(f"is not UTF-8 text ({bad[1]} at character {bad[0] + 1}): give it in UTF-8")
    return text
