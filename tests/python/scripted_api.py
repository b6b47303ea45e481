"""A scripted Messages API on loopback: it plays a model's turns from a list
and checks every `tool_result` the client sends back against the one the
script expects, exactly (content and is_error). Real clients run against
it: the SDKs' tool runners, Claude Code (`ANTHROPIC_BASE_URL`).

A script is a list of turns; a turn is the assistant's content blocks. A
`tool_use` block may carry `"expect": {"content": ..., "is_error": ...}`
(stripped before it is sent): the result the client must send for it.

Turns are chosen by the results seen, not by counting messages: the Python
SDK's tool runner sends only the new `tool_result` blocks after the first
turn, Claude Code resends the whole conversation. Turn k is played once
every tool call of the turns before it has its result; a request that
brings nothing new after the last turn gets a short text answer. With
`main_tool`, only a request whose `tools` names that tool is the model's
main loop; any other (a client's side request: Claude Code's permission
classifier in its auto mode, say) gets a short text answer and never takes a
turn. Answers are JSON, or SSE events when `stream` is true; a HEAD (Claude
Code's connectivity check) gets 200.
"""
from __future__ import annotations

import copy
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ScriptedApi(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, script, main_tool=None):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.main_tool = main_tool
        self.script = [[dict(b) for b in turn] for turn in script]
        self.expected = {}
        for turn in self.script:
            for block in turn:
                if block.get("type") == "tool_use" and "expect" in block:
                    self.expected[block["id"]] = block.pop("expect")
        self.played = 0
        self.results = {}  # tool_use_id -> (content, is_error) as received
        self.mismatches = []
        self.requests = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()

    # -- what the test asks at the end ------------------------------------
    def check(self) -> None:
        """Fails unless every turn was played and every expected result came
        back exactly."""
        problems = list(self.mismatches)
        if self.played < len(self.script):
            problems.append(f"only {self.played} of {len(self.script)} turns were played")
        missing = [i for i in self.expected if i not in self.results]
        if missing:
            problems.append(f"no result came back for {missing}")
        assert not problems, "\n".join(problems)

    # -- one request -------------------------------------------------------
    def is_main(self, body: dict) -> bool:
        if self.main_tool is None:
            return True
        return any(t.get("name") == self.main_tool for t in body.get("tools") or [])

    def answer(self, body: dict) -> dict:
        with self.lock:
            self.requests.append(body)
            if not self.is_main(body):
                return _message(f"msg_side_{len(self.requests)}", [{"type": "text", "text": "<block>no</block>"}])
            for message in body.get("messages", []):
                if message.get("role") != "user" or not isinstance(message.get("content"), list):
                    continue
                for block in message["content"]:
                    if block.get("type") == "tool_result" and block["tool_use_id"] not in self.results:
                        self._take(block)
            turn = self._next_turn()
            if turn is None:
                return _message(f"msg_side_{len(self.requests)}", [{"type": "text", "text": "Done."}])
            self.played += 1
            return _message(f"msg_{self.played}", copy.deepcopy(turn))

    def _take(self, block: dict) -> None:
        use_id = block["tool_use_id"]
        content = block.get("content")
        if isinstance(content, list):
            texts = [c.get("text", "") for c in content if c.get("type") == "text"]
            images = [c for c in content if c.get("type") == "image"]
            content = "".join(texts) if not images else {"images": len(images), "text": "".join(texts)}
        got = {"content": content, "is_error": bool(block.get("is_error", False))}
        self.results[use_id] = got
        want = self.expected.get(use_id)
        if want is not None and got != want:
            self.mismatches.append(f"{use_id}: expected {want!r}, got {got!r}")

    def _next_turn(self):
        if self.played >= len(self.script):
            return None
        for turn in self.script[: self.played]:
            for block in turn:
                if block.get("type") == "tool_use" and block["id"] not in self.results:
                    return None
        return self.script[self.played]


def _message(msg_id: str, content: list) -> dict:
    stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
    return {
        "id": msg_id, "type": "message", "role": "assistant", "model": "claude-scripted",
        "content": content, "stop_reason": stop, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }


def _sse(message: dict) -> bytes:
    events = []

    def send(kind, data):
        events.append(f"event: {kind}\ndata: {json.dumps(data)}\n\n")

    start = dict(message, content=[], stop_reason=None)
    send("message_start", {"type": "message_start", "message": start})
    for i, block in enumerate(message["content"]):
        if block["type"] == "text":
            send("content_block_start", {"type": "content_block_start", "index": i,
                                         "content_block": {"type": "text", "text": ""}})
            send("content_block_delta", {"type": "content_block_delta", "index": i,
                                         "delta": {"type": "text_delta", "text": block["text"]}})
        else:
            send("content_block_start", {"type": "content_block_start", "index": i,
                                         "content_block": dict(block, input={})})
            send("content_block_delta", {"type": "content_block_delta", "index": i,
                                         "delta": {"type": "input_json_delta",
                                                   "partial_json": json.dumps(block["input"])}})
        send("content_block_stop", {"type": "content_block_stop", "index": i})
    send("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                           "usage": {"output_tokens": 10}})
    send("message_stop", {"type": "message_stop"})
    return "".join(events).encode()


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("content-length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            body = {}
        if not self.path.startswith("/v1/messages") or self.path.startswith("/v1/messages/count_tokens"):
            return self._send(200, "application/json", json.dumps({"input_tokens": 10}).encode())
        message = self.server.answer(body)
        if body.get("stream"):
            return self._send(200, "text/event-stream", _sse(message))
        self._send(200, "application/json", json.dumps(message).encode())

    def do_HEAD(self):  # noqa: N802
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_GET(self):  # noqa: N802
        self._send(404, "application/json", b'{"type":"error","error":{"type":"not_found_error","message":"no"}}')

    def _send(self, status, kind, data):
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
