"""A realistic synthetic Claude Code corpus, for benchmarking and stress-testing the catalog.

    python -m stress.corpus OUT_DIR [--transcripts N] [--projects P] [--seed S] [--no-big]

writes ``OUT_DIR/config/projects/<slug>/<uuid>.jsonl`` (use ``CLAUDE_CONFIG_DIR=OUT_DIR/config``),
one empty working directory per project under ``OUT_DIR/work/``, and ``OUT_DIR/corpus.json``
(the ground truth, reloadable with ``Corpus.load``).

Line shapes follow ``/work/shared/reference/claude-code-facts.md`` §2 (2.1.x envelope key order,
one assistant line per content block sharing ``message.id``/``requestId``/``usage``, tool results
with a top-level ``toolUseResult``, bookkeeping lines) and the archetypes of §4 and §8 that matter
to a catalog's speed and titles:

- every file: ``permission-mode`` + ``file-history-snapshot`` at the head (interactive), turns of
  prompt / thinking / text / tool calls / tool results / ``turn_duration``, queue operations and
  attachments; interactive sessions re-write ``ai-title`` as they go;
- ~30% "clean exit": a ``custom-title`` (from ``--name`` or a mid-session ``/rename``) and, at
  EOF, ``last-prompt`` + ``custom-title`` + ``agent-name`` + ``mode`` re-appended;
- 10% "buried title": the ONLY title line is a ``custom-title`` 300 KiB-3 MiB from the end, no
  title after it and no ``ai-title`` anywhere (a crash or /clear skipped the EOF re-append);
- 6% headless (``-p``, entrypoint ``sdk-cli``): queue-operation head, no title lines at all;
- 5% whose FIRST prompt is a pasted single line of 70-300 KiB;
- 1% of 20-60 MiB (with ``big_sizes``), compacted every few MiB like real long sessions;
- a few /clear heads (caveat + command + local_command) and VS Code ``<ide_opened_file>`` prompts.

Speed: text is generated once into pools of pre-escaped JSON fragments; each line is an f-string
over those fragments, so no ``json.dumps`` runs per line and bytes cost roughly a memcpy.
"""

from __future__ import annotations

import argparse
import base64
import calendar
import json
import math
import multiprocessing
import os
import random
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from stress.transcripts import CAVEAT, claude_slug, command_markup

__all__ = ("PROJECT_NAMES", "Corpus", "generate", "write_giant")

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

# Project directory names: separators of every kind, but no two with the same slug (colliding
# slugs share one transcript folder, which is a different test from this benchmark).
PROJECT_NAMES = (
    "app-one",
    "svc_two",
    "lib.three",
    "web app four",
    "data-pipeline_5",
    "tools.six",
    "api_gateway-7",
    "mobile.client_8",
)

MEDIAN_SIZE = 220 * KiB  # the target; the whole corpus (buried titles, pastes, whole turns) lands near 300
SIZE_SIGMA = 1.0  # lognormal spread: ~5% under 60 KiB, ~5% over 1.5 MiB
DAY_MS = 86_400_000

_FORMAT = "stress.corpus"
_VERSION = 1


def _j(text: str) -> str:
    # JSON.stringify keeps non-ASCII characters as they are; so does ensure_ascii=False.
    return json.dumps(text, ensure_ascii=False)


def _iso(ms: int) -> str:
    secs, ms = divmod(ms, 1000)
    t = time.gmtime(secs)
    return f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}.{ms:03d}Z"


def _uuid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


_B64_TO_62 = bytes.maketrans(b"+/", b"Xq")


def _b62(rng: random.Random, n: int) -> str:
    # base64 of random bytes with the two non-alphanumerics mapped to letters: cheap and close
    # enough to the base62 ids the API returns.
    return base64.b64encode(rng.randbytes(n)).translate(_B64_TO_62)[:n].decode()


# --------------------------------------------------------------------------------------------
# Text pools: generated once per corpus, stored JSON-escaped so lines are plain concatenation.
# --------------------------------------------------------------------------------------------

NOUNS = (
    "retry",
    "cache",
    "token",
    "session",
    "worker",
    "queue",
    "parser",
    "config",
    "handler",
    "client",
    "server",
    "schema",
    "index",
    "batch",
    "user",
    "auth",
    "scheduler",
    "upload",
    "billing",
    "invoice",
    "webhook",
    "migration",
    "logger",
    "router",
    "socket",
    "payload",
    "snapshot",
    "catalog",
    "metrics",
    "timeout",
    "pool",
    "lock",
    "registry",
    "plugin",
)
VERBS = (
    "fix",
    "refactor",
    "add",
    "remove",
    "rename",
    "document",
    "speed up",
    "simplify",
    "debug",
    "test",
    "migrate",
    "split",
    "cache",
    "validate",
    "retry",
    "log",
)
ADJS = (
    "flaky",
    "slow",
    "stale",
    "missing",
    "broken",
    "duplicate",
    "async",
    "nested",
    "legacy",
    "optional",
    "concurrent",
    "empty",
    "huge",
    "partial",
    "expired",
)
FILES = (
    "src/core/retry.py",
    "src/api/handlers.py",
    "src/db/migrations/0042_index.py",
    "tests/test_scheduler.py",
    "lib/client.ts",
    "lib/server/router.ts",
    "cmd/main.go",
    "internal/queue/worker.go",
    "README.md",
    "pyproject.toml",
    "src/auth/token.rs",
    "web/components/Table.tsx",
    "scripts/deploy.sh",
    "docs/architecture.md",
)
WORDS = (
    "the",
    "a",
    "this",
    "that",
    "we",
    "it",
    "should",
    "could",
    "when",
    "because",
    "so",
    "then",
    "before",
    "after",
    "call",
    "value",
    "function",
    "returns",
    "test",
    "fails",
    "passes",
    "error",
    "line",
    "file",
    "module",
    "change",
    "look",
    "check",
    "need",
    "using",
    "instead",
    "still",
    "already",
    "probably",
    "looks",
    "like",
    "path",
    "state",
    "case",
    *NOUNS,
)
BRANCHES = (
    "main",
    "main",
    "main",
    "master",
    "develop",
    "feature/retry-backoff",
    "fix/token-expiry",
    "feat/catalog-cache",
    "chore/deps",
    "HEAD",
    "release/2.4",
    "wip/refactor-queue",
)
VERSIONS = ("2.1.88", "2.1.88", "2.1.88", "2.1.112", "2.1.147", "2.1.332")
MODELS = ("claude-opus-4-5-20251101", "claude-sonnet-4-5-20250929", "claude-opus-4-5-20251101")

