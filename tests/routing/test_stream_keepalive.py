"""A finished upstream stream gives its connection back to the pool: the adapter stops at its last event
(`[DONE]`), and the chunked body's closing chunk that follows is read when it is there at once, so the next call
to that upstream reuses the connection instead of opening a new one (each stream used to cost a connect and a
shutdown). An upstream that holds its closing chunk back, or keeps sending after the end, costs at most
http.FINISH_SECONDS / FINISH_BYTES, and its connection is shut down as before."""

import socket
import time

import pytest

from byok.credentials import ProviderCredentials
from routing import http
from routing.upstream import build_upstream_request, open_stream
from tests.support import SSE_HEAD, LoopbackServer, ask, requests_on, standin_endpoint

EVENTS = (
    b'data: {"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n',
    b'data: {"id":"c1","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
    b"data: [DONE]\n\n",
)


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


class KeepAliveServer(LoopbackServer):
    """Serves SSE answers, many per connection (HTTP/1.1 keep-alive); counts the connections it accepted.
    `ending` is what follows [DONE]: "at-once" (the closing chunk), "held" (the closing chunk 2 s later), or
    "more" (another 64 KB of chunks, then the closing chunk)."""

    def __init__(self, ending: str):
        self.ending = ending
        super().__init__()

    def serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                for _ in requests_on(conn):
                    conn.sendall(SSE_HEAD + b"".join(_chunk(event) for event in EVENTS))
                    if self.ending == "held":
                        time.sleep(2)
                    elif self.ending == "more":
                        conn.sendall(_chunk(b": " + b"x" * 8190 + b"\n\n") * 8)
                    conn.sendall(b"0\r\n\r\n")
            except OSError:
                return  # the gateway shut the connection down


@pytest.fixture
def server(request):
    served = KeepAliveServer(request.param)
    yield served
    served.close()


def stream_once(server: KeepAliveServer) -> tuple[str, float]:
    endpoint = standin_endpoint(server, adapter="openai_chat", base_url=f"{server.url}/v1")
    upstream = build_upstream_request(
        endpoint=endpoint, request=ask(stream=True), credentials=ProviderCredentials(api_key="sk-keepalive-test")
    )
    started = time.monotonic()
    events = list(open_stream(endpoint=endpoint, upstream=upstream).events())
    text = "".join(getattr(event, "text", "") for event in events)
    return text, time.monotonic() - started


@pytest.mark.parametrize("server", ["at-once"], indirect=True)
def test_streams_in_a_row_share_one_connection(server):
    for _ in range(3):
        assert stream_once(server)[0] == "Hi"
    assert server.accepted == 1


@pytest.mark.parametrize("server", ["held", "more"], indirect=True)
def test_an_end_that_is_not_there_at_once_is_not_waited_for(server):
    text, took = stream_once(server)
    assert text == "Hi" and took < 1.0  # not the 2 s the closing chunk is held back
    assert stream_once(server)[0] == "Hi"
    assert server.accepted == 2  # the first connection was shut down, not reused mid-body
    assert http.FINISH_SECONDS < 1.0 and http.FINISH_BYTES < 64 * 1024
