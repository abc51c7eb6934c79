"""A user-eyed pass over the three front doors: every field a door takes reaches the upstream in the wire form of
each adapter, or is refused with a 400 naming it (Anthropic's error shape on /messages), never accepted and
dropped. Against the stand-in provider, which records what each endpoint was sent."""

import json
import os
from decimal import Decimal

import anthropic
import pytest
from openai import OpenAI
from pydantic import BaseModel

from gateway.billing.provisioning import account_provision
from routing.selection import unhonoured
from tests.frontdoors.test_chat import post as post_chat
from tests.frontdoors.test_chat import sse_chunks
from tests.frontdoors.test_messages import events
from tests.frontdoors.test_messages import post as post_message
from tests.support import Persona, assert_error_envelope, standin_endpoint

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm would fetch its price list at import

import litellm  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402

HI = [{"role": "user", "content": "Hi"}]
CHAT = {"model": "standin/echo", "messages": HI}
MESSAGE = {"model": "standin/echo", "max_tokens": 3000, "messages": HI}
EMBEDDING = {"model": "standin/embed", "input": "Hi"}
WIRE_PATH = {"standin-chat": "/chat/completions", "standin-responses": "/responses", "standin-anthropic": "/messages"}


def only(wire: str) -> dict:
    return {"provider": {"only": [wire]}}


def sent_to(standin, wire: str) -> dict:
    """The body the stand-in endpoint of this wire received last."""
    return standin.requests_for(WIRE_PATH[wire])[-1]["body"]


def anthropic_error(response, status: int, error_type: str = "invalid_request_error") -> str:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == error_type, body
    return body["error"]["message"]


# ---- fields no door declares are refused, not dropped ----------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"prompt_cache_retention": "24h"}, "prompt_cache_retention"),  # a newer OpenAI field
        ({"temprature": 0.2}, "temprature"),  # a typo
        ({"stream": True, "stream_options": {"include_usage": True, "padding": True}}, "stream_options.padding"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}, "strictly": True}}},
            "response_format.json_schema.strictly",
        ),
        (
            {"tools": [{"type": "function", "function": {"name": "f", "parameters": {}, "examples": []}}]},
            "tools[0].function.examples",
        ),
        ({"reasoning": {"effort": "low", "budget": 5}}, "reasoning.budget"),
    ],
)
def test_chat_refuses_fields_it_does_not_take(alice, standin_catalog, standin, extra, field):
    standin.clear()
    error = assert_error_envelope(post_chat(alice, {**CHAT, **extra}), 400)["error"]
    assert field in error["metadata"]["fields"], error
    assert "unknown field" in error["metadata"]["fields"][field]
    assert standin.requests_for() == []


def test_chat_refuses_obfuscation_it_does_not_add(alice, standin_catalog):
    body = {**CHAT, "stream": True, "stream_options": {"include_obfuscation": True}}
    error = assert_error_envelope(post_chat(alice, body), 400)["error"]
    assert "only false" in error["metadata"]["fields"]["stream_options.include_obfuscation"]


def test_chat_takes_include_obfuscation_false_and_the_refused_fields_as_null(alice, standin_catalog):
    """The gateway never pads chunks, so include_obfuscation false is what it does; the refused OpenAI fields
    (logit_bias, audio, ...) sent as null mean unset, as SDKs send them."""
    body = {**CHAT, "stream": True, "stream_options": {"include_usage": True, "include_obfuscation": False}}
    assert post_chat(alice, {**body, "logit_bias": None, "audio": None, "functions": None}).status_code == 200


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"metadata": {"user_id": "u", "session": "s"}}, "metadata.session"),
        (
            {"tools": [{"name": "f", "input_schema": {"type": "object"}, "input_examples": [{}]}]},
            "tools[0].input_examples",
        ),
        ({"top_a": 0.1}, "top_a"),
        ({"thinking": {"type": "enabled", "budget_tokens": 1024, "display": "x"}}, "thinking.display"),
        ({"tool_choice": {"type": "auto", "parallel": False}}, "tool_choice.parallel"),
    ],
)
def test_messages_refuses_fields_it_does_not_take_in_anthropics_shape(alice, standin_catalog, standin, extra, field):
    standin.clear()
    message = anthropic_error(post_message(alice, {**MESSAGE, **extra}), 400)
    assert message.startswith(f"{field}: unknown field"), message
    assert standin.requests_for() == []


