"""Guardrails enforced on inference requests through the stand-in provider: a content block (JSON and stream:
403 before anything starts, metadata.patterns, the pipeline entry), a redaction seen in what reaches the
provider, a flag recorded, and model/provider/data limits changing where a request routes (403 when they
leave nothing). The guardrail is assigned to the caller's key unless the test says otherwise."""

import dataclasses
import json
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.utils import timezone

from gateway.billing.models import Generation
from tests.support import assert_error_envelope

METADATA = {"HTTP_X_GATEWAY_METADATA": "enabled"}
UPSTREAM_PATHS = ("/chat/completions", "/responses", "/messages")


def guardrail(persona, *, assign: bool = True, **fields) -> dict:
    client = persona.client(management=True)
    created = client.post("/api/v1/guardrails", {"name": "Team policy", **fields}, format="json")
    assert created.status_code == 201, created.content
    record = created.json()["data"]
    if assign:
        key_hash = persona.provisioned.inference_key.key.hash
        assigned = client.post(
            f"/api/v1/guardrails/{record['id']}/assignments/keys", {"key_hashes": [key_hash]}, format="json"
        )
        assert assigned.status_code == 200, assigned.content
    return record


def ask(persona, text: str, *, stream: bool = False, **body):
    payload = {"model": "standin/echo", "input": text, "provider": {"sort": "price"}, "stream": stream, **body}
    return persona.client().post("/api/v1/responses", payload, format="json", **METADATA)


def upstream_calls(standin) -> list[dict]:
    return [call for path in UPSTREAM_PATHS for call in standin.requests_for(path)]


BLOCK = {"content_filters": [{"pattern": r"ACME-\d{4}", "action": "block", "label": "project-code"}]}


@pytest.mark.parametrize("stream", [False, True])
def test_a_block_is_a_403_before_anything_starts(alice, standin_catalog, stream):
    record = guardrail(alice, **BLOCK)
    response = ask(alice, "Tell me about ACME-1234 please", stream=stream)
    body = assert_error_envelope(response, 403)
    assert response["Content-Type"].startswith("application/json")  # the stream never started
    assert body["error"]["message"].startswith("Request blocked by guardrail Team policy")
    assert body["error"]["metadata"]["patterns"] == ["project-code"]
    assert "ACME-1234" not in response.content.decode()
    (entry,) = body["gateway_metadata"]["pipeline"]
    assert entry == {
        "type": "guardrail",
        "name": "Team policy",
        "summary": "blocked",
        "guardrail_id": record["id"],
        "guardrail_scope": "key",
        "data": {"action": "block", "detected": True, "engines": ["re2"], "patterns": ["project-code"]},
    }
    assert upstream_calls(standin_catalog) == []


def test_a_redaction_is_what_reaches_the_provider(alice, standin_catalog):
    guardrail(alice, content_filter_builtins=[{"slug": "email", "action": "redact"}])
    response = ask(alice, "Write to jane.doe@example.com today", instructions="Reply to bob@example.org")
    assert response.status_code == 200, response.content
    (sent,) = upstream_calls(standin_catalog)
    raw = str(sent["body"])
    assert "jane.doe@example.com" not in raw and "bob@example.org" not in raw
    assert raw.count("[REDACTED:email]") == 2
    (entry,) = response.json()["gateway_metadata"]["pipeline"]
    assert entry["summary"] == "redacted" and entry["data"]["patterns"] == ["email"]


def test_a_flag_lets_it_through_and_says_so(alice, standin_catalog):
    guardrail(alice, content_filters=[{"pattern": "(?i)budget", "action": "flag", "label": "money-talk"}])
    response = ask(alice, "What is the budget for Q3?")
    assert response.status_code == 200
    (sent,) = upstream_calls(standin_catalog)
    assert "budget for Q3" in str(sent["body"])  # flagged, not changed
    (entry,) = response.json()["gateway_metadata"]["pipeline"]
    assert entry["summary"] == "flagged"
    assert entry["data"] == {"action": "flag", "detected": True, "engines": ["re2"], "patterns": ["money-talk"]}


