"""API keys served from the in-process cache: no SQL in the steady state, and a change made anywhere is seen
within CACHE_VERSION_CHECK_SECONDS. "Elsewhere" is another process: the change is written and bumped in the
database, but this process is not told (its own bumps are switched off), and a fake clock stands for time."""

import threading
import time
from contextlib import contextmanager
from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from rest_framework import exceptions

from gateway.accounts import authentication
from gateway.accounts.authentication import ApiKeyAuthentication, Caller, api_keys_changed
from gateway.accounts.models import Account, ApiKey, Member, Plan
from gateway.accounts.services import api_key_create, api_key_delete, api_key_update
from gateway.cache import cache_status
from gateway.versions import counters
from gateway.versions.counters import VersionedCache, version_bump, version_current
from gateway.versions.models import Version
from tests.live import free_port

WINDOW = 0.5


class Clock:
    """time.monotonic() for gateway.versions, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def frozen_clock(monkeypatch, settings) -> Clock:
    """gateway.versions on a clock of its own, with the default window."""
    settings.CACHE_VERSION_CHECK_SECONDS = WINDOW
    fake = Clock()
    monkeypatch.setattr(counters, "time", fake)
    return fake


@contextmanager
def another_process(monkeypatch):
    """Changes made inside reach this process only through the database, as another process's do."""
    with monkeypatch.context() as patch:
        patch.setattr(counters, "_bump_locally", lambda name: None)
        yield


@pytest.fixture
def clock(monkeypatch, settings) -> Clock:
    return frozen_clock(monkeypatch, settings)


@pytest.fixture
def elsewhere(monkeypatch):
    return lambda: another_process(monkeypatch)


def authenticate(token: str) -> Caller:
    request = RequestFactory().get("/api/v1/key", HTTP_AUTHORIZATION=f"Bearer {token}")
    caller, _ = ApiKeyAuthentication().authenticate(request)
    return caller


def refused(token: str) -> str:
    with pytest.raises(exceptions.AuthenticationFailed) as failure:
        authenticate(token)
    return str(failure.value.detail)


def test_steady_state_authentication_runs_no_sql(alice, settings):
    settings.CACHE_VERSION_CHECK_SECONDS = 30  # no version re-read falls inside the measured block
    authenticate(alice.api_key)
    with CaptureQueriesContext(connection) as queries:
        callers = {authenticate(alice.api_key) for _ in range(100)}
    assert len(queries) == 0
    assert {caller.key_id for caller in callers} == {alice.provisioned.inference_key.key.pk}


def test_the_versions_are_read_once_per_window_for_all_names(alice, clock):
    authenticate(alice.api_key)
    with CaptureQueriesContext(connection) as queries:
        for _ in range(10):
            clock.advance(WINDOW / 4)
            authenticate(alice.api_key)
            version_current("catalog")
    assert len(queries) == 2  # at +0.5 s and +1.0 s, one statement for every counter


def test_a_key_disabled_elsewhere_is_refused_within_the_window(alice, transactional_db, clock, elsewhere):
    # Given alice's key, cached here
    key = alice.provisioned.inference_key.key
    authenticate(alice.api_key)
    # When another process disables it
    with elsewhere():
        api_key_update(key=ApiKey.objects.get(pk=key.pk), changes={"disabled": True})
    # Then this process serves its cached copy (without a query) until the window has passed, never after
    clock.advance(WINDOW - 0.01)
    with CaptureQueriesContext(connection) as queries:
        assert authenticate(alice.api_key).key_id == key.pk
    assert len(queries) == 0
    clock.advance(0.01)
    assert refused(alice.api_key) == "API key is disabled"


def test_a_key_deleted_elsewhere_is_refused_within_the_window(alice, transactional_db, clock, elsewhere):
    authenticate(alice.api_key)
    with elsewhere():
        api_key_delete(key=ApiKey.objects.get(pk=alice.provisioned.inference_key.key.pk))
    clock.advance(WINDOW)
    assert refused(alice.api_key) == "Invalid API key"


