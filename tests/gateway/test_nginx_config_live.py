"""The reverse proxy shipped in compose.yaml bounds a client connection too (issue 28, item 2): nginx, run here with
that very configuration in front of a live gateway, answers `keepalive_requests` requests on one connection, pipelined
or not, then closes it, so one client cannot keep a replica's worker to itself behind the load balancer either.

nginx is a Debian package: `.ci/run` installs it and sets NGINX_TESTS_REQUIRED, so in CI a missing nginx fails these
tests instead of skipping them."""

import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.gateway.test_connection_bounds_live import connection_headers, get, read_until_closed
from tests.live import free_port

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]


def shipped_config(*, listen: int, upstream: int) -> tuple[str, int]:
    """compose.yaml's nginx configuration as nginx reads it (compose's `$$` is a `$`), pointed at the loopback gateway
    instead of the compose service, and its client connection's keepalive_requests."""
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    content = compose["configs"]["nginx"]["content"].replace("$$", "$")
    content = content.replace("server gateway:8000", f"server 127.0.0.1:{upstream}")
    content = content.replace("listen 8000;", f"listen 127.0.0.1:{listen};")
    server_block = content[content.index("server {") :]
    limit = int(re.search(r"keepalive_requests (\d+);", server_block).group(1))
    return content, limit


@pytest.fixture(scope="module")
def proxy(tmp_path_factory, django_db_setup, django_db_blocker):
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if nginx is None:
        if os.environ.get("NGINX_TESTS_REQUIRED"):
            pytest.fail("nginx is not installed (.ci/run installs the Debian package)")
        pytest.skip("nginx is not installed (apt-get install nginx-light)")
    from tests.live import LiveGateway

    # The gateway's own bound is off, so what closes the connection below is nginx.
    live = LiveGateway(workers=1, threads=4, extra_env={"GUNICORN_MAX_REQUESTS_PER_CONNECTION": "0"})
    port = free_port()
    root = tmp_path_factory.mktemp("nginx")
    site, limit = shipped_config(listen=port, upstream=live.port)
    (root / "default.conf").write_text(site)
    (root / "nginx.conf").write_text(
        f"daemon off;\npid {root}/nginx.pid;\nerror_log {root}/error.log warn;\n"
        "events { worker_connections 256; }\n"
        f"http {{\n  access_log off;\n  client_body_temp_path {root};\n  proxy_temp_path {root};\n"
        f"  include {root}/default.conf;\n}}\n"
    )
    process = subprocess.Popen([nginx, "-p", str(root), "-c", str(root / "nginx.conf")], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"nginx did not start: {process.stderr.read().decode()[-2000:]}") from None
                time.sleep(0.05)
        yield port, limit
    finally:
        process.terminate()
        process.wait(timeout=10)
        live.stop()


def test_the_shipped_proxy_closes_a_pipelining_connection_after_its_keepalive_requests(proxy):
    port, limit = proxy
    assert limit == 100  # the figure compose.yaml and docs/limits-and-hardening.md give
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        # Given a client that pipelines more requests than the proxy serves on one connection
        sock.sendall(get("/healthz") * (limit + 20))
        # Then it gets `limit` answers, the last one closing the connection, which is then closed
        data, closed = read_until_closed(sock)
    assert data.count(b"HTTP/1.1 200 ") == limit
    assert connection_headers(data)[-1] == "close"
    assert closed


def test_the_shipped_proxy_bounds_requests_sent_one_by_one_too(proxy):
    port, limit = proxy
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        reader = sock.makefile("rb")
        closing = []
        for _ in range(limit):
            sock.sendall(get("/healthz"))
            status = reader.readline()
            assert status.startswith(b"HTTP/1.1 200 ")
            length, connection = 0, ""
            while (line := reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                if name.lower() == "content-length":
                    length = int(value)
                if name.lower() == "connection":
                    connection = value.strip().lower()
            reader.read(length)
            closing.append(connection == "close")
        # Then only the last answer closed the connection, and nothing more is read from it
        assert closing == [False] * (limit - 1) + [True]
        assert reader.read() == b""
