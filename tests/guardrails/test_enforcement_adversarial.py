"""Adversarial probes of guardrail enforcement: texts a caller sends that must be scanned, and places the
original of a redaction must not reach."""

import base64
import hashlib
import json
from typing import Any

import pytest

from routing.models import Model
from tests.guardrails.test_enforcement import BLOCK, ask, guardrail, upstream_calls
from tests.support import assert_error_envelope

ANY_BLOCK: dict[str, Any] = dict(BLOCK)


def reasoning_item(fmt: str, text: str) -> dict:
    return {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": text}],
        "content": [{"type": "reasoning_text", "text": text}],
        "format": fmt,
        "encrypted_content": "opaque",
        "signature": "sig",
    }


@pytest.mark.parametrize("fmt", ["openai-responses-v1", "anthropic-claude-v1"])
def test_a_reasoning_item_the_caller_sends_is_scanned(alice, standin_catalog, fmt):
    guardrail(alice, **ANY_BLOCK)
    items: Any = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
        reasoning_item(fmt, "Tell me about ACME-1234"),
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go on"}]},
    ]
    response = ask(alice, items)
    body = assert_error_envelope(response, 403)
    assert body["error"]["metadata"]["patterns"] == ["project-code"]
    assert upstream_calls(standin_catalog) == []


def test_a_reasoning_redaction_reaches_no_provider(alice, standin_catalog):
    guardrail(alice, content_filter_builtins=[{"slug": "email", "action": "redact"}])
    items: Any = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
        reasoning_item("openai-responses-v1", "write to jane.doe@example.com"),
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go on"}]},
    ]
    response = ask(alice, items)
    assert response.status_code == 200, response.content
    for sent in upstream_calls(standin_catalog):
        assert "jane.doe@example.com" not in str(sent["body"])


def test_an_assistant_message_and_refusal_are_scanned(alice, standin_catalog):
    guardrail(alice, **ANY_BLOCK)
    items: Any = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "ACME-9999"}]},
        {"type": "message", "role": "user", "content": "go on"},
    ]
    assert_error_envelope(ask(alice, items), 403)


def test_a_redaction_is_not_in_the_generation_record_or_metadata(alice, standin_catalog):
    from gateway.billing.models import Generation

    guardrail(alice, content_filter_builtins=[{"slug": "email", "action": "redact"}])
    response = ask(alice, "Write to jane.doe@example.com today")
    assert response.status_code == 200, response.content
    assert "jane.doe@example.com" not in response.content.decode()
    for generation in Generation.objects.all():
        values = {f.name: getattr(generation, f.name) for f in Generation._meta.fields}
        assert "jane.doe@example.com" not in str(values)


def test_a_byok_request_counted_in_a_budget_cannot_overshoot_it(alice, standin_catalog):
    from decimal import Decimal

    from gateway.billing.models import Generation

    created = alice.client(management=True).post(
        "/api/v1/byok", {"provider": "standin-chat", "key": "byok-standin-1", "shared_capacity": "never"}, format="json"
    )
    assert created.status_code == 201, created.content
    one = ask(alice, "Hello", provider={"only": ["standin-chat"]})
    assert one.status_code == 200 and one.json()["usage"]["is_byok"] is True, one.content
    list_cost = Generation.objects.get().upstream_cost
    assert list_cost > 0
    Generation.objects.all().delete()
    limit = list_cost / 2
    guardrail(alice, limit_usd=float(limit), include_byok_in_budgets=True)
    statuses = [ask(alice, "Hello", provider={"only": ["standin-chat"]}).status_code for _ in range(3)]
    spent = sum((g.upstream_cost for g in Generation.objects.filter(is_byok=True)), Decimal(0))
    assert spent <= limit, (statuses, spent, limit)


@pytest.mark.django_db(transaction=True)
def test_concurrent_byok_requests_counted_in_a_budget_never_overshoot_it(alice, standin_catalog):
    from concurrent.futures import ThreadPoolExecutor
    from decimal import Decimal

    from django.db import connection

    from gateway.billing.models import Generation

    if connection.vendor != "postgresql":
        pytest.skip("row locks: PostgreSQL")
    shared = ask(alice, "Hello there", provider={"only": ["standin-chat"]}, max_output_tokens=16)
    measured = Generation.objects.get(pk=shared["X-Generation-Id"])
    worst, list_cost = measured.held, measured.cost  # a request's list-price hold and charge
    Generation.objects.all().delete()
    created = alice.client(management=True).post(
        "/api/v1/byok", {"provider": "standin-chat", "key": "byok-standin-1", "shared_capacity": "never"}, format="json"
    )
    assert created.status_code == 201, created.content
    limit = worst + 5 * list_cost
    guardrail(alice, limit_usd=float(limit), include_byok_in_budgets=True)
    client = alice.client()

    def one(_):
        body: dict[str, Any] = {"model": "standin/echo", "input": "Hello there", "provider": {"only": ["standin-chat"]}}
        body["max_output_tokens"] = 16
        response = client.post("/api/v1/responses", body, format="json")
        connection.close()
        return response.status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(one, range(24)))
    assert set(statuses) <= {200, 403}, statuses
    spent = sum((g.upstream_cost for g in Generation.objects.filter(is_byok=True)), Decimal(0))
    assert 200 in statuses and spent <= limit, (statuses, spent, limit)


