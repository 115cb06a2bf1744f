"""Real prompts vs everything else on a user line; first/last prompt, turns, /clear, branch, times.

The classification is checked on ``extract.scan`` (pure: bytes in, facts out), and the row fields
through the CLI on one corpus listed once.
"""

from __future__ import annotations

import pytest

from c3async.catalog.extract import scan
from c3async.catalog.read import HEAD, read_transcript
from stress.transcripts import Conversation, append_lines, image_block, render, text, write_session

pytestmark = pytest.mark.process

KiB = 1024

FOLLOW_UP = "Now fix the retry loop"


def facts_of(lines):
    return scan(render(lines), 0, from_start=True)


def _non_prompt_lines(c: Conversation) -> dict[str, dict]:
    side = Conversation(c.cwd, c.id, sidechain=True)
    return {
        "meta": c.meta('Called the Read tool with the following input: {"file_path":"/a.py"}'),
        "caveat": c.caveat(),
        "compact_summary": c.compact_summary(),
        "sidechain": side.prompt("Search the code for retry()"),
        "tool_result": c.tool_result("toolu_01A", "3 passed"),
        "tool_result_block_list": c.tool_result("toolu_01B", [text("3 passed")]),
        "local_command_stdout": c.prompt("<local-command-stdout>Set model to opus</local-command-stdout>"),
        "local_command_stderr": c.prompt("<local-command-stderr>error</local-command-stderr>"),
        "task_notification": c.prompt(
            "<task-notification><task-id>b1</task-id><status>completed</status>"
            "<result>done</result></task-notification>"
        ),
        "system_reminder": c.prompt("<system-reminder>The TodoWrite tool hasn't been used.</system-reminder>"),
        "ide_opened_file": c.prompt([text("<ide_opened_file>The user opened /a.py in the IDE.</ide_opened_file>")]),
        "ide_selection": c.prompt("<ide_selection>lines 1-3 of /a.py</ide_selection>"),
        "bash_stdout": c.prompt("<bash-stdout>a.py\nb.py</bash-stdout><bash-stderr></bash-stderr>"),
        "hook_output": c.prompt("<user-prompt-submit-hook>ok</user-prompt-submit-hook>"),
        "interrupted_string": c.prompt("[Request interrupted by user]"),
        "interrupted_block": c.prompt([text("[Request interrupted by user]")]),
        "interrupted_for_tool_use": c.prompt([text("[Request interrupted by user for tool use]")]),
        "image_only": c.prompt([text("[Image #1]"), image_block()]),
        "built_in_command_with_args": c.command("/model", "model", "opus"),
        "clear_command": c.clear(),
        "empty_text": c.prompt([text("   ")]),
    }


NON_PROMPTS = sorted(_non_prompt_lines(Conversation("/w/app")))


@pytest.mark.parametrize("kind", NON_PROMPTS)
def test_line_that_is_not_a_real_prompt_is_skipped(kind):
    c = Conversation("/w/app")
    line = _non_prompt_lines(c)[kind]
    facts = facts_of([c.permission_mode(), line, c.prompt(FOLLOW_UP)])
    assert (facts.first_prompt, facts.last_prompt, facts.prompts) == (FOLLOW_UP, FOLLOW_UP, 1)


@pytest.mark.parametrize("kind", NON_PROMPTS)
def test_line_that_is_not_a_real_prompt_is_never_the_last_prompt(kind):
    c = Conversation("/w/app")
    first = c.prompt(FOLLOW_UP)
    facts = facts_of([first, _non_prompt_lines(c)[kind]])
    assert (facts.last_prompt, facts.prompts) == (FOLLOW_UP, 1)


@pytest.mark.parametrize(
    "content, expected",
    [
        (
            [text("<ide_opened_file>The user opened /a.py in the IDE.</ide_opened_file>"), text("real prompt")],
            "real prompt",
        ),
        (
            [text("[Image #1]"), image_block(), text("What is wrong in this screenshot?")],
            "What is wrong in this screenshot?",
        ),
        ("<bash-input>ls</bash-input>", "! ls"),
        ("<Button> does not render in Safari", "<Button> does not render in Safari"),
        ("\n\n   Fix it  \n", "Fix it"),
        ("[Image #1] what is this?", "[Image #1] what is this?"),
        (
            "Why does the log show <command-name>/clear</command-name> twice?",
            "Why does the log show <command-name>/clear</command-name> twice?",
        ),
        (
            "Explain these tags: <command-name>/review</command-name> <command-args>PR 7</command-args>",
            "Explain these tags: <command-name>/review</command-name> <command-args>PR 7</command-args>",
        ),
    ],
    ids=[
        "vscode-array",
        "image-then-text",
        "bash-input",
        "uppercase-tag",
        "stripped",
        "image-ref-inline",
        "mentions-command-markup",
        "mentions-command-markup-with-args",
    ],
)
def test_real_prompt_text(content, expected):
    c = Conversation("/w/app")
    facts = facts_of([c.permission_mode(), c.prompt(content)])
    assert (facts.first_prompt, facts.prompts) == (expected, 1)


