"""SSE framing of a stream's writes (responses_api.pipeline.respond_stream yields the events of each write, built by
responses_api.stream_render): the Responses door frames them as Responses SSE, the other doors translate each event
into their own API's SSE. Either way the stream is closed when the client leaves, so it settles as cancelled."""

import json
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from responses_api.stream_render import DONE, KEEPALIVE, Write

KEEPALIVE_BYTES = b": GATEWAY PROCESSING\n\n"
DONE_BYTES = b"data: [DONE]\n\n"
_encode = json.JSONEncoder(separators=(",", ":")).encode  # json.dumps(..., separators=...) without a new encoder
_TEXT_DELTA = b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":'


def sse_bytes(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {_encode(event)}\n\n".encode()


class SSEFramer:
    """Responses events -> Responses SSE bytes, one write at a time. Two shortcuts write the same bytes as
    `sse_bytes` for less: an output_text delta without logprobs (nearly every event of a stream) from its part's
    constant fields encoded once, and lifecycle events of one response in one write (created, in_progress) with
    the response encoded once."""

    def __init__(self) -> None:
        self._text_fields: dict[tuple[str, int], bytes] = {}  # an output_text part's delta fields before the text

    def write(self, events: Write) -> bytes:
        if len(events) == 1:  # most writes: one upstream event's one delta
            event = events[0]
            if type(event) is dict and event["type"] == "response.output_text.delta" and not event["logprobs"]:
                return self._text_delta(event)
        out = []
        response: dict[str, Any] | None = None  # the lifecycle response last encoded in this write, and its encoding
        encoded = ""
        for event in events:
            if type(event) is not dict:
                out.append(KEEPALIVE_BYTES if event is KEEPALIVE else DONE_BYTES)
                continue
            kind = event["type"]
            if kind == "response.output_text.delta" and not event["logprobs"]:
                out.append(self._text_delta(event))
            elif len(event) == 3 and "response" in event:  # a lifecycle event: type, sequence_number, response
                if event["response"] is not response:
                    response, encoded = event["response"], _encode(event["response"])
                head = f'{{"type":{_encode(kind)},"sequence_number":{event["sequence_number"]},"response":'
                out.append(f"event: {kind}\ndata: {head}{encoded}}}\n\n".encode())
            else:
                out.append(sse_bytes(event))
        return b"".join(out)

    def _text_delta(self, event: dict[str, Any]) -> bytes:
        key = (event["item_id"], event["content_index"])  # an item id names its output index
        fields = self._text_fields.get(key)
        if fields is None:
            item_id, part = key
            ids = f'"item_id":{_encode(item_id)},"output_index":{_encode(event["output_index"])}'
            fields = self._text_fields[key] = f',{ids},"content_index":{_encode(part)},"delta":'.encode()
        sequence = str(event["sequence_number"]).encode()
        return b"".join((_TEXT_DELTA, sequence, fields, _encode(event["delta"]).encode(), b',"logprobs":[]}\n\n'))


class Translator(Protocol):
    def event(self, event: dict[str, Any]) -> bytes:
        """The bytes this API sends for one Responses event (b"" for none)."""

    def done(self) -> bytes:
        """The bytes this API sends where the Responses stream sends `data: [DONE]`."""


def translated(translator: Translator, keepalive: bytes = KEEPALIVE_BYTES) -> Callable[[Write], bytes]:
    """A write of the Responses stream as another API's SSE: every event rewritten by `translator`."""

    def write(events: Write) -> bytes:
        out = []
        for event in events:
            if event is KEEPALIVE:
                out.append(keepalive)
            elif event is DONE:
                out.append(translator.done())
            else:
                assert isinstance(event, dict)
                out.append(translator.event(event))
        return b"".join(out)

    return write


def framed(stream: Iterator[Write], write: Callable[[Write], bytes]) -> Iterator[bytes]:
    """The stream's writes as bytes, one write per write (none for a write that comes to nothing), closing the
    stream when the client leaves so it settles as cancelled."""
    try:
        for events in stream:
            if out := write(events):
                yield out
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
