"""Adapters refuse answers that are not answers: a 200 that holds only an error object is a failed attempt
(so the next endpoint is tried), never a "completed" response with empty output."""

import pytest

from routing.errors import UpstreamError
from routing.providers.openai_chat.response import MSG_ERROR_IN_200, parse


@pytest.mark.parametrize(
    "body",
    [
        {"error": {"message": "upstream overloaded", "code": 502}},
        {"error": "model crashed", "choices": []},
        {"object": "chat.completion", "error": {"message": "x"}, "choices": None},
    ],
)
def test_a_200_with_only_an_error_is_a_retryable_attempt_failure(body):
    with pytest.raises(UpstreamError) as failure:
        parse(body)
    assert failure.value.retryable and failure.value.message == MSG_ERROR_IN_200
    assert failure.value.error_type == "provider_unavailable"


def test_an_answer_with_choices_is_parsed_even_beside_an_error_field():
    body = {
        "id": "c1",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
        "error": None,
    }
    response = parse(body)
    assert response.status == "completed" and response.usage.output_tokens == 1


JUNK_USAGE = [None, [], [1, 2], "12", {"weird": True}, float("nan")]


@pytest.mark.parametrize("junk", JUNK_USAGE, ids=repr)
def test_a_malformed_usage_field_reads_as_not_reported_instead_of_failing_the_answer(junk):
    # Every adapter's usage reader takes whatever the provider sent: non-numbers count as 0 (billing then
    # estimates the output from its text and records the anomaly), so complete content is never thrown away.
    from routing.providers.anthropic.response import usage as anthropic_usage
    from routing.providers.bedrock.response import usage as bedrock_usage
    from routing.providers.openai_chat.response import usage as chat_usage
    from routing.providers.openai_responses.response import usage as responses_usage

    for read in (anthropic_usage, bedrock_usage, chat_usage, responses_usage):
        assert read(junk).output_tokens == 0 and read(junk).input_tokens == 0
        counts = read(
            {
                "input_tokens": junk,
                "prompt_tokens": junk,
                "inputTokens": junk,
                "output_tokens": 7,
                "completion_tokens": 7,
                "outputTokens": 7,
                "prompt_tokens_details": junk,
                "input_tokens_details": junk,
            }
        )
        assert counts.output_tokens == 7 and counts.input_tokens == 0 and counts.cached_tokens == 0


def test_valid_counts_are_read_as_before():
    from routing.providers.openai_chat.response import usage as chat_usage

    counts = chat_usage({"prompt_tokens": 12, "completion_tokens": 5.0, "prompt_tokens_details": {"cached_tokens": 4}})
    assert (counts.input_tokens, counts.output_tokens, counts.cached_tokens) == (12, 5, 4)
    assert chat_usage({"prompt_tokens": -3}).input_tokens == -3  # kept: billing clamps it and records why


JUNK_LOGPROBS = [
    None,
    7,
    "tokens",
    {"content": 3},
    [None, 5, "x", {"token": 1, "logprob": -1}, {"token": "a", "logprob": "low"}, {"token": "b", "logprob": None}],
    [{"token": "a", "logprob": float("inf")}, {"token": "b", "logprob": True}],
    [{"token": "ok", "logprob": -0.5, "bytes": [300, -1], "top_logprobs": 9}],
    [
        {
            "token": "ok",
            "logprob": -0.5,
            "bytes": "zz",
            "top_logprobs": [{"token": "x"}, None, {"token": "y", "logprob": -2}],
        }
    ],
]


@pytest.mark.parametrize("junk", JUNK_LOGPROBS, ids=repr)
def test_malformed_logprobs_are_dropped_never_failing_the_answer(junk):
    """Token logprobs are what the caller asked for, not what the answer needs: a malformed entry is left out."""
    from routing.canonical import TokenLogprob, TopLogprob
    from routing.providers.openai_chat.response import parse as chat_parse
    from routing.providers.openai_responses.response import parse as responses_parse

    chat = chat_parse({"choices": [{"message": {"content": "ok"}, "logprobs": {"content": junk}}]})
    part = {"type": "output_text", "text": "ok", "logprobs": junk}
    responses = responses_parse({"output": [{"type": "message", "content": [part]}]})
    for answer in (chat, responses):
        [message] = answer.output
        assert message.text == "ok"
        for token in message.logprobs:  # only well-formed entries: a string token and a finite logprob
            assert token == TokenLogprob("ok", -0.5, None, token.top_logprobs)
            assert token.top_logprobs in ((), (TopLogprob("y", -2.0),))
