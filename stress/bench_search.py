"""The full-text search benchmark: building the index, keeping it current, and querying it.

    python -m stress.bench_search [--transcripts N] [--runs R] [--keep DIR] [--no-big]

Run from the repository root. It generates the standard corpus once (``stress.corpus``; with
``--keep DIR`` generated into DIR or reused from there, as ``stress.bench_catalog`` does), then
works on a copy of its projects folder (hard links; a file it changes is copied first, so the
kept corpus is never modified) in which it plants made-up words and phrases (an identifier, a
path, a three-word phrase, a CJK run, and text with a quote, a newline and ``\\u00e9``):

- in what was said: a user prompt in the middle of the largest session, an assistant's text,
  and a sub-agent's text (``<session>/subagents/agent-<id>.jsonl``): every query must find
  exactly these sessions, with a snippet of the right role;
- in a tool's output only (a ``tool_result``): found with ``--tools``, never without;
- in metadata only, one session per carrier (a ``cwd``, a ``file-history-snapshot``, thinking,
  the ``toolUseResult`` copy of an Edit, an ``isMeta`` line, a compact summary, a removed
  ``queue-operation``, a ``last-prompt``): never found.

The ground truth is written to ``planted.json`` (and, with ``--keep``, ``DIR/search-planted.json``).
Then it measures and prints, with the budgets of DESIGN.md §7 beside the figures:

- the first build, whole ``c3async index --json`` processes on an empty ``$C3_HOME`` (R runs,
  each from scratch): wall time, bytes, index size (and % of the transcripts), passages; the
  same in-process (``index.update``) with its progress callbacks; whether progress is printed
  with stderr on a terminal and on a pipe; how much text the index was given, and how much of
  it distinct (the corpus's text pools repeat: size and build time depend on distinct text);
- incremental updates: ~1 MiB of new turns appended to each of 10 transcripts (bytes read vs
  bytes appended), and an update with nothing changed;
- query latency for each kind of query (rare word, phrase, prefix, identifier part, path, CJK,
  decoded escapes): warm in-process ``search()`` (median of 20) and whole
  ``c3async search Q --all --json`` processes (median of R), beside ``rg -l -F`` and ``rg -c -F``
  over the raw files for the same rare word;
- recall of the planted sessions and false hits from tool output and metadata.

It asserts nothing about time (a figure over its budget is marked OVER). It exits 1 if a command
fails, a planted session is missed, a tool-output or metadata plant is found where it must not
be, a snippet of a hit has no hit marked, an update reads what it should not, or a build's
progress never advances. The page cache stays warm throughout.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

import msgspec

from stress.bench_catalog import (
    Run,
    c3async_command,
    corpus_args,
    installed_copy_differs,
    json_rows,
    load_or_generate,
    median_range,
    report_failures,
    run_child,
)

# The corpus's own line writer, for realistic turns appended to live sessions.
from stress.corpus import Corpus, KiB, MiB, _j, _Pools, _prompt, _Writer
from stress.figures import Table

RG = "/usr/bin/rg"
APPEND_FILES = 10
APPEND_BYTES = 1 * MiB  # per transcript, per incremental run
QUERY_RUNS = 20  # warm in-process queries per kind, after one warm-up

# Budgets (DESIGN.md §7).
BUDGET_QUERY_S = 0.020
BUDGET_BUILD_S = 5.0
BUDGET_SIZE = 0.40

WORD = "quokka_retry_budget_7"
PHRASE = "umber heron protocol"
PATH = "src/http/kestrel_client.py"
CJK_RUN = "日志说袋鼠重试预算已用尽"
ESCAPED = 'he said "marmoset ledger"\nthen vérifié_pangolin'  # é is written as \u00e9
NEEDLE = f"While chasing {WORD} in {PATH} the {PHRASE} stalled ({CJK_RUN}); {ESCAPED}."

# (kind, query, the literal rg is given for the same thing, or None)
QUERIES = (
    ("rare word", WORD, WORD),
    ("phrase", f'"{PHRASE}"', PHRASE),
    ("prefix", "quokka_ret*", None),
    ("identifier part", "retry_budget", "retry_budget"),
    ("path (file name)", "kestrel_client.py", "kestrel_client.py"),
    ("path (whole)", PATH, PATH),
    ("CJK inside a run", "重试预算", "重试预算"),
    ("decoded \\u00e9", "vérifié_pangolin", "vérifié_pangolin"),
    ("accents folded", "verifie_pangolin", None),
    ('phrase across \\" and \\n', '"marmoset ledger then vérifié"', None),
)
ABSENT = '"heron umber protocol"'  # the phrase's words out of order: no session may match

USAGE = {
    "input_tokens": 3,
    "cache_creation_input_tokens": 1200,
    "cache_read_input_tokens": 24000,
    "cache_creation": {"ephemeral_5m_input_tokens": 1200, "ephemeral_1h_input_tokens": 0},
    "output_tokens": 180,
    "service_tier": "standard",
}
COMPACT = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The summary below covers the earlier portion of the conversation.\n\n"
)


# --------------------------------------------------------------------------------------------
# Planting
# --------------------------------------------------------------------------------------------


@dataclass
class Plant:
    where: str  # what carries the needle
    session: str
    path: str  # the file written
    role: str | None  # the snippet role a search must show; None: never to be found
    tools_only: bool = False
    agent: str | None = None  # a sub-agent file's name (without .jsonl)


def _encode(lines: list[dict]) -> bytes:
    """Compact JSON lines, non-ASCII raw as JSON.stringify writes it, except é written as the
    escape \\u00e9 (valid inside any JSON string; the JSON around it has none)."""
    return b"".join(
        (json.dumps(x, ensure_ascii=False, separators=(",", ":")).replace("é", "\\u00e9") + "\n").encode()
        for x in lines
    )


def _link_tree(src: Path, dst: Path) -> None:
    def link(s: str, d: str) -> None:
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)

    shutil.copytree(src, dst, copy_function=link)


def _write_own(path: Path, data: bytes) -> None:
    """Replace ``path`` (maybe a hard link into the kept corpus) with a file of its own."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _middle(data: bytes) -> int:
    """A turn boundary (a file-history-snapshot line) about halfway through ``data``."""
    at = data.find(b'\n{"type":"file-history-snapshot"', len(data) // 2)
    if at < 0:
        at = data.find(b"\n", len(data) // 2)
    return at + 1 if at >= 0 else len(data)


class _Lines:
    """Chain lines in a session's own envelope (its chain line just before ``at``), in the
    2.1.x key order; ``agent``: a sub-agent's lines (sidechain, agentId, a new chain)."""

    def __init__(self, data: bytes, at: int, rng: random.Random, agent: str | None = None) -> None:
        pos = data.rfind(b'\n{"parentUuid":', 0, at)
        if pos < 0:
            pos = data.find(b'\n{"parentUuid":')
        env = json.loads(data[pos + 1 : data.index(b"\n", pos + 1)])
        self.rng = rng
        self.agent = agent
        self.parent = None if agent else env["uuid"]
        self.ts = env["timestamp"]
        self.sid = env["sessionId"]
        self.cwd = env["cwd"]
        self.tail = {
            k: env[k] for k in ("userType", "entrypoint", "cwd", "sessionId", "version", "gitBranch") if k in env
        }

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def b62(self, n: int) -> str:
        return "".join(self.rng.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", k=n))

    def _chain(
        self, kind: str, body: dict, *, before: dict | None = None, after: dict | None = None, **flags: object
    ) -> dict:
        line: dict = {"parentUuid": self.parent, "isSidechain": self.agent is not None}
        if kind == "user" and not flags.get("isMeta"):
            line["promptId"] = self.uuid()
        if self.agent:
            line["agentId"] = self.agent.removeprefix("agent-")
        line["type"] = kind
        line.update(body)
        line.update(flags)
        line.update(before or {})
        line["uuid"] = self.parent = self.uuid()
        line["timestamp"] = self.ts
        line.update(after or {})
        line.update(self.tail)
        return line

    def user(self, content: object, **flags: object) -> dict:
        return self._chain("user", {"message": {"role": "user", "content": content}}, **flags)

    def assistant(self, block: dict, stop: str = "end_turn") -> dict:
        msg = {
            "model": "claude-opus-4-5-20251101",
            "id": "msg_01" + self.b62(22),
            "type": "message",
            "role": "assistant",
            "content": [block],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": USAGE,
        }
        return self._chain("assistant", {"message": msg}, before={"requestId": "req_011C" + self.b62(18)})

    def text(self, text: str) -> dict:
        return self.assistant({"type": "text", "text": text})

    def tool_round(self, name: str, tool_input: dict, content: object, result: dict) -> list[dict]:
        tid = "toolu_01" + self.b62(22)
        call = self.assistant({"type": "tool_use", "id": tid, "name": name, "input": tool_input}, "tool_use")
        body = {
            "message": {
                "role": "user",
                "content": [{"tool_use_id": tid, "type": "tool_result", "content": content, "is_error": False}],
            }
        }
        return [
            call,
            self._chain("user", body, after={"toolUseResult": result, "sourceToolAssistantUUID": call["uuid"]}),
        ]

    def snapshot(self, backups: dict) -> dict:
        mid = self.uuid()
        return {
            "type": "file-history-snapshot",
            "messageId": mid,
            "snapshot": {"messageId": mid, "trackedFileBackups": backups, "timestamp": self.ts},
            "isSnapshotUpdate": False,
        }


def _cwd_carrier(lines: _Lines) -> list[dict]:
    line = lines.user("Run the whole suite again, please.")
    line["cwd"] = f"/srv/{NEEDLE}"
    return [line, lines.text("Running it now.")]


def _edit_carrier(lines: _Lines) -> list[dict]:
    path = f"{lines.cwd}/src/http/client.py"
    result = {
        "filePath": path,
        "oldString": "timeout=5",
        "newString": "timeout=30",
        "originalFile": NEEDLE,
        "structuredPatch": [
            {"oldStart": 3, "oldLines": 1, "newStart": 3, "newLines": 1, "lines": ["-timeout=5", "+timeout=30"]}
        ],
        "userModified": False,
        "replaceAll": False,
    }
    return [
        lines.user("Raise the client timeout."),
        *lines.tool_round(
            "Edit",
            {"file_path": path, "old_string": "timeout=5", "new_string": "timeout=30", "replace_all": False},
            f"The file {path} has been updated successfully.",
            result,
        ),
        lines.text("Done: the timeout is 30 s now."),
    ]


# Each way a transcript holds the needle without anyone having said it: never to be found.
METADATA_CARRIERS = {
    "a cwd value": _cwd_carrier,
    "a file-history-snapshot": lambda L: [
        L.snapshot({NEEDLE: {"backupFileName": "5f0c9a7e21d4b3a8@v2", "version": 2, "backupTime": L.ts}})
    ],
    "thinking": lambda L: [
        L.user("Think it through before changing anything."),
        L.assistant({"type": "thinking", "thinking": NEEDLE, "signature": "EqQBCkYIBRgCKkB" + "A" * 200}),
        L.text("The fix belongs in the retry loop."),
    ],
    "toolUseResult only (an Edit's originalFile)": _edit_carrier,
    "an isMeta line": lambda L: [L.user(NEEDLE, isMeta=True)],
    "a compact summary": lambda L: [L.user(COMPACT + NEEDLE, isCompactSummary=True, isVisibleInTranscriptOnly=True)],
    "a queue-operation (enqueued, removed)": lambda L: [
        {"type": "queue-operation", "operation": "enqueue", "timestamp": L.ts, "sessionId": L.sid, "content": NEEDLE},
        {"type": "queue-operation", "operation": "remove", "timestamp": L.ts, "sessionId": L.sid},
    ],
    "a last-prompt": lambda L: [{"type": "last-prompt", "lastPrompt": " ".join(NEEDLE.split()), "sessionId": L.sid}],
}


@dataclass
class Append:
    session: str
    path: Path
    cwd: str
    branch: str


def plant(corpus: Corpus, src: Path, dst: Path, rng: random.Random) -> tuple[list[Plant], list[Append]]:
    """Plant the needle in the copy ``dst`` of the projects folder ``src``; also pick (and give
    files of their own) the transcripts the incremental runs append to."""
    truth = corpus.expected

    def local(sid: str) -> Path:
        return dst / Path(truth[sid]["path"]).relative_to(src)

    largest = max(truth, key=lambda s: truth[s]["size"])
    ordinary = sorted(
        s
        for s, e in truth.items()
        if s != largest
        and e["kind"] != "headless"
        and not e["big"]
        and not e["pasted"]
        and 64 * KiB <= e["size"] <= 4 * MiB
    )
    picked = rng.sample(ordinary, 3 + len(METADATA_CARRIERS) + APPEND_FILES)
    plants: list[Plant] = []

    def insert(sid: str, make) -> Path:
        path = local(sid)
        data = path.read_bytes()
        at = _middle(data)
        _write_own(path, data[:at] + _encode(make(_Lines(data, at, rng))) + data[at:])
        return path

    # (a) a user prompt half-way through the largest session
    p = insert(
        largest,
        lambda L: [L.snapshot({}), L.user(f"Back to the stall. {NEEDLE}"), L.text("Let me look at the client.")],
    )
    plants.append(
        Plant(
            f"a user prompt mid-way through the largest session ({truth[largest]['size'] / MiB:.0f} MiB)",
            largest,
            str(p),
            "user",
        )
    )
    # (b) the assistant's text
    sid = picked.pop()
    p = insert(
        sid,
        lambda L: [
            L.snapshot({}),
            L.user("What did the logs say about the stall?"),
            L.text(f"I found it in the logs. {NEEDLE}"),
        ],
    )
    plants.append(Plant("assistant text", sid, str(p), "assistant"))
    # (c) a sub-agent's text, in a file of its own under the parent session's folder
    sid = picked.pop()
    parent = local(sid).read_bytes()
    agent = f"agent-a{rng.getrandbits(64):016x}"
    folder = local(sid).parent / sid / "subagents"
    folder.mkdir(parents=True)
    lines = _Lines(parent, len(parent) // 2, rng, agent=agent)
    sub = [
        lines.user("Find out why the HTTP client stalls and report back."),
        *lines.tool_round(
            "Grep",
            {"pattern": "stall", "path": lines.cwd, "output_mode": "files_with_matches"},
            "Found 2 files\nsrc/http/pool.py\nsrc/http/retry.py",
            {"mode": "files_with_matches", "filenames": ["src/http/pool.py", "src/http/retry.py"], "numFiles": 2},
        ),
        lines.text(f"Report: {NEEDLE}"),
    ]
    (folder / f"{agent}.jsonl").write_bytes(_encode(sub))
    (folder / f"{agent}.meta.json").write_text(
        json.dumps({"agentType": "general-purpose", "description": "Investigate the HTTP stall"})
    )
    plants.append(Plant("a sub-agent's text", sid, str(folder / f"{agent}.jsonl"), "assistant", agent=agent))
    # (d) a tool's output only
    sid = picked.pop()
    log = f"2026-05-01 12:00:00,123 ERROR [client] {NEEDLE}\n2026-05-01 12:00:01,004 INFO [client] reconnected"
    p = insert(
        sid,
        lambda L: [
            L.snapshot({}),
            L.user("Check the server log."),
            *L.tool_round(
                "Bash",
                {"command": "tail -50 logs/app.log", "description": "Show the end of the server log"},
                log,
                {"stdout": log, "stderr": "", "interrupted": False, "isImage": False, "noOutputExpected": False},
            ),
            L.text("The log shows the client stalled; I'll dig in."),
        ],
    )
    plants.append(Plant("tool output only (a Bash tool_result)", sid, str(p), "tool", tools_only=True))
    # (e) metadata only: one session per carrier
    for name, carrier in METADATA_CARRIERS.items():
        sid = picked.pop()
        p = insert(sid, carrier)
        plants.append(Plant(f"metadata only: {name}", sid, str(p), None))
    appends = []
    for sid in picked:
        path = local(sid)
        _write_own(path, path.read_bytes())  # its own inode from the start: later appends are appends
        appends.append(Append(sid, path, truth[sid]["cwd"], truth[sid]["branch"]))
    return plants, appends


def more_turns(pools: _Pools, a: Append, size: int, rng: random.Random, marker: str) -> bytes:
    """~``size`` bytes of new turns for a live session, the last prompt naming ``marker``."""
    w = _Writer(rng, pools, a.session, a.cwd, a.branch, "cli", int(time.time() * 1000))
    while w.size + 45 * KiB < size:
        text = _prompt(rng)
        w.turn(_j(text), text, ai_titles=None)
    text = f"One more thing: {marker} is the ticket for this."
    w.turn(_j(text), text, ai_titles=None)
    return "".join(w.parts).encode()


# --------------------------------------------------------------------------------------------
# Checking answers against the ground truth
# --------------------------------------------------------------------------------------------


class Truth:
    def __init__(self, plants: list[Plant]) -> None:
        self.plants = plants
        self.talk = {p.session: p for p in plants if p.role and not p.tools_only}
        self.tool = {p.session: p for p in plants if p.tools_only}
        self.never = {p.session: p for p in plants if p.role is None}
        # tallies over every check
        self.wanted = self.found = 0
        self.tool_false = self.tool_checks = 0
        self.tool_found = self.tool_wanted = 0
        self.meta_false = self.meta_checks = 0
        self.others = 0
        self.snippets_ok = self.snippets = 0

    def check(self, doc: dict, what: str, tools: bool, failures: list[str]) -> int:
        """Compare one search answer (the JSON shape) with the plants; returns sessions found."""
        results = {r["id"]: r for r in doc.get("results", [])}
        found = set(results)
        for problem in doc.get("problems", []):
            failures.append(f"{what}: problem reported: {problem}")
        want = dict(self.talk, **(self.tool if tools else {}))
        self.wanted += len(self.talk)
        self.found += len(found & set(self.talk))
        for sid in sorted(set(want) - found):
            failures.append(f"{what}: missed the plant in {want[sid].where} ({sid})")
        if tools:
            self.tool_wanted += len(self.tool)
            self.tool_found += len(found & set(self.tool))
        else:
            self.tool_checks += len(self.tool)
            for sid in sorted(found & set(self.tool)):
                self.tool_false += 1
                failures.append(f"{what}: found the tool-output-only plant ({sid}) without --tools")
        self.meta_checks += len(self.never)
        for sid in sorted(found & set(self.never)):
            self.meta_false += 1
            failures.append(f"{what}: found the plant in {self.never[sid].where} ({sid}), which must never match")
        others = found - set(want) - set(self.tool) - set(self.never)
        if others:
            self.others += len(others)
            failures.append(f"{what}: {len(others)} sessions without a plant found, e.g. {sorted(others)[0]}")
        if doc.get("total") != len(found) and len(found) < 20:
            failures.append(f"{what}: total {doc.get('total')} but {len(found)} results")
        for sid in found & set(want):
            p = want[sid]
            snips = results[sid].get("snippets") or []
            self.snippets += 1
            good = [
                s
                for s in snips
                if s["role"] == p.role
                and s["marks"]
                and (p.agent is None or (s["sidechain"] and s.get("agent") == p.agent))
            ]
            if good:
                self.snippets_ok += 1
            else:
                shown = [(s["role"], s["sidechain"], s.get("agent"), bool(s["marks"])) for s in snips]
                failures.append(
                    f"{what}: no {p.role} snippet with a marked hit for {p.where} ({sid}); "
                    f"snippets (role, sidechain, agent, marked): {shown}"
                )
        return len(found)


# --------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------


def _tree_bytes(root: Path) -> tuple[int, int]:
    """(bytes, files) of every transcript under ``root``."""
    total = n = 0
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            if name.endswith(".jsonl"):
                total += os.lstat(os.path.join(dirpath, name)).st_size
                n += 1
    return total, n


def _index_files(home: Path) -> tuple[int, int]:
    """(bytes of the index's databases, of which in WAL files)."""
    total = wal = 0
    for f in (home / "search").glob("index-*.db*"):
        size = f.stat().st_size
        total += size if not f.name.endswith("-shm") else 0
        wal += size if f.name.endswith("-wal") else 0
    return total, wal


def _index_rows(home: Path) -> tuple[int, int]:
    """(passages, distinct texts, i.e. FTS rows) over the shards, read-only."""
    passages = blobs = 0
    for f in sorted((home / "search").glob("index-*.db")):
        conn = sqlite3.connect(f"file:{f}?mode=ro", uri=True)
        try:
            passages += conn.execute("SELECT count(*) FROM passages").fetchone()[0]
            blobs += conn.execute("SELECT count(*) FROM blobs").fetchone()[0]
        finally:
            conn.close()
    return passages, blobs


def text_volume(root: Path) -> tuple[int, int]:
    """(bytes of text the index is given, of which distinct) over every transcript under ``root``,
    read as the indexer reads them: what the index's size and build time really depend on."""
    import hashlib

    from c3async.search.passages import TOOL, Job, read_file

    total = 0
    distinct: dict[bytes, int] = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            if name.endswith(".jsonl"):
                path = os.path.join(dirpath, name)
                found = read_file(Job(path, None, False, 0, 0, b"", os.path.getsize(path)))
                for p in found.passages if found else ():
                    data = p.text.encode("utf-8", "surrogatepass")
                    total += len(data)
                    distinct[hashlib.blake2b(data, digest_size=16, person=b"%d" % (p.kind == TOOL)).digest()] = len(
                        data
                    )
    return total, sum(distinct.values())


def index_doc(run: Run, what: str, failures: list[str], files: int) -> dict | None:
    """The ``c3async index --json`` summary of a run that must have indexed everything."""
    doc = json_rows(run, what, failures)
    if doc is None:
        return None
    if doc.get("errors"):
        failures.append(f"{what}: errors: {doc['errors'][:3]}")
    if doc.get("busy") or doc.get("pending_bytes"):
        failures.append(f"{what}: busy={doc.get('busy')} pending_bytes={doc.get('pending_bytes')}")
    if doc.get("files") != files:
        failures.append(f"{what}: {doc.get('files')} transcripts known, expected {files}")
    return doc


def tty_run(argv: list[str], env: dict[str, str]) -> tuple[float, int, bytes, bytes]:
    """Run with stderr on a pseudo-terminal: (wall, exit status, what stderr showed, stdout)."""
    import pty

    master, slave = pty.openpty()
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen = bytearray()
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal's last descriptor
            break
        if not chunk:
            break
        seen += chunk
    out = proc.stdout.read() if proc.stdout else b""
    rc = proc.wait()
    wall = time.perf_counter() - started
    os.close(master)
    if proc.stdout:
        proc.stdout.close()
    return wall, rc, bytes(seen), out


def _add(t: Table, label: str, figure: tuple[str, str], more: str = "") -> None:
    """A row of a median [min–max] figure, with more said after the range."""
    t.add(label, figure[0], f"{figure[1]}  {more}".strip())


def _budget(ok: bool, text: str) -> str:
    return f"budget {text}: {'ok' if ok else 'OVER'}"


def _ms(values: list[float]) -> tuple[str, str]:
    return median_range(values, "ms", 1e-3, 1)


def main(argv: list[str] | None = None) -> int:
    args = corpus_args("stress.bench_search", __doc__, argv)
    R = max(1, args.runs)

    corpus, root, reused = load_or_generate(args)
    work = Path(tempfile.mkdtemp(prefix="bench-search-", dir=root))  # same filesystem: hard links
    try:
        return bench(corpus, root, reused, work, R, bool(args.keep), args.json)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def bench(corpus: Corpus, root: Path, reused: bool, work: Path, R: int, keep: bool, json_out: str | None) -> int:
    failures: list[str] = []
    src = Path(corpus.config_dir) / "projects"
    config = work / "config"
    projects = config / "projects"
    print("copying the corpus (hard links) and planting ...", file=sys.stderr)
    _link_tree(src, projects)
    rng = random.Random(20260501)
    plants, appends = plant(corpus, src, projects, rng)
    truth = Truth(plants)
    doc = {
        "needle": NEEDLE,
        "queries": [q for _, q, _ in QUERIES],
        "absent": ABSENT,
        "plants": [asdict(p) for p in plants],
        "appended_to": [a.session for a in appends],
    }
    (work / "planted.json").write_text(json.dumps(doc, ensure_ascii=False, indent=1))
    if keep:
        shutil.copy(work / "planted.json", root / "search-planted.json")
    corpus_bytes, corpus_files = _tree_bytes(projects)

    cmd = c3async_command()
    base_env = dict(os.environ, CLAUDE_CONFIG_DIR=str(config))
    for var in ("CLAUDE_PROJECT_DIR", "C3_HOME"):
        base_env.pop(var, None)

    def env_for(home: Path) -> dict[str, str]:
        return dict(base_env, C3_HOME=str(home))

    have_rg = os.access(RG, os.X_OK)
    if have_rg:  # warm the page cache (a reused corpus may be cold)
        subprocess.run([RG, "-c", "-F", WORD, str(projects)], stdout=subprocess.DEVNULL, check=False)
    else:
        for dirpath, _dirs, names in os.walk(projects):
            for name in names:
                with open(os.path.join(dirpath, name), "rb") as f:
                    while f.read(1 << 20):
                        pass

    t = Table("bench_search")
    largest = plants[0]
    t.section("corpus (a hard-linked copy of the standard corpus, with planted phrases)")
    t.add(
        "transcripts / projects",
        f"{corpus.files} / {len(corpus.project_dirs)}",
        f"(+1 planted sub-agent file: {corpus_files} files)",
    )
    t.add(
        "transcript bytes", f"{corpus_bytes / MiB:.1f} MiB", f"[largest {os.path.getsize(largest.path) / MiB:.1f} MiB]"
    )
    t.add("corpus generation", "reused" if reused else f"{corpus.seconds:.1f} s", f"({root})")
    t.add(
        "planted",
        f"{len(plants)} sessions",
        "(3 said, 1 tool output only, "
        f"{len(truth.never)} metadata only; {len(appends)} more appended to; ground truth {work / 'planted.json'}"
        + (f", kept as {root / 'search-planted.json'})" if keep else ")"),
    )
    t.add("command", " ".join(os.path.basename(c) for c in cmd), "index --json / search Q --all --json")
    stale = installed_copy_differs()
    if stale:
        t.add("WARNING", "stale install", f"{stale}: whole-process figures are not this checkout's")

    # ---- first build, whole process, from scratch each time
    print("first builds ...", file=sys.stderr)
    builds: list[Run] = []
    docs: list[dict] = []
    home = work / "home-0"
    for i in range(R):
        if i:
            shutil.rmtree(home, ignore_errors=True)
        home = work / f"home-{i + 1}"
        home.mkdir()
        run = run_child([*cmd, "index", "--json"], env_for(home))
        builds.append(run)
        d = index_doc(run, f"first build run {i + 1}", failures, corpus_files)
        if d is not None:
            docs.append(d)
    main_home, main_env = home, env_for(home)
    first = docs[-1] if docs else {}
    passages, blobs = _index_rows(main_home)
    db_bytes, wal_bytes = _index_files(main_home)
    size = first.get("size_bytes", db_bytes)
    if docs and len({d["passages"] for d in docs}) > 1:
        failures.append(f"first builds disagree on passages: {[d['passages'] for d in docs]}")
    if first and first.get("bytes_read") != corpus_bytes:
        failures.append(f"first build read {first.get('bytes_read')} bytes of {corpus_bytes}")
    piped_progress = sum(r.err.count(b"indexing transcripts") for r in builds)

    # ---- first build with stderr on a terminal (progress) and in-process
    print("first build on a terminal, and in-process ...", file=sys.stderr)
    tty_home = work / "home-tty"
    tty_home.mkdir()
    tty_wall, tty_rc, tty_err, tty_out = tty_run([*cmd, "index"], env_for(tty_home))
    shutil.rmtree(tty_home, ignore_errors=True)
    if tty_rc:
        failures.append(f"c3async index on a terminal: exit {tty_rc}: {tty_err[-500:]!r}")
    tty_updates = tty_err.count(b"\rindexing transcripts")
    tty_shown = re.findall(rb"\rindexing transcripts \(MiB\) (\d+)/(\d+)", tty_err)
    tty_last = f"{int(tty_shown[-1][0])}/{int(tty_shown[-1][1])} MiB" if tty_shown else "-"
    tty_cleared = tty_err.endswith(b"\r\033[K")

    os.environ.update(CLAUDE_CONFIG_DIR=str(config))
    os.environ.pop("CLAUDE_PROJECT_DIR", None)
    from c3async.search import index  # after the environment is set
    from c3async.sessions.search import search

    inproc_home = work / "home-inproc"
    inproc_home.mkdir()
    os.environ["C3_HOME"] = str(inproc_home)
    calls: list[tuple[int, int]] = []
    started = time.perf_counter()
    up = index.update(progress=lambda done, total: calls.append((done, total)), processes=True)
    inproc_wall = time.perf_counter() - started
    inproc_size = index.size()
    if up.errors or up.busy or up.pending_bytes or up.bytes_read != corpus_bytes:
        failures.append(
            f"in-process build: errors={up.errors[:3]} busy={up.busy} pending={up.pending_bytes} "
            f"bytes_read={up.bytes_read} of {corpus_bytes}"
        )
    shutil.rmtree(inproc_home, ignore_errors=True)
    if up.bytes_read and max((done for done, _ in calls), default=0) == 0:
        failures.append(
            f"in-process build ({up.workers} worker processes): {len(calls)} progress callbacks, "
            f"every one at 0 of {up.bytes_read >> 20} MiB: progress never advanced"
        )
    if tty_shown and max(int(done) for done, _ in tty_shown) == 0:
        failures.append(
            f"c3async index on a terminal: {len(tty_shown)} progress updates, every one at 0/"
            f"{int(tty_shown[-1][1])} MiB: progress never advanced"
        )
    os.environ["C3_HOME"] = str(main_home)
    text_total, text_distinct = text_volume(projects)

    t.section(f"first index build (an empty $C3_HOME each run; {corpus_bytes / MiB:.0f} MiB of transcripts)")
    walls = [r.wall for r in builds]
    _add(
        t,
        "first build, whole process (c3async index --json)",
        median_range(walls),
        _budget(statistics.median(walls) < BUDGET_BUILD_S, "< 5 s"),
    )
    if first:
        t.add(
            "  read / passages / worker processes",
            f"{first['bytes_read'] / MiB:.1f} MiB",
            f"/ {first['passages']} passages in {first['read']} files "
            f"/ {first['workers']} workers; {first['bytes_read'] / MiB / statistics.median(walls):.0f} MiB/s",
        )
    t.add(
        "index size (databases + WAL)",
        f"{size / MiB:.1f} MiB",
        f"= {100 * size / corpus_bytes:.1f}% of the transcripts (WAL {wal_bytes / MiB:.1f} MiB)  "
        + _budget(size <= BUDGET_SIZE * corpus_bytes, "<= 40%"),
    )
    t.add(
        "passages / distinct texts indexed (FTS rows)",
        f"{passages} / {blobs}",
        f"({100 * blobs / max(1, passages):.0f}%: the corpus's text pools repeat, and each text is indexed once)",
    )
    t.add(
        "text given to the index / of which distinct",
        f"{text_total / MiB:.1f} MiB",
        f"/ {text_distinct / MiB:.1f} MiB: the index is {100 * size / max(1, text_distinct):.0f}% of the distinct "
        "text (real transcripts repeat far less than the corpus's pools: size and build time are optimistic)",
    )
    t.add(
        "first build, in-process (index.update(processes=True))",
        f"{inproc_wall:.3f} s",
        f"{len(calls)} progress callbacks, highest {max(c[0] for c in calls) >> 20}/{calls[-1][1] >> 20} MiB; "
        f"{up.workers} workers; index {inproc_size / MiB:.1f} MiB"
        if calls
        else "NO progress callback",
    )
    t.add(
        "first build, whole process, stderr a terminal (c3async index)",
        f"{tty_wall:.3f} s",
        f"{tty_updates} progress updates on stderr (last {tty_last}), line "
        f"{'cleared' if tty_cleared else 'NOT cleared'} at the end; "
        f"stdout: {tty_out.decode(errors='replace').strip()[:90]}",
    )
    t.add(
        "progress with stderr a pipe (the --json runs)",
        "none" if not piped_progress else f"{piped_progress} lines",
        "(progress only on a terminal)" if not piped_progress else "(printed although stderr is not a terminal)",
    )

    # ---- incremental updates
    print("incremental updates ...", file=sys.stderr)
    pools = _Pools(random.Random(f"pools-{corpus.seed}"))
    inc_runs: list[Run] = []
    inc_docs: list[dict] = []
    appended: list[int] = []
    markers: list[str] = []
    for i in range(R):
        marker = f"ocelot_increment_{i + 1}"
        n = 0
        for a in appends:
            data = more_turns(pools, a, APPEND_BYTES, rng, marker)
            with open(a.path, "ab") as f:
                f.write(data)
            n += len(data)
        corpus_bytes_now = _tree_bytes(projects)[0]
        appended.append(n)
        markers.append(marker)
        run = run_child([*cmd, "index", "--json"], main_env)
        inc_runs.append(run)
        d = index_doc(run, f"incremental update {i + 1}", failures, corpus_files)
        if d is not None:
            inc_docs.append(d)
            if d["read"] != len(appends) or d["bytes_read"] != n:
                failures.append(
                    f"incremental update {i + 1}: read {d['read']} files, {d['bytes_read']} bytes; "
                    f"{len(appends)} files grew by {n} bytes"
                )
    still: list[Run] = []
    still_docs: list[dict] = []
    for i in range(R):
        run = run_child([*cmd, "index", "--json"], main_env)
        still.append(run)
        d = index_doc(run, f"no-change update {i + 1}", failures, corpus_files)
        if d is not None:
            still_docs.append(d)
        if d is not None and (d["read"] or d["bytes_read"] or d["passages"]):
            failures.append(f"no-change update {i + 1}: read {d['read']} files, {d['bytes_read']} bytes")
    inc_found = []
    want_appended = {a.session for a in appends}
    for marker in markers:
        res = search(marker, limit=50)
        got = {r.id for r in res.results}
        inc_found.append(len(got & want_appended))
        if got != want_appended:
            failures.append(
                f"search {marker!r} after the incremental updates: found {len(got & want_appended)} of "
                f"{len(want_appended)} appended sessions, {len(got - want_appended)} others"
            )
    size_after = index.size()

    t.section(
        f"incremental updates ({len(appends)} transcripts, ~{APPEND_BYTES / MiB:.0f} MiB of new turns each, per run)"
    )
    med_first = statistics.median(walls)
    inc_walls = [r.wall for r in inc_runs]
    t.add("bytes appended per run", f"{statistics.median(appended) / MiB:.1f} MiB")
    _add(
        t,
        "incremental update, whole process (c3async index --json)",
        median_range(inc_walls),
        f"{statistics.median(inc_walls) / med_first:.2f}x the first build; read "
        f"{statistics.median(d['bytes_read'] for d in inc_docs) / MiB:.1f} MiB in {inc_docs[-1]['read']} files, "
        f"{inc_docs[-1]['passages']} passages"
        if inc_docs
        else "",
    )
    still_walls = [r.wall for r in still]
    _add(
        t,
        "no-change update, whole process",
        median_range(still_walls),
        f"{statistics.median(still_walls) / med_first:.2f}x the first build; "
        + (f"read {still_docs[-1]['bytes_read']} bytes in {still_docs[-1]['read']} files" if still_docs else ""),
    )
    t.add(
        "new turns found after the updates (appended marker)",
        f"{sum(inc_found)}/{len(markers) * len(appends)}",
        "sessions",
    )
    t.add(
        "index size after the updates",
        f"{size_after / MiB:.1f} MiB",
        f"= {100 * size_after / corpus_bytes_now:.1f}% of {corpus_bytes_now / MiB:.0f} MiB",
    )

    # ---- queries
    print("queries ...", file=sys.stderr)
    rg_l: list[float] = []
    rg_note = ""
    rg_files: dict[str, int] = {}
    if have_rg:
        for _ in range(R):
            rg_l.append(run_child([RG, "-l", "-F", WORD, str(projects)], main_env).wall)
        rg_c_runs = [run_child([RG, "-c", "-F", WORD, str(projects)], main_env) for _ in range(R)]
        counts = [int(line.rsplit(b":", 1)[1]) for line in rg_c_runs[-1].out.splitlines() if b":" in line]
        rg_note = f"{sum(counts)} lines in {len(counts)} files"
        for _, _, literal in QUERIES:
            if literal and literal not in rg_files:
                r = run_child([RG, "-l", "-F", literal, str(projects)], main_env)
                if r.rc not in (0, 1):
                    failures.append(f"rg -l {literal!r}: exit {r.rc}: {r.err[-300:]!r}")
                rg_files[literal] = len(r.out.splitlines())

    t.section(f"queries (warm; in-process: median of {QUERY_RUNS} after a warm-up; whole process: median of {R})")
    if have_rg:
        _add(t, f"rg -l -F {WORD} (the raw files)", median_range(rg_l), f"{rg_files.get(WORD, 0)} files")
        _add(t, f"rg -c -F {WORD}", median_range([r.wall for r in rg_c_runs]), rg_note)
    else:
        t.add("rg baseline", "skipped", f"({RG} is missing)")
    rg_med = statistics.median(rg_l) if rg_l else None
    index.update()
    noop = []
    for _ in range(QUERY_RUNS):
        started = time.perf_counter()
        index.update()
        noop.append(time.perf_counter() - started)
    _add(t, "in-process index.update() with nothing to do (inside every search)", _ms(noop))
    ratios: list[float] = []
    in_meds: list[float] = []
    timed = [(kind, q, lit, False) for kind, q, lit in QUERIES] + [("rare word, --tools", WORD, WORD, True)]
    for kind, q, literal, tools in timed:
        what = f"search {q!r}{' --tools' if tools else ''}"
        search(q, tools=tools)  # warm-up
        times = []
        res = None
        for _ in range(QUERY_RUNS):
            started = time.perf_counter()
            res = search(q, projects=None, tools=tools, limit=20)
            times.append(time.perf_counter() - started)
        n_in = truth.check(msgspec.to_builtins(res), f"in-process {what}", tools, failures)
        runs = [
            run_child([*cmd, "search", q, "--all", "--json"] + (["--tools"] if tools else []), main_env)
            for _ in range(R)
        ]
        n_out = 0
        for i, run in enumerate(runs):
            d = json_rows(run, f"whole-process {what} run {i + 1}", failures)
            if d is not None and i == 0:
                n_out = truth.check(d, f"whole-process {what}", tools, failures)
                if d.get("index", {}).get("indexed_now"):
                    failures.append(f"whole-process {what}: indexed {d['index']['indexed_now']} files; nothing changed")
        want = len(truth.talk) + (len(truth.tool) if tools else 0)
        med_in = statistics.median(times)
        in_meds.append(med_in)
        label = f"{kind}: {q}"
        _add(
            t,
            f"{label}  in-process",
            _ms(times),
            f"{n_in}/{want} sessions  " + _budget(med_in < BUDGET_QUERY_S, "< 20 ms"),
        )
        walls_q = [r.wall for r in runs]
        extra = f"{n_out}/{want} sessions"
        if rg_med:
            ratio = statistics.median(walls_q) / rg_med
            ratios.append(ratio)
            extra += f"  {ratio:.2f}x rg -l  " + _budget(ratio <= 1.0, "<= rg -l")
        if literal is not None and have_rg:
            extra += f"  (rg -l -F finds {rg_files[literal]} files)"
        _add(t, f"{' ' * len(label)}  whole process", median_range(walls_q), extra)

    # Correctness of every kind with --tools too (one in-process call each), and the absent phrase.
    for _kind, q, _literal in QUERIES[1:]:
        truth.check(msgspec.to_builtins(search(q, tools=True)), f"in-process search {q!r} --tools", True, failures)
    absent_in = search(ABSENT, tools=True).total
    absent_run = run_child([*cmd, "search", ABSENT, "--all", "--json"], main_env)
    absent_doc = json_rows(absent_run, f"whole-process search {ABSENT!r}", failures) or {}
    absent_out = absent_doc.get("total", -1)
    if absent_in or absent_out:
        failures.append(
            f"search {ABSENT!r} (the phrase out of order): {absent_in} sessions in-process, "
            f"{absent_out} in a whole process; expected none"
        )
    if rg_med:
        t.add(
            "ratio whole-process search / rg -l, rare word",
            f"{ratios[0]:.2f}x",
            f"[all kinds {min(ratios):.2f}x–{max(ratios):.2f}x]  " + _budget(ratios[0] <= 1.0, "<= 1x"),
        )

    # ---- correctness
    t.section("correctness (against the planted ground truth)")
    t.add(
        "recall: said plants found (every query, in-process and whole process)",
        f"{truth.found}/{truth.wanted}",
        "(must be all)",
    )
    t.add("tool-output-only plant found with --tools", f"{truth.tool_found}/{truth.tool_wanted}", "(must be all)")
    t.add("tool-output-only plant found without --tools", f"{truth.tool_false}/{truth.tool_checks}", "(must be 0)")
    t.add(
        "metadata-only plants found",
        f"{truth.meta_false}/{truth.meta_checks}",
        f"(must be 0; {len(truth.never)} carriers x every query, with and without --tools)",
    )
    t.add("sessions without a plant found", f"{truth.others}", "(must be 0: the words are made up)")
    t.add(
        "snippets of the right role with the hit marked",
        f"{truth.snippets_ok}/{truth.snippets}",
        "(user / assistant / sub-agent assistant / tool)",
    )
    t.add(
        f"the phrase out of order ({ABSENT})",
        f"{absent_in} / {absent_out}",
        "sessions in-process / whole process (must be 0)",
    )

    t.section("notes")
    t.add("figures are medians [min–max]; R", str(R))
    t.add("page cache", "warm", "(this measures CPU and system calls, not the disk; 2 shared cores: noisy)")
    t.done(json_out)
    return report_failures(failures)


if __name__ == "__main__":
    sys.exit(main())
