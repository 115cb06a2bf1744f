"""Forks under their root: a ``claude --resume ID --fork-session`` copy (nothing names the
parent: it shares the parent's first line) and a ``/branch`` (its copies carry ``forkedFrom``),
written as Claude Code 2.1.332 writes them. The fork's row names its parent, the parent's row
lists its forks, the chain holds both, the table puts the fork under its root, and the tokens of
the copied responses count once, toward the parent."""

from __future__ import annotations

import copy
import json
import os
from datetime import timedelta
from pathlib import Path

import pytest

from stress.transcripts import Conversation, new_id, write_session

pytestmark = pytest.mark.process


def parent_session(folder: Path, cwd: str, title: str = "parse the config") -> tuple[str, list[dict], Conversation]:
    conv = Conversation(cwd)
    lines = [conv.permission_mode(), *conv.exchange(title, "parsed"), *conv.exchange("and the env vars", "done")]
    write_session(folder, conv.id, lines)
    return conv.id, lines, conv


def fork_of(
    folder: Path,
    cwd: str,
    lines: list[dict],
    after: Conversation,
    *,
    branch: bool = False,
    prompt: str = "try it another way",
    minutes: int = 30,
    fork_id: str | None = None,
) -> str:
    """A fork written as the CLI writes one: its own first lines at the fork's time, then the
    parent's lines copied (same uuids, message ids and times; sessionId rewritten), then a turn
    of its own."""
    fork = fork_id or new_id()
    conv = Conversation(cwd, fork, start=after.clock + timedelta(minutes=minutes))
    own = (
        []
        if branch
        else [
            {
                "type": "queue-operation",
                "operation": "enqueue",
                "timestamp": conv.now(),
                "sessionId": fork,
                "content": prompt,
            }
        ]
    )
    copies = []
    for line in lines:
        c = copy.deepcopy(line)
        if "sessionId" in c:
            c["sessionId"] = fork
        if branch and "uuid" in c:
            c["forkedFrom"] = {"sessionId": after.id, "messageUuid": c["uuid"]}
        copies.append(c)
    conv.parent = copies[-1].get("uuid") or next(c["uuid"] for c in reversed(copies) if "uuid" in c)
    tail = [*conv.exchange(prompt, "another way")]
    if branch:
        tail.append({"type": "custom-title", "customTitle": "parse the config (Branch)", "sessionId": fork})
    write_session(folder, fork, [*own, *copies, *tail])
    return fork


def test_a_fork_session_is_found_by_the_first_line_it_shares(claude):
    proj = claude.project("app")
    folder = claude.folder(proj)
    parent, lines, conv = parent_session(folder, proj)
    fork = fork_of(folder, proj, lines, conv)
    other = Conversation(proj)
    write_session(folder, other.id, [other.permission_mode(), *other.exchange("unrelated work")])
    rows = claude.rows_by_id(proj)
    assert rows[fork]["forked_from"] == parent and rows[parent]["forks"] == [fork]
    assert rows[other.id]["forked_from"] is None and rows[other.id]["forks"] == []
    assert fork in rows[parent]["chain_next"] and parent in rows[fork]["chain_prev"]
    table = claude.run("sessions", "--project", proj).stdout.splitlines()
    at = next(i for i, line in enumerate(table) if line.startswith(parent[:8]))
    assert table[at + 1].startswith(fork[:8]) and "\u2514 fork: parse the config" in table[at + 1]


def test_a_branch_names_its_parent_and_siblings_share_the_root(claude):
    proj = claude.project("app")
    folder = claude.folder(proj)
    parent, lines, conv = parent_session(folder, proj)
    branch = fork_of(folder, proj, lines, conv, branch=True, minutes=10)
    second = fork_of(folder, proj, lines, conv, minutes=20, prompt="a third way")
    rows = claude.rows_by_id(proj)
    assert rows[branch]["title"] == "parse the config (Branch)"
    assert rows[branch]["forked_from"] == parent and rows[second]["forked_from"] == parent
    assert sorted(rows[parent]["forks"]) == sorted([branch, second])


