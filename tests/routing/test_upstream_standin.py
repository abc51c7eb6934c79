"""Each adapter against the stand-in provider over real loopback HTTP: success, streaming, every error
class, a timeout, a cut stream and an in-band error."""

import json
import time

import pytest
from django.test import override_settings

from byok.credentials import ProviderCredentials
from routing import http
from routing.accumulate import accumulate
from routing.canonical import (
    FunctionTool,
    OutputFunctionCall,
    OutputMessage,
    OutputReasoning,
    ReasoningConfig,
    TextDelta,
)
from routing.errors import UpstreamError
from routing.upstream import build_upstream_request, call, open_stream
from tests.support import ask, standin_endpoint

KINDS = ["openai_chat", "openai_responses", "anthropic"]
CREDS = ProviderCredentials(api_key="sk-standin-good")


def run(server, kind, request, *, script="", creds=CREDS, timeouts=None):
    endpoint = standin_endpoint(server, adapter=kind, script=script)
    upstream = build_upstream_request(endpoint=endpoint, request=request, credentials=creds)
    if request.stream:
        return list(open_stream(endpoint=endpoint, upstream=upstream, timeouts=timeouts).events())
    return call(endpoint=endpoint, upstream=upstream, timeouts=timeouts)


@pytest.mark.parametrize("kind", KINDS)
def test_non_streaming_success(standin, kind):
    response = run(standin, kind, ask(), script="text=Bonjour,input_tokens=11,output_tokens=3")
    assert response.output == (OutputMessage(text="Bonjour"),)
    assert response.status == "completed"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (11, 3)
    received = standin.requests_for("/messages" if kind == "anthropic" else "")[-1]
    assert received["credential"] == "sk-standin-good"


@pytest.mark.parametrize("kind", KINDS)
def test_streaming_success_in_chunks(standin, kind):
    events = run(standin, kind, ask(stream=True), script="chunks=4,text=abcdefgh,output_tokens=5")
    deltas = [event.text for event in events if isinstance(event, TextDelta)]
    assert deltas == ["ab", "cd", "ef", "gh"]
    response = accumulate(events)
    assert response.output == (OutputMessage(text="abcdefgh"),) and response.usage.output_tokens == 5


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("stream", [False, True])
def test_function_call_and_reasoning(standin, kind, stream):
    tool = FunctionTool(name="get_weather", parameters={"type": "object", "properties": {}})
    request = ask("Weather?", stream=stream, tools=(tool,), reasoning=ReasoningConfig(effort="low"))
    result = run(standin, kind, request, script="tool_call=auto,reasoning=Thinking hard")
    response = accumulate(result) if stream else result
    kinds = [type(item) for item in response.output]
    assert kinds == [OutputReasoning, OutputFunctionCall]
    call_item = response.output[1]
    assert call_item.name == "get_weather" and json.loads(call_item.arguments) == {"location": "Paris"}
    assert "Thinking hard" in "".join(response.output[0].summary + response.output[0].content)


@pytest.mark.parametrize("kind", KINDS)
def test_incomplete_when_length(standin, kind):
    assert run(standin, kind, ask(), script="finish=length").status == "incomplete"


