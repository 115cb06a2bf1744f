"""The ``c3async`` command. Thin: each subcommand calls the library functions the MCP tools call.

Imports happen inside each command so that ``c3async sessions`` does not pay for the MCP SDK.
Errors are said in one place, ``_said`` (``c3async: error: MESSAGE`` on stderr), with the exit
status its kind has in ``EXIT``: 2 for a usage error (as argparse's own), 1 for the rest; an
OSError that is not ours is said as it is, exit 1. ``--json`` output is for scripts.

Text printed for a person (tables, lists, messages, errors, argparse's own usage errors and log
lines) goes through :mod:`c3async.ground.term`, so a title, branch, note, task or path cannot drive the
terminal. ``--json`` goes through
:func:`~c3async.ground.term.json_inert`: the same data to any parser, with DEL, C1 and bidi/format
characters written as ``\\u`` escapes. Text options the user types are refused (exit 2, naming the
option) if they hold bytes that are not UTF-8; stdout and stderr never fail to encode.
"""

from __future__ import annotations

import argparse
import datetime  # noqa: F401 - before msgspec, see below
import logging
import os
import sys
import time
from typing import TypeVar

from .ground.errors import C3Error, Kind, TaskError
from .ground.term import inert, inert_line, json_inert

# datetime is imported above, before any command imports msgspec: msgspec's C module imports it
# as it starts, and a Ctrl-C or SIGTERM landing in that import made the interpreter crash
# (SIGSEGV); imported here, it is an ordinary KeyboardInterrupt.

__all__ = ("main",)


class Progress:
    """A one-line counter on stderr, shown only on a terminal and only once work takes a moment."""

    def __init__(self, what: str, delay: float = 0.3) -> None:
        self.what = what
        self.enabled = sys.stderr.isatty()
        self.start = time.monotonic()
        self.delay = delay
        self.shown = False
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.start < self.delay or (now - self.last < 0.05 and done < total):
            return
        self.last = now
        self.shown = True
        sys.stderr.write(f"\r{self.what} {done}/{total}")
        sys.stderr.flush()

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _err(message: str) -> None:
    """A message for a person on stderr; it may quote ids, paths and text, so it is made inert."""
    print(inert(message), file=sys.stderr)


def _write_json(data: bytes) -> None:
    """JSON on stdout: the data exactly as encoded, DEL/C1/bidi escaped so it is inert too."""
    sys.stdout.buffer.write(json_inert(data) + b"\n")


def _env_session() -> str | None:
    """``CLAUDE_CODE_SESSION_ID`` (stored in marks, tasks and logs): refused if it is not UTF-8."""
    value = os.environ.get("CLAUDE_CODE_SESSION_ID")
    if value and _not_utf8(value) is not None:
        from .ground.errors import BadArgument

        raise BadArgument(
            "CLAUDE_CODE_SESSION_ID holds bytes that are not UTF-8, so it is no session "
            "id: unset it or give the id as an argument"
        )
    return value


def _size(n: float) -> str:
    for unit in ("B", "K", "M", "G"):
        if n < 1024 or unit == "G":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return str(n)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "\u2026"


def _grouped(rows: list) -> list[tuple[object, int]]:
    """Rows in their order, with each fork moved under its root when the root is listed too:
    (row, depth), depth 0 for a root or a row whose root is not listed."""
    by_id = {r.id: r for r in rows}
    children: dict[str, list] = {}
    top = []
    for r in rows:
        parent = r.forked_from if r.forked_from in by_id else None
        if parent is None:
            top.append(r)
        else:
            children.setdefault(parent, []).append(r)
    out: list[tuple[object, int]] = []
    placed: set[str] = set()

    def put(row, depth: int) -> None:
        if row.id in placed:
            return
        placed.add(row.id)
        out.append((row, depth))
        for child in children.get(row.id, ()):
            put(child, depth + 1)

    for r in top:
        put(r, 0)
    for r in rows:  # what a loop of forks left out (never expected): in its place
        put(r, 0)
    return out


def print_table(rows, show_project: bool) -> None:
    import shutil

    from .sessions.rows import age

    grouped = _grouped(rows)
    rows = [r for r, _ in grouped]
    depths = [d for _, d in grouped]
    now = time.time()
    width = shutil.get_terminal_size((120, 24)).columns
    cols = [
        (
            inert_line(r.id[:8]),
            age(r.last_activity or r.mtime, now),
            _size(r.size),
            inert_line(r.branch or "-"),
            inert_line(os.path.basename(r.project)) if show_project else None,
            r.title,
        )
        for r in rows
    ]
    branch_w = min(24, max([len(c[3]) for c in cols] + [6]))
    proj_w = min(20, max([len(c[4] or "") for c in cols] + [7])) if show_project else 0
    head = f"{'ID':8}  {'AGE':>4}  {'SIZE':>6}  {'BRANCH':{branch_w}}  "
    if show_project:
        head += f"{'PROJECT':{proj_w}}  "
    title_w = max(20, width - len(head))
    out = [head + "TITLE"]
    for row, depth, (sid, ago, size, branch, proj, title) in zip(rows, depths, cols):
        line = f"{sid:8}  {ago:>4}  {size:>6}  {_clip(branch, branch_w):{branch_w}}  "
        if show_project:
            line += f"{_clip(proj or '', proj_w):{proj_w}}  "
        text = inert_line(title)
        if depth:  # a fork, under the session it was forked from
            text = "  " * (depth - 1) + "└ fork: " + text
        if row.live:
            state = ""
            if row.state == "waiting":
                state = f" WAITING {age(row.state_since, now)}" if row.state_since else " WAITING"
            elif row.state:
                state = f" {row.state}"
            text = f"[LIVE{'' if row.mcp_count < 2 else f' MCP×{row.mcp_count}'}{state}] {text}"
        if row.archived:
            text = f"[archived] {text}"
        if row.stale is not None:
            text += f"  [stale: {inert_line(row.stale.reason or '')}]"
        elif row.hints:
            text += f"  [{', '.join(inert_line(h) for h in row.hints)}]"
        out.append(line + _clip(text, title_w))
    sys.stdout.write("\n".join(out) + "\n")


