"""Linear time on any text: the catalog's classifier, the price table's model ids, and every
door over transcripts that hold pathological text (a ``<command-name>`` and a long run of blank
space with no closing tag made the old pattern run in cubic time: 18 KB took hours).

The in-process checks run in a child process with a time limit: a pattern that ran away would
hold the interpreter lock, so the limit is what turns a hang into a failure. The limit is
generous (these take milliseconds); it is a hang guard, not a timing assertion."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import pytest

from stress.transcripts import Conversation, write_session

pytestmark = pytest.mark.process

HANG_GUARD_S = 120


def _child(code: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_markup_is_found_without_backtracking():
    out = _child("""
        import json
        from c3async.catalog.extract import classify_text
        n = 200_000
        cases = {
            "blank run, no close": "<command-name>" + "\\n" * n + "x",
            "words, no close": "<command-name>" + "word " * n,
            "many unclosed": "<command-name> " * n,
            "unclosed args": "<command-name>/review</command-name><command-args>" + " " * n,
            "many unclosed args": "<command-name>/x</command-name>" + "<command-args>a " * n,
            "unclosed bash": "<bash-input>" + " " * n,
            "closed after a long run": "<command-name>" + " " * n + "/clear</command-name>",
            "custom command, long args": "<command-name>/review</command-name><command-args>" + "a" * n + "</command-args>",
            "a real prompt after blanks": "\\n" * n + "fix the retry test",
            "closed past the cap": "<command-name>" + " " * (2 << 20) + "/clear</command-name>",
        }
        print(json.dumps({k: classify_text(v) for k, v in cases.items()}))
    """)
    got = json.loads(out)
    assert got["blank run, no close"] is None  # markup without its closing tag: not a prompt
    assert got["words, no close"] is None
    assert got["many unclosed"] is None
    assert got["unclosed args"] == ["command", "/review"]
    assert got["many unclosed args"] == ["command", "/x"]
    assert got["unclosed bash"] is None
    assert got["closed after a long run"] == ["command", "/clear"]
    kind, text = got["custom command, long args"]
    assert kind == "prompt" and text.startswith("/review aaa")
    assert got["a real prompt after blanks"] == ["prompt", "fix the retry test"]
    assert got["closed past the cap"] is None  # looked for in the first MiB only: markup, never a prompt


def test_the_classifier_keeps_its_meaning():
    from c3async.catalog.extract import classify_text

    assert classify_text(
        "<command-name>/clear</command-name>\n  <command-message>clear</command-message>\n"
        "  <command-args></command-args>"
    ) == ("command", "/clear")
    assert classify_text(
        "<command-message>review</command-message>\n<command-name>/review</command-name>\n"
        "<command-args>PR 12</command-args>"
    ) == ("prompt", "/review PR 12")
    assert classify_text("<command-name>/model</command-name><command-args>opus</command-args>") == (
        "command",
        "/model opus",
    )
    assert classify_text("  <bash-input>ls -la</bash-input>") == ("prompt", "! ls -la")
    assert classify_text(" [Image #3] ") is None
    assert classify_text("[Request interrupted by user for tool use]") is None
    assert classify_text("<system-reminder>x</system-reminder>") is None
    assert classify_text("<Button> is broken") == ("prompt", "<Button> is broken")
    assert classify_text("   ") is None
    big = "fix it " * 400_000  # a real 2.8 MB paste comes back whole
    assert classify_text(big) == ("prompt", big.strip())


def test_model_ids_are_normalised_as_the_old_pattern_did():
    """The trailing-tag pattern ``\\[[^\\]]*\\]$`` was quadratic on a run of ``[``; its
    replacement must drop exactly what it dropped (checked against it on short ids)."""
    import random

    from c3async.usage.prices import normalise

    tag, date = re.compile(r"\[[^\]]*\]$"), re.compile(r"-\d{8}$")

    def old(model: str) -> str:
        return date.sub("", tag.sub("", model.strip().lower())).replace(".", "-")

    rng = random.Random(7)
    for _ in range(50_000):
        s = "".join(rng.choice("a[]-1.Z ") for _ in range(rng.randint(0, 14)))
        if rng.random() < 0.3:
            s += "-20250101"
        assert normalise(s) == old(s), s
    assert normalise("claude-sonnet-4-5-20250929[1m]") == "claude-sonnet-4-5"
    out = _child("""
        from c3async.usage.prices import normalise
        print(len(normalise("[" * 2_000_000 + "]")), len(normalise("x" + "]" * 2_000_000)))
    """)
    assert out.split() == ["0", str(2_000_001)]


def test_every_pattern_in_the_package_is_audited():
    """The hostile suite times each pattern the way the code applies it; one it does not know
    of would go untimed."""
    from stress.hostile_patterns import AUDIT, discover

    found = discover()
    assert sorted(set(found) - set(AUDIT)) == []
    assert sorted(set(AUDIT) - set(found)) == []  # and the audit names nothing that is gone


PAYLOADS = [
    "<command-name>" + "\n" * 30_000 + "x",
    "<command-name> " * 4_000,
    "<command-name>/x</command-name>" + "<command-args>a " * 4_000,
    "[" * 60_000,
    "<" + "a" * 60_000,
    "\\" * 60_000,
]


def test_every_door_handles_a_project_of_pathological_transcripts(claude):
    """The listing, ``show`` with its turns, ``search`` and the stats all finish, and list what
    is there: the text sits in prompts, replies, tool output and a sub-agent's file."""
    project = claude.project("app")
    folder = claude.folder(project)
    ids = []
    for i, payload in enumerate(PAYLOADS):
        conv = Conversation(project)
        lines = [
            conv.permission_mode(),
            *conv.exchange(payload, payload),
            *conv.tool_round(payload),
            *conv.exchange(f"the real question {i}", "an answer"),
        ]
        write_session(folder, conv.id, lines)
        side = Conversation(project, conv.id, sidechain=True)
        write_session(folder / conv.id / "subagents", "agent-a1", [side.prompt(payload), *side.reply()])
        ids.append(conv.id)
    rows = {r["id"]: r for r in claude.sessions(project)}
    assert sorted(rows) == sorted(ids)
    for sid in ids:
        proc = claude.run("show", sid, "--project", project, "--turns", "5")
        assert proc.returncode == 0, proc.stderr
        assert "the real question" in proc.stdout
    proc = claude.run("search", "real question", "--project", project, "--json")
    assert proc.returncode == 0, proc.stderr
    assert {r["id"] for r in json.loads(proc.stdout)["results"]} == set(ids)
    proc = claude.run("stats", "--project", project, "--json")
    assert proc.returncode == 0, proc.stderr
