"""The commands on sessions: each parses nothing itself (``parser`` did), asks the sessions
view or a store, and hands what it found to ``render``.

Imports happen inside each command so that ``c3async sessions`` does not pay for the MCP SDK.
"""

from __future__ import annotations

import argparse
import logging
import os
from typing import TYPE_CHECKING

from ..ground.term import inert, inert_line
from . import render, scope
from .render import Screen

if TYPE_CHECKING:
    from ..ground.project import Project


def _say_where_sessions_are(project: str, screen: Screen) -> None:
    """A folder Claude Code has no sessions of: where it looked, and where the sessions are."""
    from pathlib import Path

    from ..catalog.listing import folder_candidates
    from ..catalog.locate import slug
    from ..sessions.projects import known_projects
    from ..stores.claude_dirs import roots

    looked = ", ".join(str(r.projects / slug(project)) for r in roots())
    screen.say(f"c3async: Claude Code has no sessions of {inert_line(project)} (looked for {inert_line(looked)})")
    others = [p for p in known_projects(save=False) if p.path != project and p.folders]
    sessions = sum(len(folder_candidates(Path(f))) for p in others for f in p.folders)
    if sessions:
        screen.say(
            f"c3async: it has {sessions:,} session{'s' if sessions != 1 else ''} of {len(others):,} other "
            f"project{'s' if len(others) != 1 else ''}: `c3async sessions --all` lists them "
            "(`c3async projects` names the projects; `c3async hub --open` shows them all)"
        )


def cmd_sessions(args: argparse.Namespace, screen: Screen) -> int:
    import msgspec

    from ..catalog.scan import NEWEST
    from ..sessions.moves import remember as remember_identity
    from ..sessions.view import list_rows_sync, remember_roots
    from ..stores import registry

    projects = scope.projects(args, screen)
    depth = max(NEWEST, args.limit or 0)  # --limit above the newest 200 lists older sessions too
    progress = screen.progress("reading transcripts")
    try:
        scans, rows = list_rows_sync(
            projects, which=args.filter, search=args.search, progress=progress, limit=depth, tag=args.tag
        )
        if args.all:  # folders shared by two paths' sessions: the other path is a project too
            from ..sessions.projects import learn_from, listed_projects

            learn_from(scans)
            more = [p for p in listed_projects() if p not in set(projects)]
            if more:
                more_scans, more_rows = list_rows_sync(
                    more, which=args.filter, search=args.search, progress=progress, limit=depth, tag=args.tag
                )
                held = {r.id for r in rows}
                scans += more_scans
                rows = sorted(
                    [*rows, *(r for r in more_rows if r.id not in held)],
                    key=lambda r: (r.mtime_ns, r.id),
                    reverse=True,
                )
    finally:
        progress.close()
    if args.filter == "all" and not args.search and rows:  # a full listing: the ids the shell completes
        from ..ground.errors import C3Error
        from ..sessions.completion import remember

        try:
            remember([s.dirs.project for s in scans], rows)
        except (OSError, C3Error) as exc:  # a cache for the shell (a full disk is said by what matters)
            logging.getLogger(__name__).debug("the ids for the shell's completion were not saved: %s", exc)
    if not args.all and scans:
        if scans[0].sessions:  # a folder with sessions: the Hub and `--all` list it from now on
            try:
                registry.register(scans[0].project)
                remember_roots(scans[:1])
                remember_identity(scans[0].project.root)
            except Exception as exc:
                screen.say(f"c3async: could not register the project: {exc}")
        if not scans[0].dirs.folders:
            _say_where_sessions_are(scans[0].dirs.project, screen)
    listed = sum(len(s.sessions) for s in scans)
    found = sum(max(s.found, len(s.sessions)) for s in scans)
    if found > listed and any(len(s.sessions) >= depth for s in scans):
        screen.say(
            f"c3async: {listed:,} of {found:,} sessions listed, the newest {depth:,} per project (--limit N to see more)"
        )
    if args.limit is not None and len(rows) > args.limit:
        screen.say(f"c3async: showing {args.limit:,} of {len(rows):,} rows (--limit N to see more)")
        rows = rows[: args.limit]
    _warn_expiring(args, [s.project for s in scans], screen)
    if args.json:
        screen.json(msgspec.json.encode(rows))
    elif rows:
        screen.write(render.sessions_table(rows, show_project=args.all))
    elif listed:  # sessions exist, none passes: said, not an empty screen (no transcripts is said above)
        what = [f"--filter {args.filter}"] if args.filter != "all" else []
        what += [f"--search {inert_line(args.search)}"] if args.search else []
        what += [f"--tag {inert_line(args.tag)}"] if args.tag else []
        screen.say(f"c3async: no sessions match {' '.join(what) or 'this listing'} (of {listed:,} listed)")
    return 0


