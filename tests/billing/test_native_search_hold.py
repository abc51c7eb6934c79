"""The provider's own web searches are part of the credit hold: a request naming a web_search tool holds the most
searches each call may make (routing.providers.hosted.SEARCHES_PER_CALL, told to the provider) at the endpoint's
web_search price, so an account that can pay the tokens but not the searches is refused (402) before any upstream
call, and one that can is charged exactly the tokens plus the searches made. A provider reporting more searches
than it was allowed is billed for the allowed number (the rest is an anomaly on the record). Against the stand-in
(routing/standin/hosted.py) on PostgreSQL, with the books checked after each request."""

from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command

from gateway.accounts.models import Account
from gateway.billing.models import Generation
from gateway.billing.provisioning import account_provision
from routing.providers.hosted import SEARCHES_PER_CALL
from tests.billing.books import assert_books
from tests.golden import FIXTURES
from tests.support import Persona, assert_error_envelope

CATALOG = Path(FIXTURES) / "web" / "hosted_catalog.yaml"
MODEL_PATHS = ("/chat/completions", "/responses", "/messages")
SEARCH_PRICE = Decimal("0.01")  # standin/search's endpoints (hosted_catalog.yaml): prompt 1, completion 2 per M
WEB = {"type": "web_search"}


@pytest.fixture
def hosted_catalog(standin_catalog):
    call_command("load_catalog", str(CATALOG), stdout=open("/dev/null", "w"))  # noqa: SIM115
    return standin_catalog


def persona(name: str, credits: Decimal) -> Persona:
    return Persona(account_provision(name=name, plan="payg", credits=credits))


def ask(persona, *, provider: str, tools=None, plugins=None, stream=False):
    payload = {
        "model": "standin/search",
        "input": "What happened at the launch?",
        "max_output_tokens": 1000,
        "provider": {"only": [provider]},
        "stream": stream,
        **({"tools": tools} if tools else {}),
        **({"plugins": plugins} if plugins else {}),
    }
    return persona.client().post("/api/v1/responses", payload, format="json")


def model_calls(standin) -> list[dict]:
    return [call for path in MODEL_PATHS for call in standin.requests_for(path)]


@pytest.mark.parametrize("provider", ["standin-responses", "standin-anthropic"])
def test_an_account_that_can_pay_the_tokens_but_not_the_searches_is_refused_before_the_call(hosted_catalog, provider):
    # given: enough for the tokens (about 0.002 USD held) but not for the searches (10 x 0.01 USD)
    alice = persona("alice", Decimal("0.05"))
    plain = ask(alice, provider=provider)
    assert plain.status_code == 200, plain.content  # the tokens alone are affordable
    hosted_catalog.clear()
    # when: the same request with the provider's web search, as a tool and as the web plugin's native engine
    for body in ({"tools": [WEB]}, {"plugins": [{"id": "web", "engine": "native"}]}):
        refused = ask(alice, provider=provider, **body)
        # then: 402 before any upstream call, nothing held
        assert_error_envelope(refused, 402)
        assert model_calls(hosted_catalog) == []
    account = assert_books(alice.account_id)
    assert account.reserved == 0


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("provider", "path"), [("standin-responses", "/responses"), ("standin-anthropic", "/messages")]
)
def test_an_account_that_can_pay_is_charged_exactly_the_tokens_and_the_searches(hosted_catalog, provider, path, stream):
    alice = persona("alice", Decimal("0.5"))
    before = Account.objects.get(pk=alice.account_id).balance
    response = ask(alice, provider=provider, tools=[WEB], stream=stream)
    assert response.status_code == 200, response.content
    if stream:
        b"".join(response.streaming_content)
    (call,) = hosted_catalog.requests_for(path)
    # the provider is told the most searches the hold covers
    if path == "/responses":
        assert call["body"]["max_tool_calls"] == SEARCHES_PER_CALL
    else:
        assert call["body"]["tools"][-1]["max_uses"] == SEARCHES_PER_CALL
    record = Generation.objects.get(pk=response["X-Generation-Id"])
    tokens = (record.tokens_input * 1 + record.tokens_output * 2) / Decimal(1_000_000)
    assert record.tokens_output > 0 and record.usage_anomaly is None
    assert record.cost == tokens + SEARCH_PRICE  # one search made, one billed
    account = assert_books(alice.account_id)
    assert before - account.balance == record.cost and account.reserved == 0


def test_searches_beyond_what_the_provider_was_allowed_are_not_billed():
    """A provider (a BYOK endpoint can point anywhere) reporting 1,000,000 searches: billed for the allowed ones."""
    from routing.canonical import Usage
    from routing.pricing_usage import UsageBounds, clamp_usage

    bounds = UsageBounds(
        input_tokens=1000, output_tokens=80, held_input_tokens=50, held_output_tokens=16, web_searches=10
    )
    usage, reasons = clamp_usage(Usage(input_tokens=10, output_tokens=5, web_search_requests=1_000_000), bounds)
    assert usage == Usage(input_tokens=10, output_tokens=5, web_search_requests=10)
    assert reasons == ["web_search_requests above the 10 the request allowed"]
    # searches reported on a request that had no web search tool are not billed at all
    no_search = replace(bounds, web_searches=0)
    usage, _ = clamp_usage(Usage(input_tokens=10, output_tokens=5, web_search_requests=3), no_search)
    assert usage.web_search_requests == 0
    # another anomaly keeps the searches made (they were billed as zero before)
    usage, _ = clamp_usage(Usage(input_tokens=-1, output_tokens=5, web_search_requests=2), bounds)
    assert usage == Usage(input_tokens=0, output_tokens=5, web_search_requests=2)
