"""response-healing: a JSON answer the model broke comes back as valid JSON (each broken shape, with and without a
schema), with its pipeline entry saying what was fixed; what cannot be healed comes back unchanged and the entry
says why (not repairable, schema mismatch, cut by max_output_tokens, a stream, no JSON text.format). The model's
text is scripted through the stand-in provider (a `<<standin {...}>>` directive in the prompt)."""

import json
import time

import pytest

from gateway.billing.models import Generation
from plugins.common import repair
from plugins.healing.stage import MAX_VALIDATION_STEPS, healing_schema
from tests.support import sse_events

METADATA = {"HTTP_X_GATEWAY_METADATA": "enabled"}
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
JSON_SCHEMA = {"type": "json_schema", "name": "person", "schema": PERSON, "strict": True}
JSON_OBJECT = {"type": "json_object"}


def answer_with(client, text: str, *, text_format: dict | None = JSON_OBJECT, stream=False, **body):
    """A request whose model answers `text` (scripted), with response-healing on."""
    directive = json.dumps({"text": text, "chunks": 1})
    payload = {
        "model": "standin/echo",
        "input": f"Give me the person as JSON. <<standin {directive}>>",
        "plugins": [{"id": "response-healing"}],
        "stream": stream,
        **body,
    }
    if text_format is not None:
        payload["text"] = {"format": text_format}
    return client.post("/api/v1/responses", payload, format="json", **METADATA)


def healing_entry(body: dict) -> dict:
    entries = [e for e in body["gateway_metadata"]["pipeline"] if e["name"] == "response-healing"]
    assert len(entries) == 1, body["gateway_metadata"]["pipeline"]
    assert entries[0]["type"] == "response_plugin"
    return entries[0]


BROKEN = [
    ('```json\n{"name": "Ada", "age": 36}\n```', {"markdown_fence"}),
    ('{"name": "Ada", "age": 36,}', {"trailing_comma"}),
    ('{name: "Ada", age: 36}', {"unquoted_keys"}),
    ("{'name': 'Ada', 'age': 36}", {"single_quotes"}),
    ('Sure! Here is the person: {"name": "Ada", "age": 36} Let me know if you need more.', {"surrounding_text"}),
    ('{"name": "Ada", "age": 36', {"unbalanced_brackets"}),
    ("Here you go:\n```\n{'name': 'Ada', age: 36,\n```\nThanks", None),  # several at once
]


@pytest.mark.parametrize("text_format", [JSON_OBJECT, JSON_SCHEMA], ids=["json_object", "json_schema"])
@pytest.mark.parametrize("broken,fixes", BROKEN, ids=[f"shape{i}" for i in range(len(BROKEN))])
def test_each_broken_shape_is_healed(alice, standin_catalog, text_format, broken, fixes):
    response = answer_with(alice.client(), broken, text_format=text_format)
    assert response.status_code == 200, response.content
    body = response.json()
    assert json.loads(body["output"][0]["content"][0]["text"]) == {"name": "Ada", "age": 36}
    entry = healing_entry(body)
    assert entry["summary"] == "healed"
    if fixes:
        assert fixes <= set(entry["data"]["fixes"]), entry
    else:
        assert {"markdown_fence", "single_quotes", "unquoted_keys", "trailing_comma"} <= set(entry["data"]["fixes"])
    assert entry["data"]["schema"] == ("valid" if text_format is JSON_SCHEMA else "none")
    record = Generation.objects.get(id="gen-" + body["id"].removeprefix("resp_"))
    assert record.plugins["response-healing"]["outcome"] == "healed"
    assert "Ada" not in json.dumps(record.plugins)  # figures only, never the answer


def test_valid_json_passes_untouched(alice, standin_catalog):
    text = '{"name": "Ada",   "age": 36}'
    body = answer_with(alice.client(), text, text_format=JSON_SCHEMA).json()
    assert body["output"][0]["content"][0]["text"] == text
    entry = healing_entry(body)
    assert entry["summary"] == "passed" and entry["data"] == {"fixes": [], "schema": "valid"}


def test_a_repaired_answer_the_schema_refuses_is_returned_unchanged(alice, standin_catalog):
    broken = '{"name": "Ada", "age": "thirty-six",}'
    body = answer_with(alice.client(), broken, text_format=JSON_SCHEMA).json()
    assert body["output"][0]["content"][0]["text"] == broken
    entry = healing_entry(body)
    assert entry["summary"] == "not healed: the answer does not match the schema"
    assert entry["data"]["schema"] == "invalid" and "$.age" in entry["data"]["reason"]
    assert "trailing_comma" in entry["data"]["fixes"]


def test_valid_json_the_schema_refuses_is_reported(alice, standin_catalog):
    body = answer_with(alice.client(), '{"name": "Ada"}', text_format=JSON_SCHEMA).json()
    assert body["output"][0]["content"][0]["text"] == '{"name": "Ada"}'
    entry = healing_entry(body)
    assert entry["data"]["schema"] == "invalid" and "'age' is a required property" in entry["data"]["reason"]


