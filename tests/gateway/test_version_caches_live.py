"""Across real processes: a key disabled here is refused by both workers of a running gateway within 1 s,
while they authenticate from their in-process caches (CACHE_VERSION_CHECK_SECONDS at its default, 0.5 s;
other live tests run with 0)."""

import time

import pytest
import requests

from gateway.accounts.models import ApiKey
from gateway.accounts.services import api_key_update
from tests.live import LiveGateway

pytestmark = pytest.mark.live


def test_a_disabled_key_is_refused_by_every_worker_within_a_second(transactional_db, alice):
    gateway = LiveGateway(workers=2, threads=4, extra_env={"CACHE_VERSION_CHECK_SECONDS": "0.5"})
    try:
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {alice.api_key}"
        # Given both workers have authenticated alice's key (and cached it)
        assert all(session.get(f"{gateway.api}/key", timeout=5).status_code == 200 for _ in range(20))
        # When the key is disabled in this process (committed, and its version bumped in the database)
        api_key_update(key=ApiKey.objects.get(pk=alice.provisioned.inference_key.key.pk), changes={"disabled": True})
        changed_at = time.monotonic()
        # Then within a second every request, on either worker, is refused
        time.sleep(1.0)
        statuses = [session.get(f"{gateway.api}/key", timeout=5).status_code for _ in range(20)]
        assert statuses == [401] * 20, (statuses, time.monotonic() - changed_at)
    finally:
        gateway.stop()
