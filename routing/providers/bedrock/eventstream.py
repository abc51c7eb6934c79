"""The AWS event-stream framing that Bedrock's ConverseStream answers with (`application/vnd.amazon.eventstream`):
each message is a prelude (total and header lengths, CRC32), typed headers, a JSON payload and a CRC32.
https://docs.aws.amazon.com/AmazonS3/latest/API/RESTSelectObjectAppendix.html (the same encoding)"""

import json
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from routing import jsonsafe
from routing.sse import max_line_bytes, oversized_event

STRING = 7


@dataclass(frozen=True)
class StreamMessage:
    headers: dict[str, str]
    payload: dict[str, Any]

    @property
    def event_type(self) -> str:
        return self.headers.get(":event-type") or self.headers.get(":exception-type") or ""

    @property
    def is_exception(self) -> bool:
        return self.headers.get(":message-type") in ("exception", "error")


class FramingError(ValueError):
    pass


def _headers(raw: bytes) -> dict[str, str]:
    headers, offset = {}, 0
    try:
        while offset < len(raw):
            name_length = raw[offset]
            name = raw[offset + 1 : offset + 1 + name_length].decode()
            offset += 1 + name_length
            kind = raw[offset]
            offset += 1
            if kind != STRING:
                raise FramingError(f"unsupported header value type {kind}")
            (value_length,) = struct.unpack(">H", raw[offset : offset + 2])
            headers[name] = raw[offset + 2 : offset + 2 + value_length].decode()
            offset += 2 + value_length
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise FramingError("malformed event-stream headers") from exc
    return headers


def decode_event_stream(chunks: Iterable[bytes], *, limit: int | None = None) -> Iterator[StreamMessage]:
    """Messages as they complete. Linear in the bytes received (a message's bytes are consumed by offset, not
    by re-slicing the buffer), and a frame longer than UPSTREAM_MAX_LINE_BYTES fails the attempt as soon as
    its prelude announces it."""
    limit = limit or max_line_bytes()
    buffer = bytearray()
    start = 0
    for chunk in chunks:
        buffer += chunk
        while len(buffer) - start >= 12:
            total, header_length, prelude_crc = struct.unpack_from(">III", buffer, start)
            if zlib.crc32(buffer[start : start + 8]) != prelude_crc:
                raise FramingError("event-stream prelude checksum mismatch")
            if total > limit:
                raise oversized_event()
            if total < 16 or header_length > total - 16:
                raise FramingError("event-stream message lengths are inconsistent")
            if len(buffer) - start < total:
                break
            message = bytes(buffer[start : start + total])
            start += total
            (message_crc,) = struct.unpack(">I", message[-4:])
            if zlib.crc32(message[:-4]) != message_crc:
                raise FramingError("event-stream message checksum mismatch")
            headers = _headers(message[12 : 12 + header_length])
            body = message[12 + header_length : -4]
            yield StreamMessage(headers=headers, payload=jsonsafe.loads(body) if body else {})
        if start:
            del buffer[:start]
            start = 0


def encode_message(headers: dict[str, str], payload: dict[str, Any]) -> bytes:
    """One framed message (the stand-in provider speaks it; also handy in tests)."""
    raw_headers = b"".join(
        bytes([len(name)]) + name.encode() + bytes([STRING]) + struct.pack(">H", len(value.encode())) + value.encode()
        for name, value in headers.items()
    )
    body = json.dumps(payload, separators=(",", ":")).encode()
    total = 12 + len(raw_headers) + len(body) + 4
    prelude = struct.pack(">II", total, len(raw_headers))
    head = prelude + struct.pack(">I", zlib.crc32(prelude)) + raw_headers + body
    return head + struct.pack(">I", zlib.crc32(head))


def event(kind: str, payload: dict[str, Any]) -> bytes:
    return encode_message({":event-type": kind, ":content-type": "application/json", ":message-type": "event"}, payload)


def exception(kind: str, message: str) -> bytes:
    return encode_message(
        {":exception-type": kind, ":content-type": "application/json", ":message-type": "exception"},
        {"message": message},
    )
