"""The Responses event stream of responses_api.pipeline.respond_stream, read back as events for another API's SSE.

The other front doors relay the one stream implementation (fallback before the first byte, keep-alives,
post-stages, in-band failure, settlement however the stream ends) and only rewrite its events: each write of
that stream is whole SSE messages, so a write is split into its events here."""

import json
from collections.abc import Iterable, Iterator
from typing import Protocol

from responses_api.stream_render import DONE, KEEPALIVE


class Translator(Protocol):
    def event(self, event: dict) -> bytes:
        """The bytes this API sends for one Responses event (b"" for none)."""

    def done(self) -> bytes:
        """The bytes this API sends where the Responses stream sends `data: [DONE]`."""


def events_of(write: bytes) -> Iterator[dict | bytes]:
    """The Responses events in one write, in order (a keep-alive or [DONE] as its bytes)."""
    for message in write.split(b"\n\n"):
        if not message:
            continue
        if message.startswith(b":"):
            yield KEEPALIVE
            continue
        for line in message.split(b"\n"):
            if line.startswith(b"data: "):
                payload = line[6:]
                yield DONE if payload == b"[DONE]" else json.loads(payload)


def relay(stream: Iterable[bytes], translator: Translator, keepalive: bytes = KEEPALIVE) -> Iterator[bytes]:
    """The Responses stream with every event rewritten by `translator`, one write per write (closing the
    Responses stream when the client leaves, so it settles as cancelled)."""
    try:
        for write in stream:
            out = []
            for event in events_of(write):
                if event is KEEPALIVE:
                    out.append(keepalive)
                elif event is DONE:
                    out.append(translator.done())
                else:
                    assert isinstance(event, dict)
                    out.append(translator.event(event))
            if joined := b"".join(out):
                yield joined
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