def _keep_expiring_command(args: argparse.Namespace) -> str:
    """The command that keeps what this listing warns of: the same projects."""
    import shlex

    if getattr(args, "all", False):
        return "c3async keep --expiring --all"
    where = f" --project {shlex.quote(args.project)}" if args.project else ""
    return f"c3async keep --expiring{where}"


def _warn_expiring(args: argparse.Namespace, projects: list[Project], screen: Screen) -> None:
    """One line on stderr while a listed project has sessions near Claude Code's cleanup that
    the archive does not hold (what the listing's keep pass found)."""
    from ..sessions import keep

    line = keep.warning(keep.total(keep.surveyed(p) for p in projects), _keep_expiring_command(args))
    if line:
        screen.say(f"c3async: {line}")


def cmd_projects(args: argparse.Namespace, screen: Screen) -> int:
    import msgspec

    from ..sessions.projects import project_overview
    from ..stores import registry

    if args.move:
        return _move(args, screen)
    if args.forget or args.prune:
        gone = registry.forget(args.forget) if args.forget else []
        if args.prune:
            gone += registry.prune()
        if args.json:
            screen.json(msgspec.json.encode({"forgotten": gone}))
        elif gone:
            for path in gone:
                screen.print(f"forgot {inert_line(path)}")
        else:
            screen.say("c3async: no registered project is missing; nothing to prune")
        return 0
    listed = project_overview()
    if args.json:
        screen.json(msgspec.json.encode(listed))
        return 0
    if not listed:
        from ..stores.claude_dirs import roots

        looked = ", ".join(str(r.projects) for r in roots())
        screen.say(f"c3async: Claude Code has no sessions yet (looked in {inert_line(looked)})")
        return 0
    for line in render.projects_lines(listed):
        screen.print(line)
    return 0


def _move(args: argparse.Namespace, screen: Screen) -> int:
    """``projects --move OLD NEW``: OLD's sessions become NEW's (or a move of NEW to OLD is undone)."""
    import msgspec

    from ..ground.errors import UsageError
    from ..sessions.moves import move

    if args.forget or args.prune:
        raise UsageError("--move goes alone (not with --forget or --prune)")
    old, new = args.move
    done = move(old, new)
    if args.json:
        screen.json(msgspec.json.encode(done))
        return 0
    for line in done.kept:
        screen.say(f"c3async: kept {line}")
    for line in done.skipped:
        screen.say(f"c3async: left out {line}")
    for line in render.move_lines(done, old, new):
        screen.print(line)
    return 0


def cmd_keep(args: argparse.Namespace, screen: Screen) -> int:
    import msgspec

    from ..ground.errors import UsageError

    asked = [
        what for what, given in (("ID", args.id), ("--status", args.status), ("--expiring", args.expiring)) if given
    ]
    if len(asked) != 1:
        raise UsageError(
            f"keep takes one of ID, --status or --expiring{f' (got {asked[0]} and {asked[1]})' if asked else ''}"
        )
    if args.all and not args.expiring:
        raise UsageError("--all goes with --expiring")
    if args.id:
        args.op, args.reason = "keep", None
        return cmd_mark(args, screen)
    if args.expiring:
        return _keep_expiring(args, screen)
    from ..stores.archive import status

    st = status()
    if args.json:
        screen.json(msgspec.json.encode(st))
        return 0
    for line in render.archive_lines(st):
        screen.print(line)
    return 0


def _keep_expiring(args: argparse.Namespace, screen: Screen) -> int:
    """``keep --expiring``: a keep mark on every session Claude Code deletes within a week that
    the archive does not hold, each preserved at once; what was kept is printed."""
    import msgspec

    from ..sessions.act import keep_expiring
    from ..sessions.keep import WARN_DAYS

    projects = scope.projects(args, screen)
    done = keep_expiring(projects, by="user", host=scope.env_session())
    failed = [k for k in done.kept if not k.preserved]
    if args.json:
        screen.json(msgspec.json.encode(done))
        return 1 if failed else 0
    for line in render.kept_lines(done, several=len(projects) > 1):
        screen.print(line)
    held = f"{done.held:,} kept already" + (f", {done.waived:,} left unkept as a mark says" if done.waived else "")
    n = len(done.kept)
    if n:
        screen.say(
            f"c3async: {n - len(failed):,} of {n:,} session{'s' if n != 1 else ''} that Claude Code deletes within "
            f"{WARN_DAYS} days kept now ({held})"
        )
    else:
        screen.say(
            f"c3async: nothing to keep: {done.expiring:,} session{'s' if done.expiring != 1 else ''} expire within {WARN_DAYS} days ({held})"
        )
    if failed:
        screen.say(
            f"c3async: error: the archive refused {len(failed):,} of them; their keep marks are written, and a "
            "later listing preserves them once the archive takes them"
        )
    return 1 if failed else 0


