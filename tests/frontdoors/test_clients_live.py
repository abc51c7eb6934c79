"""The clients people already have, unmodified, against a live gunicorn gateway and the stand-in provider on
loopback: the openai SDK (chat completions, structured output, embeddings), the anthropic SDK (messages,
streams, typed errors), LangChain's ChatOpenAI and OpenAIEmbeddings, and litellm with the `openai/` prefix."""

import json
import os
from decimal import Decimal

import anthropic
import openai
import pytest
from openai import OpenAI
from pydantic import BaseModel

from gateway.billing.provisioning import account_provision
from routing.standin.embeddings import vector
from tests.support import Persona

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm would fetch its price list at import

import litellm  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langchain_openai import ChatOpenAI, OpenAIEmbeddings  # noqa: E402

pytestmark = pytest.mark.live
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
    },
}


@pytest.fixture
def erin(transactional_db, standin_catalog):
    """A funded account whose data is committed, so the gunicorn processes see it."""
    return Persona(account_provision(name="erin", plan="payg", credits=Decimal("5")))


def openai_client(live_gateway, persona) -> OpenAI:
    return OpenAI(base_url=live_gateway.api, api_key=persona.api_key, max_retries=0, timeout=20)


def anthropic_client(live_gateway, persona) -> anthropic.Anthropic:
    # The SDK appends /v1/messages to its base URL.
    return anthropic.Anthropic(base_url=f"{live_gateway.url}/api", api_key=persona.api_key, max_retries=0, timeout=20)


# ---- openai SDK ----------------------------------------------------------------------------------------------


def test_openai_chat_completion(live_gateway, erin):
    completion = openai_client(live_gateway, erin).chat.completions.create(
        model="standin/echo", messages=[{"role": "user", "content": "Say hello"}]
    )
    assert completion.choices[0].message.content == "Hello from the local stand-in provider."
    assert completion.choices[0].finish_reason == "stop" and completion.model == "standin/echo"
    assert completion.usage.completion_tokens > 0 and completion.usage.model_extra["cost"] > 0


