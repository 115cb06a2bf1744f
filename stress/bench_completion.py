"""Shell completion benchmark: a Tab where a session id goes, over N sessions (2,000 by default).

    python -m stress.bench_completion [--sessions 2000] [--runs 21] [--json FILE]

A project with N small transcripts is listed once (``c3async sessions``, which writes the ids'
cache), then each run is timed as a whole process: the fast path as the script of ``c3async
completion bash`` runs it (``python -I -S -c BOOT --complete bash 2 c3async show ""``: every id
of the project, with its title), the same Tab through a real bash that loaded the script (the
completion function bash registered, called as bash calls it), and, for scale, argcomplete's
completion of a command name (the parser's path, which every other Tab takes) and ``python -I -S
-c pass``. Prints medians; asserts nothing about time; exits 1 if a Tab does not offer the
newest ids (``OFFERED`` of them; what more is typed narrows among all).
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from c3async.completion import command
from c3async.sessions.completion import OFFERED
from stress.figures import Table, add_json_option
from stress.transcripts import claude_slug, recent_sessions


def _world(root: Path, n: int) -> tuple[dict[str, str], Path, list[str]]:
    config, home, project = root / "config", root / "c3home", root / "work" / "app"
    project.mkdir(parents=True)
    folder = config / "projects" / claude_slug(str(project))
    ids = recent_sessions(folder, str(project), n, "task {i}: wire the billing webhook, part {i}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "C3_"))}
    env.update(CLAUDE_CONFIG_DIR=str(config), C3_HOME=str(home), HOME=str(root))
    return env, project, ids


def _median_ms(argv: list[str], env: dict[str, str], cwd: Path, runs: int) -> tuple[float, str]:
    times, out = [], ""
    for _ in range(runs):
        t0 = time.perf_counter()
        done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
        times.append((time.perf_counter() - t0) * 1000)
        out = done.stdout
    return statistics.median(times), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stress.bench_completion")
    ap.add_argument("--sessions", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=21)
    add_json_option(ap)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="c3bench-complete-") as tmp:
        root = Path(os.path.realpath(tmp))
        env, project, ids = _world(root, args.sessions)
        listed = subprocess.run(
            [sys.executable, "-m", "c3async", "sessions", "--project", str(project), "--limit", str(len(ids))],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if listed.returncode != 0:
            print(listed.stderr, file=sys.stderr)
            return 1
        script = root / "c3async.bash"
        made = subprocess.run(
            [sys.executable, "-m", "c3async", "completion", "bash"], env=env, capture_output=True, text=True
        )
        script.write_text(made.stdout)
        fast = [*shlex.split(command()), "bash", "2", "c3async", "show", ""]
        bash_tab = (
            f"source {shlex.quote(str(script))}; COMP_WORDS=(c3async show ''); COMP_CWORD=2; "
            "COMP_LINE='c3async show '; COMP_POINT=13; _c3async_complete c3async '' show; "
            'printf "%s\\n" "${COMPREPLY[@]}"'
        )
        parser_tab = (
            f"source {shlex.quote(str(script))}; COMP_WORDS=(c3async sess); COMP_CWORD=1; "
            "COMP_LINE='c3async sess'; COMP_POINT=12; _c3async_complete c3async sess c3async; "
            'printf "%s\\n" "${COMPREPLY[@]}"'
        )
        bash = ["bash", "--norc", "--noprofile", "-c"]
        env_path = {**env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"}
        fast_ms, fast_out = _median_ms(fast, env, project, args.runs)
        tab_ms, tab_out = _median_ms([*bash, bash_tab], env, project, args.runs)
        parser_ms, parser_out = _median_ms([*bash, parser_tab], env_path, project, max(5, args.runs // 3))
        bare_ms, _ = _median_ms([sys.executable, "-I", "-S", "-c", "pass"], env, project, args.runs)
        offered = {line.split()[0] for line in tab_out.splitlines() if line.strip()}
        newest = ids[:OFFERED]  # a Tab offers the newest OFFERED; more typed narrows among all
        ok = offered == set(newest) and len(fast_out.splitlines()) == len(newest) and "sessions" in parser_out
        kept = len(fast_out.splitlines())
    t = Table("bench_completion")
    t.section(f"a Tab where a session id goes, {args.sessions:,} sessions (median of {args.runs})")
    t.add("the fast path, whole process (c3async --complete)", f"{fast_ms:.0f} ms", f"{kept:,} ids with titles")
    t.add("the same Tab through bash (the registered function)", f"{tab_ms:.0f} ms", "(budget: under 150 ms)")
    t.add("for scale: a command name through argcomplete", f"{parser_ms:.0f} ms", "(the parser's path)")
    t.add("for scale: python -I -S -c pass", f"{bare_ms:.0f} ms")
    t.done(args.json)
    if not ok:
        print(f"a Tab did not offer the newest ids ({len(offered)} of {OFFERED})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
