"""The Hub benchmark: its listing API and its page, at any scale.

    python -m stress.bench_hub [--transcripts 1000] [--projects 5] [--runs 30] [--browser-runs 5]

Run from the repository root; ``--transcripts 10000 --projects 50`` is the heavy user's day. It
generates a corpus (``stress.corpus``, no big transcripts), registers its projects with
``c3async sessions --project P --json`` (which also fills the catalog cache: the cold listing),
starts the real ``c3async hub --port 0`` and prints, as medians with the min-max:

- ``GET /api/rows`` (the page's listing: one page over every project, filtered, sorted and
  counted by the Hub), warm: the first page, a likely-stale page, a search, a sort by title, a
  page deep in the list, one project's page, and the first page's size (budget < 50 ms and
  < 150 KB at 10,000 rows); ``GET /api/sessions`` (every row whole, for scripts) and a detail;
- in Chromium (``/usr/bin/chromium``, through Playwright), opened as a user opens it (the URL
  the Hub printed, ``/?token=...``, which the page's script keeps): navigation to the first
  rows painted (< 300 ms), a filter change and a sort change to the new rows painted (< 150 ms), scrolling
  to the end of the list (every row loaded) and its longest frame (< 50 ms), the page's JS heap
  then (< 100 MB), a mark written from the CLI to its row updated in the page (< 1 s), and a
  session that starts waiting (Claude Code's registry file of a running process) to its row's
  "waiting" pill (the change stream's 2 s).

The API calls send the token the Hub printed as ``Authorization: Bearer``. It asserts nothing
about time. It exits 1 only on an error: a request that fails, a listing with the wrong number
of rows, a hub that does not start, a page that does not fill.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from stress.chromium import launched, missing
from stress.corpus import generate
from stress.figures import Table, add_json_option

try:
    import httpx
except ImportError:  # mcp depends on httpx2, which has the same API
    import httpx2 as httpx  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[1]
BUDGET_MS = 50.0  # a listing page, warm
BUDGET_KB = 150.0

# Before any page script: when the first row is painted (the frame after it is in the DOM).
OBSERVER = """
(() => {
  window.__firstPaint = null;
  const look = () => {
    const ul = document.getElementById('rows');
    if (ul && ul.children.length && window.__firstPaint === null) {
      window.__firstPaint = -1;
      requestAnimationFrame(() => requestAnimationFrame(() => { window.__firstPaint = performance.now(); }));
    }
  };
  new MutationObserver(look).observe(document, { childList: true, subtree: true });
})();
"""
# From an action to the next rows painted: resolves with the ms from `start` to the frame after
# #rows' first child changes.
CHANGED = """
(start) => new Promise((resolve) => {
  const ul = document.getElementById('rows');
  const first = ul.firstElementChild;
  const done = () => requestAnimationFrame(() => requestAnimationFrame(() => resolve(performance.now() - start)));
  const mo = new MutationObserver(() => { if (ul.firstElementChild !== first) { mo.disconnect(); done(); } });
  mo.observe(ul, { childList: true });
})
"""
CLICK_TIMED = (
    "(sel) => { const p = (" + CHANGED + ")(performance.now()); document.querySelector(sel).click(); return p; }"
)
# Scroll to the end until every row is loaded; the longest frame meanwhile.
SCROLL = """
async ([total, step]) => {
  const deltas = [];
  let last = performance.now(), going = true;
  const tick = (t) => { deltas.push(t - last); last = t; if (going) requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
  const loaded = () => list.rows.length;  // the rows the page has loaded (it draws only those in and near the window)
  const started = performance.now();
  while (loaded() < total && performance.now() - started < 120000) {
    window.scrollBy(0, step);
    await new Promise(r => requestAnimationFrame(r));
  }
  going = false;
  await new Promise(r => setTimeout(r, 50));
  return [loaded(), Math.max(...deltas.slice(1)), performance.now() - started, document.querySelectorAll('#rows li.row').length];
}
"""


class BenchError(Exception):
    pass


@contextlib.contextmanager
def registry_entry(env: dict[str, str], session_id: str, cwd: Path) -> Iterator[None]:
    """A running process with Claude Code's registry file naming ``session_id`` as waiting."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        stat = Path(f"/proc/{proc.pid}/stat").read_bytes()
        ticks = stat[stat.rindex(b")") + 2 :].split()[19].decode()
        folder = Path(env["CLAUDE_CONFIG_DIR"]) / "sessions"
        folder.mkdir(exist_ok=True)
        now_ms = time.time() * 1000
        (folder / f"{proc.pid}.json").write_text(
            json.dumps(
                {
                    "pid": proc.pid,
                    "sessionId": session_id,
                    "cwd": str(cwd),
                    "procStart": ticks,
                    "startedAt": now_ms,
                    "status": "waiting",
                    "statusUpdatedAt": now_ms,
                    "waitingFor": "dialog open",
                    "kind": "interactive",
                }
            )
        )
        yield
    finally:
        proc.kill()
        proc.wait()


def fmt(values_s: list[float]) -> str:
    ms = [v * 1e3 for v in values_s]
    return f"{statistics.median(ms):8.1f} ms  [{min(ms):.1f}-{max(ms):.1f}]"


class Hub:
    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "c3async", "hub", "--port", "0"],
            env=env,
            cwd=str(cwd),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.port: int | None = None
        self.token: str | None = None
        self.login_url: str | None = None
        ready = threading.Event()

        def drain() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.lines.append(line)
                m = re.search(r"c3async Hub on (http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]+))", line)
                if m and self.port is None:
                    self.login_url, self.token = m.group(1), m.group(3)
                    self.port = int(m.group(2))
                    ready.set()
            ready.set()

        self.reader = threading.Thread(target=drain, daemon=True)
        self.reader.start()
        if not ready.wait(30) or self.port is None:
            self.stop()
            raise BenchError("the hub did not start:\n" + "".join(self.lines))
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(self.url + "/", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.stop()
                raise BenchError("the hub did not answer:\n" + "".join(self.lines))
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.reader.join(5)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


def timed_get(client: httpx.Client, path: str, params: dict | None = None) -> tuple[float, httpx.Response]:
    t0 = time.perf_counter()
    r = client.get(path, params=params)
    _ = r.content
    elapsed = time.perf_counter() - t0
    if r.status_code != 200:
        raise BenchError(f"GET {path} {params or ''}: {r.status_code} {r.text[:200]}")
    return elapsed, r


def bench_rows(hub: Hub, projects: list[str], total: int, runs: int, table: list[tuple[str, str]]) -> None:
    with httpx.Client(base_url=hub.url, timeout=60, headers={"Authorization": f"Bearer {hub.token}"}) as c:
        deadline = time.monotonic() + 300
        while True:  # the Hub builds every project's rows at start: wait for all of them
            t, r = timed_get(c, "/api/rows")
            if r.json()["total"] == total:
                break
            if time.monotonic() > deadline:
                raise BenchError(f"/api/rows counted {r.json()['total']} rows, not {total}")
            time.sleep(0.2)
        cases = [
            ("first page, all projects", {}),
            ("filter=likely", {"filter": "likely"}),
            ("q=retry (words)", {"q": "retry"}),
            ("sort=title", {"sort": "title", "order": "asc"}),
            (f"cursor={max(0, total - 200)} (deep)", {"cursor": str(max(0, total - 200)), "limit": "200"}),
            (f"project={Path(projects[0]).name}", {"project": projects[0]}),
        ]
        for label, params in cases:
            times = []
            for _ in range(runs):
                t, r = timed_get(c, "/api/rows", params)
                times.append(t)
            over = "" if statistics.median(times) * 1e3 < BUDGET_MS else "   <-- over the budget"
            table.append(
                (f"/api/rows {label} ({len(r.json()['rows'])} rows of {r.json()['total']}) x{runs}", fmt(times) + over)
            )
            if not params:
                size = len(r.content) / 1024
                table.append(
                    ("  its size", f"{size:8.0f} KiB" + ("" if size < BUDGET_KB else "   <-- over the budget"))
                )


def bench_api(hub: Hub, projects: list[str], total: int, runs: int, table: list[tuple[str, str]]) -> list[str]:
    with httpx.Client(base_url=hub.url, timeout=60, headers={"Authorization": f"Bearer {hub.token}"}) as c:
        first, r = timed_get(c, "/api/sessions")
        rows = r.json()["rows"]
        if len(rows) != total:
            raise BenchError(f"/api/sessions listed {len(rows)} rows, not {total}")
        table.append((f"/api/sessions, all projects ({total} rows), first request", fmt([first])))
        warm = []
        for _ in range(runs):
            t, r = timed_get(c, "/api/sessions")
            if len(r.json()["rows"]) != total:
                raise BenchError("a warm listing lost rows")
            warm.append(t)
        table.append((f"/api/sessions, all projects ({total} rows, every field), warm x{runs}", fmt(warm)))
        table.append(("  response size", f"{len(r.content) / 1024:8.0f} KiB"))
        filt = [timed_get(c, "/api/sessions", {"filter": "likely"})[0] for _ in range(max(5, runs // 3))]
        table.append((f"/api/sessions?filter=likely, all projects x{len(filt)}", fmt(filt)))
        search = [timed_get(c, "/api/sessions", {"q": "retry"})[0] for _ in range(max(5, runs // 3))]
        table.append((f"/api/sessions?q=retry, all projects x{len(search)}", fmt(search)))
        for p in projects[:3]:
            want = sum(1 for row in rows if row["project"] == p)
            per = []
            for _ in range(max(5, runs // 3)):
                t, r = timed_get(c, "/api/sessions", {"project": p})
                if len(r.json()["rows"]) != want:
                    raise BenchError(f"{p}: {len(r.json()['rows'])} rows, not {want}")
                per.append(t)
            table.append((f"/api/sessions?project={Path(p).name} ({want} rows) x{len(per)}", fmt(per)))
        detail = []
        for row in rows[:runs]:
            t, r = timed_get(c, f"/api/sessions/{row['id']}", {"project": row["project"]})
            if r.json()["row"]["id"] != row["id"]:
                raise BenchError("a detail answered for another session")
            detail.append(t)
        table.append((f"/api/sessions/{{id}}?project= (detail) x{len(detail)}", fmt(detail)))
        bare = []
        for row in rows[: max(5, runs // 3)]:
            bare.append(timed_get(c, f"/api/sessions/{row['id']}")[0])
        table.append((f"/api/sessions/{{id}} without project x{len(bare)}", fmt(bare)))
    return [row["id"] for row in rows]


def bench_browser(
    hub: Hub, total: int, runs: int, table: list[tuple[str, str]], env: dict[str, str], cwd: Path, scroll_px: int = 3000
) -> None:
    if missing() is not None:
        table.append(("browser", f"skipped: {missing()}"))
        return
    first, filt, sort, frames, scroll_s, heap, update, drawn_rows, waiting = [], [], [], [], [], [], [], [], []
    with launched() as browser:
        for run in range(runs):
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            try:
                page = context.new_page()
                errors: list[str] = []
                page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
                page.add_init_script(OBSERVER)
                page.goto(hub.login_url)
                page.wait_for_function("() => window.__firstPaint > 0", timeout=60_000)
                first.append(page.evaluate("window.__firstPaint") / 1e3)
                page.wait_for_timeout(300)
                filt.append(page.evaluate(CLICK_TIMED, '#filters button[data-filter="likely"]') / 1e3)
                page.locator('#filters button[data-filter="all"]').click()
                page.wait_for_timeout(300)
                sort.append(page.evaluate(CLICK_TIMED, '#columns button[data-sort="title"]') / 1e3)
                page.locator('#columns button[data-sort="activity"]').click()
                page.wait_for_timeout(500)
                loaded, longest, took, drawn = page.evaluate(SCROLL, [total, scroll_px])
                if loaded != total or errors:
                    raise BenchError(f"scrolling showed {loaded} rows of {total}; errors: {errors}")
                frames.append(longest / 1e3)
                drawn_rows.append(drawn)
                scroll_s.append(took / 1e3)
                session = page.context.new_cdp_session(page)
                session.send("HeapProfiler.collectGarbage")
                heap.append(session.send("Runtime.getHeapUsage")["usedSize"])
                page.evaluate("window.scrollTo(0, 0)")
                row = page.locator("#rows li").nth(run)
                sid, project = row.get_attribute("data-id"), row.get_attribute("data-project")
                t0 = time.perf_counter()
                proc = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "c3async",
                        "mark",
                        "stale",
                        sid,
                        "--reason",
                        f"bench {run}",
                        "--project",
                        project,
                    ],
                    env=env,
                    cwd=str(cwd),
                    capture_output=True,
                    text=True,
                )
                if proc.returncode != 0:
                    raise BenchError(f"mark: {proc.stderr}")
                page.locator(f'#rows li[data-id="{sid}"] .chip.stale').wait_for(timeout=30_000)
                update.append(time.perf_counter() - t0)
                # a session starts waiting for its user: Claude Code's registry file of a running
                # process (this benchmark's child stands for the claude)
                other = page.locator("#rows li").nth(run + 1)
                wid, wproject = other.get_attribute("data-id"), other.get_attribute("data-project")
                t0 = time.perf_counter()
                with registry_entry(env, wid, Path(wproject)):
                    page.locator(f'#rows li[data-id="{wid}"] .state-pill.waiting').wait_for(timeout=30_000)
                    waiting.append(time.perf_counter() - t0)
            finally:
                context.close()
    table.append((f"Chromium 1400 px: navigation (the printed URL) to first rows painted x{runs}", fmt(first)))
    table.append((f"Chromium: filter change (Likely stale) to the new rows painted x{runs}", fmt(filt)))
    table.append((f"Chromium: sort change (Title) to the new rows painted x{runs}", fmt(sort)))
    table.append(
        (
            f"Chromium: scrolling to the end ({total} rows loaded, {scroll_px} px a frame): longest frame x{runs}",
            fmt(frames),
        )
    )
    table.append(("  the whole scroll", fmt(scroll_s)))
    table.append(("  rows in the document at the end (the window drawn)", f"{statistics.median(drawn_rows):8.0f}"))
    table.append(
        (
            f"Chromium: JS heap with {total} rows loaded x{runs}",
            f"{statistics.median(heap) / 2**20:8.1f} MiB  [{min(heap) / 2**20:.1f}-{max(heap) / 2**20:.1f}]",
        )
    )
    table.append((f"Chromium: a mark from the CLI to its row updated in the page x{runs}", fmt(update)))
    table.append((f"Chromium: a session starting to wait (registry file) to its row's pill x{runs}", fmt(waiting)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stress.bench_hub", description=__doc__.split("\n")[0])
    ap.add_argument("--transcripts", type=int, default=1000)
    ap.add_argument("--projects", type=int, default=5)
    ap.add_argument("--runs", type=int, default=30, help="warm requests per figure")
    ap.add_argument("--browser-runs", type=int, default=5)
    ap.add_argument("--scroll-px", type=int, default=3000, help="how far the scroll goes each frame")
    add_json_option(ap)
    args = ap.parse_args(argv)
    table: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="c3-bench-hub-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        corpus = generate(root, transcripts=args.transcripts, projects=args.projects, big_sizes=False)
        gen_s = time.perf_counter() - t0
        c3home = root / "c3home"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "C3_"))}
        env.update(CLAUDE_CONFIG_DIR=corpus.config_dir, C3_HOME=str(c3home), PYTHONPATH=str(REPO))
        print(
            f"c3async Hub benchmark ({os.cpu_count()} cores): {corpus.files} transcripts in "
            f"{len(corpus.project_dirs)} projects, {corpus.total_bytes / 2**20:.0f} MiB, generated in {gen_s:.1f} s"
        )
        register = []
        for p in corpus.project_dirs:
            t = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "c3async", "sessions", "--project", p, "--json"],
                env=env,
                cwd=str(root),
                capture_output=True,
                text=True,
            )
            register.append(time.perf_counter() - t)
            if proc.returncode != 0:
                print(f"error: registering {p} failed: {proc.stderr}", file=sys.stderr)
                return 1
        table.append((f"c3async sessions --project P --json (cold, registers) x{len(register)}", fmt(register)))
        try:
            hub = Hub(env, root)
        except BenchError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        try:
            bench_rows(hub, corpus.project_dirs, corpus.files, args.runs, table)
            bench_api(hub, corpus.project_dirs, corpus.files, max(5, args.runs // 3), table)
            bench_browser(hub, corpus.files, args.browser_runs, table, env, root, args.scroll_px)
        except (BenchError, httpx.HTTPError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        except Exception as exc:  # a browser failure is an error too, said plainly
            print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
        finally:
            hub.stop()
    t = Table("bench_hub")
    t.section(f"the Hub ({os.cpu_count()} cores): {corpus.files} transcripts in {len(corpus.project_dirs)} projects")
    for label, value in table:
        t.add(label, value.strip())
    t.add(
        "budgets",
        f"a listing page warm < {BUDGET_MS:.0f} ms and < {BUDGET_KB:.0f} KB; first rows < 300 ms; "
        "a filter or sort change < 150 ms; longest scroll frame < 50 ms; heap < 100 MB; a row change < 1 s",
    )
    t.done(args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
