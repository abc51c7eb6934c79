"""Settlements (and hold releases) that failed because the database was unreachable, tried again in this process
until it answers.

A request's settlement closes its hold once: its statement changes only a generation still `in_progress` (see
statements.SETTLE_SQL), so running it again can never charge twice (one whose commit reached the database but whose
answer did not finds the row closed and changes nothing). When PostgreSQL is down or stalled at the end of a
request, its settlement (the usage it knows, charged; else nothing, the hold released) waits here and is tried
again with backoff, so the hold closes within seconds of the outage's end, not when the stale-hold sweep runs.

Bounded: at most SETTLE_RETRY_MAX_PENDING wait, each for at most SETTLE_RETRY_SECONDS, one per generation (the
first settlement of a request is the one that counts: a later close of the same hold, e.g. the failure handler's
release after the settlement raised, is ignored). What is dropped (the queue full, the outage longer than the
window, a worker killed meanwhile) is left to `release_stale_reservations`, whose default age is past this window
(services.stale_hold_seconds)."""

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import InterfaceError, OperationalError, connections

logger = logging.getLogger(__name__)

# What "the database did not answer" looks like through Django (psycopg's connection errors, a pool timeout, a
# statement timeout): the statement did not run, or ran and its answer was lost; either way running it again is safe.
DATABASE_UNREACHABLE = (OperationalError, InterfaceError)
FIRST_DELAY_SECONDS = 0.5
MAX_DELAY_SECONDS = 5.0


@dataclass
class _Pending:
    attempt: Callable[[], object]
    give_up_at: float
    due: float
    delay: float


class SettlementRetries:
    """The queue of one process: `add` a settlement to try again; a thread (a greenlet under gevent) started on
    demand runs them as they fall due and stops when none waits. `run_due` is the same work, run by the caller."""

    def __init__(
        self,
        *,
        max_pending: int,
        window_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        autostart: bool = True,
    ):
        self.max_pending = max_pending
        self.autostart = autostart
        self.window_seconds = window_seconds
        self._clock = clock
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, key: str, attempt: Callable[[], object]) -> bool:
        """Try `attempt` again later (the first one given for `key` only); False when the queue is full."""
        with self._lock:
            if key in self._pending:
                return True
            if len(self._pending) >= self.max_pending:
                logger.error(
                    "settlement of %s not retried (%d waiting): the stale-hold sweep releases it", key, len(self)
                )
                return False
            now = self._clock()
            self._pending[key] = _Pending(
                attempt, give_up_at=now + self.window_seconds, due=now + FIRST_DELAY_SECONDS, delay=FIRST_DELAY_SECONDS
            )
            if self.autostart and self._thread is None:
                self._thread = threading.Thread(target=self._run, name="settle-retry", daemon=True)
                self._thread.start()
        self._wake.set()
        return True

    def run_due(self) -> float | None:
        """Try each settlement that is due, once. Returns the seconds until the next one is due (None: none waits)."""
        now = self._clock()
        with self._lock:
            due = [(key, pending) for key, pending in self._pending.items() if pending.due <= now]
        for key, pending in due:
            try:
                pending.attempt()
            except DATABASE_UNREACHABLE as exc:
                if self._clock() < pending.give_up_at:
                    pending.delay = min(pending.delay * 2, MAX_DELAY_SECONDS)
                    pending.due = self._clock() + pending.delay
                    continue
                logger.error(
                    "settlement of %s given up (%s): the stale-hold sweep releases it", key, type(exc).__name__
                )
            except Exception:
                logger.exception("settlement of %s failed on retry: the stale-hold sweep releases it", key)
            else:
                logger.warning("settlement of %s done on retry, after the database came back", key)
            with self._lock:
                self._pending.pop(key, None)
        with self._lock:
            if not self._pending:
                return None
            return max(0.0, min(pending.due for pending in self._pending.values()) - self._clock())

    def _run(self) -> None:
        while True:
            wait = self.run_due()
            connections.close_all()  # this thread's (a failed one is not kept; a pooled one goes back)
            with self._lock:
                if not self._pending:
                    self._thread = None
                    return
            self._wake.wait(timeout=wait)
            self._wake.clear()


RETRIES = SettlementRetries(max_pending=settings.SETTLE_RETRY_MAX_PENDING, window_seconds=settings.SETTLE_RETRY_SECONDS)


def settle_later(generation_id: str, attempt: Callable[[], object]) -> bool:
    """Run `attempt` (the request's settlement, or its hold's release) again once the database answers."""
    return RETRIES.add(generation_id, attempt)