def test_custom_slash_command_with_arguments_is_a_prompt():
    c = Conversation("/w/app")
    facts = facts_of([*c.custom_command("/review", "PR 12"), *c.reply()])
    assert (facts.first_prompt, facts.prompts) == ("/review PR 12", 1)


def test_bash_input_then_its_output_is_one_prompt():
    c = Conversation("/w/app")
    facts = facts_of(
        [
            c.prompt("<bash-input>ls</bash-input>"),
            c.prompt("<bash-stdout>a.py</bash-stdout><bash-stderr></bash-stderr>"),
        ]
    )
    assert (facts.first_prompt, facts.last_prompt, facts.prompts) == ("! ls", "! ls", 1)


def test_built_in_command_is_remembered_as_the_first_command_not_a_prompt():
    c = Conversation("/w/app")
    facts = facts_of([c.caveat(), c.clear(), c.local_stdout()])
    assert (facts.first_prompt, facts.first_command, facts.prompts) == (None, "/clear", 0)


@pytest.mark.parametrize(
    "build, expected",
    [
        (lambda c: [c.mode(), c.snapshot(), c.caveat(), c.clear(), c.local_stdout(), c.prompt("go")], True),
        (lambda c: [c.caveat(), c.clear(), c.local_stdout()], True),
        (lambda c: [c.permission_mode(), c.prompt("go"), *c.reply(), c.clear()], False),
        (
            lambda c: [c.caveat(), c.command("/model", "model", "opus"), c.local_stdout("Set model"), c.prompt("go")],
            False,
        ),
        (lambda c: [c.permission_mode(), c.prompt("/clear is what I typed, as text")], False),
        (lambda c: [c.permission_mode(), c.prompt("Why does my log show <command-name>/clear</command-name>?")], False),
    ],
    ids=[
        "clear-archetype",
        "clear-only",
        "clear-later",
        "other-command-first",
        "prompt-mentions-clear",
        "prompt-quotes-clear-markup",
    ],
)
def test_began_with_clear_means_the_first_non_meta_user_line_is_the_clear_markup(build, expected):
    assert facts_of(build(Conversation("/w/app"))).began_with_clear is expected


# --- row fields through the CLI -------------------------------------------------------------------

PROMPT_3000 = "Please port this module:\n" + "def f(x):\n    return x * 2\n" * 120
PROMPT_2000 = "y" * 2000


