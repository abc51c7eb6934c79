"""Every canonical tool_choice form -> each adapter's exact upstream JSON (tools and tool_choice): allowed tools as the
Responses API's own form, or a filtered tool list with auto/required (auto/any on Anthropic's and Bedrock's wires,
which have no allowed-tools form); a provider-run tool forced by type where the wire runs it. No adapter raises on
a form (the Anthropic builder raised TypeError on an object it did not know: a 500), none passes a Responses-shaped
choice to another wire."""

from dataclasses import replace

import pytest

from byok.credentials import ProviderCredentials
from routing.canonical import CanonicalRequest, FunctionTool, HostedTool, Message, TextPart
from routing.providers.registry import ADAPTERS

CREDENTIALS = ProviderCredentials(api_key="sk-test-secret-0123456789", extra={"project_id": "p", "region": "us-east5"})
WEATHER = FunctionTool(name="get_weather", parameters={"type": "object"})
TIME = FunctionTool(name="get_time", parameters={"type": "object"})
REQUEST = CanonicalRequest(model="m", input=(Message(role="user", content=(TextPart("Hi"),)),), tools=(WEATHER, TIME))
ALLOWED = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "get_time"}]}
SEARCH = HostedTool(spec={"type": "web_search_preview"}, source="tools[1]")


def body(kind: str, request: CanonicalRequest) -> dict:
    return ADAPTERS[kind].build_request(request, base_url="https://upstream.example/v1", credentials=CREDENTIALS).body


def names(sent: dict) -> list[str]:
    if "toolConfig" in sent:
        return [tool["toolSpec"]["name"] for tool in sent["toolConfig"]["tools"]]
    return [tool.get("name") or tool.get("function", {}).get("name") for tool in sent.get("tools", [])]


def choice(kind: str, sent: dict):
    return sent["toolConfig"].get("toolChoice") if kind == "bedrock" else sent.get("tool_choice")


# kind -> (tools sent, tool_choice sent) for ALLOWED (mode required) and for mode auto
ALLOWED_ON_THE_WIRE = {
    "openai_responses": (
        (["get_weather", "get_time"], ALLOWED),
        (["get_weather", "get_time"], {**ALLOWED, "mode": "auto"}),
    ),
    "openai_chat": ((["get_time"], "required"), (["get_time"], "auto")),
    "azure": ((["get_time"], "required"), (["get_time"], "auto")),
    "anthropic": ((["get_time"], {"type": "any"}), (["get_time"], {"type": "auto"})),
    "vertex": ((["get_time"], {"type": "any"}), (["get_time"], {"type": "auto"})),
    "bedrock": ((["get_time"], {"any": {}}), (["get_time"], {"auto": {}})),
}


@pytest.mark.parametrize("kind", sorted(ADAPTERS))
def test_allowed_tools_reach_each_wire_in_its_form(kind):
    required, auto = ALLOWED_ON_THE_WIRE[kind]
    sent = body(kind, replace(REQUEST, tool_choice=ALLOWED))
    assert (names(sent), choice(kind, sent)) == required
    sent = body(kind, replace(REQUEST, tool_choice={**ALLOWED, "mode": "auto"}))
    assert (names(sent), choice(kind, sent)) == auto


@pytest.mark.parametrize("kind", ["anthropic", "vertex"])
def test_allowed_tools_on_anthropic_keep_the_parallel_switch(kind):
    sent = body(kind, replace(REQUEST, tool_choice={**ALLOWED, "mode": "auto"}, parallel_tool_calls=False))
    assert sent["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}


@pytest.mark.parametrize(
    ("kind", "tools", "sent_choice"),
    [
        ("openai_responses", ["get_weather", "get_time", None], {"type": "web_search_preview"}),
        ("anthropic", ["get_weather", "get_time", "web_search"], {"type": "tool", "name": "web_search"}),
        # a search model searches on every call, unasked: the function tools beside it stay at auto
        ("openai_chat", ["get_weather", "get_time"], None),
    ],
)
def test_a_forced_provider_tool_beside_function_tools(kind, tools, sent_choice):
    request = replace(REQUEST, hosted_tools=(SEARCH,), tool_choice={"type": "web_search_preview"})
    sent = body(kind, request)
    assert names(sent) == tools and sent.get("tool_choice") == sent_choice
    if kind == "openai_chat":
        assert "web_search_options" in sent


def test_allowed_tools_naming_the_provider_search_alone_on_anthropic():
    allowed = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "web_search_preview"}]}
    sent = body("anthropic", replace(REQUEST, hosted_tools=(SEARCH,), tool_choice=allowed))
    assert names(sent) == ["web_search"] and sent["tool_choice"] == {"type": "any"}
    sent = body("anthropic", replace(REQUEST, hosted_tools=(SEARCH,), tool_choice={**allowed, "mode": "auto"}))
    assert names(sent) == ["web_search"] and "tool_choice" not in sent


def test_the_anthropic_wire_drops_thinking_when_allowed_tools_force_a_call():
    from routing.canonical import ReasoningConfig

    reasoning = ReasoningConfig(effort="high")
    assert "thinking" not in body("anthropic", replace(REQUEST, tool_choice=ALLOWED, reasoning=reasoning))
    auto = replace(REQUEST, tool_choice={**ALLOWED, "mode": "auto"}, reasoning=reasoning)
    assert body("anthropic", auto)["thinking"]["type"] == "enabled"


def test_a_provider_tool_chosen_by_another_spelling_reaches_the_responses_wire_as_declared():
    """web_search_preview chosen, web_search declared: OpenAI finds no tool of the chosen spelling."""
    declared = HostedTool(spec={"type": "web_search"}, source="tools[1]")
    request = replace(REQUEST, hosted_tools=(declared,), tool_choice={"type": "web_search_preview"})
    assert body("openai_responses", request)["tool_choice"] == {"type": "web_search"}
    allowed = {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "web_search_preview"}]}
    sent = body("openai_responses", replace(request, tool_choice=allowed))
    assert sent["tool_choice"] == {**allowed, "tools": [{"type": "web_search"}]}
