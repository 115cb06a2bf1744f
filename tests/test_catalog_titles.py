"""Titles: custom-title > ai-title > first real prompt > first slash command; where each is found
(head, widening tail windows) and what must never become one.

One corpus of sessions is written and listed once through the CLI; each test checks one row.
"""

from __future__ import annotations

import pytest

from stress.transcripts import Conversation, text, tool_use, write_session

pytestmark = pytest.mark.process

KiB = 1024
MiB = 1024 * KiB

LONG_PROMPT = (
    "Refactor\n\nthe   retry\tloop in client.py so that it backs off exponentially; "
    + "keep-the-public-API-stable-and-add-tests-for-each-error-path-" * 6
)
PASTE_150K = "Here is the full failing log, please find the root cause:\n\n" + "\n".join(
    f"2026-05-01T10:{i % 60:02d}:00Z ERROR worker-{i} retry {i % 7} failed: connection reset" for i in range(2200)
)
PASTE_600K = "Please review this whole dump and tell me what is slow:\n\n" + "\n".join(
    f"2026-05-01T10:{i % 60:02d}:00Z INFO worker-{i} finished batch {i * 7} in {i % 97} ms" for i in range(9500)
)


def folded(value: str) -> str:
    return " ".join(value.split())


def _build(claude) -> dict[str, dict | None]:
    project = claude.project("titles")
    folder = claude.folder(project)
    ids: dict[str, str] = {}

    def add(name: str, conv: Conversation, lines: list, **kw) -> None:
        write_session(folder, conv.id, lines, **kw)
        ids[name] = conv.id

    c = Conversation(project)
    add(
        "custom_then_ai",
        c,
        [
            c.custom_title("fix-auth-token-expiry"),
            *c.exchange("Fix the auth token expiry"),
            c.ai_title("Fix authentication token expiry"),
            *c.exchange("and add a test"),
        ],
    )
    c = Conversation(project)
    add(
        "ai_then_custom",
        c,
        [
            *c.exchange("Fix the auth token expiry"),
            c.ai_title("AI one"),
            c.custom_title("my-name"),
            c.ai_title("AI two"),
        ],
    )
    c = Conversation(project)
    add(
        "last_custom_wins",
        c,
        [
            *c.exchange("Do things"),
            c.custom_title("first-name"),
            *c.exchange("more"),
            c.custom_title("second-name"),
            c.agent_name("second-name"),
        ],
    )
    c = Conversation(project)
    add(
        "last_ai_wins",
        c,
        [
            *c.exchange("Set up SSH"),
            c.ai_title("Configure SSH"),
            *c.exchange("from my phone"),
            c.ai_title("Configure SSH from phone"),
            *c.exchange("to the laptop"),
            c.ai_title("Configure SSH from phone to laptop"),
        ],
    )
    c = Conversation(project)
    add(
        "reordered_keys",
        c,
        [*c.exchange("Hello"), {"sessionId": c.id, "customTitle": "keys-in-another-order", "type": "custom-title"}],
    )
    c = Conversation(project)
    add("long_prompt", c, [c.permission_mode(), *c.exchange(LONG_PROMPT)])
    c = Conversation(project)
    add("short_multiline_prompt", c, [*c.exchange("  Fix the\n\n  flaky\ttest  ")])
    c = Conversation(project)
    add("only_clear", c, [c.mode(), c.snapshot(), c.caveat(), c.clear(), c.local_stdout()])
    c = Conversation(project)
    add(
        "clear_then_prompt",
        c,
        [
            c.caveat(),
            c.clear(),
            c.local_stdout(),
            c.queue("enqueue", "Plan the migration"),
            c.queue("dequeue"),
            *c.exchange("Plan the migration"),
        ],
    )
    c = Conversation(project)
    add(
        "escaped_custom_title_in_prompt",
        c,
        [
            *c.exchange('Why does my transcript have {"type":"custom-title","customTitle":"x"} lines?'),
            *c.exchange('And what about "aiTitle":"y" or "summary":"z"?'),
        ],
    )
    c = Conversation(project)
    add(
        "tool_input_with_title_keys",
        c,
        [
            *c.exchange("Write the release notes"),
            *c.reply(
                tool_use(
                    "Write",
                    {
                        "file_path": "/tmp/n.json",
                        "summary": "Tool summary, not a title",
                        "customTitle": "tool-custom",
                        "aiTitle": "tool-ai",
                        "content": '{"type":"custom-title","customTitle":"nested"}',
                    },
                )
            ),
            c.tool_result("toolu_01x", "File written"),
            *c.reply(text('Saved {"type":"ai-title","aiTitle":"from-text"}')),
            c.turn_duration(),
        ],
    )
    c = Conversation(project)
    add(
        "queue_content_not_a_title",
        c,
        [c.caveat(), c.clear(), c.local_stdout(), c.queue("enqueue", "queued words never sent"), c.queue("remove")],
    )
    c = Conversation(project)
    add(
        "queue_content_differs",
        c,
        [
            c.queue("enqueue", "QUEUED: the first draft"),
            c.queue("remove"),
            *c.exchange("the real prompt"),
            c.queue("enqueue", "QUEUED: a later one"),
            c.queue("remove"),
        ],
    )
    c = Conversation(project, version="2.0.76")
    add(
        "legacy_summaries",
        c,
        [
            c.summary("Redis Caching Implementation"),
            c.summary("Orphaned other branch"),
            *c.exchange("Add a Redis cache"),
            c.summary("Tail summary"),
        ],
    )
    c = Conversation(project, entrypoint="sdk-cli")
    add(
        "headless", c, [c.queue("enqueue", "Summarize the repo"), c.queue("dequeue"), *c.exchange("Summarize the repo")]
    )

    # --- big files: the head/tail windows ------------------------------------------------
    c = Conversation(project)
    add(
        "custom_title_2mib_from_end",
        c,
        [
            c.permission_mode(),
            *c.exchange("Start the data migration"),
            *c.filler(3 * MiB),
            c.custom_title("migration-night"),
            c.agent_name("migration-night"),
            *c.filler(2 * MiB + 64 * KiB),
        ],
    )
    c = Conversation(project)
    add(
        "ai_title_in_the_1mib_window",
        c,
        [
            *c.exchange("Profile the importer"),
            *c.filler(int(1.4 * MiB)),
            c.ai_title("Profile the importer"),
            *c.filler(600 * KiB),
        ],
    )
    c = Conversation(project)
    add(
        "custom_in_head_beats_later_ai",
        c,
        [
            c.custom_title("named-with-dash-n"),
            c.permission_mode(),
            *c.exchange("Build the thing"),
            *c.filler(1 * MiB),
            c.ai_title("An AI title written later"),
            *c.exchange("next step"),
        ],
    )
    c = Conversation(project)
    add(
        "huge_prompt_then_tail_title",
        c,
        [
            c.permission_mode(),
            c.snapshot(),
            c.prompt(PASTE_600K),
            *c.reply(text("Looking.")),
            *c.filler(300 * KiB),
            *c.clean_exit("what is slow?", "slow-batches"),
        ],
    )
    c = Conversation(project, version="1.0.85")
    add(
        "huge_prompt_first_line_then_tail_title",
        c,
        [
            c.prompt(PASTE_600K),
            *c.reply(text("Looking.")),
            *c.filler(300 * KiB),
            *c.clean_exit("what is slow?", "slow-batches-legacy"),
        ],
    )
    c = Conversation(project)
    add(
        "huge_prompt_no_title",
        c,
        [
            c.permission_mode(),
            c.snapshot(),
            c.prompt(PASTE_600K),
            *c.reply(text("Looking.")),
            *c.filler(300 * KiB),
        ],
    )
    c = Conversation(project)
    add(
        "huge_prompt_crashed_before_reply",
        c,
        [
            c.permission_mode(),
            c.snapshot(),
            c.prompt(PASTE_600K + "\n" + "and more of the dump " * 240_000),
        ],
    )
    c = Conversation(project)
    add(
        "paste_150k",
        c,
        [
            c.permission_mode(),
            c.snapshot(),
            c.prompt(PASTE_150K),
            *c.reply(text("Reading it.")),
            *c.filler(700 * KiB),
        ],
    )

    rows = claude.rows_by_id(project)
    return {name: rows.get(sid) for name, sid in ids.items()}


