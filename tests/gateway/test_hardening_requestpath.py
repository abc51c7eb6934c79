"""The request path on a live gunicorn (issue 9, items 6 and 14): slow request bodies cannot pin database
connections, protocol errors are answered in the JSON error body, chunked bodies are read."""

import json
import socket
import threading
import time
from decimal import Decimal

import pytest
import requests

from gateway.billing.provisioning import account_provision
from tests.support import Persona

pytestmark = pytest.mark.live

BODY_TIMEOUT = 2  # seconds, REQUEST_BODY_TIMEOUT_SECONDS of this module's gateway
BODY_LIMIT = 64 * 1024
POOL_SIZE = 2


@pytest.fixture(scope="module", params=["gevent", "gthread"])
def gateway(request, django_db_setup, django_db_blocker):
    """One worker (of each class gunicorn_conf offers) whose database pool has 2 connections, a short body
    deadline and a small body limit."""
    from tests.live import LiveGateway

    live = LiveGateway(
        workers=1,
        threads=16,
        extra_env={
            "GUNICORN_WORKER_CLASS": request.param,
            "DB_POOL_MAX_SIZE": str(POOL_SIZE),
            "REQUEST_BODY_TIMEOUT_SECONDS": str(BODY_TIMEOUT),
            "MAX_REQUEST_BODY_BYTES": str(BODY_LIMIT),
            "LOG_LEVEL": "ERROR",
        },
    )
    yield live
    live.stop()


@pytest.fixture
def fay(transactional_db, standin_catalog):
    return Persona(account_provision(name="fay", plan="payg", credits=Decimal("5")))