PROMPT_TEMPLATES = (
    "Fix the {adj} {noun} test in {file}",
    "Why does `{fn}` return None when the {noun} is {adj}?",
    "Add a {adj} {noun} option to the {noun2} module and update the tests",
    "Refactor {file} so that {noun} handling lives in one place",
    "The CI job fails with `{exc}: {noun} {adj}` in {file}, can you look?",
    "Write docs for the {noun} API, including the {noun2} edge cases",
    "{verb} the {noun2} {noun} — it's {adj} since the last deploy (#{n})",
    "Can you review {file}? I think the {noun} logic is wrong when two {noun2}s race",
    "Plan: 1) {verb} {noun}\n2) {verb2} {noun2}\n3) run the whole suite\nStart with step 1.",
    "Please {verb} `{fn}` in {file}; keep the public signature, it's used by the {noun2} service",
    "Benchmark the {noun} path and tell me where the time goes (issue #{n})",
    'Port the {noun} helper from {file} to the new {noun2} layer, with "strict" mode on',
)
AI_TITLE_TEMPLATES = (
    "{Verb} {adj} {noun} test",
    "{Verb} {noun} handling in {short}",
    "Investigate {adj} {noun2} {noun}",
    "{Verb} {noun2} {noun} logic",
    "Debug {noun} failure in CI",
    "Document {noun} API edge cases",
)
CUSTOM_TITLE_TEMPLATES = (
    "{verb}-{noun}-{noun2}",
    "{noun}-{adj}-{n}",
    "{verb}-{noun}",
    "Sprint {n}: {noun} cleanup",
    "Übersicht {noun}/{noun2} 🚀",
    'the "{adj}" {noun} bug',
    "C:\\work\\{noun} port",
)

TOOL_WEIGHTS = (("Bash", 45), ("Read", 30), ("Grep", 12), ("Edit", 13))


def _fill(rng: random.Random, template: str, **extra: str) -> str:
    noun, noun2 = rng.sample(NOUNS, 2)
    verb, verb2 = rng.sample(VERBS, 2)
    values = dict(
        noun=noun,
        noun2=noun2,
        verb=verb.replace(" ", "-") if "{verb}-" in template else verb,
        verb2=verb2,
        Verb=verb.capitalize(),
        adj=rng.choice(ADJS),
        file=rng.choice(FILES),
        short=rng.choice(FILES).rsplit("/", 1)[-1],
        n=str(rng.randint(100, 9999)),
        fn=f"{rng.choice(NOUNS)}_{rng.choice(NOUNS)}",
        exc=rng.choice(("TimeoutError", "KeyError", "AssertionError", "ValueError", "panic")),
    )
    values.update(extra)
    return template.format(**values)


def _sentence(rng: random.Random) -> str:
    words = rng.choices(WORDS, k=rng.randint(6, 18))
    return " ".join(words).capitalize() + rng.choice((".", ".", ".", "?", ":"))


def _prose(rng: random.Random, chars: int) -> str:
    out, n = [], 0
    while n < chars:
        s = _sentence(rng)
        if rng.random() < 0.15:
            s += f" See `{rng.choice(FILES)}`."
        out.append(s)
        n += len(s) + 1
        if rng.random() < 0.12:
            out.append("\n\n")
    return " ".join(out)


def _code_line(rng: random.Random, indent: int) -> str:
    a, b = rng.sample(NOUNS, 2)
    pick = rng.randrange(8)
    pad = "    " * indent
    if pick == 0:
        return f"{pad}def {a}_{b}(self, {b}, timeout=None):"
    if pick == 1:
        return f"{pad}return self._{a}.get({b}, default)"
    if pick == 2:
        return f"{pad}if {a} is None or not {b}:"
    if pick == 3:
        return f"{pad}{a}_{b} = await self.{b}.fetch({a}, retries={rng.randint(1, 9)})"
    if pick == 4:
        return f'{pad}log.debug("{a} %s -> %s", {b}, {a})'
    if pick == 5:
        return f"{pad}# {_sentence(rng)}"
    if pick == 6:
        return f'{pad}raise {a.capitalize()}Error(f"bad {b}: {{{b}!r}}")'
    return f"{pad}for {a} in sorted(self.{b}s, key=lambda x: x.{a}):"


def _code(rng: random.Random, chars: int) -> str:
    """Source as the Read tool shows it: `cat -n` style numbered lines."""
    lines, n, indent = [], 0, 0
    while n < chars:
        line = _code_line(rng, indent)
        if line.endswith(":"):
            indent = min(3, indent + 1)
        elif rng.random() < 0.2:
            indent = max(0, indent - 1)
        lines.append(f"{len(lines) + 1:6d}\t{line}")
        n += len(lines[-1]) + 1
    return "\n".join(lines)