@pytest.mark.parametrize("extra", [{"input_type": "query"}, {"plugins": [{"id": "web"}]}, {"truncate": "END"}])
def test_embeddings_refuses_fields_it_does_not_take(alice, standin_catalog, standin, extra):
    standin.clear()
    response = alice.client().post("/api/v1/embeddings", {**EMBEDDING, **extra}, format="json")
    error = assert_error_envelope(response, 400)["error"]
    assert set(error["metadata"]["fields"]) == set(extra), error
    assert standin.requests_for() == []


# ---- /messages: what a Claude client sends reaches an Anthropic upstream as sent --------------------------------

CACHED = {"type": "ephemeral"}


def test_cache_breakpoints_on_every_block_kind_reach_an_anthropic_upstream(alice, standin_catalog, standin):
    """Claude clients put cache_control on the last block of the conversation, often a tool_result or an image:
    each breakpoint reaches the Anthropic wire where it was put (only text blocks' did)."""
    messages = [
        {
            "role": "user",
            "content": [
                {
                    "type": "image",
                    "source": {"type": "url", "url": "https://example.com/a.png"},
                    "cache_control": CACHED,
                },
                {
                    "type": "document",
                    "source": {"type": "url", "url": "https://example.com/a.pdf"},
                    "title": "A",
                    "cache_control": CACHED,
                },
                {"type": "document", "source": {"type": "text", "data": "plain"}, "cache_control": CACHED},
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}, "cache_control": CACHED}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok", "cache_control": CACHED}],
        },
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "f", "input": {}}]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t2",
                    "content": [{"type": "text", "text": "ok", "cache_control": CACHED}],
                }
            ],
        },
    ]
    tools = [{"name": "f", "input_schema": {"type": "object"}}]
    standin.clear()
    body = {**MESSAGE, "messages": messages, "tools": tools, **only("standin-anthropic")}
    assert post_message(alice, body).status_code == 200
    sent = sent_to(standin, "standin-anthropic")["messages"]
    blocks = [block for message in sent for block in message["content"]]
    assert [block["type"] for block in blocks] == [
        "image",
        "document",
        "text",
        "tool_use",
        "tool_result",
        "tool_use",
        "tool_result",
    ]
    assert [bool(block.get("cache_control")) for block in blocks] == [True] * 5 + [False, True], blocks


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ({"role": "user", "content": "Hi", "weight": 2}, "messages[0].weight"),
        ({"role": "user", "content": [{"type": "text", "text": "Hi", "lang": "en"}]}, "messages[0].content[0].lang"),
        (
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://e.com/a.png", "dpi": 2}}]},
            "messages[0].content[0].image_url.dpi",
        ),
        (
            {"role": "user", "content": [{"type": "file", "file": {"file_id": "f", "mime": "x"}}]},
            "messages[0].content[0].file.mime",
        ),
        ({"role": "tool", "tool_call_id": "c", "content": "ok", "is_error": True}, "messages[0].is_error"),
        ({"role": "system", "content": "Be brief", "tool_calls": []}, "messages[0].tool_calls"),
        (
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}", "x": 1}}],
            },
            "messages[0].tool_calls[0].function.x",
        ),
    ],
)
def test_chat_refuses_message_keys_it_does_not_take(alice, standin_catalog, message, field):
    error = assert_error_envelope(post_chat(alice, {**CHAT, "messages": [message]}), 400)["error"]
    assert error["metadata"]["fields"].get(field, "").startswith("unknown field"), error


