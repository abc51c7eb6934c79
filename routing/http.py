"""The ONE module that makes outbound HTTP calls.

Pooled keep-alive connections, a connect and a read timeout on every call, no redirects, no proxies
or credentials from the environment, and destinations checked at connect time: private, loopback,
link-local and other non-global addresses (also when embedded in an IPv6 address) are refused unless the
operator allows them. The address that was checked is the one connected to (no second DNS lookup), so DNS
rebinding cannot slip past.

Hostile or broken upstreams are bounded too. Every call has deadlines besides the per-read timeout: a
streaming call's response head must arrive within `first_byte` seconds and the whole stream within
`stream_max`; a non-streaming call (head and body) within `total`. A watchdog thread shuts the socket down
when a deadline passes, so an upstream that trickles one byte just under the read timeout is cut on time.
Non-streaming bodies are read incrementally up to a size cap, error bodies up to MAX_ERROR_BODY. Headers are
checked before sending, and anything that fails while sending is a TransportError (an attempt failure), never
an exception the caller does not expect.
"""

import contextvars
import email.parser
import heapq
import http.client
import itertools
import json
import os
import re
import select
import socket
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import ClassVar, cast
from urllib.parse import urlencode

import urllib3
from django.conf import settings
from gevent import monkey
from urllib3._collections import RecentlyUsedContainer
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool, port_by_scheme
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    LocationValueError,
    NewConnectionError,
    ReadTimeoutError,
    URLSchemeUnknown,
)
from urllib3.response import HTTPResponse
from urllib3.util.retry import Retry
from urllib3.util.timeout import _DEFAULT_TIMEOUT
from urllib3.util.url import parse_url

from gateway.netaddr import is_public_address, literal_address
from gateway.renderers import json_compact

MAX_ERROR_BODY = 64 * 1024  # an error body longer than this is cut (its message is all we keep)


@dataclass(frozen=True)
class Timeouts:
    connect: float
    read: float  # the longest wait for any byte, first or next
    # Deadlines from the start of the call (None: the UPSTREAM_* setting).
    first_byte: float | None = None  # streaming calls: until the response head has arrived
    total: float | None = None  # non-streaming calls: head and body
    stream_max: float | None = None  # streaming calls: head and the whole body


class TransportError(Exception):
    """The call did not produce a usable HTTP response; the subclass says how (`kind` names it: timeout,
    connect, refused, protocol, send, too_large). The message never holds request data."""

    kind: ClassVar[str] = "protocol"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class ConnectTimeout(TransportError):
    kind = "timeout"  # no connection within the connect timeout


class ReadTimeout(TransportError):
    kind = "timeout"  # connected, but the answer (or the next bytes) did not come in time, or a deadline passed


class ConnectFailed(TransportError):
    kind = "connect"  # no connection (refused by the peer, unreachable, name not resolved)


class ConnectionRefused(TransportError):
    kind = "refused"  # the destination is not allowed (private network)


class ConnectionReset(TransportError):
    kind = "protocol"  # the connection broke (reset, cut mid-body, malformed HTTP)


class SendFailed(TransportError):
    kind = "send"  # the request could not be sent (a header that cannot be encoded, an invalid URL)


class ResponseTooLarge(TransportError):
    kind = "too_large"  # the body exceeds the cap


class DestinationRefused(NewConnectionError):
    pass


# ---- destinations -----------------------------------------------------------------------------------------


