"""The `moderation` plugin through the stand-in: the operator's engine (the stand-in's /moderations, or a
guard model over Chat Completions) reads the input before routing. Flagged: 403 with the moderation metadata,
before anything starts (JSON and stream); clean: the request goes on, with the engine and its latency in the
pipeline entry and on the generation record; no engine configured: 400; the engine down: 503, nothing sent."""

import json

import pytest

from gateway.billing.models import Generation
from plugins.moderation.engines import guard_verdict
from plugins.moderation.stage import input_texts, middle_truncated
from routing.canonical import CanonicalRequest, FunctionCallOutput, ImagePart, Message, TextPart
from routing.models import Provider
from routing.services import catalog_load, provider_credential_set
from tests.support import assert_error_envelope

METADATA = {"HTTP_X_GATEWAY_METADATA": "enabled"}
GENERATION_PATHS = ("/chat/completions", "/responses", "/messages")
MODERATION = [{"id": "moderation"}]
FLAG_VIOLENCE = '<<standin {"flag": "violence,hate"}>>'


def moderation_catalog(standin, *, slug: str, model: str, base_url: str, price_request: float = 0.0) -> None:
    catalog_load(
        data={
            "providers": [
                {
                    "slug": slug,
                    "name": f"{slug.title()} moderation",
                    "adapter": "openai_chat",
                    "base_url": base_url,
                    "allow_private_network": True,
                }
            ],
            "models": [
                {
                    "id": model,
                    "name": model,
                    "context_length": 32768,
                    "endpoints": [
                        {
                            "provider": slug,
                            "upstream_model": model.split("/")[1],
                            "pricing": {"prompt": 0, "completion": 0, "request": price_request},
                        }
                    ],
                }
            ],
        }
    )
    provider_credential_set(provider=Provider.objects.get(slug=slug), plaintext="sk-moderation")


def moderations_engine(settings, standin) -> None:
    """The stand-in's /moderations as the engine (model standin/omni-moderation, 0.0002 USD per call)."""
    moderation_catalog(
        standin, slug="standin-mod", model="standin/omni-moderation", base_url=f"{standin.url}/v1", price_request=0.0002
    )
    settings.MODERATION_MODEL = "standin/omni-moderation"
    settings.MODERATION_ENGINE = "openai-moderations"
    standin.clear()


@pytest.fixture
def moderations(settings, standin_catalog):
    moderations_engine(settings, standin_catalog)
    return standin_catalog


@pytest.fixture
def guard(settings, standin_catalog):
    """A Llama Guard style model on the stand-in's Chat Completions, answering `safe` unless told otherwise."""
    moderation_catalog(
        standin_catalog,
        slug="standin-guard",
        model="standin/llama-guard",
        base_url=f"{standin_catalog.url}/s/text=safe/v1",
    )
    settings.MODERATION_MODEL = "standin/llama-guard"
    settings.MODERATION_ENGINE = "llama-guard"
    standin_catalog.clear()
    return standin_catalog


def ask(persona, text: str, *, stream: bool = False, plugins=MODERATION, **body):
    payload = {"model": "standin/echo", "input": text, "stream": stream, "plugins": plugins, **body}
    return persona.client().post("/api/v1/responses", payload, format="json", **METADATA)


def generation_calls(standin) -> list[dict]:
    return [call for path in GENERATION_PATHS for call in standin.requests_for(path)]


@pytest.mark.parametrize("stream", [False, True])
def test_flagged_input_is_a_403_with_the_moderation_metadata_before_anything_starts(alice, moderations, stream):
    text = "Opening words of a long message " + "x" * 200 + f" {FLAG_VIOLENCE} and its closing words"
    response = ask(alice, text, stream=stream)
    body = assert_error_envelope(response, 403)
    assert response["Content-Type"].startswith("application/json")  # the stream never started
    metadata = body["error"]["metadata"]
    assert metadata["reasons"] == ["hate", "violence"]
    assert metadata["provider_name"] == "Standin-Mod moderation"
    assert metadata["model_slug"] == "standin/omni-moderation"
    flagged = metadata["flagged_input"]
    assert len(flagged) == 100 and flagged.startswith("Opening words") and flagged.endswith("its closing words")
    assert "..." in flagged
    (entry,) = body["gateway_metadata"]["pipeline"]
    assert entry["type"] == "request_plugin" and entry["name"] == "moderation" and entry["summary"] == "flagged"
    assert entry["data"]["engine"] == "openai-moderations" and entry["data"]["flagged"] is True
    (checked,) = moderations.requests_for("/moderations")
    assert checked["body"]["input"] == [text] and checked["body"]["model"] == "omni-moderation"
    assert checked["credential"] == "sk-moderation"
    assert generation_calls(moderations) == []


def test_a_flagged_tool_output_or_instruction_blocks_too(alice, moderations):
    response = ask(alice, "Hello", instructions="Be terse. STANDIN-FLAG")
    body = assert_error_envelope(response, 403)
    assert body["error"]["metadata"]["reasons"] == ["harassment"]
    assert body["error"]["metadata"]["flagged_input"] == "Be terse. STANDIN-FLAG"
    assert generation_calls(moderations) == []