def _project_dir(given: str | None) -> str:
    """The folder a command works on: ``--project``, else ``CLAUDE_PROJECT_DIR``, else the cwd,
    which must be an existing directory (a typo is a usage error, exit 2: nothing is registered,
    created or written for it)."""
    from .ground.errors import UsageError

    if given is not None:
        what, value = "--project", given
    elif os.environ.get("CLAUDE_PROJECT_DIR"):
        what, value = "CLAUDE_PROJECT_DIR", os.environ["CLAUDE_PROJECT_DIR"]
    else:
        try:
            return os.getcwd()
        except FileNotFoundError:
            raise UsageError(
                "the current directory no longer exists: cd into a project or give --project DIR"
            ) from None
    try:
        is_dir = os.path.isdir(value)
        exists = is_dir or os.path.lexists(value)
    except ValueError:  # a NUL
        is_dir = exists = False
    if not is_dir:
        why = "is not a directory" if exists else "no such directory"
        raise UsageError(f"{what} {value}: {why} (give the folder of a project)")
    return value


def _projects(args: argparse.Namespace) -> list[str]:
    """The project the command is about (``--project``, else the current folder's), or with
    ``--all`` every project c3async knows: registered or found in Claude Code's folders."""
    from .ground.paths import canonical, project_root

    # A repository's worktrees are one project with its main checkout: the state root.
    here = project_root(canonical(_project_dir(args.project)))
    if not getattr(args, "all", False):
        return [here]
    from .sessions.projects import known_projects
    from .stores.claude_dirs import roots

    known = known_projects()
    projects = [p.path for p in known]
    if args.project and here not in projects:
        projects.append(here)
    gone = [p.path for p in known if p.missing]
    if gone:
        _err(
            f"c3async: {len(gone)} project folder{'s' if len(gone) != 1 else ''} no longer "
            f"exist{'s' if len(gone) == 1 else ''} ({inert_line(', '.join(gone[:3]))}{' ...' if len(gone) > 3 else ''}); "
            f"{'its' if len(gone) == 1 else 'their'} sessions are listed (`c3async projects` says more)"
        )
    if not projects:
        looked = ", ".join(str(r.projects) for r in roots())
        _err(f"c3async: Claude Code has no sessions yet (looked in {inert_line(looked)})")
    return projects


def _say_where_sessions_are(project: str) -> None:
    """A folder Claude Code has no sessions of: where it looked, and where the sessions are."""
    from pathlib import Path

    from .catalog.listing import folder_candidates
    from .catalog.locate import slug
    from .sessions.projects import known_projects
    from .stores.claude_dirs import roots

    looked = ", ".join(str(r.projects / slug(project)) for r in roots())
    _err(f"c3async: Claude Code has no sessions of {inert_line(project)} (looked for {inert_line(looked)})")
    others = [p for p in known_projects(save=False) if p.path != project and p.folders]
    sessions = sum(len(folder_candidates(Path(f))) for p in others for f in p.folders)
    if sessions:
        _err(
            f"c3async: it has {sessions:,} session{'s' if sessions != 1 else ''} of {len(others):,} other "
            f"project{'s' if len(others) != 1 else ''}: `c3async sessions --all` lists them "
            "(`c3async projects` names the projects; `c3async hub --open` shows them all)"
        )


