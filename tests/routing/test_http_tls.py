"""TLS through the checked address: routing.http connects to the address it resolved and checked, and still
verifies the certificate against the URL's host name (SNI and the Host header name it too). A certificate for
another name fails the call; a kept-alive TLS connection is reused."""

import datetime
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from routing import http
from routing.http import destinations
from tests.support import LoopbackServer, requests_on

ANSWER = b'{"ok":true}'


def self_signed(directory: Path, name: str) -> tuple[Path, Path]:
    """A certificate for DNS name `name` only (no IP address in it), and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


class TLSServer(LoopbackServer):
    """Answers ANSWER over TLS on keep-alive connections; keeps the SNI name and each request head."""

    def __init__(self, cert: Path, key: Path):
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.context.sni_callback = self._sni
        self.names: list[str | None] = []
        self.heads: list[bytes] = []
        super().__init__()

    def _sni(self, sock, name, context) -> None:
        self.names.append(name)

    def serve(self, conn: socket.socket) -> None:
        try:
            with self.context.wrap_socket(conn, server_side=True) as tls:
                for head, _ in requests_on(tls):
                    self.heads.append(head)
                    tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%b" % (len(ANSWER), ANSWER))
        except (OSError, ssl.SSLError):
            return


@pytest.fixture
def localhost_tls(tmp_path, monkeypatch) -> Iterator[TLSServer]:
    cert, key = self_signed(tmp_path, "localhost")
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the default trust store urllib3 loads per connection
    destinations.POOLS.clear()  # no TLS connection made before this test's trust store
    server = TLSServer(cert, key)
    yield server
    server.close()
    destinations.POOLS.clear()


def test_tls_goes_to_the_checked_address_and_verifies_the_url_host(localhost_tls, monkeypatch):
    resolved = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", localhost_tls.port))]
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *args, **kwargs: resolved)  # only 127.0.0.1
    destinations.forget_resolved()
    try:
        url = f"https://localhost:{localhost_tls.port}/v1/a"
        for _ in range(2):
            response = http.request("GET", url, headers={}, allow_private=True)
            assert (response.status_code, response.content) == (200, ANSWER)
    finally:
        destinations.forget_resolved()
    assert localhost_tls.names == ["localhost"] and localhost_tls.accepted == 1  # one kept connection
    for head in localhost_tls.heads:
        assert f"\r\nhost: localhost:{localhost_tls.port}\r\n".encode() in head.lower()


def test_a_certificate_for_another_name_fails_the_call(localhost_tls):
    # The address is the server's, but the URL names 127.0.0.1, which its certificate does not.
    with pytest.raises(http.TransportError) as failed:
        http.request("GET", f"https://127.0.0.1:{localhost_tls.port}/v1/a", headers={}, allow_private=True)
    assert failed.value.kind == "protocol"
    assert localhost_tls.heads == []
