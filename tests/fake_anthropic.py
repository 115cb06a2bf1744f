"""A stand-in for the Anthropic Messages API, so the real Claude Code CLI can run offline.

Run as ``python fake_anthropic.py PORT SCRIPT LOG``. Where ``SCRIPT.headers`` exists (a JSON
object, re-read on every request), its entries are sent as response headers of every reply (the
unified rate-limit headers a subscriber's responses carry; a test rewrites it between prompts). SCRIPT is a JSON list of replies, used in
order, one per request: ``{"text": "..."}`` or ``{"tool_use": {"name": ..., "input": {...}}}``;
when it runs out, every reply is a short text. Every request body is appended to LOG (JSONL).
Replies stream as the API streams them (message_start ... message_stop) or come whole when the
request does not ask to stream.

SCRIPT may instead be an object, for several conversations at once (parallel sessions):
``{"conversations": {MARKER: [reply, ...], ...}}``. A request whose FIRST user message holds
MARKER gets the reply numbered by how many assistant turns the request already carries (0 for
a session's first turn, 1 after its first tool call...), so replies do not depend on how the
sessions' requests interleave; past the end, and for requests that match no marker, a short
text. Two more reply forms, in either kind of script:

- ``{"tool_use": {...}, "fill": {INPUT_KEY: RESULT_KEY}}``: before replying, each INPUT_KEY of
  the tool input is set to RESULT_KEY of the JSON in the last tool_result of the request (a
  model reading the id a tool just returned); if that result is an error or no such JSON, the
  reply is a text saying so instead.
- ``{"hold": PATH, "then": reply}``: write ``PATH.held`` (the session is now mid-turn), wait
  until PATH exists (at most ``hold_s``, default 300 s), then answer with ``then`` (default a
  short text). Keeps a real session running, and so live, for as long as a test needs.
- ``{"status": 429, "headers": {...}}``: an error answer with that status (the API's error body,
  ``rate_limit_error`` for a 429) whose headers are the ``SCRIPT.headers`` ones updated with the
  reply's own: a usage-limit refusal, when they say ``rejected`` for a subscriber.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

PORT, SCRIPT, LOG = int(sys.argv[1]), sys.argv[2], sys.argv[3]
_lock = threading.Lock()
_count = 0
_used = 0  # script replies given so far (the script is re-read, so a test may write it late)


def _text_of(content) -> str:
    """The text of a message's content (a string, or text blocks; tool results excluded)."""
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")


def _conversation(body: dict, conversations: dict) -> dict:
    """The reply of the conversation whose marker is in the request's first user message."""
    messages = body.get("messages") or []
    first = next((m for m in messages if m.get("role") == "user"), None)
    text = _text_of(first.get("content")) if first else ""
    for marker, replies in conversations.items():
        if marker in text:
            turn = sum(1 for m in messages if m.get("role") == "assistant")
            return replies[turn] if turn < len(replies) else {"text": "Done."}
    return {"text": "Done."}


def _last_result(body: dict) -> tuple[str, bool]:
    """(text, is_error) of the last tool_result block in the request."""
    for m in reversed(body.get("messages") or []):
        content = m.get("content")
        if m.get("role") != "user" or not isinstance(content, list):
            continue
        for block in reversed(content):
            if isinstance(block, dict) and block.get("type") == "tool_result":
                inner = block.get("content")
                return (inner if isinstance(inner, str) else _text_of(inner)), bool(block.get("is_error"))
    return "", True


def _filled(reply: dict, body: dict) -> dict:
    fill = reply.get("fill")
    if not fill or "tool_use" not in reply:
        return reply
    text, error = _last_result(body)
    try:
        data = json.loads(text) if not error else None
        values = {key: data[source] for key, source in fill.items()}
    except (ValueError, TypeError, KeyError):
        return {"text": f"Could not read {sorted(fill.values())} from the last tool result: {text[:300]}"}
    tool = dict(reply["tool_use"])
    tool["input"] = {**tool.get("input", {}), **values}
    return {"tool_use": tool}


def _next(body: dict) -> dict:
    global _count, _used
    with _lock:
        _count += 1
        with open(LOG, "a") as f:
            f.write(json.dumps(body) + "\n")
        tools = {t.get("name") for t in body.get("tools") or []}
        with open(SCRIPT) as f:
            script = json.load(f)
        # Side requests (titles, summaries) send no tools: answer them with text, keep the script.
        if not tools:
            return {"text": "Done."}
        if isinstance(script, dict):
            return _filled(_conversation(body, script.get("conversations") or {}), body)
        if _used >= len(script):
            return {"text": "Done."}
        _used += 1
        return _filled(script[_used - 1], body)


def _touch(path: str) -> None:
    with open(path, "w") as f:
        f.write(str(os.getpid()))


async def _hold(reply: dict) -> dict:
    path = reply["hold"]
    await asyncio.to_thread(_touch, path + ".held")
    deadline = time.monotonic() + float(reply.get("hold_s", 300))
    while not os.path.exists(path) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return reply.get("then") or {"text": "Done."}


def _blocks(reply: dict, n: int) -> list[dict]:
    if "tool_use" in reply:
        return [
            {
                "type": "tool_use",
                "id": f"toolu_fake{n}",
                "name": reply["tool_use"]["name"],
                "input": reply["tool_use"].get("input", {}),
            }
        ]
    return [{"type": "text", "text": reply.get("text", "Done.")}]


async def messages(request: Request):
    body = await request.json()
    reply = _next(body)
    n = _count
    if "hold" in reply:
        reply = await _hold(reply)
    blocks = _blocks(reply, n)
    stop = "tool_use" if "tool_use" in reply else "end_turn"
    usage = {"input_tokens": 12, "output_tokens": 8, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    message = {
        "id": f"msg_fake{n}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }
    headers = {"request-id": f"req_fake{n}"}  # as the API sends it: Claude Code writes it as requestId
    try:
        with open(SCRIPT + ".headers") as f:
            headers.update({str(k): str(v) for k, v in json.load(f).items()})
    except FileNotFoundError:
        pass
    if "status" in reply:
        headers.update({str(k): str(v) for k, v in (reply.get("headers") or {}).items()})
        status = int(reply["status"])
        kind = "rate_limit_error" if status == 429 else "api_error"
        error = {"type": "error", "error": {"type": kind, "message": reply.get("text", "Rejected.")}}
        return JSONResponse(error, status_code=status, headers=headers)
    if not body.get("stream"):
        return JSONResponse(message, headers=headers)

    def ev(kind: str, data: dict) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

    def stream():
        yield ev("message_start", {"message": {**message, "content": [], "stop_reason": None}})
        for i, block in enumerate(blocks):
            if block["type"] == "text":
                yield ev("content_block_start", {"index": i, "content_block": {"type": "text", "text": ""}})
                yield ev("content_block_delta", {"index": i, "delta": {"type": "text_delta", "text": block["text"]}})
            else:
                yield ev("content_block_start", {"index": i, "content_block": {**block, "input": {}}})
                yield ev(
                    "content_block_delta",
                    {"index": i, "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}},
                )
            yield ev("content_block_stop", {"index": i})
        yield ev(
            "message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 8}}
        )
        yield ev("message_stop", {})

    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)


async def anything(request: Request):
    return JSONResponse({})


app = Starlette(
    routes=[
        Route("/v1/messages", messages, methods=["POST"]),
        Route("/{rest:path}", anything, methods=["GET", "POST", "PUT"]),
    ]
)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
