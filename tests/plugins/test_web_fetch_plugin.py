"""The `web-fetch` plugin (a request's entry or the account's default) gives the model the gateway:web_fetch
server tool with the plugin's fields as its parameters (max_uses, max_content_tokens, allowed_domains,
blocked_domains); the server-tool loop runs it like the tool named in `tools`. It was a 400 (not honoured)."""

import json

from plugins.services import plugin_defaults_replace
from tests.plugins.test_server_tools import ANSWER, METADATA, model_requests


def ask(client, script: dict, **body):
    directive = json.dumps({"chunks": 1, **script})
    payload = {"model": "standin/echo", "input": f"Hello <<standin {directive}>>", **body}
    return client.post("/api/v1/responses", payload, format="json", **METADATA)


def fetch_call(url: str, times: int = 1) -> dict:
    return {"tool_call": "gateway_web_fetch," * times, "tool_arguments": json.dumps({"url": url})}


def test_the_plugin_lets_the_model_fetch_a_page(alice, standin_catalog, standin, settings):
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = True  # the stand-in's pages are on loopback
    standin.clear()
    response = ask(alice.client(), fetch_call(f"{standin.url}/pages/article.html"), plugins=[{"id": "web-fetch"}])
    assert response.status_code == 200, response.content
    body = response.json()
    item, answer = body["output"][0], body["output"][-1]
    assert item["type"] == "gateway:web_fetch" and item["status"] == "completed"
    assert answer["content"][0]["text"] == ANSWER
    first, second = model_requests(standin)[:2]
    assert "gateway_web_fetch" in json.dumps(first["body"])  # declared to the model
    assert "STANDIN-ARTICLE-TEXT" in json.dumps(second["body"])  # and the page read into the next round
    [entry] = [e for e in body["gateway_metadata"]["pipeline"] if e["type"] == "server_tools"]
    assert "gateway:web_fetch" in json.dumps(entry)


def test_the_plugins_fields_are_the_tools_parameters(alice, standin_catalog, standin, settings):
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = True
    plugin = {"id": "web-fetch", "max_uses": 1, "blocked_domains": ["blocked.example"]}
    body = ask(alice.client(), fetch_call(f"{standin.url}/pages/notes.txt", times=2), plugins=[plugin]).json()
    first, second = body["output"][:2]
    assert first["status"] == "completed" and second["status"] == "failed" and "max_uses" in second["error"]

    body = ask(alice.client(), fetch_call("https://blocked.example/page"), plugins=[plugin]).json()
    assert body["output"][0]["status"] == "failed" and "blocked" in body["output"][0]["error"]


def test_an_account_default_turns_it_on_and_a_request_can_turn_it_off(alice, standin_catalog, standin, settings):
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = True
    plugin_defaults_replace(account_id=alice.account_id, entries=[{"id": "web-fetch", "enabled": True}])
    standin.clear()
    body = ask(alice.client(), fetch_call(f"{standin.url}/pages/article.html")).json()
    assert body["output"][0]["type"] == "gateway:web_fetch"

    standin.clear()
    off = ask(alice.client(), {}, plugins=[{"id": "web-fetch", "enabled": False}]).json()
    assert all(item["type"] == "message" for item in off["output"])
    assert "gateway_web_fetch" not in json.dumps(model_requests(standin)[0]["body"])


def test_a_request_naming_the_tool_keeps_its_own_parameters(alice, standin_catalog, standin, settings):
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = True
    body = ask(
        alice.client(),
        fetch_call(f"{standin.url}/pages/notes.txt", times=2),
        plugins=[{"id": "web-fetch", "max_uses": 5}],
        tools=[{"type": "gateway:web_fetch", "parameters": {"max_uses": 1}}],
    ).json()
    calls = [item for item in body["output"] if item["type"] == "gateway:web_fetch"]
    assert [call["status"] for call in calls] == ["completed", "failed"]  # the tool's max_uses: 1, declared once
