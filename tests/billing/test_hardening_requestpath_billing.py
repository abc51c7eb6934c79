"""Issue 9, items 8 and 13 against the stand-in provider over loopback HTTP and PostgreSQL: implausible
reported usage is clamped (the charge stays within the hold, the ledger consistent, the anomaly recorded),
and every error of POST /responses after authentication carries gateway_metadata when asked for."""

import json
import logging
from decimal import Decimal

import pytest
from django.test import override_settings

from gateway.accounts.models import Account
from gateway.billing.models import EntryKind, Generation, LedgerEntry
from routing.models import Provider
from routing.services import provider_credential_set
from tests.billing.books import assert_books
from tests.support import assert_error_envelope, point_provider

PROVIDERS = ["standin-chat", "standin-responses", "standin-anthropic"]
HUGE = {"input_tokens": 1_000_000_000, "output_tokens": 1_000_000_000}
METADATA = {"HTTP_X_GATEWAY_METADATA": "enabled"}


def ask(client, *, stream=False, headers=None, **body):
    payload = {"model": "standin/echo", "input": "Hello", **body}
    if stream:
        payload["stream"] = True
    return client.post("/api/v1/responses", payload, format="json", **(headers or {}))


def scripted(usage: dict, text: str = "Hello") -> str:
    return f"{text} <<standin {json.dumps(usage)}>>"


def sse_events(response) -> list[dict]:
    raw = b"".join(response.streaming_content).decode()
    events = []
    for block in raw.split("\n\n"):
        data = [line[6:] for line in block.split("\n") if line.startswith("data: ")]
        if data and data[0] != "[DONE]":
            events.append(json.loads("\n".join(data)))
    return events


def ledger_consistent(account_id) -> Decimal:
    return assert_books(account_id).balance


def charge_and_hold(generation_id: str) -> tuple[Decimal, Decimal]:
    charge = LedgerEntry.objects.get(generation_id=generation_id, kind=EntryKind.CHARGE)
    return -charge.amount, Generation.objects.get(pk=generation_id).held


