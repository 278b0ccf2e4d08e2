"""A real HTTP server on 127.0.0.1 speaking the OpenAI and Anthropic wire
formats, JSON and server-sent events.  Tests queue the replies it gives."""

from __future__ import annotations

import json
import threading

from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs


@attrs.frozen
class Json:
    """Answer with a JSON body (or raw bytes) and a status."""

    body: Any
    status: int = 200
    raw: bytes | None = None


@attrs.frozen
class Sse:
    """Answer with server-sent events: (event name or None, data) pairs.

    *stall_after*: after that many events, keep the connection open (sending
    keep-alive comments) until the client goes away.  *drop*: close the
    connection after the events, without the provider's end marker.
    """

    events: tuple[tuple[str | None, str], ...]
    stall_after: int | None = None


class FakeLLM:
    """The server's state: queued replies and the requests received."""

    def __init__(self) -> None:
        self.replies: deque[Json | Sse] = deque()
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.client_gone = threading.Event()
        self.streaming = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.01},
            daemon=True,
        )

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:PORT``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def reply(self, *replies: Json | Sse) -> None:
        """Queue replies, used in order."""
        self.replies.extend(replies)

    def start(self) -> None:
        """Serve in a background thread."""
        self._thread.start()

    def stop(self) -> None:
        """Shut down and free the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def _handler(state: FakeLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            del format, args  # quiet

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            state.requests.append((self.path, body))
            if not state.replies:
                self._send_json(500, {"error": {"message": "no reply queued"}})
                return
            reply = state.replies.popleft()
            if isinstance(reply, Json):
                data = (
                    reply.raw
                    if reply.raw is not None
                    else json.dumps(reply.body).encode()
                )
                self._send(reply.status, data)
            else:
                self._stream(reply)

        def _send_json(self, status: int, body: Any) -> None:
            self._send(status, json.dumps(body).encode())

        def _send(self, status: int, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, reply: Sse) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                for i, (event, data) in enumerate(reply.events):
                    if (
                        reply.stall_after is not None
                        and i == reply.stall_after
                    ):
                        self._stall()
                        return
                    head = f"event: {event}\n" if event else ""
                    self.wfile.write(f"{head}data: {data}\n\n".encode())
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                state.client_gone.set()

        def _stall(self) -> None:
            state.streaming.set()
            # Keep-alive comments until a write fails: the client hung up.
            while not state.client_gone.is_set():
                try:
                    self.wfile.write(b": keep-alive\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    state.client_gone.set()
                    return
                state.client_gone.wait(0.02)

    return Handler


def sse_lines(
    events: Iterator[tuple[str | None, Any]],
) -> tuple[tuple[str | None, str], ...]:
    """Encode (event, payload) pairs, JSON-encoding non-string payloads."""
    return tuple(
        (e, d if isinstance(d, str) else json.dumps(d)) for e, d in events
    )
