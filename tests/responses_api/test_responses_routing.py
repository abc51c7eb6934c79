"""POST /responses end to end against the stand-in: fallback across endpoints and models, every final
error status, streaming failures, billing and generation records."""

import json
from decimal import Decimal

import pytest
from django.db.models import Sum
from django.test import override_settings
from rest_framework.test import APIClient

from gateway.accounts.models import Account
from gateway.billing.models import EntryKind, Generation, LedgerEntry
from routing.services import catalog_load
from tests.support import assert_error_envelope, point_provider, sse_events

PROVIDERS = ["standin-chat", "standin-responses", "standin-anthropic"]


def ask(client, *, stream=False, headers=None, **body):
    """A request tried cheapest endpoint first (sort by price), unless the test routes otherwise."""
    payload = {"model": "standin/echo", "input": "Hello", "provider": {"sort": "price"}, **body}
    if stream:
        payload["stream"] = True
    return client.post("/api/v1/responses", payload, format="json", **(headers or {}))


def all_fail(server, script: str) -> None:
    for slug in PROVIDERS:
        point_provider(slug, server, script)


def generation(response) -> Generation:
    return Generation.objects.get(pk=response["X-Generation-Id"])


def test_served_by_the_cheapest_endpoint_and_recorded(alice, standin_catalog):
    response = ask(alice.client())
    assert response.status_code == 200
    record = generation(response)
    assert (record.provider, record.model, record.status) == ("standin-chat", "standin/echo", "completed")
    assert [a["provider_name"] for a in record.provider_responses] == ["standin-chat"]
    assert record.cost > 0 and record.tokens_output == 9


def test_fallback_across_endpoints(alice, standin_catalog):
    point_provider("standin-chat", standin_catalog, "status=503")
    point_provider("standin-responses", standin_catalog, "status=429")
    response = ask(alice.client(), headers={"HTTP_X_GATEWAY_METADATA": "enabled"})
    assert response.status_code == 200
    body = response.json()
    record = generation(response)
    assert record.provider == "standin-anthropic"
    assert [(a["provider_name"], a["status"]) for a in record.provider_responses] == [
        ("standin-chat", 503),
        ("standin-responses", 429),
        ("standin-anthropic", 200),
    ]
    meta = body["gateway_metadata"]
    assert meta["attempt"] == 3 and meta["strategy"] == "fallback"
    assert meta["summary"].endswith("endpoints sorted by price")
    assert [e["selected"] for e in meta["endpoints"]["available"]] == [False, False, True]


def test_fallback_across_models(alice, standin_catalog):
    catalog_load(
        data={
            "models": [
                {
                    "id": "standin/backup",
                    "name": "Backup",
                    "context_length": 8192,
                    "endpoints": [
                        {
                            "provider": "standin-anthropic",
                            "upstream_model": "backup",
                            "pricing": {"prompt": 1, "completion": 1},
                        }
                    ],
                }
            ]
        }
    )
    for slug in ["standin-chat", "standin-responses"]:
        point_provider(slug, standin_catalog, "status=500")
    point_provider("standin-anthropic", standin_catalog, "status=529")
    # standin/echo's three endpoints fail; then standin/backup on the same (now failing) provider fails too
    response = ask(alice.client(), models=["standin/backup"])
    assert_error_envelope(response, 529)
    point_provider("standin-anthropic", standin_catalog)
    # Now only the backup model's endpoint works: echo's anthropic endpoint is tried first, and serves.
    response = ask(alice.client(), models=["standin/backup"])
    assert response.status_code == 200 and response.json()["model"] == "standin/echo"
    catalog_load(
        data={
            "models": [
                {
                    "id": "standin/echo",
                    "name": "x",
                    "context_length": 32768,
                    "endpoints": [
                        {
                            "provider": "standin-anthropic",
                            "upstream_model": "e",
                            "pricing": {"prompt": 1, "completion": 1},
                            "enabled": False,
                        }
                    ],
                }
            ]
        }
    )
    response = ask(alice.client(), models=["standin/backup"])
    assert response.status_code == 200 and response.json()["model"] == "standin/backup"
    assert generation(response).requested_model == "standin/echo"


def test_non_retryable_error_stops_at_once(alice, standin_catalog):
    point_provider("standin-chat", standin_catalog, "status=400")
    response = ask(alice.client())
    body = assert_error_envelope(response, 400)
    assert body["error"]["message"] == "Invalid request."
    assert len(standin_catalog.received) == 1


