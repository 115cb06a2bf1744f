"""Text that is inert on a terminal.

Titles, branches, prompts, notes, task titles, paths and error messages come from transcripts,
marks, ``pm.json``, config and argv, which is to say from web pages, logs, pasted files and other
people's repositories. Printed raw, ``ESC ] 52 ; c ; ... BEL`` writes the clipboard, ``ESC ] 0``
sets the window title, ``ESC ] 8`` hides a link behind text, ``ESC [ 2 J`` clears the screen, a
lone ``CR`` or a bidi override hides or reorders what the reader sees. Everything the CLI prints
for a person goes through :func:`inert` (multi-line text) or :func:`inert_line` (a table cell);
``--json`` goes through :func:`json_inert`, which changes bytes but never the data.

The rules (the same for every caller; documented in the tests that pin them):

* **No control reaches the terminal.** Every C0 control (U+0000-U+001F), DEL (U+007F) and C1
  control (U+0080-U+009F) is replaced by its visible escape, the one Python's ``repr`` uses:
  ``ESC`` becomes the four characters ``\\x1b``, ``BEL`` ``\\x07``, ``CSI`` (U+009B) ``\\x9b``,
  a lone ``CR`` ``\\r``. No escape-sequence parser is needed, so none can be fooled: a CSI, OSC
  (title, clipboard, hyperlink), DCS, APC, PM or SOS string loses its introducer and terminator
  and is printed as plain visible text, marked by the ``\\x1b``/``\\x9b`` it began with. Exceptions:
  NUL is removed; in :func:`inert` (multi-line text) ``LF`` is kept, ``CR LF`` becomes ``LF``
  and ``TAB`` becomes one space; :func:`inert_line` first folds every run of whitespace
  (``str.split`` whitespace: TAB, LF, CR, VT, FF, U+001C-U+001F, NEL, NBSP, U+2028, U+2029,
  the Unicode spaces) to one space and strips the ends.
* **No invisible reordering or hiding.** The bidi controls (U+061C, U+200E, U+200F,
  U+202A-U+202E, U+2066-U+2069) and the other invisible format characters that can hide or
  smuggle text (U+00AD soft hyphen, U+180E, U+200B zero-width space, U+2060-U+2064,
  U+206A-U+206F, U+FEFF, U+FFF9-U+FFFB, U+1BCA0-U+1BCA3, U+1D173-U+1D17A, and the tag
  characters U+E0000-U+E007F), and the line/paragraph separators U+2028/U+2029, are shown as
  ``\\uXXXX`` (``\\UXXXXXXXX`` above the BMP). Zero-width (non-)joiners U+200C/U+200D stay:
  emoji sequences and several scripts need them and they cannot reorder text.
* **No lone surrogates.** A lone surrogate U+DC80-U+DCFF is what ``surrogateescape`` makes of an
  undecodable byte (argv, environment, file names): it is shown as that byte, ``\\xNN``. Any
  other lone surrogate becomes U+FFFD. Output never fails to encode because of one.
* Everything else, CJK, emoji, accents, private-use and not-yet-assigned code points, passes
  unchanged.

Ground floor: imports nothing from the package. Fast: one precompiled regex finds the first
character needing work, and clean text (nearly all of it) is returned as is.
"""

from __future__ import annotations

import re

__all__ = ("inert", "inert_line", "json_inert")

# Invisible format characters that are escaped (bidi controls first).
_FORMAT = (
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidi
    "\u00ad\u180e\u200b\u2060-\u2064\u206a-\u206f\ufeff\ufff9-\ufffb"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e007f"
    "\u2028\u2029"
)
# Anything needing work in multi-line text (LF is fine; TAB, CR are handled below).
_BAD = re.compile(f"[\x00-\x09\x0b-\x1f\x7f-\x9f{_FORMAT}\ud800-\udfff]")
_BAD_RUN = re.compile(f"\r\n|[\x00-\x09\x0b-\x1f\x7f-\x9f{_FORMAT}\ud800-\udfff]")
# The same, for JSON text: controls below U+0020 are escaped by every JSON encoder already.
_JSON_BAD = re.compile(f"[\x7f-\x9f{_FORMAT}]")


def _visible(ch: str) -> str:
    cp = ord(ch)
    if cp < 0x100:
        return f"\\x{cp:02x}"
    if 0xDC80 <= cp <= 0xDCFF:  # surrogateescape's stand-in for the byte cp - 0xDC00
        return f"\\x{cp - 0xDC00:02x}"
    if 0xD800 <= cp <= 0xDFFF:
        return "\ufffd"
    return f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"


_SPECIAL = {"\x00": "", "\t": " ", "\r\n": "\n", "\r": "\\r"}
_cache: dict[str, str] = {}


def _replace(match: re.Match[str]) -> str:
    s = match.group()
    out = _cache.get(s)
    if out is None:
        out = _SPECIAL[s] if s in _SPECIAL else _visible(s)
        if len(_cache) < 4096:
            _cache[s] = out
    return out


def inert(text: str) -> str:
    """``text`` made safe to print on a terminal, keeping its line breaks (see the module doc)."""
    if not _BAD.search(text):
        return text
    return _BAD_RUN.sub(_replace, text)


def inert_line(text: str) -> str:
    """One line for a table cell: whitespace runs folded to one space, ends stripped, then
    :func:`inert`."""
    return inert(" ".join(text.split()))


def _json_escape(match: re.Match[str]) -> str:
    cp = ord(match.group())
    if cp <= 0xFFFF:
        return f"\\u{cp:04x}"
    cp -= 0x10000
    return f"\\u{0xD800 + (cp >> 10):04x}\\u{0xDC00 + (cp & 0x3FF):04x}"


def json_inert(data: bytes) -> bytes:
    """UTF-8 JSON with DEL, the C1 controls and the invisible format characters written as
    ``\\uXXXX`` escapes: the same document to any JSON parser, but inert if it lands on a
    terminal. (JSON encoders already escape the C0 controls; outside strings JSON is ASCII.)"""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:  # not ours to judge: leave it as the encoder wrote it
        return data
    if not _JSON_BAD.search(text):
        return data
    return _JSON_BAD.sub(_json_escape, text).encode("utf-8")
