"""Read API request bodies whole, size-checked and within a total deadline, before anything else runs.

Authentication queries the database; if the body were read afterwards (by the view), a client that sends
its headers and then trickles (or never sends) its body would keep a pooled database connection for as
long as it cares to, and a few such clients exhaust the pool. So for API paths this middleware, which runs
before authentication, reads the body first:

- over MAX_REQUEST_BODY_BYTES: 413 (from Content-Length before reading anything, or while reading a
  chunked body);
- not received in full within REQUEST_BODY_TIMEOUT_SECONDS from the start of the read: 408. The deadline is
  total, not per read: under gunicorn the socket's read side is shut when it passes (a shared watchdog
  thread), and each read gets the time left as its socket timeout;
- a malformed Content-Length: 400; a chunked body is read (gunicorn decodes it; `wsgi.input_terminated`)
  or, on a server that does not decode it, refused with 411.

The view then parses the buffered body. No database connection is open while waiting: Django opens one
lazily, and on PostgreSQL the pool gets each connection back at the end of the request that used it. That
end comes only after the server has written the response, so once the view has answered, this middleware
hands back the connections that would be closed at the end anyway (CONN_MAX_AGE 0, as with the pool): a
client that reads its response slowly does not hold one either. (Streams release theirs themselves.)
"""

import heapq
import io
import itertools
import os
import socket
import threading
import time

from django.conf import settings
from django.db import connections

from gateway.errors import MSG_BODY_TOO_LARGE, error_json_response, is_api_path

MSG_BAD_LENGTH = "Invalid Content-Length header"
MSG_BODY_TIMEOUT = "The request body was not received in time (limit: {seconds:g} seconds)"
MSG_BODY_INCOMPLETE = "The request body ended before its Content-Length"
MSG_BAD_CHUNKED = "Malformed chunked request body"
MSG_UNSUPPORTED_CODING = "Unsupported Transfer-Encoding (only chunked is supported)"
MSG_LENGTH_REQUIRED = "Content-Length required (this server cannot read a chunked body)"
MSG_UNSUPPORTED_CONTENT_ENCODING = "Unsupported Content-Encoding {coding!r}: send the body uncompressed"
READ_STEP = 256 * 1024


class _Watch:
    __slots__ = ("sock", "fired")

    def __init__(self, sock):
        self.sock = sock
        self.fired = False


class BodyDeadlines:
    """One daemon thread per process that shuts the read side of a socket whose body deadline passed, which
    wakes the thread blocked reading it (recv() returns end of file). A socket timeout alone bounds one
    recv(), not a body that arrives one byte at a time."""

    def __init__(self):
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Watch]] = []
        self._order = itertools.count()
        self._pid = None

    def watch(self, sock, deadline: float) -> _Watch:
        watch = _Watch(sock)
        with self._cond:
            if self._pid != os.getpid():  # first use in this process (after a fork, the thread is gone)
                self._pid = os.getpid()
                self._heap = []
                threading.Thread(target=self._run, name="body-deadlines", daemon=True).start()
            heapq.heappush(self._heap, (deadline, next(self._order), watch))
            if self._heap[0][2] is watch:
                self._cond.notify()
        return watch

    def unwatch(self, watch: _Watch) -> None:
        with self._cond:
            watch.sock = None  # left in the heap, dropped when its deadline comes

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap:
                    self._cond.wait()
                deadline, _, watch = self._heap[0]
                wait = deadline - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)
                sock, watch.sock = watch.sock, None
                if sock is None:
                    continue
                watch.fired = True
            try:
                sock.shutdown(socket.SHUT_RD)
            except OSError:
                pass


deadlines = BodyDeadlines()


