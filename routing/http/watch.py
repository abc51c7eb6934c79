"""An outbound call's deadline over the connection it uses, kept by the process's shared deadline watcher
(gateway/deadlines.py): when it passes, the connection's socket is shut down, which wakes a read blocked
inside http.client or urllib3 however they loop (a per-read timeout cannot bound an upstream that trickles).

The connection classes below only learn which call is sending on them (through urllib3's public
`ConnectionCls` hook and the connection's public `request`), so that a deadline cuts only its own call's
connection, never one a later call took from the pool."""

import contextvars
import socket
import threading
import time
from typing import Any

from urllib3.connection import HTTPConnection, HTTPSConnection

from gateway import deadlines

# While the socket is not there yet (connecting: the connect timeout bounds that), a passed deadline looks again
# this often, at most this many times.
RETRY_SECONDS = 0.05
MAX_RETRIES = 400

# Who owns a connection, and what a firing deadline reads of it, change together.
_owners = threading.Lock()


class Watch:
    """One call's deadline. `fired`: it passed (the reader then raises a timeout even if the cut looked like a
    normal end of body)."""

    __slots__ = ("conn", "sock", "handle", "fired", "done", "retries")

    def __init__(self) -> None:
        self.conn: Any = None  # the connection the request went out on
        self.sock: socket.socket | None = None  # its socket (http.client drops conn.sock for `close` answers)
        self.handle: deadlines.Handle | None = None
        self.fired = False
        self.done = False
        self.retries = 0

    def arm(self, deadline: float) -> None:
        """Watch `deadline` instead of the one watched so far."""
        with _owners:
            if self.done:
                return
            if self.handle is not None:
                self.handle.cancel()
            self.handle = deadlines.watch(deadline, self._fire)

    def disarm(self) -> None:
        """The call is over: its deadline no longer applies."""
        with _owners:
            if self.done:
                return
            self.done = True
            if self.handle is not None:
                self.handle.cancel()
                self.handle = None

    def _fire(self) -> None:
        with _owners:
            if self.done:
                return
            conn = self.conn
            if conn is not None and conn.gateway_watch is not self:
                return  # the call finished with this connection and another call uses it now
            self.fired = True
            sock = (conn.sock if conn is not None else None) or self.sock
            if sock is None:
                if self.retries < MAX_RETRIES:
                    self.retries += 1
                    self.handle = deadlines.watch(time.monotonic() + RETRY_SECONDS, self._fire)
                return
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


current: contextvars.ContextVar[Watch | None] = contextvars.ContextVar("upstream_watch", default=None)


class _Watched:
    """Mixed into urllib3's connection classes: the call sending on a connection becomes its owner."""

    gateway_watch: Watch | None = None
    sock: socket.socket | None

    def request(self, *args: Any, **kwargs: Any) -> None:
        watch = current.get()
        with _owners:
            self.gateway_watch = watch
            if watch is not None:
                watch.conn = self
        super().request(*args, **kwargs)  # type: ignore[misc]  # the urllib3 connection's
        if watch is not None:
            watch.sock = self.sock


class WatchedHTTPConnection(_Watched, HTTPConnection):
    pass


class WatchedHTTPSConnection(_Watched, HTTPSConnection):
    pass
