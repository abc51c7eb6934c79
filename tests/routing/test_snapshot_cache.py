"""The catalog snapshot is checked like the API keys (gateway.versions): no SQL per request in the steady
state, rebuilt within the window after a change made in another process, at once after one made here."""

from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from gateway.versions.models import Version
from routing import snapshot
from routing.models import Endpoint
from routing.snapshot import catalog_changed, current_snapshot
from tests.gateway.test_version_caches import WINDOW, another_process, frozen_clock


def test_steady_state_snapshot_runs_no_sql(standin_catalog, settings):
    settings.CACHE_VERSION_CHECK_SECONDS = 30  # no version re-read falls inside the measured block
    first = current_snapshot()
    with CaptureQueriesContext(connection) as queries:
        assert all(current_snapshot() is first for _ in range(100))
    assert len(queries) == 0
    assert "standin/echo" in first.models


def test_an_endpoint_disabled_elsewhere_stops_routing_within_the_window(
    standin_catalog, transactional_db, monkeypatch, settings
):
    clock = frozen_clock(monkeypatch, settings)
    # Given the stand-in catalog's snapshot
    before = current_snapshot()
    endpoint = Endpoint.objects.filter(model_id="standin/echo").first()
    assert endpoint.id in {info.id for info in before.endpoints_by_model["standin/echo"]}
    # When another process disables one of its endpoints
    with another_process(monkeypatch):
        endpoint.enabled = False
        endpoint.save()
    # Then this process keeps its snapshot until the window has passed, and rebuilds it then
    clock.advance(WINDOW - 0.01)
    assert current_snapshot() is before
    clock.advance(0.01)
    after = current_snapshot()
    assert endpoint.id not in {info.id for info in after.endpoints_by_model["standin/echo"]}


def test_a_change_here_rebuilds_at_once_and_is_stored_when_it_commits(
    standin_catalog, transactional_db, monkeypatch, settings
):
    frozen_clock(monkeypatch, settings)
    before = current_snapshot()
    stored = Version.objects.filter(name=snapshot.VERSION).values_list("value", flat=True).first()
    with transaction.atomic():
        catalog_changed()
        catalog_changed()
        assert current_snapshot() is not before  # this process, at once
        assert Version.objects.filter(name=snapshot.VERSION).values_list("value", flat=True).first() == stored
    assert Version.objects.filter(name=snapshot.VERSION).values_list("value", flat=True).first() != stored
