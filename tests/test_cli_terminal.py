"""Text is inert on a terminal (issue 12, deliverable 4) and the CLI's argv faults (deliverable 8).

``c3async.ground.term.inert`` over a corpus of hostile strings; then the real CLI, as a subprocess, on
transcripts, marks, tasks, heartbeats and paths that hold the same strings: no control, escape
sequence or bidi control reaches stdout or stderr, while ``--json`` still gives back the exact
text. Then the argv faults: bytes that are not UTF-8 in a text option, ports out of range, huge
numbers, and a stdout that cannot encode everything, each a clear message and no traceback.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from c3async.cli.render import InertFormatter as _InertFormatter
from c3async.ground.project import resolve
from c3async.ground.term import inert, inert_line, json_inert
from c3async.stores import activity
from c3async.tasks import actions, store
from stress.transcripts import Conversation, simple_session, write_session

# --- the corpus --------------------------------------------------------------------------------

HOSTILE = {
    "osc52_clipboard": "\x1b]52;c;ZWNobyBwd25lZA==\x07",
    "osc52_st": "\x1b]52;c;ZWNobyBwd25lZA==\x1b\\",
    "osc0_title": "\x1b]0;you have been owned\x07",
    "osc8_link": "\x1b]8;;https://evil.example/\x1b\\click me\x1b]8;;\x1b\\",
    "csi_clear": "\x1b[2J\x1b[3J\x1b[H",
    "csi_colour": "\x1b[31;1mred\x1b[0m",
    "csi_hide": "\x1b[8mhidden\x1b[28m",
    "c1_csi": "\x9b2J",
    "c1_osc": "\x9d0;title\x9c",
    "dcs": "\x1bPq#0;2;0;0;0\x1b\\",
    "apc_pm_sos": "\x1b_Gf=24;AAAA\x1b\\\x1b^pm\x1b\\\x1bXsos\x1b\\",
    "bidi_override": "safe\u202etxt.exe\u202c",
    "bidi_isolates": "\u2066a\u2069\u2067b\u2069\u2068c\u2069\u202a\u202b\u202d",
    "bidi_marks": "x\u200ey\u200fz\u061c",
    "nul": "be\x00fore",
    "del": "a\x7fb",
    "bel_backspace": "rm -rf /\x08\x08\x08\x08\x08\x08\x08\x08ls\x07",
    "cr_overwrite": "innocent\rEVIL COMMAND",
    "vt_ff": "a\x0bb\x0cc",
    "lone_surrogate": "bad\udcffbyte\ud800",
    "invisible": "pass\u200bword\u2060\ufeff\U000e0041\U000e0042\u00ad",
    "separators": "line\u2028para\u2029end",
    "mix": "\x1b]0;t\x07\u202e\x00\x9b31m\x1b[31m\r\udcfe\x7f\x1b",
}
BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
HIDDEN = BIDI | set("\u200b\u2060\ufeff\u00ad\u2028\u2029") | {chr(c) for c in range(0xE0000, 0xE0080)}
ORDINARY = "修复登录 ✨🎉 café naïve Ελληνικά עברית العربية 👨\u200d👩\u200d👧 ZWNJ\u200cok \t"


def assert_inert(text: str, *, newlines: bool) -> None:
    for i, ch in enumerate(text):
        cp = ord(ch)
        where = f"{ch!r} at {i} in {text!r}"
        assert cp >= 0x20 or (newlines and ch == "\n"), where
        assert not 0x7F <= cp <= 0x9F, where
        assert not 0xD800 <= cp <= 0xDFFF, where
        assert ch not in HIDDEN, where


# --- inert, inert_line, json_inert ---------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_inert_leaves_no_control_escape_or_bidi(name):
    text = HOSTILE[name]
    assert_inert(inert(text), newlines=True)
    assert_inert(inert_line(text), newlines=False)
    assert_inert(inert(text + "\n" + text), newlines=True)


def test_escape_sequences_are_shown_not_dropped():
    # The introducer is shown as Python's repr shows it; the rest of the sequence stays visible.
    assert inert(HOSTILE["osc52_clipboard"]) == "\\x1b]52;c;ZWNobyBwd25lZA==\\x07"
    assert inert(HOSTILE["osc8_link"]) == "\\x1b]8;;https://evil.example/\\x1b\\click me\\x1b]8;;\\x1b\\"
    assert inert(HOSTILE["c1_csi"]) == "\\x9b2J"
    assert inert(HOSTILE["bidi_override"]) == "safe\\u202etxt.exe\\u202c"
    assert inert(HOSTILE["cr_overwrite"]) == "innocent\\rEVIL COMMAND"
    assert inert("tag\U000e0041") == "tag\\U000e0041"


def test_nul_is_removed_and_whitespace_rules():
    assert inert("be\x00fore") == "before"
    assert inert("a\r\nb\tc\n") == "a\nb c\n"  # CRLF becomes LF, TAB one space, LF stays
    assert inert_line("  a\r\n\tb \n c\x1c\u2028d  ") == "a b c d"  # every whitespace run: one space


def test_lone_surrogates_become_the_byte_or_a_replacement():
    assert inert("bad\udcffbyte") == "bad\\xffbyte"  # surrogateescape: the byte it stood for
    assert inert("\ud800x") == "\ufffdx"
    inert("\udcff\ud800").encode("utf-8")  # always encodable


def test_ordinary_unicode_is_untouched():
    assert inert(ORDINARY.replace("\t", " ")) == ORDINARY.replace("\t", " ")
    assert inert("multi\nline\n") == "multi\nline\n"
    assert inert_line(ORDINARY) == " ".join(ORDINARY.split())
    clean = "Fix the flaky retry test"
    assert inert(clean) is clean and inert_line(clean) == clean


def test_json_inert_keeps_the_data_and_escapes_the_rest():
    doc = {name: value for name, value in HOSTILE.items() if name != "lone_surrogate" and name != "mix"}
    doc["ordinary"] = ORDINARY
    raw = json.dumps(doc, ensure_ascii=False).encode("utf-8")
    out = json_inert(raw)
    assert json.loads(out) == doc
    assert_inert(out.decode("utf-8"), newlines=False)
    assert ORDINARY.split()[0] in out.decode("utf-8")  # non-ASCII text stays raw UTF-8
    assert json_inert(b"[1,2]") == b"[1,2]"


def test_log_lines_are_inert():
    record = logging.LogRecord("c3async", logging.WARNING, __file__, 1, "skipped %s", (HOSTILE["mix"],), None)
    assert_inert(_InertFormatter("c3async: %(message)s").format(record), newlines=False)


# --- the real CLI ------------------------------------------------------------------------------


def run(claude, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """The CLI as a subprocess, bytes checked before decoding: (exit status, stdout, stderr)."""
    proc = subprocess.run(
        [sys.executable, "-m", "c3async", *args],
        check=False,
        capture_output=True,
        env=env or claude.env(),
        cwd=str(claude.root),
        timeout=120,
    )
    return proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")


def assert_clean_output(out: str, err: str) -> None:
    assert_inert(out, newlines=True)
    assert_inert(err, newlines=True)
    assert "Traceback" not in err
    for text in HOSTILE.values():
        for piece in ("\x1b]", "\x1b[", "\x9b", "\x07", "\u202e"):
            assert piece not in out and piece not in err, text


# What argv can carry: no NUL; and no lone surrogate (a separate test for those).
ARGV_SAFE = {k: "".join(ch for ch in v if ch != "\x00" and not 0xD800 <= ord(ch) <= 0xDFFF) for k, v in HOSTILE.items()}


@pytest.fixture(scope="module")
def hostile_project(module_claude):
    """One project: a session per hostile string (as title, branch and prompt), a plain one."""
    project = module_claude.project("hostile")
    folder = module_claude.folder(project)
    ids = {}
    for name, text in HOSTILE.items():
        text = text.replace("\ud800", "")  # JSON decoders refuse a lone surrogate: no transcript holds one
        text = text.replace("\udcff", "").replace("\udcfe", "")
        c = Conversation(project, branch=f"b-{text}")
        write_session(folder, c.id, [c.permission_mode(), *c.exchange(f"prompt {text}"), c.custom_title(text)])
        ids[name] = (c.id, text)
    plain = simple_session(folder, project, "修复 ✨ café")
    return project, ids, plain


@pytest.mark.process
def test_sessions_table_is_inert_and_json_round_trips(module_claude, hostile_project):
    project, ids, plain = hostile_project
    code, out, err = run(module_claude, "sessions", "--project", project)
    assert code == 0, err
    assert_clean_output(out, err)
    assert len(out.splitlines()) == len(ids) + 2  # header, one line per row: no row breaks a line
    assert "修复 ✨ café" in out
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in out  # shown, visibly marked, not dropped

    code, out, err = run(module_claude, "sessions", "--project", project, "--json")
    assert code == 0, err
    assert_inert(out, newlines=True)  # escaped by JSON (and json_inert) on the wire...
    rows = {r["id"]: r for r in json.loads(out)}
    for sid, text in ids.values():  # ...and exactly the original text once decoded
        row = rows[sid]
        assert (row["title"], row["branch"], row["first_prompt"]) == (text, f"b-{text}", f"prompt {text}")
    assert rows[plain]["title"] == "修复 ✨ café"


@pytest.mark.process
def test_all_projects_table_with_a_hostile_project_name(claude):
    project = claude.project("evil\x1b]0;owned\x07\u202e")
    simple_session(claude.folder(project), project, "title")
    code, out, err = run(claude, "sessions", "--project", project)
    assert code == 0, err
    code, out, err = run(claude, "sessions", "--all")
    assert code == 0, err
    assert_clean_output(out, err)
    assert "PROJECT" in out and "evil\\x1b]0;owned" in out


@pytest.mark.process
@pytest.mark.slow
def test_stale_reasons_notes_and_mark_confirmations(claude):
    project = claude.project("app")
    folder = claude.folder(project)
    sids = [simple_session(folder, project, f"session {i}") for i in range(len(ARGV_SAFE))]
    for sid, (name, text) in zip(sids, sorted(ARGV_SAFE.items())):
        code, out, err = run(claude, "mark", "stale", sid, "--project", project, "--reason", text)
        assert code == 0, err
        assert_clean_output(out, err)
        code, out, err = run(
            claude, "mark", "note", sid, "--project", project, "--summary", text, "--next", text, "--json"
        )
        assert code == 0, err
        assert_inert(out, newlines=True)
        mark = json.loads(out)
        assert (mark["summary"], mark["next_steps"]) == (text, text), name
    code, out, err = run(claude, "sessions", "--project", project)
    assert code == 0, err
    assert_clean_output(out, err)
    assert out.count("[stale: ") == len(sids)
    rows = {r["id"]: r for r in claude.sessions(project)}
    for sid, (name, text) in zip(sids, sorted(ARGV_SAFE.items())):
        assert rows[sid]["stale"]["reason"] == text and rows[sid]["note"]["summary"] == text, name


@pytest.mark.process
def test_marks_file_from_a_hostile_repository(claude):
    """A cloned repository can ship ``.c3/session_marks.jsonl``: NUL and controls included."""
    project = claude.project("app")
    sid = simple_session(claude.folder(project), project)
    reason = ARGV_SAFE["mix"] + HOSTILE["nul"]
    marks = Path(project) / ".c3" / "session_marks.jsonl"
    marks.parent.mkdir()
    marks.write_text(
        json.dumps(
            {"ts": time.time(), "provider": "claude-code", "id": sid, "op": "stale", "reason": reason, "by": "agent"}
        )
        + "\n"
    )
    code, out, err = run(claude, "sessions", "--project", project)
    assert code == 0, err
    assert_clean_output(out, err)
    assert "[stale: " in out and "before" in out  # NUL removed, the text around it kept
    assert claude.sessions(project)[0]["stale"]["reason"] == reason


@pytest.mark.process
def test_tasks_list_board_and_changes_are_inert(claude):
    project = claude.project("app")
    who = actions.Who(session=None, by="agent")
    titles = {}
    for text in ARGV_SAFE.values():
        t = actions.run(
            resolve(project),
            who,
            "add",
            title=text,
            tags=f"t{len(titles)},{text}",
            status="blocked" if len(titles) % 2 else "backlog",
        )
        titles[t["id"]] = text
    # c3async refuses NUL in a title; a pm.json shipped in a cloned repository may hold one.
    pm = store.file_path(resolve(project))
    doc = json.loads(pm.read_text())
    doc["tasks"][0]["title"] = titles[doc["tasks"][0]["id"]] = HOSTILE["nul"] + ARGV_SAFE["mix"]
    pm.write_text(json.dumps(doc))
    first = doc["tasks"][0]["id"]
    actions.run(resolve(project), who, "milestone_add", milestone=ARGV_SAFE["osc8_link"])
    actions.run(
        resolve(project), who, "decide", text=ARGV_SAFE["csi_clear"], reasoning=ARGV_SAFE["cr_overwrite"], task_id=first
    )
    actions.run(resolve(project), who, "time_start", task_id=first)
    for action in ("list", "board", "report", "history", "decisions", "time_report", "milestones"):
        code, out, err = run(claude, "tasks", action, "--project", project)
        assert code == 0, err
        assert_clean_output(out, err)
    code, out, err = run(claude, "tasks", "list", "--project", project)
    assert len(out.splitlines()) == len(titles)  # one line per task, whatever its title holds
    code, out, err = run(claude, "tasks", "list", "--project", project, "--json")
    assert code == 0, err
    assert_inert(out, newlines=True)
    assert {t["id"]: t["title"] for t in json.loads(out)["tasks"]} == titles

    # A change prints one line for a person; --json the data, escaped (bidi and C1 too), the
    # same data when decoded.
    text = ARGV_SAFE["mix"]
    code, out, err = run(
        claude, "tasks", "add", "--project", project, "--title", text, "--description", HOSTILE["bidi_override"]
    )
    assert code == 0, err
    assert_clean_output(out, err)
    assert out.startswith("added task ") and len(out.splitlines()) == 1
    code, out, err = run(
        claude,
        "tasks",
        "add",
        "--project",
        project,
        "--title",
        text,
        "--description",
        HOSTILE["bidi_override"],
        "--json",
    )
    assert code == 0, err
    assert_clean_output(out, err)
    task = json.loads(out)
    assert (task["title"], task["description"]) == (text, HOSTILE["bidi_override"])
    code, out, err = run(claude, "tasks", "get", "--project", project, "--task-id", task["id"], "--json")
    assert code == 0 and json.loads(out)["title"] == text
    for shown in (task["id"], first):
        code, out, err = run(claude, "tasks", "show", shown, "--project", project)
        assert code == 0, err
        assert_clean_output(out, err)
    code, out, err = run(claude, "tasks", "update", task["id"], "--status", "done", "--project", project)
    assert code == 0 and out.startswith(f"task {task['id'][:8]} ") and out.endswith(" is done\n")
    assert_clean_output(out, err)
    code, out, err = run(claude, "tasks", "delete", first, "--project", project)
    assert code == 0 and out.startswith(f"deleted task {first[:8]} ") and "unlinked from 1 decision" in out
    assert_clean_output(out, err)


@pytest.mark.process
def test_live_lines_are_inert(claude):
    project = claude.project("app")
    folder = Path(project) / ".c3" / "live"
    folder.mkdir(parents=True)
    host = ARGV_SAFE["mix"] + ARGV_SAFE["osc52_clipboard"]
    name = str(uuid.uuid4())
    (folder / f"{name}.json").write_text(
        json.dumps(
            {
                "session_id": name,
                "host_session_id": host,
                "ide": HOSTILE["osc0_title"],
                "pid": os.getpid(),
                "ts": time.time(),
            }
        )
    )
    activity.record(resolve(project), "session_start", session_id=HOSTILE["csi_clear"] + "\u202e", source="startup")
    code, out, err = run(claude, "live", "--project", project)
    assert code == 0, err
    assert_clean_output(out, err)
    assert len(out.splitlines()) == 2 and "MCP×1" in out
    code, out, err = run(claude, "live", "--project", project, "--json")
    assert code == 0, err
    assert_inert(out, newlines=True)
    assert {e["id"] for e in json.loads(out)} == {host, HOSTILE["csi_clear"] + "\u202e"}


@pytest.mark.process
def test_error_messages_and_path_messages_are_inert(claude):
    project = claude.project("evil\x1b]52;c;cHduZWQ=\x07\u202e\x9b2J")
    code, out, err = run(claude, "sessions", "--project", project)  # "no transcripts for <path>"
    assert code == 0 and "Claude Code has no sessions of" in err
    assert_clean_output(out, err)
    code, out, err = run(claude, "mark", "note", "abcd1234", "--project", project, "--summary", "x")
    assert code == 1 and "c3async: error: no session of" in err
    assert_clean_output(out, err)
    code, out, err = run(claude, "live", "--project", project)
    assert code == 0 and "no live sessions" in err
    assert_clean_output(out, err)
    code, out, err = run(claude, "tasks", "get", "--project", project, "--task-id", ARGV_SAFE["mix"])
    assert code == 2 and "c3async: error:" in err  # a malformed id: a usage error
    assert_clean_output(out, err)
    code, out, err = run(claude, "install-hooks", "--project", project)
    assert code == 0, err
    assert_clean_output(out, err)
    code, out, err = run(claude, "sessions", ARGV_SAFE["osc0_title"])  # argparse quotes what was typed
    assert code == 2 and "unrecognized arguments" in err
    assert_clean_output(out, err)


# --- argv faults -------------------------------------------------------------------------------

NOT_UTF8 = "\udcff"  # what Python makes of the argv byte 0xff (surrogateescape)


@pytest.mark.process
@pytest.mark.parametrize(
    "args, option",
    [
        (("mark", "note", "abcd1234", "--summary", NOT_UTF8), "--summary"),
        (("mark", "note", "abcd1234", "--next", "ok" + NOT_UTF8), "--next"),
        (("mark", "stale", "abcd1234", "--reason", NOT_UTF8), "--reason"),
        (("mark", "stale", "abcd1234", "--reason", "x", "--successor", NOT_UTF8), "--successor"),
        (("mark", "unstale", "abcd" + NOT_UTF8), "id"),
        (("tasks", "add", "--title", NOT_UTF8), "--title"),
        (("tasks", "add", "--title", "x", "--tags", NOT_UTF8), "--tags"),
        (("tasks", "decide", "--text", "x", "--reasoning", NOT_UTF8), "--reasoning"),
        (("sessions", "--search", NOT_UTF8), "--search"),
        (("hub", "--host", NOT_UTF8), "--host"),
    ],
)
def test_text_that_is_not_utf8_is_a_usage_error_naming_the_option(claude, args, option):
    project = claude.project("app")
    sid = simple_session(claude.folder(project), project)
    args = tuple(a.replace("abcd1234", sid) for a in args)
    code, out, err = run(claude, *args, *(("--project", project) if args[0] != "hub" else ()))
    assert code == 2, err
    assert f"argument {option}: is not UTF-8 text (byte 0xff" in err
    assert_clean_output(out, err)
    assert not (Path(project) / ".c3" / "session_marks.jsonl").exists()
    assert not store.file_path(resolve(project)).exists()


@pytest.mark.process
def test_a_task_action_that_is_not_utf8_is_an_invalid_choice(claude):
    project = claude.project("app")
    code, out, err = run(claude, "tasks", NOT_UTF8, "--project", project)
    assert code == 2 and "argument ACTION: invalid choice: '\\udcff'" in err  # the actions are argparse's choices
    assert_clean_output(out, err)
    assert not store.file_path(resolve(project)).exists()


@pytest.mark.process
def test_a_session_id_env_that_is_not_utf8_is_refused(claude):
    project = claude.project("app")
    simple_session(claude.folder(project), project)
    env = claude.env(CLAUDE_CODE_SESSION_ID="abc" + NOT_UTF8)
    code, out, err = run(claude, "mark", "note", "--project", project, "--summary", "x", env=env)
    assert code == 1 and "CLAUDE_CODE_SESSION_ID" in err
    assert_clean_output(out, err)
    code, out, err = run(claude, "tasks", "add", "--project", project, "--title", "x", env=env)
    assert code == 1 and "CLAUDE_CODE_SESSION_ID" in err
    assert not store.file_path(resolve(project)).exists()


@pytest.mark.process
@pytest.mark.parametrize(
    "port, message",
    [
        ("99999", "a port is 0 to 65535 (0 picks a free one), got 99999"),
        ("65536", "got 65536"),
        ("-1", "got -1"),
        ("http", "expected a port number, got 'http'"),
        ("9" * 5000, "expected a port number, got '9999"),
        ("\x1b[2J", "expected a port number, got '\\x1b[2J'"),
    ],
    ids=["99999", "65536", "-1", "word", "5000-digits", "escape"],
)
def test_hub_port_out_of_range_is_a_usage_error(claude, port, message):
    code, out, err = run(claude, "hub", "--port", port)
    assert code == 2
    assert "argument --port: " in err and message in err
    assert_clean_output(out, err)
    assert len(err) < 2000  # a huge argument is not echoed whole


@pytest.mark.process
def test_limit_huge_and_absurd(claude):
    project = claude.project("app")
    sid = simple_session(claude.folder(project), project)
    assert [r["id"] for r in claude.sessions(project, "--limit", "9" * 100)] == [sid]
    code, out, err = run(claude, "sessions", "--project", project, "--limit", "9" * 5000)
    assert code == 2 and "argument --limit: expected a whole number" in err and len(err) < 2000
    assert_clean_output(out, err)


@pytest.mark.process
def test_a_project_path_that_is_not_utf8_does_not_crash(claude):
    project = claude.project("bad" + NOT_UTF8)
    code, out, err = run(claude, "sessions", "--project", project)
    assert code == 0 and "bad\\xff" in err  # the byte is shown, not printed raw
    assert_clean_output(out, err)
    code, out, err = run(claude, "tasks", "add", "--project", project, "--title", "x")
    assert code == 0, err
    code, out, err = run(claude, "tasks", "list", "--project", project)
    assert code == 0 and out.split()[-1] == "x"


@pytest.mark.process
@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_stdout_that_cannot_encode_everything_never_crashes(claude, encoding):
    project = claude.project("app")
    simple_session(claude.folder(project), project, "修复 ✨ the 🎉 bug")
    actions.run(resolve(project), actions.Who(session=None, by="agent"), "add", title="任务 ✨")
    env = claude.env(PYTHONIOENCODING=encoding)
    for args in (("sessions",), ("tasks", "list"), ("tasks", "board")):
        proc = subprocess.run(
            [sys.executable, "-m", "c3async", *args, "--project", project],
            check=False,
            capture_output=True,
            env=env,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout.decode(encoding)
        assert "\\u4fee" in out or "\\u4efb" in out  # shown as escapes, not a traceback
        assert b"Traceback" not in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "c3async", "sessions", "--project", project, "--json"],
        check=False,
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0 and json.loads(proc.stdout)[0]["title"] == "修复 ✨ the 🎉 bug"


@pytest.mark.process
@pytest.mark.parametrize("columns", [80, 100, 60])
def test_at_80_columns_the_title_has_at_least_40_percent_of_the_width(claude, columns):
    title = "migrate the settings page to the new form library and its validation " * 2
    for name in ("a-project-with-a-long-descriptive-name", "second-project-also-long-named"):
        project = claude.project(name)
        c = Conversation(project, branch="feature/a-very-long-branch-name-for-the-settings-work")
        write_session(claude.folder(project), c.id, [c.permission_mode(), *c.exchange(title)])
        assert run(claude, "sessions", "--project", project)[0] == 0  # registered: --all lists it
    for args in (("--all",), ("--project", project)):
        code, out, err = run(claude, "sessions", *args, env={**claude.env(), "COLUMNS": str(columns)})
        assert code == 0, err
        head, *lines = out.splitlines()
        at = head.index("TITLE")
        assert columns - at >= columns * 0.4, head
        for line in lines:
            assert len(line) <= columns and line[at:].startswith("migrate the settings"), (args, line)