def raw_exchange(gateway, head: bytes, body: bytes = b"", timeout: float = 15) -> tuple[int, dict, bytes]:
    """Send bytes as they are and read the answer until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=timeout) as sock:
        sock.sendall(head + body)
        return read_response(sock)


def read_response(sock) -> tuple[int, dict, bytes]:
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = dechunk(body)
    return int(lines[0].split()[1]), headers, body


def dechunk(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out, data = out + data[:size], data[size + 2 :]
    return out


def assert_json_error(status: int, headers: dict, body: bytes, expected: int) -> dict:
    assert status == expected, body[:300]
    assert headers["content-type"].startswith("application/json"), headers
    error = json.loads(body)["error"]
    assert error["code"] == expected and error["message"]
    return error


def request_head(path: str, *lines: str, method: str = "POST") -> bytes:
    return (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "".join(f"{line}\r\n" for line in lines) + "\r\n"
    ).encode("latin-1")


# ---- item 6: slow bodies ------------------------------------------------------------------------------


def test_slow_bodies_do_not_pin_database_connections(gateway, fay):
    # Given more slow clients than the worker's pool has connections: authenticated headers announcing
    # 100 bytes of body, then 10 bytes and silence (and one that trickles a byte every 0.3 s)
    head = request_head(
        "/api/v1/responses",
        f"Authorization: Bearer {fay.api_key}",
        "Content-Type: application/json",
        "Content-Length: 100",
    )
    started = time.monotonic()  # before any byte is sent: no answer can come before started + BODY_TIMEOUT
    silent = []
    for _ in range(POOL_SIZE + 2):
        sock = socket.create_connection(("127.0.0.1", gateway.port), timeout=20)
        sock.sendall(head + b'{"model": ')
        silent.append(sock)
    trickler = socket.create_connection(("127.0.0.1", gateway.port), timeout=20)
    trickler.sendall(head)
    stop = threading.Event()
    trickled = []

    def trickle():
        for _ in range(100):  # 30 s if nobody stopped it
            if stop.wait(0.3):
                return
            try:
                trickler.sendall(b" ")
                trickled.append(1)
            except OSError:
                return

    threading.Thread(target=trickle, daemon=True).start()
    try:
        time.sleep(0.5)  # they are all waiting for their bodies now
        # When other clients make ordinary requests meanwhile, they are served (each needs the database)
        auth = {"Authorization": f"Bearer {fay.api_key}"}
        for _ in range(3):
            ok = requests.get(f"{gateway.api}/key", headers=auth, timeout=10)
            assert ok.status_code == 200, ok.text
        answer = requests.post(
            f"{gateway.api}/responses", json={"model": "standin/echo", "input": "Hi"}, headers=auth, timeout=10
        )
        assert answer.status_code == 200 and answer.json()["status"] == "completed"
        # Then each slow client gets 408 in the error body once the deadline has passed
        for sock in silent:
            error = assert_json_error(*read_response(sock), 408)
            assert "not received in time" in error["message"]
        assert time.monotonic() - started >= BODY_TIMEOUT
        # And the deadline is total: the trickling client is cut off long before its 100 bytes are in
        error = assert_json_error(*read_response(trickler), 408)
        assert len(trickled) < 60
    finally:
        stop.set()
        for sock in [*silent, trickler]:
            sock.close()
    # And the worker is healthy afterwards
    assert requests.get(f"{gateway.api}/key", headers=auth, timeout=10).status_code == 200


def test_body_over_the_limit_is_413_before_reading(gateway, fay):
    head = request_head(
        "/api/v1/responses",
        f"Authorization: Bearer {fay.api_key}",
        "Content-Type: application/json",
        f"Content-Length: {BODY_LIMIT + 1}",
        "Connection: close",
    )
    assert_json_error(*raw_exchange(gateway, head), 413)


# ---- item 14: protocol errors and chunked bodies ---------------------------------------------------------


PROTOCOL_ERRORS = [
    pytest.param(request_head("/api/v1/responses", "Content-Length: 12abc"), 400, id="bad-content-length"),
    pytest.param(request_head("/api/v1/responses", "Content-Length: -1"), 400, id="negative-content-length"),
    pytest.param(
        request_head("/api/v1/responses", "Content-Length: 5", "Content-Length: 6"), 400, id="two-content-lengths"
    ),
    pytest.param(
        request_head("/api/v1/responses", "Transfer-Encoding: chunked", "Content-Length: 5"), 400, id="te-and-cl"
    ),
    pytest.param(request_head("/api/v1/responses", "Transfer-Encoding: gzip, chunked"), 501, id="te-gzip"),
    pytest.param(request_head("/api/v1/responses", "Transfer-Encoding: br, chunked"), 501, id="te-unknown"),
    pytest.param(request_head("/api/v1/responses", "Transfer-Encoding: gzip"), 400, id="te-not-chunked"),
    pytest.param(request_head("/api/v1/models", "X-Note: a\x01b", method="GET"), 400, id="control-char-value"),
    pytest.param(request_head("/api/v1/models", "X-No\x7fte: a", method="GET"), 400, id="control-char-name"),
    pytest.param(request_head("/api/v1/models", "X-Big: " + "a" * 9000, method="GET"), 431, id="oversized-header"),
    pytest.param(
        request_head("/api/v1/models", *[f"X-H{i}: v" for i in range(120)], method="GET"), 431, id="too-many-headers"
    ),
    pytest.param(request_head("/api/v1/models?q=" + "a" * 9000, method="GET"), 414, id="oversized-url"),
    pytest.param(b"GET /api/v1/models HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400, id="obsolete-folding"),
    pytest.param(b"G\x01T / HTTP/1.1\r\n\r\n", 400, id="bad-method"),
]


@pytest.mark.parametrize(("head", "status"), PROTOCOL_ERRORS)
def test_protocol_errors_are_json(gateway, head, status):
    assert_json_error(*raw_exchange(gateway, head), status)


def test_protocol_error_never_echoes_the_header_line(gateway):
    secret = "sk-or-v1-" + "f" * 40
    head = request_head("/api/v1/models", f"Authorization: Bearer {secret}\x01", method="GET")
    status, headers, body = raw_exchange(gateway, head)
    assert_json_error(status, headers, body, 400)
    assert secret.encode() not in body
    assert secret not in (gateway_log(gateway))


def gateway_log(gateway) -> str:
    from tests.live import ROOT

    gateway.log.flush()
    return (ROOT / gateway.log.name).read_text()


def chunked(data: bytes, size: int = 7) -> bytes:
    return (
        b"".join(b"%x\r\n%s\r\n" % (len(data[i : i + size]), data[i : i + size]) for i in range(0, len(data), size))
        + b"0\r\n\r\n"
    )


def test_chunked_json_body_is_read(gateway, fay):
    body = json.dumps({"model": "standin/echo", "input": "Hello in chunks"}).encode()
    head = request_head(
        "/api/v1/responses",
        f"Authorization: Bearer {fay.api_key}",
        "Content-Type: application/json",
        "Transfer-Encoding: chunked",
        "Connection: close",
    )
    status, _, answer = raw_exchange(gateway, head, chunked(body))
    assert status == 200, answer[:300]
    result = json.loads(answer)
    assert result["status"] == "completed" and result["output"][0]["content"][0]["text"]


def test_chunked_body_over_the_limit_is_413(gateway, fay):
    body = json.dumps({"model": "standin/echo", "input": "x" * BODY_LIMIT}).encode()
    head = request_head(
        "/api/v1/responses",
        f"Authorization: Bearer {fay.api_key}",
        "Content-Type: application/json",
        "Transfer-Encoding: chunked",
        "Connection: close",
    )
    assert_json_error(*raw_exchange(gateway, head, chunked(body, 4096)), 413)


@pytest.mark.parametrize("bad", [b"zz\r\nabc\r\n0\r\n\r\n", b"3\r\nabcXY0\r\n\r\n"], ids=["size", "terminator"])
def test_malformed_chunked_body_is_400(gateway, fay, bad):
    head = request_head(
        "/api/v1/responses",
        f"Authorization: Bearer {fay.api_key}",
        "Content-Type: application/json",
        "Transfer-Encoding: chunked",
        "Connection: close",
    )
    error = assert_json_error(*raw_exchange(gateway, head, bad), 400)
    assert "chunked" in error["message"]


def test_slow_chunked_body_is_408(gateway, fay):
    head = request_head(
        "/api/v1/responses",
        f"Authorization: Bearer {fay.api_key}",
        "Content-Type: application/json",
        "Transfer-Encoding: chunked",
    )
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=20) as sock:
        sock.sendall(head + b'5\r\n{"mod')
        assert_json_error(*read_response(sock), 408)


@pytest.mark.parametrize("coding", ["gzip", "br", "deflate, gzip"])
def test_compressed_request_bodies_are_refused_not_parsed_as_json(gateway, fay, coding):
    # A body with a Content-Encoding would be parsed as plain JSON: it is refused with 415 instead
    import gzip

    body = gzip.compress(json.dumps({"model": "standin/echo", "input": "Hi"}).encode())
    answer = requests.post(
        f"{gateway.api}/responses",
        data=body,
        headers={
            "Authorization": f"Bearer {fay.api_key}",
            "Content-Type": "application/json",
            "Content-Encoding": coding,
        },
        timeout=10,
    )
    assert answer.status_code == 415 and answer.json()["error"]["code"] == 415
    assert "Content-Encoding" in answer.json()["error"]["message"]