def test_chat_takes_what_sdks_send_back(alice, standin_catalog, standin):
    """An answer's message sent back as the SDKs do (nulls, annotations, a streamed call's index) is taken; a
    cache breakpoint on an image or file part reaches the Anthropic wire as on a text part."""
    answer = {
        "role": "assistant",
        "content": None,
        "refusal": None,
        "reasoning": None,
        "annotations": [],
        "audio": None,
        "function_call": None,
        "tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    }
    image = {"type": "image_url", "image_url": {"url": "https://e.com/a.png", "detail": "low"}, "cache_control": CACHED}
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Hi"}, image]},
        answer,
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "ok", "cache_control": CACHED}]},
    ]
    standin.clear()
    response = post_chat(alice, {**CHAT, "messages": messages, **only("standin-anthropic")})
    assert response.status_code == 200, response.content
    sent = sent_to(standin, "standin-anthropic")["messages"]
    assert sent[0]["content"][1] == {
        "type": "image",
        "source": {"type": "url", "url": "https://e.com/a.png"},
        "cache_control": CACHED,
    }
    assert sent[1]["content"][0]["type"] == "tool_use"
    assert sent[2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "c1",
        "content": "ok",
        "cache_control": CACHED,
    }


@pytest.mark.parametrize(
    ("block", "field"),
    [
        ({"type": "text", "text": "Hi", "lang": "en"}, "messages[0].content[0].lang"),
        (
            {"type": "image", "source": {"type": "url", "url": "https://e.com/a.png", "dpi": 2}},
            "messages[0].content[0].source.dpi",
        ),
        (
            {"type": "image", "source": {"type": "url", "url": "https://e.com/a.png"}, "alt": "x"},
            "messages[0].content[0].alt",
        ),
        ({"type": "tool_result", "tool_use_id": "t", "content": "ok", "status": "x"}, "messages[0].content[0].status"),
        (
            {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "ok", "x": 1}]},
            "messages[0].content[0].content[0].x",
        ),
    ],
)
def test_messages_refuses_block_keys_it_does_not_take(alice, standin_catalog, block, field):
    body = {**MESSAGE, "messages": [{"role": "user", "content": [block]}]}
    message = anthropic_error(post_message(alice, body), 400)
    assert f"{field}: unknown field" in message, message


def test_messages_refuses_turn_and_system_keys_it_does_not_take(alice, standin_catalog):
    body = {**MESSAGE, "messages": [{"role": "user", "content": "Hi", "name": "bob"}]}
    assert "messages[0].name: unknown field" in anthropic_error(post_message(alice, body), 400)
    body = {**MESSAGE, "system": [{"type": "text", "text": "S", "priority": 1}]}
    assert "system[0].priority: unknown field" in anthropic_error(post_message(alice, body), 400)


def test_messages_top_level_cache_control_strict_tools_and_output_format_reach_anthropic(
    alice, standin_catalog, standin
):
    """Fields of Anthropic's request the door took as unknown: the automatic cache breakpoint, strict tools and
    structured output (output_config.format) reach the Anthropic wire."""
    schema = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
    body = {
        **MESSAGE,
        "cache_control": CACHED,
        "tools": [{"name": "f", "input_schema": {"type": "object"}, "strict": True}],
        "output_config": {"format": {"type": "json_schema", "schema": schema}},
        **only("standin-anthropic"),
    }
    standin.clear()
    response = post_message(alice, body)
    assert response.status_code == 200, response.content
    sent = sent_to(standin, "standin-anthropic")
    assert sent["messages"][-1]["content"][-1]["cache_control"] == CACHED
    assert sent["tools"][0]["strict"] is True
    assert sent["output_config"] == {"format": {"type": "json_schema", "schema": schema}}


def test_messages_output_format_reaches_a_chat_wire_as_response_format(alice, standin_catalog, standin):
    schema = {"type": "object", "properties": {"colour": {"type": "string"}}}
    body = {**MESSAGE, "output_config": {"format": {"type": "json_schema", "schema": schema}}, **only("standin-chat")}
    standin.clear()
    assert post_message(alice, body).status_code == 200
    assert sent_to(standin, "standin-chat")["response_format"]["json_schema"]["schema"] == schema