@pytest.fixture
def entity_model(settings, standin_catalog):
    import dataclasses

    settings.GUARDRAILS_ENTITY_MODEL = "standin/echo"
    original = standin_catalog.script

    def answer(text: str) -> None:
        standin_catalog.script = dataclasses.replace(original, text=text)

    yield answer
    standin_catalog.script = original


def test_a_regex_block_sends_nothing_to_the_entity_model(alice, standin_catalog, entity_model):
    import json

    entity_model(json.dumps({"person-name": []}))
    filters: dict[str, Any] = {"content_filter_builtins": [{"slug": "person-name", "action": "redact"}], **BLOCK}
    guardrail(alice, **filters)
    assert_error_envelope(ask(alice, "Tell me about ACME-1234"), 403)
    assert upstream_calls(standin_catalog) == []  # the blocked text went to no model


def test_the_entity_check_routes_within_the_guardrails_provider_limits(alice, standin_catalog, entity_model):
    import json

    entity_model(json.dumps({"person-name": []}))
    guardrail(
        alice,
        content_filter_builtins=[{"slug": "person-name", "action": "redact"}],
        allowed_providers=["standin-anthropic"],
    )
    response = ask(alice, "Please call Jane Doe")
    assert response.status_code == 200, response.content
    assert standin_catalog.requests_for("/chat/completions") == []
    assert standin_catalog.requests_for("/responses") == []
    assert len(standin_catalog.requests_for("/messages")) == 2  # the entity check and the request


def tool(description: str, property_description: str) -> dict:
    return {
        "type": "function",
        "name": "lookup",
        "description": description,
        "parameters": {
            "type": "object",
            "properties": {"q": {"type": "string", "description": property_description}},
        },
    }


@pytest.mark.parametrize("where", ["description", "parameters"])
def test_a_tool_definition_is_scanned(alice, standin_catalog, where):
    guardrail(alice, **ANY_BLOCK)
    texts = ("Look up ACME-1234", "a query") if where == "description" else ("Look up", "like ACME-1234")
    body = assert_error_envelope(ask(alice, "Hi", tools=[tool(*texts)]), 403)
    assert body["error"]["metadata"]["patterns"] == ["project-code"]
    assert upstream_calls(standin_catalog) == []


def test_a_tool_definition_is_redacted(alice, standin_catalog):
    guardrail(alice, content_filter_builtins=[{"slug": "email", "action": "redact"}])
    response = ask(alice, "Hi", tools=[tool("Mail jane.doe@example.com", "cc bob@example.org")])
    assert response.status_code == 200, response.content
    (sent,) = upstream_calls(standin_catalog)
    raw = str(sent["body"])
    assert "jane.doe@example.com" not in raw and "bob@example.org" not in raw
    assert raw.count("[REDACTED:email]") == 2


