"""Whose login a session ran under: 2.1.337 writes a ``session-owner`` line (``accountUuid``)
into each transcript of an OAuth login, and each Claude Code root keeps its login in
``.claude.json`` (``oauthAccount``: ``accountUuid``, ``emailAddress``). A work and a personal
account in two roots are then told apart by e-mail. ``.claude.json`` is Claude Code's: read as
untrusted input (bounded, a regular file only), once per change of its size and mtime."""

from __future__ import annotations

import os

import msgspec

from ..ground import memo
from ..ground.errors import DECODE_ERRORS
from ..ground.home import claude_json, config_home
from ..ground.safefs import open_regular, pread_all

__all__ = ("account_name",)

MAX_BYTES = 32 << 20  # .claude.json grows with the projects it remembers; past this it is not read


class _Account(msgspec.Struct):
    accountUuid: object = None
    emailAddress: object = None


class _State(msgspec.Struct):
    oauthAccount: _Account | None = None


_seen: dict[str, tuple[tuple[int, int], dict[str, str]]] = memo.kept({})


def _logins(root: str) -> dict[str, str]:
    """accountUuid -> e-mail of the root's login (empty when unknown)."""
    path = claude_json(root)
    try:
        fd, st = open_regular(path, follow=True, lstat_first=True)
    except OSError:
        return {}
    try:
        key = (st.st_size, st.st_mtime_ns)
        held = _seen.get(str(path))
        if held is not None and held[0] == key:
            return held[1]
        if st.st_size > MAX_BYTES:
            found: dict[str, str] = {}
        else:
            try:
                state = msgspec.json.decode(pread_all(fd, 0, st.st_size), type=_State)
            except (*DECODE_ERRORS, msgspec.ValidationError):
                state = _State()
            acc = state.oauthAccount or _Account()
            uuid, mail = acc.accountUuid, acc.emailAddress
            found = {}
            if isinstance(uuid, str) and isinstance(mail, str) and 0 < len(mail) <= 320:
                found[uuid] = mail
        _seen[str(path)] = (key, found)
        return found
    finally:
        os.close(fd)


def account_name(root: str | None, account: str) -> str:
    """The e-mail of ``account`` where a root's login is that account, else the uuid itself."""
    for where in (root, str(config_home())):
        if where:
            mail = _logins(where).get(account)
            if mail:
                return mail
    return account