@pytest.fixture(scope="module")
def rows(module_claude):
    return _build(module_claude)


def test_every_small_corpus_session_is_listed(rows):
    missing = [name for name, row in rows.items() if row is None]
    assert [name for name in missing if name != "huge_prompt_crashed_before_reply"] == []


def test_custom_title_beats_a_later_ai_title(rows):
    assert (rows["custom_then_ai"]["title"], rows["custom_then_ai"]["title_source"]) == (
        "fix-auth-token-expiry",
        "custom-title",
    )


def test_custom_title_beats_ai_titles_on_either_side(rows):
    assert rows["ai_then_custom"]["title"] == "my-name"


def test_the_last_custom_title_wins(rows):
    assert rows["last_custom_wins"]["title"] == "second-name"


def test_the_last_ai_title_wins(rows):
    row = rows["last_ai_wins"]
    assert (row["title"], row["title_source"]) == ("Configure SSH from phone to laptop", "ai-title")


def test_custom_title_line_with_other_key_order_is_read(rows):
    assert rows["reordered_keys"]["title"] == "keys-in-another-order"


def test_first_prompt_title_is_folded_and_cut_at_200_chars_with_an_ellipsis(rows):
    row = rows["long_prompt"]
    flat = folded(LONG_PROMPT)
    assert flat[199] != " " and len(flat) > 200
    assert (row["title"], row["title_source"]) == (flat[:200] + "\u2026", "first-prompt")


def test_short_prompt_title_has_white_space_folded_and_no_ellipsis(rows):
    assert rows["short_multiline_prompt"]["title"] == "Fix the flaky test"