def cmd_sessions(args: argparse.Namespace) -> int:
    import msgspec

    from .catalog.scan import NEWEST
    from .sessions.moves import remember as remember_identity
    from .sessions.view import list_rows_sync, remember_roots
    from .stores import registry

    projects = _projects(args)
    depth = max(NEWEST, args.limit or 0)  # --limit above the newest 200 lists older sessions too
    progress = Progress("reading transcripts")
    try:
        scans, rows = list_rows_sync(projects, which=args.filter, search=args.search, progress=progress, limit=depth)
        if args.all:  # folders shared by two paths' sessions: the other path is a project too
            from .sessions.projects import learn_from, listed_projects

            learn_from(scans)
            more = [p for p in listed_projects() if p not in set(projects)]
            if more:
                more_scans, more_rows = list_rows_sync(
                    more, which=args.filter, search=args.search, progress=progress, limit=depth
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
    if not args.all and scans:
        if scans[0].sessions:  # a folder with sessions: the Hub and `--all` list it from now on
            try:
                registry.register(scans[0].dirs.project)
                remember_roots(scans[:1])
                remember_identity(scans[0].dirs.project)
            except Exception as exc:
                _err(f"c3async: could not register the project: {exc}")
        if not scans[0].dirs.folders:
            _say_where_sessions_are(scans[0].dirs.project)
    listed = sum(len(s.sessions) for s in scans)
    found = sum(max(s.found, len(s.sessions)) for s in scans)
    if found > listed and any(len(s.sessions) >= depth for s in scans):
        _err(
            f"c3async: {listed:,} of {found:,} sessions listed, the newest {depth:,} per project (--limit N to see more)"
        )
    if args.limit is not None and len(rows) > args.limit:
        _err(f"c3async: showing {args.limit:,} of {len(rows):,} rows (--limit N to see more)")
        rows = rows[: args.limit]
    _warn_expiring(args, [s.dirs.project for s in scans])
    if args.json:
        _write_json(msgspec.json.encode(rows))
    elif rows:
        print_table(rows, show_project=args.all)
    elif listed:  # sessions exist, none passes: said, not an empty screen (no transcripts is said above)
        what = [f"--filter {args.filter}"] if args.filter != "all" else []
        what += [f"--search {inert_line(args.search)}"] if args.search else []
        _err(f"c3async: no sessions match {' '.join(what) or 'this listing'} (of {listed:,} listed)")
    return 0


def _keep_expiring_command(args: argparse.Namespace) -> str:
    """The command that keeps what this listing warns of: the same projects."""
    import shlex

    if getattr(args, "all", False):
        return "c3async keep --expiring --all"
    where = f" --project {shlex.quote(args.project)}" if args.project else ""
    return f"c3async keep --expiring{where}"


def _warn_expiring(args: argparse.Namespace, projects: list[str]) -> None:
    """One line on stderr while a listed project has sessions near Claude Code's cleanup that
    the archive does not hold (what the listing's keep pass found)."""
    from .sessions import keep

    line = keep.warning(keep.total(keep.surveyed(p) for p in projects), _keep_expiring_command(args))
    if line:
        _err(f"c3async: {line}")


def cmd_projects(args: argparse.Namespace) -> int:
    import shlex

    import msgspec

    from .sessions.projects import project_overview
    from .sessions.rows import age
    from .stores import registry

    if args.move:
        return _move(args)
    if args.forget or args.prune:
        gone = registry.forget(args.forget) if args.forget else []
        if args.prune:
            gone += registry.prune()
        if args.json:
            _write_json(msgspec.json.encode({"forgotten": gone}))
        elif gone:
            for path in gone:
                print(f"forgot {inert_line(path)}")
        else:
            _err("c3async: no registered project is missing; nothing to prune")
        return 0
    listed = project_overview()
    if args.json:
        _write_json(msgspec.json.encode(listed))
        return 0
    if not listed:
        from .stores.claude_dirs import roots

        looked = ", ".join(str(r.projects) for r in roots())
        _err(f"c3async: Claude Code has no sessions yet (looked in {inert_line(looked)})")
        return 0
    now = time.time()
    for p in listed:
        count = f"{p.sessions} session{'s' if p.sessions != 1 else ''}"
        active = f", last active {age(p.last_activity, now)} ago" if p.last_activity else ""
        kind = "registered" if p.registered else "found"
        missing = ""
        if p.missing:
            missing = "; missing: its folder is gone" + (
                " (`c3async projects --prune` forgets it)" if p.registered and not p.moved_to else ""
            )
        moved = f"; moved from {inert_line(', '.join(p.moved_from))}" if p.moved_from else ""
        print(f"{inert_line(p.path)}  {count}{active} ({kind}{missing}{moved})")
        if p.moved_to:
            print(
                f"  moved? {inert_line(p.path)} \u2192 {inert_line(p.moved_to)} ({p.moved_why}): "
                f"`c3async projects --move {inert_line(shlex.quote(p.path))} {inert_line(shlex.quote(p.moved_to))}` "
                "makes its sessions that folder's"
            )
    return 0


def _move(args: argparse.Namespace) -> int:
    """``projects --move OLD NEW``: OLD's sessions become NEW's (or a move of NEW to OLD is undone)."""
    import shlex

    import msgspec

    from .ground.errors import UsageError
    from .sessions.moves import move

    if args.forget or args.prune:
        raise UsageError("--move goes alone (not with --forget or --prune)")
    old, new = args.move
    done = move(old, new)
    if args.json:
        _write_json(msgspec.json.encode(done))
        return 0
    for line in done.kept:
        _err(f"c3async: kept {line}")
    for line in done.skipped:
        _err(f"c3async: left out {line}")
    if done.undone:
        print(
            f"undone: the move of {inert_line(new)} to {inert_line(old)}; {done.removed} file"
            f"{'s' if done.removed != 1 else ''} it added taken out of Claude Code's folders"
            f"{f', {len(done.kept)} kept' if done.kept else ''} (marks, notes and tasks folded into "
            f"{inert_line(old)} stay there)"
        )
        return 0
    files = [f"{done.linked} file{'s' if done.linked != 1 else ''} linked"]
    files += [f"{done.copied} copied"] if done.copied else []
    files += [f"{done.present} there already"] if done.present else []
    print(
        f"moved {inert_line(done.old)} \u2192 {inert_line(done.new)}: {done.sessions} session"
        f"{'s' if done.sessions != 1 else ''} listed and resumed there ({', '.join(files)} in "
        "Claude Code's folders, nothing changed in place)"
        + (f"; marks, notes and tasks folded from {inert_line(', '.join(done.folded))}" if done.folded else "")
    )
    print(f"undo: c3async projects --move {inert_line(shlex.quote(done.new))} {inert_line(shlex.quote(done.old))}")
    return 0


def cmd_keep(args: argparse.Namespace) -> int:
    import msgspec

    from .ground.errors import UsageError

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
        return cmd_mark(args)
    if args.expiring:
        return _keep_expiring(args)
    from .stores.archive import status

    st = status()
    if args.json:
        _write_json(msgspec.json.encode(st))
        return 0
    mib = 1024 * 1024
    print(
        f"archive {inert_line(st.path)}: {len(st.sessions)} session{'s' if len(st.sessions) != 1 else ''}, "
        f"{st.files} files, {st.bytes / mib:.1f} MiB; {st.held_bytes / mib:.1f} MiB held only by the archive "
        "(Claude Code deleted the originals, or a copy on another device)"
    )
    for k in st.sessions:
        only = f", {k.held_bytes / mib:.1f} MiB only here" if k.held_bytes else ""
        print(f"  {inert_line(k.id)}  {inert_line(k.folder)}  {k.files} files, {k.bytes / mib:.1f} MiB{only}")
    return 0


def _keep_expiring(args: argparse.Namespace) -> int:
    """``keep --expiring``: a keep mark on every session Claude Code deletes within a week that
    the archive does not hold, each preserved at once; what was kept is printed."""
    import msgspec

    from .sessions.act import keep_expiring
    from .sessions.keep import WARN_DAYS

    projects = _projects(args)
    done = keep_expiring(projects, by="user", host=_env_session())
    failed = [k for k in done.kept if not k.preserved]
    if args.json:
        _write_json(msgspec.json.encode(done))
        return 1 if failed else 0
    several = len(projects) > 1
    for k in done.kept:
        where = f"  {inert_line(os.path.basename(k.project.rstrip('/')) or k.project)}" if several else ""
        said = "kept" if k.preserved else f"marked keep, not preserved yet ({inert_line(k.error or '')})"
        print(f"{said} {k.id}{where}  expires in {k.expires_in_days}d")
    held = f"{done.held:,} kept already" + (f", {done.waived:,} left unkept as a mark says" if done.waived else "")
    n = len(done.kept)
    if n:
        _err(
            f"c3async: {n - len(failed):,} of {n:,} session{'s' if n != 1 else ''} that Claude Code deletes within "
            f"{WARN_DAYS} days kept now ({held})"
        )
    else:
        _err(
            f"c3async: nothing to keep: {done.expiring:,} session{'s' if done.expiring != 1 else ''} expire within {WARN_DAYS} days ({held})"
        )
    if failed:
        _err(
            f"c3async: error: the archive refused {len(failed):,} of them; their keep marks are written, and a "
            "later listing preserves them once the archive takes them"
        )
    return 1 if failed else 0


def cmd_resume(args: argparse.Namespace) -> int:
    import shlex
    import shutil

    from .sessions.act import prepare_resume

    plan = prepare_resume(_projects(args)[0], args.id, dry_run=args.print)
    if plan.elsewhere:
        _err(f"c3async: session {plan.session} is in the project {plan.project}")
    for path in plan.restored:
        _err(f"c3async: {'would put' if args.print else 'put'} back {inert_line(path)} from the archive")
    from .sessions.resume import resume_command

    extra = list(args.claude_args or [])
    command = resume_command(plan.cwd, plan.session, config_dir=plan.config_dir) + "".join(
        " " + shlex.quote(a) for a in extra
    )
    if args.print:
        if plan.restored:
            _err("c3async: (nothing was put back: `c3async resume` without --print does)")
        print(inert_line(command))
        return 0
    claude = shutil.which("claude")
    if claude is None:
        _err(f"c3async: claude is not on PATH; run: {inert_line(command)}")
        return 1
    claude = os.path.abspath(claude)  # found through a relative PATH entry: here, not in plan.cwd
    sys.stdout.flush()
    os.chdir(plan.cwd)
    if plan.config_dir is not None:  # a session of another Claude Code root: claude reads that one
        os.environ["CLAUDE_CONFIG_DIR"] = plan.config_dir
    os.execv(claude, [claude, "--resume", plan.session, *extra])
    return 0  # not reached


def cmd_mark(args: argparse.Namespace) -> int:
    import msgspec

    from .sessions.act import mark

    project = _projects(args)[0]
    ref = args.id
    if ref is None:  # `mark note` without an id: the session this shell runs in, if any
        ref = _env_session()
        if not ref:
            from .ground.errors import BadArgument

            raise BadArgument(
                "no session id given, and this shell is not inside a Claude Code "
                "session (CLAUDE_CODE_SESSION_ID is unset): give the id"
            )
    written, found = mark(
        project,
        ref,
        args.op,
        host=_env_session(),
        by="user",
        reason=getattr(args, "reason", None),
        successor=getattr(args, "successor", None),
        summary=getattr(args, "summary", None),
        next_steps=getattr(args, "next", None),
        release=getattr(args, "release", False),
    )
    if found.elsewhere:
        _err(f"c3async: {found.where()}; the mark is written there")
    if args.json:
        _write_json(msgspec.json.encode(written))
    else:
        print(f"{args.op} {inert_line(written.id)}")
    return 0


def cmd_live(args: argparse.Namespace) -> int:
    from .sessions.board import board

    project = _projects(argparse.Namespace(project=args.project))[0]
    rows = board(project, everywhere=args.all)
    if args.json:
        import msgspec

        _write_json(msgspec.json.encode(rows))
        return 0
    if not rows:
        _err(f"c3async: no live sessions {'in any project' if args.all else f'in {project}'}")
        return 0
    from .status import live_table

    sys.stdout.write(live_table(rows, show_project=args.all) + "\n")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    import msgspec

    from .sessions.detail import render, render_conversation, show, tail_items

    host = _env_session()
    d = show(_projects(args)[0], args.id, host=host)
    if d.elsewhere:
        _err(f"c3async: session {d.row.id} is in the project {d.row.project}")
    if args.turns is not None:  # the last N turns, read backward from the end of the transcript
        items = tail_items(d.row.path, args.turns)
        if args.json:
            data = msgspec.to_builtins(d)
            data["conversation"] = msgspec.to_builtins(items)
            _write_json(msgspec.json.encode(data))
        else:
            print(inert(render(d, preview=False)))
            print(inert(render_conversation(items, args.turns)))
        return 0
    if args.json:
        _write_json(msgspec.json.encode(d))
    else:
        print(inert(render(d)))
    return 0


def cmd_hook(args: argparse.Namespace) -> int:
    from .live.hooks import main as hook_main

    def last_chance(project: str) -> None:  # Claude Code starts: its cleanup follows within seconds
        from .ground.paths import canonical, project_root
        from .sessions.act import last_chance

        last_chance(project_root(canonical(project)))

    return hook_main(on_start=last_chance)


def cmd_install_hooks(args: argparse.Namespace) -> int:
    from .live.hooks import install, settings_path, uninstall

    target = settings_path(None if args.user else _project_dir(args.project), args.user)
    if args.remove:
        removed = uninstall(target)
        print(
            inert(
                f"removed the {', '.join(removed)} hooks from {target.path}"
                if removed
                else f"no c3async hooks in {target.path}"
            )
        )
        return 0
    added = install(target)
    if added:
        print(inert(f"added {', '.join(added)} hooks to {target.path}"))
    else:
        print(inert(f"the hooks are already in {target.path}"))
    return 0


class _TaskWords:
    """How the CLI words a task error (``ground.errors.Words``): `tasks add needs --title`, an
    argument by how the action's own parser spells it (``tasks.schema``)."""

    def action(self, action: str) -> str:
        return f"tasks {action}"

    def arg(self, action: str, name: str) -> str:
        from .ground.schema import fields
        from .tasks.schema import BY_NAME

        for f in fields(BY_NAME[action]) if action in BY_NAME else ():
            if f.name == name and (f.param.positional or f.param.spelled(name)):
                return f.param.metavar if f.param.positional else f.param.spelled(name)[0]
        return "--" + name.replace("_", "-")

    def call(self, action: str, args: tuple[tuple[str, str], ...] = ()) -> str:
        return " ".join(["c3async tasks", action, *(f"{self.arg(action, name)} {value}" for name, value in args)])


def _task_parsers(sub, actions_too: bool = True) -> None:
    """`tasks` and one subparser per action, each with only what the action takes: its
    arguments, flags and help come from the action's struct (``tasks.schema``). `tasks` alone
    is `tasks list`. ``actions_too=False``: `tasks` alone, for a command line that runs another
    command (the actions' declarations are then not imported)."""
    tk = sub.add_parser(
        "tasks",
        help="durable tasks, milestones and decisions (the c3_task actions)",
        description="Durable tasks, milestones and decisions of the project (.c3/pm/pm.json), the ones\n"
        "the c3_task MCP tool keeps. Without an action: list. `c3async tasks ACTION --help` says\n"
        "what an action takes.",
        epilog='Examples:\n  c3async tasks\n  c3async tasks add --title "ship it"\n  c3async tasks update 1a2b --status done',
        formatter_class=_ExamplesHelp,
    )
    _project_and_json(tk, "print JSON (what c3_task returns)")
    tk.set_defaults(func=cmd_tasks, task_action="list", task_inputs=())
    if not actions_too:
        return
    from .ground.schema import fields, helped, name_of
    from .tasks.schema import ACTION_TYPES

    actions = tk.add_subparsers(metavar="ACTION", title="actions")
    for action in ACTION_TYPES:
        name = name_of(action)
        line = (action.__doc__ or "") + (" (the default action)" if name == "list" else "")
        p = actions.add_parser(
            name,
            aliases=list(action.aliases),
            help=line,
            description=line[0].upper() + line[1:] + ".",
            epilog=f"Example:\n  {action.example}",
            formatter_class=_ExamplesHelp,
        )
        # SUPPRESS: given before the action (`tasks --json list`), the value is not reset here
        p.add_argument("--project", metavar="DIR", default=argparse.SUPPRESS, help="the project directory")
        p.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON (what c3_task returns)"
        )
        inputs: list[tuple[str, str, str]] = []  # (dest, c3_task argument, as typed)
        for f in fields(action):
            metavar = f.param.metavar or f.name.upper()
            if f.param.positional:  # optional to argparse: an old flag may give it instead
                p.add_argument(f"arg_{f.name}", metavar=metavar, nargs="?", type=_text, help=helped(f))
                inputs.append((f"arg_{f.name}", f.name, metavar))
            elif f.param.spelled(f.name):
                flags = f.param.spelled(f.name)
                p.add_argument(*flags, dest=f"arg_{f.name}", metavar=metavar, type=_text, help=helped(f))
                inputs.append((f"arg_{f.name}", f.name, flags[0]))
            for old in f.param.old_flags:  # earlier versions' spellings: accepted, not shown
                dest = "old_" + old.lstrip("-").replace("-", "_")
                p.add_argument(old, dest=dest, type=_text, help=argparse.SUPPRESS)
                inputs.append((dest, f.name, old))
        p.set_defaults(task_action=name, task_inputs=tuple(inputs))