def _guarded_socket(conn: HTTPConnection) -> socket.socket:
    host = conn._dns_host
    literal = _plain_literal(host)
    if literal is not None:
        addresses = [literal]
    else:
        try:
            infos = socket.getaddrinfo(host, conn.port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise NewConnectionError(conn, f"cannot resolve {host}: {exc}") from exc
        addresses = [str(info[4][0]) for info in infos]
    if not addresses or not all(is_public_address(address) for address in addresses):
        raise DestinationRefused(conn, f"destination {host} is not a public address")
    last_error: OSError | None = None
    # The checked addresses in turn (one may be down, or IPv6 unrouted); at most 3, each within the connect timeout.
    for address in list(dict.fromkeys(addresses))[:3]:
        try:
            return _connect(address, conn)
        except OSError as exc:
            last_error = exc
    raise NewConnectionError(conn, f"connection to {host} failed: {last_error}") from last_error


def _plain_literal(host: str) -> str | None:
    """The address a host names literally (in any spelling), unless it carries an IPv6 zone (left to the resolver)."""
    return None if "%" in host else literal_address(host)


def _connect(address: str, conn: HTTPConnection) -> socket.socket:
    """A TCP connection to an IP address (literal, or resolved and checked), made as urllib3 makes one but without
    asking the resolver again: under gevent every resolver call is a hand-off to its thread pool, and a burst of
    streams opens hundreds of upstream connections at once."""
    sock = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM)
    try:
        for option in conn.socket_options or ():
            sock.setsockopt(*option)
        if conn.timeout is not _DEFAULT_TIMEOUT:
            sock.settimeout(conn.timeout)
        if conn.source_address:
            sock.bind(conn.source_address)
        sock.connect((address, conn.port))
    except BaseException:
        sock.close()
        raise
    return sock


def _literal_socket(conn: HTTPConnection) -> socket.socket:
    """urllib3's own connection for a host name, a direct one for an address (no resolver), with urllib3's errors."""
    address = _plain_literal(conn._dns_host)
    if address is None:
        return HTTPConnection._new_conn(conn)
    try:
        sock = _connect(address, conn)
    except TimeoutError as exc:
        message = f"Connection to {conn.host} timed out. (connect timeout={conn.timeout})"
        raise ConnectTimeoutError(conn, message) from exc
    except OSError as exc:
        raise NewConnectionError(conn, f"Failed to establish a new connection: {exc}") from exc
    sys.audit("http.client.connect", conn, conn.host, conn.port)
    return sock


# ---- response heads -----------------------------------------------------------------------------------------

# A field name, its value: no folding, nothing odd (no character the parser's line splitting breaks a line at).
_HEADER_LINE = re.compile(rb"([!-9;-~]+):[ \t]*([^\r\n\x0b\x0c\x1c-\x1e\x85]*)\r?\n")
_HEAD_ENDS = (b"\r\n", b"\n", b"")  # the line _read_headers stops at (included in what it returns)


def _fast_parse_headers(fp, _class=http.client.HTTPMessage):
    """http.client.parse_headers (every response head, urllib3's too), the same message built without the email
    package's feed parser when each line is a plain `Name: value` (a fifth of a small upstream call's CPU went to
    the parser). Anything else (a folded line, a name the parser reads differently, an unusual head) is left to
    the standard parser, which gives the same message for plain lines (tests/routing/test_http_heads.py)."""
    lines = http.client._read_headers(fp)  # type: ignore[attr-defined]  # the stdlib's own reader and limits
    if _class is http.client.HTTPMessage and lines[-1] in _HEAD_ENDS:  # (the reader stops there; checked anyway)
        fields = []
        for line in lines[:-1]:
            match = _HEADER_LINE.fullmatch(line)
            if match is None or line.startswith(b"From "):
                break
            fields.append((match[1].decode("iso-8859-1"), match[2].decode("iso-8859-1")))
        else:
            message = _class()
            message._headers = fields  # type: ignore[attr-defined]  # what the parser's compat32 policy stores for them
            message._payload = ""  # type: ignore[attr-defined]  # the parser's empty body
            return message
    return email.parser.Parser(_class=_class).parsestr(b"".join(lines).decode("iso-8859-1"))


if hasattr(http.client, "_read_headers"):  # the stdlib's reader this builds on (every CPython 3 so far)
    http.client.parse_headers = _fast_parse_headers


