"""context-compression (middle-out): a conversation longer than every endpoint's context loses its middle, never
its system prompt, its start, its end or half of a tool call, and is then served; on by default when every
endpoint has a context of 8,192 tokens or less, and `enabled: false` keeps the 400 context_length_exceeded. The
upstream request bodies are read from the stand-in provider."""

import json

import pytest

from gateway.billing.models import Generation
from plugins.compression.stage import Size, _item_size, middle_out, turns
from routing.canonical import FunctionCall, FunctionCallOutput, Message, Reasoning, TextPart
from tests.support import assert_error_envelope

METADATA = {"HTTP_X_GATEWAY_METADATA": "enabled"}
SYSTEM = "You are the ship's computer. Answer in one line."
FILLER = "The quick brown fox jumps over the lazy dog. "  # 45 characters


@pytest.fixture
def small_catalog(db, standin):
    """tiny/chat: one endpoint with an 8,192-token context (Chat Completions wire, on the stand-in)."""
    from routing.models import Provider
    from routing.services import catalog_load, provider_credential_set

    catalog_load(
        data={
            "providers": [
                {
                    "slug": "tiny",
                    "name": "Tiny",
                    "adapter": "openai_chat",
                    "base_url": f"{standin.url}/v1",
                    "allow_private_network": True,
                    "zdr": True,
                }
            ],
            "models": [
                {
                    "id": "tiny/chat",
                    "name": "Tiny",
                    "context_length": 8192,
                    "endpoints": [
                        {"provider": "tiny", "upstream_model": "tiny-8k", "pricing": {"prompt": 1, "completion": 1}}
                    ],
                }
            ],
        }
    )
    provider_credential_set(provider=Provider.objects.get(slug="tiny"), plaintext="sk-tiny")
    standin.clear()
    return standin


def message(role: str, text: str) -> dict:
    kind = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


