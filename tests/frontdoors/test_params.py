"""Stop sequences, seed and logprobs end to end: the openai and anthropic SDKs against a live gateway, the three
front doors in process, and routing that sends each parameter only to endpoints whose API takes it (404 naming
the field when none can), all against the stand-in provider, which honours them in each wire format it speaks."""

import json
from decimal import Decimal

import anthropic
import httpx
import pytest
from openai import OpenAI

from byok.credentials import ProviderCredentials
from gateway.billing.models import Generation
from gateway.billing.provisioning import account_provision
from routing.accumulate import accumulate
from routing.canonical import CanonicalRequest, Message, OutputMessage, TextPart
from routing.providers.registry import ADAPTERS
from tests.frontdoors.test_chat import CHAT_WIRE, sse_chunks
from tests.frontdoors.test_chat import post as post_chat
from tests.frontdoors.test_messages import ANTHROPIC_WIRE, events
from tests.frontdoors.test_messages import post as post_message
from tests.support import Persona, assert_error_envelope

SAID = 'Go <<standin {"text": "alpha beta. gamma delta", "chunks": 3}>>'


def say(text: str, **script) -> str:
    return "Go <<standin " + json.dumps({"text": text, **script}) + ">>"


def chat(content: str = SAID, **fields) -> dict:
    return {"model": "standin/echo", "messages": [{"role": "user", "content": content}], **fields}


def provider_of(generation_id: str) -> str:
    return Generation.objects.get(id=generation_id).provider


# ---- the real SDKs on a live gateway --------------------------------------------------------------------------


@pytest.fixture
def erin(transactional_db, standin_catalog):
    """A funded account whose data is committed, so the gunicorn processes see it."""
    return Persona(account_provision(name="erin", plan="payg", credits=Decimal("5")))


def openai_client(live_gateway, persona) -> OpenAI:
    return OpenAI(base_url=live_gateway.api, api_key=persona.api_key, max_retries=0, timeout=20)


@pytest.mark.live
def test_openai_sdk_stop_seed_and_logprobs(live_gateway, erin, standin):
    standin.clear()
    completion = openai_client(live_gateway, erin).chat.completions.create(
        model="standin/echo",
        messages=[{"role": "user", "content": SAID}],
        stop=[". ", "zzz"],
        seed=7,
        logprobs=True,
        top_logprobs=2,
    )
    choice = completion.choices[0]
    assert choice.message.content == "alpha beta" and choice.finish_reason == "stop"
    tokens = choice.logprobs.content
    assert "".join(token.token for token in tokens) == "alpha beta"
    assert all(len(token.top_logprobs) == 2 and token.top_logprobs[0].token == token.token for token in tokens)
    assert all(token.logprob < 0 and bytes(token.bytes).decode() == token.token for token in tokens)
    [sent] = standin.requests_for("/chat/completions")  # only the Chat Completions wire takes all three
    assert sent["body"]["stop"] == [". ", "zzz"] and sent["body"]["seed"] == 7
    assert sent["body"]["logprobs"] is True and sent["body"]["top_logprobs"] == 2


@pytest.mark.live
def test_openai_sdk_stream_carries_logprobs_per_chunk(live_gateway, erin):
    stream = openai_client(live_gateway, erin).chat.completions.create(
        model="standin/echo",
        messages=[{"role": "user", "content": say("one two three four", chunks=2)}],
        logprobs=True,
        top_logprobs=1,
        stream=True,
    )
    chunks = [chunk for chunk in stream if chunk.choices]
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks)
    tokens = [token for chunk in chunks if chunk.choices[0].logprobs for token in chunk.choices[0].logprobs.content]
    assert text == "one two three four" and [token.token for token in tokens] == ["one", " two", " three", " four"]
    assert all(len(token.top_logprobs) == 1 for token in tokens)
    for chunk in chunks:  # each content chunk carries its own tokens
        if chunk.choices[0].delta.content:
            assert "".join(t.token for t in chunk.choices[0].logprobs.content) == chunk.choices[0].delta.content
    assert chunks[-1].choices[0].finish_reason == "stop"


