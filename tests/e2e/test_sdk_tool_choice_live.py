"""Every tool_choice form the official SDKs' types allow, sent by the SDKs themselves to a live gunicorn gateway:
the `openai` SDK's responses.create and chat.completions.create, the `anthropic` SDK's messages.create (with
disable_parallel_tool_use). Each reaches the stand-in provider in the form of the wire it speaks (recorded by the
stand-in), and a forced function comes back as a function call the SDK parses."""

import json
from decimal import Decimal

import anthropic
import pytest
from openai import OpenAI

from gateway.billing.provisioning import account_provision
from tests.plugins.test_hosted_tools import model_calls
from tests.support import Persona

pytestmark = pytest.mark.live

PARAMETERS = {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}
WEATHER = {"type": "function", "name": "get_weather", "description": "Weather in a city", "parameters": PARAMETERS}
TIME = {"type": "function", "name": "get_time", "description": "The time", "parameters": {"type": "object"}}
WIRES = ("standin-responses", "standin-chat", "standin-anthropic")
CALL = ' <<standin {"tool_call": "get_weather"}>>'  # the stand-in answers with a call of that function


@pytest.fixture
def gus(transactional_db, standin_catalog):
    """A funded account whose data is committed, so the gunicorn processes see it."""
    return Persona(account_provision(name="gus", plan="payg", credits=Decimal("5")))


def only(wire: str) -> dict:
    return {"provider": {"only": [wire]}}


def upstream(standin) -> dict:
    (call,) = model_calls(standin)
    return call["body"]


def names(body: dict) -> list[str]:
    return [tool.get("name") or tool.get("function", {}).get("name") for tool in body.get("tools", [])]


def openai_client(live_gateway, persona) -> OpenAI:
    return OpenAI(base_url=live_gateway.api, api_key=persona.api_key, max_retries=0, timeout=20)


def anthropic_client(live_gateway, persona) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=f"{live_gateway.url}/api", api_key=persona.api_key, max_retries=0, timeout=20)


FORCED = {"type": "function", "name": "get_weather"}
ALLOWED = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "get_weather"}]}
CHAT_FORCED = {"type": "function", "function": {"name": "get_weather"}}
ANTHROPIC_FORCED = {"type": "tool", "name": "get_weather"}
# Each Responses tool_choice form: what each wire receives (its tool list when the form cuts it), whether a call
# is asked of the stand-in.
RESPONSES_FORMS = {
    "auto": ({"standin-responses": "auto", "standin-chat": "auto", "standin-anthropic": {"type": "auto"}}, None),
    "none": ({"standin-responses": "none", "standin-chat": "none", "standin-anthropic": {"type": "none"}}, None),
    "required": (
        {"standin-responses": "required", "standin-chat": "required", "standin-anthropic": {"type": "any"}},
        None,
    ),
    "function": (
        {"standin-responses": FORCED, "standin-chat": CHAT_FORCED, "standin-anthropic": ANTHROPIC_FORCED},
        None,
    ),
    "allowed_tools": (
        {"standin-responses": ALLOWED, "standin-chat": "required", "standin-anthropic": {"type": "any"}},
        {"standin-responses": ["get_weather", "get_time"], "standin-chat": ["get_weather"]},
    ),
}
RESPONSES_CHOICES = {
    "auto": "auto",
    "none": "none",
    "required": "required",
    "function": FORCED,
    "allowed_tools": ALLOWED,
}


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("form", list(RESPONSES_FORMS))
def test_openai_responses_tool_choice(live_gateway, gus, standin_catalog, wire, form):
    sent, cut = RESPONSES_FORMS[form]
    calls = form != "none"
    response = openai_client(live_gateway, gus).responses.create(
        model="standin/echo",
        input="Weather in Paris?" + (CALL if calls else ""),
        tools=[WEATHER, TIME],
        tool_choice=RESPONSES_CHOICES[form],
        extra_body=only(wire),
    )
    body = upstream(standin_catalog)
    assert body["tool_choice"] == sent[wire]
    assert names(body) == (cut or {}).get(
        wire, ["get_weather"] if form == "allowed_tools" else ["get_weather", "get_time"]
    )
    assert json.loads(response.to_json())["tool_choice"] == RESPONSES_CHOICES[form]  # echoed, parsed by the SDK
    if calls:
        [call] = [item for item in response.output if item.type == "function_call"]
        assert call.name == "get_weather" and json.loads(call.arguments) == {"location": "Paris"}
    else:
        assert response.output_text == "Hello from the local stand-in provider."