def _output(rng: random.Random, chars: int) -> str:
    kind = rng.randrange(4)
    lines, n = [], 0
    while n < chars:
        a, b = rng.sample(NOUNS, 2)
        if kind == 0:  # pytest
            status = "PASSED" if rng.random() < 0.93 else "FAILED"
            line = f"tests/test_{a}.py::test_{b}_{rng.choice(ADJS)} {status} [{rng.randint(0, 100):3d}%]"
        elif kind == 1:  # git log
            line = (
                f"{rng.getrandbits(28):07x} {rng.choice(VERBS).capitalize()} {a} {b} "
                f"({rng.randint(1, 30)} days ago) <dev{rng.randint(1, 9)}@example.com>"
            )
        elif kind == 2:  # grep -n
            line = f"{rng.choice(FILES)}:{rng.randint(1, 900)}:{_code_line(rng, rng.randint(0, 2))}"
        else:  # build / server log
            line = (
                f"2026-0{rng.randint(1, 6)}-{rng.randint(10, 28)} {rng.randint(10, 23)}:"
                f"{rng.randint(10, 59)}:{rng.randint(10, 59)},{rng.randint(100, 999)} "
                f"{rng.choice(('INFO', 'INFO', 'DEBUG', 'WARNING', 'ERROR'))} [{a}] {_sentence(rng)}"
            )
        lines.append(line)
        n += len(line) + 1
    return "\n".join(lines)


def _logsize(rng: random.Random, lo: int, hi: int) -> int:
    return int(math.exp(rng.uniform(math.log(lo), math.log(hi))))


@dataclass(slots=True)
class _Blob:
    json: str  # the text as a JSON string literal, quotes included
    chars: int
    lines: int


class _Pools:
    """Pre-escaped text fragments, picked at random while writing."""

    def __init__(self, rng: random.Random) -> None:
        def blobs(make, n, lo, hi):
            out = []
            for _ in range(n):
                text = make(rng, _logsize(rng, lo, hi))
                out.append(_Blob(_j(text), len(text), text.count("\n") + 1))
            return out

        self.outputs = blobs(_output, 160, 1000, 30_000)  # Bash/Grep stdout: 1-30 KB
        self.files = blobs(_code, 120, 1000, 30_000)  # Read results, Edit originalFile
        self.thinking = [_j(_prose(rng, _logsize(rng, 200, 4000))) for _ in range(120)]
        self.texts = [_j(_prose(rng, _logsize(rng, 40, 1500))) for _ in range(160)]
        self.summaries = [
            _j(
                "This session is being continued from a previous conversation that ran "
                "out of context. The summary below covers the earlier portion of the "
                "conversation.\n\n" + _prose(rng, _logsize(rng, 4000, 16000))
            )
            for _ in range(12)
        ]
        # One long base64 string; a signature is a slice of it (real ones are 1-4 KB of base64).
        self.sig = base64.b64encode(rng.randbytes(96 * KiB)).decode()
        self.skills = _j(
            "\n".join(f"- {a}-{b}: {_sentence(rng)}" for a, b in (rng.sample(NOUNS, 2) for _ in range(40)))
        )

    def signature(self, rng: random.Random) -> str:
        n = rng.randint(800, 4000)
        at = rng.randrange(len(self.sig) - n)
        return self.sig[at : at + n]


# --------------------------------------------------------------------------------------------
# One transcript
# --------------------------------------------------------------------------------------------

CLEAR_CMD = command_markup("/clear", "clear")


