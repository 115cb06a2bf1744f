"""Finding a session by what it is known by and what it touched: tags (marks of their own kind,
folded per word), ``search`` over titles, names, notes and tags ranked above what was said, and
``files PATH`` from the edit and write calls the index keeps."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta

import pytest

from c3async.ground.errors import BadArgument
from c3async.ground.project import resolve
from c3async.sessions import act
from c3async.stores import marks
from stress.transcripts import Conversation, text, tool_use, write_session

START = datetime(2026, 5, 1, 10, 0, 0, tzinfo=UTC)


def _session(folder, cwd, prompt, *, sid=None, start=START, title=None, ai=None, name=None, edits=(), said=None):
    """A session: a prompt, its edit and write calls (tool, path), a reply, and its titles."""
    conv = Conversation(cwd, sid, start=start)
    lines = [conv.permission_mode(), conv.prompt(prompt)]
    for tool, path in edits:
        key = "notebook_path" if tool == "NotebookEdit" else "file_path"
        lines += conv.reply(tool_use(tool, {key: path, "content": "x"}))
        lines.append(conv.tool_result(lines[-1]["message"]["content"][0]["id"], "ok"))
    lines += conv.reply(text(said or "Done."))
    lines += [line for line in (ai and conv.ai_title(ai), title and conv.custom_title(title)) if line]
    if name:
        lines.append(conv.agent_name(name))
    write_session(folder, conv.id, lines, mtime=conv.clock.timestamp())
    return conv.id


@pytest.fixture
def world(claude, monkeypatch):
    claude.activate(monkeypatch)
    proj = claude.project("app")
    folder = claude.folder(proj)
    (open(os.path.join(proj, "parser.py"), "w")).close()
    os.makedirs(os.path.join(proj, "src"))
    ids = {
        "older": _session(
            folder,
            proj,
            "write the parser",
            edits=[("Write", f"{proj}/parser.py"), ("Edit", f"{proj}/parser.py")],
            title="Übersicht der Parser",
        ),
        "newer": _session(
            folder,
            proj,
            "fix the lexer",
            start=START + timedelta(days=1),
            edits=[("MultiEdit", f"{proj}/parser.py"), ("Edit", "src/lexer.py"), ("NotebookEdit", f"{proj}/nb.ipynb")],
            ai="Lexer cleanup",
            said="the Übersicht page is unrelated",
        ),
        "other": _session(folder, proj, "docs only", start=START + timedelta(days=2), name="docs-writer"),
    }
    return proj, ids


def _json(claude, *args, cwd=None):
    done = claude.run(*args, "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# ------------------------------------------------------------------ tags


def test_tag_untag_fold_per_word_and_filter(world, claude) -> None:
    proj, ids = world
    done = claude.run("mark", "tag", ids["older"][:8], "Auth", "release-2.1", "auth", "--project", proj)
    assert done.returncode == 0 and done.stdout.split()[2:] == ["auth", "release-2.1"], done.stdout
    act.mark(resolve(proj), ids["newer"], "tag", tags=["auth"])
    act.mark(resolve(proj), ids["older"], "untag", tags=["release-2.1"])
    rows = {r["id"]: r for r in claude.sessions(proj)}
    assert rows[ids["older"]]["tags"] == ["auth"] and rows[ids["newer"]]["tags"] == ["auth"]
    assert rows[ids["other"]]["tags"] == []
    tagged = [r["id"] for r in claude.sessions(proj, "--tag", "AUTH")]
    assert sorted(tagged) == sorted([ids["older"], ids["newer"]])
    assert claude.sessions(proj, "--tag", "release-2.1") == []
    assert [r["id"] for r in claude.sessions(proj, "--search", "auth")] == tagged  # words match tags too


def test_tags_are_validated_before_anything_is_written(world) -> None:
    proj, ids = world
    for bad in (["two words"], ["-lead"], ["x" * 41], ["tab\there"], ["a\x00"], []):
        with pytest.raises(BadArgument):
            act.mark(resolve(proj), ids["older"], "tag", tags=bad)
    with pytest.raises(BadArgument, match="too many tags at once"):
        act.mark(resolve(proj), ids["older"], "tag", tags=[f"t{i}" for i in range(17)])
    with pytest.raises(BadArgument, match="tag or untag"):
        act.mark(resolve(proj), ids["older"], "note", summary="x", tags=["auth"])
    assert not marks.marks_path(resolve(proj)).exists()
    act.mark(resolve(proj), ids["older"], "tag", tags=[f"t{i}" for i in range(16)])
    act.mark(resolve(proj), ids["older"], "tag", tags=[f"u{i}" for i in range(16)])
    with pytest.raises(BadArgument, match="limit is 32"):
        act.mark(resolve(proj), ids["older"], "tag", tags=["one-more"])
    act.mark(resolve(proj), ids["older"], "tag", tags=["t0"])  # one it has already: no more than before


def test_tag_fold_is_last_wins_by_time_whatever_the_order(world) -> None:
    proj, ids = world
    sid = ids["older"]
    path = marks.marks_path(resolve(proj))
    path.parent.mkdir(parents=True, exist_ok=True)

    def line(ts, op, tags):
        return json.dumps({"ts": ts, "id": sid, "op": op, "by": "user", "tags": tags}) + "\n"

    # written out of order (another state root's lines appended late); a hand-edited line with
    # an upper-case word, a bad one and too many words counts for nothing
    path.write_text(
        line(1_700_000_300, "untag", ["a"])
        + line(1_700_000_100, "tag", ["a", "b"])
        + line(1_700_000_200, "tag", ["Caps", "c"])
        + line(1_700_000_200, "tag", ["d e"])
        + line(1_700_000_200, "tag", [f"w{i}" for i in range(17)])
        + line(1_700_000_400, "tag", "not a list")
    )
    assert marks.MarkBook(resolve(proj)).refresh().tags(sid) == ["b"]


@pytest.mark.process
def test_tags_from_many_processes_at_once_are_all_kept(world, claude) -> None:
    proj, ids = world
    script = textwrap.dedent(
        f"""
        import sys
        from c3async.ground.project import resolve
        from c3async.stores import marks
        for i in range(20):
            marks.write_mark(resolve({proj!r}), {ids["older"]!r}, "tag", tags=[f"p{{sys.argv[1]}}"])
            marks.write_mark(resolve({proj!r}), {ids["older"]!r}, "untag", tags=[f"p{{sys.argv[1]}}"])
        marks.write_mark(resolve({proj!r}), {ids["older"]!r}, "tag", tags=[f"p{{sys.argv[1]}}"])
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(n)], env=claude.env(), stderr=subprocess.PIPE)
        for n in range(8)
    ]
    for p in procs:
        _out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    lines = marks.marks_path(resolve(proj)).read_text().splitlines()
    assert len(lines) == 8 * 41 and all(json.loads(x)["op"] in ("tag", "untag") for x in lines)
    assert marks.MarkBook(resolve(proj)).refresh().tags(ids["older"]) == sorted(f"p{n}" for n in range(8))


