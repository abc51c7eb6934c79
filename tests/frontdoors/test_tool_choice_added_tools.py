"""tool_choice naming tools the request does not send as given: a server tool a plugin adds (the web-fetch
plugin's gateway:web_fetch, by the request's entry or the account's default) may be chosen, and is still a 400
naming tool_choice when nothing adds it; a deferred function (defer_loading, withheld until gateway:tool_search finds
it) cannot be forced, and may be named in allowed_tools only beside gateway:tool_search: the wire's allowed list
names only the tools sent, the deferred one joining it in the round after tool_search found it (it reached the
Responses wire as a reference to a tool not sent)."""

import json

import pytest

from plugins.services import plugin_defaults_replace
from tests.plugins.test_hosted_tools import model_calls
from tests.support import assert_error_envelope

WEATHER = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}
DEFERRED = {
    "type": "function",
    "name": "lookup_order",
    "description": "Look up an order by its number",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
    "defer_loading": True,
}
SEARCH = {"type": "gateway:tool_search"}
FETCH_FORCED = {"type": "gateway:web_fetch"}
FETCH_ALLOWED = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "gateway:web_fetch"}]}


def ask(persona, provider: str, script: dict | None = None, **body):
    directive = f" <<standin {json.dumps({'chunks': 1, **script})}>>" if script else ""
    payload = {"model": "standin/echo", "input": f"Hello{directive}", "provider": {"only": [provider]}, **body}
    return persona.client().post("/api/v1/responses", payload, format="json")


def rounds(standin) -> list[dict]:
    return [call["body"] for call in model_calls(standin)]


def names(body: dict) -> list[str]:
    return [tool.get("name") or tool.get("function", {}).get("name") for tool in body.get("tools", [])]


@pytest.mark.parametrize(
    ("choice", "upstream"),
    [
        (FETCH_FORCED, {"type": "function", "name": "gateway_web_fetch"}),
        (
            FETCH_ALLOWED,
            {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "gateway_web_fetch"}]},
        ),
    ],
)
def test_a_server_tool_the_plugin_adds_may_be_chosen(alice, standin_catalog, choice, upstream):
    response = ask(alice, "standin-responses", tools=[WEATHER], tool_choice=choice, plugins=[{"id": "web-fetch"}])
    assert response.status_code == 200, response.content
    (body,) = rounds(standin_catalog)
    assert body["tool_choice"] == upstream and "gateway_web_fetch" in names(body)
    assert response.json()["tool_choice"] == choice  # the caller's form echoed


@pytest.mark.parametrize("provider", ["standin-anthropic", "standin-chat"])
def test_the_forced_plugin_tool_reaches_the_other_wires_in_their_form(alice, standin_catalog, provider):
    plugin_defaults_replace(account_id=alice.account_id, entries=[{"id": "web-fetch", "enabled": True}])
    response = ask(alice, provider, tool_choice=FETCH_FORCED)  # the account's default adds the tool
    assert response.status_code == 200, response.content
    (body,) = rounds(standin_catalog)
    expected = (
        {"type": "tool", "name": "gateway_web_fetch"}
        if provider == "standin-anthropic"
        else {"type": "function", "function": {"name": "gateway_web_fetch"}}
    )
    assert body["tool_choice"] == expected and names(body) == ["gateway_web_fetch"]


def test_the_forced_plugin_tool_runs(alice, standin_catalog, standin, settings):
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = True  # the stand-in's pages are on loopback
    script = {"tool_call": "gateway_web_fetch,", "tool_arguments": json.dumps({"url": f"{standin.url}/pages/a.txt"})}
    response = ask(
        alice, "standin-anthropic", script, tool_choice=FETCH_FORCED, plugins=[{"id": "web-fetch", "max_uses": 1}]
    )
    assert response.status_code == 200, response.content
    assert response.json()["output"][0]["type"] == "gateway:web_fetch"
    first, second = rounds(standin_catalog)
    assert first["tool_choice"] == {"type": "tool", "name": "gateway_web_fetch"}
    assert second["tool_choice"] == {"type": "auto"}  # forced in the first round only


