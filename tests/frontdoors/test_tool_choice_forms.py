"""Every tool_choice form through the front doors, to each wire the stand-in speaks: the form the wire has (the
Responses API's allowed_tools as given; a filtered tool list with auto/any or auto/required where the wire has no
allowed-tools form), a provider-run tool forced only where the endpoint runs it, and a 400 naming tool_choice for a
form no endpoint can honour (a tool the request does not declare). Never a 500 (the Anthropic request builder
raised TypeError on an object it did not know), never a Responses-shaped choice on another wire."""

import json

import pytest

from tests.frontdoors.test_chat import post as post_chat
from tests.frontdoors.test_messages import post as post_message
from tests.plugins.test_hosted_tools import load_hosted_catalog, model_calls
from tests.support import assert_error_envelope

WEATHER = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}
TIME = {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}}
ALLOWED = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "get_time"}]}


def ask(persona, provider: str, **body):
    payload = {"model": "standin/echo", "input": "What time is it?", "provider": {"only": [provider]}, **body}
    return persona.client().post("/api/v1/responses", payload, format="json")


def sent(standin) -> dict:
    (call,) = model_calls(standin)
    return call["body"]


def names(body: dict) -> list[str]:
    return [tool.get("name") or tool.get("function", {}).get("name") for tool in body.get("tools", [])]


@pytest.mark.parametrize(
    ("provider", "choice", "tools"),
    [
        ("standin-responses", ALLOWED, ["get_weather", "get_time"]),  # the Responses API has the form itself
        ("standin-chat", "required", ["get_time"]),
        ("standin-anthropic", {"type": "any"}, ["get_time"]),
    ],
)
def test_allowed_tools_reach_each_wire_in_its_own_form(alice, standin_catalog, provider, choice, tools):
    response = ask(alice, provider, tools=[WEATHER, TIME], tool_choice=ALLOWED)
    assert response.status_code == 200, response.content
    body = sent(standin_catalog)
    assert body["tool_choice"] == choice and names(body) == tools
    assert response.json()["tool_choice"] == ALLOWED  # the caller's form echoed


def test_allowed_tools_in_auto_mode_on_the_anthropic_wire(alice, standin_catalog):
    choice = {**ALLOWED, "mode": "auto"}
    response = ask(alice, "standin-anthropic", tools=[WEATHER, TIME], tool_choice=choice, parallel_tool_calls=False)
    assert response.status_code == 200, response.content
    body = sent(standin_catalog)
    assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True} and names(body) == ["get_time"]


@pytest.mark.parametrize(
    "choice",
    [
        {"type": "shell"},
        {"type": "apply_patch"},
        {"type": "custom", "name": "grammar"},
        {"type": "web_search_preview"},
        {"type": "mcp", "server_label": "docs"},
        {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "nope"}]},
        {"type": "allowed_tools", "mode": "auto", "tools": []},
        {"type": "allowed_tools", "mode": "sometimes", "tools": [{"type": "function", "name": "get_time"}]},
        {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function"}]},
    ],
)
@pytest.mark.parametrize("provider", ["standin-anthropic", "standin-chat", "standin-responses"])
def test_a_tool_choice_naming_no_declared_tool_is_a_400_naming_it(alice, standin_catalog, provider, choice):
    response = ask(alice, provider, tools=[WEATHER, TIME], tool_choice=choice)
    error = assert_error_envelope(response, 400)["error"]
    assert error["message"].startswith("tool_choice"), error
    assert model_calls(standin_catalog) == []


@pytest.mark.parametrize(
    ("provider", "choice"),
    [
        ("standin-responses", {"type": "web_search_preview"}),
        ("standin-anthropic", {"type": "tool", "name": "web_search"}),
    ],
)
def test_a_forced_provider_tool_beside_functions_reaches_the_endpoint_that_runs_it(
    alice, standin_catalog, provider, choice
):
    """The request that answered 500 on the Anthropic wire: a hosted tool forced while function tools are declared."""
    load_hosted_catalog()
    tools = [WEATHER, {"type": "web_search_preview"}]
    response = ask(alice, provider, model="standin/search", tools=tools, tool_choice={"type": "web_search_preview"})
    assert response.status_code == 200, response.content
    assert sent(standin_catalog)["tool_choice"] == choice


def test_reasoning_with_a_forced_provider_tool_is_routed_past_the_anthropic_wire(alice, standin_catalog):
    """Anthropic's thinking cannot be combined with a forced tool, its web search included: its adapter would
    drop the reasoning asked for. Routed to the Responses wire instead, a 404 naming it when nothing is left."""
    load_hosted_catalog()
    body = {
        "model": "standin/search",
        "tools": [{"type": "web_search_preview"}],
        "tool_choice": {"type": "web_search_preview"},
        "reasoning": {"effort": "high"},
    }
    error = assert_error_envelope(ask(alice, "standin-anthropic", **body), 404)["error"]
    assert error["metadata"]["param"] == "reasoning_with_forced_tool_choice" and not model_calls(standin_catalog)
    response = ask(alice, "standin-responses", **body)
    assert response.status_code == 200, response.content
    assert sent(standin_catalog)["reasoning"]["effort"] == "high"


