"""Read an API request's body whole, size-checked and within a total deadline, before Django builds the request.

Authentication queries the database; if the body were read afterwards (by the view), a client that sends its
headers and then trickles (or never sends) its body would keep a pooled database connection for as long as it
cares to, and a few such clients exhaust the pool. So the WSGI application (gateway/wsgi.py) reads API bodies
first, and hands Django the bytes in memory (a new `wsgi.input` and its CONTENT_LENGTH, plain WSGI):

- over MAX_REQUEST_BODY_BYTES: 413 (from Content-Length before reading anything, or while reading a
  chunked body);
- not received in full within REQUEST_BODY_TIMEOUT_SECONDS from the start of the read: 408. The deadline is
  total, not per read: under gunicorn the socket's read side is shut when it passes (gateway/deadlines.py),
  and each read gets the time left as its socket timeout;
- a malformed Content-Length: 400; a chunked body is read (gunicorn decodes it; `wsgi.input_terminated`)
  or, on a server that does not decode it, refused with 411.

A refusal is not answered here: it is left in the environ (REFUSAL) for gateway.middleware, which answers it
in the API's error body with the other middleware's headers.
"""

import io
import time
from typing import Any

from gateway import deadlines
from gateway.errors import MSG_BODY_TOO_LARGE

MSG_BAD_LENGTH = "Invalid Content-Length header"
MSG_BODY_TIMEOUT = "The request body was not received in time (limit: {seconds:g} seconds)"
MSG_BODY_INCOMPLETE = "The request body ended before its Content-Length"
MSG_BAD_CHUNKED = "Malformed chunked request body"
MSG_UNSUPPORTED_CODING = "Unsupported Transfer-Encoding (only chunked is supported)"
MSG_LENGTH_REQUIRED = "Content-Length required (this server cannot read a chunked body)"
MSG_UNSUPPORTED_CONTENT_ENCODING = "Unsupported Content-Encoding {coding!r}: send the body uncompressed"
READ_STEP = 256 * 1024

# environ keys: the body was read into memory (or there was none); the refusal to answer instead
BUFFERED = "gateway.body_buffered"
REFUSAL = "gateway.body_refusal"


class Refused(Exception):
    """The request's body is refused with this status and message."""

    def __init__(self, status: int, message: str):
        super().__init__(status, message)
        self.status = status
        self.message = message


def planned_read(environ: dict[str, Any], limit: int) -> tuple[int, bool]:
    """From the head alone: (bytes to read, whether exactly that many must come); (0, True) for no body."""
    codings = [c.strip() for c in environ.get("HTTP_TRANSFER_ENCODING", "").lower().split(",") if c.strip()]
    if set(codings) - {"chunked"}:  # gzip etc. reach the application undecoded
        raise Refused(501, MSG_UNSUPPORTED_CODING)
    # A compressed body would be parsed as if it were plain JSON: refuse it instead (RFC 9110 15.5.16).
    encoding = environ.get("HTTP_CONTENT_ENCODING", "").strip().lower()
    if encoding and encoding != "identity":
        raise Refused(415, MSG_UNSUPPORTED_CONTENT_ENCODING.format(coding=encoding[:32]))
    if codings:  # Transfer-Encoding wins over Content-Length (RFC 9112 6.3); gunicorn refuses both together
        if not environ.get("wsgi.input_terminated"):
            raise Refused(411, MSG_LENGTH_REQUIRED)
        return limit + 1, False  # until the end of the body, which the server marks
    raw_length = str(environ.get("CONTENT_LENGTH") or "").strip()
    if not raw_length:
        return 0, True
    if not raw_length.isdigit() or not raw_length.isascii():
        raise Refused(400, MSG_BAD_LENGTH)
    wanted = int(raw_length)
    if wanted > limit:
        raise Refused(413, MSG_BODY_TOO_LARGE.format(limit=limit))
    return wanted, True


def buffer_body(environ: dict[str, Any], *, limit: int, seconds: float) -> None:
    """Read the body into memory and give it to the application as its `wsgi.input`; raises Refused."""
    wanted, exact = planned_read(environ, limit)
    if wanted == 0:
        return
    body = _read(environ, wanted, exact=exact, seconds=seconds)
    if len(body) > limit:
        raise Refused(413, MSG_BODY_TOO_LARGE.format(limit=limit))
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))


def _read(environ: dict[str, Any], wanted: int, *, exact: bool, seconds: float) -> bytes:
    """Up to `wanted` bytes of wsgi.input within the total deadline; raises Refused."""
    deadline = time.monotonic() + seconds
    stream = environ["wsgi.input"]
    sock = environ.get("gunicorn.socket")
    previous_timeout = sock.gettimeout() if sock is not None else None
    watch = deadlines.watch(deadline, deadlines.shutdown(sock)) if sock is not None else None
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
    except OSError:  # the client went away (or the deadline shut the socket mid-chunk)
        if watch is None or not watch.fired:
            raise Refused(400, MSG_BODY_INCOMPLETE) from None
        timed_out = True
    except Exception:  # the server's chunked decoding refused the body (gunicorn's InvalidChunkSize, ...)
        if watch is None or not watch.fired:
            raise Refused(400, MSG_BAD_CHUNKED) from None
        timed_out = True
    finally:
        if watch is not None:
            watch.cancel()
        if sock is not None:
            try:
                sock.settimeout(previous_timeout)
            except OSError:
                pass
    if timed_out or (watch is not None and watch.fired and received < wanted and exact):
        raise Refused(408, MSG_BODY_TIMEOUT.format(seconds=seconds))
    if exact and received < wanted:
        raise Refused(400, MSG_BODY_INCOMPLETE)
    return b"".join(parts)
