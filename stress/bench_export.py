"""What ``c3async export`` costs on a big transcript: peak memory (RSS) and wall time, Markdown
and HTML, at two sizes, so that memory independent of size shows.

    python -m stress.bench_export [--mb 1024] [--small-mb 128] [--json FILE]

Run from the repository root. It writes, into a temp folder, transcripts of about ``--small-mb``
and ``--mb`` MiB as Claude Code writes them (``stress/transcripts.py``): prompts, replies of
120,000 characters (past the export's cut of a text), and tool calls with 256 KiB results (past
its cut of an output), plus one sub-agent; then runs ``c3async export ID -o FILE`` as a process
of its own and reads its peak RSS from the kernel (``wait4``). The budget (DESIGN.md): under
300 MB at 1 GB; the aim here: under 100 MB, whatever the size. It exits 1 when an export fails
or the larger one's peak is over the budget.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from stress.bench_catalog import run_child
from stress.figures import Table, add_json_option
from stress.transcripts import Conversation, claude_slug, encode, text, tool_use, write_session

MiB = 1024 * 1024
BUDGET_MIB = 300
OUTPUT_BYTES = 256 * 1024
ANSWER_CHARS = 120_000


def write_big(folder: Path, cwd: str, size: int) -> tuple[str, int]:
    """A session of about ``size`` bytes, written a round at a time (never held whole):
    (its id, its size)."""
    c = Conversation(cwd)
    path = folder / f"{c.id}.jsonl"
    agent = Conversation(cwd, c.id, sidechain=True)
    write_session(folder / c.id / "subagents", "agent-b16b16", [agent.prompt("look"), *agent.reply(text("found"))])
    written = 0
    n = 0
    with open(path, "wb") as f:
        task = tool_use("Task", {"description": "look around", "prompt": "look"})
        res = c.tool_result(task["id"], "found")
        res["toolUseResult"] = {"agentId": "b16b16"}
        for line in [*c.exchange("start with an agent"), *c.reply(task), res]:
            f.write(encode(line) + b"\n")
        while written < size:
            n += 1
            lines = c.exchange(f"prompt {n}: " + "why " * 50, f"answer {n}: " + "x" * ANSWER_CHARS)
            for _ in range(4):
                lines += c.tool_round(f"result {n}\n" + ("ok " * (OUTPUT_BYTES // 3)), input={"command": f"run {n}"})
            data = b"".join(encode(line) + b"\n" for line in lines)
            f.write(data)
            written += len(data)
    return c.id, path.stat().st_size


def export_once(env: dict[str, str], sid: str, fmt: str, out: Path) -> tuple[int, float, int]:
    """(peak RSS in bytes, wall seconds, output bytes) of one ``c3async export`` process."""
    out.unlink(missing_ok=True)
    return _export(env, sid, fmt, out)


def _export(env: dict[str, str], sid: str, fmt: str, out: Path) -> tuple[int, float, int]:
    # run_child: the peak of the export itself, not of the process that started it (a child's
    # ru_maxrss starts from its parent's high-water mark)
    run = run_child(
        [sys.executable, "-m", "c3async", "export", sid, f"--{fmt}", "-o", str(out)], env, env["C3_PROJECT"]
    )
    if run.rc != 0:
        raise SystemExit(f"c3async export failed ({run.rc}): {run.err.decode(errors='replace')[-500:]}")
    return run.maxrss, run.wall, out.stat().st_size


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=1024, help="the large transcript, in MiB (default 1024)")
    ap.add_argument("--small-mb", type=int, default=128, help="the small one, in MiB (default 128)")
    add_json_option(ap)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="c3-bench-export-"))
    try:
        project = root / "work" / "app"
        project.mkdir(parents=True)
        folder = root / "config" / "projects" / claude_slug(str(project))
        folder.mkdir(parents=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "C3_"))}
        repo = str(Path(__file__).resolve().parent.parent)
        env.update(CLAUDE_CONFIG_DIR=str(root / "config"), C3_HOME=str(root / "c3home"), PYTHONPATH=repo)
        env["C3_PROJECT"] = str(project)  # where the export runs (not read by c3async)
        t = Table("bench_export")
        t.section(f"c3async export, a process each ({os.cpu_count()} cores)")
        worst = 0
        for mb in (args.small_mb, args.mb):
            sid, size = write_big(folder, str(project), mb * MiB)
            for fmt in ("md", "html"):
                rss, wall, out = export_once(env, sid, fmt, root / f"out.{fmt}")
                if mb == args.mb:
                    worst = max(worst, rss)
                t.add(
                    f"{size / MiB:,.0f} MiB transcript -> {fmt}",
                    f"{rss / MiB:.0f} MiB peak RSS",
                    f"{wall:.1f} s, {size / MiB / wall:.0f} MiB/s; {out / MiB:.1f} MiB written",
                )
            (folder / f"{sid}.jsonl").unlink()  # the disk holds one at a time
        t.add("budget at 1 GB (DESIGN.md)", f"{BUDGET_MIB} MiB", "(aim: under 100 MiB, independent of size)")
        t.done(args.json)
        return 0 if worst < BUDGET_MIB * MiB else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
