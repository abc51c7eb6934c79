"""Streamed citations: each url_citation known during a stream goes out as a `response.output_text.annotation.added`
event (item_id, output_index, content_index, annotation_index, annotation: the reference's AnnotationAddedEvent)
while its output_text part is open, before output_text.done, in the order the part's annotations end up. The
provider's own search (OpenAI Responses, Anthropic, Chat Completions search models: relayed live) and the web
plugin's citations (an answer checked by its post-stage, then replayed) alike; the openai SDK parses every event
(ResponseOutputTextAnnotationAddedEvent) and the openrouter SDK knows each one."""

from decimal import Decimal

import pytest
from openai import OpenAI
from openai.types.responses import ResponseOutputTextAnnotationAddedEvent, ResponseStreamEvent
from openrouter import OpenRouter
from pydantic import TypeAdapter

from gateway.billing.provisioning import account_provision
from tests.plugins.test_hosted_tools import load_hosted_catalog
from tests.plugins.test_web_plugin import ANSWER, DOCS, LAUNCH, answer_with, searxng  # noqa: F401 (fixture)
from tests.plugins.test_web_plugin import ask as ask_web
from tests.support import Persona, sse_events

EVENTS = TypeAdapter(ResponseStreamEvent)
WEB = {"type": "web_search"}


def assert_announced(events: list[dict]) -> list[dict]:
    """Every annotation of the message's first output_text part was announced while the part was open, in order,
    and each event parses as the openai SDK's type; returns the announced annotations."""
    for event in events:
        EVENTS.validate_python(event)  # every event, as the SDK's discriminated union reads it
    types = [e["type"] for e in events]
    (done,) = [e for e in events if e["type"] == "response.content_part.done" and e["part"]["type"] == "output_text"]
    added = [e for e in events if e["type"] == "response.output_text.annotation.added"]
    assert added, "no annotation.added event"
    assert [e["annotation"] for e in added] == done["part"]["annotations"]
    assert [e["annotation_index"] for e in added] == list(range(len(added)))
    text_done = types.index("response.output_text.done")
    for event in added:
        assert types.index("response.output_text.annotation.added") > types.index("response.content_part.added")
        assert events.index(event) < text_done
        assert (event["item_id"], event["output_index"], event["content_index"]) == (
            done["item_id"],
            done["output_index"],
            done["content_index"],
        )
        typed = ResponseOutputTextAnnotationAddedEvent.model_validate(event)
        assert typed.annotation is not None and typed.annotation.type == "url_citation"
    return [e["annotation"] for e in added]


@pytest.fixture
def hosted(standin_catalog):
    load_hosted_catalog()
    return standin_catalog


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("standin/search", "standin-responses"),
        ("standin/search", "standin-anthropic"),
        ("standin/search-preview", "standin-chat"),
    ],
)
def test_the_providers_citations_are_announced_as_they_arrive(alice, hosted, model, provider):
    payload = {"model": model, "input": "What happened at the launch?", "tools": [WEB], "stream": True}
    payload["provider"] = {"only": [provider]}
    response = alice.client().post("/api/v1/responses", payload, format="json")
    assert response.status_code == 200
    events, _ = sse_events(response)
    announced = assert_announced(events)
    part = next(item for item in events[-1]["response"]["output"] if item["type"] == "message")["content"][0]
    assert announced == part["annotations"] and len(announced) == 3
    for annotation in announced:
        assert part["text"][annotation["start_index"] : annotation["end_index"]] == annotation["title"]


def test_the_web_plugins_citations_are_announced_too(alice, searxng):  # noqa: F811 (the fixture)
    response = ask_web(alice, f"Tell me {answer_with(ANSWER)}", plugins=[{"id": "web"}], stream=True)
    assert response.status_code == 200
    events, _ = sse_events(response)
    assert [a["url"] for a in assert_announced(events)] == [LAUNCH, DOCS]


@pytest.fixture
def erin(transactional_db, standin_catalog):
    load_hosted_catalog()
    return Persona(account_provision(name="erin", plan="payg", credits=Decimal("5")))


@pytest.mark.live
def test_the_sdks_parse_the_announced_citations(live_gateway, erin):
    client = OpenAI(base_url=live_gateway.api, api_key=erin.api_key, max_retries=0, timeout=20)
    events = list(client.responses.create(model="standin/search", input="The launch?", tools=[WEB], stream=True))
    added = [e for e in events if isinstance(e, ResponseOutputTextAnnotationAddedEvent)]
    assert len(added) == 3 and all(e.annotation.type == "url_citation" for e in added)  # type: ignore[union-attr]
    final = events[-1].response  # type: ignore[union-attr]
    cited = final.output[-1].content[0].annotations
    assert [a.url for a in cited] == [e.annotation.url for e in added]  # type: ignore[union-attr]
    with client.responses.stream(model="standin/search", input="The launch?", tools=[WEB]) as stream:
        streamed = stream.get_final_response()  # the SDK's own accumulation of the events
    assert [a.url for a in streamed.output[-1].content[0].annotations] == [a.url for a in cited]  # type: ignore[union-attr]
    with OpenRouter(api_key=erin.api_key, server_url=live_gateway.api) as router:
        response = router.responses.send(model="standin/search", input="The launch?", tools=[WEB], stream=True)
        with response as event_stream:
            parsed = list(event_stream)
    assert not [e for e in parsed if type(e).__name__.startswith("Unknown")], "every event parsed as a known type"
    assert sum(1 for e in parsed if getattr(e, "type", "") == "response.output_text.annotation.added") == 3