class _Writer:
    """Builds one transcript in memory, line by line, keeping the uuid chain and the clock."""

    def __init__(
        self, rng: random.Random, pools: _Pools, sid: str, cwd: str, branch: str, entrypoint: str, t0_ms: int
    ) -> None:
        self.rng, self.pools, self.sid, self.cwd = rng, pools, sid, cwd
        self.cwd_json = _j(cwd)
        self.entrypoint = entrypoint
        self.version = rng.choice(VERSIONS)
        self.model = rng.choice(MODELS)
        self.parts: list[str] = []
        self.size = 0  # characters so far (≈ bytes: nearly all content is ASCII)
        self.parent: str | None = None
        self.now = t0_ms
        self.prompt_id = _uuid(rng)
        self.branch = branch
        self.custom: str | None = None
        self.ai: str | None = None
        self.last_real_prompt: str | None = None
        self.context_tokens = rng.randint(12_000, 30_000)
        self._envelope()

    # --- plumbing -------------------------------------------------------------------------

    def _envelope(self) -> None:
        # The tail of every chain line, in 2.1.x key order.
        self.env = (
            f',"userType":"external","entrypoint":"{self.entrypoint}","cwd":{self.cwd_json},'
            f'"sessionId":"{self.sid}","version":"{self.version}","gitBranch":{_j(self.branch)}}}\n'
        )

    def switch_branch(self, branch: str) -> None:
        self.branch = branch
        self._envelope()

    def add(self, line: str) -> None:
        self.parts.append(line)
        self.size += len(line)

    def ts(self, lo_ms: int = 20, hi_ms: int = 3000) -> str:
        self.now += lo_ms + int(self.rng.random() * (hi_ms - lo_ms))  # randint is 3x slower
        return _iso(self.now)

    def par(self) -> str:
        return "null" if self.parent is None else f'"{self.parent}"'

    # --- metadata lines (outside the chain) -------------------------------------------------

    def meta(self, kind: str, key: str, value: str) -> None:
        self.add(f'{{"type":"{kind}","{key}":{_j(value)},"sessionId":"{self.sid}"}}\n')

    def ai_title(self, title: str) -> None:
        self.ai = title
        self.meta("ai-title", "aiTitle", title)

    def custom_title(self, title: str) -> None:
        self.custom = title
        self.meta("custom-title", "customTitle", title)
        self.meta("agent-name", "agentName", title)

    def last_prompt(self) -> None:
        if self.last_real_prompt:
            flat = " ".join(self.last_real_prompt.split())
            self.meta("last-prompt", "lastPrompt", flat if len(flat) <= 200 else flat[:200] + "…")

    def queue(self, content_json: str) -> None:
        self.add(
            f'{{"type":"queue-operation","operation":"enqueue","timestamp":"{self.ts(0, 50)}",'
            f'"sessionId":"{self.sid}","content":{content_json}}}\n'
        )
        self.add(
            f'{{"type":"queue-operation","operation":"dequeue","timestamp":"{self.ts(0, 50)}",'
            f'"sessionId":"{self.sid}"}}\n'
        )

    def snapshot(self, message_id: str) -> None:
        rng = self.rng
        backups = ",".join(
            f'{_j(f)}:{{"backupFileName":"{rng.getrandbits(64):016x}@v{v}","version":{v},'
            f'"backupTime":"{_iso(self.now - rng.randint(1000, 900_000))}"}}'
            for f, v in ((rng.choice(FILES), rng.randint(1, 6)) for _ in range(rng.randint(0, 4)))
        )
        self.add(
            f'{{"type":"file-history-snapshot","messageId":"{message_id}","snapshot":'
            f'{{"messageId":"{message_id}","trackedFileBackups":{{{backups}}},'
            f'"timestamp":"{_iso(self.now)}"}},"isSnapshotUpdate":false}}\n'
        )

    # --- chain lines ------------------------------------------------------------------------

    def user(self, content_json: str, uuid: str | None = None, extra: str = "") -> str:
        u = uuid or _uuid(self.rng)
        self.add(
            f'{{"parentUuid":{self.par()},"isSidechain":false,"promptId":"{self.prompt_id}",'
            f'"type":"user","message":{{"role":"user","content":{content_json}}}{extra},'
            f'"uuid":"{u}","timestamp":"{self.ts()}","permissionMode":"default"' + self.env
        )
        self.parent = u
        return u

    def system(self, body: str) -> None:
        u = _uuid(self.rng)
        self.add(
            f'{{"parentUuid":{self.par()},"isSidechain":false,"type":"system",{body},'
            f'"timestamp":"{self.ts(5, 200)}","uuid":"{u}","isMeta":false' + self.env
        )
        self.parent = u

    def local_command(self, content: str) -> None:
        self.system(f'"subtype":"local_command","content":{_j(content)},"level":"info"')

    def attachment(self, body: str) -> None:
        u = _uuid(self.rng)
        self.add(
            f'{{"parentUuid":{self.par()},"isSidechain":false,"attachment":{body},'
            f'"type":"attachment","uuid":"{u}","timestamp":"{self.ts(1, 30)}"' + self.env
        )
        self.parent = u

    def response(self, blocks: list[str], stop: str) -> list[str]:
        """One API response: one line per content block, same message.id, requestId and usage."""
        rng = self.rng
        msg_id, req_id = "msg_01" + _b62(rng, 22), "req_011C" + _b62(rng, 18)
        out_tokens = rng.randint(20, 2500)
        cache_new = rng.randint(200, 8000)
        self.context_tokens += cache_new
        usage = (
            f'{{"input_tokens":{rng.randint(1, 12)},"cache_creation_input_tokens":{cache_new},'
            f'"cache_read_input_tokens":{self.context_tokens},"cache_creation":'
            f'{{"ephemeral_5m_input_tokens":{cache_new},"ephemeral_1h_input_tokens":0}},'
            f'"output_tokens":{out_tokens},"service_tier":"standard"}}'
        )
        uuids = []
        for i, block in enumerate(blocks):
            u = _uuid(rng)
            reason = f'"{stop}"' if i == len(blocks) - 1 else "null"
            self.add(
                f'{{"parentUuid":{self.par()},"isSidechain":false,"type":"assistant","message":'
                f'{{"model":"{self.model}","id":"{msg_id}","type":"message","role":"assistant",'
                f'"content":[{block}],"stop_reason":{reason},"stop_sequence":null,"usage":{usage}}},'
                f'"requestId":"{req_id}","uuid":"{u}","timestamp":"{self.ts(300, 9000)}"' + self.env
            )
            self.parent = u
            uuids.append(u)
        return uuids

    def tool_call(self) -> tuple[str, str, str, str]:
        """(tool_use id, tool_use block, tool_result content, toolUseResult), all as JSON."""
        rng, pools = self.rng, self.pools
        tool = rng.choices([t for t, _ in TOOL_WEIGHTS], [w for _, w in TOOL_WEIGHTS])[0]
        tid = "toolu_01" + _b62(rng, 22)
        path = _j(f"{self.cwd}/{rng.choice(FILES)}")
        if tool == "Bash":
            blob = rng.choice(pools.outputs)
            cmd = rng.choice(
                (
                    "pytest -x -q",
                    "git log --oneline -50",
                    "npm run build",
                    "rg -n TODO src",
                    "make test",
                    "tail -200 logs/app.log",
                )
            )
            use = (
                f'{{"type":"tool_use","id":"{tid}","name":"Bash","input":{{"command":"{cmd}",'
                f'"description":"{_sentence(rng)[:60]}"}}}}'
            )
            result = (
                f'{{"stdout":{blob.json},"stderr":"","interrupted":false,"isImage":false,"noOutputExpected":false}}'
            )
            return tid, use, blob.json, result
        if tool == "Read":
            blob = rng.choice(pools.files)
            use = f'{{"type":"tool_use","id":"{tid}","name":"Read","input":{{"file_path":{path}}}}}'
            result = (
                f'{{"type":"text","file":{{"filePath":{path},"content":{blob.json},'
                f'"numLines":{blob.lines},"startLine":1,"totalLines":{blob.lines}}}}}'
            )
            return tid, use, blob.json, result
        if tool == "Grep":
            blob = rng.choice(pools.outputs)
            pattern = _j(rng.choice(NOUNS) + r"_\w+\(")
            use = (
                f'{{"type":"tool_use","id":"{tid}","name":"Grep","input":{{"pattern":{pattern},'
                f'"path":{_j(self.cwd)},"output_mode":"content","-n":true}}}}'
            )
            result = (
                f'{{"mode":"content","numFiles":{rng.randint(1, 40)},"filenames":[],'
                f'"content":{blob.json},"numLines":{blob.lines}}}'
            )
            return tid, use, blob.json, result
        blob = rng.choice(pools.files)  # Edit: the result carries the whole original file
        old_text, new_text = _code_line(rng, 1), _code_line(rng, 1)
        old, new = _j(old_text), _j(new_text)
        use = (
            f'{{"type":"tool_use","id":"{tid}","name":"Edit","input":{{"file_path":{path},'
            f'"old_string":{old},"new_string":{new},"replace_all":false}}}}'
        )
        content = _j(f"The file {self.cwd}/{rng.choice(FILES)} has been updated successfully.")
        at = rng.randint(1, blob.lines)
        result = (
            f'{{"filePath":{path},"oldString":{old},"newString":{new},"originalFile":{blob.json},'
            f'"structuredPatch":[{{"oldStart":{at},"oldLines":1,"newStart":{at},"newLines":1,'
            f'"lines":[{_j("-" + old_text)},{_j("+" + new_text)}]}}],"userModified":false,'
            f'"replaceAll":false}}'
        )
        return tid, use, content, result

    def tool_result(self, use_uuid: str, tid: str, content_json: str, result_json: str) -> None:
        u = _uuid(self.rng)
        self.add(
            f'{{"parentUuid":"{use_uuid}","isSidechain":false,"promptId":"{self.prompt_id}",'
            f'"type":"user","message":{{"role":"user","content":[{{"tool_use_id":"{tid}",'
            f'"type":"tool_result","content":{content_json},"is_error":false}}]}},"uuid":"{u}",'
            f'"timestamp":"{self.ts(50, 20000)}","toolUseResult":{result_json},'
            f'"sourceToolAssistantUUID":"{use_uuid}"' + self.env
        )
        self.parent = u

    # --- a whole turn -----------------------------------------------------------------------

    def turn(
        self, prompt_json: str, prompt_text: str | None, *, ai_titles: list[str] | None, first: bool = False
    ) -> None:
        """A user prompt and everything Claude does about it, up to ``turn_duration``."""
        rng, pools = self.rng, self.pools
        self.prompt_id = _uuid(rng)
        start = self.now
        if not first and rng.random() < 0.1:  # typed while Claude was busy: queued first
            self.queue(prompt_json)
        u = _uuid(rng)
        self.snapshot(u)
        self.now += rng.randint(2_000, 600_000) if not first else 0  # the user thinks
        self.user(prompt_json, u)
        if prompt_text is not None:
            self.last_real_prompt = prompt_text
        if rng.random() < 0.3:
            self.attachment(
                '{"type":"hook_success","hookName":"UserPromptSubmit","hookEvent":'
                '"UserPromptSubmit","content":"","stdout":"","stderr":"","exitCode":0}'
            )
        if first and rng.random() < 0.6:
            self.attachment(f'{{"type":"skill_listing","content":{pools.skills}}}')
        # ai-title is written from a side request alongside the prompt; it evolves.
        if ai_titles and (first or rng.random() < 0.4):
            if len(ai_titles) > 1 and not first and rng.random() < 0.3:
                ai_titles.pop(0)
            self.ai_title(ai_titles[0])
        rounds = min(8, int(rng.expovariate(1 / 2.2)))
        messages = 1
        for _ in range(rounds):
            blocks = []
            if rng.random() < 0.7:
                blocks.append(
                    f'{{"type":"thinking","thinking":{rng.choice(pools.thinking)},'
                    f'"signature":"{pools.signature(rng)}"}}'
                )
            if rng.random() < 0.5:
                blocks.append(f'{{"type":"text","text":{rng.choice(pools.texts)}}}')
            calls = [self.tool_call() for _ in range(1 if rng.random() < 0.8 else rng.randint(2, 3))]
            blocks += [c[1] for c in calls]
            uuids = self.response(blocks, "tool_use")
            # Parallel calls: each result hangs off its own tool_use line (a tree, not a list).
            for (tid, _use, content, result), use_uuid in zip(calls, uuids[len(blocks) - len(calls) :]):
                self.tool_result(use_uuid, tid, content, result)
            messages += len(blocks) + len(calls)
        if rng.random() < 0.03:  # the user hit Esc
            self.user(_j("[Request interrupted by user]"))
            messages += 1
        else:
            blocks = []
            if rng.random() < 0.5:
                blocks.append(
                    f'{{"type":"thinking","thinking":{rng.choice(pools.thinking)},'
                    f'"signature":"{pools.signature(rng)}"}}'
                )
            blocks.append(f'{{"type":"text","text":{rng.choice(pools.texts)}}}')
            self.response(blocks, "end_turn")
            messages += len(blocks)
        self.system(f'"subtype":"turn_duration","durationMs":{self.now - start},"messageCount":{messages}')

    def compact(self) -> None:
        """Auto-compaction: metadata re-appended, a boundary (a new chain root), the summary."""
        self.last_prompt()
        if self.custom:
            self.custom_title(self.custom)
        boundary = _uuid(self.rng)
        self.add(
            f'{{"parentUuid":null,"logicalParentUuid":{self.par()},"isSidechain":false,'
            f'"type":"system","subtype":"compact_boundary","content":"Conversation compacted",'
            f'"isMeta":false,"level":"info","compactMetadata":{{"trigger":"auto",'
            f'"preTokens":{self.rng.randint(150_000, 170_000)}}},"timestamp":"{self.ts()}",'
            f'"uuid":"{boundary}"' + self.env
        )
        self.parent = boundary
        self.user(
            self.rng.choice(self.pools.summaries), extra=',"isCompactSummary":true,"isVisibleInTranscriptOnly":true'
        )
        self.context_tokens = self.rng.randint(15_000, 30_000)


