"""How psycopg waits for its socket in a gevent worker: one libev watcher per wait instead of gevent's `select.poll`.

psycopg runs every query as a generator that says what it waits for (read, write), and a wait function that
blocks until the socket is ready. Under gevent's patching psycopg picks its `wait_poll` (its C wait would block
the worker's one thread), which goes through gevent's emulation of `poll`: a poll object, a timer for psycopg's
0.1 s wake-up interval, a watcher per descriptor and a result set per call, an eighth of a database statement's
CPU. `wait_gevent` asks the system's poll whether the socket is ready now, and when it is not, parks the greenlet
on one watcher until it is (nothing wakes it every 0.1 s: that interval exists to let a blocked main thread see
Ctrl-C). A call with a `timeout` (psycopg's own deadlines, on rarer paths) is left to the wait it replaced.

`install()` puts it in place when gevent has patched `select` (gunicorn's gevent worker does before the
application is imported); otherwise psycopg's choice stands."""

import select
import sys
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
    try:
        state = next(gen)
        poller.register(fileno, POLL_MASKS[state])
        while True:
            found = poller.poll(0)
            if not found:
                watcher = hub.loop.io(fileno, int(state))  # psycopg's bits are libev's READ (1) and WRITE (2)
                try:
                    hub.wait(watcher)
                finally:
                    watcher.close()
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


_fallback = waiting.wait
_system_poll = select.poll
_get_hub: Any = None  # gevent's, set by install()


def install() -> bool:
    """Use `wait_gevent` for psycopg's queries when gevent patched `select`; True when it did."""
    global _fallback, _system_poll, _get_hub
    monkey = sys.modules.get("gevent.monkey")
    if monkey is None or not monkey.is_module_patched("select"):
        return False
    if waiting.wait is not wait_gevent:
        from gevent import get_hub

        _get_hub = get_hub
        _system_poll = monkey.get_original("select", "poll")
        _fallback = waiting.wait
        waiting.wait = wait_gevent
    return True
