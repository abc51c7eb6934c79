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
