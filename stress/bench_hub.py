"""The Hub benchmark: API latency with 1,000 sessions, and how soon the page shows them.

    python -m stress.bench_hub [--transcripts 1000] [--projects 5] [--runs 30] [--browser-runs 5]

Run from the repository root. It generates a corpus (``stress.corpus``, no big transcripts),
registers its projects with ``c3async sessions --project P --json`` (which also fills the catalog
cache: the cold listing), starts the real ``c3async hub --port 0`` and prints, as medians with
the min-max:

- ``GET /api/sessions`` over every project (1,000 rows), warm: the budget in DESIGN is < 100 ms;
- the same for each project alone (200 rows), and ``GET /api/sessions/{id}`` (a row's detail);
- in Chromium (``/usr/bin/chromium``, through Playwright), from navigation start to the first
  ``#rows li`` and to all of them (the page asks one listing per project, in parallel). The page
  is opened as a user opens it: the URL the Hub printed, ``/?token=...``, which redirects to ``/``
  with the session cookie (the redirect is part of the figure).

The API calls send the token the Hub printed as ``Authorization: Bearer``.

It asserts nothing about time. It exits 1 only on an error: a request that fails, a listing with
the wrong number of rows, a hub that does not start, a page that does not fill.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from stress.corpus import generate

try:
    import httpx
except ImportError:  # mcp depends on httpx2, which has the same API
    import httpx2 as httpx  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
BUDGET_MS = 100.0

# Before any page script: note when the first row appears and when all of them are there.
OBSERVER = """
(() => {
  window.__firstRow = null; window.__allRows = null;
  const want = %d;
  const look = () => {
    const ul = document.getElementById('rows');
    if (!ul) return;
    const n = ul.children.length;
    if (n > 0 && window.__firstRow === null) window.__firstRow = performance.now();
    if (n >= want && window.__allRows === null) window.__allRows = performance.now();
  };
  new MutationObserver(look).observe(document, { childList: true, subtree: true });
})();
"""


class BenchError(Exception):
    pass


def fmt(values_s: list[float]) -> str:
    ms = [v * 1e3 for v in values_s]
    return f"{statistics.median(ms):8.1f} ms  [{min(ms):.1f}-{max(ms):.1f}]"


class Hub:
    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "c3async", "hub", "--port", "0"], env=env, cwd=str(cwd),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
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
        over = "" if statistics.median(warm) * 1e3 < BUDGET_MS else "   <-- over the budget"
        table.append((f"/api/sessions, all projects ({total} rows), warm x{runs}", fmt(warm) + over))
        table.append(("  response size", f"{len(r.content) / 1024:8.0f} KiB"))
        filt = [timed_get(c, "/api/sessions", {"filter": "likely"})[0] for _ in range(max(5, runs // 3))]
        table.append((f"/api/sessions?filter=likely, all projects x{len(filt)}", fmt(filt)))
        search = [timed_get(c, "/api/sessions", {"q": "retry"})[0] for _ in range(max(5, runs // 3))]
        table.append((f"/api/sessions?q=retry, all projects x{len(search)}", fmt(search)))
        for p in projects:
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
        for row in rows[:max(5, runs // 3)]:
            bare.append(timed_get(c, f"/api/sessions/{row['id']}")[0])
        table.append((f"/api/sessions/{{id}} without project x{len(bare)}", fmt(bare)))
    return [row["id"] for row in rows]


def bench_browser(hub: Hub, total: int, runs: int, table: list[tuple[str, str]]) -> None:
    if not os.path.exists(CHROMIUM):
        table.append(("browser", f"skipped: no Chromium at {CHROMIUM}"))
        return
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        table.append(("browser", "skipped: the playwright package is not installed"))
        return
    first, full, requests_ms, render = [], [], [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            for _ in range(runs):
                context = browser.new_context(viewport={"width": 1280, "height": 900})
                try:
                    page = context.new_page()
                    errors: list[str] = []
                    page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
                    page.add_init_script(OBSERVER % total)
                    page.goto(hub.login_url)
                    page.wait_for_function("() => window.__allRows !== null", timeout=60_000)
                    got = page.evaluate("[window.__firstRow, window.__allRows, "
                                        "document.querySelectorAll('#rows li').length]")
                    if got[2] != total or errors:
                        raise BenchError(f"the page showed {got[2]} rows of {total}; errors: {errors}")
                    first.append(got[0] / 1e3)
                    full.append(got[1] / 1e3)
                    listing = page.evaluate(
                        "performance.getEntriesByType('resource').filter(e => e.name.includes('/api/sessions?'))"
                        ".map(e => [e.startTime, e.responseEnd])")
                    requests_ms += [(end - start) / 1e3 for start, end in listing]
                    render.append((got[1] - max(end for _, end in listing)) / 1e3)
                finally:
                    context.close()
        finally:
            browser.close()
    table.append((f"Chromium: navigation start to the first #rows li x{runs}", fmt(first)))
    table.append((f"Chromium: navigation start to all {total} rows x{runs}", fmt(full)))
    table.append((f"Chromium: each per-project listing fetch x{len(requests_ms)}", fmt(requests_ms)))
    table.append((f"Chromium: last listing response to all rows shown x{runs}", fmt(render)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stress.bench_hub", description=__doc__.split("\n")[0])
    ap.add_argument("--transcripts", type=int, default=1000)
    ap.add_argument("--projects", type=int, default=5)
    ap.add_argument("--runs", type=int, default=30, help="warm requests per figure")
    ap.add_argument("--browser-runs", type=int, default=5)
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
        print(f"c3async Hub benchmark ({os.cpu_count()} cores): {corpus.files} transcripts in "
              f"{len(corpus.project_dirs)} projects, {corpus.total_bytes / 2**20:.0f} MiB, generated in {gen_s:.1f} s")
        register = []
        for p in corpus.project_dirs:
            t = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "c3async", "sessions", "--project", p, "--json"],
                                  env=env, cwd=str(root), capture_output=True, text=True)
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
            bench_api(hub, corpus.project_dirs, corpus.files, args.runs, table)
            bench_browser(hub, corpus.files, args.browser_runs, table)
        except (BenchError, httpx.HTTPError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        except Exception as exc:  # a browser failure is an error too, said plainly
            print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
        finally:
            hub.stop()
    width = max(len(label) for label, _ in table)
    for label, value in table:
        print(f"{label:<{width}}   {value}")
    print(f"(budget: /api/sessions with {corpus.files} rows warm under {BUDGET_MS:.0f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
