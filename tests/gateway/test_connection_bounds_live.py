"""One connection cannot hold a worker for as many requests as it likes (issue 28, item 2): gunicorn closes a
connection after GUNICORN_MAX_REQUESTS_PER_CONNECTION requests, whether they were pipelined or sent one by one
(gateway/gunicorn_conf.py pre_request)."""

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 5  # GUNICORN_MAX_REQUESTS_PER_CONNECTION of this module's gateway


@pytest.fixture(scope="module", params=["gevent", "gthread"])
def gateway(request, django_db_setup, django_db_blocker):
    """One worker of each class gunicorn_conf offers, closing connections after LIMIT requests."""
    from tests.live import LiveGateway

    live = LiveGateway(
        workers=1,
        threads=4,
        extra_env={"GUNICORN_WORKER_CLASS": request.param, "GUNICORN_MAX_REQUESTS_PER_CONNECTION": str(LIMIT)},
    )
    yield live
    live.stop()


def get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()


def read_until_closed(sock: socket.socket) -> tuple[bytes, bool]:
    """What the server sent, and whether it closed the connection (False: it was still open after the timeout)."""
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return data, False
        except ConnectionResetError:
            return data, True
        if not chunk:
            return data, True
        data += chunk


def connection_headers(data: bytes) -> list[str]:
    """The Connection header of each answer, in order."""
    return re.findall(r"(?im)^connection: *([a-z-]+)\r$", data.decode("latin-1"))


def test_a_connection_pipelining_many_requests_is_answered_up_to_the_limit_then_closed(gateway):
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=15) as sock:
        # Given a client that pipelines four times the limit in one write
        sock.sendall(get("/healthz") * (LIMIT * 4))
        # Then it gets LIMIT answers, the last one saying the connection closes, and the connection is closed
        data, closed = read_until_closed(sock)
    assert data.count(b"HTTP/1.1 200 ") == LIMIT
    assert connection_headers(data) == ["keep-alive"] * (LIMIT - 1) + ["close"]
    assert closed

    # And a new connection is served again
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=15) as sock:
        sock.sendall(get("/healthz"))
        first = sock.recv(65536)
    assert first.startswith(b"HTTP/1.1 200 ")


def test_requests_sent_one_by_one_on_a_kept_alive_connection_are_bounded_too(gateway):
    answers = []
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=15) as sock:
        for _ in range(LIMIT):
            sock.sendall(get("/api/v1/openapi.json"))
            head = b""
            while b"\r\n\r\n" not in head:
                head += sock.recv(1)
            answers.append(head)
            length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
            body = b""
            while len(body) < length:
                body += sock.recv(length - len(body))
        rest, closed = read_until_closed(sock)
    assert all(answer.startswith(b"HTTP/1.1 200 ") for answer in answers)
    assert connection_headers(b"".join(answers)) == ["keep-alive"] * (LIMIT - 1) + ["close"]
    assert rest == b"" and closed


def check_config(limit: str) -> subprocess.CompletedProcess:
    """gunicorn reading the gateway's configuration with this GUNICORN_MAX_REQUESTS_PER_CONNECTION, as it starts
    (with the standard library's demo application in place of the gateway's: the configuration is what is checked)."""
    gunicorn = [sys.executable, "-m", "gunicorn", "-c", "python:gateway.gunicorn_conf", "--check-config"]
    command = [*gunicorn, "wsgiref.simple_server:demo_app"]
    env = {**os.environ, "GUNICORN_MAX_REQUESTS_PER_CONNECTION": limit}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("limit", ["-1", "-100", "many"])
def test_a_limit_that_is_not_a_count_is_refused_at_start(limit):
    # A negative limit would close every connection after its first request: gunicorn refuses to start, saying why.
    result = check_config(limit)
    assert result.returncode != 0
    assert "GUNICORN_MAX_REQUESTS_PER_CONNECTION" in result.stderr + result.stdout


@pytest.mark.parametrize("limit", ["0", "100", " 7 "])
def test_a_count_or_zero_for_no_limit_is_accepted(limit):
    result = check_config(limit)
    assert result.returncode == 0, result.stderr