STATUS_CASES = [
    (400, "invalid_request", False),
    (401, "authentication", True),
    (403, "permission_denied", True),
    (404, "not_found", True),
    (429, "rate_limit_exceeded", True),
    (500, "provider_unavailable", True),
    (503, "provider_overloaded", True),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("status,error_type,retryable", STATUS_CASES)
def test_each_error_status_is_typed(standin, kind, status, error_type, retryable):
    with pytest.raises(UpstreamError) as caught:
        run(standin, kind, ask(), script=f"status={status},retry_after=4")
    error = caught.value
    assert (error.status, error.retryable) == (status, retryable)
    if not (kind == "anthropic" and status == 503):  # Anthropic has no 503 body of its own
        assert error.error_type == error_type
    assert error.retry_after == 4


def test_anthropic_overloaded_529(standin):
    with pytest.raises(UpstreamError) as caught:
        run(standin, "anthropic", ask(stream=True), script="status=529")
    assert (caught.value.error_type, caught.value.retryable, caught.value.status) == ("provider_overloaded", True, 529)


@pytest.mark.parametrize("kind", KINDS)
def test_wrong_credential_is_401(standin, kind):
    with pytest.raises(UpstreamError) as caught:
        run(standin, kind, ask(), script="key=sk-other", creds=ProviderCredentials(api_key="sk-standin-good"))
    assert caught.value.status == 401 and caught.value.error_type == "authentication"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("stream", [False, True])
def test_hang_past_the_read_timeout(standin, kind, stream):
    started = time.monotonic()
    with pytest.raises(UpstreamError) as caught:
        run(standin, kind, ask(stream=stream), script="latency_ms=1500", timeouts=http.Timeouts(connect=1, read=0.3))
    assert caught.value.error_type == "timeout" and caught.value.retryable
    assert time.monotonic() - started < 1.4


@pytest.mark.parametrize("kind", KINDS)
def test_stream_stalled_mid_way_times_out(standin, kind):
    with pytest.raises(UpstreamError) as caught:
        run(
            standin,
            kind,
            ask(stream=True),
            script="stall_ms=1500,chunks=3",
            timeouts=http.Timeouts(connect=1, read=0.3),
        )
    assert caught.value.error_type == "timeout"


@pytest.mark.parametrize("kind", KINDS)
def test_cut_stream_is_a_retryable_error(standin, kind):
    endpoint = standin_endpoint(standin, adapter=kind, script="cut_after=2,chunks=5")
    upstream = build_upstream_request(endpoint=endpoint, request=ask(stream=True), credentials=CREDS)
    received = []
    with pytest.raises(UpstreamError) as caught:
        for event in open_stream(endpoint=endpoint, upstream=upstream).events():
            received.append(event)
    assert caught.value.error_type == "provider_unavailable" and caught.value.retryable
    assert received, "events before the cut are delivered"


@pytest.mark.parametrize("kind", KINDS)
def test_in_band_error_mid_stream(standin, kind):
    with pytest.raises(UpstreamError) as caught:
        run(
            standin,
            kind,
            ask(stream=True),
            script="cut_after=2,mid_stream_error=529" if kind == "anthropic" else "cut_after=2,mid_stream_error=500",
        )
    assert caught.value.retryable


def test_per_request_directive_in_the_prompt(standin):
    response = run(standin, "openai_chat", ask('hi <<standin {"text": "scripted", "output_tokens": 9}>>'))
    assert response.output == (OutputMessage(text="scripted"),) and response.usage.output_tokens == 9


def test_loopback_destination_refused_unless_allowed(standin):
    endpoint = standin_endpoint(standin, adapter="openai_chat", allow_private=False)
    upstream = build_upstream_request(endpoint=endpoint, request=ask(), credentials=CREDS)
    before = len(standin.received)
    with pytest.raises(UpstreamError) as caught:
        call(endpoint=endpoint, upstream=upstream)
    assert "not allowed" in caught.value.message
    assert len(standin.received) == before, "nothing reached the server"
    with override_settings(OUTBOUND_ALLOW_PRIVATE_NETWORKS=True):
        assert call(endpoint=endpoint, upstream=upstream).status == "completed"


def test_connection_refused_is_retryable():
    from tests.support import standin_endpoint as make

    class Closed:
        url = "http://127.0.0.1:9"  # discard port: nothing listens

    endpoint = make(Closed, adapter="openai_chat")
    upstream = build_upstream_request(endpoint=endpoint, request=ask(), credentials=CREDS)
    with pytest.raises(UpstreamError) as caught:
        call(endpoint=endpoint, upstream=upstream)
    assert caught.value.error_type == "provider_unavailable" and caught.value.retryable


def test_azure_adapter_over_loopback(standin):
    response = run(standin, "azure", ask(), script="text=Azure says hi")
    assert response.output == (OutputMessage(text="Azure says hi"),)
    received = standin.requests_for("/chat/completions")[-1]
    assert received["headers"]["api-key"] == "sk-standin-good" and "authorization" not in received["headers"]
    events = run(standin, "azure", ask(stream=True), script="text=abcd,chunks=2")
    assert accumulate(events).output == (OutputMessage(text="abcd"),)


@pytest.mark.parametrize("stream", [False, True])
def test_bedrock_converse_over_loopback(standin, stream):
    tool = FunctionTool(name="get_weather", parameters={"type": "object", "properties": {}})
    result = run(
        standin,
        "bedrock",
        ask("Weather?", stream=stream, tools=(tool,)),
        script="tool_call=auto,reasoning=Let me think,chunks=3",
    )
    response = accumulate(result) if stream else result
    assert [type(item) for item in response.output] == [OutputReasoning, OutputFunctionCall]
    assert json.loads(response.output[1].arguments) == {"location": "Paris"}
    received = standin.requests_for("/converse-stream" if stream else "/converse")[-1]
    assert received["credential"] == "sk-standin-good"  # a Bedrock API key travels as a bearer token


def test_bedrock_access_keys_are_signed(standin):
    from byok.credentials import ProviderCredentials

    creds = ProviderCredentials(
        api_key="s" * 40,
        extra={"accessKeyId": "AKIAABCDEFGHIJKLMNOP", "secretAccessKey": "s" * 40, "region": "eu-west-1"},
    )
    response = run(standin, "bedrock", ask(), creds=creds)
    assert response.output == (OutputMessage(text="Hello from the local stand-in provider."),)
    headers = standin.requests_for("/converse")[-1]["headers"]
    assert headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIAABCDEFGHIJKLMNOP/")
    assert "/eu-west-1/bedrock/aws4_request" in headers["authorization"] and "x-amz-date" in headers
    assert "s" * 20 not in json.dumps(headers)


def test_bedrock_stream_exception_is_typed(standin):
    with pytest.raises(UpstreamError) as caught:
        run(standin, "bedrock", ask(stream=True), script="cut_after=2,mid_stream_error=429")
    assert caught.value.error_type == "rate_limit_exceeded" and caught.value.retryable
