"""The made-up week of sessions the README's samples and its picture of the Hub come from: three
projects of a sandbox (billing-api, web-app, deploy), one session waiting for the user, one busy,
one marked stale with its successor, one with a note, idle and short ones, a ``/clear`` pair.

The sessions' ids are fixed, so the README's samples name the same sessions every time they are
made (``tests/test_readme.py``); their times are set back from now.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from test_live_registry import registry_file

from stress.transcripts import Conversation, write_session

IDS = {
    "waiting": "a7b4dc84-8b39-47fc-be17-5cb7e5e72d40",
    "busy": "530dbdc5-297a-44e7-b3b7-e9d7aabb96eb",
    "noted": "4d2ae9ae-4a4c-4da7-baa9-fab56e154d7d",
    "successor": "d54902fb-f6eb-4203-93ee-dfd03d1ac1f7",
    "stale": "0f10f80f-1099-4cd2-83c1-c7ff87a71a98",
    "short": "52c61ca4-c975-4a1f-b861-36db43eba25f",
    "react": "cb422563-f443-47a5-b71f-e77fda79ca11",
    "flaky": "9342eb7b-5cbd-4d35-83d3-4a3c55e53e04",
    "after_clear": "bfda01a6-c8c7-4df2-ba8e-0a569a3f3148",
    "idle": "b1e79746-8135-467a-af58-272f2e246d50",
    "subnet": "2929889f-ca3f-4311-8b9e-0584a315fef3",
    "deploy_key": "428ed367-de0e-440f-b6e6-2876d955b90d",
}


def _session(
    sid: str,
    folder: Path,
    cwd: str,
    exchanges: list[tuple[str, str]],
    *,
    ago: timedelta,
    title: str | None = None,
    branch: str = "main",
    first_clear: bool = False,
    tokens: float = 1.0,
) -> str:
    """A session whose last line was written ``ago``; each exchange a prompt and its answer, each
    reply's usage ``tokens`` times the helpers' (so the rows' totals differ)."""
    start = datetime.now(UTC) - ago - len(exchanges) * timedelta(seconds=55)
    conv = Conversation(cwd, sid, branch=branch, start=start)
    lines = [conv.permission_mode()]
    if first_clear:
        lines += [conv.caveat(), conv.clear(), conv.local_stdout()]
    for prompt, answer in exchanges:
        conv.tick(50)
        lines += conv.exchange(prompt, answer)
    if title is not None:
        lines.append(conv.custom_title(title))
    for line in lines:
        usage = line.get("message", {}).get("usage")
        if usage is not None:
            line["message"]["usage"] = _scaled(usage, tokens)
    write_session(folder, conv.id, lines, mtime=min(conv.clock.timestamp(), time.time()))
    return conv.id


def _scaled(usage: dict, factor: float) -> dict:
    return {
        k: _scaled(v, factor) if isinstance(v, dict) else round(v * factor) if isinstance(v, int) else v
        for k, v in usage.items()
    }


class DemoWorld:
    """Three projects of a sandbox; ``pids`` are running processes that stand for the claudes of
    the waiting, busy and idle sessions (Claude Code's registry files name them)."""

    def __init__(self, claude, pids: list[int]) -> None:
        self.claude = claude
        api, web, ops = claude.project("billing-api"), claude.project("web-app"), claude.project("deploy")
        fa, fw, fo = claude.folder(api), claude.folder(web), claude.folder(ops)
        day, hour, minute = timedelta(days=1), timedelta(hours=1), timedelta(minutes=1)
        self.waiting = _session(
            IDS["waiting"],
            fa,
            api,
            [
                (
                    "Webhook deliveries that fail are dropped. Retry them with exponential backoff.",
                    "The dispatcher catches the error and logs it. I will add a retry queue with backoff.",
                ),
                (
                    "Cap it at 8 attempts and keep the last error on the delivery row.",
                    "Done: `max_attempts=8`, and `last_error` is stored on each attempt.",
                ),
                (
                    "Now run the integration tests against the local stack.",
                    "I need to run `docker compose up -d` first. May I?",
                ),
            ],
            ago=4 * minute,
            title="Retry failed webhook deliveries with backoff",
            branch="fix/webhook-retries",
            tokens=3.1,
        )
        self.busy = _session(
            IDS["busy"],
            fa,
            api,
            [
                ("Add idempotency keys to POST /charges.", "I will store the key with the response for 24 h."),
                ("Return the stored response on a repeated key.", "Done, with a test for the replay."),
                (
                    "What happens when two requests with one key arrive at once?",
                    "The second waits on the row lock and then gets the first one's response.",
                ),
            ],
            ago=minute / 3,
            title="Idempotency keys for POST /charges",
            branch="feat/idempotency",
            tokens=1.7,
        )
        self.noted = _session(
            IDS["noted"],
            fa,
            api,
            [
                ("Plan the migration of invoices.id to bigint.", "Add a new column, backfill, then swap."),
                ("Write the backfill in batches of 10,000.", "Written; it resumes from the last id done."),
                ("Test it on the anonymised copy of production.", "It took 41 minutes and locked nothing."),
            ],
            ago=2 * day + 3 * hour,
            title="Migrate invoices.id to bigint",
            branch="chore/bigint-invoices",
            tokens=4.6,
        )
        self.successor = _session(
            IDS["successor"],
            fa,
            api,
            [
                ("Add a composite index on reports(account_id, created_at).", "Added, created concurrently."),
                ("Check the plan of the monthly report query.", "It uses the new index: 3.2 s down to 40 ms."),
                ("Write the migration and its down step.", "Both written and tested."),
            ],
            ago=3 * day,
            title="Composite index for the reports query",
            branch="perf/reports-index",
            tokens=1.2,
        )
        self.stale = _session(
            IDS["stale"],
            fa,
            api,
            [
                (
                    "The /reports endpoint is slow for big accounts. Find out why.",
                    "The monthly query scans every report of the account.",
                ),
                ("Could we cache the result?", "We could, but an index fixes the cause."),
                ("Let's try the cache anyway.", "A first version is in reports/cache.py."),
            ],
            ago=6 * day,
            title="Investigate the slow /reports endpoint",
            branch="perf/reports-cache",
            tokens=2.3,
        )
        self.short = _session(
            IDS["short"],
            fa,
            api,
            [
                ("Bump the Stripe SDK to the latest minor version.", "Bumped; the tests pass."),
            ],
            ago=day + 5 * hour,
            title="Bump the Stripe SDK",
            tokens=0.3,
        )
        self.react = _session(
            IDS["react"],
            fw,
            web,
            [
                ("Upgrade the app to React 19.", "Three libraries need newer versions first."),
                ("Upgrade them one at a time and run the tests after each.", "All three done; the tests pass."),
                ("Now React itself.", "Upgraded. Two components used removed APIs; both fixed."),
            ],
            ago=5 * hour,
            title="Upgrade to React 19",
            branch="chore/react-19",
            tokens=5.2,
        )
        cleared_at = 26 * hour
        self.flaky = _session(
            IDS["flaky"],
            fw,
            web,
            [
                (
                    "The login e2e test fails one run in ten. Find out why.",
                    "It clicks before the session cookie is set.",
                ),
                ("Wait for the cookie instead of a fixed delay.", "Changed to wait for the cookie."),
                ("Run it 20 times here.", "20 of 20 passed."),
            ],
            ago=cleared_at,
            title="Flaky login e2e test",
            branch="fix/flaky-login",
            tokens=0.6,
        )
        self.after_clear = _session(
            IDS["after_clear"],
            fw,
            web,
            [
                ("Run the login test 200 times in CI.", "200 of 200 passed."),
                ("Add the same wait to the signup test.", "Added."),
                ("Open the pull request.", "Opened."),
            ],
            ago=cleared_at - 3 * timedelta(seconds=55),
            first_clear=True,
            branch="fix/flaky-login",
            tokens=0.4,
        )
        self.idle = _session(
            IDS["idle"],
            fw,
            web,
            [
                ("Add a dark mode to the settings page.", "The colours are now CSS variables."),
                ("Follow the system setting by default.", "It reads prefers-color-scheme."),
                ("Add a toggle that overrides it.", "Added, stored in local storage."),
            ],
            ago=12 * day,
            title="Dark mode for the settings page",
            branch="feat/dark-mode",
            tokens=1.9,
        )
        self.subnet = _session(
            IDS["subnet"],
            fo,
            ops,
            [
                ("Move the staging database to a private subnet.", "I will add the subnet and a NAT gateway."),
                ("Plan it with terraform.", "The plan replaces nothing; it adds 6 resources."),
                ("Apply it to staging.", "Applied. The app reaches the database through the new route."),
            ],
            ago=4 * day,
            title="Staging database in a private subnet",
            branch="infra/private-subnet",
            tokens=2.6,
        )
        self.deploy_key = _session(
            IDS["deploy_key"],
            fo,
            ops,
            [
                ("Rotate the CI deploy key.", "The new key is in the secret store."),
                ("Remove the old one from the servers.", "Removed from all 4 hosts."),
                ("Check that a deploy still works.", "Deployed main to staging with the new key."),
            ],
            ago=40 * minute,
            title="Rotate the CI deploy key",
            tokens=0.8,
        )
        self.projects = {"billing-api": api, "web-app": web, "deploy": ops}
        for project in (api, web):  # a person listing a project registers it; deploy is only found
            assert claude.run("sessions", "--project", project).returncode == 0
        self._mark(
            api,
            "stale",
            self.stale,
            "--reason",
            "an index fixes the cause; the cache is not needed",
            "--successor",
            self.successor,
        )
        self._mark(
            api,
            "note",
            self.noted,
            "--summary",
            "Backfill tested on the copy of production: 41 min, no locks",
            "--next",
            "Run it in Thursday's maintenance window, then swap the columns",
        )
        for project in self.projects.values():  # tokens and cost on the rows
            assert claude.run("stats", "--project", project).returncode == 0
        now = time.time()
        registry_file(
            claude.config,
            pids[0],
            self.waiting,
            api,
            status="waiting",
            since_ms=(now - 240) * 1000,
            waitingFor="permission",
        )
        registry_file(claude.config, pids[1], self.busy, api, status="busy")
        registry_file(claude.config, pids[2], self.deploy_key, ops, status="idle")
        self.ids = {
            self.waiting,
            self.busy,
            self.noted,
            self.successor,
            self.stale,
            self.short,
            self.react,
            self.flaky,
            self.after_clear,
            self.idle,
            self.subnet,
            self.deploy_key,
        }

    def _mark(self, project: str, *args: str) -> None:
        proc = self.claude.run("mark", args[0], "--project", project, *args[1:])
        assert proc.returncode == 0, proc.stderr
