"""The request pipeline (responses_api.pipeline): stages run in order and say so in gateway_metadata.pipeline
(an empty list when no stage ran, as before); a blocking pre-stage is a 4xx before any hold or
upstream call; byok decrypts a candidate's key only when that candidate is tried."""

from dataclasses import replace

import pytest

import byok.selectors
from gateway.billing.models import Generation
from responses_api import stages
from routing.canonical import OutputMessage
from routing.stages import Block
from tests.support import assert_error_envelope, sse_events

METADATA = {"HTTP_X_GATEWAY_METADATA": "enabled"}


def add_key(persona, provider: str, key: str, **fields) -> None:
    response = persona.client(management=True).post(
        "/api/v1/byok", {"provider": provider, "key": key, **fields}, format="json"
    )
    assert response.status_code == 201, response.content


def ask(client, *, stream=False, **body):
    return client.post(
        "/api/v1/responses",
        {"model": "standin/echo", "input": "Hello", "provider": {"sort": "price"}, "stream": stream, **body},
        format="json",
        **METADATA,
    )


class Instruct:
    type, name = "request_plugin", "instruct"

    def __call__(self, request, ctx):
        return replace(request, instructions="Be brief")


class Watch:
    type, name = "response_plugin", "watch"

    def wants(self, ctx):
        return True

    def __call__(self, response, ctx):
        return response


class Refuse:
    type, name = "guardrail", "refuse"

    def __call__(self, request, ctx):
        return Block("This request is not allowed here", status=403, metadata={"patterns": ["secret"]})


@pytest.fixture
def configured(monkeypatch):
    def install(pre=(), post=()):
        monkeypatch.setattr(stages, "PRE_STAGES", list(pre))
        monkeypatch.setattr(stages, "POST_STAGES", list(post))

    return install


def test_no_stage_an_empty_pipeline(alice, standin_catalog):
    response = ask(alice.client())
    assert response.status_code == 200
    assert response.json()["gateway_metadata"]["pipeline"] == []


def test_stages_run_in_order_and_are_listed(alice, standin_catalog, configured):
    configured(pre=[Instruct()], post=[Watch()])
    response = ask(alice.client())
    assert response.status_code == 200
    assert response.json()["gateway_metadata"]["pipeline"] == [
        {"type": "request_plugin", "name": "instruct", "summary": "changed", "data": {}},
        {"type": "response_plugin", "name": "watch", "summary": "passed", "data": {}},
    ]
    sent = standin_catalog.requests_for("/chat/completions")[-1]["body"]
    assert sent["messages"][0] == {"role": "system", "content": "Be brief"}  # the changed request was sent


def test_a_blocking_pre_stage_is_a_4xx_before_hold_and_upstream(alice, standin_catalog, configured):
    configured(pre=[Refuse()])
    before = len(standin_catalog.requests_for("/chat/completions"))
    body = assert_error_envelope(ask(alice.client()), 403)
    assert body["error"]["message"] == "This request is not allowed here"
    assert body["error"]["metadata"]["patterns"] == ["secret"]
    assert len(standin_catalog.requests_for("/chat/completions")) == before
    assert not Generation.objects.filter(account_id=alice.account_id).exists()


def test_keys_are_decrypted_only_for_the_candidates_tried(alice, multi, monkeypatch):
    add_key(alice, "alpha", "byok-alpha-1")
    add_key(alice, "alpha", "byok-alpha-2")
    add_key(alice, "alpha", "byok-alpha-fb", is_fallback=True)
    opened = []
    real = byok.selectors.unseal
    monkeypatch.setattr(byok.selectors, "unseal", lambda sealed, aad: opened.append(aad) or real(sealed, aad=aad))
    response = alice.client().post(
        "/api/v1/responses", {"model": "multi/model", "input": "Hi", "provider": {"only": ["alpha"]}}, format="json"
    )
    assert response.status_code == 200 and response.json()["usage"]["is_byok"] is True
    assert len(opened) == 1 and opened[0].startswith("byok:")  # the first key only: it served


class Shout:
    """A response plugin that rewrites the answer's text."""

    type, name = "response_plugin", "shout"

    def wants(self, ctx):
        return True

    def __call__(self, response, ctx):
        output = tuple(
            replace(item, text=item.text.upper()) if isinstance(item, OutputMessage) else item
            for item in response.output
        )
        return replace(response, output=output)


class Withhold:
    type, name = "response_plugin", "withhold"

    def wants(self, ctx):
        return True

    def __call__(self, response, ctx):
        return Block("The answer was withheld", status=403)


