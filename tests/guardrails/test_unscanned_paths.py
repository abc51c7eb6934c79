"""Every text the model receives is scanned (issue 28, item 4): tool and function names and descriptions on the
three doors, file names, the text of files (parsed by the file-parser, or sent to the provider as they are), the
web plugin's search prompt, words split across two text parts of a message, and letters spelled with look-alikes
from other scripts. A blocking pattern placed only there refuses the request before any provider sees it; a
redaction there is what the provider gets."""

import base64
import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.guardrails.test_enforcement import BLOCK, ask, guardrail, upstream_calls
from tests.guardrails.test_enforcement_adversarial import text_only_model  # noqa: F401  # a fixture
from tests.plugins.test_web_plugin import searxng  # noqa: F401  # a fixture
from tests.support import assert_error_envelope

REDACT_EMAIL: dict[str, Any] = {"content_filter_builtins": [{"slug": "email", "action": "redact"}]}
PARAMETERS = {"type": "object", "properties": {"q": {"type": "string"}}}


def data_url(text: str, media: str = "text/plain") -> str:
    return f"data:{media};base64,{base64.b64encode(text.encode()).decode()}"


def chat(persona, body: dict):
    return persona.client().post("/api/v1/chat/completions", {"model": "standin/echo", **body}, format="json")


def messages(persona, body: dict):
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=persona.api_key)
    return client.post("/api/v1/messages", {"model": "standin/echo", "max_tokens": 50, **body}, format="json")


def door_with_tool(door: str, persona, *, name: str, description: str):
    """A request on `door` declaring one function tool."""
    if door == "responses":
        tool = {"type": "function", "name": name, "description": description, "parameters": PARAMETERS}
        return ask(persona, "Hi", tools=[tool])
    if door == "chat":
        function = {"name": name, "description": description, "parameters": PARAMETERS}
        return chat(
            persona,
            {"messages": [{"role": "user", "content": "Hi"}], "tools": [{"type": "function", "function": function}]},
        )
    tool = {"name": name, "description": description, "input_schema": PARAMETERS}
    return messages(persona, {"messages": [{"role": "user", "content": "Hi"}], "tools": [tool]})


def refused(response, door: str) -> None:
    """A 403 in the door's own error shape."""
    if door == "messages":
        assert response.status_code == 403, response.content
        assert response.json()["error"]["type"] == "permission_error"
        return
    body = assert_error_envelope(response, 403)
    assert body["error"]["metadata"]["patterns"] == ["project-code"]


@pytest.mark.parametrize("door", ["responses", "chat", "messages"])
@pytest.mark.parametrize("where", ["name", "description"])
def test_a_tool_name_or_description_is_scanned_on_every_door(alice, standin_catalog, door, where):
    guardrail(alice, **BLOCK)
    name, description = ("ACME-1234", "Look up") if where == "name" else ("lookup", "Look up ACME-1234")
    refused(door_with_tool(door, alice, name=name, description=description), door)
    assert upstream_calls(standin_catalog) == []


def test_the_name_of_a_function_call_sent_back_is_scanned(alice, standin_catalog):
    guardrail(alice, **BLOCK)
    items: Any = [
        {"role": "user", "content": "Hi"},
        {"type": "function_call", "call_id": "c1", "name": "ACME-1234", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "done"},
    ]
    refused(ask(alice, items), "responses")
    assert upstream_calls(standin_catalog) == []


def test_a_redaction_in_a_tool_name_refuses_the_request(alice, standin_catalog):
    """A name cannot be redacted (the model would call a tool that is not the caller's): refused, not sent."""
    guardrail(alice, content_filters=[{"pattern": "internal", "action": "redact", "label": "internal"}])
    tool = {"type": "function", "name": "internal_lookup", "description": "Look up", "parameters": PARAMETERS}
    body = assert_error_envelope(ask(alice, "Hi", tools=[tool]), 403)
    assert body["error"]["metadata"]["patterns"] == ["internal"]
    assert upstream_calls(standin_catalog) == []


def input_file(text: str, *, media: str = "text/plain", name: str = "notes.txt") -> list[dict]:
    part = {"type": "input_file", "filename": name, "file_data": data_url(text, media)}
    return [{"role": "user", "content": [{"type": "input_text", "text": "Summarise the file."}, part]}]