def test_limit_plan_and_creator_changes_elsewhere_reach_the_caller_within_the_window(
    alice, transactional_db, clock, elsewhere
):
    # Given alice's key with a creator, cached here without a limit, on pay-as-you-go
    member = Member.objects.create(account_id=alice.account_id, user_id="user_alice")
    token = api_key_create(account_id=alice.account_id, name="by alice", creator_user_id="user_alice").plaintext
    before = authenticate(token)
    assert (before.has_limit, before.plan, before.creator_user_id) == (False, Plan.PAY_AS_YOU_GO, "user_alice")
    # When another process gives it a limit, moves the account to enterprise and removes the member
    with elsewhere():
        api_key_update(key=ApiKey.objects.get(pk=before.key_id), changes={"limit": Decimal("5")})
        account = Account.objects.get(pk=alice.account_id)
        account.plan = Plan.ENTERPRISE
        account.save()
        member.delete()
    # Then the next window's caller has all three
    clock.advance(WINDOW)
    after = authenticate(token)
    assert (after.has_limit, after.plan, after.creator_user_id) == (True, Plan.ENTERPRISE, None)


def test_a_change_in_this_process_is_seen_at_once_even_before_its_commit(alice, clock):
    authenticate(alice.api_key)
    with transaction.atomic():
        api_key_update(key=ApiKey.objects.get(pk=alice.provisioned.inference_key.key.pk), changes={"disabled": True})
        assert refused(alice.api_key) == "API key is disabled"


def test_a_bulk_update_is_seen_after_api_keys_changed(alice, clock):
    authenticate(alice.api_key)
    ApiKey.objects.filter(account_id=alice.account_id).update(disabled=True)
    assert authenticate(alice.api_key)  # a bulk update sends no signal
    api_keys_changed()
    assert refused(alice.api_key) == "API key is disabled"


def test_balance_moves_do_not_drop_the_cache(alice, transactional_db, clock):
    authenticate(alice.api_key)
    account = Account.objects.get(pk=alice.account_id)
    account.name = "alice renamed"
    account.save(update_fields=["name"])  # a save that cannot change a Caller
    before = Version.objects.filter(name=authentication.VERSION).values_list("value", flat=True).first()
    Account.objects.filter(pk=alice.account_id).update(balance=Decimal("3"))
    clock.advance(WINDOW)
    with CaptureQueriesContext(connection) as queries:
        authenticate(alice.api_key)
    assert len(queries) == 1  # the version re-read, and no key lookup
    assert Version.objects.filter(name=authentication.VERSION).values_list("value", flat=True).first() == before


def test_a_new_key_authenticates_at_once(alice, transactional_db, clock, elsewhere):
    authenticate(alice.api_key)
    with elsewhere():
        issued = api_key_create(account_id=alice.account_id, name="fresh")
    assert authenticate(issued.plaintext).key_id == issued.key.pk


def test_unknown_keys_are_not_cached_and_the_cache_is_bounded(alice, clock, monkeypatch):
    authenticate(alice.api_key)
    for attempt in range(50):
        assert refused(f"sk-gw-v1-inf-unknown{attempt}") == "Invalid API key"
    assert len(authentication._keys) == 1
    small: VersionedCache[str, str] = VersionedCache("test", max_entries=3)
    for name in "abcde":
        small.get_or_load(name, str.upper)
    assert len(small) == 3 and small.get_or_load("a", lambda name: "loaded again") == "loaded again"


def test_a_value_loaded_while_its_version_changes_is_not_kept(db, clock):
    cache: VersionedCache[str, str] = VersionedCache("test", max_entries=10)

    def load_during_a_change(key: str) -> str:
        version_bump("test")  # committed after our version read, maybe after our load: the value may predate it
        cache.get_or_load("other", str.upper)  # and another thread meets the new version first
        return "maybe stale"

    assert cache.get_or_load("k", load_during_a_change) == "maybe stale"
    assert cache.get_or_load("k", lambda key: "fresh") == "fresh"


