"""The openrouter SDK's list calls, with the query parameters it sends by default (`offset=0&limit=500` on
/models, `offset=0&limit=50` on the other lists) and those a caller sets, still work against a live gunicorn
gateway now that GET routes refuse query parameters they do not take (issue 29); one the gateway cannot honour
comes back as a typed 400 saying why."""

from decimal import Decimal

import pytest
from openai import OpenAI
from openrouter import OpenRouter, errors

from gateway.billing.provisioning import account_provision
from tests.support import Persona

pytestmark = pytest.mark.live


@pytest.fixture
def gus(transactional_db, standin_catalog):
    """A funded account whose data is committed, so the gunicorn processes see it."""
    return Persona(account_provision(name="gus", plan="payg", credits=Decimal("5")))


def test_openrouter_sdk_list_calls_with_their_query_parameters(live_gateway, gus):
    with OpenRouter(api_key=gus.api_key, server_url=live_gateway.api) as client:
        models = client.models.list().result
        filtered = client.models.list(offset=0, limit=1, q="echo", output_modalities="text").result
        user = client.models.list_for_user(security={"bearer": gus.api_key}).result
        count = client.models.count()
        text_count = client.models.count(output_modalities="text")
    assert models.data and models.total_count == count.data.count > text_count.data.count > 0
    assert [model.id for model in filtered.data] == ["standin/echo"]
    assert {model.id for model in user.data} <= {model.id for model in models.data}
    with OpenRouter(api_key=gus.management_key, server_url=live_gateway.api) as admin:
        byok = admin.byok.list(provider="openai").result
        guardrails = admin.guardrails.list().result
        key_assignments = admin.guardrails.list_key_assignments().result
        member_assignments = admin.guardrails.list_member_assignments().result
        activity = admin.analytics.get_user_activity(request={"group_by": "workspace"})
        keys = admin.api_keys.list(include_disabled=True).data
    listed = {key.hash: key for key in keys}
    assert listed[gus.provisioned.inference_key.key.hash].last_used_at is None  # listing models is not a request
    assert listed[gus.provisioned.management_key.key.hash].external_user is None
    OpenAI(base_url=live_gateway.api, api_key=gus.api_key, max_retries=0).responses.create(
        model="standin/echo", input="Hello"
    )
    with OpenRouter(api_key=gus.management_key, server_url=live_gateway.api) as admin:
        used = admin.api_keys.get(hash=gus.provisioned.inference_key.key.hash).data
    assert used.last_used_at is not None and used.external_user is None
    assert byok.data == [] and guardrails.data == [] and activity.data == []
    assert key_assignments.data == [] and member_assignments.data == []


def test_an_sdk_parameter_the_gateway_cannot_honour_is_a_typed_400(live_gateway, gus):
    with OpenRouter(api_key=gus.api_key, server_url=live_gateway.api) as client:
        with pytest.raises(errors.BadRequestResponseError) as refused:
            client.models.list(category="programming")
    assert "category: not supported" in refused.value.data.error.message


def test_openai_models_list_and_retrieve(live_gateway, gus):
    client = OpenAI(base_url=live_gateway.api, api_key=gus.api_key, max_retries=0, timeout=20)
    assert "standin/echo" in {model.id for model in client.models.list()}
    assert client.models.retrieve("standin/echo").id == "standin/echo"
