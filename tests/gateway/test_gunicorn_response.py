"""Issue 11: gunicorn's workers send a response's head in the same send as its first body bytes
(gateway/gunicorn_worker.py OneSendResponse). The bytes on the wire must be exactly gunicorn's own, whatever the
response: a JSON body, a chunked stream, HEAD, an empty body, a failing socket."""

import pytest
from gunicorn import util
from gunicorn.config import Config
from gunicorn.http import wsgi
from gunicorn.http.wsgi import Response

from gateway import gunicorn_worker
from gateway.gunicorn_worker import OneSendResponse


class Recorder:
    def __init__(self, fail: bool = False):
        self.sends: list[bytes] = []
        self.fail = fail

    def sendall(self, data: bytes) -> None:
        if self.fail:
            raise BrokenPipeError("the client went away")
        self.sends.append(bytes(data))


class Request:
    def __init__(self, method: str = "POST", version: tuple[int, int] = (1, 1)):
        self.method = method
        self.version = version

    def should_close(self) -> bool:
        return False


JSON = [("Content-Type", "application/json"), ("Content-Length", "11")]
STREAM = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]


def serve(response_class, *, method="POST", status="200 OK", headers=JSON, body=(b'{"a": true}',), fail=False):
    sock = Recorder(fail=fail)
    response = response_class(Request(method), sock, Config())
    response.start_response(status, list(headers))
    for chunk in body:
        response.write(chunk)
    response.close()
    return sock.sends, response


@pytest.fixture(autouse=True)
def fixed_date(monkeypatch):
    monkeypatch.setattr(util, "http_date", lambda *args: "Thu, 26 Nov 2026 21:00:00 GMT")


CASES = {
    "json": {},
    "stream": {"headers": STREAM, "body": (b"data: 1\n\n", b"data: 2\n\n", b"data: [DONE]\n\n")},
    "head": {"method": "HEAD"},
    "empty": {"headers": [("Content-Length", "0")], "body": (b"",)},
    "no-content": {"status": "204 No Content", "headers": [], "body": ()},
    "json-in-pieces": {"body": (b'{"a": ', b"true}")},
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_the_bytes_sent_are_gunicorns_own(case):
    joined, _ = serve(OneSendResponse, **case)
    plain, _ = serve(Response, **case)
    assert b"".join(joined) == b"".join(plain)
    # And the head goes with the first body bytes: one send fewer whenever there are body bytes
    assert len(joined) == (len(plain) - 1 if any(case.get("body", (b"x",))) and case.get("method") != "HEAD" else 1)


def test_a_json_answer_is_one_send():
    sends, response = serve(OneSendResponse)
    assert len(sends) == 1 and sends[0].startswith(b"HTTP/1.1 200 OK\r\n") and sends[0].endswith(b'\r\n\r\n{"a": true}')
    assert response.headers_sent and response.sent == 11


def test_a_streams_first_event_goes_with_the_head_and_the_rest_as_they_come():
    sends, _ = serve(OneSendResponse, **CASES["stream"])
    assert sends[0].startswith(b"HTTP/1.1 200 OK\r\n") and sends[0].endswith(b"\r\n\r\n9\r\ndata: 1\n\n\r\n")
    assert sends[1:] == [b"9\r\ndata: 2\n\n\r\n", b"E\r\ndata: [DONE]\n\n\r\n", b"0\r\n\r\n"]


def test_a_failing_socket_raises_and_the_response_keeps_its_socket():
    sock = Recorder(fail=True)
    response = OneSendResponse(Request(), sock, Config())
    response.start_response("200 OK", JSON)
    with pytest.raises(BrokenPipeError):
        response.write(b'{"a": true}')
    assert response.sock is sock  # not the stand-in: gunicorn closes (and logs) the real socket


def test_a_worker_builds_its_responses_with_it(monkeypatch):
    monkeypatch.setattr(wsgi, "Response", Response)

    class Loop:
        def run(self):
            self.built = wsgi.Response

    class Worker(gunicorn_worker.JsonErrors, Loop):
        pass

    worker = Worker()
    worker.run()
    assert worker.built is OneSendResponse


def test_a_large_first_chunk_is_sent_after_the_head_not_copied_to_join_it():
    body = b"x" * (gunicorn_worker.JOINED_BODY_MAX + 1)
    case = {"headers": [("Content-Length", str(len(body)))], "body": (body,)}
    joined, _ = serve(OneSendResponse, **case)
    plain, _ = serve(Response, **case)
    assert joined == plain and len(joined) == 2  # head, then the body: as gunicorn sends them
