"""routing.output_bound: the bytes an answer may bring for the tokens its request allows, and how an answer that
passes them is cut (whole characters, tokens within the text kept, later items left out)."""

import itertools
import json

import pytest

from routing.canonical import (
    CanonicalRequest,
    CanonicalResponse,
    HostedTool,
    HostedToolCall,
    OutputFunctionCall,
    OutputHostedTool,
    OutputMessage,
    OutputReasoning,
    ReasoningConfig,
    ReasoningSealed,
    TextDelta,
    TokenLogprob,
    ToolCallDelta,
    ToolCallStarted,
    Usage,
)
from routing.errors import UpstreamError
from routing.output_bound import (
    IMAGE_OUTPUT_BYTES,
    ITEM_BYTES,
    MIN_ITEMS,
    OPAQUE_ITEM_MIN_BYTES,
    OPAQUE_OUTPUT_BYTES,
    OutputAllowance,
    OutputBudget,
    output_allowance,
    output_budget,
    output_byte_limit,
)
from routing.providers.anthropic import response as anthropic_response
from routing.providers.anthropic.web_search import SEARCH_HELD_BYTES
from routing.sse import SSEEvent
from tests.support import standin_endpoint


class _Server:
    url = "http://127.0.0.1:9"


ENDPOINT = standin_endpoint(_Server(), adapter="openai_chat")  # max completion 4,096, context 32,768


def test_the_tokens_allowed_come_from_the_request_else_the_catalog():
    assert output_allowance(CanonicalRequest(model="m", input=(), max_output_tokens=16), ENDPOINT).tokens == 16
    assert output_allowance(CanonicalRequest(model="m", input=()), ENDPOINT) == OutputAllowance(4096, held=4096)
    # no maximum anywhere: the bound is the context, the hold (and a cut's bill) the gateway's default
    unlimited = standin_endpoint(_Server(), adapter="openai_chat", max_completion_tokens=None)
    assert output_allowance(CanonicalRequest(model="m", input=()), unlimited) == OutputAllowance(32768, held=4096)
    # a reasoning request: the thinking budget an adapter may add upstream on top, in the bound and the hold alike
    thinking = CanonicalRequest(model="m", input=(), max_output_tokens=100, reasoning=ReasoningConfig(effort="xhigh"))
    assert output_allowance(thinking, ENDPOINT) == OutputAllowance(100 + 32768, held=100 + 32768)
    assert output_allowance(thinking, unlimited) == OutputAllowance(100 + 32768, held=100 + 32768)
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


def code_call(number: int, logs: str) -> OutputHostedTool:
    return OutputHostedTool(item={"type": "code_interpreter_call", "id": f"ci_{number}", "outputs": [{"logs": logs}]})


def test_provider_run_items_count_against_their_own_bound():
    # Given a request allowing 16 tokens (256 bytes of text) and an upstream sending 64 KiB provider-run items
    budget = OutputBudget(16)
    relayed = [budget.event(HostedToolCall(code_call(n, "x" * 65_000))) for n in range(40)]
    # Then items are relayed while the provider-run bound (1 MiB) has room, the next one is left out and cut
    kept = [event for event in relayed if event is not None]
    assert 0 < len(kept) * 65_000 <= OPAQUE_OUTPUT_BYTES < (len(kept) + 1) * 65_000
    assert relayed[len(kept)] is None and budget.exhausted
    # And each counts at least OPAQUE_ITEM_MIN_BYTES, so a flood of tiny items is bounded by their number too
    tiny = OutputBudget(16)
    relayed = relayed_until_cut(tiny, [HostedToolCall(code_call(n, "")) for n in range(5000)])
    assert relayed == OPAQUE_OUTPUT_BYTES // OPAQUE_ITEM_MIN_BYTES


def test_a_request_offering_image_generation_allows_an_image_s_bytes():
    image = HostedTool(spec={"type": "image_generation"}, source="tools[0]")
    request = CanonicalRequest(model="m", input=(), max_output_tokens=16, hosted_tools=(image,))
    png = OutputHostedTool(item={"type": "image_generation_call", "id": "ig_1", "result": "A" * 3_000_000})
    assert output_budget(request, ENDPOINT).event(HostedToolCall(png)) is not None
    assert OutputBudget(16).event(HostedToolCall(png)) is None  # 3 MB on a request that asked for no image
    assert IMAGE_OUTPUT_BYTES > 3_000_000 > OPAQUE_OUTPUT_BYTES


