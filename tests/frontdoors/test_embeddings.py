"""POST /embeddings: embedding models of the catalog routed like /responses (fallback, BYOK, credits, guardrails),
billed per input token, answered in OpenAI's shape, with the stand-in's deterministic vectors."""

import base64
import math
import struct
from decimal import Decimal

import pytest

from gateway.billing.models import Generation
from gateway.billing.provisioning import account_provision
from routing.standin.embeddings import vector
from tests.guardrails.test_enforcement import guardrail
from tests.responses_api.test_pipeline_stages import add_key
from tests.support import Persona, assert_error_envelope, point_provider

METADATA = {"HTTP_X_GATEWAY_METADATA": "enabled"}


def embed(persona, body, **headers):
    return persona.client().post("/api/v1/embeddings", body, format="json", **headers)


def embedding_calls(standin) -> list[dict]:
    return standin.requests_for("/embeddings")


def test_texts_are_embedded_in_order_and_billed_per_input_token(alice, standin_catalog):
    response = embed(
        alice, {"model": "standin/embed", "input": ["first text", "second one"], "provider": {"sort": "price"}}
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["object"] == "list" and body["model"] == "standin/embed"
    assert [entry["index"] for entry in body["data"]] == [0, 1]
    assert body["data"][0]["embedding"] == pytest.approx(vector("first text", 8))
    assert body["data"][1]["embedding"] == pytest.approx(vector("second one", 8))
    usage = body["usage"]
    assert usage["prompt_tokens"] == 2 + 2 and usage["total_tokens"] == usage["prompt_tokens"]
    generation = Generation.objects.get(id=body["id"])
    expected = Decimal(usage["prompt_tokens"]) * Decimal("0.02") / 1_000_000  # the cheapest endpoint's price
    assert generation.cost == expected and generation.tokens_input == usage["prompt_tokens"]
    assert float(generation.cost) == pytest.approx(usage["cost"])


def test_base64_dimensions_and_token_arrays(alice, standin_catalog):
    response = embed(
        alice, {"model": "standin/embed", "input": [[1, 2, 3]], "dimensions": 4, "encoding_format": "base64"}
    )
    assert response.status_code == 200, response.content
    raw = base64.b64decode(response.json()["data"][0]["embedding"])
    floats = struct.unpack("<4f", raw)
    assert floats == pytest.approx(vector([1, 2, 3], 4), rel=1e-6)
    assert math.isclose(sum(x * x for x in floats), 1.0, rel_tol=1e-5)
    [sent] = embedding_calls(standin_catalog)
    assert sent["body"]["dimensions"] == 4 and sent["body"]["input"] == [[1, 2, 3]]


def test_a_failing_endpoint_falls_back_to_the_next(alice, standin_catalog):
    point_provider("standin-chat", standin_catalog, "status=503")
    response = embed(alice, {"model": "standin/embed", "input": "hello", "provider": {"sort": "price"}}, **METADATA)
    assert response.status_code == 200, response.content
    metadata = response.json()["gateway_metadata"]
    assert [a["provider"] for a in metadata["attempts"]] == ["standin-chat", "standin-responses"]
    assert metadata["attempts"][0]["status"] == 503 and metadata["strategy"] == "fallback"


def test_a_byok_key_serves_first(alice, standin_catalog):
    add_key(alice, "standin-responses", "byok-embed-key")
    response = embed(alice, {"model": "standin/embed", "input": "hello"})
    assert response.status_code == 200, response.content
    assert response.json()["usage"]["is_byok"] is True
    [sent] = embedding_calls(standin_catalog)
    assert sent["credential"] == "byok-embed-key"


def test_guardrail_redaction_reaches_the_provider_and_token_arrays_are_refused(alice, standin_catalog):
    guardrail(alice, content_filter_builtins=[{"slug": "email", "action": "redact"}])
    response = embed(alice, {"model": "standin/embed", "input": ["mail jane.doe@example.com"]})
    assert response.status_code == 200, response.content
    [sent] = embedding_calls(standin_catalog)
    assert sent["body"]["input"] == ["mail [REDACTED:email]"]
    refused = embed(alice, {"model": "standin/embed", "input": [[1, 2, 3]]})
    assert "token arrays" in assert_error_envelope(refused, 400)["error"]["message"]


def test_models_of_the_other_kind_are_400(alice, standin_catalog):
    chat_model = embed(alice, {"model": "standin/echo", "input": "hello"})
    assert "not an embedding model" in assert_error_envelope(chat_model, 400)["error"]["message"]
    embedding_model = alice.client().post(
        "/api/v1/chat/completions",
        {"model": "standin/embed", "messages": [{"role": "user", "content": "hi"}]},
        format="json",
    )
    assert "/embeddings" in assert_error_envelope(embedding_model, 400)["error"]["message"]
    on_responses = alice.client().post("/api/v1/responses", {"model": "standin/embed", "input": "hi"}, format="json")
    assert "/embeddings" in assert_error_envelope(on_responses, 400)["error"]["message"]
    assert not embedding_calls(standin_catalog)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"input": "x"}, "model"),
        ({"model": "standin/embed", "input": ""}, "input"),
        ({"model": "standin/embed", "input": ["ok", 5]}, "input[1]"),
        ({"model": "standin/embed", "input": "x", "encoding_format": "int8"}, "encoding_format"),
        ({"model": "standin/embed", "input": "x", "dimensions": 0}, "dimensions"),
    ],
)
def test_bad_requests_name_the_field(alice, standin_catalog, body, field):
    error = assert_error_envelope(embed(alice, body), 400)["error"]
    assert field in error["metadata"]["fields"], error


def test_an_account_without_credits_is_402_and_nothing_is_sent(db, standin_catalog):
    broke = Persona(account_provision(name="broke", plan="payg", credits=Decimal("0")))
    response = embed(broke, {"model": "standin/embed", "input": "hello"})
    assert_error_envelope(response, 402)
    assert not embedding_calls(standin_catalog)


def test_token_arrays_pass_a_guardrail_that_reads_no_text(alice, standin_catalog):
    guardrail(alice, limit_usd=5)
    response = embed(alice, {"model": "standin/embed", "input": [[1, 2, 3]]}, **METADATA)
    assert response.status_code == 200, response.content
    assert [entry["type"] for entry in response.json()["gateway_metadata"]["pipeline"]] == ["guardrail"]