def cmd_resume(args: argparse.Namespace, screen: Screen) -> int:
    import shlex
    import shutil

    from ..sessions.act import prepare_resume

    if args.tmux:
        from ..sessions.launch import tmux_here

        tmux_here()  # outside tmux: said before anything is put back
    plan = prepare_resume(scope.projects(args, screen)[0], args.id, dry_run=args.print)
    if plan.elsewhere:
        screen.say(f"c3async: session {plan.session} is in the project {plan.project}")
    for path in plan.restored:
        screen.say(f"c3async: {'would put' if args.print else 'put'} back {inert_line(path)} from the archive")
    from ..sessions.resume import resume_command

    extra = list(args.claude_args or [])
    command = resume_command(plan.cwd, plan.session, config_dir=plan.config_dir) + "".join(
        " " + shlex.quote(a) for a in extra
    )
    if args.print:
        if plan.restored:
            screen.say("c3async: (nothing was put back: `c3async resume` without --print does)")
        screen.print(inert_line(command))
        return 0
    if args.tmux:
        from ..sessions.launch import claude_argv, tmux_window

        env = {"CLAUDE_CONFIG_DIR": plan.config_dir} if plan.config_dir is not None else None
        tmux_window(plan.cwd, claude_argv(plan.session, extra), name=f"claude {plan.session[:8]}", env=env)
        screen.say(f"c3async: opened {plan.session} in a new tmux window")
        return 0
    claude = shutil.which("claude")
    if claude is None:
        screen.say(f"c3async: claude is not on PATH; run: {inert_line(command)}")
        return 1
    claude = os.path.abspath(claude)  # found through a relative PATH entry: here, not in plan.cwd
    screen.flush()  # what was said before the process becomes claude
    os.chdir(plan.cwd)
    if plan.config_dir is not None:  # a session of another Claude Code root: claude reads that one
        os.environ["CLAUDE_CONFIG_DIR"] = plan.config_dir
    os.execv(claude, [claude, "--resume", plan.session, *extra])
    return 0  # not reached


def cmd_reopen(args: argparse.Namespace, screen: Screen) -> int:
    import time

    import msgspec

    from ..ground.errors import C3Error
    from ..sessions.launch import claude_argv, in_tmux, tmux_window
    from ..sessions.reopen import gone
    from ..sessions.resume import ago
    from ..sessions.usage_report import since_of

    tmux = in_tmux() and not args.print and not args.json
    found = gone(since_of(args.since), dry_run=args.print or args.json)
    if args.json:
        screen.json(msgspec.json.encode(found))
        return 0
    if not found:
        screen.say(
            "c3async: no session was live when the machine or its claude went down"
            + (f" since {inert_line(args.since)}" if args.since else "")
        )
        return 0
    now, failed = time.time(), 0
    said = {
        "reboot": "before the machine restarted",
        "ended": "until its claude ended",
        "killed": "when its claude was killed",
    }
    for g in found:
        if g.command is None:  # said, not counted a failure: a transcript deleted since stays so
            screen.say(f"c3async: {g.id}: {inert_line(g.problem or 'cannot be resumed')}")
            continue
        screen.say(f"c3async: {g.id} was live {said[g.why]} ({ago(g.seen, now)} ago, in {inert_line(g.cwd or '?')})")
        if not tmux:
            screen.print(inert_line(g.command))
            continue
        env = {"CLAUDE_CONFIG_DIR": g.config_dir} if g.config_dir is not None else None
        try:
            tmux_window(g.cwd or "", claude_argv(g.id), name=f"claude {g.id[:8]}", env=env, focus=False)
        except C3Error as exc:
            failed += 1
            screen.say(f"c3async: {g.id}: {inert_line(str(exc))}")
    if tmux:
        opened = sum(g.command is not None for g in found) - failed
        screen.say(f"c3async: {opened} {render.plural(opened, 'session')} opened again, one tmux window each")
    elif not args.print:
        screen.say("c3async: not inside tmux: run each command above in a terminal of its own")
    return 1 if failed else 0


