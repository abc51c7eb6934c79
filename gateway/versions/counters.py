"""Named version counters and the in-process caches they invalidate.

A cache of database rows in each process (API keys, the catalog snapshot) saves a query per request, but
it must not outlive a change made in another process. Each change bumps a named counter; a process
re-reads all counters in one query at most every CACHE_VERSION_CHECK_SECONDS and drops what it cached
under an older value, so a change is seen everywhere within that window (0.5 s by default).

The database row is the authority, with or without Redis: a Redis blip during a bump could leave a stale
value there for every process, and re-reading one small table twice a second per process costs less than
a single request used to. The bump is written when the change commits (`transaction.on_commit`), so a
process that reads the new value also reads the change; and a cached value is filed under the version read
*before* it was loaded, so a value loaded just before a change is dropped with the change. The process
that makes a change drops its own cached copies at once, without waiting for the window."""

import itertools
import math
import threading
import time
import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from django.conf import settings
from django.core.signals import setting_changed
from django.db import connection, transaction
from django.dispatch import receiver

from gateway.versions.models import Version

# Local bumps and resets take fresh numbers from here, so a version token is never reused in a process.
_SEQUENCE = itertools.count(1)


class _Counters:
    """This process's view: the stored values as read at `read_at`, and its own bumps on top of them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # the values and tokens (held briefly, never across a query)
        self.reading = threading.Lock()  # held by the one thread reading the stored values
        self.read_at = -math.inf  # time.monotonic() just before the last read; never read yet
        self.stored: dict[str, str] = {}
        self.local: dict[str, int] = {}
        self.base = next(_SEQUENCE)
        self.tokens: dict[str, str] = {}

    def token(self, name: str) -> str:
        return f"{self.stored.get(name, '')}:{self.local.get(name, self.base)}"

    def retoken(self) -> None:
        """Recompute the tokens (under the lock) after the stored or local values changed."""
        self.tokens = {name: self.token(name) for name in {*self.stored, *self.local}}


_counters = _Counters()


# settings.CACHE_VERSION_CHECK_SECONDS, read once (several caches ask on every request; the settings object is
# a lazy proxy) and again when a test changes it.
_check_seconds: list[float] = []


def _window() -> float:
    if not _check_seconds:
        _check_seconds.append(settings.CACHE_VERSION_CHECK_SECONDS)
    return _check_seconds[0]


@receiver(setting_changed)
def _window_changed(setting: str, **kwargs: Any) -> None:
    if setting == "CACHE_VERSION_CHECK_SECONDS":
        _check_seconds.clear()


def version_current(name: str) -> str:
    """An opaque token that changes whenever `name` is bumped (here at once, elsewhere within the window).
    No query unless this process last read the counters CACHE_VERSION_CHECK_SECONDS ago or more."""
    counters = _counters
    if time.monotonic() - counters.read_at >= _window():
        _refresh(counters)
    return counters.tokens.get(name) or counters.token(name)


def _refresh(counters: _Counters) -> None:
    """Read every counter in one statement, by one thread at a time; the others go on with the values read last
    (never waiting on it: a reader waiting for a pooled connection while threads that hold connections waited
    for the reader stalled a cold burst of streams for pool timeouts on end)."""
    if not counters.reading.acquire(blocking=False):
        return
    try:
        started = time.monotonic()
        if started - counters.read_at < _window():
            return
        had_connection = connection.connection is not None
        stored = dict(Version.objects.values_list("name", "value"))
        if not had_connection and not connection.in_atomic_block:
            # A thread that held no connection (one waiting on an upstream, relaying a stream) gives back the one
            # this read took: otherwise it would keep a pooled connection until its request ends.
            connection.close()
        with counters.lock:
            counters.stored = stored
            counters.read_at = started
            counters.retoken()
    finally:
        counters.reading.release()


def version_bump(name: str) -> None:
    """Call on every change that copies cached under `name` must not outlive. Several bumps of one name in
    a transaction write it once, after the commit; nothing is written if the transaction rolls back."""
    _bump_locally(name)
    bump = _StoredBump(name)
    if not any(entry[1] == bump for entry in connection.run_on_commit):
        transaction.on_commit(bump)


@dataclass(frozen=True)
class _StoredBump:
    """The on-commit write of a new value (equal by name, so that a transaction registers it once)."""

    name: str

    def __call__(self) -> None:
        Version.objects.update_or_create(name=self.name, defaults={"value": uuid.uuid4().hex})
        # Again here: another thread of this process may have cached the old rows since the first drop.
        _bump_locally(self.name)


def _bump_locally(name: str) -> None:
    counters = _counters
    with counters.lock:
        counters.local[name] = next(_SEQUENCE)
        counters.retoken()


def versions_reset() -> None:
    """Forget this process's view: the next read goes to the database and every versioned cache starts
    empty. For tests, whose rolled-back database must not meet copies cached from the previous test."""
    global _counters
    _counters = _Counters()


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


# How long a miss waits for the same key's load already under way before it loads on its own.
FLIGHT_WAIT_SECONDS = 5.0


class _Flight(Generic[V]):
    """One load under way, and its answer for the callers that waited on it."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.answered = False
        self.value: V | None = None


class Flights(Generic[K, V]):
    """Loads of one key at the same time share one: the first caller loads, the others wait for its answer (as fresh
    as their own would be), or load on their own if it fails or takes FLIGHT_WAIT_SECONDS. A burst of requests right
    after a start or a change would otherwise all query for the same row at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._flights: dict[K, _Flight[V]] = {}

    def load(self, key: K, load: Callable[[], V]) -> V:
        with self._lock:
            flight = self._flights.get(key)
            leading = flight is None
            if flight is None:
                flight = self._flights[key] = _Flight()
        if not leading:
            if flight.done.wait(FLIGHT_WAIT_SECONDS) and flight.answered:
                return flight.value  # type: ignore[return-value]  # answered: the leader's value
            return load()
        try:
            value = load()
            flight.value, flight.answered = value, True
            return value
        finally:
            with self._lock:
                self._flights.pop(key, None)
            flight.done.set()


class VersionedCache(Generic[K, V]):
    """A bounded in-process map, emptied whenever the named version changes. Only found values are kept
    (a miss is loaded again next time, so unknown keys cannot fill memory); when full, the oldest entry
    goes. Reads take no lock. Misses on one key under one version at the same time share one load (Flights)."""

    def __init__(self, name: str, *, max_entries: int) -> None:
        self.name = name
        self.max_entries = max_entries
        self._version = ""
        self._entries: dict[K, V] = {}
        self._lock = threading.Lock()
        self._flights: Flights[tuple[K, str], V | None] = Flights()

    def get_or_load(self, key: K, load: Callable[[K], V | None]) -> V | None:
        version = version_current(self.name)
        if version != self._version:
            self._reset(version)
        value = self._entries.get(key)
        if value is None:
            value = self._flights.load((key, version), lambda: self._load_and_keep(key, version, load))
        return value

    def _load_and_keep(self, key: K, version: str, load: Callable[[K], V | None]) -> V | None:
        value = load(key)
        if value is not None:
            self._put(key, value, version)
        return value

    def __len__(self) -> int:
        return len(self._entries)

    def _reset(self, version: str) -> None:
        with self._lock:
            if self._version != version:
                self._entries = {}
                self._version = version

    def _put(self, key: K, value: V, version: str) -> None:
        with self._lock:
            if self._version != version:
                return  # loaded under a version that has changed since: it may predate the change
            if key not in self._entries and len(self._entries) >= self.max_entries:
                del self._entries[next(iter(self._entries))]
            self._entries[key] = value