# --------------------------------------------------------------------------------------------
# The corpus
# --------------------------------------------------------------------------------------------


@dataclass
class Corpus:
    config_dir: str
    project_dirs: list[str]
    files: int
    total_bytes: int
    expected: dict[str, dict] = field(default_factory=dict)
    root: str = ""
    seconds: float = 0.0  # generation wall time
    seed: int = 1
    big_sizes: bool = True

    def save(self) -> None:
        doc = {"format": _FORMAT, "version": _VERSION, **asdict(self)}
        Path(self.root, "corpus.json").write_text(json.dumps(doc, ensure_ascii=False))

    @classmethod
    def load(cls, root: Path) -> Corpus | None:
        """The corpus previously generated into ``root``, or None (none there, or stale)."""
        try:
            doc = json.loads(Path(root, "corpus.json").read_text())
        except (OSError, ValueError):
            return None
        if doc.pop("format", None) != _FORMAT or doc.pop("version", None) != _VERSION:
            return None
        corpus = cls(**doc)
        if not all(os.path.exists(e["path"]) for e in corpus.expected.values()):
            return None
        return corpus


def _prompt(rng: random.Random) -> str:
    return _fill(rng, rng.choice(PROMPT_TEMPLATES))


def _paste(rng: random.Random, size: int) -> str:
    """A pasted single line: a question, then a minified JSON API response (no newlines)."""
    head = _fill(rng, "here's the {noun} API response, why is `items` empty for page {n}? ")
    records, n = [], len(head)
    while n < size:
        a, b = rng.sample(NOUNS, 2)
        rec = (
            f'{{"id":{rng.randint(1, 10**9)},"name":"{a}-{b}","{a}":{{"state":"{rng.choice(ADJS)}",'
            f'"score":{rng.random():.5f},"tags":["{b}","{rng.choice(ADJS)}"]}},"next":null}}'
        )
        records.append(rec)
        n += len(rec) + 1
    return head + '{"items":[],"debug":[' + ",".join(records) + "]}"