# ---- deadlines --------------------------------------------------------------------------------------------


class _Watch:
    """One call's deadline over the connection it uses. `fired`: the deadline passed (the reader then raises a
    timeout even if the cut looked like a normal end of body)."""

    __slots__ = ("conn", "sock", "token", "fired", "done", "retries")

    def __init__(self):
        self.conn = None
        self.sock = None  # the socket the request went out on (http.client drops conn.sock for `close` answers)
        self.token = 0
        self.fired = False
        self.done = False
        self.retries = 0


class _Watchdog:
    """A single thread that shuts down the socket of any call whose deadline passed: cheap per call (a heap
    entry), and it interrupts reads blocked inside http.client or urllib3 however they loop."""

    def __init__(self):
        self._reset()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._reset)  # the thread and its lock do not survive a fork

    def _reset(self):
        self._cond = threading.Condition()
        self._heap: list = []
        self._dead = 0
        self._seq = itertools.count()
        self._thread = None

    def arm(self, watch: _Watch, deadline: float) -> None:
        with self._cond:
            if watch.done:
                return
            if watch.token:
                self._dead += 1  # the previous entry is stale
            watch.token = next(self._seq) + 1
            heapq.heappush(self._heap, (deadline, watch.token, watch))
            # Under gevent is_alive() also yields to the hub (two greenlet switches) just before the request goes
            # out: keep it, a 1,000-stream burst costs about a tenth more CPU per stream without it (measured).
            if self._thread is None or not self._thread.is_alive():
                thread = threading.Thread(target=self._run, name="upstream-deadlines", daemon=True)
                thread.start()  # (if it cannot start, the next arm tries again)
                self._thread = thread
            elif self._heap[0][2] is watch:
                self._cond.notify()

    def disarm(self, watch: _Watch) -> None:
        with self._cond:
            if watch.done:
                return
            watch.done = True
            self._dead += 1
            if self._dead > 1024 and self._dead * 2 > len(self._heap):
                self._heap = [entry for entry in self._heap if self._live(entry)]
                heapq.heapify(self._heap)
                self._dead = 0

    def own(self, conn, watch: _Watch | None) -> None:
        """`conn` is about to send `watch`'s request: from now on only that call's deadline may cut it."""
        with self._cond:
            conn._gateway_watch = watch
            if watch is not None:
                watch.conn = conn

    @staticmethod
    def _live(entry) -> bool:
        _, token, watch = entry
        return not watch.done and watch.token == token

    def _run(self) -> None:
        cond = self._cond
        with cond:
            while True:
                while self._heap and not self._live(self._heap[0]):
                    heapq.heappop(self._heap)
                    self._dead = max(0, self._dead - 1)
                if not self._heap:
                    cond.wait()
                    continue
                deadline = self._heap[0][0]
                now = time.monotonic()
                if deadline > now:
                    # a deadline set absurdly far (a setting meaning "never") would overflow the wait
                    cond.wait(min(deadline - now, threading.TIMEOUT_MAX))
                    continue
                _, _, watch = heapq.heappop(self._heap)
                self._fire(watch)

    def _fire(self, watch: _Watch) -> None:
        conn = watch.conn
        if conn is not None and getattr(conn, "_gateway_watch", None) is not watch:
            return  # the call finished with this connection and another call uses it now
        watch.fired = True
        sock = (getattr(conn, "sock", None) if conn is not None else None) or watch.sock
        if sock is None:
            # Not connected yet (the connect timeout bounds that): look again shortly.
            if watch.retries < 400:
                watch.retries += 1
                watch.token = next(self._seq) + 1
                heapq.heappush(self._heap, (time.monotonic() + 0.05, watch.token, watch))
            return
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


WATCHDOG = _Watchdog()
_current_watch: contextvars.ContextVar[_Watch | None] = contextvars.ContextVar("upstream_watch", default=None)