@pytest.mark.live
def test_openai_sdk_stream_stops_at_a_stop_sequence(live_gateway, erin):
    stream = openai_client(live_gateway, erin).chat.completions.create(
        model="standin/echo", messages=[{"role": "user", "content": SAID}], stop="gamma", stream=True
    )
    chunks = [chunk for chunk in stream if chunk.choices]
    assert "".join(chunk.choices[0].delta.content or "" for chunk in chunks) == "alpha beta. "
    assert chunks[-1].choices[0].finish_reason == "stop"


@pytest.mark.live
def test_openai_sdk_seed_makes_sampled_output_repeatable(live_gateway, erin):
    client = openai_client(live_gateway, erin)

    def sample(seed: int) -> str:
        messages = [{"role": "user", "content": 'Pick words <<standin {"sample": 1}>>'}]
        completion = client.chat.completions.create(model="standin/echo", messages=messages, seed=seed)
        return completion.choices[0].message.content

    first = sample(3)
    assert sample(3) == first and len(first.split()) == 8
    assert sample(4) != first


@pytest.mark.live
def test_anthropic_sdk_stop_sequences(live_gateway, erin):
    client = anthropic.Anthropic(base_url=f"{live_gateway.url}/api", api_key=erin.api_key, max_retries=0, timeout=20)
    content = say("one two STOP three")
    message = client.messages.create(
        model="standin/echo",
        max_tokens=100,
        messages=[{"role": "user", "content": content}],
        stop_sequences=["STOP", "never"],
        extra_body=ANTHROPIC_WIRE,
    )
    assert message.content[0].text == "one two "
    assert message.stop_reason == "stop_sequence" and message.stop_sequence == "STOP"
    with client.messages.stream(
        model="standin/echo",
        max_tokens=100,
        messages=[{"role": "user", "content": content}],
        stop_sequences=["STOP"],
        extra_body=ANTHROPIC_WIRE,
    ) as stream:
        final = stream.get_final_message()
    assert final.content[0].text == "one two " and final.stop_reason == "stop_sequence"
    assert final.stop_sequence == "STOP"


# ---- validation ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields,field",
    [
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ({"logprobs": "yes"}, "logprobs"),
        ({"stop": list("abcde")}, "stop"),
        ({"stop": ""}, "stop"),
        ({"stop": ["a", 1]}, "stop"),
        ({"seed": "7"}, "seed"),
        ({"seed": 2**63}, "seed"),
    ],
)
def test_chat_refuses_bad_values_naming_the_field(alice, standin_catalog, fields, field):
    error = assert_error_envelope(post_chat(alice, chat(**fields)), 400)["error"]
    assert field in error["message"]


@pytest.mark.parametrize("stop", [[""], "STOP", [1]])
def test_messages_refuses_bad_stop_sequences(alice, standin_catalog, stop):
    response = post_message(
        alice,
        {
            "model": "standin/echo",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "x"}],
            "stop_sequences": stop,
        },
    )
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["type"] == "error" and "stop_sequences" in body["error"]["message"]


# ---- the front doors in process ------------------------------------------------------------------------------


def test_chat_json_logprobs_and_stop(alice, standin_catalog):
    response = post_chat(alice, chat(stop=". ", logprobs=True, top_logprobs=3))
    assert response.status_code == 200, response.content
    [choice] = response.json()["choices"]
    assert choice["message"]["content"] == "alpha beta" and choice["finish_reason"] == "stop"
    tokens = choice["logprobs"]["content"]
    assert [token["token"] for token in tokens] == ["alpha", " beta"] and choice["logprobs"]["refusal"] is None
    assert all(len(token["top_logprobs"]) == 3 for token in tokens)


def test_chat_without_logprobs_answers_null_logprobs(alice, standin_catalog):
    response = post_chat(alice, chat(**CHAT_WIRE))
    assert response.json()["choices"][0]["logprobs"] is None


def test_chat_stream_chunks_carry_their_tokens(alice, standin_catalog):
    response = post_chat(alice, chat(content=say("a b c d", chunks=2), logprobs=True, stream=True))
    chunks = [json.loads(chunk) for chunk in sse_chunks(response) if chunk != "[DONE]"]
    content = [c["choices"][0] for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]
    assert [[t["token"] for t in choice["logprobs"]["content"]] for choice in content] == [["a", " b"], [" c", " d"]]
    assert all(t["top_logprobs"] == [] for choice in content for t in choice["logprobs"]["content"])