def test_chat_json_mode_reaches_an_anthropic_wire_as_an_instruction(alice, standin_catalog, standin):
    standin.clear()
    body = {**CHAT, "response_format": {"type": "json_object"}, **only("standin-anthropic")}
    assert post_chat(alice, body).status_code == 200
    assert "JSON object" in sent_to(standin, "standin-anthropic")["system"][-1]["text"]


def test_a_json_schema_request_is_never_routed_to_a_wire_without_structured_outputs(standin):
    """Bedrock's Converse body has no place for a JSON schema (it was dropped there): its endpoints are passed over
    for such a request, whatever the catalog lists for the model; JSON mode goes everywhere (as an instruction)."""
    used = frozenset({"response_format", "structured_outputs"})
    for adapter in ("openai_chat", "openai_responses", "anthropic", "vertex", "azure"):
        assert unhonoured(standin_endpoint(standin, adapter=adapter), used) == frozenset(), adapter
    assert unhonoured(standin_endpoint(standin, adapter="bedrock"), used) == {"structured_outputs"}
    assert unhonoured(standin_endpoint(standin, adapter="bedrock"), frozenset({"response_format"})) == frozenset()


# ---- the real SDKs on a live gateway: typed errors, streams that add up to the JSON answer ----------------------


@pytest.fixture
def erin(transactional_db, standin_catalog):
    """A funded account whose data is committed, so the gunicorn processes see it."""
    return Persona(account_provision(name="erin", plan="payg", credits=Decimal("5")))


def anthropic_client(live_gateway, persona) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=f"{live_gateway.url}/api", api_key=persona.api_key, max_retries=0, timeout=20)


@pytest.mark.live
@pytest.mark.parametrize(
    ("status", "error"),
    [
        (429, anthropic.RateLimitError),
        (529, anthropic.OverloadedError),
        (503, anthropic.ServiceUnavailableError),
        (400, anthropic.BadRequestError),
        (422, anthropic.UnprocessableEntityError),
    ],
)
def test_the_anthropic_sdk_raises_its_typed_error_for_an_upstream_failure(live_gateway, erin, status, error):
    client = anthropic_client(live_gateway, erin)
    prompt = f'Hi <<standin {{"status": {status}}}>>'
    with pytest.raises(error) as raised:
        client.messages.create(
            model="standin/echo",
            max_tokens=50,
            messages=[{"role": "user", "content": prompt}],
            extra_body={"provider": {"only": ["standin-anthropic"]}},
        )
    assert raised.value.status_code == status and raised.value.body["type"] == "error"


@pytest.mark.live
def test_the_anthropic_sdk_raises_payment_required_without_credits(live_gateway, transactional_db, standin_catalog):
    broke = Persona(account_provision(name="broke", plan="payg", credits=Decimal("0")))
    with pytest.raises(anthropic.PaymentRequiredError) as raised:
        anthropic_client(live_gateway, broke).messages.create(model="standin/echo", max_tokens=50, messages=HI)
    assert raised.value.body["error"]["type"] == "billing_error"