def _task_args(args: argparse.Namespace) -> dict[str, str]:
    """The c3_task arguments typed, by their c3_task names; one given two ways must agree."""
    from .ground.errors import UsageError

    given: dict[str, tuple[str, str]] = {}  # c3_task argument -> (value, as typed)
    for dest, arg, typed in args.task_inputs:
        value = getattr(args, dest, None)
        if not value:
            continue
        if arg in given and given[arg][0] != value:
            raise UsageError(f"tasks {args.task_action} takes {given[arg][1]} once (got {given[arg][1]} and {typed})")
        given[arg] = (value, typed)
    return {arg: value for arg, (value, _) in given.items()}


def cmd_tasks(args: argparse.Namespace) -> int:
    import msgspec

    from .sessions.act import run_task
    from .tasks import actions, text

    action = args.task_action
    given = _task_args(args)
    project = _projects(args)[0]
    who = actions.Who(session=_env_session(), by="user")
    result = run_task(project, who, action, **given)  # a refusal is worded by _said, in --flags
    if args.json:
        _write_json(msgspec.json.format(msgspec.json.encode(result), indent=2))
    elif action in actions.READ_ACTIONS:
        lines, empty = text.shown(action, result, given)
        if lines:
            print("\n".join(lines))
        if empty:
            _err(empty)
    else:
        print(text.said(action, result, given))
    return 0