def test_openai_chat_stream_with_usage(live_gateway, erin):
    stream = openai_client(live_gateway, erin).chat.completions.create(
        model="standin/echo",
        messages=[{"role": "user", "content": 'Count <<standin {"chunks": 5, "text": "one two three four five"}>>'}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    assert text == "one two three four five"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0


def test_openai_chat_tool_round_trip(live_gateway, erin, standin_catalog):
    client = openai_client(live_gateway, erin)
    messages = [{"role": "user", "content": 'Weather in Paris? <<standin {"tool_call": "auto"}>>'}]
    first = client.chat.completions.create(model="standin/echo", messages=messages, tools=[TOOL])
    assert first.choices[0].finish_reason == "tool_calls"
    [call] = first.choices[0].message.tool_calls
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"location": "Paris"}
    messages += [first.choices[0].message, {"role": "tool", "tool_call_id": call.id, "content": '{"celsius": 21}'}]
    messages[0] = {"role": "user", "content": "Weather in Paris?"}
    second = client.chat.completions.create(
        model="standin/echo", messages=messages, tools=[TOOL], extra_body={"provider": {"only": ["standin-chat"]}}
    )
    assert second.choices[0].message.content == "Hello from the local stand-in provider."
    upstream = standin_catalog.requests_for("/chat/completions")[-1]["body"]
    assert upstream["messages"][1]["tool_calls"][0]["id"] == call.id
    assert upstream["messages"][2] == {"role": "tool", "tool_call_id": call.id, "content": '{"celsius": 21}'}


def test_openai_chat_stream_tool_call(live_gateway, erin):
    stream = openai_client(live_gateway, erin).chat.completions.create(
        model="standin/echo",
        messages=[{"role": "user", "content": 'Weather? <<standin {"tool_call": "auto"}>>'}],
        tools=[TOOL],
        stream=True,
    )
    calls = [call for chunk in stream if chunk.choices for call in chunk.choices[0].delta.tool_calls or []]
    assert calls[0].function.name == "get_weather" and calls[0].id
    assert json.loads("".join(call.function.arguments or "" for call in calls)) == {"location": "Paris"}


class City(BaseModel):
    city: str
    country: str


def test_openai_structured_output_parse(live_gateway, erin, standin_catalog):
    answer = json.dumps({"city": "Paris", "country": "France"})
    directive = json.dumps({"text": answer})
    completion = openai_client(live_gateway, erin).chat.completions.parse(
        model="standin/echo",
        messages=[{"role": "user", "content": f"Where is the Eiffel tower? <<standin {directive}>>"}],
        response_format=City,
        extra_body={"provider": {"only": ["standin-chat"]}},
    )
    assert completion.choices[0].message.parsed == City(city="Paris", country="France")
    upstream = standin_catalog.requests_for("/chat/completions")[-1]["body"]
    assert upstream["response_format"]["type"] == "json_schema"
    assert upstream["response_format"]["json_schema"]["name"] == "City"
    assert upstream["response_format"]["json_schema"]["strict"] is True


def test_openai_chat_errors_are_typed(live_gateway, erin):
    client = openai_client(live_gateway, erin)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nobody/none", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError, match="n=1"):
        client.chat.completions.create(model="standin/echo", messages=[{"role": "user", "content": "hi"}], n=2)


def test_openai_embeddings(live_gateway, erin):
    client = openai_client(live_gateway, erin)
    result = client.embeddings.create(model="standin/embed", input=["alpha", "beta"])  # the SDK asks for base64
    assert [entry.embedding for entry in result.data] == [
        pytest.approx(vector("alpha", 8), rel=1e-6),
        pytest.approx(vector("beta", 8), rel=1e-6),
    ]
    assert result.usage.prompt_tokens > 0 and result.model == "standin/embed"
    floats = client.embeddings.create(model="standin/embed", input="alpha", dimensions=4, encoding_format="float")
    assert floats.data[0].embedding == pytest.approx(vector("alpha", 4))


# ---- anthropic SDK -------------------------------------------------------------------------------------------


def test_anthropic_messages_create(live_gateway, erin):
    message = anthropic_client(live_gateway, erin).messages.create(
        model="standin/echo", max_tokens=100, messages=[{"role": "user", "content": "Say hello"}]
    )
    assert message.content[0].text == "Hello from the local stand-in provider."
    assert message.stop_reason == "end_turn" and message.usage.output_tokens > 0


def test_anthropic_tool_use_round_trip(live_gateway, erin, standin_catalog):
    client = anthropic_client(live_gateway, erin)
    tools = [
        {"name": "get_weather", "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}}}
    ]
    first = client.messages.create(
        model="standin/echo",
        max_tokens=100,
        tools=tools,
        messages=[{"role": "user", "content": 'Weather? <<standin {"tool_call": "auto"}>>'}],
    )
    assert first.stop_reason == "tool_use"
    [use] = [block for block in first.content if block.type == "tool_use"]
    assert use.name == "get_weather" and use.input == {"location": "Paris"}
    second = client.messages.create(
        model="standin/echo",
        max_tokens=100,
        tools=tools,
        messages=[
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": first.content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "21C"}]},
        ],
        extra_body={"provider": {"only": ["standin-anthropic"]}},
    )
    assert second.content[0].text == "Hello from the local stand-in provider."
    upstream = standin_catalog.requests_for("/messages")[-1]["body"]
    assert upstream["messages"][-1]["content"] == [{"type": "tool_result", "tool_use_id": use.id, "content": "21C"}]


def test_anthropic_messages_stream(live_gateway, erin):
    with anthropic_client(live_gateway, erin).messages.stream(
        model="standin/echo",
        max_tokens=100,
        messages=[{"role": "user", "content": 'Count <<standin {"chunks": 3, "text": "one two three"}>>'}],
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "one two three"
    assert final.content[0].text == "one two three" and final.stop_reason == "end_turn"
    assert final.usage.output_tokens > 0


def test_anthropic_errors_are_typed(live_gateway, erin):
    client = anthropic_client(live_gateway, erin)
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.create(model="standin/echo", max_tokens=0, messages=[{"role": "user", "content": "hi"}])
    assert bad.value.body["error"]["type"] == "invalid_request_error"
    with pytest.raises(anthropic.NotFoundError):
        client.messages.create(model="nobody/none", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    wrong_key = anthropic.Anthropic(base_url=f"{live_gateway.url}/api", api_key="sk-gw-v1-inf-wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        wrong_key.messages.create(model="standin/echo", max_tokens=5, messages=[{"role": "user", "content": "hi"}])


# ---- LangChain ------------------------------------------------------------------------------------------------


def chat_model(live_gateway, persona) -> ChatOpenAI:
    return ChatOpenAI(model="standin/echo", base_url=live_gateway.api, api_key=persona.api_key, max_retries=0)


def test_langchain_invoke_and_stream(live_gateway, erin):
    llm = chat_model(live_gateway, erin)
    assert llm.invoke("Say hello").content == "Hello from the local stand-in provider."
    chunks = list(llm.stream('Count <<standin {"chunks": 3, "text": "one two three"}>>'))
    assert "".join(chunk.content for chunk in chunks) == "one two three"


@tool
def get_weather(location: str) -> str:
    """Weather in a city."""
    return "21C"


def test_langchain_tools(live_gateway, erin):
    llm = chat_model(live_gateway, erin).bind_tools([get_weather])
    answer = llm.invoke('Weather in Paris? <<standin {"tool_call": "auto"}>>')
    assert answer.tool_calls[0]["name"] == "get_weather" and answer.tool_calls[0]["args"] == {"location": "Paris"}


def test_langchain_embeddings(live_gateway, erin):
    # check_embedding_ctx_length tokenizes with tiktoken first, which downloads its tables: off on loopback.
    embeddings = OpenAIEmbeddings(
        model="standin/embed",
        base_url=live_gateway.api,
        api_key=erin.api_key,
        check_embedding_ctx_length=False,
        max_retries=0,
    )
    assert embeddings.embed_query("alpha") == pytest.approx(vector("alpha", 8), rel=1e-6)
    assert len(embeddings.embed_documents(["a", "b", "c"])) == 3


# ---- litellm --------------------------------------------------------------------------------------------------


def test_litellm_completion_with_the_openai_prefix(live_gateway, erin):
    response = litellm.completion(
        model="openai/standin/echo",
        api_base=live_gateway.api,
        api_key=erin.api_key,
        messages=[{"role": "user", "content": "Say hello"}],
    )
    assert response.choices[0].message.content == "Hello from the local stand-in provider."
    streamed = litellm.completion(
        model="openai/standin/echo",
        api_base=live_gateway.api,
        api_key=erin.api_key,
        messages=[{"role": "user", "content": 'Count <<standin {"chunks": 3, "text": "one two three"}>>'}],
        stream=True,
    )
    assert "".join(chunk.choices[0].delta.content or "" for chunk in streamed) == "one two three"


FAILING = '<<standin {"chunks": 5, "cut_after": 4, "mid_stream_error": 500, "text": "a b c d e"}>>'


def test_a_failure_mid_stream_raises_in_both_sdks(live_gateway, erin):
    stream = openai_client(live_gateway, erin).chat.completions.create(
        model="standin/echo",
        messages=[{"role": "user", "content": FAILING}],
        stream=True,
        extra_body={"provider": {"only": ["standin-chat"]}},
    )
    with pytest.raises(openai.APIError, match="Provider returned error"):
        list(stream)
    with pytest.raises(anthropic.APIStatusError, match="Provider returned error"):
        with anthropic_client(live_gateway, erin).messages.stream(
            model="standin/echo",
            max_tokens=50,
            messages=[{"role": "user", "content": FAILING}],
            extra_body={"provider": {"only": ["standin-anthropic"]}},
        ) as events:
            list(events)