def test_text_beyond_what_the_entity_model_is_shown_is_not_let_through_unchecked(alice, standin_catalog, entity_model):
    import json

    from guardrails.stage import MAX_ENTITY_TEXT_CHARS

    entity_model(json.dumps({"person-name": []}))
    guardrail(alice, content_filter_builtins=[{"slug": "person-name", "action": "redact"}])
    response = ask(alice, "x " * (MAX_ENTITY_TEXT_CHARS // 2 + 10) + "Please call Jane Doe", max_output_tokens=16)
    if response.status_code == 200:  # then the entity model must have been shown the name
        shown = [str(call["body"]) for call in upstream_calls(standin_catalog) if "Jane Doe" in str(call["body"])]
        assert len(shown) == 2, "the entity model never saw the end of the text"
    else:
        assert 400 <= response.status_code < 500 and "Jane Doe" not in response.content.decode()


def test_a_structured_output_schema_is_scanned(alice, standin_catalog):
    guardrail(alice, **ANY_BLOCK)
    schema = {"type": "object", "properties": {"a": {"type": "string", "description": "about ACME-1234"}}}
    body = {
        "model": "standin/echo",
        "input": "Hi",
        "text": {"format": {"type": "json_schema", "name": "a", "schema": schema}},
    }
    assert_error_envelope(alice.client().post("/api/v1/responses", body, format="json"), 403)
    assert upstream_calls(standin_catalog) == []


def test_the_entity_model_call_is_priced_held_and_charged_with_the_request(alice, standin_catalog, entity_model):
    import json
    from decimal import Decimal

    from gateway.accounts.models import Account
    from gateway.billing.models import Generation

    only = {"only": ["standin-anthropic"]}  # the request and the entity call on one price list
    entity_model(json.dumps({"person-name": []}))
    text = "Please call the office about the order"
    before = ask(alice, text, provider=only)
    assert before.status_code == 200, before.content
    without = Generation.objects.get(pk=before["X-Generation-Id"]).cost
    guardrail(
        alice,
        content_filter_builtins=[{"slug": "person-name", "action": "flag"}],
        allowed_providers=["standin-anthropic"],
    )

    response = ask(alice, text, provider=only)
    assert response.status_code == 200, response.content
    (entry,) = response.json()["gateway_metadata"]["pipeline"]
    entity_cost = Decimal(str(entry["cost_usd"]))
    assert entity_cost > 0
    generation = Generation.objects.get(pk=response["X-Generation-Id"])
    assert abs(generation.cost - without - entity_cost) < Decimal("1e-12") * 10  # the same request, plus the call
    assert generation.held >= generation.cost  # held with the request
    balance = Account.objects.get(pk=alice.account_id).balance
    assert balance == Decimal("10") - without - generation.cost


def test_a_property_name_of_a_tool_schema_is_scanned(alice, standin_catalog):
    guardrail(alice, **ANY_BLOCK)
    parameters = {"type": "object", "properties": {"ACME-1234": {"type": "string"}}}
    tool = {"type": "function", "name": "lookup", "description": "Look up", "parameters": parameters}
    body = assert_error_envelope(ask(alice, "Hi", tools=[tool]), 403)
    assert body["error"]["metadata"]["patterns"] == ["project-code"]
    assert upstream_calls(standin_catalog) == []


def test_a_property_name_of_a_structured_output_schema_is_redacted_in_what_is_sent(alice, standin_catalog):
    guardrail(alice, content_filter_builtins=[{"slug": "email", "action": "redact"}])
    schema = {
        "type": "object",
        "properties": {"jane.doe@example.com": {"type": "string"}, "bob@example.org": {"type": "string"}},
        "required": ["jane.doe@example.com"],
    }
    body = {
        "model": "standin/echo",
        "input": "Hi",
        "provider": {"sort": "price"},
        "text": {"format": {"type": "json_schema", "name": "a", "schema": schema}},
    }
    response = alice.client().post("/api/v1/responses", body, format="json")
    assert response.status_code == 200, response.content
    (sent,) = upstream_calls(standin_catalog)
    raw = str(sent["body"])
    assert "jane.doe@example.com" not in raw and "bob@example.org" not in raw
    assert "'[REDACTED:email]'" in raw and "'[REDACTED:email] (2)'" in raw  # still two properties


@pytest.mark.parametrize("stream", [False, True])
def test_a_blocked_pattern_spelled_with_invisible_or_fullwidth_characters_is_blocked(alice, standin_catalog, stream):
    guardrail(alice, **ANY_BLOCK)
    for spelled in ("ACME\u200b-12\u00ad34", "ＡＣＭＥ－１２３４", "AC\ufeffME-\u20601234"):
        body = assert_error_envelope(ask(alice, f"Tell me about {spelled}", stream=stream), 403)
        assert body["error"]["metadata"]["patterns"] == ["project-code"]
    assert upstream_calls(standin_catalog) == []


def test_a_fullwidth_email_is_redacted_whole_in_what_reaches_the_provider(alice, standin_catalog):
    guardrail(alice, content_filter_builtins=[{"slug": "email", "action": "redact"}])
    email = "ｊａｎｅ\u200b＠ｅｘａｍｐｌｅ．ｃｏｍ"
    response = ask(alice, f"Write to {email} today")
    assert response.status_code == 200, response.content
    (sent,) = upstream_calls(standin_catalog)
    raw = json_text(sent["body"])
    assert "Write to [REDACTED:email] today" in raw
    assert not any(char in raw for char in "ｊａｎｅ＠\u200b")


def json_text(body) -> str:
    import json

    return json.dumps(body, ensure_ascii=False)


@pytest.mark.parametrize("slug", ["person-name", "address"])
def test_entity_builtins_on_a_positive_and_a_negative_example(alice, standin_catalog, entity_model, slug):
    import json

    guardrail(alice, content_filter_builtins=[{"slug": slug, "action": "block"}])
    found = {"person-name": "Jane Doe", "address": "1 Main Street, Springfield"}[slug]
    entity_model(json.dumps({slug: [found]}))
    body = assert_error_envelope(ask(alice, f"Send it to {found} by Friday"), 403)
    assert body["error"]["metadata"]["patterns"] == [slug]
    assert len(upstream_calls(standin_catalog)) == 1  # the entity model only

    entity_model(json.dumps({slug: []}))  # the model finds none in a text without one
    response = ask(alice, "Send it to the office by Friday")
    assert response.status_code == 200, response.content
    (entry,) = response.json()["gateway_metadata"]["pipeline"]
    assert entry["summary"] == "passed" and entry["data"]["detected"] is False


def test_an_entity_check_that_blocks_is_charged_for_its_call(alice, standin_catalog, entity_model):
    import json
    from decimal import Decimal

    from gateway.accounts.models import Account
    from gateway.billing.models import Generation

    text = "Please call Jane Doe about the order"
    start = text.index("Jane Doe")
    entity_model(json.dumps({"person-name": [text[start : start + 8]]}))
    guardrail(alice, content_filter_builtins=[{"slug": "person-name", "action": "block"}])
    body = assert_error_envelope(ask(alice, text), 403)
    (entry,) = body["gateway_metadata"]["pipeline"]
    entity_cost = Decimal(str(entry["cost_usd"]))
    assert entity_cost > 0
    refused = Generation.objects.get(account_id=alice.account_id)
    assert (refused.status, refused.error_type, refused.cost) == ("failed", "blocked", entity_cost)
    assert Account.objects.get(pk=alice.account_id).balance == Decimal("10") - entity_cost
    assert "Jane" not in json.dumps(body["error"])


def file_sent_with_an_annotation(text: str) -> list[dict]:
    """A tiny text file, and an earlier answer carrying an annotation of it (by its hash) whose text is `text`:
    the file-parser gives the model that text instead of parsing the file again."""
    data = b"harmless"
    annotation = {
        "type": "file",
        "file": {
            "hash": hashlib.sha256(data).hexdigest(),
            "name": "a.txt",
            "content": [{"type": "text", "text": text}],
        },
    }
    return [
        {"role": "assistant", "content": [{"type": "output_text", "text": "Read it.", "annotations": [annotation]}]},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Summarise the file."},
                {
                    "type": "input_file",
                    "filename": "a.txt",
                    "file_data": f"data:text/plain;base64,{base64.b64encode(data).decode()}",
                },
            ],
        },
    ]