def _build(claude) -> dict[str, dict | None]:
    project = claude.project("prompts")
    folder = claude.folder(project)
    ids: dict[str, str] = {}

    def add(name, conv, lines, **kw):
        write_session(folder, conv.id, lines, **kw)
        ids[name] = conv.id

    c = Conversation(project)
    add("prompt_3000", c, [c.permission_mode(), *c.exchange("  " + PROMPT_3000 + "\n")])
    c = Conversation(project)
    add("prompt_2000", c, [*c.exchange(PROMPT_2000)])
    c = Conversation(project)
    add(
        "turns",
        c,
        [
            c.permission_mode(),
            *c.exchange("one"),
            *c.tool_round("3 passed"),
            c.prompt("[Request interrupted by user]"),
            *c.exchange("two"),
            c.meta("expanded skill body"),
            c.caveat(),
            c.command("/model", "model", "opus"),
            c.local_stdout("Set model to opus"),
            *c.custom_command("/review", "PR 12"),
            *c.reply(),
            *c.exchange([text("<ide_opened_file>x</ide_opened_file>"), text("three")]),
            *c.tool_round("done"),
            c.prompt("<task-notification><task-id>t</task-id></task-notification>"),
        ],
    )
    c = Conversation(project)
    add(
        "compacted",
        c,
        [
            *c.exchange("first"),
            *c.exchange("second"),
            c.last_prompt("second"),
            c.custom_title("compact-me"),
            c.compact_boundary(),
            c.compact_summary(),
            *c.reply(text("Continuing.")),
        ],
    )
    c = Conversation(project)
    add(
        "compacted_then_more",
        c,
        [
            *c.exchange("first"),
            c.compact_boundary(),
            c.compact_summary(),
            *c.exchange("after compaction"),
        ],
    )
    c = Conversation(project)
    add(
        "inline_sidechain",
        c,
        [
            *c.exchange("Find the bug"),
            *Conversation(project, c.id, sidechain=True).exchange("delegated: search for retry()"),
            *c.tool_round("agentId: a1 found it"),
        ],
    )
    c = Conversation(project)
    add(
        "last_prompt_meta_beyond_tail_prompts",
        c,
        [
            c.permission_mode(),
            *c.exchange("the first prompt"),
            *c.filler(400 * KiB),
            *c.exchange("the real last prompt"),
            *c.filler(400 * KiB),
            *c.clean_exit("the real last prompt", "named-session"),
        ],
    )
    c = Conversation(project)
    add(
        "clear_archetype",
        c,
        [
            c.mode(),
            c.snapshot(),
            c.caveat(),
            c.clear(),
            c.local_stdout(),
            c.queue("enqueue", "go"),
            c.queue("dequeue"),
            *c.exchange("go"),
        ],
    )
    c = Conversation(project)
    add("no_clear", c, [c.permission_mode(), *c.exchange("go")])
    c = Conversation(project, branch="main")
    lines = [*c.exchange("on main")]
    c.branch = "feature/x"
    lines += [*c.exchange("on the feature branch"), c.custom_title("t")]
    add("branch_changes", c, lines)
    c = Conversation(project, branch="")
    add("branch_empty", c, [*c.exchange("old CLI")])
    c = Conversation(project, branch="main")
    lines = [*c.exchange("on main")]
    c.branch = ""
    lines += [*c.exchange("branch unknown later")]
    add("branch_empty_at_the_end", c, lines)
    c = Conversation(project, branch="HEAD")
    add("branch_detached", c, [*c.exchange("detached")])
    c = Conversation(project)
    early_snapshot = c.snapshot()
    early_snapshot["snapshot"]["timestamp"] = "2020-01-01T00:00:00.000Z"
    lines = [c.permission_mode(), early_snapshot, *c.exchange("hello")]
    first_ts = next(line["timestamp"] for line in lines if "timestamp" in line)
    lines += [*c.exchange("bye")]
    last_ts = lines[-1]["timestamp"]  # turn_duration
    late_snapshot = c.snapshot()
    late_snapshot["snapshot"]["timestamp"] = "2030-01-01T00:00:00.000Z"
    c.tick(3600)
    lines += [
        c.last_prompt("bye"),
        c.custom_title("timed"),
        late_snapshot,
        c.queue("enqueue", "later"),
        c.queue("remove"),
    ]
    add("times", c, lines)
    c = Conversation(project)
    lines = [*c.exchange("start here")]
    c.cwd = project + "/sub"
    lines += [*c.exchange("after cd sub")]
    add("cwd_changes", c, lines)

    rows = claude.rows_by_id(project)
    out = {name: rows.get(sid) for name, sid in ids.items()}
    out["_times"] = {"first": first_ts, "last": last_ts}
    out["_project"] = project
    return out


@pytest.fixture(scope="module")
def rows(module_claude):
    return _build(module_claude)


def test_every_corpus_session_is_listed(rows):
    assert [name for name, row in rows.items() if row is None] == []


def test_first_prompt_is_the_stripped_text_capped_at_2000_chars(rows):
    row = rows["prompt_3000"]
    assert row["first_prompt"] == PROMPT_3000.strip()[:2000]
    assert row["first_prompt_truncated"] is True


def test_first_prompt_of_exactly_2000_chars_is_not_truncated(rows):
    row = rows["prompt_2000"]
    assert (row["first_prompt"], row["first_prompt_truncated"]) == (PROMPT_2000, False)
    assert (row["last_prompt"], row["last_prompt_truncated"]) == (PROMPT_2000, False)


def test_last_prompt_is_capped_like_the_first(rows):
    row = rows["prompt_3000"]
    assert (row["last_prompt"], row["last_prompt_truncated"]) == (PROMPT_3000.strip()[:2000], True)


def test_user_turns_count_only_real_prompts_and_are_exact_for_a_small_file(rows):
    row = rows["turns"]
    assert (row["user_turns"], row["user_turns_exact"]) == (4, True)
    assert (row["first_prompt"], row["last_prompt"]) == ("one", "three")


def test_compact_summary_is_never_a_prompt_or_title(rows):
    row = rows["compacted"]
    assert (row["last_prompt"], row["user_turns"], row["title"]) == ("second", 2, "compact-me")
    assert "continued from a previous conversation" not in (row["first_prompt"] or "")