def _session(
    rng: random.Random,
    pools: _Pools,
    *,
    sid: str,
    cwd: str,
    kind: str,
    target: int,
    big: bool,
    paste: int,
    clear_head: bool,
    ide: bool,
    t0_ms: int,
) -> tuple[bytes, dict]:
    """Build one transcript; return its bytes and its ground truth."""
    headless = kind == "headless"
    w = _Writer(rng, pools, sid, cwd, rng.choice(BRANCHES), "sdk-cli" if headless else "cli", t0_ms)
    # Interactive sessions (but not the buried-title archetype) get evolving ai-titles.
    ai_titles = None
    if kind in ("plain", "clean"):
        ai_titles = [_fill(rng, rng.choice(AI_TITLE_TEMPLATES)) for _ in range(rng.randint(1, 3))]
    named_at_start = kind == "clean" and rng.random() < 0.4
    custom = _fill(rng, rng.choice(CUSTOM_TITLE_TEMPLATES)) if kind in ("clean", "buried") else None

    # ---- head
    prompt = _paste(rng, paste) if paste else _prompt(rng)
    prompt_json = _j(prompt)
    if ide:
        opened = (
            f"<ide_opened_file>The user opened the file {cwd}/{rng.choice(FILES)} in the IDE. "
            "This may or may not be related to the current task.</ide_opened_file>"
        )
        prompt_json = f'[{{"type":"text","text":{_j(opened)}}},{{"type":"text","text":{prompt_json}}}]'
    if headless:
        w.queue(prompt_json)
    else:
        w.meta("permission-mode", "permissionMode", "default")
        if named_at_start:  # `claude --name X`: the title is written when the file is created
            w.custom_title(custom)
        if clear_head:  # a session begun by /clear
            w.snapshot(_uuid(rng))
            w.user(_j(CAVEAT), extra=',"isMeta":true')
            w.user(_j(CLEAR_CMD))
            w.local_command("<local-command-stdout></local-command-stdout>")
    w.turn(prompt_json, prompt, ai_titles=ai_titles, first=True)

    # ---- body
    compact_every = rng.randint(5 * MiB, 9 * MiB)
    next_compact = compact_every
    switch_at = rng.uniform(0.2, 0.8) * target if rng.random() < 0.15 else None
    rename_at = None
    distance = None
    if kind == "clean" and not named_at_start:
        rename_at = rng.uniform(0.1, 0.9) * target
    elif kind == "buried":
        # A crash (or /clear) after the rename means no re-append at EOF: the title stays here.
        distance = rng.randint(320 * KiB, 2560 * KiB)
        rename_at = max(0, target - distance)
    while True:
        if rename_at is not None and w.size >= rename_at:
            w.local_command(
                f"<command-name>/rename</command-name>\n            <command-message>rename"
                f"</command-message>\n            <command-args>{custom}</command-args>"
            )
            w.local_command(f"<local-command-stdout>Session renamed to: {custom}</local-command-stdout>")
            w.custom_title(custom)
            rename_at = None
            if distance is not None:
                target = w.size + distance
        # Stop at the turn that would most likely cross the target (turns average ~45 KB), so
        # sizes centre on the target instead of overshooting it by half a turn.
        if w.size + 20 * KiB >= target:
            break
        if switch_at is not None and w.size >= switch_at:
            w.switch_branch(rng.choice([b for b in BRANCHES if b != w.branch]))
            switch_at = None
        # The buried title must be the only title line: no compaction re-append after it.
        if big and kind != "buried" and w.size >= next_compact:
            w.compact()
            next_compact = w.size + compact_every
        text = _prompt(rng)
        w.turn(_j(text), text, ai_titles=ai_titles)

    # ---- tail
    if kind == "clean":  # clean exit: metadata re-appended at EOF
        w.last_prompt()
        w.custom_title(custom)
        w.meta("mode", "mode", "normal")
    elif headless:
        w.last_prompt()
    data = "".join(w.parts).encode()
    truth = {
        "title": w.custom or w.ai,  # None: the catalog should fall back to the first prompt
        "first_prompt": prompt[:200],
        "branch": w.branch,
        "cwd": cwd,
        "kind": kind,
        "big": big,
        "pasted": len(prompt.encode()) if paste else 0,
        "began_with_clear": clear_head,
        "size": len(data),
        "mtime_ns": 0,
        "path": "",
    }
    if kind == "buried":
        truth["title_distance_from_end"] = len(data) - data.rfind(b'{"type":"custom-title"')
    return data, truth