# ---- item 8: reported usage is bounded ---------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_huge_reported_usage_is_clamped_to_the_hold(alice, standin_catalog, provider, stream, caplog):
    # Given an upstream that reports a billion input and output tokens for max_output_tokens 16
    caplog.set_level(logging.WARNING, logger="responses_api.run")
    before = ledger_consistent(alice.account_id)
    response = ask(
        alice.client(),
        stream=stream,
        max_output_tokens=16,
        provider={"only": [provider]},
        input=scripted(HUGE, "A private prompt"),
    )
    assert response.status_code == 200
    if stream:
        result = sse_events(response)[-1]["response"]
        assert result["status"] in ("completed", "incomplete")
    else:
        result = response.json()
    # Then the usage shown is the clamped one: the requested maximum of output, the estimated input
    record = Generation.objects.get(pk=response["X-Generation-Id"])
    usage = result["usage"]
    assert usage["output_tokens"] == 16 and 0 < usage["input_tokens"] < 100
    assert (record.tokens_output, record.tokens_input) == (16, usage["input_tokens"])
    # And the charge is at most the hold, the ledger consistent, the balance barely touched
    charged, held = charge_and_hold(record.id)
    assert 0 < charged <= held and charged == record.cost
    assert Decimal(str(usage["cost"])) == charged
    after = ledger_consistent(alice.account_id)
    assert before - after == charged < Decimal("0.001")
    # And the anomaly is on the generation record and in the log (without the prompt)
    anomaly = record.usage_anomaly
    assert anomaly["reported"]["output_tokens"] == 1_000_000_000
    assert anomaly["billed"]["output_tokens"] == 16 and anomaly["provider"] == provider
    assert any("output_tokens above" in reason for reason in anomaly["reasons"])
    assert any("input_tokens above" in reason for reason in anomaly["reasons"])
    logged = [r.getMessage() for r in caplog.records if "implausible usage" in r.getMessage()]
    assert len(logged) == 1 and record.id in logged[0] and "private prompt" not in logged[0]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_negative_usage_is_never_credited_and_the_output_is_estimated(alice, standin_catalog, stream):
    # Given an upstream that reports negative token counts for an answer with text
    response = ask(
        alice.client(),
        stream=stream,
        max_output_tokens=64,
        provider={"only": ["standin-responses"]},
        input=scripted({"input_tokens": -5000, "output_tokens": -7000}),
    )
    assert response.status_code == 200
    result = sse_events(response)[-1]["response"] if stream else response.json()
    usage = result["usage"]
    # Then nothing is negative: the output is estimated from its text (never free), within the request's limit
    assert 0 < usage["output_tokens"] <= 64 and usage["input_tokens"] > 0
    record = Generation.objects.get(pk=response["X-Generation-Id"])
    assert record.tokens_output == usage["output_tokens"] and record.cost > 0
    reasons = set(record.usage_anomaly["reasons"])
    assert {"negative input_tokens", "negative output_tokens"} <= reasons
    assert "output_tokens not reported: estimated from the text generated" in reasons
    charged, held = charge_and_hold(record.id)
    assert 0 < charged <= held
    assert ledger_consistent(alice.account_id) == Decimal("10") - charged


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_output_without_reported_usage_is_billed_from_its_text(alice, standin_catalog, provider, stream):
    # Given an upstream that answers with text but reports no tokens at all
    text = "word " * 80
    response = ask(
        alice.client(),
        stream=stream,
        provider={"only": [provider]},
        input=scripted({"input_tokens": 0, "output_tokens": 0}, text),
    )
    assert response.status_code == 200
    result = sse_events(response)[-1]["response"] if stream else response.json()
    # Then the output is estimated from the text generated (about 4 characters a token) and charged
    assert result["usage"]["output_tokens"] > 0 and result["usage"]["input_tokens"] > 0
    record = Generation.objects.get(pk=response["X-Generation-Id"])
    assert record.tokens_output == result["usage"]["output_tokens"]
    assert "output_tokens not reported: estimated from the text generated" in record.usage_anomaly["reasons"]
    charged, held = charge_and_hold(record.id)
    assert 0 < charged <= held and record.cost == charged
    ledger_consistent(alice.account_id)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_far_more_text_than_reported_is_billed_as_the_most_the_request_allowed(alice, standin_catalog, stream):
    # Given an upstream that sends 500 tokens' worth of text for max_output_tokens 16 but reports 5 output tokens
    response = ask(
        alice.client(),
        stream=stream,
        max_output_tokens=16,
        provider={"only": ["standin-chat"]},
        input=scripted({"input_tokens": 10, "output_tokens": 5, "text": "word " * 400}),
    )
    assert response.status_code == 200
    result = sse_events(response)[-1]["response"] if stream else response.json()
    # Then it is billed as the most output the request allowed, and the anomaly is recorded
    assert result["usage"]["output_tokens"] == 16
    record = Generation.objects.get(pk=response["X-Generation-Id"])
    assert record.tokens_output == 16
    assert "output text far longer than the reported output_tokens" in record.usage_anomaly["reasons"]
    charged, held = charge_and_hold(record.id)
    assert 0 < charged <= held
    ledger_consistent(alice.account_id)


def test_text_a_little_longer_than_reported_is_billed_as_reported(alice, standin_catalog):
    # Token counts and characters do not match exactly: modest differences are not anomalies
    response = ask(
        alice.client(),
        max_output_tokens=100,
        provider={"only": ["standin-chat"]},
        input=scripted({"input_tokens": 10, "output_tokens": 30, "text": "word " * 60}),
    )
    assert response.json()["usage"]["output_tokens"] == 30
    assert Generation.objects.get(pk=response["X-Generation-Id"]).usage_anomaly is None