def test_allowed_tools_with_a_provider_tool_keep_only_the_allowed_ones(alice, standin_catalog):
    load_hosted_catalog()
    choice = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "web_search_preview"}]}
    tools = [WEATHER, {"type": "web_search_preview"}]
    response = ask(alice, "standin-anthropic", model="standin/search", tools=tools, tool_choice=choice)
    assert response.status_code == 200, response.content
    body = sent(standin_catalog)
    assert names(body) == ["web_search"] and body["tool_choice"] == {"type": "any"}


def test_the_chat_door_takes_the_allowed_tools_form(alice, standin_catalog):
    tools = [
        {"type": "function", "function": {"name": t["name"], "parameters": t["parameters"]}} for t in (WEATHER, TIME)
    ]
    choice = {
        "type": "allowed_tools",
        "allowed_tools": {"mode": "required", "tools": [{"type": "function", "function": {"name": "get_time"}}]},
    }
    body = {"model": "standin/echo", "messages": [{"role": "user", "content": "Time?"}], "tools": tools}
    response = post_chat(alice, {**body, "tool_choice": choice, "provider": {"only": ["standin-anthropic"]}})
    assert response.status_code == 200, response.content
    upstream = sent(standin_catalog)
    assert upstream["tool_choice"] == {"type": "any"} and names(upstream) == ["get_time"]

    standin_catalog.clear()
    response = post_chat(alice, {**body, "tool_choice": choice, "provider": {"only": ["standin-chat"]}})
    assert response.status_code == 200, response.content
    upstream = sent(standin_catalog)
    assert upstream["tool_choice"] == "required" and names(upstream) == ["get_time"]

    missing = {
        "type": "allowed_tools",
        "allowed_tools": {"mode": "auto", "tools": [{"type": "function", "function": {"name": "x"}}]},
    }
    error = assert_error_envelope(post_chat(alice, {**body, "tool_choice": missing}), 400)["error"]
    assert error["message"] == 'tool_choice: tools[0]: the function tool "x" is not among the request\'s tools', error


def test_the_messages_door_sends_its_tool_choice_to_the_chat_wire_in_that_wire_form(alice, standin_catalog):
    tools = [{"name": "get_time", "input_schema": {"type": "object", "properties": {}}}]
    body = {
        "model": "standin/echo",
        "max_tokens": 50,
        "messages": [{"role": "user", "content": "Time?"}],
        "tools": tools,
        "tool_choice": {"type": "tool", "name": "get_time"},
        "provider": {"only": ["standin-chat"]},
    }
    response = post_message(alice, body)
    assert response.status_code == 200, response.content
    assert sent(standin_catalog)["tool_choice"] == {"type": "function", "function": {"name": "get_time"}}


def test_required_with_nothing_to_call_is_a_400_on_responses(alice, standin_catalog):
    """As on the chat door and the official API: required with no tool was dropped, the answer a plain reply."""
    error = assert_error_envelope(ask(alice, "standin-chat", tool_choice="required"), 400)["error"]
    assert error["message"].startswith("tool_choice") and model_calls(standin_catalog) == []
    assert ask(alice, "standin-chat", tool_choice="none").status_code == 200


def test_allowed_tools_hold_in_every_round_of_the_server_tool_loop(alice, standin_catalog):
    """A server tool among the allowed tools: the first round forced to the allowed ones, later rounds still only
    them (auto), the last round (server tools withdrawn) none when only server tools were allowed."""
    choice = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "gateway:datetime"}]}
    script = json.dumps({"chunks": 1, "tool_call": "gateway_datetime,gateway_datetime,"})
    response = ask(
        alice,
        "standin-anthropic",
        input=f"Hello <<standin {script}>>",
        tools=[WEATHER, {"type": "gateway:datetime"}],
        tool_choice=choice,
        max_tool_calls=1,
    )
    assert response.status_code == 200, response.content
    rounds = [call["body"] for call in model_calls(standin_catalog)]
    assert [(names(body), body.get("tool_choice")) for body in rounds] == [
        (["gateway_datetime"], {"type": "any"}),
        (["get_weather"], {"type": "none"}),  # max_tool_calls reached: the caller's tools only, none allowed
    ]

    standin_catalog.clear()
    script = json.dumps({"chunks": 1, "tool_call": "gateway_datetime,"})
    response = ask(
        alice,
        "standin-anthropic",
        input=f"Hello <<standin {script}>>",
        tools=[WEATHER, {"type": "gateway:datetime"}],
        tool_choice=choice,
    )
    assert response.status_code == 200, response.content
    rounds = [call["body"] for call in model_calls(standin_catalog)]
    assert [(names(body), body.get("tool_choice")) for body in rounds] == [
        (["gateway_datetime"], {"type": "any"}),
        (["gateway_datetime"], {"type": "auto"}),  # still only the allowed tool, no longer forced
    ]
