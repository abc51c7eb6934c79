"""Issue 29 item 7: the routes the official SDKs call, through the SDKs themselves against a live gunicorn
gateway: openai `models.retrieve`, openrouter `models.get` / `models.count`, and the openrouter SDK's metadata
option (`X-OpenRouter-Metadata`, an alias of `X-Gateway-Metadata`)."""

import json
from decimal import Decimal

import anthropic
import httpx
import openai
import pytest
import requests
from openai import OpenAI
from openrouter import OpenRouter

from gateway.billing.provisioning import account_provision
from tests.support import STANDIN_KEY, Persona

pytestmark = pytest.mark.live


@pytest.fixture
def fay(transactional_db, standin_catalog):
    """A funded account whose data is committed, so the gunicorn processes see it."""
    return Persona(account_provision(name="fay", plan="payg", credits=Decimal("5")))


def openai_client(live_gateway, persona) -> OpenAI:
    return OpenAI(base_url=live_gateway.api, api_key=persona.api_key, max_retries=0, timeout=20)


def test_openai_models_retrieve(live_gateway, fay):
    model = openai_client(live_gateway, fay).models.retrieve("standin/echo")
    assert model.id == "standin/echo" and model.object == "model" and model.owned_by == "standin"
    assert model.created > 0 and model.model_extra["context_length"] > 0  # the /models entry's fields too


def test_openai_models_retrieve_unknown_is_a_typed_404(live_gateway, fay):
    with pytest.raises(openai.NotFoundError):
        openai_client(live_gateway, fay).models.retrieve("standin/no-such-model")


def test_openrouter_models_get_and_count(live_gateway, fay):
    listed = requests.get(
        f"{live_gateway.api}/models", headers={"Authorization": f"Bearer {fay.api_key}"}, timeout=20
    ).json()
    with OpenRouter(api_key=fay.api_key, server_url=live_gateway.api) as client:
        got = client.models.get(author="standin", slug="echo")
        count = client.models.count()
    assert got.data.id == "standin/echo" and got.data.context_length > 0
    assert count.data.count == listed["total_count"] > 0


def test_openrouter_sdk_metadata_option_is_an_alias(live_gateway, fay):
    bodies: list[dict] = []

    def keep(response: httpx.Response) -> None:
        response.read()
        bodies.append(json.loads(response.content))

    http = httpx.Client(event_hooks={"response": [keep]}, timeout=20)
    with OpenRouter(api_key=fay.api_key, server_url=live_gateway.api, client=http) as client:
        result = client.chat.send(
            model="standin/echo",
            messages=[{"role": "user", "content": "Say hello"}],
            x_open_router_metadata="enabled",
        )
    assert result.choices[0].message.content == "Hello from the local stand-in provider."
    assert bodies[-1]["gateway_metadata"]["requested"] == "standin/echo"


def test_metadata_aliases_that_disagree_are_a_400(live_gateway, fay):
    response = requests.post(
        f"{live_gateway.api}/chat/completions",
        headers={
            "Authorization": f"Bearer {fay.api_key}",
            "X-Gateway-Metadata": "enabled",
            "X-OpenRouter-Metadata": "disabled",
        },
        json={"model": "standin/echo", "messages": [{"role": "user", "content": "Say hello"}]},
        timeout=20,
    )
    assert response.status_code == 400
    assert response.json()["error"]["metadata"]["headers"] == ["X-Gateway-Metadata", "X-OpenRouter-Metadata"]


def anthropic_client(live_gateway, persona) -> anthropic.Anthropic:
    # The SDK appends /v1/messages to its base URL.
    return anthropic.Anthropic(base_url=f"{live_gateway.url}/api", api_key=persona.api_key, max_retries=0, timeout=20)


def test_anthropic_count_tokens_is_the_hold_estimate(live_gateway, fay, standin_catalog):
    calls = len(standin_catalog.requests_for())
    counted = anthropic_client(live_gateway, fay).messages.count_tokens(
        model="standin/echo",
        system="s" * 40,
        messages=[{"role": "user", "content": "x" * 400}],
    )
    assert counted.input_tokens == 440 // 4 + 1  # 4 characters a token, as the request's hold counts them
    assert len(standin_catalog.requests_for()) == calls  # counted here, no upstream call