def test_prompt_after_compaction_is_the_last_prompt(rows):
    row = rows["compacted_then_more"]
    assert (row["first_prompt"], row["last_prompt"], row["user_turns"]) == ("first", "after compaction", 2)


def test_inline_sidechain_lines_are_not_prompts(rows):
    row = rows["inline_sidechain"]
    assert (row["first_prompt"], row["last_prompt"], row["user_turns"]) == ("Find the bug", "Find the bug", 1)


def test_last_prompt_line_is_used_when_the_tail_holds_no_real_prompt(rows):
    row = rows["last_prompt_meta_beyond_tail_prompts"]
    assert row["first_prompt"] == "the first prompt"
    assert row["last_prompt"] == "the real last prompt"


def test_began_with_clear_for_the_clear_archetype(rows):
    assert rows["clear_archetype"]["began_with_clear"] is True
    assert rows["clear_archetype"]["title"] == "go"


def test_began_with_clear_is_false_for_an_ordinary_session(rows):
    assert rows["no_clear"]["began_with_clear"] is False


def test_branch_is_the_last_recorded_one(rows):
    assert rows["branch_changes"]["branch"] == "feature/x"


def test_empty_branch_is_null(rows):
    assert rows["branch_empty"]["branch"] is None


def test_trailing_empty_branch_does_not_hide_the_last_known_one(rows):
    assert rows["branch_empty_at_the_end"]["branch"] == "main"


def test_detached_head_branch_is_kept(rows):
    assert rows["branch_detached"]["branch"] == "HEAD"


def test_created_at_is_the_first_top_level_timestamp_not_a_nested_one(rows):
    assert rows["times"]["created_at"] == rows["_times"]["first"]


def test_last_activity_ignores_queue_operations_and_nested_timestamps(rows):
    assert rows["times"]["last_activity"] == rows["_times"]["last"]


def test_cwd_is_the_first_recorded_one(rows):
    row = rows["cwd_changes"]
    assert (row["cwd"], row["user_turns"]) == (rows["_project"], 2)


def test_fixture_writes_the_clear_markup_exactly_as_claude_code_does():
    line = Conversation("/w/app").clear()
    assert line["message"]["content"] == (
        "<command-name>/clear</command-name>\n            <command-message>clear</command-message>\n"
        "            <command-args></command-args>"
    )


# --- a long first prompt and the windows ------------------------------------------------------------

PLAN = "Implement the following plan:\n\n" + "\n".join(f"{i}. step {i}: " + "change the parser " * 6 for i in range(60))
LATER = ("now the second step", "then the third", "and the last one")