def test_messages_json_and_stream_name_the_stop_sequence(alice, standin_catalog):
    body = {
        "model": "standin/echo",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": say("one two STOP three")}],
        "stop_sequences": ["STOP"],
        **ANTHROPIC_WIRE,
    }
    answer = post_message(alice, body).json()
    assert answer["content"] == [{"type": "text", "text": "one two "}]
    assert answer["stop_reason"] == "stop_sequence" and answer["stop_sequence"] == "STOP"
    streamed = events(post_message(alice, {**body, "stream": True}))
    [delta] = [data["delta"] for kind, data in streamed if kind == "message_delta"]
    assert delta == {"stop_reason": "stop_sequence", "stop_sequence": "STOP"}


def test_messages_stop_on_a_chat_wire_ends_the_turn(alice, standin_catalog):
    """A Chat Completions upstream does not say which sequence stopped it: end_turn, the text cut all the same."""
    body = {
        "model": "standin/echo",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": say("one two STOP three")}],
        "stop_sequences": ["STOP"],
        **CHAT_WIRE,
    }
    answer = post_message(alice, body).json()
    assert answer["content"] == [{"type": "text", "text": "one two "}]
    assert answer["stop_reason"] == "end_turn" and answer["stop_sequence"] is None


def test_responses_top_logprobs_returns_logprobs(alice, standin_catalog, standin):
    standin.clear()
    body = {
        "model": "standin/echo",
        "input": say("hi there"),
        "top_logprobs": 2,
        "provider": {"order": ["standin-responses"]},
    }
    response = alice.client().post("/api/v1/responses", body, format="json")
    assert response.status_code == 200, response.content
    [part] = response.json()["output"][0]["content"]
    assert [token["token"] for token in part["logprobs"]] == ["hi", " there"]
    assert all(len(token["top_logprobs"]) == 2 and token["bytes"] for token in part["logprobs"])
    [sent] = standin.requests_for("/responses")
    assert sent["body"]["include"] == ["message.output_text.logprobs"] and sent["body"]["top_logprobs"] == 2


def test_responses_stream_deltas_carry_logprobs(alice, standin_catalog):
    body = {"model": "standin/echo", "input": say("hi there", chunks=2), "top_logprobs": 0, "stream": True}
    response = alice.client().post("/api/v1/responses", body, format="json")
    text = b"".join(response.streaming_content).decode()
    payloads = [json.loads(line[6:]) for line in text.split("\n") if line.startswith("data: {")]
    deltas = [p for p in payloads if p["type"] == "response.output_text.delta"]
    assert [[t["token"] for t in d["logprobs"]] for d in deltas] == [["hi"], [" there"]]
    [done] = [p for p in payloads if p["type"] == "response.output_text.done"]
    assert [t["token"] for t in done["logprobs"]] == ["hi", " there"]
    [completed] = [p for p in payloads if p["type"] == "response.completed"]
    assert len(completed["response"]["output"][0]["content"][0]["logprobs"]) == 2


# ---- routing by the parameters an endpoint honours ---------------------------------------------------------------


@pytest.mark.parametrize(
    "fields,served_by",
    [
        ({"seed": 1}, "standin-chat"),  # only the Chat Completions wire takes a seed
        ({"logprobs": True}, "standin-responses"),  # the Anthropic wire has no logprobs: the next in order has
        ({"stop": "x"}, "standin-chat"),  # the Responses wire has no stop sequences
    ],
)
def test_endpoints_that_cannot_honour_a_parameter_are_passed_over(alice, standin_catalog, standin, fields, served_by):
    order = {"provider": {"order": ["standin-anthropic", "standin-responses"], "allow_fallbacks": True}}
    if "stop" in fields:
        order = {"provider": {"order": ["standin-responses", "standin-chat"]}}
    standin.clear()
    response = post_chat(alice, chat(**fields, **order))
    assert response.status_code == 200, response.content
    answer = response.json()
    assert provider_of(answer["id"]) == served_by
    assert len(standin.received) == 1  # no attempt went to an endpoint that would have dropped the field
    if fields.get("logprobs"):  # the Responses wire's output_text.logprobs, in the Chat Completions shape
        tokens = answer["choices"][0]["logprobs"]["content"]
        assert "".join(token["token"] for token in tokens) == answer["choices"][0]["message"]["content"] != ""


