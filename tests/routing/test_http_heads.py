"""Issue 11: response heads are parsed without the email package when every line is a plain `Name: value`, and a
pooled connection's liveness is asked with one poll system call. The message must be the standard parser's own,
whatever the head, and a connection the peer closed must not be reused."""

import email.parser
import http.client
import io
import socket
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routing import http as outbound
from tests.routing.test_http_fastpath import ANSWER, CountingServer


def standard(head: bytes) -> http.client.HTTPMessage:
    lines = http.client._read_headers(io.BytesIO(head))  # type: ignore[attr-defined]
    return email.parser.Parser(_class=http.client.HTTPMessage).parsestr(b"".join(lines).decode("iso-8859-1"))


def comparable(message) -> dict:
    found = dict(vars(message))
    found["defects"] = [type(defect).__name__ for defect in found["defects"]]  # defects compare by identity
    return found


HEADS = [
    b"Content-Type: application/json\r\nContent-Length: 12\r\nX-Pad:  b \t\r\n\r\n",
    b"A:\r\n\r\n",
    b"A:b\n\n",
    b"A: b\r\nB: c\r\n folded\r\n\r\n",  # a folded line: the standard parser's business
    b"Bad Header: x\r\n\r\n",  # a space in the name: not a field for the parser
    b"From someone\r\nA: b\r\n\r\n",
    b"A: \xe9\xff\r\n\r\n",
    b"\r\n",
    b"A: b\rc\r\n\r\n",
    b"A: b\x0bc\x0c\x1c\x85\x00d\r\n\r\n",
    b"Set-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n",
    b"A: b\x1dc\r\nB: \x1e\r\n\r\n",
    b"A: b\r\nB: c\r\n",  # the connection ended before the blank line
    b"A: b\r\nB: c",
]


@pytest.mark.parametrize("head", HEADS)
def test_a_head_parses_to_the_standard_parsers_message(head):
    assert comparable(http.client.parse_headers(io.BytesIO(head))) == comparable(standard(head))


def test_a_plain_head_is_read_without_the_email_parser(monkeypatch):
    """The fast path is taken for what upstreams send (a head's last line, the blank one, included)."""

    def refused(*args, **kwargs):
        raise AssertionError("the email parser read a plain head")

    monkeypatch.setattr(email.parser, "Parser", refused)
    head = b"content-type: application/json\r\ncontent-length: 661\r\nDate: Thu, 26 Nov 2026 21:00:00 GMT\r\n\r\n"
    message = http.client.parse_headers(io.BytesIO(head))
    assert message.items() == [
        ("content-type", "application/json"),
        ("content-length", "661"),
        ("Date", "Thu, 26 Nov 2026 21:00:00 GMT"),
    ]
    assert message["Content-Length"] == "661"
    with pytest.raises(AssertionError, match="email parser"):  # a folded line is the parser's
        http.client.parse_headers(io.BytesIO(b"A: b\r\n c\r\n\r\n"))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.binary(max_size=24).filter(lambda b: b"\n" not in b), max_size=6), st.sampled_from([b"\r\n", b"\n"]))
def test_any_head_parses_to_the_standard_parsers_message(lines, ending):
    head = b"".join(line + ending for line in lines) + ending
    assert comparable(http.client.parse_headers(io.BytesIO(head))) == comparable(standard(head))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.from_regex(rb"\A[!-9;-~]{1,12}\Z"),
            st.binary(max_size=20).filter(lambda b: b"\r" not in b and b"\n" not in b),
        ),
        max_size=6,
    )
)
def test_plain_fields_parse_to_the_standard_parsers_message(fields):
    head = b"".join(name + b": " + value + b"\r\n" for name, value in fields) + b"\r\n"
    assert comparable(http.client.parse_headers(io.BytesIO(head))) == comparable(standard(head))


class ClosingServer(CountingServer):
    """Answers one request per connection, then closes it without saying so (no `Connection: close`)."""

    def serve(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%b" % (len(ANSWER), ANSWER))
            self.requests.append((b"", b""))
            time.sleep(0.05)


def test_a_connection_the_peer_closed_is_not_reused():
    server = ClosingServer()
    try:
        url = f"http://127.0.0.1:{server.port}/v1/x"
        for _ in range(3):
            response = outbound.request("POST", url, headers={}, json_body={"n": 1}, allow_private=True)
            assert (response.status_code, response.content) == (200, ANSWER)
            time.sleep(0.2)  # the server has closed its end by now
        assert len(server.requests) == 3  # each call on a new connection, none failed on a dead one
    finally:
        server.close()


def test_a_live_pooled_connection_is_reused():
    server = CountingServer()
    try:
        url = f"http://127.0.0.1:{server.port}/v1/x"
        for _ in range(3):
            assert outbound.request("POST", url, headers={}, json_body={"n": 1}, allow_private=True).content == ANSWER
        assert len(server.requests) == 3 and server.accepted == 1
    finally:
        server.close()
