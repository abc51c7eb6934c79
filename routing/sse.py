"""A small Server-Sent Events decoder following the WHATWG event-stream parsing rules:
lines end in CR, LF or CRLF; a blank line dispatches; `:` lines are comments; multi-line `data`
is joined with newlines. https://html.spec.whatwg.org/multipage/server-sent-events.html#parsing-an-event-stream

Upstreams are not trusted: parsing is linear in the bytes received (each byte is scanned a bounded number of
times, however the stream is chunked), and a line or an event's data longer than UPSTREAM_MAX_LINE_BYTES fails
the attempt instead of growing without bound.
"""

import re
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from routing import jsonsafe
from routing.errors import UpstreamError

DEFAULT_MAX_LINE_BYTES = 8 * 1024 * 1024
MSG_OVERSIZED = "The provider sent an oversized event"
_LINE_END = re.compile(rb"\r\n?|\n")


class SSEEvent(NamedTuple):
    """One dispatched event (a named tuple: made for every upstream event, so made cheaply)."""

    event: str
    data: str

    def json(self) -> Any:
        return jsonsafe.loads(self.data)


def max_line_bytes() -> int:
    from django.conf import settings

    if not settings.configured:
        return DEFAULT_MAX_LINE_BYTES
    return getattr(settings, "UPSTREAM_MAX_LINE_BYTES", DEFAULT_MAX_LINE_BYTES)


def oversized_event() -> UpstreamError:
    return UpstreamError(error_type="provider_unavailable", message=MSG_OVERSIZED, retryable=True)


class _Lines:
    """The line splitter: `buffer[start:]` is the unfinished line; `buffer[start:scanned]` is known to hold no
    line end, so each chunk is searched once (a CR at the very end waits for a possible LF)."""

    __slots__ = ("limit", "buffer", "start", "scanned")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buffer = bytearray()
        self.start = self.scanned = 0

    def feed(self, chunk: bytes, lines: list[str]) -> None:
        """Append the lines `chunk` completes to `lines`; an oversized line raises after the lines before it."""
        buffer, limit = self.buffer, self.limit
        buffer += chunk
        start, scanned, end = self.start, self.scanned, len(buffer)
        try:
            if buffer.find(b"\r", scanned) == -1:  # the common case, LF only: split in one pass
                last = buffer.rfind(b"\n", scanned)
                if last != -1:
                    for line in buffer[start:last].split(b"\n"):
                        if len(line) > limit:
                            raise oversized_event()
                        lines.append(line.decode("utf-8", errors="replace"))
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
                    lines.append(buffer[start:cut].decode("utf-8", errors="replace"))
                    start = scanned = match.end()
            if scanned - start > limit:  # the unfinished line (a CR waiting for its LF is not part of it)
                raise oversized_event()
        finally:
            if start:
                del buffer[:start]  # cheap: CPython moves the start of a bytearray instead of copying
                scanned -= start
                start = 0
            self.start, self.scanned = start, scanned

    def end(self) -> list[str]:
        """The unfinished line, if any, at the end of the stream."""
        if not self.buffer:
            return []
        return [bytes(self.buffer).rstrip(b"\r").decode("utf-8", errors="replace")]


def iter_lines(chunks: Iterable[bytes], *, limit: int | None = None) -> Iterator[str]:
    """Lines as they complete."""
    splitter = _Lines(limit or max_line_bytes())
    for chunk in chunks:
        if not chunk:
            continue
        lines: list[str] = []
        try:
            splitter.feed(chunk, lines)
        except UpstreamError:
            yield from lines  # the lines before the oversized one
            raise
        yield from lines
    yield from splitter.end()


class SSEDecoder:
    """The events of a byte stream, as an iterator. Each chunk received is split and decoded at once, so
    `pending` tells whether the next event is already here (a relay writes what it has before it waits)."""

    __slots__ = ("_chunks", "_lines", "_limit", "_ready", "_error", "_ended", "_type", "_data", "_size", "_idle")

    def __init__(self, chunks: Iterable[bytes], *, limit: int | None = None) -> None:
        self._chunks = iter(chunks)
        self._limit = limit or max_line_bytes()
        self._lines = _Lines(self._limit)
        self._ready: deque[SSEEvent] = deque()
        self._error: UpstreamError | None = None  # raised once the events before it were taken
        self._ended = False
        self._type = ""  # the event being read: its type, data lines and their size
        self._data: list[str] = []
        self._size = 0
        self._idle = 0  # bytes of blank lines and comments since the last event: a flood of them is bounded too

    @property
    def pending(self) -> bool:
        return bool(self._ready) or self._error is not None

    def __iter__(self) -> "SSEDecoder":
        return self

    def __next__(self) -> SSEEvent:
        ready = self._ready
        while not ready:
            if self._error is not None:
                error, self._error = self._error, None
                self._ended = True
                raise error
            if self._ended:
                raise StopIteration
            lines: list[str] = []
            try:
                try:
                    chunk = next(self._chunks)
                except StopIteration:
                    self._ended = True
                    lines = self._lines.end()
                else:
                    if chunk:
                        self._lines.feed(chunk, lines)
            except UpstreamError as error:
                self._error = error
            try:
                self._take(lines)
            except UpstreamError as error:
                self._error = error
        return ready.popleft()

    def _take(self, lines: list[str]) -> None:
        limit = self._limit
        for line in lines:
            if not line:
                if self._data:
                    self._ready.append(SSEEvent(self._type or "message", "\n".join(self._data)))
                    self._idle = 0
                else:
                    self._idle += 1
                    if self._idle > limit:
                        raise oversized_event()
                self._type, self._data, self._size = "", [], 0
                continue
            if line[0] == ":":
                self._idle += len(line) + 1
                if self._idle > limit:
                    raise oversized_event()
                continue
            name, _, value = line.partition(":")
            if value[:1] == " ":
                value = value[1:]
            if name == "data":
                self._size += len(value) + 1
                if self._size > limit:
                    raise oversized_event()
                self._data.append(value)
            elif name == "event":
                self._type = value
        # An event the stream ends without dispatching (no blank line after it) is discarded, per the spec;
        # callers detect the cut from the missing terminal event instead.


def decode_sse(chunks: Iterable[bytes], *, limit: int | None = None) -> SSEDecoder:
    return SSEDecoder(chunks, limit=limit)