def test_anthropic_count_tokens_refuses_what_count_tokens_does_not_take(live_gateway, fay):
    client = anthropic_client(live_gateway, fay)
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.count_tokens(
            model="standin/echo", messages=[{"role": "user", "content": "hi"}], extra_body={"max_tokens": 5}
        )
    assert "max_tokens" in str(refused.value)
    with pytest.raises(anthropic.NotFoundError):
        client.messages.count_tokens(model="standin/no-such-model", messages=[{"role": "user", "content": "hi"}])


def failing_chat(live_gateway, persona) -> requests.Response:
    """A request only standin-chat may serve, whose upstream answers 500 to every key (so each is tried)."""
    return requests.post(
        f"{live_gateway.api}/chat/completions",
        headers={"Authorization": f"Bearer {persona.api_key}"},
        json={
            "model": "standin/echo",
            "provider": {"only": ["standin-chat"]},
            "messages": [{"role": "user", "content": 'Hi <<standin {"status": 500}>>'}],
        },
        timeout=20,
    )


def test_openrouter_sdk_byok_records_and_byok_only_routing(live_gateway, fay, standin_catalog):
    with OpenRouter(api_key=fay.management_key, server_url=live_gateway.api) as admin:
        created = admin.byok.create(provider="standin-chat", key="sk-fay-own", is_byok_only=True).data
        assert created.is_byok_only and created.is_required and not created.is_fallback
        assert created.declared_region is None and created.declared_zdr is None
        [listed] = admin.byok.list().result.data
        assert listed.id == created.id and listed.is_byok_only
        # byok-only: when the caller's key fails, the operator's key on that provider is never tried
        standin_catalog.clear()
        assert failing_chat(live_gateway, fay).status_code >= 500
        assert [r["credential"] for r in standin_catalog.requests_for("/chat/completions")] == ["sk-fay-own"]
        # both flags cleared through the SDK: shared capacity again, after the caller's key
        updated = admin.byok.update(id=created.id, is_byok_only=False, is_required=False).data
        assert not updated.is_byok_only and not updated.is_required
        assert admin.byok.get(id=created.id).data.is_byok_only is False
    standin_catalog.clear()
    failing_chat(live_gateway, fay)
    assert [r["credential"] for r in standin_catalog.requests_for("/chat/completions")] == ["sk-fay-own", STANDIN_KEY]


def test_byok_sdk_fields_refused_when_they_cannot_be_honoured(live_gateway, fay, standin_catalog):
    headers = {"Authorization": f"Bearer {fay.management_key}"}
    base = {"provider": "standin-chat", "key": "sk-fay-own"}
    for extra, field in [
        ({"declared_region": "europe"}, "declared_region"),
        ({"declared_zdr": True}, "declared_zdr"),
        ({"is_byok_only": True, "is_fallback": True}, "is_byok_only"),
        ({"is_byok_only": True, "shared_capacity": "always"}, "is_byok_only"),
    ]:
        response = requests.post(f"{live_gateway.api}/byok", headers=headers, json={**base, **extra}, timeout=20)
        assert response.status_code == 400, (extra, response.content)
        assert field in response.json()["error"]["message"] + json.dumps(response.json()["error"].get("metadata"))
    # the SDK's undeclared values (null) and a flag that agrees with shared_capacity are taken
    agreed = {**base, "declared_region": None, "declared_zdr": None, "is_required": True}
    response = requests.post(
        f"{live_gateway.api}/byok", headers=headers, json={**agreed, "shared_capacity": "outside_filter"}, timeout=20
    )
    assert response.status_code == 201, response.content
    assert response.json()["data"]["shared_capacity"] == "outside_filter"


def test_anthropic_sdk_with_the_openai_style_base_url(live_gateway, fay):
    """The Anthropic SDK appends `/v1/messages` to its base_url: `<root>/api/v1` (what the OpenAI SDKs take)
    works as well as `<root>/api`, for messages and count_tokens."""
    client = anthropic.Anthropic(base_url=live_gateway.api, api_key=fay.api_key, max_retries=0, timeout=20)
    message = client.messages.create(
        model="standin/echo", max_tokens=64, messages=[{"role": "user", "content": "Say hello"}]
    )
    counted = client.messages.count_tokens(model="standin/echo", messages=[{"role": "user", "content": "x" * 40}])
    assert message.content[0].text == "Hello from the local stand-in provider."
    assert counted.input_tokens == 40 // 4 + 1


def test_the_v1_alias_is_not_a_second_operation_in_the_schema(client):
    paths = client.get("/api/v1/openapi.json").json()["paths"]
    assert "/messages" in paths and "/messages/count_tokens" in paths
    assert not [path for path in paths if path.startswith("/v1/")]