def test_clean_input_passes_with_its_entry(alice, standin_catalog):
    guardrail(alice, **BLOCK)
    response = ask(alice, "Nothing to see here")
    assert response.status_code == 200
    (entry,) = response.json()["gateway_metadata"]["pipeline"]
    assert entry["summary"] == "passed" and entry["data"]["detected"] is False


def test_the_workspace_default_applies_when_the_key_has_none(alice, standin_catalog):
    guardrail(alice, assign=False, is_workspace_default=True, **BLOCK)
    body = assert_error_envelope(ask(alice, "ACME-0001"), 403)
    assert body["gateway_metadata"]["pipeline"][0]["guardrail_scope"] == "workspace"


def served_provider(response) -> str:
    (selected,) = [e for e in response.json()["gateway_metadata"]["endpoints"]["available"] if e["selected"]]
    return selected["provider"]


def test_provider_limits_change_where_it_routes(alice, standin_catalog):
    unlimited = served_provider(ask(alice, "Hello"))
    other = next(p for p in ("standin-chat", "standin-responses", "standin-anthropic") if p != unlimited)
    guardrail(alice, allowed_providers=[other])
    response = ask(alice, "Hello")
    assert response.status_code == 200
    assert served_provider(response) == other


@pytest.mark.parametrize(
    "limits",
    [
        {"ignored_providers": ["standin-chat", "standin-responses", "standin-anthropic"]},
        {"allowed_models": ["anthropic/*"]},
        {"ignored_models": ["standin/*"]},
    ],
)
def test_limits_that_leave_nothing_are_a_403_naming_the_guardrail(alice, standin_catalog, limits):
    guardrail(alice, **limits)
    body = assert_error_envelope(ask(alice, "Hello"), 403)
    assert "guardrail Team policy" in body["error"]["message"]
    assert upstream_calls(standin_catalog) == []


def test_a_flag_is_recorded_on_the_generation(alice, standin_catalog):
    record = guardrail(alice, content_filters=[{"pattern": "(?i)budget", "action": "flag", "label": "money-talk"}])
    response = ask(alice, "The budget, again")
    generation = Generation.objects.get(pk=response["X-Generation-Id"])
    assert generation.guardrail_flags == [
        {"guardrail_id": record["id"], "name": "Team policy", "patterns": ["money-talk"]}
    ]
    clean = ask(alice, "Nothing flagged")
    assert Generation.objects.get(pk=clean["X-Generation-Id"]).guardrail_flags is None


def listed(persona) -> set[str]:
    response = persona.client().get("/api/v1/models")
    assert response.status_code == 200
    return {model["id"] for model in response.json()["data"]}


def test_models_the_guardrails_allow_nothing_of_are_not_listed(alice, standin_catalog):
    assert "standin/echo" in listed(alice)
    guardrail(alice, ignored_models=["standin/*"])
    assert "standin/echo" not in listed(alice)


def spent_and_held(persona) -> Decimal:
    rows = Generation.objects.filter(api_key__hash=persona.provisioned.inference_key.key.hash)
    return sum((row.cost + (row.held if row.status == "in_progress" else 0) for row in rows), Decimal(0))


def one_request_costs(persona) -> tuple[Decimal, Decimal]:
    """(what a request holds, what it is charged), measured before any guardrail, then forgotten."""
    response = ask(persona, "Hello")
    generation = Generation.objects.get(pk=response["X-Generation-Id"])
    generation.delete()
    return generation.held, generation.cost


def test_a_budget_refuses_once_spent_naming_the_guardrail_and_its_reset(alice, standin_catalog):
    held, cost = one_request_costs(alice)
    limit = held + cost * 5 / 2  # a request fits while the spend is at most two and a half requests
    guardrail(alice, limit_usd=float(limit), reset_interval="daily")
    statuses = [ask(alice, "Hello").status_code for _ in range(6)]
    assert statuses == [200, 200, 200, 403, 403, 403]
    body = assert_error_envelope(ask(alice, "Hello"), 403)
    assert "guardrail Team policy" in body["error"]["message"] and "resets at" in body["error"]["message"]
    assert spent_and_held(alice) <= limit