def cmd_hub(args: argparse.Namespace) -> int:
    if args.url:
        return _hub_url(args)
    from .hub.server import run_hub

    return run_hub(args.host, args.port, args.open)


def _hub_url(args: argparse.Namespace) -> int:
    """``hub --url``: the running Hubs' URLs (with their tokens), the newest first."""
    import msgspec

    from .hub.server import running_hubs

    hubs = running_hubs()
    if args.json:
        _write_json(msgspec.json.encode([h._asdict() for h in hubs]))
    for hub in hubs if not args.json else ():
        print(inert_line(hub.url))
    if not hubs:
        _err("c3async: no Hub is running; start one with `c3async hub`")
    return 0 if hubs else 1


def cmd_stats(args: argparse.Namespace) -> int:
    import msgspec

    from .status import format_table
    from .usage.account import account_projects, deleted
    from .usage.prices import current_prices
    from .usage.totals import latest, stats_rows

    projects = _projects(args)
    table = current_prices()  # a prices.json that is no price table: said before anything is read
    failed = []

    def refused(project: str, exc: Exception) -> None:  # --all: one project's failure is its own
        failed.append(project)  # said here, with the project it was (the listing goes on)
        _err(f"c3async: error: {project}: {exc}")

    results = account_projects(projects, on_error=refused if args.all else None)
    rows = []
    for r in results:  # the ledger's rows too: a session Claude Code deleted is still counted
        totals = {**latest(r.project), **r.totals}
        rows += stats_rows(r.project, totals, table, deleted(r.project, totals))
    if args.all:  # the most recently active first, whatever the project
        rows.sort(key=lambda r: r.last_ts or "", reverse=True)
    if args.json:
        _write_json(msgspec.json.encode(rows))
    elif rows:
        # format_table makes each cell inert; this is a backstop
        print(inert(format_table(rows, show_project=args.all)))
    elif projects and not failed:
        where = f"{projects[0]}'s transcripts" if not args.all else f"the transcripts of {len(projects)} projects"
        _err(f"no token usage found in {where}")
    return 1 if failed else 0


def _styled() -> bool:
    """Bold and colour only on a terminal that wants them (https://no-color.org: a NO_COLOR that
    is set and not empty turns them off, as does TERM=dumb)."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def _marked(text: str, marks: list[tuple[int, int]], tty: bool) -> str:
    """A snippet with its hits shown: bold where styling is wanted, else between « and »; each
    piece is made inert first, so a hit's marker is never inside an escape."""
    on, off = ("\033[1m", "\033[0m") if tty else ("\u00ab", "\u00bb")
    out, pos = [], 0
    for a, b in marks:
        if a < pos:
            continue
        out += [inert(text[pos:a]), on, inert(text[a:b]), off]
        pos = b
    out.append(inert(text[pos:]))
    return "".join(out)