def _spread_session(folder, size: int, first: str, *, quiet_tail: int = 0):
    """A session of about ``size`` bytes: ``first``, then LATER spread evenly through tool
    output, then ``quiet_tail`` bytes of tool output with no prompt. Returns its path."""
    c = Conversation("/w/app")
    lines = [c.permission_mode(), *c.exchange(first)]
    gap = max(0, (size - quiet_tail) // (len(LATER) + 1))
    for prompt in LATER:
        lines += [*c.filler(gap, chunk=8 * KiB), *c.exchange(prompt)]
    lines += c.filler(quiet_tail, chunk=8 * KiB) if quiet_tail else []
    return write_session(folder, c.id, lines)


def _record(path):
    st = path.stat()
    return read_transcript(str(path), st.st_size, st.st_mtime_ns)


@pytest.mark.parametrize("size", [100 * KiB, 300 * KiB, 600 * KiB, 900 * KiB])
@pytest.mark.parametrize("quiet", [0, 1], ids=["prompts-to-the-end", "quiet-tail"])
def test_a_long_first_prompt_keeps_the_last_prompt_and_counts_every_turn(tmp_path, size, quiet):
    # A plan handoff (over 2,000 characters) and a file up to 1 MiB: read whole, whatever the
    # layout, so the last prompt is the last one and every prompt is counted (the head widened
    # for the first prompt used to hide every later one in it).
    path = _spread_session(tmp_path, size, PLAN, quiet_tail=quiet * size // 2)
    rec = _record(path)
    assert (rec.first_prompt, rec.first_prompt_truncated) == (PLAN[:2000], True)
    assert (rec.last_prompt, rec.user_turns, rec.user_turns_exact) == ("and the last one", 4, True)


@pytest.mark.parametrize("first", [PLAN, "a short first prompt"], ids=["long-first", "short-first"])
def test_past_the_windows_the_last_prompt_is_still_found_and_turns_count_what_was_read(tmp_path, first):
    # Every later prompt sits in the head's window; megabytes of tool output follow.
    c = Conversation("/w/app")
    lines = [c.permission_mode(), *c.exchange(first)]
    for prompt in LATER:
        lines += c.exchange(prompt)
    lines += c.filler(3 * 1024 * KiB, chunk=16 * KiB)
    rec = _record(write_session(tmp_path, c.id, lines))
    assert rec.last_prompt == "and the last one"
    assert (rec.user_turns, rec.user_turns_exact) == (4, False)  # every prompt in what was read
    assert rec.bytes_read < 5 * 1024 * KiB


def test_a_prompt_cut_by_the_heads_edge_is_read_by_the_tail(tmp_path):
    c = Conversation("/w/app")
    lines = [c.permission_mode(), *c.exchange("the first prompt")]
    while len(render(lines)) < HEAD - 6 * KiB:
        lines += c.tool_round("ok " * 500)
    straddling = "the prompt across the seam " * 400  # about 11 KiB: its line crosses 64 KiB
    lines += [*c.exchange(straddling), *c.filler(600 * KiB, chunk=16 * KiB)]
    path = write_session(tmp_path, c.id, lines)
    data = path.read_bytes()
    at = data.find(straddling[:40].encode())
    assert at < HEAD < data.find(b"\n", at)  # the line does cross the head's edge
    rec = _record(path)
    assert (rec.last_prompt, rec.user_turns) == (straddling.strip()[:2000], 2)


def test_a_grown_file_adds_its_new_prompts_to_the_count(tmp_path):
    path = _spread_session(tmp_path, 200 * KiB, PLAN)
    cached = _record(path)
    c = Conversation("/w/app")
    append_lines(path, [*c.exchange("one more"), *c.exchange("and another")])
    st = path.stat()
    grown = read_transcript(str(path), st.st_size, st.st_mtime_ns, cached)
    assert grown.bytes_read < st.st_size // 4  # only the new bytes
    assert (grown.last_prompt, grown.user_turns, grown.user_turns_exact) == ("and another", 6, True)


# --- a plan-mode handoff names the session it came from ---------------------------------------------

PREVIOUS = "7a9f27d5-e33d-4ef8-b293-cab7089f223d"


@pytest.mark.parametrize(
    "path",
    [
        f"/home/u/.claude/projects/-home-u-app/{PREVIOUS}.jsonl",
        f"C:\\Users\\u\\.claude\\projects\\C--app\\{PREVIOUS}.jsonl",
        f"/home/u/my projects/.claude/projects/-x/{PREVIOUS.upper()}.jsonl",
    ],
    ids=["posix", "windows", "spaces-and-upper-case"],
)
def test_a_plan_handoff_names_the_previous_session(path):
    c = Conversation("/w/app")
    facts = facts_of([c.permission_mode(), c.plan_handoff(PLAN[len("Implement the following plan:\n\n") :], path)])
    assert facts.handoff_from == PREVIOUS
    assert facts.first_prompt_truncated  # the name is past the 2,000 characters a row keeps


def test_a_plan_handoff_with_feedback_and_a_plan_that_quotes_the_words():
    c = Conversation("/w/app")
    plan = "Quote Claude Code: 'read the full transcript at: /tmp/00000000-0000-4000-8000-000000000000.jsonl'"
    line = c.plan_handoff(plan, f"/p/{PREVIOUS}.jsonl", feedback="keep the tests fast")
    assert facts_of([line]).handoff_from == PREVIOUS


@pytest.mark.parametrize(
    "content",
    [
        f"Please read the full transcript at: /p/{PREVIOUS}.jsonl",  # not Claude Code's handoff
        "Implement the following plan:\n\nstep 1\n\nread the full transcript at: /p/notes.jsonl",
        "Implement the following plan:\n\nstep 1",
        f"Implement the following plan:\n\nIf you need specific details from before exiting plan mode, "
        f"read the full transcript at: /p/{PREVIOUS}.json",
    ],
    ids=["not-a-plan", "not-a-session-file", "no-transcript", "not-jsonl"],
)
def test_what_is_not_a_plan_handoff_names_nothing(content):
    c = Conversation("/w/app")
    assert facts_of([c.prompt(content)]).handoff_from is None


def test_only_the_first_prompt_can_be_a_handoff():
    c = Conversation("/w/app")
    facts = facts_of([c.prompt("hello"), c.plan_handoff("step 1", f"/p/{PREVIOUS}.jsonl")])
    assert facts.handoff_from is None
