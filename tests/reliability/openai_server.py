"""A real OpenAI-compatible HTTP server on loopback that misbehaves on demand.

It speaks just enough of ``POST /v1/chat/completions`` for the builtin agent,
and lists its one model on ``GET /v1/models``.
``behave(n, body)`` picks the answer to the ``n``-th request (from 1):

- ``"ok"``: the next step of a good episode (a ``bash`` call, then ``submit``);
- ``"sleep"``: a ``bash`` call running ``sleep 60`` (to hold a sandbox busy);
- ``"nap"``: a ``bash`` call running ``sleep 1`` (a task that takes a while);
- ``"big"``: a ``bash`` call running ``big_command`` (a large output);
- ``"500"``, ``"502"``: that HTTP status with an error body;
- ``"garbage"``: status 200 with bytes that are not JSON;
- ``"wrong-shape"``: status 200, JSON, but no ``choices``;
- ``"prose"``: a well-formed completion with text and no tool call;
- ``"drop"``: the connection is closed without an answer;
- ``"hang"``: no answer until the server stops.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Behave = Callable[[int, dict[str, Any]], str]


def _completion(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "flaky",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }


def _tool(name: str, args: dict[str, Any]) -> dict[str, Any]:
    call = {"id": f"call_{name}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}  # fmt: skip
    return _completion({"role": "assistant", "content": "", "tool_calls": [call]})


def step_of(body: dict[str, Any]) -> int:
    """How many answers the conversation already holds."""
    return sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")


def good_step(body: dict[str, Any]) -> dict[str, Any]:
    """A two-step episode: look around, then submit."""
    return _tool("bash", {"command": "echo hello"}) if step_of(body) == 0 else _tool("submit", {})


class FlakyOpenAI:
    def __init__(self, behave: Behave, big_command: str = "") -> None:
        self.behave = behave
        self.big_command = big_command
        self.requests: list[str] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # ``/v1/models``, which `megaflow run` asks first
                data = json.dumps({"object": "list", "data": [{"id": "flaky"}]}).encode()
                self.send_response(200 if self.path.endswith("/models") else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = json.loads(raw or b"{}")
                with outer.lock:
                    n = len(outer.requests) + 1
                    mode = outer.behave(n, body)
                    outer.requests.append(mode)
                outer.answer(self, mode, body)

        return Handler

    def answer(self, h: BaseHTTPRequestHandler, mode: str, body: dict[str, Any]) -> None:
        if mode == "hang":
            self.stopping.wait()
            return
        if mode == "drop":
            h.close_connection = True
            return
        status, data = 200, b""
        if mode == "ok":
            data = json.dumps(good_step(body)).encode()
        elif mode == "sleep":
            data = json.dumps(_tool("bash", {"command": "sleep 60"})).encode()
        elif mode == "nap":
            data = json.dumps(_tool("bash", {"command": "sleep 1"})).encode()
        elif mode == "big":
            data = json.dumps(_tool("bash", {"command": self.big_command})).encode()
        elif mode in ("500", "502"):
            status = int(mode)
            data = json.dumps({"error": {"message": "upstream exploded"}}).encode()
        elif mode == "garbage":
            data = b"\x00\xff<html>not json at all"
        elif mode == "wrong-shape":
            data = json.dumps({"object": "chat.completion", "result": "yes"}).encode()
        elif mode == "prose":
            data = json.dumps(_completion({"role": "assistant", "content": "I think so."})).encode()
        else:
            raise AssertionError(f"unknown mode {mode!r}")
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()  # release hanging handlers first
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


@contextmanager
def flaky_openai(behave: Behave, big_command: str = "") -> Iterator[FlakyOpenAI]:
    server = FlakyOpenAI(behave, big_command)
    server.start()
    try:
        yield server
    finally:
        server.stop()
