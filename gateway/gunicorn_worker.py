"""gunicorn's workers (gevent, the default, and gthread), answering HTTP protocol errors in the API's JSON error
body.

gunicorn answers a request it cannot parse (bad Content-Length, Transfer-Encoding beside Content-Length,
control characters in a header, an oversized request line or header section, a malformed chunked body)
itself, before the application runs, with an HTML page. This worker answers the same status codes that
gunicorn chooses with the spec's error body instead. The messages are fixed per error class: nothing the
client sent is echoed or logged (a malformed header line may hold a credential).

It also gives the request line and headers a total deadline (REQUEST_HEADER_TIMEOUT_SECONDS, default 10):
gunicorn reads them with blocking reads and no deadline of its own, so clients dripping a header byte a
second could hold every worker thread. When the deadline passes, the process's deadline watcher
(gateway/deadlines.py) shuts the socket's read side;
the parser then sees the end of the stream and the connection is closed. The application's body deadline
(gateway/request_body.py) takes over from there.

Imported by the gunicorn master (gateway/gunicorn_conf.py): it must not import Django. The gevent worker patches
the standard library (sockets, threads, locks) in each worker after the fork, before the application is
imported; the deadline watcher makes its thread (then a greenlet) at its first use, after the patching.
"""

import json
import os
import socket
import time
from datetime import datetime
from typing import Any

from gunicorn import util
from gunicorn.http import errors
from gunicorn.http.message import Request
from gunicorn.http.wsgi import Response, default_environ
from gunicorn.workers.ggevent import GeventWorker
from gunicorn.workers.gthread import TConn, ThreadWorker

from gateway import deadlines
from gateway.anthropic_errors import anthropic_error_body, is_anthropic_door

MSG_INTERNAL = "Internal server error"

# (error class, status, reason phrase, message), first match wins: subclasses before their bases.
PROTOCOL_ERRORS: tuple[tuple[type | tuple[type, ...], int, str, str], ...] = (
    (errors.InvalidResponseHeader, 500, "Internal Server Error", MSG_INTERNAL),
    (errors.InvalidResponseHeaderName, 500, "Internal Server Error", MSG_INTERNAL),
    (errors.LimitRequestLine, 414, "URI Too Long", "The request line (method and URL) is too long"),
    (
        errors.LimitRequestHeaders,
        431,
        "Request Header Fields Too Large",
        "The request's header fields are too large or too many",
    ),
    (
        errors.UnsupportedTransferCoding,
        501,
        "Not Implemented",
        "Unsupported Transfer-Encoding (only chunked is supported)",
    ),
    (errors.ExpectationFailed, 417, "Expectation Failed", "Unsupported Expect header (only 100-continue)"),
    (errors.ForbiddenProxyRequest, 403, "Forbidden", "Request forbidden"),
    (errors.ConfigurationProblem, 500, "Internal Server Error", MSG_INTERNAL),
    (errors.InvalidRequestLine, 400, "Bad Request", "Malformed HTTP request line"),
    (errors.InvalidRequestMethod, 400, "Bad Request", "Invalid HTTP method"),
    (errors.InvalidHTTPVersion, 400, "Bad Request", "Unsupported HTTP version"),
    (errors.ObsoleteFolding, 400, "Bad Request", "Obsolete line folding in a header is not allowed"),
    (errors.InvalidHeaderName, 400, "Bad Request", "Invalid character in a header name"),
    (errors.InvalidHeader, 400, "Bad Request", "Invalid header"),
    (
        (errors.InvalidChunkSize, errors.ChunkMissingTerminator, errors.InvalidChunkExtension),
        400,
        "Bad Request",
        "Malformed chunked request body",
    ),
    (
        (errors.InvalidProxyLine, errors.InvalidProxyHeader, errors.InvalidSchemeHeaders, errors.InvalidH2CPreface),
        400,
        "Bad Request",
        "Malformed request",
    ),
)

# InvalidHeader names the offending header; these two are worth telling apart (and hold nothing secret).
HEADER_MESSAGES = {
    "CONTENT-LENGTH": "Invalid Content-Length header",
    "TRANSFER-ENCODING": "Invalid Transfer-Encoding header, or Transfer-Encoding together with Content-Length",
}


def classify(exc: BaseException) -> tuple[int, str, str]:
    """(status, reason phrase, message) for an error gunicorn raised while reading a request."""
    for kinds, status, reason, message in PROTOCOL_ERRORS:
        if isinstance(exc, kinds):
            if kinds is errors.InvalidHeader:
                message = HEADER_MESSAGES.get(str(getattr(exc, "hdr", "")).upper(), message)
            return status, reason, message
    if isinstance(exc, errors.ParseException):
        return 400, "Bad Request", "Malformed request"
    return 500, "Internal Server Error", MSG_INTERNAL


