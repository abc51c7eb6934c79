"""Golden tests for every adapter: canonical request -> exact upstream JSON; recorded upstream JSON and SSE
-> exact canonical result; each upstream error status -> typed error."""

import json
from dataclasses import replace

import pytest

from byok.credentials import ProviderCredentials
from routing.accumulate import accumulate
from routing.canonical import (
    CanonicalRequest,
    FilePart,
    FunctionCall,
    FunctionCallOutput,
    FunctionTool,
    ImagePart,
    Message,
    Reasoning,
    ReasoningConfig,
    TextPart,
)
from routing.errors import UpstreamError
from routing.providers.base import GATED_PARAMETERS, SAMPLING_PARAMETERS
from routing.providers.registry import ADAPTERS
from tests.golden import FIXTURES, assert_golden, stream_fixture

KINDS = sorted(ADAPTERS)
SECRET = "sk-test-secret-0123456789"
WEATHER_TOOL = FunctionTool(
    name="get_weather",
    description="Weather for a place",
    parameters={"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
    strict=True,
)

RICH = CanonicalRequest(
    model="upstream-model-1",
    instructions="You are terse.",
    input=(
        Message(role="system", content=(TextPart("Answer in English."),)),
        Message(role="developer", content=(TextPart("Prefer metric units."),)),
        Message(
            role="user",
            content=(
                TextPart("What is in this picture and this file?", cache_control={"type": "ephemeral"}),
                ImagePart(url="data:image/png;base64,iVBORw0KGgo=", detail="high"),
                ImagePart(url="https://example.com/cat.jpg"),
                FilePart(filename="report.pdf", file_data="data:application/pdf;base64,JVBERi0xLjQ="),
            ),
        ),
        Reasoning(
            id="rs_1",
            summary=("Thinking about the weather.",),
            content=("Raw thought.",),
            signature="sig-abc",
            encrypted_content="enc-xyz",
            format="anthropic-claude-v1",
        ),
        Reasoning(id="rs_2", summary=("Earlier plan.",), encrypted_content="gAAAA-enc", format="openai-responses-v1"),
        Message(role="assistant", content=(TextPart("Let me check the weather."),)),
        FunctionCall(call_id="call_1", name="get_weather", arguments='{"location": "Paris"}'),
        FunctionCallOutput(call_id="call_1", output='{"celsius": 21}'),
        Message(role="user", content=(TextPart("And tomorrow?"),)),
    ),
    tools=(WEATHER_TOOL,),
    tool_choice={"type": "function", "name": "get_weather"},
    parallel_tool_calls=False,
    temperature=0.2,
    top_p=0.9,
    top_k=40,
    frequency_penalty=0.1,
    presence_penalty=0.3,
    max_output_tokens=2048,
    logprobs=True,
    top_logprobs=2,
    text_format={
        "type": "json_schema",
        "name": "forecast",
        "strict": True,
        "schema": {"type": "object", "properties": {"celsius": {"type": "number"}}},
    },
    verbosity="low",
    reasoning=ReasoningConfig(effort="high", summary="auto"),
    stream=True,
    safety_identifier="sid-5f1c2e",
    prompt_cache_key="conversation-42",
    cache_control={"type": "ephemeral", "ttl": "5m"},
    service_tier="priority",
)

MINIMAL = CanonicalRequest(model="upstream-model-1", input=(Message(role="user", content=(TextPart("Hi"),)),))

JSON_OBJECT = CanonicalRequest(
    model="upstream-model-1",
    input=(Message(role="user", content=(TextPart("List three colours"),)),),
    text_format={"type": "json_object"},
    tool_choice="required",
    tools=(WEATHER_TOOL,),
    reasoning=ReasoningConfig(max_tokens=3000),
    max_output_tokens=1000,
)

THINKING = CanonicalRequest(
    model="upstream-model-1",
    input=(Message(role="user", content=(TextPart("Prove it"),)),),
    reasoning=ReasoningConfig(effort="medium", summary="detailed"),
    max_output_tokens=1000,
    temperature=0.7,
    top_k=5,
    top_p=0.5,
    tools=(WEATHER_TOOL,),
    tool_choice="auto",
)
SAMPLING = CanonicalRequest(
    model="upstream-model-1",
    input=(Message(role="user", content=(TextPart("Count to ten"),)),),
    stop=("\n\n", "4"),
    seed=42,
    logprobs=True,
    top_logprobs=3,
)
CASES = [
    ("rich", RICH),
    ("minimal", MINIMAL),
    ("json_object", JSON_OBJECT),
    ("thinking", THINKING),
    ("sampling", SAMPLING),
]
# Recorded answers beyond each adapter's main pair: token logprobs, a stop sequence named by the provider.
EXTRA_ANSWERS = [
    ("openai_chat", "logprobs"),
    ("openai_responses", "logprobs"),
    ("anthropic", "stop_sequence"),
    ("bedrock", "stop_sequence"),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case,request_", CASES)
def test_build_request(kind, case, request_):
    credentials = ProviderCredentials(api_key=SECRET, extra={"project_id": "proj-1", "region": "us-east5"})
    try:
        upstream = ADAPTERS[kind].build_request(
            request_, base_url="https://upstream.example/v1", credentials=credentials
        )
    except UpstreamError as error:  # an input this provider cannot take: the next endpoint gets it
        assert_golden(f"adapters/{kind}/request_{case}.expected.json", {"error": error})
        assert error.retryable
        return
    assert_golden(
        f"adapters/{kind}/request_{case}.expected.json",
        {"url": upstream.url, "headers": upstream.headers, "body": upstream.body},
    )
    assert SECRET not in json.dumps(upstream.body)
    assert SECRET not in repr(upstream)


@pytest.mark.parametrize("kind", KINDS)
def test_parse_response(kind):
    body = json.loads((FIXTURES / f"adapters/{kind}/response.json").read_text())
    assert_golden(f"adapters/{kind}/response.expected.json", ADAPTERS[kind].parse_response(body))


@pytest.mark.parametrize("kind", KINDS)
def test_stream_events(kind):
    raw = stream_fixture(kind)
    # Feed the bytes in awkward pieces: the decoder must not depend on chunk boundaries.
    pieces = [raw[i : i + 7] for i in range(0, len(raw), 7)]
    events = list(ADAPTERS[kind].stream_events(ADAPTERS[kind].decode(pieces)))
    assert_golden(f"adapters/{kind}/stream.expected.json", {"events": events, "response": accumulate(events)})


@pytest.mark.parametrize("kind,name", EXTRA_ANSWERS)
def test_parse_recorded_answers(kind, name):
    body = json.loads((FIXTURES / f"adapters/{kind}/response_{name}.json").read_text())
    assert_golden(f"adapters/{kind}/response_{name}.expected.json", ADAPTERS[kind].parse_response(body))
    binary = FIXTURES / f"adapters/{kind}/stream_{name}.bin"  # Bedrock's event stream
    raw = (binary if binary.exists() else FIXTURES / f"adapters/{kind}/stream_{name}.sse").read_bytes()
    events = list(ADAPTERS[kind].stream_events(ADAPTERS[kind].decode([raw[i : i + 5] for i in range(0, len(raw), 5)])))
    assert_golden(f"adapters/{kind}/stream_{name}.expected.json", {"events": events, "response": accumulate(events)})


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "base,changed",
    [
        (MINIMAL, replace(MINIMAL, stop=("END",))),
        (MINIMAL, replace(MINIMAL, seed=1)),
        (MINIMAL, replace(MINIMAL, logprobs=True)),
        (replace(MINIMAL, logprobs=True), replace(MINIMAL, logprobs=True, top_logprobs=4)),
    ],
    ids=["stop", "seed", "logprobs", "top_logprobs"],
)
def test_an_adapter_declares_exactly_the_gated_parameters_its_body_carries(kind, base, changed):
    """routing.selection trusts `parameters`: a parameter it lists changes the upstream body, one it leaves out
    does not (so such an endpoint is never given it)."""
    credentials = ProviderCredentials(api_key=SECRET, extra={"project_id": "proj-1", "region": "us-east5"})
    bodies = [
        ADAPTERS[kind].build_request(request, base_url="https://upstream.example/v1", credentials=credentials).body
        for request in (base, changed)
    ]
    parameter = next(name for name in GATED_PARAMETERS if getattr(changed, name) != getattr(base, name))
    assert (bodies[0] != bodies[1]) == (parameter in ADAPTERS[kind].parameters), parameter


@pytest.mark.parametrize("kind", KINDS)
def test_cut_stream_raises_retryable_error(kind):
    raw = stream_fixture(kind)
    cut = raw[: len(raw) // 2]
    with pytest.raises(Exception) as caught:
        list(ADAPTERS[kind].stream_events(ADAPTERS[kind].decode([cut])))
    assert caught.value.error_type == "provider_unavailable" and caught.value.retryable


ERROR_CASES = {
    "openai_chat": [
        (
            400,
            {
                "error": {
                    "message": "Invalid 'messages'",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": None,
                }
            },
            {},
        ),
        (
            400,
            {
                "error": {
                    "message": "This model's maximum context length is 8192 tokens.",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            },
            {},
        ),
        (
            401,
            {
                "error": {
                    "message": "Incorrect API key provided",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            },
            {},
        ),
        (
            403,
            {
                "error": {
                    "message": "Country not supported",
                    "type": "invalid_request_error",
                    "code": "unsupported_country_region_territory",
                }
            },
            {},
        ),
        (
            404,
            {
                "error": {
                    "message": "The model does not exist",
                    "type": "invalid_request_error",
                    "code": "model_not_found",
                }
            },
            {},
        ),
        (413, {"error": {"message": "Request too large"}}, {}),
        (422, {"detail": "unprocessable"}, {}),
        (
            429,
            {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}},
            {"retry-after": "7"},
        ),
        (500, {"error": {"message": "The server had an error", "type": "server_error"}}, {}),
        (502, "<html>bad gateway</html>", {}),
        (
            503,
            {"error": {"message": "The engine is currently overloaded", "type": "server_error"}},
            {"retry-after-ms": "1500"},
        ),
    ],
    "openai_responses": [
        (
            400,
            {
                "error": {
                    "message": "Unsupported parameter: 'top_k'",
                    "type": "invalid_request_error",
                    "param": "top_k",
                    "code": "unsupported_parameter",
                }
            },
            {},
        ),
        (
            429,
            {
                "error": {
                    "message": "You exceeded your current quota",
                    "type": "insufficient_quota",
                    "code": "insufficient_quota",
                }
            },
            {"retry-after": "20"},
        ),
        (500, {"error": {"message": "An error occurred", "type": "server_error"}}, {}),
    ],
    "azure": [
        (
            400,
            {
                "error": {
                    "code": "content_filter",
                    "message": "The response was filtered due to the prompt "
                    "triggering Azure OpenAI's content management policy.",
                    "param": "prompt",
                    "status": 400,
                    "innererror": {"code": "ResponsibleAIPolicyViolation"},
                }
            },
            {},
        ),
        (
            401,
            {
                "error": {
                    "code": "401",
                    "message": "Access denied due to invalid subscription key or wrong API endpoint.",
                }
            },
            {},
        ),
        (
            404,
            {
                "error": {
                    "code": "DeploymentNotFound",
                    "message": "The API deployment for this resource does not exist.",
                }
            },
            {},
        ),
        (
            429,
            {
                "error": {
                    "code": "429",
                    "message": "Requests to the ChatCompletions_Create Operation have exceeded token rate limit.",
                }
            },
            {"retry-after": "12"},
        ),
        (500, {"error": {"code": "InternalServerError", "message": "The server had an error."}}, {}),
    ],
    "vertex": [
        (
            429,
            {
                "error": {
                    "code": 429,
                    "message": "Quota exceeded for aiplatform.googleapis.com/online_prediction",
                    "status": "RESOURCE_EXHAUSTED",
                }
            },
            {},
        ),
        (
            403,
            {
                "error": {
                    "code": 403,
                    "message": "Permission 'aiplatform.endpoints.predict' denied",
                    "status": "PERMISSION_DENIED",
                }
            },
            {},
        ),
        (400, {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: required"}}, {}),
        (529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, {}),
    ],
    "bedrock": [
        (
            400,
            {"message": "The model returned the following errors: Input is too long for requested model."},
            {"x-amzn-ErrorType": "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
        ),
        (
            400,
            {"message": "Malformed input request: #: required key [messages] not found"},
            {"x-amzn-ErrorType": "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
        ),
        (
            403,
            {"message": "You don't have access to the model with the specified model ID."},
            {"x-amzn-ErrorType": "AccessDeniedException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
        ),
        (424, {"message": "Model error"}, {"x-amzn-ErrorType": "ModelErrorException:http://internal"}),
        (
            429,
            {"message": "Too many requests, please wait before trying again."},
            {"x-amzn-ErrorType": "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
        ),
        (
            503,
            {"message": "Bedrock is unable to process your request."},
            {"x-amzn-ErrorType": "ServiceUnavailableException:http://internal"},
        ),
    ],
    "anthropic": [
        (
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "prompt is too long: 210000 tokens > 200000 maximum",
                },
            },
            {},
        ),
        (400, {"type": "error", "error": {"type": "invalid_request_error", "message": "messages: field required"}}, {}),
        (401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}, {}),
        (403, {"type": "error", "error": {"type": "permission_error", "message": "no access"}}, {}),
        (404, {"type": "error", "error": {"type": "not_found_error", "message": "model: claude-x"}}, {}),
        (413, {"type": "error", "error": {"type": "request_too_large", "message": "Request too large"}}, {}),
        (
            429,
            {"type": "error", "error": {"type": "rate_limit_error", "message": "rate limited"}},
            {"retry-after": "3"},
        ),
        (500, {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}, {}),
        (529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, {}),
        (504, "upstream timeout", {}),
    ],
}


@pytest.mark.parametrize("kind", KINDS)
def test_map_error(kind):
    mapped = []
    for status, body, headers in ERROR_CASES[kind]:
        raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        mapped.append({"status": status, "error": ADAPTERS[kind].map_error(status, raw, headers)})
    assert_golden(f"adapters/{kind}/errors.expected.json", mapped)


def test_azure_targets_per_config():
    """A per-deployment config's URL is used as is; a catalog config builds the v1 URL on its resource host;
    both send the key in `api-key`, and mark the URL as the customer's (no private-network exemption)."""
    adapter = ADAPTERS["azure"]
    deployment = {
        "endpoint_url": "https://acme.openai.azure.com/openai/deployments/gpt4o-prod/chat/completions"
        "?api-version=2024-10-21",
        "api_key": SECRET,
        "model_id": "gpt4o-prod",
        "model_slug": "openai/gpt-4o",
    }
    built = adapter.build_request(
        MINIMAL,
        base_url="https://unused.example/v1",
        credentials=ProviderCredentials(api_key=SECRET, extra={"azure_config": deployment}),
    )
    assert built.url == deployment["endpoint_url"] and built.body["model"] == "gpt4o-prod"
    assert built.headers == {"api-key": SECRET} and built.customer_url
    catalog = {"api_key": SECRET, "resource_name": "acme-foundry", "resource_type": "ai_foundry"}
    built = adapter.build_request(
        MINIMAL,
        base_url="https://unused.example/v1",
        credentials=ProviderCredentials(api_key=SECRET, extra={"azure_config": catalog}),
    )
    assert built.url == "https://acme-foundry.services.ai.azure.com/openai/v1/chat/completions"
    assert built.body["model"] == "upstream-model-1"
    shared = adapter.build_request(
        MINIMAL, base_url="https://res.openai.azure.com/openai/v1", credentials=ProviderCredentials(api_key=SECRET)
    )
    assert shared.url == "https://res.openai.azure.com/openai/v1/chat/completions" and not shared.customer_url


def test_azure_per_deployment_config_wins_for_its_model():
    from byok.selectors import azure_config_for

    catalog = {"api_key": "k1", "resource_name": "acme"}
    deployment = {
        "endpoint_url": "https://x.openai.azure.com/openai/deployments/d/chat/completions?api-version=1",
        "api_key": "k2",
        "model_id": "d",
        "model_slug": "openai/gpt-4o",
    }
    assert azure_config_for([catalog, deployment], model_id="openai/gpt-4o") is deployment
    assert azure_config_for([catalog, deployment], model_id="openai/gpt-4.1") is catalog
    assert azure_config_for([deployment], model_id="openai/gpt-4.1") is None


def test_vertex_urls_per_region():
    adapter = ADAPTERS["vertex"]
    google = "https://aiplatform.googleapis.com/v1"
    for region, host in [
        ("us-east5", "https://us-east5-aiplatform.googleapis.com/v1"),
        ("global", "https://aiplatform.googleapis.com/v1"),
    ]:
        built = adapter.build_request(
            replace(MINIMAL, model="claude-sonnet-4-5@20250929", stream=True),
            base_url=google,
            credentials=ProviderCredentials(api_key="ya29.token", extra={"project_id": "p1", "region": region}),
        )
        assert built.url == (
            f"{host}/projects/p1/locations/{region}/publishers/anthropic/models/"
            "claude-sonnet-4-5@20250929:streamRawPredict"
        )
        assert "model" not in built.body and built.body["anthropic_version"] == "vertex-2023-10-16"
        assert built.headers == {"Authorization": "Bearer ya29.token"}


STRUCTURED = {"type": "json_schema", "name": "colours", "schema": {"type": "object"}, "strict": True}


@pytest.mark.parametrize("kind", KINDS)
def test_an_adapter_declares_structured_outputs_exactly_when_its_body_carries_a_schema(kind):
    """routing.selection passes over an endpoint whose adapter lacks `structured_outputs` for a json_schema
    request (Bedrock's Converse body has no place for it: it was dropped)."""
    credentials = ProviderCredentials(api_key=SECRET, extra={"project_id": "proj-1", "region": "us-east5"})
    bodies = [
        ADAPTERS[kind].build_request(request, base_url="https://upstream.example/v1", credentials=credentials).body
        for request in (MINIMAL, replace(MINIMAL, text_format=STRUCTURED))
    ]
    assert (bodies[0] != bodies[1]) == ("structured_outputs" in ADAPTERS[kind].parameters)


@pytest.mark.parametrize("kind", KINDS)
def test_json_mode_reaches_every_wire(kind):
    """response_format json_object: OpenAI's wires take it as such; Anthropic's and Bedrock's, which have no JSON
    mode, get it as an instruction after the system prompt (it was dropped)."""
    credentials = ProviderCredentials(api_key=SECRET, extra={"project_id": "proj-1", "region": "us-east5"})
    bodies = [
        ADAPTERS[kind].build_request(request, base_url="https://upstream.example/v1", credentials=credentials).body
        for request in (MINIMAL, replace(MINIMAL, text_format={"type": "json_object"}))
    ]
    assert bodies[0] != bodies[1]
    if kind in ("anthropic", "vertex", "bedrock"):
        assert "JSON object" in json.dumps(bodies[1]["system"])


@pytest.mark.parametrize("kind", ["anthropic", "vertex"])
def test_a_strict_tool_is_strict_on_anthropics_wire(kind):
    credentials = ProviderCredentials(api_key=SECRET, extra={"project_id": "proj-1", "region": "us-east5"})
    request = replace(MINIMAL, tools=(WEATHER_TOOL,))
    body = ADAPTERS[kind].build_request(request, base_url="https://upstream.example/v1", credentials=credentials).body
    assert body["tools"][0]["strict"] is True


@pytest.mark.parametrize("kind", ["openai_chat", "azure", "openai_responses"])
@pytest.mark.parametrize(
    ("reasoning", "effort"),
    [
        (ReasoningConfig(max_tokens=2000), "low"),
        (ReasoningConfig(max_tokens=8000), "medium"),
        (ReasoningConfig(max_tokens=30000), "high"),
        (ReasoningConfig(enabled=True), "medium"),
        (ReasoningConfig(effort="minimal", max_tokens=30000), "minimal"),
    ],
)
def test_a_thinking_budget_reaches_openais_wires_as_an_effort(kind, reasoning, effort):
    """A budget (Anthropic's thinking, reasoning.max_tokens) or reasoning enabled without an effort was dropped
    on OpenAI's wires, which take an effort only: it is sent as the effort nearest the budget."""
    credentials = ProviderCredentials(api_key=SECRET, extra={"project_id": "proj-1", "region": "us-east5"})
    request = replace(MINIMAL, reasoning=reasoning)
    body = ADAPTERS[kind].build_request(request, base_url="https://upstream.example/v1", credentials=credentials).body
    sent = body["reasoning"]["effort"] if kind == "openai_responses" else body["reasoning_effort"]
    assert sent == effort


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "changed",
    [
        replace(MINIMAL, temperature=0.3),
        replace(MINIMAL, top_p=0.5),
        replace(MINIMAL, top_k=7),
        replace(MINIMAL, frequency_penalty=0.5),
        replace(MINIMAL, presence_penalty=0.5),
        replace(MINIMAL, verbosity="low"),
    ],
    ids=sorted(
        SAMPLING_PARAMETERS,
        key=["temperature", "top_p", "top_k", "frequency_penalty", "presence_penalty", "verbosity"].index,
    ),
)
def test_an_adapter_declares_exactly_the_sampling_parameters_its_body_carries(kind, changed):
    """With require_parameters, routing.selection passes over an endpoint whose adapter's `sampling` lacks one the
    request sets (the Responses API has no top_k, Anthropic's no penalties): `sampling` must be what the body
    carries."""
    credentials = ProviderCredentials(api_key=SECRET, extra={"project_id": "proj-1", "region": "us-east5"})
    bodies = [
        ADAPTERS[kind].build_request(request, base_url="https://upstream.example/v1", credentials=credentials).body
        for request in (MINIMAL, changed)
    ]
    parameter = next(name for name in SAMPLING_PARAMETERS if getattr(changed, name) != getattr(MINIMAL, name))
    assert (bodies[0] != bodies[1]) == (parameter in ADAPTERS[kind].sampling), parameter


def test_cache_breakpoints_reach_bedrock_as_cache_points():
    """Claude on Bedrock caches a prompt at cachePoint blocks: each cache_control (a system or message block, a
    tool call or result, a tool, the request's automatic breakpoint) becomes one after its block (it was dropped)."""
    cached = {"type": "ephemeral"}
    request = replace(
        MINIMAL,
        instructions=None,
        input=(
            Message(role="system", content=(TextPart("Be terse.", cache_control=cached),)),
            Message(role="user", content=(TextPart("Weather?", cache_control=cached),)),
            FunctionCall(call_id="c1", name="get_weather", arguments="{}"),
            FunctionCallOutput(call_id="c1", output="Sunny", cache_control=cached),
            Message(role="user", content=(TextPart("And tomorrow?"),)),
        ),
        tools=(replace(WEATHER_TOOL, cache_control=cached),),
        cache_control=cached,
    )
    credentials = ProviderCredentials(api_key=SECRET, extra={"region": "us-east-1"})
    body = ADAPTERS["bedrock"].build_request(request, base_url="https://upstream.example", credentials=credentials).body
    point = {"cachePoint": {"type": "default"}}
    assert body["system"] == [{"text": "Be terse."}, point]
    user, assistant, results = body["messages"]
    assert user["content"] == [{"text": "Weather?"}, point]
    assert results["content"][:2] == [{"toolResult": {"toolUseId": "c1", "content": [{"text": "Sunny"}]}}, point]
    assert results["content"][-2:] == [{"text": "And tomorrow?"}, point]  # the request's automatic breakpoint
    assert body["toolConfig"]["tools"][1] == point


@pytest.mark.parametrize("kind", KINDS)
def test_an_adapter_declares_reasoning_with_a_forced_tool_choice_exactly_when_it_sends_both(kind):
    """Anthropic's extended thinking cannot be combined with a forced tool call: its adapters drop the thinking
    (the tool choice wins), so they do not declare the combination and routing.selection passes them over for
    it (404 naming it when nothing else is left), rather than answering without the reasoning asked for."""
    credentials = ProviderCredentials(api_key=SECRET, extra={"project_id": "proj-1", "region": "us-east5"})
    forced = replace(MINIMAL, tools=(FunctionTool(name="f", parameters={"type": "object"}),), tool_choice="required")
    bodies = [
        ADAPTERS[kind].build_request(request, base_url="https://upstream.example/v1", credentials=credentials).body
        for request in (forced, replace(forced, reasoning=ReasoningConfig(effort="high")))
    ]
    assert (bodies[0] != bodies[1]) == ("reasoning_with_forced_tool_choice" in ADAPTERS[kind].parameters)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("parameter", ["parallel_tool_calls_off", "strict_tools"])
def test_an_adapter_declares_the_tool_switches_its_body_carries(kind, parameter):
    """parallel_tool_calls false and strict function tools: Bedrock's Converse has no place for either (they were
    dropped there), so it does not declare them and routing.selection passes it over for a request that sets one."""
    credentials = ProviderCredentials(api_key=SECRET, extra={"project_id": "proj-1", "region": "us-east5"})
    tool = FunctionTool(name="f", parameters={"type": "object"})
    base = replace(MINIMAL, tools=(tool,))
    changed = (
        replace(base, parallel_tool_calls=False)
        if parameter == "parallel_tool_calls_off"
        else replace(base, tools=(replace(tool, strict=True),))
    )
    bodies = [
        ADAPTERS[kind].build_request(request, base_url="https://upstream.example/v1", credentials=credentials).body
        for request in (base, changed)
    ]
    assert (bodies[0] != bodies[1]) == (parameter in ADAPTERS[kind].parameters)


def test_routing_passes_over_a_wire_without_the_tool_switches():
    from types import SimpleNamespace

    from routing.selection import unhonoured
    from tests.support import standin_endpoint

    server = SimpleNamespace(url="https://upstream.example")
    asked = frozenset({"tools", "parallel_tool_calls_off", "strict_tools"})
    assert unhonoured(standin_endpoint(server, adapter="bedrock"), asked) == {"parallel_tool_calls_off", "strict_tools"}
    for kind in ("openai_chat", "openai_responses", "anthropic"):
        assert unhonoured(standin_endpoint(server, adapter=kind), asked) == frozenset(), kind
