"""The framing of a stream's writes (responses_api.streaming): its shortcuts write the bytes plain framing writes,
markers become the door's own bytes, and a client that leaves closes the stream (so it settles as cancelled)."""

import json

from responses_api.stream_render import DONE, KEEPALIVE, StreamRenderer
from responses_api.streaming import DONE_BYTES, KEEPALIVE_BYTES, SSEFramer, framed, sse_bytes, translated
from routing.accumulate import Fold
from routing.canonical import Finished, ResponseStarted, TextDelta


def events() -> list[dict]:
    renderer, fold = StreamRenderer(), Fold()
    shell = {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}
    out = renderer.lifecycles(("response.created", "response.in_progress"), shell)
    for event in (ResponseStarted(upstream_id="r", model="m"), TextDelta(text='héllo "x"\n'), TextDelta(text="2")):
        out += renderer.render(fold.add(event))
    out += renderer.render(fold.add(Finished()))
    out += renderer.render(fold.close())
    out.append(renderer.lifecycle("response.completed", {**shell, "status": "completed", "output": renderer.items}))
    return out


def test_the_shortcuts_write_what_plain_framing_writes():
    written = events()
    assert [event["type"] for event in written].count("response.output_text.delta") == 2
    assert SSEFramer().write(written) == b"".join(sse_bytes(event) for event in written)


def test_markers_are_the_doors_bytes_and_events_are_translated_in_order():
    class Upper:
        def event(self, event: dict) -> bytes:
            return event["type"].upper().encode()

        def done(self) -> bytes:
            return b"END"

    write = [KEEPALIVE, {"type": "a"}, {"type": "b"}, DONE]
    assert translated(Upper(), b"PING")(write) == b"PINGABEND"
    assert (
        SSEFramer().write(write) == KEEPALIVE_BYTES + sse_bytes({"type": "a"}) + sse_bytes({"type": "b"}) + DONE_BYTES
    )


def test_a_client_that_leaves_closes_the_stream_and_empty_writes_are_not_sent():
    closed = []

    def stream():
        try:
            yield []
            yield [{"type": "a", "n": 1}]
            yield [{"type": "b", "n": 2}]
        finally:
            closed.append(True)

    body = framed(stream(), SSEFramer().write)
    first = next(body)
    assert json.loads(first.split(b"data: ")[1]) == {"type": "a", "n": 1}
    body.close()  # what the server does when the client went away
    assert closed == [True]
