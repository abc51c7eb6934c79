"""Issue 9 item 7: hostile upstreams, scripted on a raw loopback socket. A 20 MB single SSE line, a body over
the size cap (declared, undeclared, or a gzip bomb), and servers that trickle bytes just under the read timeout
(in the head, the body or a stream) are all cut quickly: the attempt fails (retryable) and the next endpoint
serves, or the caller gets a 502/524. Small caps and deadlines keep every case fast."""

import functools
import gzip
import random
import socket
import struct
import threading
import time
import tracemalloc
import zlib

import pytest
from django.test import override_settings

from byok.credentials import ProviderCredentials
from gateway import deadlines
from gateway.billing.models import Generation
from routing import health, http
from routing.errors import UpstreamError
from routing.http import destinations
from routing.models import Provider
from routing.providers.bedrock.eventstream import decode_event_stream, event
from routing.selectors import endpoints_for_model
from routing.sse import MSG_OVERSIZED, decode_sse, iter_lines
from routing.upstream import build_upstream_request, call, open_stream
from tests.support import ask, assert_error_envelope, standin_endpoint

MiB = 1024 * 1024
CAP = 1 * MiB
FAST = http.Timeouts(connect=1, read=1, first_byte=1.5, total=1.5, stream_max=1.5)
# Without the deadlines a trickling script would hold the attempt this long (it then gives up on its own).
TRICKLE_SECONDS = 60
SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
JSON_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def giant_line(framing: str):
    piece = b"x" * 65536
    if framing == "chunked":  # one 20 MB HTTP chunk
        yield SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + f"{20 * MiB + 6:x}\r\n".encode() + b"data: "
    else:  # no length at all: the body ends when the connection closes
        yield SSE_HEAD + b"Connection: close\r\n\r\ndata: "
    for _ in range(20 * MiB // len(piece)):
        yield piece
    yield b"\r\n\r\n"


@functools.cache
def gzip_bomb() -> bytes:
    """64 MiB of JSON in ~64 KB."""
    return gzip.compress(b'{"choices": "' + b"0" * (64 * MiB) + b'"}', compresslevel=9)


def big_body(kind: str):
    if kind == "declared":
        yield JSON_HEAD + b"Content-Length: 200000000\r\n\r\n" + b'{"choices": "'
        for _ in range(50):
            yield b"x" * 65536
        return
    if kind == "gzip":
        bomb = gzip_bomb()
        yield JSON_HEAD + b"Content-Encoding: gzip\r\n" + f"Content-Length: {len(bomb)}\r\n\r\n".encode() + bomb
        return
    yield JSON_HEAD + b"Connection: close\r\n\r\n" + b'{"choices": "'
    for _ in range(50 * MiB // 65536):
        yield b"x" * 65536


def trickle(where: str):
    """One byte every 0.2 s, well under the 1 s read timeout."""
    if where == "head":
        yield b"HTTP/1.1 200 OK\r\nX-Slow: "
        drip = b"a"
    elif where == "body":
        yield JSON_HEAD + b"Content-Length: 100000\r\n\r\n"
        drip = b" "
    elif where == "stream-chunked":
        yield SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
        drip = _chunk(b":\n")
    else:  # stream-close: a close-delimited event stream
        yield SSE_HEAD + b"Connection: close\r\n\r\n"
        drip = b":\n"
    for _ in range(TRICKLE_SECONDS * 5):
        yield 0.2
        yield drip


SCRIPTS = {"giant-line": giant_line, "big-body": big_body, "trickle": trickle}


class HostileServer:
    """`/<script>/<arg>/v1/...` runs SCRIPTS[script](arg): bytes are written, numbers are pauses. Records how
    many bytes each request got out before the client hung up."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.sent: dict[str, int] = {}
        self.done = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket):
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1]
            length = next(
                (int(line.split(":", 1)[1]) for line in lines[1:] if line.lower().startswith("content-length:")), 0
            )
            while len(body) < length:
                body += conn.recv(65536)
            _, script, arg, *_ = path.split("/")
            sent = 0
            try:
                for piece in SCRIPTS[script](arg):
                    if isinstance(piece, float):
                        time.sleep(piece)
                    else:
                        conn.sendall(piece)
                        sent += len(piece)
            except OSError:
                pass  # the gateway hung up
            self.sent[path] = sent

    def close(self):
        self.listener.close()


@pytest.fixture
def hostile():
    server = HostileServer()
    yield server
    server.close()


def attempt(server, script: str, *, stream: bool, adapter: str = "openai_chat", timeouts=FAST):
    endpoint = standin_endpoint(server, adapter=adapter, base_url=f"{server.url}/{script}/v1")
    upstream = build_upstream_request(
        endpoint=endpoint, request=ask(stream=stream), credentials=ProviderCredentials(api_key="sk-hostile-test")
    )
    started = time.monotonic()
    with pytest.raises(UpstreamError) as caught:
        if stream:
            list(open_stream(endpoint=endpoint, upstream=upstream, timeouts=timeouts).events())
        else:
            call(endpoint=endpoint, upstream=upstream, timeouts=timeouts)
    return caught.value, time.monotonic() - started


# ---- size caps --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("framing", ["chunked", "close"])
@override_settings(UPSTREAM_MAX_LINE_BYTES=CAP)
def test_a_20_mb_sse_line_is_cut_at_the_cap(hostile, framing):
    error, elapsed = attempt(hostile, f"giant-line/{framing}", stream=True)
    assert error.retryable and error.message == MSG_OVERSIZED
    assert elapsed < 10  # generous: a cut, not a parse of 20 MB
    time.sleep(0.2)  # let the script notice the hang-up
    assert hostile.sent.get(f"/giant-line/{framing}/v1/chat/completions", 0) < 20 * MiB, "the rest was never read"


@pytest.mark.parametrize("kind", ["declared", "close", "gzip"])
@override_settings(UPSTREAM_MAX_RESPONSE_BYTES=CAP)
def test_a_body_over_the_cap_fails_the_attempt_without_reading_it_whole(hostile, kind):
    if kind == "gzip":
        gzip_bomb()  # compressed ahead, so the server answers at once
    tracemalloc.start()
    try:
        error, _ = attempt(hostile, f"big-body/{kind}", stream=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert error.retryable and error.message == "The provider sent an oversized response"
    assert peak < 24 * MiB, f"peak {peak / MiB:.1f} MiB for a {CAP / MiB:.0f} MiB cap"


@override_settings(UPSTREAM_MAX_LINE_BYTES=CAP, UPSTREAM_MAX_RESPONSE_BYTES=CAP)
def test_hostile_endpoint_falls_back_to_the_next_one_or_502(alice, multi, hostile):
    client = alice.client()
    for stream, script in ((False, "big-body/close"), (True, "giant-line/close")):
        for endpoint in endpoints_for_model(model_id="multi/model"):  # forget the previous round's failures
            health.health_reset(endpoint_id=endpoint.id)
        provider = Provider.objects.get(slug="alpha")
        provider.base_url = f"{hostile.url}/{script}/v1"
        provider.save()
        request = {"model": "multi/model", "input": "Hi", "stream": stream}
        response = client.post(
            "/api/v1/responses", {**request, "provider": {"order": ["alpha", "beta"]}}, format="json"
        )
        assert response.status_code == 200
        if stream:
            assert b"response.completed" in b"".join(response.streaming_content)
        generation = Generation.objects.get(pk=response["X-Generation-Id"])
        assert [(a["provider_name"], a["status"]) for a in generation.provider_responses] == [
            ("alpha", None),
            ("beta", 200),
        ]
        alone = client.post("/api/v1/responses", {**request, "provider": {"only": ["alpha"]}}, format="json")
        if stream:  # the stream had opened (200) before the oversized event: it fails in band
            raw = b"".join(alone.streaming_content)
            assert b"response.failed" in raw and b"response.completed" not in raw
        else:
            assert_error_envelope(alone, 502)


# ---- deadlines --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "where,stream", [("head", False), ("head", True), ("body", False), ("stream-chunked", True), ("stream-close", True)]
)
def test_a_trickling_upstream_is_cut_at_the_deadline(hostile, where, stream):
    error, elapsed = attempt(hostile, f"trickle/{where}", stream=stream)
    assert error.error_type == "timeout" and error.retryable
    # The deadline is 1.5 s (plus at most one read timeout); without it the trickle lasts 60 s.
    assert 1.4 <= elapsed < 6, elapsed


def test_deadlines_come_from_the_settings(hostile):
    with override_settings(UPSTREAM_TOTAL_TIMEOUT=1.0):
        error, elapsed = attempt(hostile, "trickle/body", stream=False, timeouts=http.Timeouts(connect=1, read=1))
    assert error.error_type == "timeout" and elapsed < 6


def test_the_watchdog_keeps_no_dead_entries_forever(standin):
    """Finished calls leave no live deadline behind, and kept-alive connections stay reusable."""

    before = deadlines.pending()
    endpoint = standin_endpoint(standin, adapter="openai_chat")
    for stream in (False, True, False, True):
        upstream = build_upstream_request(
            endpoint=endpoint, request=ask(stream=stream), credentials=ProviderCredentials(api_key="sk-standin-good")
        )
        if stream:
            assert list(open_stream(endpoint=endpoint, upstream=upstream).events())
        else:
            assert call(endpoint=endpoint, upstream=upstream).status == "completed"
    assert deadlines.pending() <= before


# ---- the parsers ------------------------------------------------------------------------------------------

SAMPLE = (
    b': comment\r\nevent: a\r\ndata: one\rdata: two\n\ndata: {"x": 1}\r\n\r\n'
    b"data: \xc3\xa9t\xc3\xa9\n\nevent: b\rdata:no-space\r\r: tail\ndata: last\n\n"
)


def test_sse_parsing_does_not_depend_on_how_the_stream_is_chunked():
    whole = [(e.event, e.data) for e in decode_sse([SAMPLE])]
    assert whole == [
        ("a", "one\ntwo"),
        ("message", '{"x": 1}'),
        ("message", "été"),
        ("b", "no-space"),
        ("message", "last"),
    ]
    rng = random.Random(7)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(SAMPLE)), rng.randint(1, 20)))
        pieces = [SAMPLE[a:b] for a, b in zip([0, *cuts], [*cuts, len(SAMPLE)], strict=True)]
        assert [(e.event, e.data) for e in decode_sse(pieces)] == whole
    assert [(e.event, e.data) for e in decode_sse([bytes([b]) for b in SAMPLE])] == whole


def test_line_and_event_caps():
    assert list(iter_lines([b"a" * 100 + b"\n"], limit=100)) == ["a" * 100]
    assert list(iter_lines([b"a" * 100 + b"\r", b"\n"], limit=100)) == ["a" * 100]
    for chunks in ([b"a" * 101 + b"\n"], [b"a" * 60, b"a" * 41, b"\n"], [b"a" * 99, b"aa\r"], [b"a" * 101 + b"\r\n"]):
        with pytest.raises(UpstreamError, match="oversized"):
            list(iter_lines(chunks, limit=100))
    many_lines = b"".join(b"data: " + b"y" * 30 + b"\n" for _ in range(10)) + b"\n"
    with pytest.raises(UpstreamError, match="oversized"):
        list(decode_sse([many_lines], limit=200))  # each line is small, the event is not

    consumed = []

    def endless_line():
        while True:
            consumed.append(1)
            yield b"z" * 16384

    with pytest.raises(UpstreamError, match="oversized"):
        list(iter_lines(endless_line(), limit=CAP))
    assert len(consumed) <= CAP // 16384 + 1, "stopped as soon as the line passed the cap"


def test_event_stream_frame_cap_and_bad_frames():
    messages = event("messageStart", {"role": "assistant"}) + event("messageStop", {"stopReason": "end_turn"})
    parsed = list(decode_event_stream([messages[i : i + 7] for i in range(0, len(messages), 7)]))
    assert [m.event_type for m in parsed] == ["messageStart", "messageStop"]
    prelude = struct.pack(">II", 100 * MiB, 0)
    announced = prelude + struct.pack(">I", zlib.crc32(prelude))
    consumed = []

    def frames():
        consumed.append(1)
        yield announced
        while True:
            consumed.append(1)
            yield b"\0" * 16384

    with override_settings(UPSTREAM_MAX_LINE_BYTES=CAP), pytest.raises(UpstreamError, match="oversized"):
        list(decode_event_stream(frames()))
    assert len(consumed) == 1, "refused as soon as the prelude announced it"
    for bad in (struct.pack(">II", 8, 0), struct.pack(">II", 40, 39)):  # shorter than a frame; headers too long
        with pytest.raises(ValueError):
            list(decode_event_stream([bad + struct.pack(">I", zlib.crc32(bad)) + b"\0" * 40]))
    broken_headers = bytearray(event("x", {}))
    broken_headers[12] = 200  # a header name longer than the headers
    body = bytes(broken_headers[:-4])
    with pytest.raises(ValueError):
        list(decode_event_stream([body + struct.pack(">I", zlib.crc32(body))]))


def test_json_caps_do_not_touch_normal_answers(standin):
    with override_settings(UPSTREAM_MAX_RESPONSE_BYTES=4096, UPSTREAM_MAX_LINE_BYTES=4096):
        endpoint = standin_endpoint(standin, adapter="openai_chat")
        upstream = build_upstream_request(
            endpoint=endpoint, request=ask(), credentials=ProviderCredentials(api_key="sk-standin-good")
        )
        assert call(endpoint=endpoint, upstream=upstream).status == "completed"


def test_a_flood_of_blank_lines_and_comments_is_capped():
    """Blank lines and comments dispatch nothing: without a cap, a compressed flood of them (a few hundred KB of
    gzip) kept a worker parsing for minutes."""
    consumed = []

    def flood(piece):
        while True:
            consumed.append(1)
            yield piece

    for piece in (b"\n" * 16384, b":\n" * 8192, b": keep-alive\r\n\r\n" * 1000):
        consumed.clear()
        with pytest.raises(UpstreamError, match="oversized"):
            list(decode_sse(flood(piece), limit=CAP))
        assert len(consumed) <= 2 * CAP // len(piece) + 2  # (a CRLF counts as one)
    # Keep-alive comments between real events never add up.
    normal = (b": ping\n\n" * 100 + b"data: {}\n\n") * 50
    assert len(list(decode_sse([normal], limit=2000))) == 50


def gzip_newlines(arg):
    bomb = _gzip_newlines()
    yield SSE_HEAD + b"Content-Encoding: gzip\r\nConnection: close\r\n\r\n" + bomb


@functools.cache
def _gzip_newlines() -> bytes:
    return gzip.compress(b": x\n" * (64 * MiB), compresslevel=9)  # 256 MiB of comments in ~250 KB


SCRIPTS["gzip-newlines"] = gzip_newlines


def test_a_compressed_stream_stops_at_its_deadline_even_when_already_received(hostile):
    """The watchdog shuts the socket down at the deadline, but a gzip body already received keeps decoding:
    the reader checks the deadline itself."""
    _gzip_newlines()
    with override_settings(UPSTREAM_MAX_LINE_BYTES=10 * 1024 * MiB):  # the idle cap out of the way
        error, elapsed = attempt(
            hostile,
            "gzip-newlines/x",
            stream=True,
            timeouts=http.Timeouts(connect=1, read=1, first_byte=1.5, total=1.5, stream_max=1.5),
        )
    assert error.error_type == "timeout"
    assert elapsed < 6, elapsed


# ---- JSON the standard parser lets through --------------------------------------------------------------

DEEP = b"[" * 100_000 + b"]" * 100_000


def json_answer(kind: str):
    bodies = {
        "deep-ok": (200, b'{"choices": ' + DEEP + b"}"),
        "deep-error": (400, b'{"error": ' + DEEP + b"}"),
        "surrogate-ok": (
            200,
            b'{"id": "c1", "choices": [{"index": 0, "message": {"role": "assistant", '
            b'"content": "a\\ud800b\\udfff"}, "finish_reason": "stop"}], '
            b'"usage": {"prompt_tokens": 5, "completion_tokens": 3}}',
        ),
        "surrogate-error": (400, b'{"error": {"message": "bad \\udc00 thing", "code": "x\\ud800"}}'),
        "surrogate-stream": (
            200,
            b'data: {"id": "c1", "choices": [{"index": 0, "delta": {"content": "a\\ud800b"}}]}'
            b'\n\ndata: {"id": "c1", "choices": [{"index": 0, "delta": {}, '
            b'"finish_reason": "stop"}]}\n\ndata: [DONE]\n\n',
        ),
        "deep-stream": (200, b"data: " + DEEP + b"\n\n"),
    }
    status, body = bodies[kind]
    kind_header = b"text/event-stream" if kind.endswith("stream") else b"application/json"
    yield (
        f"HTTP/1.1 {status} X\r\nContent-Type: ".encode()
        + kind_header
        + f"\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )


SCRIPTS["json"] = json_answer


@pytest.mark.parametrize(
    "kind,stream",
    [
        ("deep-ok", False),
        ("deep-error", False),
        ("deep-error", True),
        ("deep-stream", True),
        ("surrogate-error", False),
    ],
)
def test_deep_or_invalid_unicode_upstream_json_is_an_attempt_failure(hostile, kind, stream):
    """JSON nested past the recursion limit was a RecursionError (500); an escaped lone surrogate in an error
    message was rendered into the client's error body (UnicodeEncodeError, 500)."""
    error, _ = attempt(hostile, f"json/{kind}", stream=stream)
    error.message.encode("utf-8")
    str(error.provider_code or "").encode("utf-8")
    if kind == "surrogate-error":
        assert error.status == 400 and error.message == "bad \ufffd thing" and error.provider_code == "x\ufffd"
    elif kind == "deep-error":
        assert error.status == 400 and error.message == "Provider returned error"
    else:
        assert error.retryable


@pytest.mark.parametrize("stream", [False, True])
def test_lone_surrogates_in_upstream_text_become_replacement_characters(hostile, stream):
    endpoint = standin_endpoint(
        hostile, adapter="openai_chat", base_url=f"{hostile.url}/json/surrogate-{'stream' if stream else 'ok'}/v1"
    )
    upstream = build_upstream_request(
        endpoint=endpoint, request=ask(stream=stream), credentials=ProviderCredentials(api_key="sk-hostile-test")
    )
    if stream:
        text = "".join(
            getattr(event, "text", "") for event in open_stream(endpoint=endpoint, upstream=upstream).events()
        )
    else:
        text = call(endpoint=endpoint, upstream=upstream).output[0].text
    assert text == ("a\ufffdb" if stream else "a\ufffdb\ufffd")


def test_jsonsafe_keeps_valid_text_and_pairs():
    from routing import jsonsafe

    assert jsonsafe.loads(b'{"a": "\\ud83d\\ude00 \\u00e9", "\\ud800k": ["\\udc00"]}') == {
        "a": "\U0001f600 \u00e9",
        "\ufffdk": ["\ufffd"],
    }
    assert jsonsafe.loads('"\\\\ud800"') == "\\ud800"  # an escaped backslash, not a surrogate
    assert jsonsafe.loads(b'{"a": "\xff"}') == {"a": "\ufffd"}  # invalid UTF-8, as requests decoded it
    with pytest.raises(ValueError):
        jsonsafe.loads(DEEP)


def test_every_checked_address_of_a_host_is_tried(monkeypatch):
    """Only the first resolved address was tried: a host whose first address is down (or an AAAA record on a host
    without IPv6 routing) failed every call although its other address answered."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    dead = socket.create_server(("127.0.0.2", port))  # the same port on another address, closed: refused
    dead.close()

    real_getaddrinfo = socket.getaddrinfo

    def resolve(host, port_, *args, **kwargs):
        if host != "two-addresses.test":
            return real_getaddrinfo(host, port_, *args, **kwargs)
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.2", port_)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port_)),
        ]

    monkeypatch.setattr(destinations, "is_public_address", lambda address: True)
    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    destinations.forget_resolved()
    answered = threading.Thread(target=answer_once, args=(listener,), daemon=True)
    answered.start()
    try:
        response = http.request("GET", f"http://two-addresses.test:{port}/x", headers={}, allow_private=False)
        assert (response.status_code, response.content) == (200, b"ok")
    finally:
        destinations.forget_resolved()
        listener.close()


def answer_once(listener: socket.socket) -> None:
    conn, _ = listener.accept()
    with conn:
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")


# ---- a stream that never ends ---------------------------------------------------------------------------


def endless_text(arg):
    """Valid content deltas, small and many, without end (20 MiB of them)."""
    yield SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
    delta = b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"' + b"x" * 400 + b'"}}]}\n\n'
    batch = _chunk(delta * 100)
    for _ in range(20 * MiB // len(batch)):
        yield batch


SCRIPTS["endless-text"] = endless_text


@override_settings(UPSTREAM_MAX_STREAM_BYTES=CAP)
def test_a_stream_that_never_ends_is_cut_at_the_whole_stream_cap(hostile):
    """Each event was small enough; their sum was not bounded: the folded answer grew the worker's memory for as
    long as the upstream kept sending."""
    tracemalloc.start()
    try:
        error, elapsed = attempt(hostile, "endless-text/x", stream=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert error.retryable and error.message == "The provider sent an oversized response"
    assert peak < 12 * MiB, f"peak {peak / MiB:.1f} MiB for a {CAP / MiB:.0f} MiB cap"
    time.sleep(0.2)
    assert hostile.sent.get("/endless-text/x/v1/chat/completions", 0) < 20 * MiB, "the rest was never read"