def cmd_search(args: argparse.Namespace) -> int:
    import msgspec

    from .sessions.search import search

    projects = None if args.all else _projects(args)
    progress = Progress("indexing transcripts (MiB)")
    try:
        found = search(
            args.query,
            projects=projects,
            role=args.role,
            since=args.since,
            until=args.until,
            branch=args.branch,
            tools=args.tools,
            limit=20 if args.limit is None else args.limit,
            progress=lambda done, total: progress(done >> 20, total >> 20),
        )
    finally:
        progress.close()
    for problem in found.problems:
        _err(f"c3async: warning: {problem}")
    if found.index.updating:
        pct = f" ({100 * found.index.done_bytes // found.index.total_bytes}%)" if found.index.total_bytes else ""
        _err(f"c3async: the index is being built by another process{pct}; results cover what it has indexed")
    if args.json:
        _write_json(msgspec.json.encode(found))
        return 0
    if not found.results:
        _err(f"c3async: no session matches {inert_line(args.query)!s}")
        return 0
    tty = _styled()
    shown = len(found.results)
    more = f", showing {shown}" if found.total > shown else ""
    print(f"{found.total} session{'s' if found.total != 1 else ''} match{more} ({found.seconds:.2f} s)")
    for r in found.results:
        where = os.path.basename(r.project) or r.project
        branch = f"  {inert_line(r.branch)}" if r.branch else ""
        title = inert_line(_clip(r.title or "(untitled)", 80))
        print(f"\n{title}  [{inert_line(where)}{branch}  {r.age}  {r.hits} hit{'s' if r.hits != 1 else ''}]")
        for sn in r.snippets:
            who = sn.role + (" (sub-agent)" if sn.sidechain else "")
            print(f"  {who}: {_marked(sn.text, sn.marks, tty)}")
        if r.also_in:  # copied into forks: said here, listed once
            print(
                f"  also in its fork{'s' if len(r.also_in) > 1 else ''} {', '.join(inert_line(f[:8]) for f in r.also_in)}"
            )
        print(f"  {inert_line(r.resume)}")
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    import msgspec

    from .search import index

    progress = Progress("indexing transcripts (MiB)")
    try:
        if args.rebuild:
            done = index.rebuild(progress=None if args.quiet else lambda d, t: progress(d >> 20, t >> 20))
        else:
            done = index.update(progress=None if args.quiet else lambda d, t: progress(d >> 20, t >> 20))
    finally:
        progress.close()
    for problem in done.errors:
        _err(f"c3async: warning: {problem}")
    if done.busy:
        _err("c3async: another process is updating the index; nothing done here")
    if args.json:
        _write_json(msgspec.json.encode({**msgspec.structs.asdict(done), "size_bytes": index.size()}))
    elif not args.quiet:
        print(
            f"{done.files} transcripts; indexed {done.read} ({done.bytes_read / 2**20:.1f} MiB, "
            f"{done.passages} passages) in {done.seconds:.2f} s; index {index.size() / 2**20:.1f} MiB"
        )
    return 1 if done.errors else 0


def cmd_completion(args: argparse.Namespace) -> int:
    """The shell's completion script for ``c3async`` (argcomplete writes it: bash, zsh, fish)."""
    import argcomplete

    sys.stdout.write(argcomplete.shellcode(["c3async"], shell=args.shell))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import gc

    # The MCP SDK's import builds ~120,000 objects (its protocol types are pydantic models) and
    # leaves ~1,000 of garbage: no collection during the import, and none ever walks the modules
    # again (they live as long as the process). Measured: ~50 ms less CPU to `initialize`.
    gc.disable()
    try:
        from .server import serve
    finally:
        gc.freeze()
        gc.enable()
    return serve()


class _Parser(argparse.ArgumentParser):
    """argparse, with its own messages made inert: usage errors quote what was typed."""

    def _print_message(self, message: str, file=None) -> None:
        super()._print_message(inert(message) if message else message, file)


_P = TypeVar("_P", bound=argparse.ArgumentParser)


def _project_and_json(parser: _P, json_help: str) -> _P:
    parser.add_argument("--project", metavar="DIR", help="the project directory (default: the current one)")
    parser.add_argument("--json", action="store_true", help=json_help)
    return parser


# Shown under each command's --help: what a person types first.
_EXAMPLES = {
    "": ["c3async sessions", "c3async show 1a2b", "c3async search 'retry budget' --all", "c3async hub --open"],
    "sessions": [
        "c3async sessions --filter likely",
        "c3async sessions --all --search parser --limit 20",
        "c3async sessions --json | jq '.[0].id'",
    ],
    "show": ["c3async show 1a2b --turns 4", "c3async show --json"],
    "mark": [
        'c3async mark stale 1a2b --reason "superseded" --successor 5e6f',
        'c3async mark note --summary "parser done"',
    ],
    "mark stale": ['c3async mark stale 1a2b --reason "finished" --successor 5e6f'],
    "mark unstale": ["c3async mark unstale 1a2b"],
    "mark note": ['c3async mark note 1a2b --summary "parser done" --next "wire the CLI"'],
    "keep": ["c3async keep 1a2b", "c3async keep --expiring --all", "c3async keep --status"],
    "mark keep": ['c3async mark keep 1a2b --reason "the design discussion"'],
    "mark unkeep": ["c3async mark unkeep 1a2b"],
    "projects": ["c3async projects", "c3async projects --prune", "c3async projects --move ~/src/app ~/work/app"],
    "resume": ["c3async resume 1a2b", "c3async resume 1a2b --print", "c3async resume 1a2b -- -p 'carry on'"],
    "live": ["c3async live", "c3async live --all --json"],
    "stats": ["c3async stats", "c3async stats --all", "c3async stats --json"],
    "search": ['c3async search "retry budget"', "c3async search 'pars*' --all --role user --since 7d"],
    "index": ["c3async index", "c3async index --rebuild --quiet"],
    "serve": ["claude mcp add c3 -- $(command -v c3async) serve"],
    "hub": ["c3async hub --open", "c3async hub --url", "c3async hub --port 0"],
    "hook": [  # Claude Code runs it from the hooks install-hooks adds; by hand, to see it record
        'echo \'{"hook_event_name": "SessionStart", "session_id": "1a2b", "cwd": "\'$PWD\'"}\' | c3async hook'
    ],
    "install-hooks": ["c3async install-hooks", "c3async install-hooks --user", "c3async install-hooks --remove"],
    "completion": ["c3async completion bash > ~/.local/share/bash-completion/completions/c3async"],
}