@pytest.mark.parametrize("first", ["parent", "fork"])  # which file the folder lists first (the accountant's order)
def test_copied_responses_count_once_toward_the_parent(claude, first):
    proj = claude.project("app")
    folder = claude.folder(proj)
    parent, lines, conv = parent_session(folder, proj)
    for _ in range(100):  # a fork id the folder lists in the wanted place (the order follows the names' hashes)
        fork = fork_of(folder, proj, lines, conv)
        listed = [e.name[:-6] for e in os.scandir(folder) if e.name.endswith(".jsonl")]
        if listed[0] == (fork if first == "fork" else parent):
            break
        (folder / f"{fork}.jsonl").unlink()
    else:
        pytest.fail(f"no fork id is listed {first} first")
    assert claude.run("sessions", "--project", proj).returncode == 0
    stats = json.loads(claude.run("stats", "--project", proj, "--json").stdout)
    by_id = {s["id"]: s for s in stats}
    assert set(by_id) == {parent, fork}
    # the parent's two replies count toward it; the fork has its own one (the copies: once)
    assert (by_id[parent]["responses"], by_id[fork]["responses"]) == (2, 1)
    one = sum(by_id[fork]["tokens_by_model"].values())
    assert sum(by_id[parent]["tokens_by_model"].values()) == 2 * one
    rows = claude.rows_by_id(proj)
    assert (rows[parent]["tokens"]["total"], rows[fork]["tokens"]["total"]) == (2 * one, one)


def test_a_branch_right_after_the_first_turn_names_its_parent_not_the_reverse(claude):
    # As the interactive CLI 2.1.332 writes it: the parent's file-history snapshot, before its
    # first prompt, is timed after that prompt, and the branch copies from the prompt on with
    # nothing of its own before: by the timing alone the branch looks like the original.
    proj = claude.project("app")
    folder = claude.folder(proj)
    conv = Conversation(proj)
    turn = conv.exchange("sketch the importer")
    turn[0]["snapshot"]["timestamp"] = turn[2]["timestamp"]
    lines = [conv.mode(), conv.permission_mode(), *turn]
    write_session(folder, conv.id, lines)
    branch = new_id()
    copies = [
        {**copy.deepcopy(line), "sessionId": branch, "forkedFrom": {"sessionId": conv.id, "messageUuid": line["uuid"]}}
        for line in lines
        if "uuid" in line
    ]
    b = Conversation(proj, branch, start=conv.clock + timedelta(seconds=3))
    b.parent = copies[-1]["uuid"]
    write_session(
        folder,
        branch,
        [*copies, b.custom_title("sketch the importer (Branch)"), b.mode(), *b.exchange("now in the branch")],
    )
    rows = claude.rows_by_id(proj)
    assert (rows[branch]["forked_from"], rows[conv.id]["forked_from"]) == (conv.id, None)
    assert (rows[conv.id]["forks"], rows[branch]["forks"]) == ([branch], [])
    shown = claude.run("show", branch[:8], "--project", proj, "--json")
    assert json.loads(shown.stdout)["row"]["forked_from"] == conv.id
    assert f"forked from: {conv.id}" in claude.run("show", branch[:8], "--project", proj).stdout


def test_forks_that_name_each_other_make_no_loop(claude):
    proj = claude.project("app")
    folder = claude.folder(proj)
    a, b = new_id(), new_id()
    for me, other in ((a, b), (b, a)):
        conv = Conversation(proj, me)
        line = conv.prompt("a hostile pair")
        line["forkedFrom"] = {"sessionId": other, "messageUuid": line["uuid"]}
        write_session(folder, me, [conv.permission_mode(), line, *conv.reply()])
    rows = claude.rows_by_id(proj)
    assert {rows[a]["forked_from"], rows[b]["forked_from"]} in ({a, None}, {b, None})
    assert claude.run("sessions", "--project", proj).returncode == 0


def test_a_hit_in_copied_text_is_shown_once_on_the_parent(claude):
    proj = claude.project("app")
    folder = claude.folder(proj)
    parent, lines, conv = parent_session(folder, proj, "parse the zanzibar config")
    fork = fork_of(folder, proj, lines, conv, prompt="the quokka way")
    assert claude.run("sessions", "--project", proj).returncode == 0  # the catalog knows both

    def found(word: str) -> list[dict]:
        proc = claude.run("search", word, "--project", proj, "--json")
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["results"]

    copied = found("zanzibar")
    assert [(r["id"], r["also_in"]) for r in copied] == [(parent, [fork])]
    own = found("quokka")
    assert [(r["id"], r["also_in"]) for r in own] == [(fork, [])]
    text = claude.run("search", "zanzibar", "--project", proj).stdout
    assert f"also in its fork {fork[:8]}" in text
