"""The command line's grammar: one argparse tree (:func:`build_parser`), the types of what is
typed (a whole number, a port, UTF-8 text), each command's examples, and :func:`parse`, which
reads a command line into the args a command takes (``args.func`` is the command).

Text options the user types are refused (exit 2, naming the option) if they hold bytes that
are not UTF-8. argparse's own messages (usage errors quote what was typed) are made inert.
"""

from __future__ import annotations

import argparse
import sys
from typing import TypeVar

from ..ground.term import inert
from ..usage import BY as USAGE_BY
from .typed import port, positive, text_arg


class Parser(argparse.ArgumentParser):
    """argparse, with its own messages made inert: usage errors quote what was typed."""

    def _print_message(self, message: str, file=None) -> None:
        super()._print_message(inert(message) if message else message, file)


_P = TypeVar("_P", bound=argparse.ArgumentParser)


def project_and_json(parser: _P, json_help: str) -> _P:
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
    "export": ["c3async export 1a2b > session.md", "c3async export 1a2b --html -o session.html"],
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
    "mark tag": ["c3async mark tag 1a2b auth release-2.1", "c3async sessions --tag auth"],
    "mark untag": ["c3async mark untag 1a2b auth"],
    "projects": ["c3async projects", "c3async projects --prune", "c3async projects --move ~/src/app ~/work/app"],
    "resume": [
        "c3async resume 1a2b",
        "c3async resume 1a2b --print",
        "c3async resume 1a2b --tmux",
        "c3async resume 1a2b -- -p 'carry on'",
    ],
    "reopen": ["c3async reopen --print", "c3async reopen --since 1d", "c3async reopen --json"],
    "live": ["c3async live", "c3async live --all --json", "c3async live --all --watch --notify"],
    "stats": ["c3async stats", "c3async stats --all", "c3async stats --json"],
    "usage": [
        "c3async usage",
        "c3async usage --by window --since 7d --all",
        "c3async usage --by model --since today",
        "c3async usage --by month --all --json",
        "c3async usage --burn",
    ],
    "search": ['c3async search "retry budget"', "c3async search 'pars*' --all --role user --since 7d"],
    "files": ["c3async files src/parser.py", "c3async files src/ --json", "c3async files ~/notes/plan.md"],
    "index": ["c3async index", "c3async index --rebuild --quiet"],
    "serve": ["claude mcp add c3 -- $(command -v c3async) serve"],
    "hub": ["c3async hub --open", "c3async hub --url", "c3async hub --port 0"],
    "hook": [  # Claude Code runs it from the hooks install-hooks adds; by hand, to see it record
        'echo \'{"hook_event_name": "SessionStart", "session_id": "1a2b", "cwd": "\'$PWD\'"}\' | c3async hook'
    ],
    "install-hooks": ["c3async install-hooks", "c3async install-hooks --user", "c3async install-hooks --remove"],
    "statusline": ['echo \'{"session_id": "1a2b"}\' | c3async statusline'],
    "install-statusline": ["c3async install-statusline", "c3async install-statusline --remove"],
    "completion": ["c3async completion bash > ~/.local/share/bash-completion/completions/c3async"],
}