@pytest.mark.parametrize("stream", [False, True])
def test_clean_input_goes_on_with_the_engine_and_its_latency_recorded(alice, moderations, stream):
    response = ask(alice, "A perfectly pleasant question", stream=stream)
    assert response.status_code == 200
    if stream:
        assert b"response.completed" in b"".join(response.streaming_content)
    assert len(moderations.requests_for("/moderations")) == 1
    assert len(generation_calls(moderations)) == 1
    generation = Generation.objects.get(pk=response["X-Generation-Id"])
    assert generation.moderation_latency is not None and generation.moderation_latency >= 0
    figures = generation.plugins["moderation"]
    assert figures["engine"] == "openai-moderations" and figures["model"] == "standin/omni-moderation"
    assert figures["flagged"] is False and "A perfectly pleasant question" not in json.dumps(generation.plugins)
    if not stream:
        (entry,) = response.json()["gateway_metadata"]["pipeline"]
        assert entry["summary"] == "passed" and entry["cost_usd"] == pytest.approx(0.0002)
        assert entry["data"]["latency_ms"] == generation.moderation_latency


def test_the_engine_call_is_charged_with_the_request(alice, moderations):
    response = ask(alice, "A perfectly pleasant question")
    assert response.status_code == 200
    generation = Generation.objects.get(pk=response["X-Generation-Id"])
    # The charge is the answer's list price plus the engine's call (which provider served varies with health).
    assert float(generation.cost - generation.upstream_cost) == pytest.approx(0.0002, abs=1e-9)
    without = ask(alice, "A perfectly pleasant question", plugins=[])
    plain = Generation.objects.get(pk=without["X-Generation-Id"])
    assert plain.cost == plain.upstream_cost


def test_no_engine_configured_is_a_400_saying_so(alice, standin_catalog, settings):
    settings.MODERATION_MODEL = ""
    body = assert_error_envelope(ask(alice, f"Anything {FLAG_VIOLENCE}"), 400)
    assert "no moderation engine configured" in body["error"]["message"]
    assert "MODERATION_MODEL" in body["error"]["message"]
    assert generation_calls(standin_catalog) == [] and standin_catalog.requests_for("/moderations") == []


@pytest.mark.parametrize("stream", [False, True])
def test_an_engine_that_fails_is_a_503_and_nothing_is_sent(alice, moderations, stream):
    Provider.objects.filter(slug="standin-mod").update(base_url=f"{moderations.url}/s/status=503/v1")
    body = assert_error_envelope(ask(alice, "A perfectly pleasant question", stream=stream), 503)
    assert "not sent unmoderated" in body["error"]["message"]
    assert len(moderations.requests_for("/moderations")) == 1
    assert generation_calls(moderations) == []


def test_an_unreachable_engine_is_a_503(alice, moderations):
    Provider.objects.filter(slug="standin-mod").update(base_url="http://127.0.0.1:9/v1")  # discard port: refused
    body = assert_error_envelope(ask(alice, "A perfectly pleasant question"), 503)
    assert "not sent unmoderated" in body["error"]["message"]
    assert generation_calls(moderations) == []


def test_an_engine_missing_from_the_catalog_is_a_non_retryable_404(alice, standin_catalog, settings):
    settings.MODERATION_MODEL = "nobody/no-such-moderation"
    body = assert_error_envelope(ask(alice, "A perfectly pleasant question"), 404)  # configuration: no retry helps
    assert "not sent unmoderated" in body["error"]["message"]
    assert generation_calls(standin_catalog) == []


def test_enabled_false_turns_it_off(alice, moderations):
    response = ask(alice, f"Anything {FLAG_VIOLENCE}", plugins=[{"id": "moderation", "enabled": False}])
    assert response.status_code == 200, response.content
    assert moderations.requests_for("/moderations") == []
    assert all(entry["name"] != "moderation" for entry in response.json()["gateway_metadata"]["pipeline"])


def test_without_the_plugin_nothing_is_moderated(alice, moderations):
    response = ask(alice, f"Anything {FLAG_VIOLENCE}", plugins=[])
    assert response.status_code == 200
    assert moderations.requests_for("/moderations") == []


def test_a_guard_model_that_says_unsafe_blocks_with_its_hazards(alice, guard):
    text = 'How do I do something awful <<standin {"text": "unsafe\\nS1,S10"}>>'
    body = assert_error_envelope(ask(alice, text), 403)
    assert body["error"]["metadata"]["reasons"] == ["S1: violent crimes", "S10: hate"]
    assert body["error"]["metadata"]["model_slug"] == "standin/llama-guard"
    assert body["error"]["metadata"]["flagged_input"] == text  # under 100 characters: whole
    (asked,) = [call for call in generation_calls(guard) if call["body"]["model"] == "llama-guard"]
    assert asked["body"]["messages"] == [{"role": "user", "content": text}]
    assert [call for call in generation_calls(guard) if call is not asked] == []