# ------------------------------------------------------------------ search


def test_search_matches_titles_names_notes_and_tags_above_the_conversation(world, claude) -> None:
    proj, ids = world
    found = _json(claude, "search", "übersicht", "--project", proj)
    order = [(r["id"], r["fields"]) for r in found["results"]]
    assert order == [(ids["older"], ["title"]), (ids["newer"], ["conversation"])]
    assert found["results"][0]["title_source"] == "custom"
    act.mark(resolve(proj), ids["other"], "note", summary="handed the Ubersicht work over")
    act.mark(resolve(proj), ids["newer"], "tag", tags=["übersicht"])
    found = _json(claude, "search", "Übersicht", "--project", proj)
    fields = {r["id"]: r["fields"] for r in found["results"]}
    assert fields == {ids["older"]: ["title"], ids["newer"]: ["tags", "conversation"], ids["other"]: ["note"]}
    assert [r["id"] for r in found["results"]] == [ids["older"], ids["newer"], ids["other"]]
    assert found["total"] == 3
    name = _json(claude, "search", "docs-writer", "--project", proj)["results"]
    assert [(r["id"], r["fields"]) for r in name] == [(ids["other"], ["name"])]
    ai = _json(claude, "search", "lexer cleanup", "--project", proj)["results"]
    assert ai[0]["id"] == ids["newer"] and ai[0]["fields"][0] == "title"
    # a role asks what one side said: a title is said by no one
    said = _json(claude, "search", "übersicht", "--role", "assistant", "--project", proj)["results"]
    assert [(r["id"], r["fields"]) for r in said] == [(ids["newer"], ["conversation"])]
    # the tag filter
    tagged = _json(claude, "search", "übersicht", "--tag", "Übersicht", "--project", proj)["results"]
    assert [r["id"] for r in tagged] == [ids["newer"]]
    text = claude.run("search", "übersicht", "--project", proj)
    assert text.returncode == 0 and "title" in text.stdout


def test_search_fields_keep_query_syntax_and_attacker_text_inert(world, claude) -> None:
    proj, ids = world
    act.mark(resolve(proj), ids["other"], "note", summary='") OR * NEAR(a b) <script>alert(1)</script> \x1b[31m')
    assert [r["id"] for r in _json(claude, "search", "script", "--project", proj)["results"]] == [ids["other"]]
    # OR, NOT and phrases mean what they mean in the conversation
    both = _json(claude, "search", "parser OR docs", "--project", proj)["results"]
    assert {r["id"] for r in both} >= {ids["older"], ids["other"]}
    none = _json(claude, "search", "übersicht -parser", "--project", proj)["results"]
    assert ids["older"] not in {r["id"] for r in none}
    shown = claude.run("search", "script", "--project", proj)
    assert "\x1b" not in shown.stdout


# ------------------------------------------------------------------ files


