"""How psycopg waits for its socket in a gevent worker: one libev watcher per wait instead of gevent's `select.poll`.

psycopg runs every query as a generator that says what it waits for (read, write), and a wait function that
blocks until the socket is ready. Under gevent's patching psycopg picks its `wait_poll` (its C wait would block
the worker's one thread), which goes through gevent's emulation of `poll`: a poll object, a timer for psycopg's
0.1 s wake-up interval, a watcher per descriptor and a result set per call, an eighth of a database statement's
CPU. `wait_gevent` asks the system's poll whether the socket is ready now, and when it is not, parks the greenlet
on one watcher until it is (nothing wakes it every 0.1 s: that interval exists to let a blocked main thread see
Ctrl-C). A call with a `timeout` (psycopg's own deadlines, on rarer paths) is left to the wait it replaced.

A statement's wait has a deadline of its own (`install(statement_deadline=...)`: the server's statement_timeout plus
a grace). The server's timeout cannot fire when the server is frozen (a paused process, a stalled host or network:
the kernel still acknowledges what is sent, so no TCP timeout fires either), and the request would wait for it for
as long as it stays frozen. Past the deadline the wait raises psycopg.OperationalError (Django's OperationalError:
503, as for any database outage) and shuts the socket down: the connection is left in the middle of an exchange,
so it must never be used again (the pool closes a connection handed back ACTIVE; the shutdown makes sure whatever
holds it next fails at once rather than waiting on it). The deadline costs one libev timer per blocking wait, started
only when the socket is not ready at once, in the same waiter as the socket's watcher (gevent's documented `Waiter`
use), no gevent.Timeout and no exception unless it fires: measured, 5,600 more instructions a blocking wait (14,100
without a deadline; 31,600 with a gevent.Timeout), 0.5-0.9 us of CPU, a few per cent of the smallest statement.
Whether the server ran the statement is then unknown: the callers that must know (a hold, a settlement) close the
hold again once the database answers (billing.settle_retry).

psycopg (3.3) waits cooperatively under gevent by itself (`wait_poll`), but gives a query's wait no deadline, and
nothing public does: statement_timeout is the frozen server's to enforce, connect_timeout covers only connecting, and
TCP's timeouts see the frozen server's kernel acknowledging. Hence this wait, the one patch left on psycopg.

`install()` puts it in place when gevent has patched `select` (gunicorn's gevent worker does before the
application is imported); otherwise psycopg's choice stands."""

import os
import select
import socket
import sys
import time
from collections.abc import Generator
from typing import Any

import psycopg
from psycopg import waiting

POLL_MASKS = {1: select.POLLIN, 2: select.POLLOUT, 3: select.POLLIN | select.POLLOUT}  # psycopg's Wait R, W, RW
BROKEN = select.POLLERR | select.POLLHUP


def wait_gevent(gen: Generator[Any, Any, Any], fileno: int, interval: float = 0.0, timeout: float | None = None) -> Any:
    """psycopg's `wait(gen, fileno, interval, timeout)`: run `gen` to its end, answering each wait it yields (a
    Wait) with what the socket is ready for (a Ready: 1 read, 2 write, the same bits)."""
    if timeout is not None:
        return _fallback(gen, fileno, interval=interval, timeout=timeout)
    hub = _get_hub()
    poller = _system_poll()
    deadline = None  # set at the first wait that blocks: a statement answered at once never reads the clock
    try:
        state = next(gen)
        poller.register(fileno, POLL_MASKS[state])
        while True:
            found = poller.poll(0)
            if not found:
                if _statement_deadline is None:
                    watcher = hub.loop.io(fileno, int(state))  # psycopg's bits are libev's READ (1) and WRITE (2)
                    try:
                        hub.wait(watcher)
                    finally:
                        watcher.close()
                    continue
                if deadline is None:
                    deadline = time.monotonic() + _statement_deadline
                _wait_until(hub, fileno, int(state), deadline)
                continue
            events = found[0][1]
            if events & select.POLLNVAL:
                raise psycopg.OperationalError("connection socket closed")
            if events & BROKEN:
                ready = state  # an error or a hang-up: libpq finds out which by reading or writing
            else:
                ready = (1 if events & select.POLLIN else 0) | (2 if events & select.POLLOUT else 0)
            state = gen.send(ready)
            poller.modify(fileno, POLL_MASKS[state])
    except StopIteration as done:
        return done.value


def _wait_until(hub: Any, fileno: int, state: int, deadline: float) -> None:
    """Park the greenlet until the socket is ready for `state`, or raise OperationalError at `deadline` (a
    monotonic time) with the connection's socket shut down."""
    waiter = _Waiter(hub)
    watcher = hub.loop.io(fileno, state)
    timer = hub.loop.timer(max(0.0, deadline - time.monotonic()))
    watcher.start(waiter.switch, _READY)
    timer.start(waiter.switch, _EXPIRED)
    try:
        woke = waiter.get()
    finally:
        watcher.close()
        timer.close()
    if woke is _EXPIRED:
        _shut_down(fileno)
        raise psycopg.OperationalError(
            f"the database did not answer within {_statement_deadline:g} s (the statement deadline): connection closed"
        )


def _shut_down(fileno: int) -> None:
    """End the connection's TCP (or Unix socket) exchange without closing libpq's descriptor (it closes it when
    the connection is closed): on a duplicate, since a socket object closes the descriptor it is given."""
    try:
        with socket.socket(fileno=os.dup(fileno)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already shut or gone: as unusable either way


_READY, _EXPIRED = object(), object()
_fallback = waiting.wait
_system_poll = select.poll
_get_hub: Any = None  # gevent's, set by install()
_Waiter: Any = None  # gevent.hub.Waiter, set by install()
_statement_deadline: float | None = None  # seconds a statement's wait may last (None: no deadline), install() sets


def install(*, statement_deadline: float | None = None) -> bool:
    """Use `wait_gevent` for psycopg's queries when gevent patched `select`; True when it did. A statement whose
    wait lasts `statement_deadline` seconds fails (None: waits as long as the server takes)."""
    global _fallback, _system_poll, _get_hub, _Waiter, _statement_deadline
    monkey = sys.modules.get("gevent.monkey")
    if monkey is None or not monkey.is_module_patched("select"):
        return False
    _statement_deadline = statement_deadline
    if waiting.wait is not wait_gevent:
        from gevent import get_hub
        from gevent.hub import Waiter

        _get_hub, _Waiter = get_hub, Waiter
        _system_poll = monkey.get_original("select", "poll")
        _fallback = waiting.wait
        waiting.wait = wait_gevent
    return True