def cmd_mark(args: argparse.Namespace, screen: Screen) -> int:
    import msgspec

    from ..sessions.act import mark

    project = scope.projects(args, screen)[0]
    ref = args.id
    if ref is None:  # `mark note` without an id: the session this shell runs in, if any
        ref = scope.env_session()
        if not ref:
            from ..ground.errors import BadArgument

            raise BadArgument(
                "no session id given, and this shell is not inside a Claude Code "
                "session (CLAUDE_CODE_SESSION_ID is unset): give the id"
            )
    written, found = mark(
        project,
        ref,
        args.op,
        host=scope.env_session(),
        by="user",
        reason=getattr(args, "reason", None),
        successor=getattr(args, "successor", None),
        summary=getattr(args, "summary", None),
        next_steps=getattr(args, "next", None),
        release=getattr(args, "release", False),
        tags=getattr(args, "words", None),
    )
    if found.elsewhere:
        screen.say(f"c3async: {found.where()}; the mark is written there")
    if args.json:
        screen.json(msgspec.json.encode(written))
    else:
        words = [inert_line(w) for w in getattr(written, "tags", None) or ()]
        screen.print(" ".join([args.op, inert_line(written.id), *words]))
    return 0


def cmd_live(args: argparse.Namespace, screen: Screen) -> int:
    from ..sessions.board import board

    project = scope.projects(argparse.Namespace(project=args.project), screen)[0]
    if args.watch:
        from .watch import watch

        return watch(project, args.all, args.notify, screen)
    rows = board(project, everywhere=args.all, burn=True)
    if args.json:
        import msgspec

        screen.json(msgspec.json.encode(rows))
        return 0
    if not rows:
        screen.say(f"c3async: no live sessions {'in any project' if args.all else f'in {project}'}")
        return 0
    from ..sessions.reports import live_table

    screen.write(live_table(rows, show_project=args.all) + "\n")
    return 0


def cmd_show(args: argparse.Namespace, screen: Screen) -> int:
    import msgspec

    from ..sessions import detail

    host = scope.env_session()
    d = detail.show(scope.projects(args, screen)[0], args.id, host=host)
    if d.elsewhere:
        screen.say(f"c3async: session {d.row.id} is in the project {d.row.project}")
    if args.turns is not None:  # the last N turns, read backward from the end of the transcript
        items = detail.tail_items(d.row.path, args.turns)
        if args.json:
            data = msgspec.to_builtins(d)
            data["conversation"] = msgspec.to_builtins(items)
            screen.json(msgspec.json.encode(data))
        else:
            screen.print(inert(detail.render(d, preview=False)))
            screen.print(inert(detail.render_conversation(items, args.turns)))
        return 0
    if args.json:
        screen.json(msgspec.json.encode(d))
    else:
        screen.print(inert(detail.render(d)))
    return 0


def cmd_export(args: argparse.Namespace, screen: Screen) -> int:
    from ..ground.errors import BadArgument, C3Error, Conflict, NotRegularFile, Refused, UsageError
    from ..ground.safefs import write_new
    from ..sessions.export import open_export

    if args.force and args.output is None:
        raise UsageError("--force replaces the file -o names: give -o FILE too")
    if args.output is not None and not args.output.strip():
        raise UsageError("-o needs a file name")
    exp = open_export(scope.projects(args, screen)[0], args.id, args.format, host=scope.env_session())
    if exp.detail.elsewhere:
        screen.say(f"c3async: session {exp.detail.row.id} is in the project {exp.detail.row.project}")
    if args.output is None:
        for chunk in exp.chunks():
            screen.write(chunk)
        return 0
    try:
        write_new(args.output, exp.blocks(), replace=args.force)
    except FileExistsError:
        raise Conflict(f"{args.output} exists: give --force to replace it") from None
    except NotRegularFile as exc:
        raise Refused(f"refusing {args.output}: {exc.strerror}") from None
    except OSError as exc:
        if isinstance(exc, C3Error):  # a full disk, said as one
            raise
        raise BadArgument(f"cannot write {args.output}: {exc.strerror or exc}") from None
    finally:
        exp.close()
    screen.say(f"c3async: wrote {args.output}")
    return 0
