"""A stand-in for the Anthropic Messages API, so the real Claude Code CLI can run offline.

Run as ``python fake_anthropic.py PORT SCRIPT LOG``. SCRIPT is a JSON list of replies, used in
order, one per request: ``{"text": "..."}`` or ``{"tool_use": {"name": ..., "input": {...}}}``;
when it runs out, every reply is a short text. Every request body is appended to LOG (JSONL).
Replies stream as the API streams them (message_start ... message_stop) or come whole when the
request does not ask to stream.
"""

from __future__ import annotations

import json
import sys
import threading

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

PORT, SCRIPT, LOG = int(sys.argv[1]), sys.argv[2], sys.argv[3]
_lock = threading.Lock()
_count = 0
_used = 0  # script replies given so far (the script is re-read, so a test may write it late)


def _next(body: dict) -> dict:
    global _count, _used
    with _lock:
        _count += 1
        with open(LOG, "a") as f:
            f.write(json.dumps(body) + "\n")
        tools = {t.get("name") for t in body.get("tools") or []}
        with open(SCRIPT) as f:
            replies = json.load(f)
        # Side requests (titles, summaries) send no tools: answer them with text, keep the script.
        if not tools or _used >= len(replies):
            return {"text": "Done."}
        _used += 1
        return replies[_used - 1]


def _blocks(reply: dict, n: int) -> list[dict]:
    if "tool_use" in reply:
        return [{"type": "tool_use", "id": f"toolu_fake{n}", "name": reply["tool_use"]["name"],
                 "input": reply["tool_use"].get("input", {})}]
    return [{"type": "text", "text": reply.get("text", "Done.")}]


async def messages(request: Request):
    body = await request.json()
    reply = _next(body)
    n = _count
    blocks = _blocks(reply, n)
    stop = "tool_use" if "tool_use" in reply else "end_turn"
    usage = {"input_tokens": 12, "output_tokens": 8, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    message = {"id": f"msg_fake{n}", "type": "message", "role": "assistant", "model": body.get("model"),
               "content": blocks, "stop_reason": stop, "stop_sequence": None, "usage": usage}
    if not body.get("stream"):
        return JSONResponse(message)

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
                yield ev("content_block_delta", {"index": i, "delta": {"type": "input_json_delta",
                                                                      "partial_json": json.dumps(block["input"])}})
            yield ev("content_block_stop", {"index": i})
        yield ev("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 8}})
        yield ev("message_stop", {})

    return StreamingResponse(stream(), media_type="text/event-stream")


async def anything(request: Request):
    return JSONResponse({})


app = Starlette(routes=[Route("/v1/messages", messages, methods=["POST"]),
                        Route("/{rest:path}", anything, methods=["GET", "POST", "PUT"])])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