@pytest.mark.parametrize(
    "script,status",
    [
        ("status=429,retry_after=7", 429),
        ("status=500", 502),
        ("status=502", 502),
        ("status=503", 503),
        ("status=529", 529),
        ("status=401", 502),  # the operator's provider key, not the caller's: a gateway-side failure
        ("status=413", 413),
        ("status=422", 422),
        ("status=408", 408),
    ],
)
def test_final_error_statuses(alice, standin_catalog, script, status):
    all_fail(standin_catalog, script)
    response = ask(alice.client())
    body = assert_error_envelope(response, status)
    if status == 429:
        assert response["Retry-After"] == "7"
    if status >= 500 and status not in (503, 529):
        assert body["error"]["message"] == "Provider returned error"
    assert body["error"]["metadata"]["provider_name"]


@override_settings(UPSTREAM_READ_TIMEOUT=0.3)
def test_upstream_timeout_is_524(alice, standin_catalog):
    all_fail(standin_catalog, "latency_ms=1000")
    body = assert_error_envelope(ask(alice.client()), 524)
    assert body["error"]["metadata"]["error_type"] == "timeout"


def test_unknown_model_is_404(alice, standin_catalog):
    body = assert_error_envelope(ask(alice.client(), model="nobody/nothing"), 404)
    assert body["error"]["metadata"]["availability"]["code"] == "model_not_found"


def test_context_too_long_is_400_before_any_upstream_call(alice, standin_catalog):
    body = assert_error_envelope(ask(alice.client(), input="x" * 200_000), 400)
    assert body["error"]["metadata"]["availability"]["code"] == "context_length_exceeded"
    assert standin_catalog.received == type(standin_catalog.received)(maxlen=500)


def test_truncation_auto_drops_old_items_to_fit(alice, standin_catalog):
    long_turn = {"role": "user", "content": "y" * 140_000}
    response = ask(alice.client(), truncation="auto", input=[long_turn, {"role": "user", "content": "Latest"}])
    assert response.status_code == 200
    sent = standin_catalog.requests_for("/chat/completions")[-1]["body"]["messages"]
    assert sent == [{"role": "user", "content": "Latest"}]


def test_insufficient_credits_is_402_and_nothing_is_called(alice, standin_catalog):
    Account.objects.filter(pk=alice.account_id).update(balance=Decimal("0"))
    body = assert_error_envelope(ask(alice.client()), 402)
    assert "credits" in body["error"]["message"].lower()
    assert len(standin_catalog.received) == 0


def test_management_key_cannot_infer(alice, standin_catalog):
    assert_error_envelope(ask(alice.client(management=True)), 403)


def test_failed_attempts_are_not_charged(alice, standin_catalog):
    all_fail(standin_catalog, "status=500")
    ask(alice.client())
    charges = LedgerEntry.objects.filter(account_id=alice.account_id, kind=EntryKind.CHARGE)
    assert not charges.exists()
    assert Account.objects.get(pk=alice.account_id).balance == Decimal("10")
    assert Generation.objects.get(account_id=alice.account_id).status == "failed"


# ---- streaming ----------------------------------------------------------------------------------


def test_stream_event_order(alice, standin_catalog):
    response = ask(alice.client(), stream=True, input='Go <<standin {"reasoning": "Hmm", "chunks": 2}>>')
    events, raw = sse_events(response)
    assert raw.startswith(b": GATEWAY PROCESSING") and raw.endswith(b"data: [DONE]\n\n")
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    final = events[-1]["response"]
    assert [item["type"] for item in final["output"]] == ["reasoning", "message"]
    assert final["usage"]["output_tokens"] > 0


def test_stream_falls_back_before_the_first_byte(alice, standin_catalog):
    point_provider("standin-chat", standin_catalog, "status=503")
    point_provider("standin-responses", standin_catalog, "cut_after=1")  # cut before any content
    events, _ = sse_events(ask(alice.client(), stream=True))
    assert events[-1]["type"] == "response.completed"
    record = Generation.objects.get(account_id=alice.account_id)
    assert [a["status"] for a in record.provider_responses] == [503, None, 200]
    assert record.provider == "standin-anthropic"


def test_stream_errors_before_opening_are_http_errors(alice, standin_catalog):
    all_fail(standin_catalog, "status=503")
    response = ask(alice.client(), stream=True)
    assert_error_envelope(response, 503)


def test_mid_stream_cut_fails_in_band_and_bills_what_was_generated(alice, standin_catalog):
    all_fail(standin_catalog, "cut_after=3,chunks=6,text=abcdefghijklmnopqrstuvwxyz0123456789")
    events, raw = sse_events(ask(alice.client(), stream=True))
    types = [e["type"] for e in events]
    assert types[-2:] == ["error", "response.failed"] and raw.endswith(b"data: [DONE]\n\n")
    error, failed = events[-2], events[-1]["response"]
    assert error["param"] is None and error["code"] == "server_error"
    assert failed["status"] == "failed" and failed["error"]["code"] == "server_error"
    assert failed["error_type"] == "provider_unavailable"
    record = Generation.objects.get(account_id=alice.account_id)
    assert record.status == "failed" and record.tokens_output > 0 and record.cost > 0
    assert len(record.provider_responses) == 1, "no fallback once content reached the client"


