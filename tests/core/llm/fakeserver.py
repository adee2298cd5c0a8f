"""An in-process OpenAI-compatible chat server for tests: a real HTTP server on 127.0.0.1, port 0.

It serves ``POST /v1/chat/completions`` (and ``GET /v1/models``, listing ``models``), records every
request, counts requests in flight, and plays scripted replies (``queue``) before falling back to
``default_content``. It can refuse ``response_format`` the way real servers do, and answer a ``failure``
(an error status, or a reply too slow to wait for) to every chat request, or to those ``failing`` picks.
Use the ``fake_server`` fixture from this folder's conftest, or::

    with FakeChatServer() as server:
        settings = LLMSettings(model="m", api_key="k", base_url=server.url)
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"  # GET: the list of models (what a health probe asks)
FAKE_API_KEY = "sk-test-5ecret-key"
FAKE_MODEL = "fake-model"


@dataclass
class Reply:
    """One scripted reaction. ``body`` (raw text) replaces the chat-completion envelope when given."""

    status: int = 200
    content: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None
    delay_s: float = 0.0
    usage: tuple[int, int] | None = (11, 5)


@dataclass(frozen=True)
class SeenRequest:
    """A request as the server received it (header names lower-cased)."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class FakeChatServer:
    """A threaded HTTP server that answers like an OpenAI-compatible chat endpoint."""

    def __init__(self) -> None:
        self.default_content = '{"answer": "ok"}'
        self.default_delay_s = 0.0
        self.responder: Callable[[dict[str, Any]], str] | None = None
        self.reject_schema_status: int | None = None  # refuse response_format carrying a schema
        self.reject_json_mode_status: int | None = None  # refuse any response_format
        self.models = [FAKE_MODEL]  # what GET /v1/models lists
        # While set: answered to every chat request (those ``failing(body)`` picks, when given) instead.
        self.failure: Reply | None = None
        self.failing: Callable[[dict[str, Any]], bool] | None = None
        self.requests: list[SeenRequest] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._queue: list[Reply] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        # A short poll interval makes shutdown (once per test) take milliseconds, not half a second.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, name="fake-chat-server", daemon=True
        )

    @property
    def url(self) -> str:
        """The base URL to configure a client with (ends in ``/v1``)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def count(self) -> int:
        """How many requests arrived so far."""
        with self._lock:
            return len(self.requests)

    def queue(self, *replies: Reply) -> None:
        """Serve these replies, in order, to the next requests."""
        with self._lock:
            self._queue.extend(replies)

    def start(self) -> FakeChatServer:
        """Start serving in a daemon thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; wakes handlers that are still sleeping out a delay."""
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeChatServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def handle(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[Reply, dict[str, Any]]:
        """Record a request and choose its reply (called from the handler threads)."""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_unparsable": raw.decode(errors="replace")}
        with self._lock:
            self.requests.append(SeenRequest(path, headers, body))
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            if path == MODELS_PATH:
                if self._queue:
                    return self._queue.pop(0), body
                listed = {"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]}
                return Reply(body=json.dumps(listed), delay_s=self.default_delay_s), body
            if path != CHAT_PATH:
                return Reply(status=404, body='{"error": {"message": "not found"}}'), body
            rejection = self._rejection(body)
            if rejection is not None:
                return rejection, body
            if self._queue:
                return self._queue.pop(0), body
        content = self.responder(body) if self.responder else self.default_content
        return Reply(content=content, delay_s=self.default_delay_s), body

    def answer(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[Reply, dict[str, Any]]:
        """:meth:`handle`, then the ``failure`` in place of a chat request's reply (a slow one keeps the
        reply's content, late)."""
        reply, body = self.handle(path, headers, raw)
        failure = self.failure
        if failure is None or path != CHAT_PATH or (self.failing is not None and not self.failing(body)):
            return reply, body
        return (Reply(content=reply.content, delay_s=failure.delay_s) if failure.delay_s else failure), body

    def render(self, reply: Reply, body: dict[str, Any]) -> str:
        """The response text: the raw ``body``, an error object, or a chat completion."""
        if reply.body is not None:
            return reply.body
        if reply.status >= 400:
            return json.dumps({"error": {"message": f"fake server error {reply.status}"}})
        return envelope(body, reply, self.default_content if reply.content is None else reply.content)

    def done(self) -> None:
        """Mark one request as finished (for the in-flight count)."""
        with self._lock:
            self._in_flight -= 1

    def wait(self, seconds: float) -> None:
        """Sleep, but wake up early when the server stops."""
        if seconds > 0:
            self._stopping.wait(seconds)

    def _rejection(self, body: dict[str, Any]) -> Reply | None:
        fmt = body.get("response_format")
        if fmt is None:
            return None
        status = self.reject_json_mode_status
        if status is None and isinstance(fmt, dict) and "schema" in fmt:
            status = self.reject_schema_status
        if status is None:
            return None
        message = f"response_format {json.dumps(fmt)[:80]} is not supported: use 'text' or 'json_object'"
        return Reply(status=status, body=json.dumps({"error": {"message": message, "type": "invalid_request"}}))


def envelope(body: dict[str, Any], reply: Reply, content: str) -> str:
    """A chat.completion response around ``content``."""
    data: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", ""),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
    }
    if reply.usage is not None:
        t_in, t_out = reply.usage
        data["usage"] = {"prompt_tokens": t_in, "completion_tokens": t_out, "total_tokens": t_in + t_out}
    return json.dumps(data)


def _handler_for(server: FakeChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.do_POST()

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            reply, body = server.answer(self.path, headers, raw)
            finished = False
            try:
                server.wait(reply.delay_s)
                payload = server.render(reply, body).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                # Finished before the body goes out: once the client has it, it may send its next request
                # before this thread would run again, and that request must not count as overlapping.
                server.done()
                finished = True
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing to answer
            finally:
                if not finished:
                    server.done()

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output quiet

    return Handler
