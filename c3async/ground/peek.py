"""Reads for a process that lives a few milliseconds: the status line, which every window runs
after each response. The standard library's ``os`` alone: no ``pathlib``, no ``logging``, no
error tree (``safefs`` costs more to import than the status line has to spend).

The same refusals as ``safefs``'s reads, without its side effects (a read here makes no folder
and tightens none): below a folder the caller trusts, each component is opened with
``O_NOFOLLOW`` relative to the one above it, so a link anywhere is refused, never followed; only
a regular file is read, opened ``O_NONBLOCK`` so a FIFO never blocks. Every refusal is an
OSError, as a missing file is: a reader that tolerates one tolerates the other.
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ("open_at", "open_below", "open_regular", "pread_all", "read_below", "read_regular")

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)
_DIR_FD = os.open in os.supports_dir_fd


def pread_all(fd: int, offset: int, length: int) -> bytes:
    """Up to ``length`` bytes from ``offset`` (fewer only at the end of the file)."""
    chunks = []
    while length > 0:
        chunk = os.pread(fd, length, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        length -= len(chunk)
    return b"".join(chunks)


def _regular(fd: int) -> int:
    """``fd``, blocking again, when it is a regular file; else it is closed (OSError)."""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if _O_NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_at(dfd: int, name: str) -> int:
    """A read descriptor of the regular file ``name`` in the folder ``dfd``, not through a link."""
    return _regular(os.open(name, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC, dir_fd=dfd))


def open_below(top: str, *names: str) -> int:
    """A read descriptor of the regular file ``top/names...``: ``top`` trusted as given, every
    name below it opened without following a link. OSError when missing or refused."""
    if not _DIR_FD:  # no openat (Windows): each component lstat-ed first
        path = top
        for name in names:
            path = os.path.join(path, name)
            if stat.S_ISLNK(os.lstat(path).st_mode):
                raise OSError(errno.ELOOP, "a symlink (not followed)", path)
        return _regular(os.open(path, os.O_RDONLY | _O_NONBLOCK | _O_BINARY))
    fd = os.open(top, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
    try:
        for name in names[:-1]:
            below = os.open(name, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = below
        return open_at(fd, names[-1])
    finally:
        os.close(fd)


def read_below(limit: int, top: str, *names: str) -> bytes:
    """The bytes of ``top/names...`` (``open_below``); OSError when it holds more than ``limit``."""
    fd = open_below(top, *names)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes")
        return pread_all(fd, 0, size)
    finally:
        os.close(fd)


def open_regular(path: str) -> int:
    """A read descriptor of a file not ours that may be a link (``.claude.json``, often one to a
    dotfiles checkout): followed, but only to a regular file (a device is not even opened)."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise OSError(errno.EINVAL, "not a regular file", path)
    return _regular(os.open(path, os.O_RDONLY | _O_NONBLOCK | _O_CLOEXEC | _O_BINARY))


def read_regular(path: str, limit: int) -> bytes:
    """The bytes of ``path`` (``open_regular``); OSError when it holds more than ``limit``."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes", path)
        return pread_all(fd, 0, size)
    finally:
        os.close(fd)
