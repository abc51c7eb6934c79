"""The ONE module that makes outbound HTTP calls.

Pooled keep-alive connections, a connect and a read timeout on every call, no redirects, no proxies
or credentials from the environment, and destinations checked at connect time: private, loopback,
link-local and other non-global addresses are refused unless the operator allows them. The address
that was checked is the one connected to (no second DNS lookup), so DNS rebinding cannot slip past.
"""

import ipaddress
import json
import socket
from dataclasses import dataclass
from urllib.parse import urlencode

import requests
from django.conf import settings
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import NewConnectionError
from urllib3.util import connection as urllib3_connection


@dataclass(frozen=True)
class Timeouts:
    connect: float
    read: float  # the longest wait for any byte, first or next


class TransportError(Exception):
    """The call did not produce an HTTP response. `kind`: timeout, connect, refused or protocol."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


class DestinationRefused(NewConnectionError):
    pass


def is_public_address(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def _guarded_socket(conn: HTTPConnection) -> socket.socket:
    host = conn._dns_host
    try:
        infos = socket.getaddrinfo(host, conn.port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise NewConnectionError(conn, f"cannot resolve {host}: {exc}") from exc
    addresses = [info[4][0] for info in infos]
    if not addresses or not all(is_public_address(address) for address in addresses):
        raise DestinationRefused(conn, f"destination {host} is not a public address")
    try:
        return urllib3_connection.create_connection(
            (addresses[0], conn.port), conn.timeout, source_address=conn.source_address,
            socket_options=conn.socket_options,
        )
    except OSError as exc:
        raise NewConnectionError(conn, f"connection to {host} failed: {exc}") from exc


class _GuardedHTTPConnection(HTTPConnection):
    def _new_conn(self) -> socket.socket:
        return _guarded_socket(self)


class _GuardedHTTPSConnection(HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        return _guarded_socket(self)


class _GuardedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _GuardedHTTPConnection


class _GuardedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _GuardedHTTPSConnection


class _GuardedAdapter(HTTPAdapter):
    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _GuardedHTTPPool, "https": _GuardedHTTPSPool}


def _session(adapter: HTTPAdapter) -> requests.Session:
    session = requests.Session()
    session.trust_env = False  # no proxies, netrc or CA overrides from the environment
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


_POOL = {"pool_connections": 64, "pool_maxsize": 1024, "max_retries": 0}
_public_only = _session(_GuardedAdapter(**_POOL))
_any_destination = _session(HTTPAdapter(**_POOL))


def default_timeouts() -> Timeouts:
    return Timeouts(connect=settings.UPSTREAM_CONNECT_TIMEOUT, read=settings.UPSTREAM_READ_TIMEOUT)


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
) -> requests.Response:
    """Send one request. The caller closes the response (always, for streams: in `finally`)."""
    timeouts = timeouts or default_timeouts()
    private_ok = allow_private or settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS
    session = _any_destination if private_ok else _public_only
    data = content
    if json_body is not None:
        data = json.dumps(json_body, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json", **headers}
    elif form_body is not None:
        data = urlencode(form_body).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded", **headers}
    try:
        return session.request(
            method, url, headers=headers, data=data, timeout=(timeouts.connect, timeouts.read), stream=stream,
            allow_redirects=False,
        )
    except requests.exceptions.ConnectionError as exc:
        if _caused_by(exc, DestinationRefused):
            raise TransportError("refused", "destination address is not allowed") from exc
        if isinstance(exc, requests.exceptions.ConnectTimeout):
            raise TransportError("timeout", "connection timed out") from exc
        if _caused_by(exc, TimeoutError) or "Read timed out" in str(exc):
            raise TransportError("timeout", "upstream did not answer in time") from exc
        raise TransportError("connect", "could not connect to upstream") from exc
    except requests.exceptions.Timeout as exc:
        raise TransportError("timeout", "upstream did not answer in time") from exc
    except requests.exceptions.RequestException as exc:
        raise TransportError("protocol", f"upstream request failed: {type(exc).__name__}") from exc


def iter_body(response: requests.Response, chunk_size: int = 16384):
    """The body's bytes as they arrive; transport failures become TransportError."""
    try:
        yield from response.raw.stream(chunk_size, decode_content=True)
    except requests.exceptions.RequestException as exc:
        raise TransportError("protocol", "upstream stream broke") from exc
    except Exception as exc:  # urllib3 ReadTimeoutError, ProtocolError (connection cut mid-body)
        kind = "timeout" if "timed out" in str(exc).lower() else "protocol"
        raise TransportError(kind, "upstream stream broke" if kind == "protocol" else "upstream stalled") from exc


def _caused_by(exc: BaseException, kind: type) -> bool:
    seen = set()
    stack = [exc]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, kind):
            return True
        stack.extend([current.__cause__, current.__context__, getattr(current, "reason", None),
                      *[arg for arg in getattr(current, "args", ()) if isinstance(arg, BaseException)]])
    return False
