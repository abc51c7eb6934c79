"""One outbound call: send it to a checked address over a kept-alive connection (routing/http/destinations.py),
bound it by its deadlines (routing/http/watch.py), read its body within the caps."""

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, cast
from urllib.parse import urlencode

import urllib3
from django.conf import settings
from urllib3.response import HTTPResponse

from gateway.renderers import json_compact
from routing.http import destinations
from routing.http.errors import (
    ResponseTooLarge,
    SendFailed,
    TransportError,
    connect_failed,
    deadline_passed,
    may_echo_request,
    read_failure,
    send_failure,
)
from routing.http.watch import Watch, current

MAX_ERROR_BODY = 64 * 1024  # an error body longer than this is cut (its message is all we keep)


@dataclass(frozen=True)
class Timeouts:
    connect: float
    read: float  # the longest wait for any byte, first or next
    # Deadlines from the start of the call (None: the UPSTREAM_* setting).
    first_byte: float | None = None  # streaming calls: until the response head has arrived
    total: float | None = None  # non-streaming calls: head and body
    stream_max: float | None = None  # streaming calls: head and the whole body


class Response:
    """An upstream's answer: status, headers, and `content` (read whole unless streaming: then read `raw` with
    iter_body, and always `close()` it)."""

    __slots__ = ("status_code", "headers", "raw", "content", "gateway_watch")

    def __init__(self, raw: HTTPResponse, watch: Watch):
        self.raw = raw
        self.status_code = raw.status
        self.headers = raw.headers  # case-insensitive
        self.content = b""
        self.gateway_watch = watch

    def json(self) -> Any:
        return json.loads(self.content)


def default_timeouts() -> Timeouts:
    return Timeouts(
        connect=settings.UPSTREAM_CONNECT_TIMEOUT,
        read=settings.UPSTREAM_READ_TIMEOUT,
        first_byte=settings.UPSTREAM_FIRST_BYTE_TIMEOUT,
        total=settings.UPSTREAM_TOTAL_TIMEOUT,
        stream_max=settings.UPSTREAM_STREAM_MAX_SECONDS,
    )


def _seconds(deadline: float | None) -> float:
    assert deadline is not None, "completed by _complete"
    return deadline


def _complete(timeouts: Timeouts | None) -> Timeouts:
    defaults = default_timeouts()
    if timeouts is None:
        return defaults
    return replace(
        timeouts,
        first_byte=timeouts.first_byte or defaults.first_byte,
        total=timeouts.total or defaults.total,
        stream_max=timeouts.stream_max or defaults.stream_max,
    )


# ---- requests ---------------------------------------------------------------------------------------------

# Sent unless the caller sets them (what `requests` sent: some providers compress large answers).
_DEFAULT_HEADERS = {"User-Agent": "model-gateway", "Accept-Encoding": "gzip, deflate", "Accept": "*/*"}
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_UNSENDABLE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]|[^\x00-\xff]")  # controls (HTAB is allowed) and non-Latin-1


def _check_headers(headers: dict[str, str]) -> None:
    """Refuse what http.client would choke on or pass through (NUL, CR/LF, other controls, non-Latin-1)."""
    for name, value in headers.items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise SendFailed("a request header name cannot be sent")
        if not isinstance(value, str | bytes) or _UNSENDABLE.search(
            value if isinstance(value, str) else value.decode("latin-1")
        ):
            raise SendFailed(f"the {name} header holds characters that cannot be sent")


def _with_defaults(headers: dict[str, str]) -> dict[str, str]:
    names = {name.lower() for name in headers}
    missing = {name: value for name, value in _DEFAULT_HEADERS.items() if name.lower() not in names}
    return {**missing, **headers} if missing else headers


def request(
    method: str,
    url: str,
    *,
    headers: dict[str, str],
    json_body: dict[str, Any] | None = None,
    form_body: dict[str, Any] | None = None,
    content: bytes | None = None,
    timeouts: Timeouts | None = None,
    stream: bool = False,
    allow_private: bool = False,
    max_body: int | None = None,
) -> Response:
    """Send one request. An error status (not 2xx) comes back with its body read (at most MAX_ERROR_BODY
    bytes) and the connection released. A non-streaming success comes back with its body read (at most
    `max_body`, default UPSTREAM_MAX_RESPONSE_BYTES, else TransportError `too_large`); a streaming one open:
    read it with iter_body and always `close()` it (in `finally`)."""
    timeouts = _complete(timeouts)
    data = content
    if json_body is not None:
        data = json_compact(json_body)  # a non-finite number (a replayed tool call's arguments) goes as null
        headers = {"Content-Type": "application/json", **headers}
    elif form_body is not None:
        data = urlencode(form_body).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded", **headers}
    headers = _with_defaults(headers)
    _check_headers(headers)
    started = time.monotonic()
    watch = Watch()
    head_deadline = started + _seconds(timeouts.first_byte if stream else timeouts.total)
    watch.arm(head_deadline)
    try:
        raw = _send(method, url, data, headers, timeouts, watch, allow_private)
    except BaseException as exc:
        watch.disarm()
        if isinstance(exc, Exception):
            raise send_failure(exc, fired=watch.fired) from (None if may_echo_request(exc) else exc)
        raise
    response = Response(raw, watch)
    try:
        if not 200 <= response.status_code < 300:
            watch.arm(max(head_deadline, time.monotonic() + timeouts.read))
            _read_body(response, MAX_ERROR_BODY, truncate=True)
        elif not stream:
            _read_body(response, max_body or settings.UPSTREAM_MAX_RESPONSE_BYTES, truncate=False)
        else:
            watch.arm(started + _seconds(timeouts.stream_max))
            return response
    except BaseException:
        close(response)
        raise
    watch.disarm()
    return response


