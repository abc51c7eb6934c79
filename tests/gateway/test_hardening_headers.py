"""Slowly sent request heads cannot hold the server's threads (issue 9, item 6's sibling): gunicorn reads the
request line and headers with no deadline of its own; the gateway's worker gives them a total one."""

import socket
import threading
import time

import pytest
import requests

pytestmark = pytest.mark.live

HEADER_TIMEOUT = 1.5  # seconds, REQUEST_HEADER_TIMEOUT_SECONDS of this module's gateway
THREADS = 4


@pytest.fixture(scope="module", params=["gevent", "gthread"])
def gateway(request, django_db_setup, django_db_blocker):
    """One worker of each class gunicorn_conf offers: gthread with only 4 threads, so that 6 dripping clients
    would take all of them; gevent (a greenlet per connection) must cut them off just the same."""
    from tests.live import LiveGateway

    live = LiveGateway(
        workers=1,
        threads=THREADS,
        extra_env={
            "GUNICORN_WORKER_CLASS": request.param,
            "REQUEST_HEADER_TIMEOUT_SECONDS": str(HEADER_TIMEOUT),
            "LOG_LEVEL": "ERROR",
        },
    )
    yield live
    live.stop()


def test_clients_dripping_their_headers_are_cut_off_and_others_are_served(gateway):
    # Given more clients than the worker has threads, each sending its request head a byte every 0.2 s
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 200 + b"\r\n\r\n"
    stop = threading.Event()
    sent: list[int] = []
    cut: list[bool] = []

    def drip():
        sock = socket.create_connection(("127.0.0.1", gateway.port), timeout=30)
        count = 0
        try:
            for byte in head:  # about 45 s if nobody stopped it
                if stop.wait(0.2):
                    return
                sock.sendall(bytes([byte]))
                count += 1
            cut.append(False)
        except OSError:
            cut.append(True)
        finally:
            sent.append(count)
            sock.close()

    drippers = [threading.Thread(target=drip, daemon=True) for _ in range(THREADS + 2)]
    for thread in drippers:
        thread.start()
    try:
        time.sleep(0.5)
        # When an ordinary client asks meanwhile, it is answered (at the latest once the drippers are cut)
        answer = requests.get(f"{gateway.url}/healthz", timeout=20)
        assert answer.status_code == 200
        # Then every dripping client's connection is closed long before its head is complete
        for thread in drippers:
            thread.join(timeout=30)
        assert len(cut) == len(drippers) and all(cut), cut
        assert max(sent) < len(head) // 2, sent
    finally:
        stop.set()
    # And the worker still serves keep-alive requests whose heads arrive at once
    with requests.Session() as session:
        for _ in range(3):
            assert session.get(f"{gateway.url}/healthz", timeout=10).status_code == 200


def test_a_complete_head_followed_by_a_slow_reader_is_not_cut(gateway):
    # A client that sends its head at once and then waits before reading is served normally
    sock = socket.create_connection(("127.0.0.1", gateway.port), timeout=10)
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        time.sleep(HEADER_TIMEOUT + 0.5)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
        assert data.startswith(b"HTTP/1.1 200")
    finally:
        sock.close()
