"""A small Server-Sent Events decoder following the WHATWG event-stream parsing rules:
lines end in CR, LF or CRLF; a blank line dispatches; `:` lines are comments; multi-line `data`
is joined with newlines. https://html.spec.whatwg.org/multipage/server-sent-events.html#parsing-an-event-stream
"""

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class SSEEvent:
    event: str
    data: str

    def json(self):
        return json.loads(self.data)


def iter_lines(chunks: Iterable[bytes]) -> Iterator[str]:
    buffer = b""
    for chunk in chunks:
        if not chunk:
            continue
        buffer += chunk
        while True:
            cut = min((i for i in (buffer.find(b"\r"), buffer.find(b"\n")) if i != -1), default=-1)
            if cut == -1:
                break
            if buffer[cut:cut + 1] == b"\r" and cut + 1 == len(buffer):
                break  # a CR at the end may be the first half of CRLF: wait for more
            line, rest = buffer[:cut], buffer[cut + 1:]
            if buffer[cut:cut + 2] == b"\r\n":
                rest = buffer[cut + 2:]
            buffer = rest
            yield line.decode("utf-8", errors="replace")
    if buffer:
        yield buffer.rstrip(b"\r").decode("utf-8", errors="replace")


def decode_sse(chunks: Iterable[bytes]) -> Iterator[SSEEvent]:
    event_type, data_lines = "", []
    for line in iter_lines(chunks):
        if line == "":
            if data_lines:
                yield SSEEvent(event=event_type or "message", data="\n".join(data_lines))
            event_type, data_lines = "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            data_lines.append(value)
        elif name == "event":
            event_type = value
    if data_lines:
        # The stream ended without the blank line that would dispatch this event: per the spec it is
        # discarded; callers detect the cut from the missing terminal event instead.
        return