def test_debug_echoes_the_upstream_body_without_credentials(alice, standin_catalog):
    response = ask(alice.client(), stream=True, debug={"echo_upstream_body": True}, instructions="Be brief")
    events, raw = sse_events(response)
    assert events[0]["type"] == "response.debug"
    body = events[0]["debug"]["echo_upstream_body"]
    assert body["messages"][0] == {"role": "system", "content": "Be brief"} and body["stream"] is True
    assert b"sk-standin-operator-key" not in raw


def test_keepalive_comments_while_waiting_for_the_first_token(alice, standin_catalog):
    with override_settings(STREAM_KEEPALIVE_SECONDS=0.05):
        response = ask(alice.client(), stream=True, input='Hi <<standin {"stall_ms": 400}>>')
        _, raw = sse_events(response)
    assert raw.count(b": GATEWAY PROCESSING") >= 3


def test_ledger_matches_generation_records_after_a_mixed_run(alice, standin_catalog):
    client = alice.client()
    ask(client)
    b"".join(ask(client, stream=True).streaming_content)
    point_provider("standin-chat", standin_catalog, "status=500")
    ask(client)  # fallback, charged once
    all_fail(standin_catalog, "status=400")
    ask(client)  # failed, not charged
    all_fail(standin_catalog, "cut_after=3,chunks=6,text=abcdefghijklmnopqrstuvwxyz")
    b"".join(ask(client, stream=True).streaming_content)  # cut mid-stream, partly charged
    charges = -(
        LedgerEntry.objects.filter(account_id=alice.account_id, kind=EntryKind.CHARGE).aggregate(s=Sum("amount"))["s"]
    )
    recorded = Generation.objects.filter(account_id=alice.account_id).aggregate(s=Sum("cost"))["s"]
    assert charges == recorded > 0
    ledger = LedgerEntry.objects.filter(account_id=alice.account_id).aggregate(s=Sum("amount"))["s"]
    assert Account.objects.get(pk=alice.account_id).balance == ledger == Decimal("10") - charges
    assert Generation.objects.filter(account_id=alice.account_id).count() == 5


def test_generation_endpoint_is_scoped_to_the_account(alice, bob_other_account, standin_catalog):
    response = ask(alice.client())
    generation_id = response["X-Generation-Id"]
    data = alice.client().get("/api/v1/generation", {"id": generation_id}).json()["data"]
    assert data["id"] == generation_id and data["provider_responses"][0]["status"] == 200
    assert "Hello" not in json.dumps(data)  # no prompt or completion text
    assert_error_envelope(bob_other_account.client().get("/api/v1/generation", {"id": generation_id}), 404)
    assert_error_envelope(alice.client().get("/api/v1/generation"), 400)


def test_session_header_and_identity_hashing(alice, standin_catalog):
    response = ask(alice.client(), headers={"HTTP_X_SESSION_ID": "sess-42"}, user="end-user-7")
    assert generation(response).session_id == "sess-42"
    sent = standin_catalog.requests_for("/chat/completions")[-1]["body"]
    assert sent["user"] != "end-user-7" and len(sent["user"]) == 32  # a keyed hash, never the raw value
    again = ask(
        alice.client(), headers={"HTTP_X_SESSION_ID": "other"}, session_id="body-wins", safety_identifier="end-user-7"
    )
    assert generation(again).session_id == "body-wins"
    assert standin_catalog.requests_for("/chat/completions")[-1]["body"]["user"] == sent["user"]  # stable
    ask(alice.client())
    account_identity = standin_catalog.requests_for("/chat/completions")[-1]["body"]["user"]
    assert account_identity not in (sent["user"], None)


def test_stream_function_call_events(alice, standin_catalog):
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}]
    events, _ = sse_events(
        ask(alice.client(), stream=True, tools=tools, input='Weather? <<standin {"tool_call": "auto"}>>')
    )
    types = [e["type"] for e in events]
    assert types == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    done = events[5]
    assert done["name"] == "get_weather" and json.loads(done["arguments"]) == {"location": "Paris"}
    assert events[-1]["response"]["output"][0]["type"] == "function_call"


def test_error_bodies_carry_gateway_metadata_when_asked(alice, standin_catalog):
    all_fail(standin_catalog, "status=500")
    body = assert_error_envelope(ask(alice.client(), headers={"HTTP_X_GATEWAY_EXPERIMENTAL_METADATA": "enabled"}), 502)
    meta = body["gateway_metadata"]
    assert meta["attempt"] == 3 and meta["is_byok"] is False
    assert [a["status"] for a in meta["attempts"]] == [500, 500, 500]
    assert "gateway_metadata" not in assert_error_envelope(ask(alice.client()), 502)


