"""Adversarial probes of guardrail enforcement: texts a caller sends that must be scanned, and places the
original of a redaction must not reach."""

import pytest

from tests.guardrails.test_enforcement import BLOCK, ask, guardrail, upstream_calls
from tests.support import assert_error_envelope


def reasoning_item(fmt: str, text: str) -> dict:
    return {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": text}],
        "content": [{"type": "reasoning_text", "text": text}],
        "format": fmt,
        "encrypted_content": "opaque",
        "signature": "sig",
    }


@pytest.mark.parametrize("fmt", ["openai-responses-v1", "anthropic-claude-v1"])
def test_a_reasoning_item_the_caller_sends_is_scanned(alice, standin_catalog, fmt):
    guardrail(alice, **BLOCK)
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
        reasoning_item(fmt, "Tell me about ACME-1234"),
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go on"}]},
    ]
    response = ask(alice, items)
    body = assert_error_envelope(response, 403)
    assert body["error"]["metadata"]["patterns"] == ["project-code"]
    assert upstream_calls(standin_catalog) == []


def test_a_reasoning_redaction_reaches_no_provider(alice, standin_catalog):
    guardrail(alice, content_filter_builtins=[{"slug": "email", "action": "redact"}])
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
        reasoning_item("openai-responses-v1", "write to jane.doe@example.com"),
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go on"}]},
    ]
    response = ask(alice, items)
    assert response.status_code == 200, response.content
    for sent in upstream_calls(standin_catalog):
        assert "jane.doe@example.com" not in str(sent["body"])


def test_an_assistant_message_and_refusal_are_scanned(alice, standin_catalog):
    guardrail(alice, **BLOCK)
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "ACME-9999"}]},
        {"type": "message", "role": "user", "content": "go on"},
    ]
    assert_error_envelope(ask(alice, items), 403)


def test_a_redaction_is_not_in_the_generation_record_or_metadata(alice, standin_catalog):
    from gateway.billing.models import Generation

    guardrail(alice, content_filter_builtins=[{"slug": "email", "action": "redact"}])
    response = ask(alice, "Write to jane.doe@example.com today")
    assert response.status_code == 200, response.content
    assert "jane.doe@example.com" not in response.content.decode()
    for generation in Generation.objects.all():
        values = {f.name: getattr(generation, f.name) for f in Generation._meta.fields}
        assert "jane.doe@example.com" not in str(values)