def test_a_reasoning_seal_counts_against_the_same_bound():
    sealed = ReasoningSealed(signature="s" * 500, encrypted_content=None, format="anthropic-claude-v1")
    assert OutputBudget(16).event(sealed) is sealed  # an ordinary signature passes as it is
    budget = OutputBudget(16)
    assert budget.event(ReasoningSealed(encrypted_content="e" * (OPAQUE_OUTPUT_BYTES + 1))) is None
    assert budget.exhausted


def test_a_whole_answer_s_provider_run_items_and_seals_are_bounded():
    answer = CanonicalResponse(
        output=(
            OutputReasoning(summary=("thought",), signature="s" * 600_000),
            code_call(1, "x" * 300_000),
            code_call(2, "x" * 300_000),
            OutputMessage(text="The answer."),
        ),
    )
    cut = OutputBudget(16).response(answer)
    assert cut.output == answer.output[:2]  # the second call would pass 1 MiB: it and what follows are left out
    assert cut.status == "incomplete" and cut.output_cut
    # an answer with ordinary items is untouched
    ordinary = CanonicalResponse(output=(OutputReasoning(signature="sig"), code_call(1, "42"), OutputMessage("Hi")))
    assert OutputBudget(16).response(ordinary) is ordinary


def relayed_until_cut(budget: OutputBudget, events: list) -> int:
    """How many events a relay passes before the budget cuts the answer (it reads nothing after)."""
    relayed = 0
    for event in events:
        relayed += budget.event(event) is not None
        if budget.exhausted:
            return relayed
    raise AssertionError("never cut")


def test_items_of_a_byte_each_are_bounded_by_their_number():
    # Given an upstream alternating one-byte text and one-byte call arguments (each a new item in the answer)
    budget = OutputBudget(1000)  # 8,000 bytes: at most 500 items
    events = [TextDelta("a"), ToolCallDelta(0, "b")] * 1000
    # Then at most one item per ITEM_BYTES of the bound opens, then the answer is cut (the relay reads no further)
    assert relayed_until_cut(budget, events) == 8000 // ITEM_BYTES
    assert relayed_until_cut(OutputBudget(16), events) == MIN_ITEMS  # a small bound still has room for tens
    # And within one item, deltas are not items (a normal answer's thousands of deltas pass)
    one = OutputBudget(1000)
    assert all(one.event(TextDelta("a")) is not None for _ in range(5000)) and not one.exhausted
    # A whole answer keeps the items that fit
    answer = CanonicalResponse(output=tuple(OutputMessage(text="a") for _ in range(600)))
    cut = OutputBudget(1000).response(answer)
    assert len(cut.output) == 8000 // ITEM_BYTES and cut.output_cut


def test_empty_deltas_and_call_ids_count_too():
    assert relayed_until_cut(OutputBudget(16), [TextDelta("")] * 1000) == 256  # 256 bytes: one each
    assert OutputBudget(16).event(ToolCallStarted(0, "c" * 300, "f")) is None  # a 300-byte call id does not fit
    odd = ToolCallStarted(0, 12345, "f")  # type: ignore[arg-type]  # a hostile upstream's id of another type
    assert OutputBudget(16).event(odd) is odd


# ---- what an adapter holds before the budget sees it ----------------------------------------------------------


def anthropic_events(*payloads: dict, counter: list[int]):
    """Anthropic stream events as the SSE decoder hands them over, counting how many were read."""
    for payload in payloads:
        counter[0] += 1
        yield SSEEvent(payload["type"], json.dumps(payload))


def test_a_flooding_anthropic_signature_is_handed_on_before_it_grows_without_bound():
    # Given a thinking block whose signature arrives in 1 MiB deltas, without end
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "s" * 2**20}}
    start = {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}
    read = [0]
    events = anthropic_events(start, *itertools.repeat(delta, 64), counter=read)
    # Then the adapter hands the seal on once it holds more than PENDING_BYTES, and the budget cuts the answer there
    sealed = next(event for event in anthropic_response.stream(events) if isinstance(event, ReasoningSealed))
    assert read[0] <= 2 + anthropic_response.PENDING_BYTES // 2**20
    budget = OutputBudget(16, opaque=IMAGE_OUTPUT_BYTES)
    assert budget.event(sealed) is None and budget.exhausted


def test_a_flooding_anthropic_search_query_fails_the_attempt_instead_of_growing():
    # Given a server tool use whose input JSON arrives in 64 KiB deltas, without end
    start = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
    }
    part = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": "q" * 65536},
    }
    read = [0]
    events = anthropic_events(start, *itertools.repeat(part, 1000), counter=read)
    # Then the attempt fails once the search blocks hold more than their bound: nothing more is read or kept
    with pytest.raises(UpstreamError):
        list(anthropic_response.stream(events))
    assert read[0] <= 2 + SEARCH_HELD_BYTES // 65536