def test_bumps_are_written_once_after_the_commit_and_not_on_rollback(transactional_db):
    with transaction.atomic():
        for _ in range(3):
            version_bump("test")
        assert sum(entry[1] == counters._StoredBump("test") for entry in connection.run_on_commit) == 1
        assert not Version.objects.filter(name="test").exists()
    first = Version.objects.get(name="test").value
    with pytest.raises(RuntimeError), transaction.atomic():
        version_bump("test")
        raise RuntimeError
    assert Version.objects.get(name="test").value == first


def test_with_redis_unreachable_invalidation_still_works(alice, transactional_db, clock, elsewhere, settings):
    # Given a Redis that does not answer (the shared cache degrades to process-local memory)
    settings.CACHES = {
        "default": {
            "BACKEND": "gateway.cache.ResilientRedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port()}/0",
            "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2},
        }
    }
    settings.GATEWAY_RATE_LIMIT = "1000/min"  # requests touch the shared cache
    client = alice.client()
    assert client.get("/api/v1/key").status_code == 200
    assert cache_status()["state"] == "degraded"
    # When another process disables the key, then the window passes
    with elsewhere():
        api_key_update(key=ApiKey.objects.get(pk=alice.provisioned.inference_key.key.pk), changes={"disabled": True})
    clock.advance(WINDOW)
    # Then the key is refused: the version came from the database
    assert client.get("/api/v1/key").status_code == 401


def _misses_at_once(cache: VersionedCache[str, str], load, count: int) -> list:
    """`count` threads missing the same key at the same moment; what each got (or the error it raised)."""
    gate = threading.Barrier(count)
    got: list = []

    def miss() -> None:
        gate.wait()
        try:
            got.append(cache.get_or_load("k", load))
        except RuntimeError as error:
            got.append(error)

    threads = [threading.Thread(target=miss) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    return got


def test_misses_on_one_key_at_the_same_time_share_one_load(transactional_db):
    # Given a cold cache and a load that takes a while (a burst of requests with one key right after a start)
    cache: VersionedCache[str, str] = VersionedCache("test", max_entries=10)
    loads: list[str] = []

    def slow_load(key: str) -> str:
        loads.append(key)
        time.sleep(0.3)
        return key.upper()

    # When 8 requests miss it together, then the key is loaded once and every request gets the value
    assert _misses_at_once(cache, slow_load, 8) == ["K"] * 8
    assert loads == ["k"]


def test_when_the_shared_load_fails_the_waiting_misses_load_on_their_own(transactional_db):
    cache: VersionedCache[str, str] = VersionedCache("test", max_entries=10)
    loads: list[int] = []
    first = threading.Lock()

    def load(key: str) -> str:
        if first.acquire(blocking=False):  # the first load fails after the others have started waiting
            time.sleep(0.3)
            loads.append(0)
            raise RuntimeError("database gone")
        loads.append(1)
        return key.upper()

    got = _misses_at_once(cache, load, 4)
    assert sorted(map(str, got)) == ["K", "K", "K", "database gone"]
    assert sorted(loads) == [0, 1, 1, 1]


def test_the_version_window_follows_the_setting(db, settings):
    # The window is read once, not per check; a changed setting (a test's, here) still takes effect at once
    settings.CACHE_VERSION_CHECK_SECONDS = 0
    with CaptureQueriesContext(connection) as every_time:
        version_current("test")
        version_current("test")
    settings.CACHE_VERSION_CHECK_SECONDS = 3600
    version_current("test")
    with CaptureQueriesContext(connection) as once_an_hour:
        version_current("test")
    assert (len(every_time), len(once_an_hour)) == (2, 0)


def test_a_snapshots_per_account_values_load_once_under_a_burst():
    # The catalog snapshot's per-account values (routing defaults, BYOK filters) are loaded once, not per request
    from routing.snapshot import CatalogSnapshot

    snapshot = CatalogSnapshot(version="v", models=frozenset(), endpoints_by_model={}, secrets={})
    loads: list[int] = []
    gate = threading.Barrier(8)

    def slow_load() -> str:
        loads.append(1)
        time.sleep(0.3)
        return "defaults"

    def use() -> None:
        gate.wait()
        got.append(snapshot.cached(("routing-defaults", "acct"), slow_load))

    got: list[str] = []
    threads = [threading.Thread(target=use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert got == ["defaults"] * 8 and loads == [1]