def test_plausible_usage_is_billed_as_reported(alice, standin_catalog):
    # A few tokens over the requested maximum are within the margin: billed as reported, no anomaly
    response = ask(
        alice.client(),
        max_output_tokens=16,
        provider={"only": ["standin-chat"]},
        input=scripted({"input_tokens": 40, "output_tokens": 20}),
    )
    usage = response.json()["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (40, 20)
    record = Generation.objects.get(pk=response["X-Generation-Id"])
    assert record.usage_anomaly is None and record.tokens_output == 20
    charged, _ = charge_and_hold(record.id)
    assert charged == Decimal(40 * Decimal("0.5") + 20 * Decimal("1.5")) / 1_000_000
    ledger_consistent(alice.account_id)


def test_clamp_rules():
    from routing.canonical import Usage
    from routing.pricing_usage import UsageBounds, clamp_usage

    bounds = UsageBounds(input_tokens=1000, output_tokens=80, held_input_tokens=50, held_output_tokens=16)
    plausible = Usage(input_tokens=900, cached_tokens=100, output_tokens=80, reasoning_tokens=30)
    assert clamp_usage(plausible, bounds) == (plausible, [])
    usage, reasons = clamp_usage(
        Usage(input_tokens=10, cached_tokens=500, cache_write_tokens=7, output_tokens=5, reasoning_tokens=9), bounds
    )
    assert usage == Usage(input_tokens=10, cached_tokens=10, cache_write_tokens=0, output_tokens=5, reasoning_tokens=5)
    assert reasons == [
        "cached_tokens above input_tokens",
        "cache_write_tokens above input_tokens",
        "reasoning_tokens above output_tokens",
    ]
    usage, reasons = clamp_usage(Usage(input_tokens=float("nan"), output_tokens=81, reasoning_tokens=81), bounds)
    assert usage == Usage(input_tokens=0, output_tokens=16, reasoning_tokens=16)
    assert reasons[:2] == ["input_tokens is not a number", "output_tokens above the plausible 80"]


# ---- item 13: gateway_metadata on every error after authentication --------------------------------------


def metadata_of(response, status: int) -> dict:
    body = assert_error_envelope(response, status)
    meta = body["gateway_metadata"]
    assert set(meta) >= {"requested", "strategy", "region", "summary", "attempt", "is_byok", "endpoints", "pipeline"}
    assert isinstance(meta["endpoints"]["available"], list) and meta["endpoints"]["total"] == len(
        meta["endpoints"]["available"]
    )
    return meta


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_unknown_model_404(alice, standin_catalog, stream):
    meta = metadata_of(ask(alice.client(), stream=stream, model="nobody/nothing", headers=METADATA), 404)
    assert meta["requested"] == "nobody/nothing" and meta["attempt"] == 0 and meta["attempts"] == []
    assert "model_not_found" in meta["summary"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_context_400(alice, standin_catalog, stream):
    response = ask(alice.client(), stream=stream, input="word " * 30000, headers=METADATA)
    meta = metadata_of(response, 400)
    assert meta["requested"] == "standin/echo" and "context_length_exceeded" in meta["summary"]
    assert meta["endpoints"]["total"] == 3 and not any(e["selected"] for e in meta["endpoints"]["available"])


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_insufficient_credits_402(alice, standin_catalog, stream):
    Account.objects.filter(pk=alice.account_id).update(balance=Decimal("0"))
    meta = metadata_of(ask(alice.client(), stream=stream, headers=METADATA), 402)
    assert meta["requested"] == "standin/echo" and meta["attempts"] == [] and meta["endpoints"]["total"] == 3
    assert len(standin_catalog.received) == 0


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_no_credentials_404(alice, standin_catalog, stream, monkeypatch):
    monkeypatch.delenv("STANDIN_API_KEY", raising=False)
    for provider in Provider.objects.filter(slug__in=PROVIDERS):
        provider_credential_set(provider=provider, plaintext=None)
    meta = metadata_of(ask(alice.client(), stream=stream, headers=METADATA), 404)
    assert "no_endpoints" in meta["summary"] and meta["endpoints"]["total"] == 3


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_upstream_failure_502(alice, standin_catalog, stream):
    for slug in PROVIDERS:
        point_provider(slug, standin_catalog, "status=500")
    meta = metadata_of(ask(alice.client(), stream=stream, headers=METADATA), 502)
    assert [a["status"] for a in meta["attempts"]] == [500, 500, 500]


def test_invalid_request_400(alice, standin_catalog):
    meta = metadata_of(ask(alice.client(), temperature=7, headers=METADATA), 400)
    assert meta["requested"] == "standin/echo" and meta["attempt"] == 0


def test_malformed_json_400(alice, standin_catalog):
    response = alice.client().post("/api/v1/responses", b'{"model": ', content_type="application/json", **METADATA)
    assert metadata_of(response, 400)["requested"] == ""


def test_unknown_prompt_404(alice, standin_catalog):
    meta = metadata_of(ask(alice.client(), prompt={"id": "pmpt_1"}, headers=METADATA), 404)
    assert meta["requested"] == "standin/echo"


def test_management_key_403(alice, standin_catalog):
    metadata_of(ask(alice.client(management=True), headers=METADATA), 403)


@override_settings(GATEWAY_RATE_LIMIT="1/min")
def test_rate_limited_429(alice, standin_catalog):
    client = alice.client()
    assert ask(client, headers=METADATA).status_code == 200
    metadata_of(ask(client, headers=METADATA), 429)


def test_legacy_header_and_opt_out(alice, standin_catalog):
    legacy = ask(alice.client(), model="nobody/nothing", headers={"HTTP_X_GATEWAY_EXPERIMENTAL_METADATA": "enabled"})
    metadata_of(legacy, 404)
    assert "gateway_metadata" not in assert_error_envelope(ask(alice.client(), model="nobody/nothing"), 404)
    disabled = ask(alice.client(), model="nobody/nothing", headers={"HTTP_X_GATEWAY_METADATA": "disabled"})
    assert "gateway_metadata" not in assert_error_envelope(disabled, 404)


def test_not_before_authentication(standin_catalog):
    from rest_framework.test import APIClient

    client = APIClient()
    assert "gateway_metadata" not in assert_error_envelope(ask(client, headers=METADATA), 401)
    client.credentials(HTTP_AUTHORIZATION="Bearer sk-or-v1-" + "0" * 64)
    assert "gateway_metadata" not in assert_error_envelope(ask(client, headers=METADATA), 401)


@pytest.mark.parametrize("upstream_id", ["abc\x00def", "i" * 300, "a\ud800b", {"a": 1}])
def test_upstream_text_on_the_generation_record_is_storable(alice, upstream_id):
    """The upstream's response id is stored on the record: a NUL, a lone surrogate or more than the column holds
    failed the settlement after the upstream answered (a JSON answer became a 500; a stream stayed held)."""
    from gateway.billing.generations import GenerationRecord
    from gateway.billing.services import credits_reserve, generation_settle

    hold = credits_reserve(account_id=alice.account_id, amount=Decimal("1"))
    record = GenerationRecord(
        id=hold.id,
        account_id=alice.account_id,
        api_key_id=None,
        workspace_id=None,
        requested_model="standin/echo",
        upstream_id=upstream_id,
        finish_reason="stop\x00" * 100,
        cost=Decimal("0.5"),
    )
    assert generation_settle(reservation=hold, record=record, charge=True) == Decimal("0.5")
    stored = Generation.objects.get(pk=record.id)
    assert "\x00" not in stored.upstream_id and len(stored.upstream_id) <= 256
    assert stored.upstream_id.encode("utf-8") and stored.finish_reason == "stop" * 10
    assert stored.upstream_id == {"abc\x00def": "abcdef", "a\ud800b": "a\ufffdb"}.get(
        upstream_id if isinstance(upstream_id, str) else "", stored.upstream_id
    )
    assert assert_books(alice.account_id).balance == Decimal("9.5")
