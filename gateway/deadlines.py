"""One deadline watcher per process: run an action (typically: shut a socket) when a deadline passes.

A socket timeout bounds one read, not a request head, body or upstream answer that arrives a byte at a time;
what bounds the total is an action at a deadline that wakes the blocked reader (shutting the socket makes its
read return or raise). All such deadlines share one heap and one daemon thread per process, so a deadline
costs a heap entry, not a thread or a timer.

The thread is made at the first `watch` in a process, so under gevent (which patches `threading` in each
worker after the fork) it is a greenlet; after a fork the child makes its own (the pid tells). Actions run on
that thread, outside the watcher's lock: keep them short and non-blocking (a `shutdown` is).

Django-free: the gunicorn workers, imported by the master, use it too.
"""

import heapq
import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)

# Cancelled entries stay in the heap until their deadline comes; past this many (and half the heap), they go.
COMPACT_AFTER = 1024

_PENDING, _CANCELLED, _FIRED = 0, 1, 2


class Handle:
    """One watched deadline. `cancel()` before it passes and the action never runs."""

    __slots__ = ("deadline", "_action", "_state", "_watcher")

    def __init__(self, watcher: "_Watcher", deadline: float, action: Callable[[], None]):
        self.deadline = deadline
        self._action: Callable[[], None] | None = action
        self._state = _PENDING
        self._watcher = watcher

    @property
    def fired(self) -> bool:
        """The deadline passed and the action was (or is being) run."""
        return self._state == _FIRED

    def cancel(self) -> bool:
        """True if the action will never run; False if it already ran (or is running). Idempotent."""
        return self._watcher.cancel(self)


class _Watcher:
    """The heap and its thread, for one process."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Handle]] = []
        self._order = itertools.count()
        self._cancelled = 0
        self._thread: threading.Thread | None = None

    def watch(self, deadline: float, action: Callable[[], None]) -> Handle:
        handle = Handle(self, deadline, action)
        with self._cond:
            heapq.heappush(self._heap, (deadline, next(self._order), handle))
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="deadlines", daemon=True)
                thread.start()  # if it cannot start, this raises and the next watch tries again
                self._thread = thread
            elif self._heap[0][2] is handle:  # sooner than what the thread waits for
                self._cond.notify()
        return handle

    def cancel(self, handle: Handle) -> bool:
        with self._cond:
            if handle._state == _FIRED:
                return False
            if handle._state == _PENDING:
                handle._state = _CANCELLED
                handle._action = None
                self._cancelled += 1
                if self._cancelled > COMPACT_AFTER and self._cancelled * 2 > len(self._heap):
                    self._heap = [entry for entry in self._heap if entry[2]._state == _PENDING]
                    heapq.heapify(self._heap)
                    self._cancelled = 0
            return True

    def pending(self) -> int:
        with self._cond:
            return len(self._heap) - self._cancelled

    def _run(self) -> None:
        cond = self._cond
        with cond:
            while True:
                action = self._next_due()
                if action is None:
                    continue
                cond.release()  # an action may watch or cancel (and must not hold up the heap)
                try:
                    action()
                except Exception:
                    logger.exception("A deadline action failed")
                finally:
                    cond.acquire()

    def _next_due(self) -> Callable[[], None] | None:
        """With the lock held: the action of a passed deadline (now marked fired), or None after waiting."""
        heap = self._heap
        while heap and heap[0][2]._state != _PENDING:
            heapq.heappop(heap)
            self._cancelled = max(0, self._cancelled - 1)
        if not heap:
            self._cond.wait()
            return None
        wait = heap[0][0] - time.monotonic()
        if wait > 0:
            # a deadline set absurdly far (a setting meaning "never") would overflow the wait
            self._cond.wait(min(wait, threading.TIMEOUT_MAX))
            return None
        handle = heapq.heappop(heap)[2]
        handle._state = _FIRED
        action, handle._action = handle._action, None
        return action


_guard = threading.Lock()
_watcher: _Watcher | None = None


def _after_fork() -> None:
    global _guard
    _guard = threading.Lock()  # it may have been held by a thread the child does not have


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _current() -> _Watcher:
    global _watcher
    watcher = _watcher
    if watcher is not None and watcher.pid == os.getpid():
        return watcher
    with _guard:
        if _watcher is None or _watcher.pid != os.getpid():  # first use here, or a fork's child
            _watcher = _Watcher()
        return _watcher


def watch(deadline: float, action: Callable[[], None]) -> Handle:
    """Run `action` on the watcher's thread once time.monotonic() reaches `deadline`, unless cancelled."""
    return _current().watch(deadline, action)


def shutdown(sock: socket.socket, how: int = socket.SHUT_RD) -> Callable[[], None]:
    """An action that shuts `sock` (its read side by default), waking a thread blocked reading it; a socket
    already closed is left alone."""

    def action() -> None:
        try:
            sock.shutdown(how)
        except OSError:
            pass

    return action


def pending() -> int:
    """Deadlines watched and not yet cancelled or fired, in this process (for tests and diagnostics)."""
    return _current().pending()
