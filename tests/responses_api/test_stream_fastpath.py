"""The streamed relay's fast path (issue 11): the upstream's chunked body is undone by urllib3 (routing.http), every
SSE event a read brought is decoded at once, and the Responses events of what arrived together go out as one
write. What that batching could break is pinned here: order, the end of the stream, a failure after content in
the same read, a client that leaves mid-stream, and the chunked framing itself (split anywhere, extensions,
trailers, cut bodies, the byte cap, the connection kept for the next call)."""

import json
import socket
import threading
import time
from decimal import Decimal

import pytest

from gateway.billing.models import Generation
from gateway.billing.provisioning import account_provision
from routing import http
from routing.sse import decode_sse
from tests.support import SSE_HEAD, LoopbackServer, Persona, point_provider, requests_on, sse_events

pytestmark = pytest.mark.django_db(transaction=True)

WORDS = [f"w{n} " for n in range(12)]


def chat_event(payload: dict) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def content_events(words=WORDS) -> bytes:
    return b"".join(
        chat_event({"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"content": word}}]}) for word in words
    )


FINISH = chat_event({"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
USAGE = chat_event({"id": "c1", "model": "m", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 12}})
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
ERROR = chat_event({"error": {"message": "the model fell over", "code": "boom"}})


def chunk(data: bytes, extension: bytes = b"") -> bytes:
    return f"{len(data):x}".encode() + extension + b"\r\n" + data + b"\r\n"


class OneReadUpstream(LoopbackServer):
    """Answers every request with `pieces` (each sent whole, `pause` seconds apart) after a chunked 200 head;
    counts connections, and notes when a connection was closed by the gateway."""

    def __init__(self, pieces: list[bytes], *, pause: float = 0.0, hold: float = 0.0):
        self.pieces, self.pause, self.hold = pieces, pause, hold
        self.closed_by_peer = threading.Event()
        super().__init__()

    def serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                for _ in requests_on(conn):
                    conn.sendall(SSE_HEAD)
                    for piece in self.pieces:
                        conn.sendall(piece)
                        time.sleep(self.pause)
                    if self.hold:
                        conn.settimeout(self.hold)
                        try:
                            if conn.recv(1) == b"":
                                self.closed_by_peer.set()
                        except TimeoutError:
                            pass
                        return
            except OSError:
                self.closed_by_peer.set()


@pytest.fixture
def dora(standin_catalog):
    return Persona(account_provision(name="dora", plan="payg", credits=Decimal("10")))


class Refused:
    """A loopback address nothing listens on: the other stand-in endpoints fail at once (so only ours answers)."""

    def __init__(self) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"


def stream_from(upstream: OneReadUpstream, dora: Persona):
    point_provider("standin-chat", upstream)
    for other in ("standin-responses", "standin-anthropic"):
        point_provider(other, Refused())
    return dora.client().post(
        "/api/v1/responses", {"model": "standin/echo", "input": "Hello", "stream": True}, format="json"
    )


def test_events_that_arrive_in_one_read_are_relayed_in_order_as_fewer_writes(dora):
    upstream = OneReadUpstream([chunk(content_events() + FINISH + USAGE + b"data: [DONE]\n\n") + b"0\r\n\r\n"])
    try:
        response = stream_from(upstream, dora)
        assert response.status_code == 200
        writes = list(response.streaming_content)
    finally:
        upstream.close()
    response.streaming_content = iter(writes)
    events, raw = sse_events(response)
    deltas = [event["delta"] for event in events if event["type"] == "response.output_text.delta"]
    assert deltas == WORDS
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    assert events[-1]["type"] == "response.completed"
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "".join(WORDS)
    assert events[-1]["response"]["usage"]["output_tokens"] == 12
    assert raw.endswith(b"data: [DONE]\n\n")
    with_deltas = [write for write in writes if b"response.output_text.delta" in write]
    assert len(with_deltas) < len(WORDS) // 2
    # the first event of the read goes alone, so a client that left is noticed at the write after it
    counts = [write.count(b"event: response.output_text.delta\n") for write in with_deltas]
    assert counts[:2] == [1, 1] and max(counts) > 1


def test_each_event_that_arrives_alone_is_its_own_write(dora):
    pieces = [chunk(event + b"\n\n") for event in content_events(WORDS[:4]).split(b"\n\n")[:-1]]
    upstream = OneReadUpstream([*pieces, chunk(FINISH + USAGE + b"data: [DONE]\n\n"), b"0\r\n\r\n"], pause=0.05)
    try:
        writes = list(stream_from(upstream, dora).streaming_content)
    finally:
        upstream.close()
    with_deltas = [write for write in writes if b"response.output_text.delta" in write]
    assert len(with_deltas) >= 3  # not held back to be joined with later events (the first may ride along)
    assert b"".join(writes).count(b"event: response.output_text.delta\n") == 4


def test_a_failure_after_content_in_the_same_read_fails_in_band_after_that_content(dora):
    upstream = OneReadUpstream([chunk(content_events(WORDS[:3]) + ERROR) + b"0\r\n\r\n"])
    try:
        response = stream_from(upstream, dora)
        events, raw = sse_events(response)
    finally:
        upstream.close()
    kinds = [event["type"] for event in events]
    assert [event["delta"] for event in events if event["type"] == "response.output_text.delta"] == WORDS[:3]
    assert kinds.index("error") > kinds.index("response.output_text.done")  # what was sent is closed first
    assert kinds[-1] == "response.failed"
    assert raw.endswith(b"data: [DONE]\n\n")


def test_a_client_that_leaves_after_a_batch_cancels_the_upstream_and_is_billed(dora):
    # Given an upstream that sends a burst of content at once, then holds the stream open
    upstream = OneReadUpstream([chunk(content_events())], hold=5)
    try:
        response = stream_from(upstream, dora)
        generation_id = response["X-Generation-Id"]
        body = iter(response.streaming_content)
        seen = b""
        while b"response.output_text.delta" not in seen:
            seen += next(body)
        # When the client leaves
        response.close()
        # Then the upstream connection is closed at once, and what was generated is billed as cancelled
        assert upstream.closed_by_peer.wait(3)
    finally:
        upstream.close()
    record = Generation.objects.get(pk=generation_id)
    assert record.cancelled and record.status == "cancelled"
    assert record.tokens_output > 0


# ---- the chunked framing and the SSE decoder ----------------------------------------------------------------


def read_body(upstream: OneReadUpstream, *, limit: int | None = None) -> list[bytes]:
    response = http.request("POST", f"{upstream.url}/v1/x", headers={}, json_body={}, stream=True, allow_private=True)
    try:
        return list(http.iter_body(response, limit=limit))
    finally:
        http.close(response)


BODY = chunk(b"data: one\n\n", b";name=value") + chunk(b"data: two\n\n") + b"0\r\nTrailer: x\r\n\r\n"


@pytest.mark.parametrize("split", [1, 2, 3, 5, 7, 11])
def test_a_chunked_body_is_read_whole_however_it_is_split(split):
    pieces = [BODY[i : i + split] for i in range(0, len(BODY), split)]
    upstream = OneReadUpstream(pieces, pause=0.001)
    try:
        data = read_body(upstream)
        assert b"".join(data) == b"data: one\n\ndata: two\n\n"
        assert b"".join(read_body(upstream)) == b"data: one\n\ndata: two\n\n"  # a second call, same connection
        assert upstream.accepted == 1, "the connection went back to the pool"
    finally:
        upstream.close()


def test_a_body_that_ends_after_its_last_chunk_without_the_trailer_end_is_complete():
    upstream = OneReadUpstream([chunk(b"data: x\n\n") + b"0\r\n"], hold=0.01)
    try:
        assert b"".join(read_body(upstream)) == b"data: x\n\n"
    finally:
        upstream.close()


@pytest.mark.parametrize(
    "body",
    [
        chunk(b"data: x\n\n")[:-4],  # cut inside a chunk
        chunk(b"data: x\n\n"),  # cut before the last chunk
        b"zz\r\ndata\r\n0\r\n\r\n",  # a size that is not hex
        b"-5\r\nabc\r\n0\r\n\r\n",  # a negative size
        b"1" * (2**16 + 10),  # a size line without end (longer than urllib3 reads one)
    ],
)
def test_a_broken_chunked_body_is_a_broken_connection(body):
    upstream = OneReadUpstream([body], hold=0.01)
    try:
        with pytest.raises(http.ConnectionReset):
            read_body(upstream)
    finally:
        upstream.close()


def test_a_stream_over_its_byte_cap_fails():
    upstream = OneReadUpstream([chunk(b"a" * 600) + chunk(b"b" * 600) + b"0\r\n\r\n"])
    try:
        with pytest.raises(http.ResponseTooLarge):
            read_body(upstream, limit=1000)
        assert b"".join(read_body(upstream, limit=1200)) == b"a" * 600 + b"b" * 600
    finally:
        upstream.close()


def test_the_decoder_tells_whether_events_already_received_wait():
    received = iter([b"data: 1\n\ndata: 2\n\ndata: 3", b"\n\n"])
    decoder = decode_sse(received)
    assert not decoder.pending
    assert next(decoder).data == "1"
    assert decoder.pending
    assert next(decoder).data == "2"
    assert not decoder.pending, "the third event is not complete yet: the next one needs a read"
    assert next(decoder).data == "3"
    assert list(decoder) == []