# A body up to this size goes out in the same send as the request head (urllib3 sends them apart: two segments
# and two wake-ups of the peer, a tenth of a small call's CPU); a larger one is not copied to be joined.
JOINED_BODY_MAX = 256 * 1024


# The system's poll, also in a gevent worker (where select.poll is gevent's: a watcher, a timeout and a switch to the
# hub, for a question the kernel answers at once).
_system_poll = monkey.get_original("select", "poll")


def _kept_alive(conn: HTTPConnection) -> bool:
    """urllib3's `is_connected` (asked before a pooled connection is reused: connected, and nothing to read, so the
    peer has not closed it) with one poll system call instead of gevent's poll."""
    sock = conn.sock
    if sock is None or sock.fileno() < 0:
        return False
    poller = _system_poll()
    poller.register(sock.fileno(), select.POLLIN)
    return not poller.poll(0)


class _WatchedHTTPConnection(HTTPConnection):
    _gateway_body: bytes | None = None  # the body `send` appends to the request head
    is_connected = property(_kept_alive)

    def request(self, method, url, body=None, headers=None, **kwargs):
        watch = _current_watch.get()
        WATCHDOG.own(self, watch)
        if (
            isinstance(body, bytes)
            and 0 < len(body) <= JOINED_BODY_MAX
            and headers is not None
            and not _framed(headers)
        ):
            headers = {"Content-Length": str(len(body)), **headers}  # where urllib3 puts it
            self._gateway_body, body = body, None
        try:
            result = super().request(method, url, body=body, headers=headers, **kwargs)
        finally:
            self._gateway_body = None
        if watch is not None:
            watch.sock = self.sock
        return result

    def send(self, data) -> None:
        body = self._gateway_body
        if body is not None:  # the request head: the body goes with it
            self._gateway_body = None
            data = data + body
        super().send(data)

    def _new_conn(self) -> socket.socket:
        return _literal_socket(self)


class _WatchedHTTPSConnection(HTTPSConnection):
    _gateway_body: bytes | None = None
    is_connected = property(_kept_alive)
    request = _WatchedHTTPConnection.request
    send = _WatchedHTTPConnection.send
    _new_conn = _WatchedHTTPConnection._new_conn


def _framed(headers) -> bool:
    return any(name.lower() in ("content-length", "transfer-encoding") for name in headers)


class _GuardedHTTPConnection(_WatchedHTTPConnection):
    def _new_conn(self) -> socket.socket:
        return _guarded_socket(self)


class _GuardedHTTPSConnection(_WatchedHTTPSConnection):
    def _new_conn(self) -> socket.socket:
        return _guarded_socket(self)


def _pool(base, connection_cls):
    return type(f"_{connection_cls.__name__}Pool", (base,), {"ConnectionCls": connection_cls})


class _Pools:
    """Keep-alive connection pools of one address policy, one per destination (scheme, host, port; every pool of
    a scheme has the same TLS settings), at most MAX_POOLS (the least recently used one is closed). What urllib3's
    PoolManager did, without its per-call URL parsing and pool-key building (a tenth of a small call's CPU): a
    URL's destination is remembered (urllib3's parse, once per URL)."""

    MAX_POOLS = 64

    def __init__(self, *, guarded: bool):
        plain, tls = (
            (_GuardedHTTPConnection, _GuardedHTTPSConnection)
            if guarded
            else (_WatchedHTTPConnection, _WatchedHTTPSConnection)
        )
        self._classes = {"http": _pool(HTTPConnectionPool, plain), "https": _pool(HTTPSConnectionPool, tls)}
        self._pools: RecentlyUsedContainer = RecentlyUsedContainer(self.MAX_POOLS, dispose_func=lambda p: p.close())

    def pool(self, destination: tuple[str, str, int]) -> HTTPConnectionPool:
        pool = self._pools.get(destination)
        if pool is None:
            with self._pools.lock:
                pool = self._pools.get(destination)
                if pool is None:
                    scheme, host, port = destination
                    pool = self._classes[scheme](host, port, maxsize=1024, block=False, retries=False)
                    self._pools[destination] = pool
        return pool

    def clear(self) -> None:
        """Close every pool (connections in use are closed when released)."""
        self._pools.clear()