THINK_AND_CALL = (
    'Weather? <<standin {"tool_call": "auto", "parallel": 3, "reasoning": "Paris, then the tool.", "chunks": 4}>>'
)
THREE_CALLS = [("function", "get_weather", {"location": "Paris", "call": n}) for n in (1, 2, 3)]
WEATHER = [{"name": "get_weather", "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}}}]


@pytest.mark.live
@pytest.mark.parametrize("wire", ["standin-anthropic", "standin-chat", "standin-responses"])
def test_the_anthropic_sdks_streamed_final_message_is_the_json_answer(live_gateway, erin, wire):
    client = anthropic_client(live_gateway, erin)
    request = dict(
        model="standin/echo",
        max_tokens=3000,
        tools=WEATHER,
        thinking={"type": "enabled", "budget_tokens": 1024},
        messages=[{"role": "user", "content": THINK_AND_CALL}],
        extra_body={"provider": {"only": [wire]}},
    )
    answer = client.messages.create(**request)
    with client.messages.stream(**request) as stream:
        final = stream.get_final_message()

    def shape(message):
        blocks = [block.model_dump(exclude={"id", "signature"}) for block in message.content]
        return blocks, message.stop_reason, message.stop_sequence, message.usage.output_tokens

    assert shape(final) == shape(answer)
    assert [block.type for block in answer.content] == ["thinking", "tool_use", "tool_use", "tool_use"]
    assert [block.input["call"] for block in final.content[1:]] == [1, 2, 3] and answer.stop_reason == "tool_use"


@pytest.mark.live
@pytest.mark.parametrize("wire", ["standin-anthropic", "standin-chat", "standin-responses"])
def test_the_openai_sdks_streamed_completion_is_the_json_answer(live_gateway, erin, wire):
    client = OpenAI(base_url=live_gateway.api, api_key=erin.api_key, max_retries=0, timeout=20)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER[0]["input_schema"]}}]
    request = dict(
        model="standin/echo",
        messages=[{"role": "user", "content": THINK_AND_CALL}],
        tools=tools,
        extra_body={"provider": {"only": [wire]}},
    )
    answer = client.chat.completions.create(**request)
    with client.chat.completions.stream(**request, stream_options={"include_usage": True}) as stream:
        final = stream.get_final_completion()
    streamed, whole = final.choices[0], answer.choices[0]
    assert streamed.finish_reason == whole.finish_reason == "tool_calls"

    def calls(message):
        return [(call.type, call.function.name, json.loads(call.function.arguments)) for call in message.tool_calls]

    assert calls(streamed.message) == calls(whole.message) == THREE_CALLS
    assert len({call.id for call in streamed.message.tool_calls}) == 3
    assert streamed.message.reasoning == whole.message.reasoning  # type: ignore[attr-defined]
    assert final.usage.completion_tokens == answer.usage.completion_tokens


@pytest.mark.parametrize(
    ("extra", "served_by"),
    [({"top_k": 5}, {"standin-chat", "standin-anthropic"}), ({"temperature": 0.5}, set(WIRE_PATH))],
)
def test_require_parameters_passes_over_a_wire_that_would_drop_a_sampling_field(
    alice, standin_catalog, standin, extra, served_by
):
    """The catalog lists the model's parameters (standin/echo lists top_k), whichever wire serves it: with
    require_parameters, an endpoint whose wire has no place for a sampling field the request sets (top_k on the
    Responses API) is not used (it was, and top_k was dropped), as for stop, seed and logprobs."""
    for wire in WIRE_PATH:
        standin.clear()
        provider = {"only": [wire], "require_parameters": True}
        response = post_chat(alice, {**CHAT, **extra, "provider": provider})
        if wire in served_by:
            assert response.status_code == 200, response.content
            assert set(extra) <= set(sent_to(standin, wire)), wire
        else:
            error = assert_error_envelope(response, 404)["error"]
            assert error["metadata"]["param"] == next(iter(extra)), error
            assert standin.requests_for() == []


@pytest.mark.parametrize("wire", list(WIRE_PATH))
def test_parallel_tool_calls_stream_each_on_its_own_index(alice, standin_catalog, wire):
    """Three calls in one answer: each chunk's tool_calls delta carries its call's index (the id and name on its
    first delta only), and the arguments gathered per index are the JSON answer's."""
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    body = {**CHAT, "messages": [{"role": "user", "content": THINK_AND_CALL}], "tools": tools, **only(wire)}
    whole = post_chat(alice, body).json()["choices"][0]["message"]["tool_calls"]
    response = post_chat(alice, {**body, "stream": True})
    deltas = [
        call
        for event in sse_chunks(response)[:-1]
        for choice in json.loads(event)["choices"]
        for call in choice["delta"].get("tool_calls") or []
    ]
    gathered: dict[int, dict] = {}
    for delta in deltas:
        call = gathered.setdefault(delta["index"], {"arguments": ""})
        if "id" in delta:
            assert "id" not in call, delta  # a call's id and name come once
            call.update(id=delta["id"], name=delta["function"]["name"])
        call["arguments"] += delta["function"].get("arguments") or ""
    assert sorted(gathered) == [0, 1, 2]
    assert [json.loads(gathered[i]["arguments"]) for i in range(3)] == [
        json.loads(c["function"]["arguments"]) for c in whole
    ]
    assert [json.loads(gathered[i]["arguments"])["call"] for i in range(3)] == [1, 2, 3]
    assert len({call["id"] for call in gathered.values()}) == 3