def test_openai_responses_forced_function_streams_as_a_function_call(live_gateway, gus, standin_catalog):
    stream = openai_client(live_gateway, gus).responses.create(
        model="standin/echo",
        input="Weather in Paris?" + CALL,
        tools=[WEATHER, TIME],
        tool_choice=FORCED,
        stream=True,
        extra_body=only("standin-anthropic"),
    )
    events = list(stream)
    assert upstream(standin_catalog)["tool_choice"] == ANTHROPIC_FORCED
    completed = events[-1].response
    [call] = [item for item in completed.output if item.type == "function_call"]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"location": "Paris"}
    assert any(event.type == "response.function_call_arguments.done" for event in events)


CHAT_TOOLS = [
    {
        "type": "function",
        "function": {"name": t["name"], "description": t["description"], "parameters": t["parameters"]},
    }
    for t in (WEATHER, TIME)
]
CHAT_ALLOWED = {
    "type": "allowed_tools",
    "allowed_tools": {"mode": "required", "tools": [{"type": "function", "function": {"name": "get_weather"}}]},
}
# Each Chat Completions tool_choice form: what each wire receives.
CHAT_FORMS = {
    "auto": ("auto", {"standin-responses": "auto", "standin-chat": "auto", "standin-anthropic": {"type": "auto"}}),
    "none": ("none", {"standin-responses": "none", "standin-chat": "none", "standin-anthropic": {"type": "none"}}),
    "required": (
        "required",
        {"standin-responses": "required", "standin-chat": "required", "standin-anthropic": {"type": "any"}},
    ),
    "function": (
        CHAT_FORCED,
        {"standin-responses": FORCED, "standin-chat": CHAT_FORCED, "standin-anthropic": ANTHROPIC_FORCED},
    ),
    "allowed_tools": (
        CHAT_ALLOWED,
        {"standin-responses": ALLOWED, "standin-chat": "required", "standin-anthropic": {"type": "any"}},
    ),
}


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("form", list(CHAT_FORMS))
def test_openai_chat_tool_choice(live_gateway, gus, standin_catalog, wire, form):
    choice, sent = CHAT_FORMS[form]
    calls = form != "none"
    completion = openai_client(live_gateway, gus).chat.completions.create(
        model="standin/echo",
        messages=[{"role": "user", "content": "Weather in Paris?" + (CALL if calls else "")}],
        tools=CHAT_TOOLS,
        tool_choice=choice,
        extra_body=only(wire),
    )
    body = upstream(standin_catalog)
    assert body["tool_choice"] == sent[wire]
    cut = form == "allowed_tools" and wire != "standin-responses"
    assert names(body) == (["get_weather"] if cut else ["get_weather", "get_time"])
    message = completion.choices[0].message
    if calls:
        [call] = message.tool_calls
        assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"location": "Paris"}
        assert completion.choices[0].finish_reason == "tool_calls"
    else:
        assert message.content == "Hello from the local stand-in provider." and not message.tool_calls


ANTHROPIC_TOOLS = [
    {"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in (WEATHER, TIME)
]
# Each Messages tool_choice form: what each wire receives (disable_parallel_tool_use: parallel_tool_calls false).
ANTHROPIC_FORMS = {
    "auto": ({"type": "auto"}, {"standin-responses": "auto", "standin-chat": "auto"}),
    "any": ({"type": "any"}, {"standin-responses": "required", "standin-chat": "required"}),
    "tool": (ANTHROPIC_FORCED, {"standin-responses": FORCED, "standin-chat": CHAT_FORCED}),
    "none": ({"type": "none"}, {"standin-responses": "none", "standin-chat": "none"}),
}


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize(
    ("form", "serial"),
    # disable_parallel_tool_use: on auto, any and tool (the SDK's ToolChoiceNone has no such field)
    [(form, serial) for form in ANTHROPIC_FORMS for serial in (False, True) if not (serial and form == "none")],
)
def test_anthropic_messages_tool_choice(live_gateway, gus, standin_catalog, wire, form, serial):
    choice, sent = ANTHROPIC_FORMS[form]
    choice = {**choice, "disable_parallel_tool_use": True} if serial else choice
    calls = form != "none"
    message = anthropic_client(live_gateway, gus).messages.create(
        model="standin/echo",
        max_tokens=100,
        messages=[{"role": "user", "content": "Weather in Paris?" + (CALL if calls else "")}],
        tools=ANTHROPIC_TOOLS,
        tool_choice=choice,
        extra_body=only(wire),
    )
    body = upstream(standin_catalog)
    if wire == "standin-anthropic":
        assert body["tool_choice"] == choice  # the wire's own form, disable_parallel_tool_use as given
    else:
        assert body["tool_choice"] == sent[wire]
        assert body.get("parallel_tool_calls") is (False if serial else None)
    assert names(body) == ["get_weather", "get_time"]
    if calls:
        [use] = [block for block in message.content if block.type == "tool_use"]
        assert use.name == "get_weather" and use.input == {"location": "Paris"} and message.stop_reason == "tool_use"
    else:
        assert message.content[0].text == "Hello from the local stand-in provider."