def test_staff_added_provider_is_routable_at_once(alice, standin_catalog):
    from django.contrib.auth.models import User
    from django.test import Client

    from routing.models import Provider

    User.objects.create_superuser("staff", "s@example.com", "pw")
    staff = Client()
    staff.login(username="staff", password="pw")
    assert (
        staff.post(
            "/admin/routing/provider/add/",
            {
                "slug": "my-llm",
                "name": "My LLM",
                "adapter": "anthropic",
                "credential_kind": "api_key",
                "base_url": f"{standin_catalog.url}/v1",
                "status": "active",
                "allow_private_network": "on",
                "new_credential": "sk-my-llm-key",
                "endpoints-TOTAL_FORMS": "0",
                "endpoints-INITIAL_FORMS": "0",
            },
        ).status_code
        == 302
    )
    assert (
        staff.post(
            "/admin/routing/model/add/",
            {
                "id": "acme/new",
                "name": "New",
                "kind": "chat",
                "context_length": 8192,
                "created": 0,
                "input_modalities": '["text"]',
                "output_modalities": '["text"]',
                "supported_parameters": "[]",
                "endpoints-TOTAL_FORMS": "1",
                "endpoints-INITIAL_FORMS": "0",
                "endpoints-0-provider": Provider.objects.get(slug="my-llm").pk,
                "endpoints-0-upstream_model": "new-1",
                "endpoints-0-price_prompt": "1",
                "endpoints-0-price_completion": "2",
                "endpoints-0-price_request": "0",
                "endpoints-0-context_length": "8192",
                "endpoints-0-quantization": "unknown",
                "endpoints-0-enabled": "on",
            },
        ).status_code
        == 302
    )
    response = ask(alice.client(), model="acme/new")
    assert response.status_code == 200 and response.json()["model"] == "acme/new"
    received = standin_catalog.requests_for("/messages")[-1]
    assert received["credential"] == "sk-my-llm-key" and received["body"]["model"] == "new-1"


@pytest.mark.parametrize("stream", [False, True])
def test_malformed_upstream_answers_fall_back(alice, standin_catalog, stream):
    point_provider("standin-chat", standin_catalog, "malformed=1")
    response = ask(alice.client(), stream=stream)
    if stream:
        events, _ = sse_events(response)
        assert events[-1]["type"] == "response.completed"
    else:
        assert response.status_code == 200
    record = Generation.objects.get(account_id=alice.account_id)
    assert [a["provider_name"] for a in record.provider_responses] == ["standin-chat", "standin-responses"]
    assert record.provider_responses[0]["error_type"] == "provider_unavailable"


def test_an_unexpected_failure_releases_the_hold(alice, standin_catalog, monkeypatch):
    from routing import upstream

    def explode(**kwargs):
        raise RuntimeError("bug in the gateway")

    monkeypatch.setattr(upstream, "call", explode)
    response = ask(alice.client())
    body = assert_error_envelope(response, 500)
    assert "bug" not in body["error"]["message"]
    assert Account.objects.get(pk=alice.account_id).balance == Decimal("10")
    assert Generation.objects.get(account_id=alice.account_id).status == "failed"
    ledger = LedgerEntry.objects.filter(account_id=alice.account_id).aggregate(s=Sum("amount"))["s"]
    assert ledger == Decimal("10")


def test_a_key_credit_limit_is_enforced_end_to_end(alice, standin_catalog):
    client = alice.client(management=True)
    created = client.post(
        "/api/v1/keys", {"name": "capped", "limit": 0.005, "limit_reset": "daily"}, format="json"
    ).json()
    capped = APIClient()
    capped.credentials(HTTP_AUTHORIZATION=f"Bearer {created['key']}")
    # A request whose worst case fits the remaining limit is served and counted against the key.
    assert (
        capped.post(
            "/api/v1/responses",
            {"model": "standin/echo", "input": "Hi", "max_output_tokens": 100, "provider": {"sort": "price"}},
            format="json",
        ).status_code
        == 200
    )
    record = client.get(f"/api/v1/keys/{created['data']['hash']}").json()["data"]
    assert 0 < record["usage_daily"] < 0.005 and record["limit_remaining"] < 0.005
    # One whose worst case does not fit is refused before any upstream call.
    before = len(standin_catalog.received)
    body = assert_error_envelope(
        capped.post(
            "/api/v1/responses", {"model": "standin/echo", "input": "Hi", "max_output_tokens": 4096}, format="json"
        ),
        402,
    )
    assert "limit" in body["error"]["message"] and len(standin_catalog.received) == before
