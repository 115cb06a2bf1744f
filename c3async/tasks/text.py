"""What a task action returned, as lines for a person: one line saying what a change did, tables
and lines for the reads. Every piece of stored text goes through ``inert_line`` (a title or a note
from a cloned repository's pm.json may hold anything); a description through ``inert``.

``said(action, result, given)`` is the line for a change (``given``: the arguments the caller
gave, by their c3_task names); ``shown(action, result, given)`` the lines for a read and, when
there is nothing to show, what to say instead (the CLI prints that on stderr).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..ground.term import inert, inert_line
from .schema import STATUSES, UPDATABLE

__all__ = ("said", "shown")

TITLE_WIDTH = 80  # a title in a one-line message; tables show it whole


def _id(value: str | None) -> str:
    return inert_line((value or "")[:8])


def _quoted(text: str, width: int = TITLE_WIDTH) -> str:
    text = inert_line(text)
    return f'"{text if len(text) <= width else text[: width - 1] + "…"}"'


def _task(r: dict) -> str:
    return f"task {_id(r['id'])} {_quoted(r['title'])}"


def _milestone(r: dict) -> str:
    return f"milestone {_id(r['id'])} {_quoted(r['name'])}"


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def duration(seconds: float) -> str:
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "-"


def _ids(values: list[str]) -> str:
    return ", ".join(_id(v) for v in values)


# ------------------------------------------------------------------ changes

_STATUS_WORDS = dict(zip(STATUSES, ("in the backlog", "in progress", "blocked", "done"), strict=True))


def _updated(r: dict, given: dict[str, str]) -> str:
    asked = [k for k in UPDATABLE if given.get(k, "").strip()]
    if asked == ["status"]:
        return f"{_task(r)} is {_STATUS_WORDS.get(r['status'], inert_line(r['status']))}"
    words = []
    for k in asked:
        if k in ("title", "description"):
            words.append(k)
        elif k == "tags":
            words.append(f"tags {', '.join(inert_line(t) for t in r['tags'])}" if r["tags"] else "no tags")
        elif k == "milestone":
            words.append(f"milestone {_id(r['milestone'])}" if r["milestone"] else "no milestone")
        elif k == "blocked_by":
            words.append(f"blocked by {_ids(r['blocked_by'])}" if r["blocked_by"] else "no blockers")
        else:
            words.append(f"{k} {inert_line(str(r[k]) if r[k] else 'none')}")
    return f"updated {_task(r)}: {'; '.join(words)}"


def _deleted(r: dict) -> str:
    unlinked = r.get("unlinked", {})
    also = []
    if unlinked.get("blocked_by"):
        also.append(f"it no longer blocks {_count(len(unlinked['blocked_by']), 'task')}")
    if unlinked.get("decisions"):
        also.append(f"unlinked from {_count(len(unlinked['decisions']), 'decision')}")
    return f"deleted {_task(r)}" + (f" ({'; '.join(also)})" if also else "")


def _linked(r: dict) -> str:
    where = f" (of {inert_line(r['session_project'])})" if r.get("session_project") else ""
    return f"linked {_task(r)} to session {_id(r.get('session'))}{where}"


def _decided(r: dict) -> str:
    on = f" on task {_id(r['task'])}" if r.get("task") else ""
    return f"recorded decision {_id(r['id'])} {_quoted(r['text'])}{on}"


def _detached(r: dict) -> str:
    n = len(r.get("detached", []))
    return f" ({_count(n, 'task')} detached)" if n else ""


_SAID: dict[str, Callable[[dict, dict[str, str]], str]] = {
    "add": lambda r, g: f"added {_task(r)}",
    "update": _updated,
    "delete": lambda r, g: _deleted(r),
    "link": lambda r, g: _linked(r),
    "decide": lambda r, g: _decided(r),
    "decision_delete": lambda r, g: f"deleted decision {_id(r['id'])} {_quoted(r['text'])}",
    "milestone_add": lambda r, g: f"added {_milestone(r)}" + (f" due {inert_line(r['due'])}" if r.get("due") else ""),
    "milestone_complete": lambda r, g: f"{_milestone(r)} is completed",
    "milestone_reopen": lambda r, g: f"{_milestone(r)} is open again",
    "milestone_archive": lambda r, g: f"archived {_milestone(r)}{_detached(r)}",
    "milestone_delete": lambda r, g: f"deleted {_milestone(r)}{_detached(r)}",
    "time_start": lambda r, g: f"started the timer of {_task(r)}",
    "time_stop": lambda r, g: f"stopped the timer of {_task(r)} ({duration(r['tracked_s'])} tracked in all)",
}


def said(action: str, result: dict, given: dict[str, str]) -> str:
    """One line: what the change ``action`` did, naming the item by short id and title."""
    return _SAID[action](result, given)


# ------------------------------------------------------------------ reads


def _task_line(t: dict) -> str:
    due = f" due {inert_line(t['due'])}" if t.get("due") else ""
    tags = f" #{' #'.join(inert_line(tag) for tag in t['tags'])}" if t.get("tags") else ""
    return (
        f"{_id(t['id'])}  {inert_line(t['priority'])}  {inert_line(t['status']):<11}  "
        f"{inert_line(t['title'])}{due}{tags}"
    )


def _list(r: dict) -> tuple[list[str], str | None]:
    return [_task_line(t) for t in r["tasks"]], None if r["tasks"] else "no tasks"


def _board(r: dict) -> tuple[list[str], str | None]:
    if not any(r["columns"].values()):
        return [], "no tasks"
    out = []
    for column, tasks in r["columns"].items():
        out.append(f"{inert_line(column)} ({len(tasks)})")
        out += [f"  {_id(t['id'])}  {inert_line(t['priority'])}  {inert_line(t['title'])}" for t in tasks]
    for ms in r.get("milestones", []):
        due = f" due {inert_line(ms['due'])}" if ms.get("due") else ""
        out.append(f"\nmilestone {inert_line(ms['name'])}{due}")
        for column, tasks in ms["columns"].items():
            if tasks:
                names = ", ".join(inert_line(t["title"]) for t in tasks)
                out.append(f"  {inert_line(column)} ({len(tasks)}): {names}")
    return out, None


def _get(r: dict) -> tuple[list[str], str | None]:
    facts = [
        ("status", inert_line(r["status"])),
        ("priority", inert_line(r["priority"])),
        ("due", inert_line(r["due"] or "-")),
        ("tags", ", ".join(inert_line(t) for t in r["tags"]) or "-"),
        ("milestone", _id(r["milestone"]) or "-"),
        ("blocked by", _ids(r["blocked_by"]) or "-"),
        ("sessions", _ids(r["sessions"]) or "-"),
        ("tracked", duration(r["tracked_s"]) + (" (timer running)" if r["timer_running"] else "")),
        ("created", _when(r["created"])),
        ("updated", _when(r["updated"])),
    ]
    out = [f"{inert_line(r['id'])}  {inert_line(r['title'])}"]
    out += [f"  {name:<10} {value}" for name, value in facts]
    if r["description"]:
        out += ["", *("  " + line for line in inert(r["description"]).splitlines())]
    if r.get("decisions"):
        out += ["", "decisions:", *("  " + _decision_line(d) for d in r["decisions"])]
    return out, None


def _report(r: dict) -> tuple[list[str], str | None]:
    sections = (
        ("blocking", r["blocking"], lambda t: f"({inert_line(t['status'])}) blocks {_ids(t['blocks'])}"),
        ("ready to unblock", r["ready_to_unblock"], lambda t: "its blockers are done"),
        ("still blocked", r["still_blocked"], lambda t: f"waits on {_ids(t['waiting_on'])}"),
        ("overdue", r["overdue"], lambda t: f"due {inert_line(t['due'])}"),
    )
    out: list[str] = []
    for name, rows, tail in sections:
        if rows:
            out += [f"{name}:", *(f"  {_id(t['id'])}  {inert_line(t['title'])}  {tail(t)}" for t in rows)]
    return out, None if out else "nothing is blocking, blocked or overdue"


_FREE_TEXT = ("title", "name", "text", "description")  # quoted in a history line; the rest are tokens


def _change_words(changes: dict[str, Any]) -> str:
    words = []
    for key, value in changes.items():
        if isinstance(value, dict):
            continue  # a whole deleted item or the links a delete removed: `--json` shows them
        if isinstance(value, list):
            shown = ", ".join(inert_line(str(v)) for v in value) or "none"
        elif key in _FREE_TEXT:
            shown = _quoted(str(value), 40)
        else:
            shown = inert_line(str(value))
        words.append(f"{inert_line(key)} {shown}")
    return "; ".join(words)


def _history(r: dict) -> tuple[list[str], str | None]:
    out = []
    for e in r["events"]:
        who = f"by {inert_line(e['by'])}" + (f" in {_id(e['session'])}" if e.get("session") else "")
        changes = _change_words(e.get("changes", {}))
        out.append(
            f"{_when(e['ts'])}  {inert_line(e['action']):<18}  {_id(e.get('target')) or '-':8}  {who}"
            + (f"  {changes}" if changes else "")
        )
    return out, None if out else "no history"


def _decision_line(d: dict) -> str:
    why = f" (why: {inert_line(d['reasoning'])})" if d.get("reasoning") else ""
    on = f"  [task {_id(d['task'])}]" if d.get("task") else ""
    return f"{_id(d['id'])}  {_when(d['ts'])}  {inert_line(d['text'])}{why}{on}"


def _decisions(r: dict) -> tuple[list[str], str | None]:
    return [_decision_line(d) for d in r["decisions"]], None if r["decisions"] else "no decisions"


def _time_report(r: dict) -> tuple[list[str], str | None]:
    if not r["tasks"]:
        return [], "no time tracked"
    out = [
        f"{_id(t['id'])}  {duration(t['tracked_s']):>7}  {inert_line(t['title'])}"
        + (" [running]" if t["running"] else "")
        for t in r["tasks"]
    ]
    return [*out, f"{'total':8}  {duration(r['total_s']):>7}"], None


def _milestones(r: dict, given: dict[str, str]) -> tuple[list[str], str | None]:
    out = []
    for m in r["milestones"]:
        due = f"  due {inert_line(m['due'])}" if m.get("due") else ""
        counts = m["tasks"]
        out.append(
            f"{_id(m['id'])}  {inert_line(m['status']):<9}  {inert_line(m['name'])}{due}  "
            f"{counts['done']}/{counts['total']} done"
        )
        out += [
            f"  {_id(t['id'])}  {inert_line(t['priority'])}  {inert_line(t['status']):<11}  {inert_line(t['title'])}"
            for t in m["open_tasks"]
        ]
    return out, None if out else ("no milestones" if given.get("status", "").strip() else "no open milestones")


_SHOWN: dict[str, Callable[[dict], tuple[list[str], str | None]]] = {
    "list": _list,
    "board": _board,
    "get": _get,
    "report": _report,
    "history": _history,
    "decisions": _decisions,
    "time_report": _time_report,
}


def shown(action: str, result: dict, given: dict[str, str]) -> tuple[list[str], str | None]:
    """The lines of the read ``action``; with none, what to say instead (else None)."""
    if action == "milestones":
        return _milestones(result, given)
    return _SHOWN[action](result)