def test_a_post_stage_sees_a_streamed_answer_before_the_client(alice, standin_catalog, configured):
    configured(post=[Shout()])
    events, raw = sse_events(ask(alice.client(), stream=True))
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text and text == text.upper()  # only the changed answer went out
    completed = events[-1]
    assert completed["type"] == "response.completed"
    assert completed["response"]["output"][0]["content"][0]["text"] == text
    assert completed["response"]["gateway_metadata"]["pipeline"] == [
        {"type": "response_plugin", "name": "shout", "summary": "changed", "data": {}}
    ]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert raw.endswith(b"data: [DONE]\n\n")


def test_a_post_stage_refusing_a_stream_ends_it_failed_and_billed(alice, standin_catalog, configured):
    configured(post=[Withhold()])
    response = ask(alice.client(), stream=True)
    events, _ = sse_events(response)
    kinds = [e["type"] for e in events]
    assert kinds == ["response.created", "response.in_progress", "error", "response.failed"]  # no answer leaked
    assert events[2]["message"] == "The answer was withheld"
    failed = events[-1]["response"]
    assert failed["error"]["message"] == "The answer was withheld" and failed["output"] == []
    record = Generation.objects.get(pk=response["X-Generation-Id"])
    assert record.cost > 0 and record.tokens_output > 0  # generated, so billed, as on the JSON path


class Priced:
    """A pre-stage that made a model call of its own (as moderation or OCR do): its cost is held and charged."""

    type, name, plugin_ids = "request_plugin", "priced", ("moderation",)

    def __call__(self, request, ctx):
        from decimal import Decimal

        from routing.stages import Staged, StageEntry

        entry = StageEntry(type=self.type, name=self.name, outcome="checked", cost_usd=Decimal("0.25"))
        return Staged(request=request, entries=(entry,), cost_usd=Decimal("0.25"), record={"moderation_latency": 7})


def test_a_plugin_no_stage_honours_is_refused_not_ignored(alice, standin_catalog, configured):
    configured()
    body = assert_error_envelope(ask(alice.client(), plugins=[{"id": "response-healing"}, {"id": "web"}]), 400)
    assert "plugins[0]" in body["error"]["message"] and "response-healing" in body["error"]["message"]
    assert not Generation.objects.filter(account_id=alice.account_id).exists()
    # Turned off, it asks nothing of the gateway: served.
    assert ask(alice.client(), plugins=[{"id": "web", "enabled": False}]).status_code == 200


def test_a_stage_cost_is_held_charged_and_recorded(alice, standin_catalog, configured):
    configured()
    plain = ask(alice.client()).json()["usage"]["cost"]
    configured(pre=[Priced()])
    response = ask(alice.client(), plugins=[{"id": "moderation"}])
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["gateway_metadata"]["pipeline"][0]["cost_usd"] == 0.25
    generation = Generation.objects.get(id="gen-" + body["id"].removeprefix("resp_"))
    assert generation.moderation_latency == 7
    assert float(generation.cost) == pytest.approx(plain + 0.25)
    assert body["usage"]["cost"] == pytest.approx(plain + 0.25)


def test_a_tool_no_stage_runs_is_refused_not_dropped(alice, standin_catalog):
    before = len(standin_catalog.requests_for("/chat/completions"))
    for tool in ({"type": "web_search"}, {"type": "gateway:bash"}, {"type": "code_interpreter"}):
        body = assert_error_envelope(
            ask(alice.client(), tools=[{"type": "function", "name": "f", "parameters": {"type": "object"}}, tool]), 400
        )
        assert "tools[1]" in body["error"]["message"] and tool["type"] in body["error"]["message"]
    assert len(standin_catalog.requests_for("/chat/completions")) == before
    tools = [{"type": "function", "name": "f", "parameters": {"type": "object"}}]
    assert ask(alice.client(), tools=tools).status_code == 200


def test_a_plugin_field_the_plugin_does_not_have_is_refused_not_ignored(alice, standin_catalog):
    for plugin in ({"id": "web", "mode": "fast"}, {"id": "response-healing", "strict": True}):
        body = assert_error_envelope(ask(alice.client(), plugins=[plugin]), 400)
        (field,) = set(plugin) - {"id"}
        assert field in body["error"]["message"] and plugin["id"] in body["error"]["message"]


def test_a_plugin_given_twice_or_with_an_unknown_nested_field_is_refused(alice, standin_catalog):
    twice = [{"id": "response-healing"}, {"id": "response-healing", "enabled": False}]
    body = assert_error_envelope(ask(alice.client(), plugins=twice), 400)
    assert "given twice" in body["error"]["message"]
    nested = [{"id": "file-parser", "pdf": {"engine": "pdf-text", "engnie": "x"}}]
    body = assert_error_envelope(ask(alice.client(), plugins=nested), 400)
    assert "pdf.engnie" in body["error"]["message"]