def _project_dirs(root: Path, projects: int) -> list[str]:
    names = list(PROJECT_NAMES[:projects]) + [f"proj_{i}" for i in range(len(PROJECT_NAMES), projects)]
    work = root / "work"
    dirs = []
    for name in names:
        d = work / name
        d.mkdir(parents=True, exist_ok=True)
        dirs.append(os.path.realpath(d))  # Claude Code records the realpath
    assert len({claude_slug(d) for d in dirs}) == len(dirs), "project slugs must not collide"
    return dirs


def generate(
    root: Path,
    *,
    transcripts: int = 1000,
    projects: int = 5,
    seed: int = 1,
    big_sizes: bool = True,
    workers: int | None = None,
) -> Corpus:
    """Write a corpus of ``transcripts`` sessions spread evenly over ``projects`` projects
    (``workers`` processes; the files do not depend on how many)."""
    started = time.perf_counter()
    root = Path(os.path.realpath(root))
    config = root / "config"
    dirs = _project_dirs(root, projects)
    folders = []
    for d in dirs:
        folder = config / "projects" / claude_slug(d)
        folder.mkdir(parents=True, exist_ok=True)
        folders.append(folder)

    rng = random.Random(seed)
    n = transcripts
    # Archetypes by exact share, so every corpus of a given size has the same mix.
    order = list(range(n))
    rng.shuffle(order)
    kinds = ["plain"] * n
    n_buried, n_clean, n_headless = round(n * 0.10), round(n * 0.30), round(n * 0.06)
    for rank, i in enumerate(order):
        if rank < n_buried:
            kinds[i] = "buried"
        elif rank < n_buried + n_clean:
            kinds[i] = "clean"
        elif rank < n_buried + n_clean + n_headless:
            kinds[i] = "headless"
    interactive = [i for i in range(n) if kinds[i] != "headless"]
    big = set(rng.sample(interactive, round(n * 0.01))) if big_sizes else set()
    pasted = set(rng.sample(range(n), round(n * 0.05)))
    now_ms = int(time.time() * 1000)
    jobs = [
        _Job(i, seed, kinds[i], i in big, i in pasted, dirs[i % projects], str(folders[i % projects]), now_ms)
        for i in range(n)
    ]

    global _POOLS
    _POOLS = _Pools(random.Random(f"pools-{seed}"))
    workers = workers or min(4, os.cpu_count() or 1)
    if workers > 1 and n > 20 and "fork" in multiprocessing.get_all_start_methods():
        # Sessions are independent and each has its own seeded generator, so the output does not
        # depend on which worker wrote what. Forked workers inherit the text pools.
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(workers) as pool:
            results = pool.map(_write_one, jobs, chunksize=8)
    else:
        results = [_write_one(job) for job in jobs]
    expected = {sid: truth for sid, truth in results}
    total = sum(t["size"] for t in expected.values())
    corpus = Corpus(
        config_dir=str(config),
        project_dirs=dirs,
        files=n,
        total_bytes=total,
        expected=expected,
        root=str(root),
        seed=seed,
        big_sizes=big_sizes,
    )
    corpus.seconds = time.perf_counter() - started
    corpus.save()
    return corpus


_POOLS: _Pools | None = None
TURN_BYTES = 45 * KiB  # an average turn, for estimating how long a session of a size lasted
TURN_MS = 360_000  # ... and how long such a turn takes (mostly the user thinking)


@dataclass(slots=True)
class _Job:
    index: int
    seed: int
    kind: str
    big: bool
    pasted: bool
    cwd: str
    folder: str
    now_ms: int


