"""Secrets at rest (AES-256-GCM keyring) and the outbound HTTP choke point."""

import base64
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.test import override_settings

from byok.credentials import ProviderCredentials
from byok.crypto import Sealed, SecretsError, mask_secret, seal, unseal
from routing import http
from routing.sse import decode_sse

KEY_A = "a:" + base64.urlsafe_b64encode(b"A" * 32).decode()
KEY_B = "b:" + base64.urlsafe_b64encode(b"B" * 32).decode()


def test_seal_round_trip_and_binding():
    with override_settings(GATEWAY_ENCRYPTION_KEYS=KEY_A):
        sealed = seal("sk-secret-value", aad="provider:1")
        assert b"sk-secret-value" not in sealed.blob and sealed.key_id == "a"
        assert unseal(sealed, aad="provider:1") == "sk-secret-value"
        with pytest.raises(SecretsError):
            unseal(sealed, aad="provider:2")  # copied onto another row
        tampered = Sealed(key_id="a", blob=sealed.blob[:-1] + bytes([sealed.blob[-1] ^ 1]))
        with pytest.raises(SecretsError):
            unseal(tampered, aad="provider:1")


def test_rotation_keeps_old_ciphertexts_readable_until_the_old_key_is_removed():
    with override_settings(GATEWAY_ENCRYPTION_KEYS=KEY_A):
        old = seal("sk-old", aad="x")
    with override_settings(GATEWAY_ENCRYPTION_KEYS=f"{KEY_B},{KEY_A}"):
        assert unseal(old, aad="x") == "sk-old"
        assert seal("sk-new", aad="x").key_id == "b"
    with override_settings(GATEWAY_ENCRYPTION_KEYS=KEY_B), pytest.raises(SecretsError, match="no key 'a'"):
        unseal(old, aad="x")


@pytest.mark.parametrize("spec", ["", "nocolon", "k:" + base64.b64encode(b"short").decode(), "k:!!!"])
def test_bad_keyrings_fail_loudly(spec):
    with override_settings(GATEWAY_ENCRYPTION_KEYS=spec), pytest.raises(SecretsError):
        seal("x", aad="y")


def test_credentials_repr_masks_the_secret():
    creds = ProviderCredentials(api_key="sk-live-abcdefghijklmnop")
    assert "abcdefghijkl" not in repr(creds) and "abcdefghijkl" not in str(creds)
    assert mask_secret("sk-live-abcdefghijklmnop").startswith("sk-l")


@pytest.mark.parametrize(
    "address,public",
    [
        ("8.8.8.8", True),
        ("1.1.1.1", True),
        ("2606:4700::1111", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),
        ("0.0.0.0", False),
        ("::1", False),
        ("fe80::1", False),
        ("fc00::1", False),
        ("::ffff:127.0.0.1", False),
        ("100.64.0.1", False),
        ("224.0.0.1", False),
    ],
)
def test_public_address_check(address, public):
    assert http.is_public_address(address) is public


class RedirectHandler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(302)
        self.send_header("Location", "http://169.254.169.254/latest/meta-data")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        return


def test_redirects_are_not_followed():
    server = HTTPServer(("127.0.0.1", 0), RedirectHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        response = http.request("GET", f"http://127.0.0.1:{server.server_port}/", headers={}, allow_private=True)
        assert response.status_code == 302
    finally:
        server.shutdown()


def test_private_destination_refused_by_default():
    with pytest.raises(http.TransportError) as caught:
        http.request("GET", "http://127.0.0.1:9/", headers={})
    assert caught.value.kind == "refused"


def test_sse_decoder_follows_the_spec():
    raw = [b": keep-alive\r\n", b"event: a\r\ndata: one\r", b"\ndata: two\n\n", b'data: {"x":1}\n\n', b"data: tail"]
    events = list(decode_sse(raw))
    assert [(e.event, e.data) for e in events] == [("a", "one\ntwo"), ("message", '{"x":1}')]


@pytest.mark.parametrize(
    "url",
    [
        "http://2130706433:9/",  # 127.0.0.1 as one decimal number
        "http://0x7f000001:9/",  # ... in hex
        "http://127.1:9/",  # short form
        "http://0177.0.0.1:9/",  # octal
        "http://localhost.:9/",  # trailing dot
        "http://[::1]:9/",
        "http://[::ffff:127.0.0.1]:9/",  # IPv4-mapped IPv6
        "http://0.0.0.0:9/",
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata
        "http://10.0.0.1:9/",
    ],
)
def test_ssrf_bypass_forms_are_refused(url):
    """Destinations are checked after resolution, so alternative spellings of private addresses do not pass."""
    with pytest.raises(http.TransportError) as caught:
        http.request("GET", url, headers={}, timeouts=http.Timeouts(connect=1, read=1))
    assert caught.value.kind in ("refused", "connect")
    if caught.value.kind == "connect":  # only when the name does not resolve at all
        assert "localhost." in url or "0177" in url