@pytest.mark.parametrize(
    "fields,only,field",
    [
        ({"seed": 1}, ["standin-anthropic", "standin-responses"], "seed"),
        ({"logprobs": True, "top_logprobs": 1}, ["standin-anthropic"], "logprobs"),
        ({"stop": ["x"]}, ["standin-responses"], "stop"),
    ],
)
def test_no_endpoint_honouring_a_parameter_is_a_404_naming_it(alice, standin_catalog, standin, fields, only, field):
    standin.clear()
    response = post_chat(alice, chat(**fields, provider={"only": only}))
    error = assert_error_envelope(response, 404)["error"]
    assert field in error["message"] and error["metadata"]["param"] == field
    availability = error["metadata"]["availability"]
    assert availability["code"] == "constraint_filtered" and availability["constraint"]["field"] == field
    assert "require_parameters" in availability["excluded_by"]
    assert not standin.received


def test_messages_stop_sequences_with_no_honouring_endpoint_is_an_anthropic_404(alice, standin_catalog):
    body = {
        "model": "standin/echo",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "x"}],
        "stop_sequences": ["x"],
        "provider": {"only": ["standin-responses"]},
    }
    response = post_message(alice, body)
    assert response.status_code == 404, response.content
    error = response.json()["error"]
    assert error["type"] == "not_found_error" and "stop" in error["message"]


def test_responses_top_logprobs_is_never_sent_to_an_anthropic_endpoint(alice, standin_catalog):
    body = {"model": "standin/echo", "input": "hi", "top_logprobs": 1, "provider": {"only": ["standin-anthropic"]}}
    response = alice.client().post("/api/v1/responses", body, format="json")
    error = assert_error_envelope(response, 404)["error"]
    assert error["metadata"]["param"] == "logprobs"


# ---- Bedrock Converse through the stand-in ---------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["converse", "converse-stream"])
def test_bedrock_stop_sequences_and_the_one_that_stopped_it(standin, stream):
    """Converse takes inferenceConfig.stopSequences and reports the sequence that stopped a model that names it
    (Claude) in additionalModelResponseFields, when asked with additionalModelResponseFieldPaths."""
    adapter = ADAPTERS["bedrock"]
    request = CanonicalRequest(
        model="anthropic.claude-sonnet-4-5",
        input=(Message(role="user", content=(TextPart(say("one two STOP three")),)),),
        stop=("STOP", "never"),
        stream=stream,
    )
    upstream = adapter.build_request(request, base_url=standin.url, credentials=ProviderCredentials(api_key="k"))
    assert upstream.body["inferenceConfig"]["stopSequences"] == ["STOP", "never"]
    assert upstream.body["additionalModelResponseFieldPaths"] == ["/stop_sequence"]
    answer = httpx.post(upstream.url, content=upstream.content, headers=upstream.headers, timeout=10)
    if stream:
        response = accumulate(adapter.stream_events(adapter.decode(answer.iter_bytes())))
    else:
        response = adapter.parse_response(answer.json())
    [message] = response.output
    assert message == OutputMessage(text="one two ", stop_sequence="STOP")


# ---- reasoning with a forced tool call ---------------------------------------------------------------------------

FORCED = {
    "model": "standin/echo",
    "input": "What is the weather?",
    "reasoning": {"effort": "high"},
    "tools": [{"type": "function", "name": "weather", "parameters": {"type": "object"}}],
    "tool_choice": "required",
}


def test_reasoning_with_a_forced_tool_call_never_goes_to_an_anthropic_endpoint(alice, standin_catalog, standin):
    """Anthropic's extended thinking cannot be combined with a forced tool call: its adapter dropped the reasoning
    and answered without it. Such a request is routed past Anthropic's wire, a 404 naming it when nothing is left."""
    standin.clear()
    response = alice.client().post(
        "/api/v1/responses", {**FORCED, "provider": {"only": ["standin-anthropic"]}}, format="json"
    )
    error = assert_error_envelope(response, 404)["error"]
    assert error["metadata"]["param"] == "reasoning_with_forced_tool_choice" and not standin.received

    response = alice.client().post("/api/v1/responses", {**FORCED, "provider": {"sort": "price"}}, format="json")
    assert response.status_code == 200, response.content
    [sent] = [r["body"] for r in standin.received]
    assert provider_of(response["X-Generation-Id"]) != "standin-anthropic"
    assert sent.get("reasoning") or sent.get("reasoning_effort")  # both reached the wire
    assert sent.get("tool_choice") in ("required", {"type": "required"})