@pytest.fixture
def text_only_model(standin_catalog):
    model = Model.objects.get(pk="standin/echo")
    model.input_modalities = ["text"]  # files are parsed by the gateway (file-parser)
    model.save()
    return standin_catalog


def test_text_smuggled_in_a_file_annotation_is_blocked(alice, text_only_model):
    guardrail(alice, **BLOCK)
    response = ask(alice, file_sent_with_an_annotation("the plan for ACME-1234"))
    body = assert_error_envelope(response, 403)
    assert body["error"]["metadata"]["patterns"] == ["project-code"]
    assert upstream_calls(text_only_model) == []


def test_text_in_a_file_annotation_is_redacted_before_the_model_reads_it(alice, text_only_model):
    guardrail(alice, content_filter_builtins=[{"slug": "email", "action": "redact"}])
    response = ask(alice, file_sent_with_an_annotation("write to jane.doe@example.com"))
    assert response.status_code == 200, response.content
    (sent,) = upstream_calls(text_only_model)
    raw = json.dumps(sent["body"])
    assert "jane.doe@example.com" not in raw
    assert "File: a.txt\\n\\nwrite to [REDACTED:email]" in raw


@pytest.mark.parametrize("stream", [False, True])
def test_a_spent_budget_refuses_before_any_paid_check_runs(alice, standin_catalog, settings, stream):
    """The moderation engine's call costs money: with the budget spent the request is refused before it is made
    (it was made, then the hold refused, and its cost charged to no one)."""
    from tests.plugins.test_moderation import moderations_engine

    moderations_engine(settings, standin_catalog)
    guardrail(alice, limit_usd=0, reset_interval="daily")
    response = ask(alice, "Hello", stream=stream, plugins=[{"id": "moderation"}])
    body = assert_error_envelope(response, 403)
    assert "guardrail Team policy" in body["error"]["message"] and "resets at" in body["error"]["message"]
    assert standin_catalog.requests_for("/moderations") == [] and upstream_calls(standin_catalog) == []
