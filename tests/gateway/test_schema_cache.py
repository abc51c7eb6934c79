"""GET /openapi.json and /openapi.yaml: generated once per process, served with a strong ETag, 304 on a match
(issue 28, item 2: the schema needs no key, and generating it per request cost 0.13-0.18 s of CPU)."""

from unittest import mock

import pytest
import yaml
from django.test import Client, RequestFactory
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.views import SpectacularJSONAPIView, SpectacularYAMLAPIView

from gateway.schema import SCHEMA_MAX_AGE_SECONDS, schema_cache_clear


@pytest.fixture
def cold_schema():
    """No schema generated yet in this process (another test may have asked for it)."""
    schema_cache_clear()
    yield
    schema_cache_clear()


def test_the_schema_is_generated_once_for_any_number_of_requests(cold_schema):
    anonymous = Client()
    with mock.patch.object(SchemaGenerator, "get_schema", autospec=True, side_effect=SchemaGenerator.get_schema) as spy:
        for _ in range(3):
            assert anonymous.get("/api/v1/openapi.json").status_code == 200
        for _ in range(2):
            assert anonymous.get("/api/v1/openapi.yaml").status_code == 200
        assert anonymous.get("/api/v1/openapi.json", HTTP_ACCEPT="application/json; indent=2").status_code == 200
    assert spy.call_count == 1


def test_the_schema_has_a_strong_etag_and_a_match_is_a_304_without_a_body(cold_schema):
    anonymous = Client()
    first = anonymous.get("/api/v1/openapi.json")
    etag = first["ETag"]
    assert etag.startswith('"') and etag.endswith('"') and len(etag) > 10  # strong: no W/
    assert first["Cache-Control"] == f"public, max-age={SCHEMA_MAX_AGE_SECONDS}"
    assert "Accept" in first["Vary"]  # JSON and YAML renderings differ per negotiated media type

    # When the client sends it back (alone, weak, in a list or as *), it gets a 304 and no body
    for header in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        again = anonymous.get("/api/v1/openapi.json", HTTP_IF_NONE_MATCH=header)
        assert again.status_code == 304 and again.content == b"" and again["ETag"] == etag, header

    # A stale or another rendering's tag gets the whole schema
    assert anonymous.get("/api/v1/openapi.json", HTTP_IF_NONE_MATCH='"stale"').content == first.content
    as_yaml = anonymous.get("/api/v1/openapi.yaml", HTTP_IF_NONE_MATCH=etag)
    assert as_yaml.status_code == 200 and as_yaml["ETag"] != etag
    assert anonymous.get("/api/v1/openapi.yaml", HTTP_IF_NONE_MATCH=as_yaml["ETag"]).status_code == 304


def test_the_served_schema_is_what_drf_spectacular_generates_afresh(cold_schema):
    anonymous = Client()
    served_json = anonymous.get("/api/v1/openapi.json")
    served_yaml = anonymous.get("/api/v1/openapi.yaml")
    served_plain = anonymous.get("/api/v1/openapi.json", HTTP_ACCEPT="application/json")

    fresh = SchemaGenerator().get_schema(request=None, public=True)
    assert served_json.json() == fresh
    assert yaml.safe_load(served_yaml.content) == fresh
    # Byte for byte what drf-spectacular's own (uncached) views answer, headers included
    factory = RequestFactory()
    for served, view, accept in (
        (served_json, SpectacularJSONAPIView, "*/*"),
        (served_yaml, SpectacularYAMLAPIView, "*/*"),
        (served_plain, SpectacularJSONAPIView, "application/json"),
    ):
        original = view.as_view()(factory.get("/api/v1/openapi", HTTP_ACCEPT=accept)).render()
        assert served.content == original.content
        assert served["Content-Type"] == original["Content-Type"]
        assert served["Content-Disposition"] == original["Content-Disposition"]
