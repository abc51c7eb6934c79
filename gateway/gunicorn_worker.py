"""gunicorn's workers (gevent, the default, and gthread), answering HTTP protocol errors in the API's JSON error
body.

gunicorn answers a request it cannot parse (bad Content-Length, Transfer-Encoding beside Content-Length,
control characters in a header, an oversized request line or header section, a malformed chunked body)
itself, before the application runs, with an HTML page. This worker answers the same status codes that
gunicorn chooses with the spec's error body instead. The messages are fixed per error class: nothing the
client sent is echoed or logged (a malformed header line may hold a credential).

It also gives the request line and headers a total deadline (REQUEST_HEADER_TIMEOUT_SECONDS, default 10):
gunicorn reads them with blocking reads and no deadline of its own, so clients dripping a header byte a
second could hold every worker thread. When the deadline passes, a watchdog shuts the socket's read side;
the parser then sees the end of the stream and the connection is closed. The application's body deadline
(gateway/middleware.py) takes over from there.

Imported by the gunicorn master (gateway/gunicorn_conf.py): it must not import Django. The gevent worker patches
the standard library (sockets, threads, locks) in each worker after the fork, before the application is
imported; each worker's deadline watcher is made there, after the patching.
"""

import json
import os
import socket
import threading
import time
from datetime import datetime
from typing import Any

from gunicorn import util
from gunicorn.http import errors, wsgi
from gunicorn.http.wsgi import Response, default_environ
from gunicorn.workers.ggevent import GeventWorker
from gunicorn.workers.gthread import ThreadWorker

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
    """Sockets whose request head must be in by a deadline; one polling thread shuts the late ones."""

    TICK = 0.1

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watched: dict[int, tuple[float, socket.socket]] = {}
        self._thread: threading.Thread | None = None

    def watch(self, sock: socket.socket, deadline: float) -> None:
        with self._lock:
            self._watched[id(sock)] = (deadline, sock)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="header-deadlines", daemon=True)
                self._thread.start()

    def unwatch(self, sock: socket.socket) -> None:
        with self._lock:
            self._watched.pop(id(sock), None)

    def _run(self) -> None:
        while True:
            time.sleep(self.TICK)
            now = time.monotonic()
            with self._lock:
                late = [key for key, (deadline, _) in self._watched.items() if deadline <= now]
                socks = [self._watched.pop(key)[1] for key in late]
            for sock in socks:
                try:
                    sock.shutdown(socket.SHUT_RD)
                except OSError:
                    pass


JOINED_BODY_MAX = 64 * 1024  # first body bytes up to this size go in the head's send (a copy of them is made)


class _HeadWithBody:
    """Stands for the client's socket while a response writes: keeps what is written while `keeping` (the head),
    then sends it in front of the next bytes (the first body bytes), or alone at `flush()`."""

    __slots__ = ("sock", "head", "keeping")

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.head = b""
        self.keeping = True

    def sendall(self, data: bytes) -> None:
        if self.keeping:
            self.head += data
            return
        head, self.head = self.head, b""
        if head and len(data) <= JOINED_BODY_MAX:
            self.sock.sendall(head + data)
            return
        if head:  # a large first chunk is not copied to be joined
            self.sock.sendall(head)
        self.sock.sendall(data)

    def flush(self) -> None:
        head, self.head = self.head, b""
        if head:
            self.sock.sendall(head)


class OneSendResponse(Response):
    """gunicorn's HTTP/1 response with its head sent in the same send as the first body bytes, instead of in a send
    of its own: one system call and one TCP segment fewer for a JSON answer (and for a stream's first event).
    What gunicorn writes is unchanged: its own code renders the head and frames the body; only the send is
    joined. A response with no body bytes (HEAD, 204, an empty body) sends its head alone, as before."""

    sock: Any  # the client's socket (gunicorn's), or the stand-in while a write joins the head to the body

    def write(self, arg):
        if self.headers_sent:
            return super().write(arg)
        joined = _HeadWithBody(self.sock)
        self.sock = joined
        try:
            self.send_headers()
            joined.keeping = False
            super().write(arg)
        finally:
            self.sock = joined.sock
            joined.flush()  # no body bytes went out (none, or none allowed): the head alone


class JsonErrors:
    """Protocol errors in the JSON error body, the request head's deadline (one watcher per worker), and
    responses sent with their head and first body bytes together (OneSendResponse)."""

    log: Any
    cfg: Any
    _deadlines: HeaderDeadlines

    def run(self) -> None:
        self._deadlines = HeaderDeadlines()  # in the worker, after the fork and gevent's patching
        wsgi.Response = OneSendResponse  # what gunicorn's wsgi.create builds for each HTTP/1 request
        super().run()  # type: ignore[misc]  # the gunicorn worker class this is mixed into

    def deadlines(self) -> HeaderDeadlines:
        return self._deadlines

    def handle_error(self, req, client, addr, exc):
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

    def handle(self, conn):
        self.deadlines().watch(conn.sock, time.monotonic() + header_timeout())
        try:
            return super().handle(conn)
        finally:
            self.deadlines().unwatch(conn.sock)

    def handle_request(self, req, conn):
        self.deadlines().unwatch(conn.sock)  # the head is in: the body has the application's deadline
        return super().handle_request(req, conn)

    def handle_http2(self, conn):
        self.deadlines().unwatch(conn.sock)
        return super().handle_http2(conn)

    def handle_h2c_upgrade(self, conn, req, settings):
        self.deadlines().unwatch(conn.sock)
        return super().handle_h2c_upgrade(conn, req, settings)


class JsonErrorGeventWorker(JsonErrors, GeventWorker):
    """gevent (the default): a greenlet per connection, up to worker_connections per worker, on one thread.
    A stream waiting for its provider's next chunk costs a greenlet switch, not a thread wake-up."""

    def handle(self, listener, client, addr):
        self.deadlines().watch(client, time.monotonic() + header_timeout())
        try:
            return super().handle(listener, client, addr)
        finally:
            self.deadlines().unwatch(client)

    def handle_request(self, listener_name, req, sock, addr):
        self.deadlines().unwatch(sock)
        return super().handle_request(listener_name, req, sock, addr)

    def handle_http2(self, listener, client, addr, preface=b"", upgrade=None):
        self.deadlines().unwatch(client)
        return super().handle_http2(listener, client, addr, preface=preface, upgrade=upgrade)