@pytest.mark.parametrize("text_format", [JSON_OBJECT, JSON_SCHEMA], ids=["json_object", "json_schema"])
def test_prose_without_json_is_returned_unchanged(alice, standin_catalog, text_format):
    prose = "I am sorry, I cannot answer that."
    body = answer_with(alice.client(), prose, text_format=text_format).json()
    assert body["output"][0]["content"][0]["text"] == prose
    assert healing_entry(body)["summary"].startswith("not healed")


def test_output_cut_by_max_output_tokens_is_untouched(alice, standin_catalog):
    cut = '{"name": "Ada", "ag'
    response = alice.client().post(
        "/api/v1/responses",
        {
            "model": "standin/echo",
            "input": "Person? <<standin " + json.dumps({"text": cut, "finish": "length"}) + ">>",
            "max_output_tokens": 16,
            "text": {"format": JSON_SCHEMA},
            "plugins": [{"id": "response-healing"}],
        },
        format="json",
        **METADATA,
    )
    body = response.json()
    assert body["status"] == "incomplete" and body["output"][0]["content"][0]["text"] == cut
    entry = healing_entry(body)
    assert entry["summary"] == "not healed: the output is incomplete (max_output_tokens)"


def test_a_stream_is_not_healed_and_says_so(alice, standin_catalog):
    broken = '{"name": "Ada", "age": 36,}'
    events, _ = sse_events(answer_with(alice.client(), broken, stream=True))
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == broken  # relayed as generated
    completed = events[-1]
    assert completed["type"] == "response.completed"
    entry = healing_entry(completed["response"])
    assert entry["summary"] == "not healed: streaming (the answer is relayed as it is generated)"


def test_no_json_text_format_is_a_noted_no_op(alice, standin_catalog):
    body = answer_with(alice.client(), "{'a': 1,}", text_format=None).json()
    assert body["output"][0]["content"][0]["text"] == "{'a': 1,}"
    assert healing_entry(body)["summary"] == "not healed: the request has no text.format json_object or json_schema"


def test_off_it_leaves_no_trace(alice, standin_catalog):
    body = answer_with(alice.client(), '{"a": 1,}', plugins=[{"id": "response-healing", "enabled": False}]).json()
    assert body["output"][0]["content"][0]["text"] == '{"a": 1,}'
    assert all(e["name"] != "response-healing" for e in body["gateway_metadata"]["pipeline"])


# ---- the caller's schema is bounded ----------------------------------------------------------------------------


def test_a_catastrophic_pattern_runs_in_linear_time():
    schema = {"type": "string", "pattern": "^(a+)+$"}
    assert healing_schema("a" * 50_000 + "!", schema)[0] == "invalid"


def test_an_exponential_schema_is_cut_off_not_hung():
    defs = {f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]} for i in range(60)}
    defs["d60"] = {"type": "string"}
    verdict, reason = healing_schema(1, {"$defs": defs, "$ref": "#/$defs/d0"})
    assert verdict == "unchecked" and str(MAX_VALIDATION_STEPS) in reason


def test_a_remote_ref_is_never_fetched():
    verdict, _ = healing_schema({"a": 1}, {"$ref": "https://example.com/schema.json"})
    assert verdict == "unchecked"


def test_an_oversized_schema_is_not_checked():
    schema = {"type": "object", "description": "x" * 200_000}
    assert healing_schema({}, schema)[0] == "unchecked"


def test_an_account_default_heals_requests_that_do_not_name_it(alice, standin_catalog):
    defaults = alice.client(management=True).put(
        "/api/v1/plugins/defaults", {"plugins": [{"id": "response-healing"}]}, format="json"
    )
    assert defaults.status_code == 200, defaults.content
    body = answer_with(alice.client(), '{"name": "Ada", "age": 36,}', plugins=[]).json()
    assert json.loads(body["output"][0]["content"][0]["text"]) == {"name": "Ada", "age": 36}
    assert healing_entry(body)["summary"] == "healed"


def test_an_answer_too_long_to_repair_is_left_as_it_is():
    from plugins.healing.stage import MAX_TEXT_CHARS, heal_answer
    from routing.canonical import CanonicalResponse

    huge = "{a: 'b'," * (MAX_TEXT_CHARS // 8 + 1)
    healing = heal_answer(CanonicalResponse(output=()), huge, JSON_OBJECT)
    assert healing.text is None and healing.outcome == "not healed: the answer is too long to repair"


def test_an_answer_that_would_keep_the_repairer_busy_is_cut_off(alice, standin_catalog, monkeypatch):
    """json-repair is not linear: 100 open braces and 5,000 letters kept it ~8 s, 150 kB of them minutes. It runs
    in a child killed at REPAIR_SECONDS; the answer comes back unchanged and the entry says why."""
    monkeypatch.setattr(repair, "REPAIR_SECONDS", 0.5)
    hostile = "{" * 100 + "a" * 5000
    started = time.monotonic()
    response = answer_with(alice.client(), hostile)
    assert time.monotonic() - started < 5
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["output"][0]["content"][0]["text"] == hostile
    entry = healing_entry(body)
    assert entry["summary"] == "not healed: repair took over 0.5 s"
    assert entry["data"]["reason"] == "repair took over 0.5 s"


def test_a_repair_in_the_child_gives_the_same_value():
    assert repair.repair_bounded("{'name': 'Ada', age: 36,") == {"name": "Ada", "age": 36}
    with pytest.raises(ValueError):
        repair.repair_bounded("[" * 5000)
