"""Where an outbound call goes, and over which kept-alive connections.

A URL's host is resolved here, every address it resolves to is checked against the address policy
(gateway/netaddr.py: private, loopback, link-local and other non-global addresses, also when embedded in an
IPv6 address, are refused unless allowed), and the call connects to a checked address: urllib3's pool for that
address (its public `HTTPConnectionPool(host=address)`, for TLS with `server_hostname` and `assert_hostname`
the URL's host) and the URL's host in the Host header. urllib3 is never handed the name, so it never looks it
up a second time: DNS rebinding cannot slip past the check."""

import socket
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from urllib3 import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import LocationValueError
from urllib3.util import parse_url

from gateway.netaddr import is_public_address, literal_address
from routing.http.errors import ConnectFailed, ConnectionRefused, SendFailed
from routing.http.watch import WatchedHTTPConnection, WatchedHTTPSConnection

DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_ADDRESSES = 3  # a host's checked addresses tried in turn (one may be down, or IPv6 unrouted)

# A host name's addresses are looked up again after this long: under gevent every resolver call is a hand-off
# to its thread pool, and a burst of calls to one provider would ask for the same name hundreds of times. What is
# kept is only what was resolved; every call checks it against its own policy.
RESOLVED_SECONDS = 10.0
MAX_RESOLVED = 256


@dataclass(frozen=True, slots=True)
class Target:
    scheme: str  # http or https
    host: str  # as the URL names it, lower case (an IPv6 address without brackets)
    port: int
    path: str  # the request target: path and query
    host_header: str


def target(url: str) -> Target:
    """The parts of `url` a call needs; SendFailed when it is not an http(s) URL with a host."""
    try:
        parts = parse_url(url)
    except LocationValueError:
        raise SendFailed("the request could not be sent (an invalid URL)") from None
    scheme = (parts.scheme or "").lower()
    if scheme not in DEFAULT_PORTS or not parts.host:
        raise SendFailed("the request could not be sent (an invalid URL)")
    named = parts.host.lower()
    port = parts.port if parts.port is not None else DEFAULT_PORTS[scheme]
    host_header = named if port == DEFAULT_PORTS[scheme] else f"{named}:{port}"
    host = named[1:-1] if named.startswith("[") else named
    return Target(scheme, host, port, parts.request_uri, host_header)


def addresses(host: str, port: int, *, private_ok: bool) -> list[str]:
    """The addresses to connect to for `host`, all checked (ConnectionRefused if any is not allowed: a name that
    resolves to a private address among public ones is not a public destination)."""
    literal = None if "%" in host else literal_address(host)  # an IPv6 zone is left to the resolver
    found = (literal,) if literal is not None else _resolve(host, port)
    if not found or not (private_ok or all(is_public_address(address) for address in found)):
        raise ConnectionRefused("destination address is not allowed")
    return list(dict.fromkeys(found))[:MAX_ADDRESSES]


_resolved: dict[str, tuple[float, tuple[str, ...]]] = {}


def _resolve(host: str, port: int) -> tuple[str, ...]:
    now = time.monotonic()
    known = _resolved.get(host)
    if known is not None and known[0] > now:
        return known[1]
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise ConnectFailed("could not connect to upstream") from None  # the name did not resolve
    found = tuple(str(info[4][0]) for info in infos)
    if len(_resolved) >= MAX_RESOLVED:
        _resolved.clear()
    _resolved[host] = (now + RESOLVED_SECONDS, found)
    return found


def forget_resolved() -> None:
    """Look every host name up again on its next call (tests that change the resolver)."""
    _resolved.clear()


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = WatchedHTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = WatchedHTTPSConnection


class Pools:
    """Keep-alive connection pools, one per destination and address (scheme, host as named, port, address: a
    TLS pool verifies the name it was made for), at most MAX_POOLS (the least recently used one is closed)."""

    MAX_POOLS = 64
    MAX_CONNECTIONS = 1024  # kept per pool (more may be open at once; those are closed when released)

    def __init__(self) -> None:
        self._pools: OrderedDict[tuple[str, str, int, str], HTTPConnectionPool] = OrderedDict()
        self._lock = threading.Lock()

    def pool(self, to: Target, address: str) -> HTTPConnectionPool:
        key = (to.scheme, to.host, to.port, address)
        evicted = None
        with self._lock:
            pool = self._pools.get(key)
            if pool is not None:
                self._pools.move_to_end(key)
                return pool
            pool = self._pools[key] = self._made(to, address)
            if len(self._pools) > self.MAX_POOLS:
                evicted = self._pools.popitem(last=False)[1]
        if evicted is not None:
            evicted.close()  # its connections in use are closed when released
        return pool

    def _made(self, to: Target, address: str) -> HTTPConnectionPool:
        if to.scheme == "http":
            return _HTTPPool(address, to.port, maxsize=self.MAX_CONNECTIONS, block=False, retries=False)
        name = address if literal_address(to.host) is not None else to.host
        return _HTTPSPool(
            address,
            to.port,
            maxsize=self.MAX_CONNECTIONS,
            block=False,
            retries=False,
            server_hostname=name,
            assert_hostname=name,
        )

    def clear(self) -> None:
        """Close every pool (connections in use are closed when released)."""
        with self._lock:
            pools = list(self._pools.values())
            self._pools.clear()
        for pool in pools:
            pool.close()


POOLS = Pools()
