"""The commands that report: token usage (`usage`, and `stats`, its view by session) and what was said (`search`, `index`).

Imports happen inside each command (the usage and search modules are not small).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..ground.term import inert, inert_line
from . import render, scope
from .render import Screen

if TYPE_CHECKING:
    from ..ground.project import Project
    from ..sessions.search import IndexState


def cmd_usage(args: argparse.Namespace, screen: Screen) -> int:
    """`usage` (and `stats`, which is `usage --by session`)."""
    import msgspec

    from ..sessions.reports import format_table
    from ..sessions.usage_report import since_of, usage_rows, usage_table
    from ..usage.prices import current_prices

    projects = scope.projects(args, screen)
    table = current_prices()  # a prices.json that is no price table: said before anything is read
    if args.burn:
        return _burn(args, projects, screen)
    since = since_of(args.since)
    failed = []

    def refused(project: Project, exc: Exception) -> None:  # --all: one project's failure is its own
        failed.append(project)  # said here, with the project it was (the listing goes on)
        screen.say(f"c3async: error: {project}: {exc}")

    found = usage_rows(projects, args.by, table, since=since, on_error=refused if args.all else None)
    rows = found if isinstance(found, list) else found.rows
    if args.json:
        screen.json(msgspec.json.encode(rows))
    elif rows:
        if isinstance(found, list):  # by session: the table `stats` always printed
            # format_table makes each cell inert; this is a backstop
            screen.print(inert(format_table(found, show_project=args.all)))
        else:
            screen.print(inert(usage_table(found, args.by)))
    elif projects and not failed:
        where = f"{projects[0]}'s transcripts" if not args.all else f"the transcripts of {len(projects)} projects"
        screen.say(f"no token usage found in {where}" + (f" since {inert_line(args.since)}" if since else ""))
    return 1 if failed else 0


def _burn(args: argparse.Namespace, projects: list[Project], screen: Screen) -> int:
    """`usage --burn`: the current windows, who spends them, the runway, the refusals."""
    import msgspec

    from ..ground.errors import BadArgument
    from ..sessions.usage_report import burn_json, burn_report, burn_table

    if args.since is not None:
        raise BadArgument("--burn is about the current windows: --since does not apply")
    report = burn_report(projects)
    if args.json:
        screen.json(msgspec.json.encode(burn_json(report)))
    else:
        screen.print(inert(burn_table(report)))
    return 0


def cmd_search(args: argparse.Namespace, screen: Screen) -> int:
    import msgspec

    from ..sessions.search import search

    projects = None if args.all else scope.projects(args, screen)
    progress = screen.progress("indexing transcripts (MiB)")
    try:
        found = search(
            args.query,
            projects=projects,
            role=args.role,
            since=args.since,
            until=args.until,
            branch=args.branch,
            tools=args.tools,
            tag=args.tag,
            limit=20 if args.limit is None else args.limit,
            progress=lambda done, total: progress(done >> 20, total >> 20),
        )
    finally:
        progress.close()
    _say_index(found.problems, found.index, screen)
    if args.json:
        screen.json(msgspec.json.encode(found))
        return 0
    if not found.results:
        screen.say(f"c3async: no session matches {inert_line(args.query)!s}")
        return 0
    for line in render.search_lines(found, screen.styled()):
        screen.print(line)
    return 0


def _say_index(problems: list[str], index: IndexState, screen: Screen) -> None:
    """What an answer from the search index warns of: its problems, and an index still being built."""
    for problem in problems:
        screen.say(f"c3async: warning: {problem}")
    if index.updating:
        pct = f" ({100 * index.done_bytes // index.total_bytes}%)" if index.total_bytes else ""
        screen.say(f"c3async: the index is being built by another process{pct}; results cover what it has indexed")


def cmd_files(args: argparse.Namespace, screen: Screen) -> int:
    import msgspec

    from ..sessions.search import files

    here = scope.project_dir(args.project)
    progress = screen.progress("indexing transcripts (MiB)")
    try:
        found = files(
            args.path,
            bases=[here, *(p.root for p in scope.projects(args, screen))],
            limit=50 if args.limit is None else args.limit,
            progress=lambda done, total: progress(done >> 20, total >> 20),
        )
    finally:
        progress.close()
    _say_index(found.problems, found.index, screen)
    if args.json:
        screen.json(msgspec.json.encode(found))
        return 0
    if not found.sessions:
        screen.say(f"c3async: no session changed {inert_line(found.paths[0])}")
        return 0
    for line in render.files_lines(found):
        screen.print(line)
    return 0


def cmd_index(args: argparse.Namespace, screen: Screen) -> int:
    import msgspec

    from ..search import index

    progress = screen.progress("indexing transcripts (MiB)")
    try:
        if args.rebuild:
            done = index.rebuild(progress=None if args.quiet else lambda d, t: progress(d >> 20, t >> 20))
        else:
            done = index.update(progress=None if args.quiet else lambda d, t: progress(d >> 20, t >> 20))
    finally:
        progress.close()
    for problem in done.errors:
        screen.say(f"c3async: warning: {problem}")
    if done.busy:
        screen.say("c3async: another process is updating the index; nothing done here")
    if args.json:
        screen.json(msgspec.json.encode({**msgspec.structs.asdict(done), "size_bytes": index.size()}))
    elif not args.quiet:
        screen.print(render.indexed_line(done, index.size()))
    return 1 if done.errors else 0