def test_a_budget_resets_with_its_period(alice, standin_catalog):
    held, cost = one_request_costs(alice)
    guardrail(alice, limit_usd=float(held + cost / 2), reset_interval="daily")
    assert [ask(alice, "Hello").status_code for _ in range(3)] == [200, 403, 403]
    Generation.objects.filter(api_key__hash=alice.provisioned.inference_key.key.hash).update(
        created_at=timezone.now() - timedelta(days=2)
    )  # the spend was the day before yesterday: today's period starts empty
    assert ask(alice, "Hello").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_never_overshoot_a_budget(alice, standin_catalog):
    if connection.vendor != "postgresql":
        pytest.skip("row locks: PostgreSQL")
    held, cost = one_request_costs(alice)
    limit = held + 5 * cost
    guardrail(alice, limit_usd=float(limit))
    client = alice.client()

    def one(_):
        response = client.post("/api/v1/responses", {"model": "standin/echo", "input": "Hello there"}, format="json")
        connection.close()
        return response.status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(one, range(24)))
    assert set(statuses) <= {200, 403} and 200 in statuses and 403 in statuses
    assert spent_and_held(alice) <= limit


@pytest.fixture
def entity_model(settings, standin_catalog):
    """The stand-in as the entity model, answering what the test sets."""
    settings.GUARDRAILS_ENTITY_MODEL = "standin/echo"
    original = standin_catalog.script

    def answer(text: str) -> None:
        standin_catalog.script = dataclasses.replace(original, text=text)

    yield answer
    standin_catalog.script = original


def test_person_names_found_by_the_entity_model_are_redacted(alice, standin_catalog, entity_model):
    guardrail(alice, content_filter_builtins=[{"slug": "person-name", "action": "redact"}])
    entity_model(json.dumps({"person-name": ["Jane Doe"]}))
    response = ask(alice, "Please call Jane Doe about the order")
    assert response.status_code == 200, response.content
    calls = upstream_calls(standin_catalog)  # the entity model's and the request's, on whichever endpoints
    (asked,) = [call for call in calls if "You find personal data" in str(call["body"])]
    (sent,) = [call for call in calls if call is not asked]
    assert "Jane Doe" in str(asked["body"])
    assert "Jane Doe" not in str(sent["body"]) and "[REDACTED:person-name]" in str(sent["body"])
    assert "model:standin/echo" in response.json()["gateway_metadata"]["pipeline"][0]["data"]["engines"]


def test_an_entity_model_answer_that_is_not_the_json_asked_fails_closed(alice, standin_catalog, entity_model):
    guardrail(alice, content_filter_builtins=[{"slug": "address", "action": "block"}])
    entity_model("Sure! I found no addresses.")
    body = assert_error_envelope(ask(alice, "Ship to 1 Main Street"), 503)
    assert "not sent unchecked" in body["error"]["message"]
    assert len(upstream_calls(standin_catalog)) == 1  # only the entity model was asked


def test_the_user_listing_also_follows_the_account_routing_settings(alice, standin_catalog):
    def user_listed() -> set[str]:
        response = alice.client().get("/api/v1/models/user")
        assert response.status_code == 200
        return {model["id"] for model in response.json()["data"]}

    assert "standin/echo" in user_listed()
    settings_response = alice.client(management=True).patch(
        "/api/v1/routing/settings",
        {"ignored_providers": ["standin-chat", "standin-responses", "standin-anthropic"]},
        format="json",
    )
    assert settings_response.status_code == 200, settings_response.content
    assert "standin/echo" not in user_listed()
    assert "standin/echo" in listed(alice)  # the plain listing shows the catalog, less the guardrails' limits


def test_an_entity_model_the_catalog_cannot_route_is_a_non_retryable_404(alice, standin_catalog, settings):
    settings.GUARDRAILS_ENTITY_MODEL = "nobody/no-such-model"
    guardrail(alice, content_filter_builtins=[{"slug": "person-name", "action": "redact"}])
    body = assert_error_envelope(ask(alice, "Please call Jane Doe"), 404)  # configuration: no retry helps
    assert "not sent unchecked" in body["error"]["message"]
    assert upstream_calls(standin_catalog) == []