def conversation(turn_count: int, *, turn_chars: int = 2_000) -> list[dict]:
    """A system prompt, then turns of: user question, a tool call with its output, assistant answer; the last
    user message asks the current question."""
    items = [message("system", SYSTEM), message("user", "FIRST: let us plan the voyage.")]
    for turn in range(turn_count):
        items.append(message("user", f"Question {turn}. " + FILLER * (turn_chars // len(FILLER))))
        items.append(
            {"type": "function_call", "call_id": f"call_{turn}", "name": "lookup", "arguments": json.dumps({"q": turn})}
        )
        items.append({"type": "function_call_output", "call_id": f"call_{turn}", "output": f"result {turn} " * 50})
        items.append(message("assistant", f"Answer {turn}. " + FILLER * 10))
    items.append(message("user", "LAST: where are we now?"))
    return items


def ask(client, model: str, items: list[dict], **body):
    return client.post("/api/v1/responses", {"model": model, "input": items, **body}, format="json", **METADATA)


def upstream_messages(standin) -> list[dict]:
    bodies = [r["body"] for r in standin.requests_for("/chat/completions")]
    assert len(bodies) == 1
    return bodies[0]["messages"]


def assert_tool_pairs_whole(messages: list[dict]) -> set[str]:
    """Every tool call sent has its result right after it, and every result its call; returns the call ids."""
    called = {call["id"] for m in messages for call in m.get("tool_calls") or []}
    answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    assert called == answered
    return called


def compression_entry(body: dict) -> dict:
    entries = [e for e in body["gateway_metadata"]["pipeline"] if e["name"] == "context-compression"]
    assert len(entries) == 1, body["gateway_metadata"]["pipeline"]
    return entries[0]


def test_on_by_default_for_a_small_context_middle_out_keeps_system_start_end_and_tool_pairs(alice, small_catalog):
    items = conversation(20)  # about 12,000 tokens by the estimate; the endpoint holds 8,192
    response = ask(alice.client(), "tiny/chat", items)
    assert response.status_code == 200, response.content
    sent = upstream_messages(small_catalog)
    assert sent[0] == {"role": "system", "content": SYSTEM}
    assert "FIRST" in json.dumps(sent[1]) and "LAST" in json.dumps(sent[-1])
    kept = assert_tool_pairs_whole(sent)
    assert "call_0" in kept and "call_19" in kept and len(kept) < 20  # the middle went, both ends stayed
    sent_chars = sum(len(m.get("content") or "") for m in sent) + sum(
        len(call["function"]["arguments"]) + len(call["function"]["name"])
        for m in sent
        for call in m.get("tool_calls") or []
    )
    assert sent_chars // 4 <= 8192
    body = response.json()
    entry = compression_entry(body)
    assert entry["type"] == "request_plugin" and entry["summary"] == "compressed"
    data = entry["data"]
    assert data["engine"] == "middle-out" and data["tokenizer"] == "estimate" and data["by_default"] is True
    assert data["messages_removed"] == len(items) - len(sent)  # one chat message per input item here
    assert data["tokens_removed"] == data["tokens_before"] - data["tokens_after"] > 3_000
    assert data["tokens_after"] <= 8192
    record = Generation.objects.get(id="gen-" + body["id"].removeprefix("resp_"))
    assert record.plugins["context-compression"]["messages_removed"] == data["messages_removed"]


def test_removed_turns_are_the_middle_ones(alice, small_catalog):
    ask(alice.client(), "tiny/chat", conversation(20))
    kept = sorted(int(i.removeprefix("call_")) for i in assert_tool_pairs_whole(upstream_messages(small_catalog)))
    gone = sorted(set(range(20)) - set(kept))
    assert gone == list(range(gone[0], gone[-1] + 1))  # one contiguous block
    assert abs((gone[0] + gone[-1]) / 2 - 9.5) <= 1  # centred on the middle of the conversation


def test_enabled_false_keeps_the_400(alice, small_catalog):
    response = ask(
        alice.client(), "tiny/chat", conversation(20), plugins=[{"id": "context-compression", "enabled": False}]
    )
    body = assert_error_envelope(response, 400)
    assert body["error"]["metadata"]["availability"]["code"] == "context_length_exceeded"
    assert small_catalog.requests_for("/chat/completions") == []


def test_a_conversation_that_fits_is_untouched_and_unlisted(alice, small_catalog):
    items = conversation(2)
    response = ask(alice.client(), "tiny/chat", items)
    assert response.status_code == 200
    assert len(upstream_messages(small_catalog)) == len(items)  # one chat message per input item
    assert all(e["name"] != "context-compression" for e in response.json()["gateway_metadata"]["pipeline"])


def test_off_by_default_for_large_contexts_and_on_when_asked(alice, standin_catalog):
    items = conversation(60)  # about 36,000 tokens; standin/echo holds 32,768
    body = assert_error_envelope(ask(alice.client(), "standin/echo", items), 400)
    assert body["error"]["metadata"]["availability"]["code"] == "context_length_exceeded"
    response = ask(alice.client(), "standin/echo", items, plugins=[{"id": "context-compression"}])
    assert response.status_code == 200, response.content
    data = compression_entry(response.json())["data"]
    assert data["by_default"] is False and data["messages_removed"] > 0 and data["tokens_after"] <= 32768


def test_one_huge_message_loses_its_middle_when_removing_turns_is_not_enough(alice, small_catalog):
    huge = "BEGIN " + FILLER * 1_000 + " END"  # about 11,000 tokens on its own
    items = [message("system", SYSTEM), message("user", huge), message("assistant", "Noted."), message("user", "LAST?")]
    response = ask(alice.client(), "tiny/chat", items)
    assert response.status_code == 200, response.content
    sent = upstream_messages(small_catalog)
    assert sent[0]["content"] == SYSTEM and "LAST?" in json.dumps(sent[-1])
    text = json.dumps(sent[1])
    assert "BEGIN" in text and "END" in text and "characters removed by context-compression" in text
    data = compression_entry(response.json())["data"]
    assert data["messages_truncated"] == 1 and data["tokens_after"] <= 8192


def test_room_is_left_for_max_output_tokens(alice, small_catalog):
    response = ask(alice.client(), "tiny/chat", conversation(20), max_output_tokens=2_000)
    assert response.status_code == 200, response.content
    data = compression_entry(response.json())["data"]
    assert data["context_length"] == 8192 - 2_000 and data["tokens_after"] <= 6_192


# ---- grouping ----------------------------------------------------------------------------------------------------


def text(role, value="x"):
    return Message(role=role, content=(TextPart(value),))


def test_parallel_calls_their_outputs_and_a_leading_reasoning_item_form_one_group():
    items = [
        text("user"),
        Reasoning(summary=("thinking",)),
        FunctionCall(call_id="a", name="f", arguments="{}"),
        FunctionCall(call_id="b", name="f", arguments="{}"),
        FunctionCallOutput(call_id="a", output="1"),
        FunctionCallOutput(call_id="b", output="2"),
        text("assistant"),
        FunctionCallOutput(call_id="orphan", output="3"),
        text("user"),
    ]
    assert turns(items) == [range(0, 1), range(1, 6), range(6, 7), range(7, 8), range(8, 9)]


def test_system_messages_in_the_middle_are_kept():
    items = [text("user", "a" * 400)] + [text("assistant", "b" * 4000), text("developer", "keep me")] * 3
    items.append(text("user", "end"))
    kept, removed, _ = middle_out(items, [_item_size(i) for i in items], fixed=Size(), target=50)
    assert [m.content[0].text for m in kept if m.role == "developer"] == ["keep me"] * 3
    assert removed == 3 and kept[0] is items[0] and kept[-1] is items[-1]


def test_the_count_is_the_estimate_routing_compares_with_each_context():
    """Compression counts as routing does (responses_api.normalize.estimate_tokens), so an input it fitted is
    one routing accepts."""
    from plugins.compression.stage import _fixed_size
    from responses_api.normalize import estimate_tokens
    from routing.canonical import CanonicalRequest, FilePart, FunctionTool, ImagePart

    items = (
        Message(role="user", content=(TextPart("hello " * 99), ImagePart(url="https://x/a.png"))),
        Message(
            role="user", content=(FilePart(filename="a.pdf", file_data="data:application/pdf;base64," + "A" * 999),)
        ),
        FunctionCall(call_id="a", name="lookup", arguments='{"q": "weather"}'),
        FunctionCallOutput(call_id="a", output="sunny " * 77),
        Reasoning(summary=("because",), content=("thinking " * 13,)),
        text("assistant", "done"),
    )
    tools = (FunctionTool(name="lookup", description="Looks things up", parameters={"type": "object"}),)
    request = CanonicalRequest(model="", input=items, instructions="Be brief. " * 31, tools=tools)
    ours = sum((_item_size(item) for item in items), _fixed_size(request)).tokens
    assert ours == estimate_tokens(items, request.instructions, tools)


def put_defaults(persona, plugins) -> None:
    response = persona.client(management=True).put("/api/v1/plugins/defaults", {"plugins": plugins}, format="json")
    assert response.status_code == 200, response.content


def test_an_account_default_off_keeps_the_400_and_a_request_turns_it_back_on(alice, small_catalog):
    put_defaults(alice, [{"id": "context-compression", "enabled": False}])
    body = assert_error_envelope(ask(alice.client(), "tiny/chat", conversation(20)), 400)
    assert body["error"]["metadata"]["availability"]["code"] == "context_length_exceeded"
    response = ask(alice.client(), "tiny/chat", conversation(20), plugins=[{"id": "context-compression"}])
    assert response.status_code == 200, response.content
    assert compression_entry(response.json())["data"]["by_default"] is False


def test_an_account_default_on_compresses_large_contexts_too(alice, standin_catalog):
    put_defaults(alice, [{"id": "context-compression"}])
    response = ask(alice.client(), "standin/echo", conversation(60))
    assert response.status_code == 200, response.content
    assert compression_entry(response.json())["data"]["messages_removed"] > 0