_public_only = _Pools(guarded=True)
_any_destination = _Pools(guarded=False)
_NO_RETRIES = Retry(False, redirect=False)  # what urllib3 makes of retries=False, redirect=False on every call
_TIMEOUTS: dict[tuple[float, float], urllib3.Timeout] = {}  # (connect, read) -> its Timeout (urllib3 copies it)
_DESTINATIONS: dict[str, tuple[tuple[str, str, int], str]] = {}  # URL -> (scheme, host, port), request target
_MAX_REMEMBERED = 1024


def _destination(url: str) -> tuple[tuple[str, str, int], str]:
    """The pool key and request target of `url`, as urllib3's PoolManager read them (remembered per URL)."""
    known = _DESTINATIONS.get(url)
    if known is not None:
        return known
    parts = parse_url(url)  # LocationValueError when invalid
    if parts.scheme is None:
        warnings.warn("URLs without a scheme are deprecated (urllib3 2)", category=FutureWarning, stacklevel=3)
    scheme = (parts.scheme or "http").lower()
    if not parts.host:
        raise LocationValueError("No host specified.")
    if scheme not in port_by_scheme:
        raise URLSchemeUnknown(scheme)
    port = parts.port if parts.port is not None else port_by_scheme[scheme]
    known = ((scheme, parts.host.lower(), port), parts.request_uri)
    if "?" not in url and "@" not in url:  # a query or user info may hold a credential: not kept
        if len(_DESTINATIONS) >= _MAX_REMEMBERED:
            _DESTINATIONS.clear()
        _DESTINATIONS[url] = known
    return known


def _timeout(connect: float, read: float) -> urllib3.Timeout:
    timeout = _TIMEOUTS.get((connect, read))
    if timeout is None:
        if len(_TIMEOUTS) >= _MAX_REMEMBERED:
            _TIMEOUTS.clear()
        timeout = _TIMEOUTS[(connect, read)] = urllib3.Timeout(connect=connect, read=read)
    return timeout


# Sent unless the caller sets them (what `requests` sent: some providers compress large answers).
_DEFAULT_HEADERS = {"User-Agent": "model-gateway", "Accept-Encoding": "gzip, deflate", "Accept": "*/*"}


class Response:
    """An upstream's answer: status, headers, and `content` (read whole unless streaming: then read `raw` with
    iter_body, and always `close()` it)."""

    __slots__ = ("status_code", "headers", "raw", "content", "gateway_watch")

    def __init__(self, raw: HTTPResponse, watch: "_Watch"):
        self.raw = raw
        self.status_code = raw.status
        self.headers = raw.headers  # case-insensitive
        self.content = b""
        self.gateway_watch = watch

    def json(self):
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

_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_UNSENDABLE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]|[^\x00-\xff]")  # controls (HTAB is allowed) and non-Latin-1


def _check_headers(headers: dict) -> None:
    """Refuse what http.client would choke on or pass through (NUL, CR/LF, other controls, non-Latin-1)."""
    for name, value in headers.items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise SendFailed("a request header name cannot be sent")
        if not isinstance(value, str | bytes) or _UNSENDABLE.search(
            value if isinstance(value, str) else value.decode("latin-1")
        ):
            raise SendFailed(f"the {name} header holds characters that cannot be sent")