def error_response_bytes(status: int, reason: str, message: str, path: str | None = None) -> bytes:
    """The error in the gateway's body, or in Anthropic's on its door (when the request line named the path)."""
    error = (
        anthropic_error_body(status, message)
        if path and is_anthropic_door(path)
        else {"error": {"code": status, "message": message}, "user_id": None}
    )
    body = json.dumps(error).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1") + body


def header_timeout() -> float:
    try:
        return max(float(os.environ.get("REQUEST_HEADER_TIMEOUT_SECONDS", "10")), 0.1)
    except ValueError:
        return 10.0


class HeaderDeadlines:
    """Sockets whose request head must be in by a deadline (the shared watcher shuts the late ones' read side)."""

    def __init__(self) -> None:
        self._handles: dict[int, deadlines.Handle] = {}

    def watch(self, sock: socket.socket, deadline: float) -> None:
        self.unwatch(sock)
        self._handles[id(sock)] = deadlines.watch(deadline, deadlines.shutdown(sock))

    def unwatch(self, sock: socket.socket) -> None:
        handle = self._handles.pop(id(sock), None)
        if handle is not None:
            handle.cancel()


class JsonErrors:
    """Protocol errors in the JSON error body, and the request head's deadline."""

    log: Any
    cfg: Any
    _deadlines: HeaderDeadlines

    def run(self) -> None:
        self._deadlines = HeaderDeadlines()
        super().run()  # type: ignore[misc]  # the gunicorn worker class this is mixed into

    def deadlines(self) -> HeaderDeadlines:
        return self._deadlines

    def handle_error(
        self, req: Request | None, client: socket.socket, addr: tuple[str, int] | str | None, exc: BaseException
    ) -> None:
        request_start = datetime.now()
        addr = addr or ("", -1)  # unix socket case
        status, reason, message = classify(exc)
        if status >= 500:
            self.log.exception("Error handling request")
        else:
            # The class only: gunicorn's own message may quote a header line, credentials included.
            self.log.warning("Invalid request from ip=%s: %s (%s)", addr[0], type(exc).__name__, status)
        req = req or getattr(exc, "req", None)
        if req is not None:
            try:
                environ = default_environ(req, client, self.cfg)
                environ["REMOTE_ADDR"] = addr[0]
                environ["REMOTE_PORT"] = str(addr[1])
                resp = Response(req, client, self.cfg)
                resp.status = f"{status} {reason}"
                resp.response_length = len(message)
                self.log.access(resp, req, environ, datetime.now() - request_start)
            except Exception:
                self.log.debug("Failed to log the error response.")
        try:
            path = getattr(req, "path", None)  # InvalidRequestLine's `req` is the line itself
            util.write_nonblock(
                client, error_response_bytes(status, reason, message, path if isinstance(path, str) else None)
            )
        except Exception:
            self.log.debug("Failed to send error message.")


class JsonErrorThreadWorker(JsonErrors, ThreadWorker):
    """gthread (GUNICORN_WORKER_CLASS=gthread): a thread per connection being served."""

    def handle(self, conn: TConn) -> Any:  # gthread's own (keep-alive) answer, passed on
        self.deadlines().watch(conn.sock, time.monotonic() + header_timeout())
        try:
            return super().handle(conn)
        finally:
            self.deadlines().unwatch(conn.sock)

    def handle_request(self, req: Request, conn: TConn) -> bool:
        self.deadlines().unwatch(conn.sock)  # the head is in: the body has the application's deadline
        return super().handle_request(req, conn)

    def handle_http2(self, conn: TConn) -> bool:
        self.deadlines().unwatch(conn.sock)
        return super().handle_http2(conn)

    def handle_h2c_upgrade(self, conn: TConn, req: Request, settings: Any) -> bool:
        self.deadlines().unwatch(conn.sock)
        return super().handle_h2c_upgrade(conn, req, settings)


class JsonErrorGeventWorker(JsonErrors, GeventWorker):
    """gevent (the default): a greenlet per connection, up to worker_connections per worker, on one thread.
    A stream waiting for its provider's next chunk costs a greenlet switch, not a thread wake-up."""

    def handle(self, listener: socket.socket, client: socket.socket, addr: tuple[str, int] | str) -> None:
        self.deadlines().watch(client, time.monotonic() + header_timeout())
        try:
            return super().handle(listener, client, addr)
        finally:
            self.deadlines().unwatch(client)

    def handle_request(
        self, listener_name: tuple[str, int] | str, req: Request, sock: socket.socket, addr: tuple[str, int] | str
    ) -> bool:
        self.deadlines().unwatch(sock)
        return super().handle_request(listener_name, req, sock, addr)

    def handle_http2(
        self,
        listener: socket.socket,
        client: socket.socket,
        addr: tuple[str, int] | str,
        preface: bytes = b"",
        upgrade: Any = None,
    ) -> None:
        self.deadlines().unwatch(client)
        return super().handle_http2(listener, client, addr, preface=preface, upgrade=upgrade)
