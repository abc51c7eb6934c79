"""Anthropic's service tiers: the canonical "default" (standard capacity; /messages' `standard_only`) goes to
Anthropic as `standard_only`, to the endpoints whose catalog entry lists it (the default catalog's Anthropic
endpoints do); it never reached Anthropic before. "auto" is Anthropic's own default: nothing is sent."""

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from routing.providers.anthropic.request import build_body
from routing.selectors import endpoints_for_model
from tests.support import ask

DEFAULT_CATALOG = Path(__file__).resolve().parents[2] / "routing" / "catalog" / "default.yaml"


@pytest.mark.parametrize(("tier", "sent"), [("default", "standard_only"), ("auto", None), (None, None)])
def test_the_tier_on_anthropics_wire(tier, sent):
    body = build_body(ask("Hi", service_tier=tier))
    assert body.get("service_tier") == sent


def test_the_default_catalog_lists_the_standard_tier_on_anthropics_own_endpoints(db):
    call_command("load_catalog", str(DEFAULT_CATALOG), stdout=StringIO())
    endpoints = endpoints_for_model(model_id="anthropic/claude-sonnet-4.5")
    tiers = {endpoint.provider_slug: endpoint.service_tiers for endpoint in endpoints}
    assert "default" in tiers["anthropic"]