def request(
    method: str,
    url: str,
    *,
    headers: dict[str, str],
    json_body: dict | None = None,
    form_body: dict | None = None,
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
    private_ok = allow_private or settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS
    pools = _any_destination if private_ok else _public_only
    data = content
    if json_body is not None:
        data = json_compact(json_body)  # a non-finite number (a replayed tool call's arguments) goes as null
        headers = {"Content-Type": "application/json", **headers}
    elif form_body is not None:
        data = urlencode(form_body).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded", **headers}
    headers = {**_DEFAULT_HEADERS, **headers} if not _has_defaults(headers) else headers
    _check_headers(headers)
    started = time.monotonic()
    watch = _Watch()
    head_deadline = started + _seconds(timeouts.first_byte if stream else timeouts.total)
    WATCHDOG.arm(watch, head_deadline)
    context = _current_watch.set(watch)
    try:
        destination, target = _destination(url)
        raw = pools.pool(destination).urlopen(
            method,
            target,
            body=data,
            headers=headers,
            timeout=_timeout(timeouts.connect, timeouts.read),
            retries=_NO_RETRIES,
            redirect=False,
            assert_same_host=False,
            preload_content=False,
        )
    except BaseException as exc:
        WATCHDOG.disarm(watch)
        if isinstance(exc, Exception):
            raise _send_failure(exc, watch) from (None if _may_echo_request(exc) else exc)
        raise
    finally:
        _current_watch.reset(context)
    response = Response(cast(HTTPResponse, raw), watch)  # what urlopen returns (typed as its base class)
    try:
        if not 200 <= response.status_code < 300:
            WATCHDOG.arm(watch, max(head_deadline, time.monotonic() + timeouts.read))
            _read_body(response, MAX_ERROR_BODY, truncate=True)
        elif not stream:
            _read_body(response, max_body or settings.UPSTREAM_MAX_RESPONSE_BYTES, truncate=False)
        else:
            WATCHDOG.arm(watch, started + _seconds(timeouts.stream_max))
            return response
    except BaseException:
        close(response)
        raise
    WATCHDOG.disarm(watch)
    return response


TIMEOUTS = (TimeoutError, ReadTimeoutError)  # socket.timeout is TimeoutError


def _has_defaults(headers: dict) -> bool:
    names = {name.lower() for name in headers}
    return all(name.lower() in names for name in _DEFAULT_HEADERS)


def _may_echo_request(exc: Exception) -> bool:
    """Exceptions whose text can quote a header value (a credential): their chain is dropped."""
    return isinstance(exc, UnicodeError | ValueError) or not isinstance(exc, HTTPError)


def _send_failure(exc: Exception, watch: _Watch) -> TransportError:
    if isinstance(exc, TransportError):
        return exc
    if watch.fired:
        return ReadTimeout("upstream exceeded its deadline")
    if isinstance(exc, LocationValueError):  # an invalid URL or unknown scheme
        return SendFailed(f"the request could not be sent ({type(exc).__name__})")
    if _caused_by(exc, DestinationRefused):
        return ConnectionRefused("destination address is not allowed")
    if isinstance(exc, NewConnectionError):  # (a subclass of ConnectTimeoutError in urllib3 2)
        if _caused_by(exc.__cause__, TimeoutError) if exc.__cause__ else False:
            return ConnectTimeout("connection timed out")
        return ConnectFailed("could not connect to upstream")
    if isinstance(exc, ConnectTimeoutError):
        return ConnectTimeout("connection timed out")
    if _caused_by(exc, TIMEOUTS):
        return ReadTimeout("upstream did not answer in time")
    if isinstance(exc, HTTPError | ConnectionError):  # reset, cut, malformed HTTP, TLS failure
        return ConnectionReset(f"upstream request failed: {type(exc).__name__}")
    # UnicodeEncodeError (a non-Latin-1 header), ValueError (invalid header characters), or anything else raised
    # while sending: the attempt failed; the next candidate may serve.
    return SendFailed(f"the request could not be sent ({type(exc).__name__})")


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


def iter_body(response: Response, chunk_size: int = 16384, *, limit: int | None = None) -> Iterator[bytes]:
    """The body's bytes as they arrive (each read returns what one receive brought, so events are not held
    back waiting for a full chunk); transport failures and passed deadlines become TransportError. With
    `limit`, more than that many bytes fail the read (as at_most)."""
    watch = getattr(response, "gateway_watch", None)
    raw = response.raw
    if raw.chunked and raw.supports_chunked_reads() and _unencoded(raw):  # the usual stream
        return _dechunked(raw, watch, max(chunk_size, 65536), limit)
    chunks = _body_chunks(raw, watch, chunk_size)
    return chunks if limit is None else at_most(chunks, limit)


def _body_chunks(raw: HTTPResponse, watch: "_Watch | None", chunk_size: int) -> Iterator[bytes]:
    try:
        if raw.chunked and raw.supports_chunked_reads():
            for data in raw.read_chunked(chunk_size, decode_content=True):
                # The deadline is checked per chunk too: a compressed body already received (a gzip bomb)
                # keeps decoding after the watchdog shut the socket down.
                if watch is not None and watch.fired:
                    raise ReadTimeout("upstream exceeded its deadline")
                yield data
        else:
            empty = 0
            while empty < 3:  # read1 returns b"" at the end of the body (and closes it)
                if watch is not None and watch.fired:
                    raise ReadTimeout("upstream exceeded its deadline")
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
        raise _read_failure(exc, watch) from exc
    if watch is not None and watch.fired:
        raise ReadTimeout("upstream exceeded its deadline")


MAX_CHUNK_LINE = 2**16  # a chunk's size line or a trailer line longer than this is a broken stream (as urllib3)
_SIZE, _TRAILER = -1, -2  # what _dechunked expects next when it is not inside a chunk's data


def _unencoded(raw: HTTPResponse) -> bool:
    """A chunked body with no content coding, not read yet: _dechunked can take it from urllib3."""
    fp = getattr(raw, "_fp", None)
    return (
        raw.headers.get("content-encoding", "identity").strip().lower() in ("", "identity")
        and raw.chunk_left is None
        and getattr(fp, "fp", None) is not None
    )


def _one_chunk(data: bytes) -> bytes | None:
    """The data of `data` when it is exactly one whole non-empty chunk (its size line, data and CRLF), else None."""
    newline = data.find(b"\n", 0, MAX_CHUNK_LINE + 1)
    if newline == -1:
        return None
    try:
        size = int(data[:newline].split(b";", 1)[0], 16)
    except ValueError:
        return None  # the general path says what is wrong with it
    if size <= 0 or len(data) != newline + size + 3:
        return None
    return data[newline + 1 : newline + 1 + size]


def _dechunked(raw: HTTPResponse, watch: _Watch | None, size: int, limit: int | None) -> Iterator[bytes]:
    """A chunked body's data, what each receive completed as one piece (several chunks, or part of one): urllib3
    reads a chunk with four buffered reads and as many Python calls, which a stream of small events pays per
    event. Framing as urllib3 reads it (a size line to LF, extensions ignored, 2 bytes after the data, trailer
    lines up to CRLF); at the end the connection goes back to the pool, as urllib3 does. More than `limit`
    bytes of data fail (ResponseTooLarge)."""
    original = raw._fp
    assert original is not None and original.fp is not None  # checked by _unencoded
    read = original.fp.read1  # what the head's read left buffered, then one receive per call
    buffer = bytearray()
    left = _SIZE  # bytes of the current chunk's data still to come, or _SIZE / _TRAILER
    skip = 0  # bytes after a chunk's data (its CRLF) still to drop
    allowed = limit if limit is not None else -1
    while True:
        try:
            data = read(size)
        except Exception as exc:  # a socket timeout, a reset
            raise _read_failure(exc, watch) from exc
        if watch is not None and watch.fired:
            raise ReadTimeout("upstream exceeded its deadline")
        if not data:
            if left != _TRAILER:
                raise ConnectionReset("upstream stream broke")  # the body ended before its last chunk
            data = b"\r\n"  # the last chunk came and no trailer end (as urllib3: some servers omit it)
        elif left == _SIZE and not buffer:  # the usual read: whole chunks, one event each
            piece = _one_chunk(data)
            if piece is not None:
                if allowed >= 0:
                    allowed -= len(piece)
                    if allowed < 0:
                        raise ResponseTooLarge("upstream stream exceeds the size limit")
                yield piece
                continue
        buffer += data
        pieces = []
        position, end = 0, len(buffer)
        while position < end:
            if skip:
                dropped = min(skip, end - position)
                position += dropped
                skip -= dropped
            elif left > 0:
                taken = min(left, end - position)
                pieces.append(bytes(buffer[position : position + taken]))
                position += taken
                left -= taken
                if not left:
                    left, skip = _SIZE, 2
            else:
                newline = buffer.find(b"\n", position, position + MAX_CHUNK_LINE + 1)
                if newline == -1:
                    if end - position > MAX_CHUNK_LINE:
                        raise ConnectionReset("upstream stream broke")
                    break
                line = bytes(buffer[position : newline + 1])
                position = newline + 1
                if left == _TRAILER:
                    if line == b"\r\n":  # the end of the body
                        del buffer[:position]
                        if pieces:
                            piece = b"".join(pieces)
                            if 0 <= allowed < len(piece):
                                raise ResponseTooLarge("upstream stream exceeds the size limit")
                            yield piece
                        original.close()
                        if original.isclosed():
                            raw.release_conn()
                        return
                    continue
                try:
                    left = int(line.split(b";", 1)[0], 16)
                except ValueError:
                    raise ConnectionReset("upstream stream broke") from None
                if left < 0:
                    raise ConnectionReset("upstream stream broke")
                if not left:
                    left = _TRAILER
        del buffer[:position]
        if pieces:
            piece = pieces[0] if len(pieces) == 1 else b"".join(pieces)
            if allowed >= 0:
                allowed -= len(piece)
                if allowed < 0:
                    raise ResponseTooLarge("upstream stream exceeds the size limit")
            yield piece


def _read_failure(exc: Exception, watch: _Watch | None) -> TransportError:
    if watch is not None and watch.fired:
        return ReadTimeout("upstream exceeded its deadline")
    if _caused_by(exc, TIMEOUTS):
        return ReadTimeout("upstream stalled")
    return ConnectionReset("upstream stream broke")


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
    connection = getattr(response.raw, "_connection", None)
    sock = getattr(connection, "sock", None)
    if sock is None:  # already read to its end and released
        return
    deadline = time.monotonic() + FINISH_SECONDS
    left = FINISH_BYTES
    try:
        sock.settimeout(FINISH_SECONDS)
        for chunk in chunks:
            left -= len(chunk)
            if left < 0 or time.monotonic() > deadline:
                return
    except (TransportError, OSError):
        return  # close() shuts it down


def close(response: Response) -> None:
    """Release a response at once: its deadline, and the connection (shut down while a body is still being
    read, which also wakes a thread blocked reading it)."""
    watch = getattr(response, "gateway_watch", None)
    if watch is not None:
        WATCHDOG.disarm(watch)
    raw = response.raw
    connection = getattr(raw, "_connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    raw.close()
    raw.release_conn()


def _caused_by(exc: BaseException, kind: type | tuple[type, ...]) -> bool:
    seen = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, kind):
            return True
        reason = getattr(current, "reason", None)  # urllib3's wrapped error (a UnicodeError's is a string)
        stack.extend(
            [
                current.__cause__,
                current.__context__,
                reason if isinstance(reason, BaseException) else None,
                *[arg for arg in getattr(current, "args", ()) if isinstance(arg, BaseException)],
            ]
        )
    return False