@pytest.mark.parametrize("choice", [FETCH_FORCED, FETCH_ALLOWED, {"type": "openrouter:web_fetch"}])
@pytest.mark.parametrize("plugins", [[], [{"id": "web-fetch", "enabled": False}]])
def test_a_server_tool_nothing_adds_is_still_a_400_naming_tool_choice(alice, standin_catalog, choice, plugins):
    response = ask(alice, "standin-chat", tools=[WEATHER], tool_choice=choice, plugins=plugins)
    error = assert_error_envelope(response, 400)["error"]
    assert error["message"].startswith("tool_choice: ") and "is not among the request's tools" in error["message"]
    assert model_calls(standin_catalog) == []


def test_the_account_default_turned_off_by_the_request_refuses_the_choice(alice, standin_catalog):
    plugin_defaults_replace(account_id=alice.account_id, entries=[{"id": "web-fetch", "enabled": True}])
    assert ask(alice, "standin-chat", tools=[WEATHER], tool_choice=FETCH_FORCED).status_code == 200
    standin_catalog.clear()
    off = ask(
        alice,
        "standin-chat",
        tools=[WEATHER],
        tool_choice=FETCH_FORCED,
        plugins=[{"id": "web-fetch", "enabled": False}],
    )
    assert assert_error_envelope(off, 400)["error"]["message"].startswith("tool_choice: ")
    assert model_calls(standin_catalog) == []


@pytest.mark.parametrize(
    ("choice", "why"),
    [
        ({"type": "function", "name": "lookup_order"}, "cannot be forced"),
        (
            {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "lookup_order"}]},
            'tools[0]: the function tool "lookup_order" is deferred (defer_loading) and gateway:tool_search',
        ),
    ],
)
def test_a_deferred_function_cannot_be_forced_nor_allowed_without_tool_search(alice, standin_catalog, choice, why):
    response = ask(alice, "standin-responses", tools=[SEARCH, WEATHER, DEFERRED], tool_choice=choice)
    error = assert_error_envelope(response, 400)["error"]
    assert error["message"].startswith("tool_choice") and why in error["message"], error
    assert model_calls(standin_catalog) == []


@pytest.mark.parametrize("provider", ["standin-responses", "standin-chat", "standin-anthropic"])
def test_an_allowed_deferred_function_joins_the_wires_list_once_found(alice, standin_catalog, provider):
    choice = {
        "type": "allowed_tools",
        "mode": "required",
        "tools": [{"type": "gateway:tool_search"}, {"type": "function", "name": "lookup_order"}],
    }
    script = {"tool_call": "gateway_tool_search,lookup_order,", "tool_arguments": '{"query": "order"}'}
    response = ask(alice, provider, script, tools=[SEARCH, WEATHER, DEFERRED], tool_choice=choice)
    assert response.status_code == 200, response.content
    assert response.json()["output"][-1]["name"] == "lookup_order"
    assert response.json()["tool_choice"] == choice
    first, second = rounds(standin_catalog)
    if provider == "standin-responses":  # the wire's own allowed_tools: only tools sent in that round
        assert names(first) == ["get_weather", "gateway_tool_search"]
        assert first["tool_choice"]["tools"] == [{"type": "function", "name": "gateway_tool_search"}]
        assert second["tool_choice"] == {
            "type": "allowed_tools",
            "mode": "auto",
            "tools": [
                {"type": "function", "name": "gateway_tool_search"},
                {"type": "function", "name": "lookup_order"},
            ],
        }
    else:  # the tool list cut to the allowed ones
        assert names(first) == ["gateway_tool_search"]
        assert sorted(names(second)) == ["gateway_tool_search", "lookup_order"]