def test_session_of_only_clear_lines_is_titled_by_the_command(rows):
    row = rows["only_clear"]
    assert (row["title"], row["title_source"]) == ("/clear", "command")


def test_clear_then_prompt_is_titled_by_the_prompt(rows):
    row = rows["clear_then_prompt"]
    assert (row["title"], row["title_source"]) == ("Plan the migration", "first-prompt")


def test_escaped_title_text_inside_a_prompt_is_not_a_title(rows):
    row = rows["escaped_custom_title_in_prompt"]
    assert row["title_source"] == "first-prompt"
    assert row["title"] == 'Why does my transcript have {"type":"custom-title","customTitle":"x"} lines?'


def test_title_keys_inside_tool_input_or_text_are_not_a_title(rows):
    row = rows["tool_input_with_title_keys"]
    assert (row["title"], row["title_source"]) == ("Write the release notes", "first-prompt")


def test_queue_operation_content_never_becomes_the_title(rows):
    row = rows["queue_content_not_a_title"]
    assert (row["title"], row["title_source"]) == ("/clear", "command")
    assert row["first_prompt"] is None and row["last_prompt"] is None


def test_queue_operation_content_never_becomes_a_prompt(rows):
    row = rows["queue_content_differs"]
    assert (row["title"], row["first_prompt"], row["last_prompt"]) == (
        "the real prompt",
        "the real prompt",
        "the real prompt",
    )
    assert row["user_turns"] == 1


def test_legacy_summary_lines_are_never_the_title(rows):
    row = rows["legacy_summaries"]
    assert (row["title"], row["title_source"]) == ("Add a Redis cache", "first-prompt")


def test_headless_session_is_titled_by_its_prompt_and_keeps_its_entrypoint(rows):
    row = rows["headless"]
    assert (row["title"], row["entrypoint"], row["user_turns"]) == ("Summarize the repo", "sdk-cli", 1)


# --- big files ----------------------------------------------------------------------------------


def test_custom_title_2mib_before_the_end_is_found_by_widening_the_tail(rows):
    row = rows["custom_title_2mib_from_end"]
    assert row["size"] > 5 * MiB
    assert (row["title"], row["title_source"]) == ("migration-night", "custom-title")
    assert row["first_prompt"] == "Start the data migration"


def test_ai_title_in_the_1mib_tail_window_is_found(rows):
    row = rows["ai_title_in_the_1mib_window"]
    assert (row["title"], row["title_source"]) == ("Profile the importer", "ai-title")


def test_custom_title_only_in_the_head_beats_a_later_ai_title(rows):
    row = rows["custom_in_head_beats_later_ai"]
    assert row["size"] > 1 * MiB
    assert (row["title"], row["title_source"]) == ("named-with-dash-n", "custom-title")


def test_big_file_not_read_whole_reports_user_turns_as_not_exact(rows):
    row = rows["custom_title_2mib_from_end"]
    assert row["user_turns_exact"] is False
    assert row["user_turns"] <= 1


def test_prompt_longer_than_the_wide_head_yields_its_first_200_chars(rows):
    row = rows["huge_prompt_then_tail_title"]
    assert len(PASTE_600K.encode()) > 512 * KiB
    assert row["first_prompt"].startswith(folded(PASTE_600K)[:200])
    assert row["first_prompt_truncated"] is True
    assert (row["title"], row["title_source"]) == ("slow-batches", "custom-title")


def test_prompt_longer_than_the_wide_head_on_the_first_line_yields_its_first_200_chars(rows):
    row = rows["huge_prompt_first_line_then_tail_title"]
    assert row["first_prompt"].startswith(folded(PASTE_600K)[:200])
    assert row["first_prompt_truncated"] is True
    assert row["title"] == "slow-batches-legacy"


def test_prompt_longer_than_the_wide_head_without_a_title_is_titled_by_its_start(rows):
    row = rows["huge_prompt_no_title"]
    assert row["title_source"] == "first-prompt"
    assert row["title"].startswith(folded(PASTE_600K)[:150])
    assert '"' not in row["title"] and "\\n" not in row["title"]


def test_crashed_session_whose_only_line_is_a_huge_prompt_is_listed_with_its_start(rows):
    # Archetype 2b: the first (and only) user line is longer than every window, no reply yet.
    row = rows["huge_prompt_crashed_before_reply"]
    assert row is not None, "a session with a user line was skipped as metadata-only"
    assert row["size"] > 5 * MiB
    assert row["first_prompt"].startswith(folded(PASTE_600K)[:200])
    assert row["title_source"] == "first-prompt"


def test_pasted_150k_first_prompt_is_found_whole_then_capped_at_2000_chars(rows):
    row = rows["paste_150k"]
    assert row["size"] > 768 * KiB
    assert row["first_prompt"] == PASTE_150K.strip()[:2000]
    assert row["first_prompt_truncated"] is True
    assert row["title"] == folded(PASTE_150K)[:200] + "\u2026"