HTML = (
    "<html><body><article><h1>Plans</h1><p>The plan for ACME-1234 is in motion this spring.</p></article></body></html>"
)


@pytest.mark.parametrize(("media", "text"), [("text/plain", "the plan for ACME-1234"), ("text/html", HTML)])
def test_the_text_of_a_parsed_file_is_scanned(alice, text_only_model, media, text):  # noqa: F811
    guardrail(alice, **BLOCK)
    name = "notes.txt" if media == "text/plain" else "page.html"
    refused(ask(alice, input_file(text, media=media, name=name)), "responses")
    assert upstream_calls(text_only_model) == []


def test_the_text_of_a_parsed_file_is_redacted_before_the_model_reads_it(alice, text_only_model):  # noqa: F811
    guardrail(alice, **REDACT_EMAIL)
    response = ask(alice, input_file("write to jane.doe@example.com"))
    assert response.status_code == 200, response.content
    (sent,) = upstream_calls(text_only_model)
    raw = json.dumps(sent["body"])
    assert "jane.doe@example.com" not in raw and "write to [REDACTED:email]" in raw


@pytest.mark.parametrize("stream", [False, True])
def test_a_file_sent_to_the_provider_as_it_is_is_scanned(alice, standin_catalog, stream):
    guardrail(alice, **BLOCK)
    refused(ask(alice, input_file("the plan for ACME-1234"), stream=stream), "responses")
    assert upstream_calls(standin_catalog) == []


def test_a_chat_completions_file_part_is_scanned(alice, standin_catalog):
    guardrail(alice, **BLOCK)
    part = {"type": "file", "file": {"filename": "notes.txt", "file_data": data_url("the plan for ACME-1234")}}
    response = chat(alice, {"messages": [{"role": "user", "content": [{"type": "text", "text": "Read it"}, part]}]})
    refused(response, "chat")
    assert upstream_calls(standin_catalog) == []


def test_a_messages_base64_text_document_is_scanned(alice, standin_catalog):
    guardrail(alice, **BLOCK)
    source = {"type": "base64", "media_type": "text/plain", "data": base64.b64encode(b"plan ACME-1234").decode()}
    content = [{"type": "text", "text": "Read it"}, {"type": "document", "source": source}]
    refused(messages(alice, {"messages": [{"role": "user", "content": content}]}), "messages")
    assert upstream_calls(standin_catalog) == []


def test_a_text_file_sent_as_it_is_reaches_the_provider_redacted(alice, standin_catalog):
    guardrail(alice, **REDACT_EMAIL)
    response = ask(alice, input_file("write to jane.doe@example.com"))
    assert response.status_code == 200, response.content
    (sent,) = upstream_calls(standin_catalog)
    raw = json.dumps(sent["body"])
    assert "jane.doe@example.com" not in raw
    assert base64.b64encode(b"write to [REDACTED:email]").decode() in raw


def test_a_file_the_guardrails_cannot_read_is_not_sent_unscanned(alice, standin_catalog):
    """A PDF the provider would read itself: its text is not scanned unless the gateway parses it, so with content
    filters in force it is refused (naming how to have it parsed) rather than let through."""
    guardrail(alice, **BLOCK)
    part = {"type": "input_file", "filename": "plan.pdf", "file_data": "data:application/pdf;base64,JVBERi0xLjcK"}
    body = assert_error_envelope(ask(alice, [{"role": "user", "content": [part]}]), 403)
    assert "plan.pdf" in body["error"]["message"] and "file-parser" in body["error"]["message"]
    assert upstream_calls(standin_catalog) == []


@pytest.mark.parametrize("parsed", [False, True])
def test_a_file_name_is_scanned(alice, standin_catalog, parsed):
    if parsed:
        from routing.models import Model

        Model.objects.filter(pk="standin/echo").update(input_modalities=["text"])
    guardrail(alice, **BLOCK)
    refused(ask(alice, input_file("harmless", name="ACME-1234.txt")), "responses")
    assert upstream_calls(standin_catalog) == []


def test_the_web_search_prompt_is_scanned(alice, searxng):  # noqa: F811
    guardrail(alice, **BLOCK)
    plugins = [{"id": "web", "search_prompt": "Results about ACME-1234 as of {date}:"}]
    refused(ask(alice, "What happened at the launch?", plugins=plugins), "responses")
    assert upstream_calls(searxng) == [] and searxng.requests_for("/search") == []  # refused before the paid search