class _ExamplesHelp(argparse.HelpFormatter):
    """argparse's help, with a text that starts "Example" kept line by line (a command line is
    never rewrapped) and every other text wrapped to the terminal as usual."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("Example"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def _add_examples(parser: argparse.ArgumentParser, name: str = "") -> None:
    """Give ``parser`` and its subcommands an Examples section (one they set themselves stays)."""
    examples = _EXAMPLES.get(name)
    if examples and parser.epilog is None:
        parser.epilog = "Examples:\n" + "\n".join(f"  {line}" for line in examples)
        parser.formatter_class = _ExamplesHelp
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child, sub in action.choices.items():
                if sub is not parser:
                    _add_examples(sub, f"{name} {child}".strip())


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; given the ``command`` about to run, only what it needs of it
    (the `tasks` actions are declared in ``tasks.schema``: imported for `tasks` alone)."""
    from .sessions.query import FILTERS

    parser = _Parser(prog="c3async", description="Find, judge and resume your Claude Code sessions.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("sessions", help="list a project's sessions, one row each, newest first")
    _project_and_json(p, "print a JSON array of rows")
    p.add_argument("--all", action="store_true", help="every project Claude Code has sessions of")
    p.add_argument(
        "--limit", type=_positive, metavar="N", help="print at most N rows (above 200, older sessions are listed too)"
    )
    p.add_argument(
        "--filter",
        choices=FILTERS,
        default="all",
        help="likely: unmarked rows with at least one hint; waiting: live and waiting for you (default: all)",
    )
    p.add_argument("--search", type=_text, metavar="TEXT", help="only rows whose title, prompts, note or id hold TEXT")
    p.set_defaults(func=cmd_sessions)

    sh = sub.add_parser("show", help="one session expanded: prompts, note, tasks, chain, last turns")
    sh.add_argument("id", nargs="?", type=_text, help="a session id or a unique prefix (default: the current session)")
    sh.add_argument(
        "--turns",
        type=_positive,
        metavar="N",
        help="then the last N prompts and replies, with the tool calls between them one line each "
        "(default: a preview of the last 8)",
    )
    _project_and_json(sh, "print the detail as JSON (with --turns: and the items, as `conversation`)")
    sh.set_defaults(func=cmd_show)

    m = sub.add_parser("mark", help="mark a session stale or unstale, or leave a note")
    msub = m.add_subparsers(dest="op", metavar="OP", required=True)
    common = _project_and_json(_Parser(add_help=False), "print the mark written, as JSON")
    st = msub.add_parser("stale", parents=[common], help="do not resume this session (needs --reason)")
    st.add_argument("id", type=_text, help="a session id or a unique prefix (4+ characters)")
    st.add_argument("--reason", type=_text, required=True, help="why: superseded, finished, abandoned...")
    st.add_argument("--successor", type=_text, metavar="ID", help="the session that took over")
    un = msub.add_parser("unstale", parents=[common], help="undo a stale mark")
    un.add_argument("id", type=_text, help="a session id or a unique prefix (4+ characters)")
    un.add_argument("--reason", type=_text, help="why (optional)")
    no = msub.add_parser("note", parents=[common], help="leave a note on a session")
    no.add_argument("id", nargs="?", type=_text, help="a session id or prefix (default: the current session)")
    no.add_argument("--summary", type=_text, help="what was done")
    no.add_argument("--next", type=_text, metavar="STEPS", help="what comes next")
    ke = msub.add_parser("keep", parents=[common], help="keep past Claude Code's cleanup (preserved in the archive)")
    ke.add_argument("id", type=_text, help="a session id or a unique prefix (4+ characters)")
    ke.add_argument("--reason", type=_text, help="why (optional)")
    uk = msub.add_parser("unkeep", parents=[common], help="release a kept session (its archive entry is removed)")
    uk.add_argument("id", type=_text, help="a session id or a unique prefix (4+ characters)")
    uk.add_argument("--reason", type=_text, help="why (optional)")
    uk.add_argument(
        "--release", action="store_true", help="also when Claude Code deleted the transcript (deletes the only copy)"
    )
    m.set_defaults(func=cmd_mark)

    pj = sub.add_parser(
        "projects",
        help="every project (what the Hub and --all list): sessions, last activity, missing, moved?",
    )
    pj.add_argument("--forget", nargs="+", metavar="DIR", type=_text, help="take these projects out of the registry")
    pj.add_argument("--prune", action="store_true", help="take out every project whose folder is gone")
    pj.add_argument(
        "--move",
        nargs=2,
        metavar=("OLD", "NEW"),
        type=_text,
        help="a folder moved or renamed: OLD's sessions become NEW's, resumable there (--move NEW OLD undoes it)",
    )
    pj.add_argument("--json", action="store_true", help="print JSON")
    pj.set_defaults(func=cmd_projects)

    kp = sub.add_parser(
        "keep",
        help="keep sessions past Claude Code's cleanup: ID (as `mark keep ID`), --expiring, or --status",
    )
    kp.add_argument("id", nargs="?", type=_text, help="keep this session (as `mark keep ID`)")
    kp.add_argument(
        "--expiring",
        action="store_true",
        help="keep every session Claude Code deletes within 7 days (a keep mark each; one a person unkept stays)",
    )
    kp.add_argument("--all", action="store_true", help="with --expiring: every project")
    kp.add_argument("--status", action="store_true", help="what the archive holds and how much only it holds")
    _project_and_json(kp, "print JSON")
    kp.set_defaults(func=cmd_keep)

    rs = sub.add_parser(
        "resume",
        help="resume a session in its folder (putting back a transcript Claude Code deleted); "
        "arguments after -- go to claude (e.g. -- -p TEXT)",
    )
    rs.add_argument("id", type=_text, help="a session id or a unique prefix (4+ characters)")
    rs.add_argument("--print", action="store_true", help="print the command instead of running it")
    rs.add_argument("--project", metavar="DIR", help="the project directory (default: the current one)")
    rs.set_defaults(func=cmd_resume)

    _task_parsers(sub, actions_too=command in (None, "tasks"))

    lv = sub.add_parser(
        "live",
        help="the live sessions (busy, idle or waiting for you), waiting first",
        description="The sessions running now, waiting for you first (the longest waiting first).",
    )
    _project_and_json(lv, "print JSON")
    lv.add_argument("--all", action="store_true", help="every project, and wherever a claude runs now")
    lv.set_defaults(func=cmd_live)

    st = sub.add_parser("stats", help="tokens and cost per host session (brings .c3/session_stats.jsonl up to date)")
    _project_and_json(st, "print a JSON array of rows (id, project, tokens, cost_usd, unpriced_models...)")
    st.add_argument("--all", action="store_true", help="every project, read in one pass")
    st.set_defaults(func=cmd_stats)

    se = sub.add_parser("search", help="full-text search of what was said in every session (indexed as needed)")
    se.add_argument("query", type=_text, help='words, "exact phrases", prefix*, AND / OR / NOT / -word, ( )')
    _project_and_json(se, "print JSON: results with snippets and the index's state")
    se.add_argument("--all", action="store_true", help="every project (default: this project and its worktrees)")
    se.add_argument("--role", choices=("user", "assistant", "tool"), help="only what this side said")
    se.add_argument("--since", type=_text, metavar="WHEN", help="only passages since: 7d, 12h, 2w, or a date")
    se.add_argument("--until", type=_text, metavar="WHEN", help="only passages before: 7d, 12h, 2w, or a date")
    se.add_argument("--branch", type=_text, metavar="NAME", help="only passages written on this git branch")
    se.add_argument("--tools", action="store_true", help="also search tool calls' input and output")
    se.add_argument("--limit", type=_positive, metavar="N", help="at most N sessions (default 20, at most 200)")
    se.set_defaults(func=cmd_search)

    ix = sub.add_parser("index", help="bring the full-text search index up to date (search does this too)")
    ix.add_argument("--json", action="store_true", help="print what was done as JSON")
    ix.add_argument("--rebuild", action="store_true", help="drop the index and build it again")
    ix.add_argument("--quiet", action="store_true", help="no progress and no summary")
    ix.set_defaults(func=cmd_index)

    sv = sub.add_parser("serve", help="run the MCP server over stdio (for `claude mcp add c3 -- c3async serve`)")
    sv.set_defaults(func=cmd_serve)

    hb = sub.add_parser("hub", help="the local web Hub: every session of every project")
    hb.add_argument("--port", type=_port, default=8765, help="port on 127.0.0.1 (default 8765; 0 picks a free one)")
    hb.add_argument("--host", type=_text, default="127.0.0.1", help="a loopback address; anything else is refused")
    hb.add_argument("--open", action="store_true", help="open the page in a browser")
    hb.add_argument(
        "--url", action="store_true", help="print the running Hub's URL (and token) instead of starting one"
    )
    hb.add_argument("--json", action="store_true", help="with --url: print the running Hubs as JSON")
    hb.set_defaults(func=cmd_hub)

    co = sub.add_parser(
        "completion",
        help="print the shell completion script (bash, zsh or fish)",
        description="Print the script that makes your shell complete c3async's commands and options. "
        "bash: save it as ~/.local/share/bash-completion/completions/c3async; zsh: as _c3async in a "
        'folder of $fpath (or `eval "$(c3async completion zsh)"` in ~/.zshrc); fish: as '
        "~/.config/fish/completions/c3async.fish.",
    )
    co.add_argument("shell", choices=("bash", "zsh", "fish"), help="your shell")
    co.set_defaults(func=cmd_completion)

    hk = sub.add_parser("hook", help="(for Claude Code) record a hook event read from stdin")
    hk.set_defaults(func=cmd_hook)

    ih = sub.add_parser("install-hooks", help="add the SessionStart/SessionEnd hooks to Claude Code's settings")
    ih.add_argument("--remove", action="store_true", help="take out the hooks install-hooks added (nothing else)")
    where = ih.add_mutually_exclusive_group()
    where.add_argument("--project", metavar="DIR", help="this project's .claude/settings.local.json (default)")
    where.add_argument("--user", action="store_true", help="your user settings (every project)")
    ih.set_defaults(func=cmd_install_hooks)
    _add_examples(parser)
    return parser


def _shown(text: str) -> str:
    """What the user typed, quoted for a message: repr (controls escaped), at most 40 characters."""
    return repr(_clip(text, 40))


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:  # also more than 4,300 digits
        raise argparse.ArgumentTypeError(f"expected a whole number, got {_shown(text)}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {_shown(text)}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535 (0 picks a free one), got {_clip(str(value), 40)}")
    return value


def _not_utf8(text: str) -> tuple[int, str] | None:
    """Where ``text`` stops being UTF-8: (character index, the byte or code point shown), or None.

    Bytes of argv (and the environment) that are not UTF-8 arrive as lone surrogates
    (``surrogateescape``); no JSON file can hold them and msgspec refuses to encode them."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        cp = ord(text[exc.start])
        return exc.start, (f"byte 0x{cp - 0xDC00:02x}" if 0xDC80 <= cp <= 0xDCFF else f"U+{cp:04X}")
    return None


def _text(text: str) -> str:
    """A free-text option (stored in marks, tasks and logs, or matched against them): refused,
    naming the option, if it is not UTF-8; argparse then exits 2."""
    bad = _not_utf8(text)
    if bad is not None:
        raise argparse.ArgumentTypeError(f"is not UTF-8 text ({bad[1]} at character {bad[0] + 1}): give it in UTF-8")
    return text


class _InertFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return inert(super().format(record))


def _safe_streams() -> None:
    """Never die of UnicodeEncodeError: an ASCII or Latin-1 stdout (LANG=C, PYTHONIOENCODING)
    gets ``\\u`` escapes for what it cannot show."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # pragma: no cover - a closed or exotic stream
                pass


def _version() -> str:
    from . import __version__

    return __version__


OWN_SIGNALS = ("serve", "hub")  # commands that handle SIGINT and SIGTERM themselves


def run(argv: list[str] | None = None) -> int:
    """The command line (``c3async.__main__`` has installed ``stop`` first)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] in [[c] for c in OWN_SIGNALS]:
        from .ground import stop

        stop.uninstall()
    return _main(argv)


def main(argv: list[str] | None = None) -> int:
    """For a caller that imports this module first: ``stop`` is installed here, then the command runs."""
    from .ground import stop

    stop.install()
    try:
        return run(argv)
    except BaseException as exc:
        code = stop.code_of(exc)
        if code is None:
            raise
        stop.exit_now(code)
    return 1  # not reached


def _main(argv: list[str]) -> int:
    _safe_streams()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_InertFormatter("c3async: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    completing = "_ARGCOMPLETE" in os.environ
    parser = build_parser(None if completing or not argv else argv[0])
    if completing:  # the shell asks for completions (see `c3async completion`)
        import argcomplete

        argcomplete.autocomplete(parser)
    passed: list[str] = []
    if argv[:1] == ["resume"] and "--" in argv:  # what follows -- is claude's, whatever precedes it
        cut = argv.index("--")
        argv, passed = argv[:cut], argv[cut + 1 :]
    args = parser.parse_args(argv)
    if args.command == "resume":
        args.claude_args = passed
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return args.func(args)
    except BrokenPipeError:
        # `c3async sessions | head`: the reader left; not an error worth a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        from .ground import stop

        code = stop.signalled()
        if code is not None:  # an error the interruption itself caused (a SQLite call cut short)
            return code
        if isinstance(exc, (C3Error, OSError)):
            return _said(exc)
        raise


# The exit status of each kind of error (ground/errors.py): 2 for a call that cannot run as
# written, as argparse's own usage errors; 1 for every refusal of what was asked.
EXIT = {
    Kind.USAGE: 2,
    Kind.BAD_ARGUMENT: 1,
    Kind.NOT_FOUND: 1,
    Kind.AMBIGUOUS: 1,
    Kind.CONFLICT: 1,
    Kind.REFUSED: 1,
    Kind.UNAVAILABLE: 1,
    Kind.DAMAGED: 1,
    Kind.DISK_FULL: 1,
}


def _said(exc: C3Error | OSError) -> int:
    """The CLI's one translation of an error: its message on stderr (a task error in the CLI's
    words), and its kind's exit status; an OSError not ours (EACCES on a file) exits 1, a full
    disk that no writer named is said as one (``disk.said``)."""
    from .ground.disk import said

    told = said(exc)
    _err(f"c3async: error: {told.worded(_TaskWords()) if isinstance(told, TaskError) else told}")
    return EXIT[told.kind] if isinstance(told, C3Error) else 1