def test_files_lists_who_changed_a_file_newest_first(world, claude) -> None:
    proj, ids = world
    found = _json(claude, "files", "parser.py", "--project", proj)
    assert found["kind"] == "file" and found["paths"][0] == f"{proj}/parser.py"
    got = [(s["id"], s["count"], s["tools"]) for s in found["sessions"]]
    assert got == [(ids["newer"], 1, ["MultiEdit"]), (ids["older"], 2, ["Edit", "Write"])]
    assert found["sessions"][1]["first_ts"] < found["sessions"][1]["last_ts"]
    # relative to where the command runs, when that is inside the project
    lexer = _json(claude, "files", "lexer.py", cwd=os.path.join(proj, "src"))
    assert [s["id"] for s in lexer["sessions"]] == [ids["newer"]] and lexer["kind"] == "gone"
    # a folder: everything under it, each path listed with its count
    folder = _json(claude, "files", proj)
    assert folder["kind"] == "folder" and [s["id"] for s in folder["sessions"]] == [ids["newer"], ids["older"]]
    assert {c["path"] for c in folder["sessions"][0]["files"]} == {
        f"{proj}/parser.py",
        f"{proj}/src/lexer.py",
        f"{proj}/nb.ipynb",
    }
    text = claude.run("files", "parser.py", "--project", proj)
    assert text.returncode == 0 and "2 sessions changed" in text.stdout and "MultiEdit" in text.stdout


def test_files_refuses_a_typo_clearly(world, claude) -> None:
    proj, _ids = world
    done = claude.run("files", "parsre.py", "--project", proj)
    assert done.returncode != 0 and "no such file or folder" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    prefix = claude.run("files", f"{proj}/pars", "--project", proj)
    assert prefix.returncode != 0 and "no such file or folder" in prefix.stderr


def test_files_reads_the_indexs_edit_rows_as_untrusted(world, claude) -> None:
    # the index is a file of ours, but a file: a row of the wrong kind or a time out of range
    # is skipped or dropped, never a traceback
    import sqlite3

    proj, ids = world
    assert len(_json(claude, "files", "parser.py", "--project", proj)["sessions"]) == 2
    for shard in claude.c3home.joinpath("search").glob("*.db"):
        with contextlib.closing(sqlite3.connect(shard)) as conn, conn:
            conn.execute("UPDATE edits SET last_ts=10000000000000000000, first_ts='soon' WHERE tools=2")
            conn.execute("UPDATE edits SET count='many' WHERE tools=5")  # Edit and Write
    found = _json(claude, "files", "parser.py", "--project", proj)
    assert [s["id"] for s in found["sessions"]] == [ids["newer"]]  # the other's row skipped, and said
    assert found["sessions"][0]["last_ts"] is None and "wrong kind" in " ".join(found["problems"])
    text = claude.run("files", "parser.py", "--project", proj)
    assert text.returncode == 0 and "Traceback" not in text.stderr, text.stderr


def test_files_follow_a_transcript_that_grows(world, claude) -> None:
    proj, _ids = world
    assert len(_json(claude, "files", "parser.py", "--project", proj)["sessions"]) == 2
    conv = Conversation(proj, start=START + timedelta(days=5))
    lines = [conv.prompt("again"), *conv.reply(tool_use("Edit", {"file_path": f"{proj}/parser.py"}))]
    write_session(claude.folder(proj), conv.id, lines, mtime=conv.clock.timestamp())
    found = _json(claude, "files", "parser.py", "--project", proj)
    assert len(found["sessions"]) == 3 and found["sessions"][0]["id"] == conv.id


def test_files_leaves_out_the_calls_the_tool_refused(world, claude) -> None:
    # as the real CLI writes them: an Edit of a file not read first, a MultiEdit where the tool is
    # gone, a Write that worked, and a last call still waiting for its result (it may change the file)
    proj, _ids = world
    conv = Conversation(proj, start=START + timedelta(days=6))
    lines = [conv.prompt("edit carefully")]
    for tool, error in (("Edit", True), ("MultiEdit", True), ("Write", False), ("Edit", None)):
        lines += conv.reply(tool_use(tool, {"file_path": f"{proj}/parser.py"}))
        if error is not None:
            result = conv.tool_result(
                lines[-1]["message"]["content"][0]["id"], "<tool_use_error>refused</tool_use_error>"
            )
            result["message"]["content"][0]["is_error"] = error
            lines.append(result)
    lines += conv.reply(tool_use("Write", {"file_path": f"{proj}/never.py"}))
    failed = conv.tool_result(lines[-1]["message"]["content"][0]["id"], "Error: No such tool available: Write")
    failed["message"]["content"][0]["is_error"] = True
    lines.append(failed)
    write_session(claude.folder(proj), conv.id, lines, mtime=conv.clock.timestamp())
    found = _json(claude, "files", "parser.py", "--project", proj)
    mine = next(s for s in found["sessions"] if s["id"] == conv.id)
    assert (mine["count"], mine["tools"]) == (2, ["Edit", "Write"])
    everything = _json(claude, "files", proj)["sessions"]
    assert f"{proj}/never.py" not in {c["path"] for s in everything for c in s["files"]}
    shown = _json(claude, "show", conv.id[:8], "--project", proj)
    assert shown["changed"] == [f"{proj}/parser.py"]  # the session's detail: never.py was never written