def test_a_redaction_in_the_web_search_prompt_is_what_the_model_reads(alice, searxng):  # noqa: F811
    guardrail(alice, **REDACT_EMAIL)
    plugins = [{"id": "web", "search_prompt": "Sources (questions to jane.doe@example.com):"}]
    response = ask(alice, "What happened at the launch?", plugins=plugins)
    assert response.status_code == 200, response.content
    (sent,) = upstream_calls(searxng)
    raw = json.dumps(sent["body"])
    assert "jane.doe@example.com" not in raw and "Sources (questions to [REDACTED:email]):" in raw


def split_message(*texts: str) -> list[dict]:
    return [{"role": "user", "content": [{"type": "input_text", "text": text} for text in texts]}]


def test_a_word_split_across_two_text_parts_is_blocked(alice, standin_catalog):
    """Adjacent text parts reach the model one after the other: "ACME-12" + "34" is "ACME-1234"."""
    guardrail(alice, **BLOCK)
    refused(ask(alice, split_message("Tell me about ACME-12", "34 please")), "responses")
    assert upstream_calls(standin_catalog) == []


def test_a_match_split_across_two_text_parts_is_redacted_in_both(alice, standin_catalog):
    guardrail(alice, **REDACT_EMAIL)
    response = ask(alice, split_message("write to jane.doe@exa", "mple.com today"))
    assert response.status_code == 200, response.content
    (sent,) = upstream_calls(standin_catalog)
    raw = json.dumps(sent["body"])
    assert "jane.doe" not in raw and "mple.com" not in raw
    assert "write to [REDACTED:email]" in raw and " today" in raw


CYRILLIC_ACME = "\u0410\u0421\u041c\u0415-1234"  # АСМЕ in Cyrillic capitals, looking like ACME


@pytest.mark.parametrize("spelled", [CYRILLIC_ACME, "\u0391\u0421\u039c\u0395-1234", "AC\u041cE-1234"])
def test_a_blocked_pattern_spelled_with_look_alike_letters_is_blocked(alice, standin_catalog, spelled):
    guardrail(alice, **BLOCK)
    refused(ask(alice, f"Tell me about {spelled}"), "responses")
    assert upstream_calls(standin_catalog) == []


def test_look_alike_folding_is_for_matching_only(alice, standin_catalog):
    """A pattern in another script still matches its own text, and a flagged text reaches the provider as sent."""
    guardrail(alice, content_filters=[{"pattern": "пароль", "action": "flag", "label": "ru-password"}])
    text = "мой пароль здесь, ACME"
    response = ask(alice, text)
    assert response.status_code == 200, response.content
    (entry,) = response.json()["gateway_metadata"]["pipeline"]
    assert entry["summary"] == "flagged" and entry["data"]["patterns"] == ["ru-password"]
    (sent,) = upstream_calls(standin_catalog)
    assert text in json.dumps(sent["body"], ensure_ascii=False)


def test_a_look_alike_match_is_redacted_over_the_letters_that_spelled_it():
    from guardrails.policy import policy_for

    policy = policy_for([{"pattern": r"ACME-\d{4}", "action": "redact", "label": "code"}], [])
    text = f"see {CYRILLIC_ACME}, \uff21\u0421\u039c\uff25-\uff11\uff12\uff13\uff14 and ACME-1234 now"
    assert policy.scan(text).redacted() == "see [REDACTED:code], [REDACTED:code] and [REDACTED:code] now"
    assert policy.scan("мой пароль").redacted() == "мой пароль"  # no match: left as it is


def test_a_text_file_is_scanned_before_a_router_reads_the_request(alice, db, standin):
    """The fusion panel runs before the file-parser: a text file's text is the caller's, scanned in the first pass,
    so a block in it refuses before any panel member is called (and is paid for)."""
    from tests.plugins.test_fusion import PANEL, fusion_catalog

    fusion_catalog(standin)
    guardrail(alice, **BLOCK)
    plugin = {"id": "fusion", "analysis_models": PANEL, "model": "bolt/delta", "tools": []}
    response = ask(alice, input_file("the plan for ACME-1234"), model="gateway/fusion", plugins=[plugin])
    refused(response, "responses")
    assert upstream_calls(standin) == []
