"""A session exported whole, as Markdown (``export_md``) or as one HTML page (``export_html``):
``c3async export`` and the Hub's reader.

Both formats render the steps of one streaming walk (``export_walk``) as they come, so an export
holds one page in memory whatever the transcript's size; what a page cuts (a prompt or reply past
100,000 characters, a tool's input or output past 20,000, a line past 8 MiB) is said where it is
cut. On top: the title, the note, the stale mark and the chain (sessions before and after, the
one it was forked from and its forks), from the session's detail (``detail.show``).

Transcript text is inert in both formats (each renderer says how); every piece of it also goes
through ``ground.term.inert``, so no control character reaches the file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..catalog.conversation import Walk
from ..ground.project import Project
from . import export_html, export_md
from .detail import Detail, show
from .export_walk import Step, steps

__all__ = ("FORMATS", "Export", "open_export")

# ------------------------------------------------------------------ the document


FORMATS = ("md", "html")


class Export:
    """One session's export, opened: the detail on top, the transcript open for the walk (so a
    missing or refused file is said before anything is written). ``chunks()`` gives the text
    and closes the transcript at its end; ``close()`` when it is not read."""

    def __init__(self, d: Detail, fmt: str) -> None:
        self.detail = d
        self.format = fmt
        self.module = export_md if fmt == "md" else export_html
        self.walk = Walk(d.row.path)

    @property
    def filename(self) -> str:
        return f"{self.detail.row.id}.{self.format}"

    @property
    def media_type(self) -> str:
        return self.module.MEDIA_TYPE

    def chunks(self) -> Iterator[str]:
        render: Callable[[Step], str] = self.module.step
        try:
            yield self.module.head(self.detail)
            for s in steps(self.detail.row.path, self.walk):
                yield render(s)
            yield self.module.tail(self.walk.changed)
        finally:
            self.close()

    def blocks(self, size: int = 1 << 16) -> Iterator[bytes]:
        """``chunks()`` as UTF-8, joined into blocks of about ``size`` bytes (a writer's or a
        stream's unit: one thread hop a block, not one an item)."""
        held: list[bytes] = []
        have = 0
        for chunk in self.chunks():
            data = chunk.encode("utf-8")
            held.append(data)
            have += len(data)
            if have >= size:
                yield b"".join(held)
                held, have = [], 0
        if held:
            yield b"".join(held)

    def close(self) -> None:
        self.walk.close()


def open_export(project: Project, ref: str | None, fmt: str, *, host: str | None = None) -> Export:
    """The export of the session ``ref`` names (as ``show`` finds it) in ``fmt`` (md or html).
    Raises a C3Error, or the OSError of opening its transcript."""
    return Export(show(project, ref, host=host), fmt)