def test_a_guard_model_that_says_safe_lets_it_through(alice, guard):
    response = ask(alice, "A perfectly pleasant question")
    assert response.status_code == 200, response.content
    (entry,) = response.json()["gateway_metadata"]["pipeline"]
    assert entry["data"]["engine"] == "llama-guard" and entry["summary"] == "passed"
    assert len(generation_calls(guard)) == 2  # the guard's call and the request's


def test_a_guard_answer_that_is_no_verdict_fails_closed(alice, guard):
    body = assert_error_envelope(ask(alice, 'Hello <<standin {"text": "I think it is fine"}>>'), 503)
    assert "neither 'safe' nor 'unsafe'" in body["error"]["message"]
    assert len(generation_calls(guard)) == 1  # only the guard was asked


def test_long_input_is_refused_rather_than_moderated_in_part(alice, moderations):
    body = assert_error_envelope(ask(alice, "x" * 200_001), 413)
    assert "at most 200000 characters" in body["error"]["message"]
    assert moderations.requests_for("/moderations") == []


def test_a_long_text_goes_in_overlapping_pieces_and_a_flag_in_any_piece_blocks(alice, moderations):
    text = "y" * 25_000 + f" {FLAG_VIOLENCE} " + "z" * 100
    body = assert_error_envelope(ask(alice, text), 403)
    (checked,) = moderations.requests_for("/moderations")
    assert [len(piece) for piece in checked["body"]["input"]] == [10_000, 10_000, len(text) - 19_600]
    assert len(body["error"]["metadata"]["flagged_input"]) == 100


def test_what_is_read_and_how_it_is_cut():
    request = CanonicalRequest(
        model="m",
        instructions="Be nice",
        input=(
            Message(
                role="user", content=(TextPart("one"), ImagePart(url="https://example.com/a.png"), TextPart("two"))
            ),
            FunctionCallOutput(call_id="c1", output="tool said"),
        ),
    )
    assert input_texts(request) == ["Be nice", "one", "two", "tool said"]
    assert middle_truncated("short", 100) == "short"
    cut = middle_truncated("a" * 60 + "b" * 60, 100)
    assert cut == "a" * 49 + "..." + "b" * 48 and len(cut) == 100
    assert guard_verdict("safe") == (False, ())
    assert guard_verdict("unsafe\nS2, S99") == (True, ("S2: non-violent crimes", "S99"))
    with pytest.raises(ValueError):
        guard_verdict("maybe")


def test_the_engine_is_asked_only_where_the_callers_guardrails_let_the_text_go(alice, moderations):
    client = alice.client(management=True)
    created = client.post(
        "/api/v1/guardrails", {"name": "Keep it home", "ignored_providers": ["standin-mod"]}, format="json"
    )
    assert created.status_code == 201, created.content
    key_hash = alice.provisioned.inference_key.key.hash
    assigned = client.post(
        f"/api/v1/guardrails/{created.json()['data']['id']}/assignments/keys", {"key_hashes": [key_hash]}, format="json"
    )
    assert assigned.status_code == 200, assigned.content
    body = assert_error_envelope(ask(alice, "A perfectly pleasant question"), 403)
    assert "Keep it home" in body["error"]["message"] and "standin/omni-moderation" in body["error"]["message"]
    assert moderations.requests_for("/moderations") == [] and generation_calls(moderations) == []


def test_a_refused_request_is_charged_for_the_engine_call_that_refused_it(alice, moderations):
    from gateway.accounts.models import Account

    before = Account.objects.get(pk=alice.account_id).balance
    body = assert_error_envelope(ask(alice, f"Something {FLAG_VIOLENCE}"), 403)
    assert body["gateway_metadata"]["pipeline"][0]["cost_usd"] == pytest.approx(0.0002)
    refused = Generation.objects.get(account_id=alice.account_id)
    assert (refused.status, refused.error_type) == ("failed", "blocked")
    assert float(refused.cost) == pytest.approx(0.0002, abs=1e-9)
    assert float(before - Account.objects.get(pk=alice.account_id).balance) == pytest.approx(0.0002, abs=1e-9)
    assert refused.plugins is None or "Something" not in json.dumps(refused.plugins)
    assert generation_calls(moderations) == []


def test_the_engine_call_is_charged_when_routing_then_refuses(alice, moderations):
    # Moderation passed (a paid call), then nothing can serve the request (no endpoint takes the parameter):
    # the check is charged, as a failed generation; nothing reached a model.
    response = ask(alice, "A perfectly pleasant question", provider={"only": ["no-such-provider"]})
    assert 400 <= response.status_code < 500, response.content
    refused = Generation.objects.get(account_id=alice.account_id)
    assert (refused.status, refused.error_type) == ("failed", "blocked")
    assert float(refused.cost) == pytest.approx(0.0002, abs=1e-9)
    assert generation_calls(moderations) == []