@pytest.mark.parametrize("wire", list(WIRE_PATH))
def test_parallel_tool_uses_stream_as_anthropic_blocks(alice, standin_catalog, wire):
    body = {**MESSAGE, "messages": [{"role": "user", "content": THINK_AND_CALL}], "tools": WEATHER, **only(wire)}
    whole = post_message(alice, body).json()["content"]
    blocks: dict[int, dict] = {}
    for name, data in events(post_message(alice, {**body, "stream": True})):
        if name == "content_block_start":
            blocks[data["index"]] = {**data["content_block"], "json": ""}
        elif name == "content_block_delta" and data["delta"]["type"] == "input_json_delta":
            blocks[data["index"]]["json"] += data["delta"]["partial_json"]
    uses = [blocks[i] for i in sorted(blocks) if blocks[i]["type"] == "tool_use"]
    assert [json.loads(use["json"]) for use in uses] == [b["input"] for b in whole if b["type"] == "tool_use"]
    assert [json.loads(use["json"])["call"] for use in uses] == [1, 2, 3]
    assert sorted(blocks) == list(range(len(blocks)))


def test_a_tool_choice_that_forces_a_call_without_tools_is_refused(alice, standin_catalog):
    """tool_choice required (chat) or any (Anthropic) with no tool to call cannot be honoured: it was dropped."""
    error = assert_error_envelope(post_chat(alice, {**CHAT, "tool_choice": "required"}), 400)["error"]
    assert "tool_choice" in error["metadata"]["fields"], error
    assert post_chat(alice, {**CHAT, "tool_choice": "none"}).status_code == 200
    message = anthropic_error(post_message(alice, {**MESSAGE, "tool_choice": {"type": "any"}}), 400)
    assert message.startswith("tool_choice: "), message
    assert post_message(alice, {**MESSAGE, "tool_choice": {"type": "auto"}}).status_code == 200


THINKING = {"type": "enabled", "budget_tokens": 1024}


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"tools": WEATHER, "tool_choice": {"type": "any"}}, "thinking"),
        ({"tools": WEATHER, "tool_choice": {"type": "tool", "name": "get_weather"}}, "thinking"),
        ({"temperature": 0.5}, "temperature"),
        ({"top_k": 5}, "top_k"),
        ({"top_p": 0.5}, "top_p"),
    ],
)
def test_messages_refuses_what_anthropic_drops_beside_thinking(alice, standin_catalog, standin, extra, field):
    """Anthropic's API refuses these with thinking on; the adapter dropped them (thinking under a forced tool
    choice, temperature, top_k, a low top_p): the door refuses them as Anthropic does."""
    standin.clear()
    message = anthropic_error(post_message(alice, {**MESSAGE, "thinking": THINKING, **extra}), 400)
    assert message.startswith(f"{field}: "), message
    assert standin.requests_for() == []


def test_messages_takes_what_anthropic_takes_beside_thinking(alice, standin_catalog):
    body = {**MESSAGE, "thinking": THINKING, "temperature": 1, "top_p": 0.95, "tools": WEATHER}
    assert post_message(alice, {**body, "tool_choice": {"type": "auto"}}).status_code == 200


