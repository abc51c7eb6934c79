"""The SSE bytes the renderer writes for canonical event sequences, byte for byte: every adapter's recorded
stream (tests/fixtures/adapters/<kind>/) and the orderings a provider may send (text after a tool call, a
refusal after text, a signature after text, arguments with no start). Ids are numbered so the bytes are
stable. The fold of the same events must agree with what the SSE stream completed with."""

import itertools
import json

import pytest

from responses_api import stream_render
from responses_api.render import output_items
from responses_api.streaming import SSEFramer
from routing.accumulate import Fold, replay
from routing.canonical import (
    Finished,
    ReasoningDelta,
    ReasoningSealed,
    RefusalDelta,
    ResponseStarted,
    TextDelta,
    ToolCallDelta,
    ToolCallStarted,
    Usage,
    UsageReported,
)
from routing.providers.registry import ADAPTERS
from tests.golden import FIXTURES, stream_fixture

SYNTHETIC = {
    "text_call_text": [
        ResponseStarted(upstream_id="up-1", model="m"),
        TextDelta("Let me look. "),
        ToolCallStarted(index=0, call_id="call_a", name="lookup"),
        ToolCallDelta(index=0, arguments='{"q":'),
        ToolCallDelta(index=0, arguments='"x"}'),
        TextDelta("Found it."),
        UsageReported(Usage(input_tokens=3, output_tokens=9)),
        Finished(),
    ],
    "refusal_after_text": [TextDelta("Sure"), RefusalDelta("I can't"), RefusalDelta(" do that"), TextDelta("!")],
    "reasoning_both_then_sealed": [
        ReasoningDelta("plan", kind="summary"),
        ReasoningDelta("think", kind="content"),
        ReasoningDelta(" more", kind="summary"),
        ReasoningSealed(signature="sig", encrypted_content="enc", format="anthropic-claude-v1"),
        TextDelta("answer"),
        ReasoningSealed(signature="sig2"),
        Finished(status="incomplete", incomplete_reason="max_output_tokens"),
    ],
    "arguments_without_start": [
        ToolCallDelta(index=2, arguments="{}"),
        ToolCallStarted(index=3, call_id="call_b", name="b"),
        ToolCallDelta(index=3, arguments="{"),
        ToolCallDelta(index=4, arguments="}"),
    ],
    "nothing": [ResponseStarted(), UsageReported(Usage()), Finished()],
}


def _adapter_events(kind: str) -> list:
    raw = stream_fixture(kind)
    return list(ADAPTERS[kind].stream_events(ADAPTERS[kind].decode([raw])))


CASES = {**{f"adapter_{kind}": kind for kind in sorted(ADAPTERS)}, **{name: name for name in SYNTHETIC}}


@pytest.fixture
def numbered_ids(monkeypatch):
    counter = itertools.count()
    monkeypatch.setattr(stream_render, "new_id", lambda prefix: f"{prefix}_{next(counter)}")


def render(events) -> tuple[bytes, list[dict], Fold]:
    """The bytes for the events, then for closing the last item; the items the stream completed with; the fold."""
    fold, renderer = Fold(), stream_render.StreamRenderer()
    framer = SSEFramer()
    chunks = [framer.write(renderer.render(fold.add(event))) for event in events]
    chunks.append(framer.write(renderer.render(fold.close())))
    return b"".join(chunks), renderer.items, fold


def without_ids(items: list[dict]) -> list[dict]:
    return [{key: value for key, value in item.items() if key != "id"} for item in items]


@pytest.mark.parametrize("case", sorted(CASES))
def test_sse_bytes_are_the_golden_ones(case, numbered_ids):
    events = _adapter_events(CASES[case]) if case.startswith("adapter_") else SYNTHETIC[case]
    body, items, fold = render(events)
    assert without_ids(output_items(fold.response())) == without_ids(items)  # billed == sent
    body += b"items: " + json.dumps(items, sort_keys=True).encode() + b"\n"
    path = FIXTURES / f"stream_render/{case}.sse"
    if not path.exists():  # first run writes it (review the diff)
        path.write_bytes(body)
    assert body == path.read_bytes()


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_complete_response_replays_as_the_same_items(case, numbered_ids):
    """A response changed by a post-stage is streamed from its items: the same items come out."""
    events = _adapter_events(CASES[case]) if case.startswith("adapter_") else SYNTHETIC[case]
    response = render(events)[2].response()
    renderer = stream_render.StreamRenderer()
    renderer.render(replay(response))
    assert without_ids(renderer.items) == without_ids(output_items(response))