class ApiBodyLimitMiddleware:
    """API bodies: 413 over the size limit, 408 past the deadline, read whole before authentication."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if is_api_path(request.path_info):
            refusal = buffer_body(request)
            if refusal is not None:
                return refusal
            response = self.get_response(request)
            release_connections()
            return response
        return self.get_response(request)


def release_connections() -> None:
    """Close (on PostgreSQL: return to the pool) the connections that the end of the request would close."""
    for conn in connections.all(initialized_only=True):
        if (
            conn.connection is not None
            and conn.vendor != "sqlite"
            and not conn.in_atomic_block
            and conn.settings_dict.get("CONN_MAX_AGE") == 0
        ):
            conn.close()


def buffer_body(request):
    """Read the request's body into memory (the view parses it from there); an error response, or None."""
    meta = request.META
    limit = settings.MAX_REQUEST_BODY_BYTES
    codings = [c.strip() for c in meta.get("HTTP_TRANSFER_ENCODING", "").lower().split(",") if c.strip()]
    if set(codings) - {"chunked"}:  # gzip etc. reach the application undecoded
        return error_json_response(501, MSG_UNSUPPORTED_CODING)
    # A compressed body would be parsed as if it were plain JSON: refuse it instead (RFC 9110 15.5.16).
    encoding = meta.get("HTTP_CONTENT_ENCODING", "").strip().lower()
    if encoding and encoding != "identity":
        return error_json_response(415, MSG_UNSUPPORTED_CONTENT_ENCODING.format(coding=encoding[:32]))
    chunked = bool(codings)
    if chunked:  # Transfer-Encoding wins over Content-Length (RFC 9112 6.3); gunicorn refuses both together
        if not meta.get("wsgi.input_terminated"):
            return error_json_response(411, MSG_LENGTH_REQUIRED)
        wanted = limit + 1  # until the end of the body, which the server marks
    else:
        raw_length = str(meta.get("CONTENT_LENGTH") or "").strip()
        if not raw_length:
            return None
        if not raw_length.isdigit() or not raw_length.isascii():
            return error_json_response(400, MSG_BAD_LENGTH)
        wanted = int(raw_length)
        if wanted > limit:
            return error_json_response(413, MSG_BODY_TOO_LARGE.format(limit=limit))
        if wanted == 0:
            return None
    body, error = _read(meta, wanted, exact=not chunked)
    if error is not None:
        return error
    if len(body) > limit:
        return error_json_response(413, MSG_BODY_TOO_LARGE.format(limit=limit))
    request._body = body
    request._stream = io.BytesIO(body)
    request._read_started = False
    meta["CONTENT_LENGTH"] = str(len(body))
    return None


def _read(meta, wanted: int, *, exact: bool):
    """(body, None) or (b"", error response): up to `wanted` bytes of wsgi.input within the total deadline."""
    seconds = settings.REQUEST_BODY_TIMEOUT_SECONDS
    deadline = time.monotonic() + seconds
    stream = meta["wsgi.input"]
    sock = meta.get("gunicorn.socket")
    previous_timeout = sock.gettimeout() if sock is not None else None
    watch = deadlines.watch(sock, deadline) if sock is not None else None
    timed_out = False
    parts, received = [], 0
    try:
        while received < wanted:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            if sock is not None:
                sock.settimeout(left)
            data = stream.read(min(READ_STEP, wanted - received))
            if not data:
                break
            parts.append(data)
            received += len(data)
    except TimeoutError:
        timed_out = True
    except OSError:  # the client went away (or the watchdog shut the socket mid-chunk)
        if watch is None or not watch.fired:
            return b"", error_json_response(400, MSG_BODY_INCOMPLETE)
        timed_out = True
    except Exception:  # the server's chunked decoding refused the body (gunicorn's InvalidChunkSize, ...)
        if watch is not None and watch.fired:
            timed_out = True
        else:
            return b"", error_json_response(400, MSG_BAD_CHUNKED)
    finally:
        if watch is not None:
            deadlines.unwatch(watch)
        if sock is not None:
            try:
                sock.settimeout(previous_timeout)
            except OSError:
                pass
    if timed_out or (watch is not None and watch.fired and received < wanted and exact):
        return b"", error_json_response(408, MSG_BODY_TIMEOUT.format(seconds=seconds))
    if exact and received < wanted:
        return b"", error_json_response(400, MSG_BODY_INCOMPLETE)
    return b"".join(parts), None