def _send(
    method: str,
    url: str,
    data: bytes | None,
    headers: dict[str, str],
    timeouts: Timeouts,
    watch: Watch,
    allow_private: bool,
) -> HTTPResponse:
    """urlopen on each checked address of the URL's host in turn, until one connects."""
    to = destinations.target(url)
    private_ok = allow_private or settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS
    found = destinations.addresses(to.host, to.port, private_ok=private_ok)
    headers = {"Host": to.host_header, **headers}
    timeout = urllib3.Timeout(connect=timeouts.connect, read=timeouts.read)
    context = current.set(watch)
    try:
        for attempt, address in enumerate(found, 1):
            try:
                raw = destinations.POOLS.pool(to, address).urlopen(
                    method,
                    to.path,
                    body=data,
                    headers=headers,
                    timeout=timeout,
                    retries=False,
                    redirect=False,
                    assert_same_host=False,
                    preload_content=False,
                )
            except Exception as exc:
                if attempt < len(found) and connect_failed(exc) and not watch.fired:
                    continue  # nothing was sent: the next address may answer
                raise
            return cast(HTTPResponse, raw)  # what a pool's urlopen returns (typed as its base class)
    finally:
        current.reset(context)
    raise AssertionError("addresses() returns at least one")


def _read_body(response: Response, limit: int, *, truncate: bool) -> None:
    """Read the whole body into `response.content`, at most `limit` bytes (decoded)."""
    declared = response.headers.get("Content-Length", "")
    if not truncate and declared.isdigit() and int(declared) > limit:
        raise ResponseTooLarge("upstream response exceeds the size limit")
    body = bytearray()
    for chunk in iter_body(response, 65536):
        body += chunk
        if len(body) > limit:
            if truncate:
                del body[limit:]
                break
            raise ResponseTooLarge("upstream response exceeds the size limit")
    response.content = bytes(body)


# ---- bodies -----------------------------------------------------------------------------------------------


def iter_body(response: Response, chunk_size: int = 16384, *, limit: int | None = None) -> Iterator[bytes]:
    """The body's bytes as they arrive (a chunked body chunk by chunk, any other what one receive brought, so
    events are not held back waiting for a full buffer); transport failures and passed deadlines become
    TransportError. With `limit`, more than that many bytes fail the read (as at_most)."""
    chunks = _body_chunks(response.raw, response.gateway_watch, chunk_size)
    return chunks if limit is None else at_most(chunks, limit)


def _body_chunks(raw: HTTPResponse, watch: Watch, chunk_size: int) -> Iterator[bytes]:
    try:
        if raw.chunked and raw.supports_chunked_reads():
            for data in raw.read_chunked(chunk_size, decode_content=True):
                # The deadline is checked per chunk too: a compressed body already received (a gzip bomb)
                # keeps decoding after the socket was shut down.
                if watch.fired:
                    raise deadline_passed()
                yield data
        else:
            empty = 0
            while empty < 3:  # read1 returns b"" at the end of the body (and closes it)
                if watch.fired:
                    raise deadline_passed()
                data = raw.read1(chunk_size, decode_content=True)
                if data:
                    empty = 0
                    yield data
                elif raw.closed or data is None:
                    break
                else:
                    empty += 1
    except TransportError:
        raise
    except Exception as exc:  # urllib3 ReadTimeoutError, ProtocolError (connection cut mid-body)
        raise read_failure(exc, fired=watch.fired) from exc
    if watch.fired:
        raise deadline_passed()


def at_most(chunks: Iterator[bytes], limit: int) -> Iterator[bytes]:
    """A streamed body's chunks, failing once more than `limit` bytes came (a stream's answer is folded in
    memory: an upstream that never stops must not grow the worker without bound)."""
    total = 0
    for chunk in chunks:
        total += len(chunk)
        if total > limit:
            raise ResponseTooLarge("upstream stream exceeds the size limit")
        yield chunk


# What a stream's end may still read so that its connection goes back to the pool (the closing chunk of a chunked
# body usually follows the last event at once): at most this much, for at most this long, else it is shut down.
FINISH_BYTES = 16 * 1024
FINISH_SECONDS = 0.05


def finish(response: Response, chunks: Iterator[bytes]) -> None:
    """The caller has every event it needs from a streamed body: read the rest of `chunks` (iter_body's) if it is
    here at once, so the connection is kept for the next request instead of being shut down by close(); more
    than FINISH_BYTES or FINISH_SECONDS of it is left to close()."""
    if response.raw.connection is None:  # already read to its end and released
        return
    deadline = time.monotonic() + FINISH_SECONDS
    response.gateway_watch.arm(deadline)  # cuts a read that waits longer
    left = FINISH_BYTES
    try:
        for chunk in chunks:
            left -= len(chunk)
            if left < 0 or time.monotonic() > deadline:
                return
    except TransportError:
        return  # close() shuts it down
    finally:
        response.gateway_watch.disarm()  # a connection back in the pool is no longer this call's to cut


def close(response: Response) -> None:
    """Release a response at once: its deadline, and the connection (shut down while a body is still being
    read, which also wakes a thread blocked reading it)."""
    response.gateway_watch.disarm()
    raw = response.raw
    if raw.connection is not None:
        try:
            raw.shutdown()
        except (ValueError, RuntimeError, OSError):
            pass  # no socket to shut down (released meanwhile, or never had one)
    raw.close()
    raw.release_conn()