def test_debug_echo_is_refused_where_it_cannot_be_shown(alice, standin_catalog):
    """debug.echo_upstream_body is a stream's first chunk: a JSON answer, or Anthropic's event stream (which has no
    event for it), would drop it."""
    debug = {"debug": {"echo_upstream_body": True}}
    error = assert_error_envelope(post_chat(alice, {**CHAT, **debug}), 400)["error"]
    assert "debug.echo_upstream_body" in error["metadata"]["fields"], error
    chunks = [json.loads(c) for c in sse_chunks(post_chat(alice, {**CHAT, **debug, "stream": True}))[:-1]]
    assert any("debug" in chunk for chunk in chunks)
    for stream in (False, True):
        message = anthropic_error(post_message(alice, {**MESSAGE, **debug, "stream": stream}), 400)
        assert message.startswith("debug.echo_upstream_body: "), message


def test_a_cache_breakpoint_on_a_tool_reaches_an_anthropic_upstream(alice, standin_catalog, standin):
    """Claude clients cache their tool definitions with cache_control on the last tool (it was a 400)."""
    tools = [{**WEATHER[0], "cache_control": CACHED}]
    standin.clear()
    assert post_message(alice, {**MESSAGE, "tools": tools, **only("standin-anthropic")}).status_code == 200
    assert sent_to(standin, "standin-anthropic")["tools"][0]["cache_control"] == CACHED
    body = {**MESSAGE, "tools": [{**WEATHER[0], "cache_control": {"type": "persistent"}}]}
    assert "tools[0].cache_control.type" in anthropic_error(post_message(alice, body), 400)


# ---- what the real clients send is taken (the doors refuse unknown fields: none of theirs) ----------------------


class Weather(BaseModel):
    location: str


@pytest.mark.live
@pytest.mark.parametrize("method", ["json_schema", "function_calling", "json_mode"])
def test_langchain_structured_output_and_usage_streams_are_taken(live_gateway, erin, method):
    llm = ChatOpenAI(
        model="standin/echo",
        base_url=live_gateway.api,
        api_key=erin.api_key,
        max_retries=0,
        stream_usage=True,
        extra_body={"provider": {"only": ["standin-chat"]}},
    )
    directive = '{"tool_call": "auto"}' if method == "function_calling" else '{"text": "{\\"location\\": \\"Paris\\"}"}'
    answer = llm.with_structured_output(Weather, method=method).invoke(f"Weather? <<standin {directive}>>")
    assert answer == Weather(location="Paris")
    chunks = list(llm.stream("Say hello"))
    assert sum(chunk.usage_metadata["output_tokens"] for chunk in chunks if chunk.usage_metadata) > 0


@pytest.mark.live
def test_litellm_tools_and_streamed_usage_are_taken(live_gateway, erin):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER[0]["input_schema"]}}]
    response = litellm.completion(
        model="openai/standin/echo",
        api_base=live_gateway.api,
        api_key=erin.api_key,
        messages=[{"role": "user", "content": 'Weather? <<standin {"tool_call": "auto"}>>'}],
        tools=tools,
        tool_choice="required",
        parallel_tool_calls=False,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(response)
    arguments = "".join(
        call.function.arguments or ""
        for chunk in chunks
        if chunk.choices
        for call in chunk.choices[0].delta.tool_calls or []
    )
    assert json.loads(arguments) == {"location": "Paris"}
    assert any(getattr(chunk, "usage", None) and chunk.usage.completion_tokens > 0 for chunk in chunks)


@pytest.mark.parametrize("reasoning", [{"mode": "pro"}, {"context": "current_turn"}, {"context": "all_turns"}])
def test_reasoning_modes_no_endpoint_honours_are_refused(alice, standin_catalog, reasoning):
    """reasoning.mode pro and a reasoning context were taken and reached no wire (on /responses too)."""
    field = f"reasoning.{next(iter(reasoning))}"
    error = assert_error_envelope(post_chat(alice, {**CHAT, "reasoning": reasoning}), 400)["error"]
    assert field in error["metadata"]["fields"], error
    response = alice.client().post(
        "/api/v1/responses", {"model": "standin/echo", "input": "Hi", "reasoning": reasoning}, format="json"
    )
    assert field in assert_error_envelope(response, 400)["error"]["metadata"]["fields"]
    body = {**CHAT, "reasoning": {"mode": "standard", "context": "auto", "effort": "low"}}
    assert post_chat(alice, body).status_code == 200
