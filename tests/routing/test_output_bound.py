"""routing.output_bound: the bytes an answer may bring for the tokens its request allows, and how an answer that
passes them is cut (whole characters, tokens within the text kept, later items left out)."""

from routing.canonical import (
    CanonicalRequest,
    CanonicalResponse,
    OutputFunctionCall,
    OutputMessage,
    OutputReasoning,
    ReasoningConfig,
    TextDelta,
    TokenLogprob,
    ToolCallStarted,
    Usage,
)
from routing.output_bound import OutputBudget, allowed_output_tokens, output_byte_limit
from tests.support import standin_endpoint


class _Server:
    url = "http://127.0.0.1:9"


ENDPOINT = standin_endpoint(_Server(), adapter="openai_chat")  # max completion 4,096, context 32,768


def test_the_tokens_allowed_come_from_the_request_else_the_catalog():
    assert allowed_output_tokens(CanonicalRequest(model="m", input=(), max_output_tokens=16), ENDPOINT) == 16
    assert allowed_output_tokens(CanonicalRequest(model="m", input=()), ENDPOINT) == 4096
    unlimited = standin_endpoint(_Server(), adapter="openai_chat", max_completion_tokens=None)
    assert allowed_output_tokens(CanonicalRequest(model="m", input=()), unlimited) == 32768
    # a reasoning request: the thinking budget an adapter may add upstream on top (as the usage bounds allow)
    thinking = CanonicalRequest(model="m", input=(), max_output_tokens=100, reasoning=ReasoningConfig(effort="xhigh"))
    assert allowed_output_tokens(thinking, ENDPOINT) == 100 + 32768
    assert output_byte_limit(16) == 256 and output_byte_limit(1000) == 8000


def test_a_text_is_cut_between_characters_never_inside_one():
    budget = OutputBudget(16)  # 256 bytes
    assert budget.take("a" * 250) == "a" * 250 and not budget.exhausted
    assert budget.take("é" * 10) == "ééé"  # 2 bytes each: 6 of the 6 bytes left
    assert budget.exhausted and budget.left == 0


def test_a_cut_delta_keeps_the_tokens_within_its_text():
    budget = OutputBudget(16, logprobs=True)
    budget.take("x" * 250)
    tokens = tuple(TokenLogprob(token=token, logprob=-0.1) for token in ("abc", "def", "ghi"))
    cut = budget.event(TextDelta("abcdefghi", tokens))
    assert cut == TextDelta("abcdef", tokens[:2])
    assert budget.exhausted


def test_token_logprobs_are_kept_only_when_asked_and_bounded_too():
    tokens = tuple(TokenLogprob(token="a", logprob=-0.1) for _ in range(10))
    assert OutputBudget(16).event(TextDelta("a" * 10, tokens)) == TextDelta("a" * 10)  # not asked: not relayed
    # asked: at most twice as many as the tokens allowed, whatever the text (a flood of logprobs on empty deltas)
    budget = OutputBudget(16, logprobs=True)
    assert budget.event(TextDelta("", tokens * 4)) == TextDelta("", (tokens * 4)[:32])
    assert budget.exhausted


def test_a_call_whose_name_does_not_fit_is_left_out():
    budget = OutputBudget(16)
    budget.take("x" * 250)
    assert budget.event(ToolCallStarted(0, "call_1", "a_long_function_name")) is None
    assert budget.exhausted


def test_a_whole_answer_past_the_bound_keeps_what_fits_and_ends_incomplete():
    answer = CanonicalResponse(
        output=(
            OutputReasoning(content=("r" * 100,)),
            OutputMessage(text="t" * 1000),
            OutputFunctionCall(call_id="c", name="f", arguments="{}"),
        ),
        usage=Usage(input_tokens=5, output_tokens=3),
    )
    cut = OutputBudget(16).response(answer)
    assert cut.output == (OutputReasoning(content=("r" * 100,)), OutputMessage(text="t" * 156))
    assert cut.status == "incomplete" and cut.incomplete_reason == "max_output_tokens" and cut.output_cut
    assert cut.usage == answer.usage  # billed by the caller as the most the request allowed


def test_an_answer_within_the_bound_is_untouched():
    answer = CanonicalResponse(output=(OutputMessage(text="Hello"),))
    assert OutputBudget(16).response(answer) is answer