def _write_one(job: _Job) -> tuple[str, dict]:
    srng = random.Random(f"{job.seed}-{job.index}")
    sid = _uuid(srng)
    if job.big:
        target = srng.randint(20 * MiB, 60 * MiB)
    else:
        target = int(MEDIAN_SIZE * math.exp(srng.gauss(0, SIZE_SIGMA)))
        target = max(6 * KiB, min(target, 12 * MiB))
    paste = srng.randint(70 * KiB, 300 * KiB) if job.pasted else 0
    # Sessions end within the last 60 days; they started as long before that as their size
    # suggests (a 40 MiB session ran for days).
    end = job.now_ms - srng.randint(DAY_MS // 50, 60 * DAY_MS)
    t0 = end - int(max(target, 3 * MiB if job.kind == "buried" else 0) / TURN_BYTES * TURN_MS)
    data, truth = _session(
        srng,
        _POOLS,
        sid=sid,
        cwd=job.cwd,
        kind=job.kind,
        target=target,
        big=job.big,
        paste=paste,
        clear_head=job.kind != "headless" and srng.random() < 0.08,
        ide=job.kind != "headless" and srng.random() < 0.05,
        t0_ms=t0,
    )
    path = os.path.join(job.folder, f"{sid}.jsonl")
    with open(path, "wb") as f:
        f.write(data)
    # mtime: a little after the last line (exit handlers, the title side request).
    last_ms = _last_ts_ms(data) or t0
    mtime_ns = min(last_ms + srng.randint(50, 4000), job.now_ms) * 1_000_000
    os.utime(path, ns=(mtime_ns, mtime_ns))
    truth.update(path=path, mtime_ns=mtime_ns, project=job.cwd)
    return sid, truth


def _last_ts_ms(data: bytes) -> int | None:
    at = data.rfind(b'"timestamp":"')
    if at < 0:
        return None
    iso = data[at + 13 : at + 37].decode()
    secs = calendar.timegm(time.strptime(iso[:19], "%Y-%m-%dT%H:%M:%S"))
    return secs * 1000 + int(iso[20:23])


def add_corpus_options(ap: argparse.ArgumentParser, runs: int = 7) -> None:
    """A benchmark's corpus: a new one of ``--transcripts`` in ``--projects``, or ``--corpus DIR``."""
    ap.add_argument("--transcripts", type=int, default=10_000)
    ap.add_argument("--projects", type=int, default=50)
    ap.add_argument("--runs", type=int, default=runs)
    ap.add_argument("--corpus", metavar="DIR", help="a corpus stress.corpus wrote (kept); default: a new one")


def corpus_of(args: argparse.Namespace, root: Path) -> Corpus:
    """The corpus ``--corpus`` names, else a new one under ``root`` (``add_corpus_options``)."""
    if not args.corpus:
        return generate(root, transcripts=args.transcripts, projects=args.projects, big_sizes=False)
    found = Corpus.load(Path(args.corpus))
    if found is None:
        raise SystemExit(f"{args.corpus}: no corpus there (python -m stress.corpus DIR writes one)")
    return found


def write_giant(root: Path, *, size: int = 2 * GiB, seed: int = 7) -> tuple[str, Path, dict]:
    """One project holding one ~``size``-byte transcript: a realistic head of ~400 KB, a hole of
    zero bytes (sparse where the filesystem allows), then a realistic ~400 KB tail whose turns
    carry an ai-title. Returns (project dir, transcript path, ground truth)."""
    root = Path(os.path.realpath(root))
    project = root / "work" / "giant-transcript"
    project.mkdir(parents=True, exist_ok=True)
    cwd = os.path.realpath(project)
    folder = root / "config" / "projects" / claude_slug(cwd)
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    pools = _Pools(random.Random(f"pools-{seed}"))
    sid = _uuid(rng)
    t0 = int(time.time() * 1000) - 3 * DAY_MS
    w = _Writer(rng, pools, sid, cwd, "main", "cli", t0)
    first = _prompt(rng)
    w.meta("permission-mode", "permissionMode", "default")
    w.turn(_j(first), first, ai_titles=["Early working title"], first=True)
    while w.size < 400 * KiB:
        text = _prompt(rng)
        w.turn(_j(text), text, ai_titles=None)
    head = "".join(w.parts).encode()
    w.parts, w.size = [], 0
    titles = ["Long-running migration of the whole catalog"]
    while w.size < 400 * KiB:
        text = _prompt(rng)
        w.turn(_j(text), text, ai_titles=titles)
    w.ai_title(titles[0])  # at least one ai-title in the last turn
    tail = b"\n" + "".join(w.parts).encode()  # the newline ends the zero-filled "line"
    path = folder / f"{sid}.jsonl"
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size - len(tail))  # extends with a hole; no 2 GB of writes
        f.seek(size - len(tail))
        f.write(tail)
    truth = {
        "title": titles[0],
        "first_prompt": first[:200],
        "branch": "main",
        "cwd": cwd,
        "size": size,
        "path": str(path),
    }
    return cwd, path, truth


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stress.corpus", description=__doc__.split("\n")[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--transcripts", type=int, default=1000)
    ap.add_argument("--projects", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-big", action="store_true", help="no 20-60 MiB transcripts")
    args = ap.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    c = generate(
        args.out_dir, transcripts=args.transcripts, projects=args.projects, seed=args.seed, big_sizes=not args.no_big
    )
    sizes = sorted(e["size"] for e in c.expected.values())
    print(
        f"{c.files} transcripts in {len(c.project_dirs)} projects, {c.total_bytes / MiB:.1f} MiB, "
        f"median {sizes[len(sizes) // 2] / KiB:.0f} KiB, largest {sizes[-1] / MiB:.1f} MiB, "
        f"generated in {c.seconds:.1f} s"
    )
    print(f"CLAUDE_CONFIG_DIR={c.config_dir}")
    for d in c.project_dirs:
        print(f"project: {d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
