"""A model the gateway's own call needs that this deployment cannot serve (the OCR model, the guardrails' entity
model, the moderation engine's model, an embeddings model no adapter can embed with) is a fact of its configuration:
a non-retryable 404 `no_endpoints` with `x-should-retry: false` and no `Retry-After` (routing.selection.unservable),
never a 503 that the official SDKs retry to the same answer. An outage (the side model fails) stays a 503 with
`Retry-After`."""

from decimal import Decimal

import pytest

from routing.errors import PROVIDER_NOT_CONFIGURED
from routing.models import Endpoint, Model, Provider
from tests.guardrails.test_enforcement import ask as ask_guarded
from tests.guardrails.test_enforcement import entity_model, guardrail, upstream_calls  # noqa: F401 (a fixture)
from tests.plugins.test_file_parser import annotating, file_part, scanned_pdf  # noqa: F401 (annotating: a fixture)
from tests.plugins.test_file_parser import ask as ask_with_file
from tests.plugins.test_moderation import ask as ask_moderated
from tests.plugins.test_moderation import generation_calls
from tests.support import assert_error_envelope


def assert_not_retryable(response) -> dict:
    body = assert_error_envelope(response, 404)
    assert response["x-should-retry"] == "false" and not response.has_header("Retry-After")
    availability = body["error"]["metadata"]["availability"]
    assert availability["code"] == "no_endpoints" and availability["retryable"] is False
    return body


@pytest.fixture
def text_only(standin_catalog, annotating):  # noqa: F811 (the fixture imported above)
    """standin/echo as a model that takes no file input: the gateway parses files (and OCRs scans) for it."""
    Model.objects.filter(pk="standin/echo").update(input_modalities=["text", "image"])
    return standin_catalog


def test_an_ocr_model_the_catalog_lacks_is_a_non_retryable_404(alice, text_only, settings):
    settings.FILE_PARSER_OCR_MODEL = "nobody/no-such-vision-model"
    plugins = [{"id": "file-parser", "pdf": {"engine": "mistral-ocr"}}]
    body = assert_not_retryable(ask_with_file(alice, [file_part(scanned_pdf(), filename="scan.pdf")], plugins=plugins))
    assert "nobody/no-such-vision-model" in body["error"]["message"]
    assert "retrying does not help" in body["error"]["message"]
    assert text_only.requests_for("/chat/completions") == []


def test_an_ocr_model_without_credentials_says_so(alice, text_only, settings):
    provider = Provider.objects.create(
        slug="standin-vision", name="vision", adapter="openai_chat", base_url=f"{text_only.url}/v1"
    )
    model = Model.objects.create(id="standin/vision", name="vision", context_length=32768)
    Endpoint.objects.create(
        model=model,
        provider=provider,
        upstream_model="v",
        price_prompt=Decimal(1),
        price_completion=Decimal(1),
        context_length=32768,
    )
    settings.FILE_PARSER_OCR_MODEL = "standin/vision"  # its provider has no credential
    plugins = [{"id": "file-parser", "pdf": {"engine": "mistral-ocr"}}]
    body = assert_not_retryable(ask_with_file(alice, [file_part(scanned_pdf(), filename="scan.pdf")], plugins=plugins))
    metadata = body["error"]["metadata"]
    assert metadata["error_type"] == PROVIDER_NOT_CONFIGURED
    assert metadata["availability"]["excluded_by"] == ["credentials"]
    assert text_only.requests_for("/chat/completions") == []


def test_embeddings_no_adapter_can_serve_is_a_non_retryable_404(alice, standin_catalog):
    Provider.objects.filter(endpoints__model_id="standin/embed").update(adapter="anthropic")
    response = alice.client().post("/api/v1/embeddings", {"model": "standin/embed", "input": "hi"}, format="json")
    body = assert_not_retryable(response)
    assert "can serve embeddings" in body["error"]["message"]
    assert standin_catalog.requests_for("/embeddings") == []


def test_an_entity_model_the_catalog_lacks_is_a_non_retryable_404(alice, standin_catalog, settings):
    settings.GUARDRAILS_ENTITY_MODEL = "nobody/no-such-model"
    guardrail(alice, content_filter_builtins=[{"slug": "person-name", "action": "redact"}])
    body = assert_not_retryable(ask_guarded(alice, "Please call Jane Doe"))
    assert "not sent unchecked" in body["error"]["message"] and "nobody/no-such-model" in body["error"]["message"]
    assert upstream_calls(standin_catalog) == []


def test_an_entity_model_that_fails_stays_a_retryable_503(alice, standin_catalog, entity_model):  # noqa: F811
    guardrail(alice, content_filter_builtins=[{"slug": "address", "action": "block"}])
    entity_model("Sure! I found no addresses.")  # not the JSON asked: no verdict this time
    response = ask_guarded(alice, "Ship to 1 Main Street")
    assert_error_envelope(response, 503)
    assert response["Retry-After"] == "1" and not response.has_header("x-should-retry")


def test_a_moderation_model_the_catalog_lacks_is_a_non_retryable_404(alice, standin_catalog, settings):
    settings.MODERATION_MODEL = "nobody/no-such-moderation"
    body = assert_not_retryable(ask_moderated(alice, "A perfectly pleasant question"))
    assert "not sent unmoderated" in body["error"]["message"]
    assert generation_calls(standin_catalog) == []


def test_a_moderation_engine_that_fails_stays_a_retryable_503(alice, standin_catalog, settings):
    from tests.plugins.test_moderation import moderations_engine

    moderations_engine(settings, standin_catalog)
    Provider.objects.filter(slug="standin-mod").update(base_url=f"{standin_catalog.url}/s/status=503/v1")
    response = ask_moderated(alice, "A perfectly pleasant question")
    assert_error_envelope(response, 503)
    assert response["Retry-After"] == "1" and not response.has_header("x-should-retry")
