"""A small Server-Sent Events decoder following the WHATWG event-stream parsing rules:
lines end in CR, LF or CRLF; a blank line dispatches; `:` lines are comments; multi-line `data`
is joined with newlines. https://html.spec.whatwg.org/multipage/server-sent-events.html#parsing-an-event-stream

Upstreams are not trusted: parsing is linear in the bytes received (each byte is scanned a bounded number of
times, however the stream is chunked), and a line or an event's data longer than UPSTREAM_MAX_LINE_BYTES fails
the attempt instead of growing without bound.
"""

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from routing import jsonsafe
from routing.errors import UpstreamError

DEFAULT_MAX_LINE_BYTES = 8 * 1024 * 1024
MSG_OVERSIZED = "The provider sent an oversized event"
_LINE_END = re.compile(rb"\r\n?|\n")


@dataclass(frozen=True)
class SSEEvent:
    event: str
    data: str

    def json(self):
        return jsonsafe.loads(self.data)


def max_line_bytes() -> int:
    from django.conf import settings

    if not settings.configured:
        return DEFAULT_MAX_LINE_BYTES
    return getattr(settings, "UPSTREAM_MAX_LINE_BYTES", DEFAULT_MAX_LINE_BYTES)


def oversized_event() -> UpstreamError:
    return UpstreamError(error_type="provider_unavailable", message=MSG_OVERSIZED, retryable=True)


def iter_lines(chunks: Iterable[bytes], *, limit: int | None = None) -> Iterator[str]:
    """Lines as they complete. `buffer[start:]` is the unfinished line; `buffer[start:scanned]` is known to
    hold no line end, so each chunk is searched once (a CR at the very end waits for a possible LF)."""
    limit = limit or max_line_bytes()
    buffer = bytearray()
    start = scanned = 0
    for chunk in chunks:
        if not chunk:
            continue
        buffer += chunk
        end = len(buffer)
        if buffer.find(b"\r", scanned) == -1:  # the common case, LF only: split in one pass
            last = buffer.rfind(b"\n", scanned)
            if last != -1:
                for line in buffer[start:last].split(b"\n"):
                    if len(line) > limit:
                        raise oversized_event()
                    yield line.decode("utf-8", errors="replace")
                start = last + 1
            scanned = end
        else:
            while True:
                match = _LINE_END.search(buffer, scanned)
                if match is None:
                    scanned = end
                    break
                cut = match.start()
                if match.end() == end and match.end() - cut == 1 and buffer[cut] == 0x0D:  # maybe half a CRLF
                    scanned = cut
                    break
                if cut - start > limit:
                    raise oversized_event()
                yield buffer[start:cut].decode("utf-8", errors="replace")
                start = scanned = match.end()
        if scanned - start > limit:  # the unfinished line (a CR waiting for its LF is not part of it)
            raise oversized_event()
        if start:
            del buffer[:start]  # cheap: CPython moves the start of a bytearray instead of copying
            scanned -= start
            start = 0
    if buffer:
        yield bytes(buffer).rstrip(b"\r").decode("utf-8", errors="replace")


def decode_sse(chunks: Iterable[bytes], *, limit: int | None = None) -> Iterator[SSEEvent]:
    limit = limit or max_line_bytes()
    event_type, size = "", 0
    data_lines: list[str] = []
    idle = 0  # bytes of blank lines and comments since the last event: a flood of them is bounded too
    for line in iter_lines(chunks, limit=limit):
        if line == "":
            if data_lines:
                yield SSEEvent(event=event_type or "message", data="\n".join(data_lines))
                idle = 0
            else:
                idle += 1
                if idle > limit:
                    raise oversized_event()
            event_type, data_lines, size = "", [], 0
            continue
        if line.startswith(":"):
            idle += len(line) + 1
            if idle > limit:
                raise oversized_event()
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            size += len(value) + 1
            if size > limit:
                raise oversized_event()
            data_lines.append(value)
        elif name == "event":
            event_type = value
    if data_lines:
        # The stream ended without the blank line that would dispatch this event: per the spec it is
        # discarded; callers detect the cut from the missing terminal event instead.
        return