class ExamplesHelp(argparse.HelpFormatter):
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
        parser.formatter_class = ExamplesHelp
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child, sub in action.choices.items():
                if sub is not parser:
                    _add_examples(sub, f"{name} {child}".strip())


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; given the ``command`` about to run, only what it needs of it
    (the `tasks` actions are declared in ``tasks.schema``: imported for `tasks` alone)."""
    from ..sessions.query import FILTERS
    from . import commands, reports, services

    parser = Parser(prog="c3async", description="Find, judge and resume your Claude Code sessions.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("sessions", help="list a project's sessions, one row each, newest first")
    project_and_json(p, "print a JSON array of rows")
    p.add_argument("--all", action="store_true", help="every project Claude Code has sessions of")
    p.add_argument(
        "--limit", type=positive, metavar="N", help="print at most N rows (above 200, older sessions are listed too)"
    )
    p.add_argument(
        "--filter",
        choices=FILTERS,
        default="all",
        help="likely: unmarked rows with at least one hint; waiting: live and waiting for you (default: all)",
    )
    p.add_argument(
        "--search", type=text_arg, metavar="TEXT", help="only rows whose title, prompts, note, tags or id hold TEXT"
    )
    p.add_argument("--tag", type=text_arg, metavar="WORD", help="only sessions tagged WORD (`mark tag ID WORD`)")
    p.set_defaults(func=commands.cmd_sessions)

    sh = sub.add_parser("show", help="one session expanded: prompts, note, tasks, chain, last turns")
    sh.add_argument(
        "id", nargs="?", type=text_arg, help="a session id or a unique prefix (default: the current session)"
    )
    sh.add_argument(
        "--turns",
        type=positive,
        metavar="N",
        help="then the last N prompts and replies, with the tool calls between them one line each "
        "(default: a preview of the last 8)",
    )
    project_and_json(sh, "print the detail as JSON (with --turns: and the items, as `conversation`)")
    sh.set_defaults(func=commands.cmd_show)

    ex = sub.add_parser(
        "export",
        help="one session's whole conversation as Markdown or one HTML page (the note and chain on top)",
        description="The session's conversation, prompts and answers with the tool calls folded in (each with its "
        "result) and its sub-agents nested, and on top its title, note and chain. Transcript text stays text: "
        "nothing in it becomes markup, a link or a script. Streamed: a transcript of any size takes the same memory.",
    )
    ex.add_argument(
        "id", nargs="?", type=text_arg, help="a session id or a unique prefix (default: the current session)"
    )
    fmt = ex.add_mutually_exclusive_group()
    fmt.add_argument("--md", dest="format", action="store_const", const="md", help="Markdown (the default)")
    fmt.add_argument("--html", dest="format", action="store_const", const="html", help="one self-contained HTML page")
    ex.add_argument(
        "-o", "--output", type=text_arg, metavar="FILE", help="write FILE (private, 0600) instead of standard output"
    )
    ex.add_argument("--force", action="store_true", help="with -o: replace FILE if it exists (a regular file only)")
    ex.add_argument("--project", metavar="DIR", help="the project directory (default: the current one)")
    ex.set_defaults(func=commands.cmd_export, format="md")

    m = sub.add_parser("mark", help="mark a session stale or unstale, leave a note, tag it")
    msub = m.add_subparsers(dest="op", metavar="OP", required=True)
    common = project_and_json(Parser(add_help=False), "print the mark written, as JSON")
    st = msub.add_parser("stale", parents=[common], help="do not resume this session (needs --reason)")
    st.add_argument("id", type=text_arg, help="a session id or a unique prefix (4+ characters)")
    st.add_argument("--reason", type=text_arg, required=True, help="why: superseded, finished, abandoned...")
    st.add_argument("--successor", type=text_arg, metavar="ID", help="the session that took over")
    un = msub.add_parser("unstale", parents=[common], help="undo a stale mark")
    un.add_argument("id", type=text_arg, help="a session id or a unique prefix (4+ characters)")
    un.add_argument("--reason", type=text_arg, help="why (optional)")
    no = msub.add_parser("note", parents=[common], help="leave a note on a session")
    no.add_argument("id", nargs="?", type=text_arg, help="a session id or prefix (default: the current session)")
    no.add_argument("--summary", type=text_arg, help="what was done")
    no.add_argument("--next", type=text_arg, metavar="STEPS", help="what comes next")
    ke = msub.add_parser("keep", parents=[common], help="keep past Claude Code's cleanup (preserved in the archive)")
    ke.add_argument("id", type=text_arg, help="a session id or a unique prefix (4+ characters)")
    ke.add_argument("--reason", type=text_arg, help="why (optional)")
    uk = msub.add_parser("unkeep", parents=[common], help="release a kept session (its archive entry is removed)")
    uk.add_argument("id", type=text_arg, help="a session id or a unique prefix (4+ characters)")
    uk.add_argument("--reason", type=text_arg, help="why (optional)")
    uk.add_argument(
        "--release", action="store_true", help="also when Claude Code deleted the transcript (deletes the only copy)"
    )
    for op, what in (("tag", "tag a session with words of yours"), ("untag", "take tags off a session")):
        tg = msub.add_parser(op, parents=[common], help=what)
        tg.add_argument("id", type=text_arg, help="a session id or a unique prefix (4+ characters)")
        tg.add_argument(
            "words", nargs="+", type=text_arg, metavar="WORD", help="letters, digits and _ . + - (at most 40 each)"
        )
    m.set_defaults(func=commands.cmd_mark)

    pj = sub.add_parser(
        "projects",
        help="every project (what the Hub and --all list): sessions, last activity, missing, moved?",
    )
    pj.add_argument("--forget", nargs="+", metavar="DIR", type=text_arg, help="take these projects out of the registry")
    pj.add_argument("--prune", action="store_true", help="take out every project whose folder is gone")
    pj.add_argument(
        "--move",
        nargs=2,
        metavar=("OLD", "NEW"),
        type=text_arg,
        help="a folder moved or renamed: OLD's sessions become NEW's, resumable there (--move NEW OLD undoes it)",
    )
    pj.add_argument("--json", action="store_true", help="print JSON")
    pj.set_defaults(func=commands.cmd_projects)

    kp = sub.add_parser(
        "keep",
        help="keep sessions past Claude Code's cleanup: ID (as `mark keep ID`), --expiring, or --status",
    )
    kp.add_argument("id", nargs="?", type=text_arg, help="keep this session (as `mark keep ID`)")
    kp.add_argument(
        "--expiring",
        action="store_true",
        help="keep every session Claude Code deletes within 7 days (a keep mark each; one a person unkept stays)",
    )
    kp.add_argument("--all", action="store_true", help="with --expiring: every project")
    kp.add_argument("--status", action="store_true", help="what the archive holds and how much only it holds")
    project_and_json(kp, "print JSON")
    kp.set_defaults(func=commands.cmd_keep)

    rs = sub.add_parser(
        "resume",
        help="resume a session in its folder (putting back a transcript Claude Code deleted); "
        "arguments after -- go to claude (e.g. -- -p TEXT)",
    )
    rs.add_argument("id", type=text_arg, help="a session id or a unique prefix (4+ characters)")
    rs.add_argument("--print", action="store_true", help="print the command instead of running it")
    rs.add_argument(
        "--tmux", action="store_true", help="open it in a new tmux window, in its folder (inside tmux only)"
    )
    rs.add_argument("--project", metavar="DIR", help="the project directory (default: the current one)")
    rs.set_defaults(func=commands.cmd_resume)

    ro = sub.add_parser(
        "reopen",
        help="the sessions that were live when the machine or their claude went down, started again: "
        "one tmux window each inside tmux, else their resume commands, one a line (never one running now)",
    )
    ro.add_argument("--since", type=text_arg, metavar="WHEN", help="only those live since: 12h, 1d, today, or a date")
    ro.add_argument("--print", action="store_true", help="list them and print their commands; start nothing")
    ro.add_argument("--json", action="store_true", help="print a JSON array (id, why, seen, by, cwd, command, problem)")
    ro.set_defaults(func=commands.cmd_reopen)

    _task_parsers(sub, actions_too=command in (None, "tasks"))

    lv = sub.add_parser(
        "live",
        help="the live sessions (busy, idle or waiting for you), waiting first",
        description="The sessions running now, waiting for you first (the longest waiting first).",
    )
    project_and_json(lv, "print JSON")
    lv.add_argument("--all", action="store_true", help="every project, and wherever a claude runs now")
    lv.add_argument(
        "--watch",
        action="store_true",
        help="keep the view current until Ctrl-C, ringing the bell when a session starts waiting "
        "(not on a terminal: each change a line)",
    )
    lv.add_argument(
        "--notify", action="store_true", help="with --watch: a desktop notification too (notify-send or osascript)"
    )
    lv.set_defaults(func=commands.cmd_live)

    us = sub.add_parser(
        "usage",
        help="tokens, cost and responses by day, week, month, 5-hour window, model, project or session",
        description="Tokens, cost and responses, brought up to date from the transcripts (only what was added "
        "since is read), summed by day (the default), week, month, 5-hour window, model, project or session. "
        "Days, weeks and months are local time; daily and monthly totals are ccusage's. Weeks and 5-hour "
        "windows are the ones Claude Code reported where `c3async statusline` recorded them, else calendar "
        "weeks and ccusage's 5-hour rule (the RULE column says which). What a session Claude Code deleted "
        "spent stays counted. --burn shows the current windows instead: who spends them and how fast now, "
        "the runway and the usage-limit refusals.",
    )
    project_and_json(
        us, "print a JSON array of rows (by, bucket, start, end, rule, tokens, cost_usd, unpriced_models...)"
    )
    us.add_argument(
        "--since",
        type=text_arg,
        metavar="WHEN",
        help="only usage since: 5h, today, 7d, 30d, 2w, or a date (local midnight); default: all of it",
    )
    us.add_argument("--by", choices=USAGE_BY, default="day", help="what to sum by (default: day)")
    us.add_argument("--all", action="store_true", help="every project, read in one pass")
    us.add_argument(
        "--burn",
        action="store_true",
        help="the current 5-hour and weekly windows: each session's and project's share and rate now (live "
        "first), when the binding window reaches 100%% at this pace, and the usage-limit refusals recorded "
        "(every project's part: the windows are the account's; --by and --since do not apply)",
    )
    us.set_defaults(func=reports.cmd_usage)

    st = sub.add_parser(
        "stats",
        help="tokens and cost per host session: the same as `usage --by session` (kept for scripts)",
    )
    project_and_json(st, "print a JSON array of rows (id, project, tokens, cost_usd, unpriced_models...)")
    st.add_argument("--all", action="store_true", help="every project, read in one pass")
    st.set_defaults(func=reports.cmd_usage, by="session", since=None, burn=False)

    se = sub.add_parser("search", help="full-text search of what was said in every session (indexed as needed)")
    se.add_argument("query", type=text_arg, help='words, "exact phrases", prefix*, AND / OR / NOT / -word, ( )')
    project_and_json(se, "print JSON: results with snippets and the index's state")
    se.add_argument("--all", action="store_true", help="every project (default: this project and its worktrees)")
    se.add_argument("--role", choices=("user", "assistant", "tool"), help="only what this side said")
    se.add_argument("--since", type=text_arg, metavar="WHEN", help="only passages since: 7d, 12h, 2w, or a date")
    se.add_argument("--until", type=text_arg, metavar="WHEN", help="only passages before: 7d, 12h, 2w, or a date")
    se.add_argument("--branch", type=text_arg, metavar="NAME", help="only passages written on this git branch")
    se.add_argument("--tools", action="store_true", help="also search tool calls' input and output")
    se.add_argument("--tag", type=text_arg, metavar="WORD", help="only sessions tagged WORD")
    se.add_argument("--limit", type=positive, metavar="N", help="at most N sessions (default 20, at most 200)")
    se.set_defaults(func=reports.cmd_search)

    fi = sub.add_parser(
        "files",
        help="the sessions that created, edited or wrote a file (or anything in a folder), newest first",
        description="The sessions whose Write, Edit, MultiEdit or NotebookEdit calls named PATH (a file, or "
        "anything under a folder), in every project, newest change first: when, how often, with which tools. "
        "Read from the search index (brought up to date first).",
    )
    fi.add_argument("path", type=text_arg, metavar="PATH", help="a file or a folder: relative to here, or absolute")
    project_and_json(fi, "print JSON: the paths asked, and each session with its changes")
    fi.add_argument("--limit", type=positive, metavar="N", help="at most N sessions (default 50, at most 500)")
    fi.set_defaults(func=reports.cmd_files)

    ix = sub.add_parser("index", help="bring the full-text search index up to date (search does this too)")
    ix.add_argument("--json", action="store_true", help="print what was done as JSON")
    ix.add_argument("--rebuild", action="store_true", help="drop the index and build it again")
    ix.add_argument("--quiet", action="store_true", help="no progress and no summary")
    ix.set_defaults(func=reports.cmd_index)

    sv = sub.add_parser("serve", help="run the MCP server over stdio (for `claude mcp add c3 -- c3async serve`)")
    sv.set_defaults(func=services.cmd_serve)

    hb = sub.add_parser("hub", help="the local web Hub: every session of every project")
    hb.add_argument("--port", type=port, default=8765, help="port on 127.0.0.1 (default 8765; 0 picks a free one)")
    hb.add_argument("--host", type=text_arg, default="127.0.0.1", help="a loopback address; anything else is refused")
    hb.add_argument("--open", action="store_true", help="open the page in a browser")
    hb.add_argument(
        "--url", action="store_true", help="print the running Hub's URL (and token) instead of starting one"
    )
    hb.add_argument("--json", action="store_true", help="with --url: print the running Hubs as JSON")
    hb.set_defaults(func=services.cmd_hub)

    co = sub.add_parser(
        "completion",
        help="print the shell completion script (bash, zsh or fish)",
        description="Print the script that makes your shell complete c3async's commands and options. "
        "bash: save it as ~/.local/share/bash-completion/completions/c3async; zsh: as _c3async in a "
        'folder of $fpath (or `eval "$(c3async completion zsh)"` in ~/.zshrc); fish: as '
        "~/.config/fish/completions/c3async.fish.",
    )
    co.add_argument("shell", choices=("bash", "zsh", "fish"), help="your shell")
    co.set_defaults(func=services.cmd_completion)

    hk = sub.add_parser("hook", help="(for Claude Code) record a hook event read from stdin")
    hk.set_defaults(func=services.cmd_hook)

    ih = sub.add_parser("install-hooks", help="add the SessionStart/SessionEnd hooks to Claude Code's settings")
    ih.add_argument("--remove", action="store_true", help="take out the hooks install-hooks added (nothing else)")
    where = ih.add_mutually_exclusive_group()
    where.add_argument("--project", metavar="DIR", help="this project's .claude/settings.local.json (default)")
    where.add_argument("--user", action="store_true", help="your user settings (every project)")
    ih.set_defaults(func=services.cmd_install_hooks)
    statusline_parsers(sub)
    _add_examples(parser)
    return parser


def _task_parsers(sub, actions_too: bool = True) -> None:
    """`tasks` and one subparser per action, each with only what the action takes: its
    arguments, flags and help come from the action's struct (``tasks.schema``). `tasks` alone
    is `tasks list`. ``actions_too=False``: `tasks` alone, for a command line that runs another
    command (the actions' declarations are then not imported)."""
    from . import tasks

    tk = sub.add_parser(
        "tasks",
        help="durable tasks, milestones and decisions (the c3_task actions)",
        description="Durable tasks, milestones and decisions of the project (.c3/pm/pm.json), the ones\n"
        "the c3_task MCP tool keeps. Without an action: list. `c3async tasks ACTION --help` says\n"
        "what an action takes.",
        epilog='Examples:\n  c3async tasks\n  c3async tasks add --title "ship it"\n  c3async tasks update 1a2b --status done',
        formatter_class=ExamplesHelp,
    )
    project_and_json(tk, "print JSON (what c3_task returns)")
    tk.set_defaults(func=tasks.cmd_tasks, task_action="list", task_inputs=())
    if not actions_too:
        return
    from ..ground.schema import fields, helped, name_of
    from ..tasks.schema import ACTION_TYPES

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
            formatter_class=ExamplesHelp,
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
                p.add_argument(f"arg_{f.name}", metavar=metavar, nargs="?", type=text_arg, help=helped(f))
                inputs.append((f"arg_{f.name}", f.name, metavar))
            elif f.param.spelled(f.name):
                flags = f.param.spelled(f.name)
                p.add_argument(*flags, dest=f"arg_{f.name}", metavar=metavar, type=text_arg, help=helped(f))
                inputs.append((f"arg_{f.name}", f.name, flags[0]))
            for old in f.param.old_flags:  # earlier versions' spellings: accepted, not shown
                dest = "old_" + old.lstrip("-").replace("-", "_")
                p.add_argument(old, dest=dest, type=text_arg, help=argparse.SUPPRESS)
                inputs.append((dest, f.name, old))
        p.set_defaults(task_action=name, task_inputs=tuple(inputs))


def statusline_parsers(sub, alone: bool = False) -> None:
    """`statusline` and `install-statusline` (``alone``: the first only, when it is the command
    run: every window runs it after each response, and it pays for no other command's parser)."""
    from . import services

    sl = sub.add_parser(
        "statusline",
        help="(for Claude Code) the status line: your note, who waits for you, the rate limits",
        description="Claude Code's status-line command: reads its JSON on stdin, records the rate limits it "
        "reports in $C3_HOME/usage/rate_limits.jsonl, prints one line. Set it with install-statusline.",
    )
    sl.add_argument("--then", metavar="CMD", help="a status-line command of yours to run first, on the same input")
    sl.add_argument(
        "--refresh-added",
        action="store_true",
        help="(written by install-statusline) refreshInterval was set by it: --remove takes it out",
    )
    sl.set_defaults(func=services.cmd_statusline)
    if alone:
        return
    ins = sub.add_parser(
        "install-statusline",
        help="set c3async's status line in Claude Code's settings (keeping yours, shown first)",
    )
    ins.add_argument("--remove", action="store_true", help="put back the status line that was there before")
    where = ins.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="your user settings, every project (default)")
    where.add_argument("--project", metavar="DIR", help="this project's .claude/settings.local.json")
    ins.set_defaults(func=services.cmd_install_statusline)


def statusline_args(argv: list[str]) -> argparse.Namespace:
    parser = Parser(prog="c3async")
    statusline_parsers(parser.add_subparsers(dest="command", metavar="COMMAND"), alone=True)
    return parser.parse_args(argv)


def version() -> str:
    from .. import __version__

    return __version__


def parse(argv: list[str]) -> argparse.Namespace:
    """``argv`` read into the command's args (argparse's usage errors exit 2, ``--help`` 0, as
    SystemExit); ``resume``'s arguments after ``--`` are claude's, as ``args.claude_args``."""
    import os

    completing = "_ARGCOMPLETE" in os.environ
    if argv[:1] == ["statusline"] and not completing:
        return statusline_args(argv)
    parser = build_parser(None if completing or not argv else argv[0])
    if completing:  # the shell asks for completions (see `c3async completion`): it ends the process
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
        raise SystemExit(2)
    return args
