"""Plain helpers shared by test modules (fixtures live in conftest.py): personas, the error envelope check,
catalog data, stand-in endpoints and scripted behaviours, canonical requests."""

import json
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal

from rest_framework.test import APIClient

from gateway.accounts.services import ProvisionedAccount
from routing.canonical import CanonicalRequest, Message, TextPart
from routing.catalog import EndpointInfo
from routing.models import Provider

STANDIN_KEY = "sk-standin-operator-key"


@dataclass(frozen=True)
class Persona:
    provisioned: ProvisionedAccount

    @property
    def account_id(self):
        return self.provisioned.account_id

    @property
    def api_key(self) -> str:
        return self.provisioned.inference_key.plaintext

    @property
    def management_key(self) -> str:
        return self.provisioned.management_key.plaintext

    def client(self, *, management: bool = False) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {self.management_key if management else self.api_key}")
        return client


def assert_error_envelope(response, status: int) -> dict:
    """The spec's Error body: error.code equals the HTTP status, a message, optional metadata."""
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) <= {"error", "user_id", "gateway_metadata"}
    assert body["error"]["code"] == status
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert isinstance(body["error"].get("metadata", {}), dict)
    return body


def standin_endpoint(server, *, adapter: str, script: str = "", allow_private: bool = True, **overrides):
    """An EndpointInfo pointing at the stand-in, with an optional `/s/<script>/` behaviour prefix."""
    prefix = f"/s/{script}" if script else ""
    fields = dict(
        id=0,
        model_id="standin/echo",
        provider_slug=f"standin-{adapter}",
        provider_name="Stand-in",
        adapter=adapter,
        base_url=f"{server.url}{prefix}/v1",
        upstream_model="standin-echo",
        price_prompt=Decimal("1"),
        price_completion=Decimal("2"),
        price_cached_input=None,
        price_cache_write=None,
        price_reasoning=None,
        price_request=Decimal("0"),
        context_length=32768,
        max_completion_tokens=4096,
        quantization="unknown",
        supported_parameters=(),
        service_tiers=(),
        zdr=True,
        retains_prompts=False,
        trains_on_prompts=False,
        region="local",
        allow_private_network=allow_private,
        is_local_standin=True,
    )
    fields.update(overrides)
    return EndpointInfo(**fields)


def point_provider(slug: str, server, script: str = "") -> None:
    """Give one stand-in provider a scripted behaviour (`/s/<script>/` prefix)."""
    prefix = f"/s/{script}" if script else ""
    provider = Provider.objects.get(slug=slug)
    provider.base_url = f"{server.url}{prefix}/v1"
    provider.save()


# slug: (price per M prompt = completion, zdr, retains, trains, quantization, params, tiers)
PROVIDERS = {
    "alpha": (
        1,
        True,
        False,
        False,
        "fp8",
        ["temperature", "tools", "tool_choice", "max_tokens"],
        ["default", "priority", "flex"],
    ),
    "beta": (2, False, True, False, "bf16", ["temperature", "max_tokens"], []),
    "gamma/us": (3, True, False, False, "fp16", ["temperature", "tools", "max_tokens", "response_format"], []),
    "gamma/eu": (4, False, True, True, "fp16", ["temperature", "tools", "max_tokens", "response_format"], []),
}

SERVICE_ACCOUNT = {
    "type": "service_account",
    "project_id": "proj-1",
    "private_key_id": "abcdef0123456789abcdef",
    "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEv...\n-----END PRIVATE KEY-----\n",
    "client_email": "gw@proj-1.iam.gserviceaccount.com",
    "client_id": "1234567890",
    "auth_uri": "https://accounts.google.com/o/oauth2/auth",
    "token_uri": "https://oauth2.googleapis.com/token",
    "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
    "client_x509_cert_url": "https://www.googleapis.com/robot/v1/metadata/x509/gw",
    "universe_domain": "googleapis.com",
}
DEPLOYMENT = {
    "endpoint_url": "https://acme.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21",
    "api_key": "azure-secret-key-123456",
    "model_id": "gpt4o",
    "model_slug": "openai/gpt-4o",
}


def point(server, slug: str, script: str = "") -> None:
    provider = Provider.objects.get(slug=slug)
    provider.base_url = f"{server.url}{'/s/' + script if script else ''}/v1"
    provider.save()


def ask(text: str = "Hello", *, stream: bool = False, **fields) -> CanonicalRequest:
    return CanonicalRequest(
        model="standin-echo", input=(Message(role="user", content=(TextPart(text),)),), stream=stream, **fields
    )


def load_vertex_catalog(*, base_url: str) -> None:
    """A google-vertex provider at `base_url` (private network allowed) serving anthropic/claude-vtx."""
    from routing.services import catalog_load

    catalog_load(
        data={
            "providers": [
                {
                    "slug": "google-vertex",
                    "name": "Vertex",
                    "adapter": "vertex",
                    "credential_kind": "vertex",
                    "base_url": base_url,
                    "allow_private_network": True,
                    "zdr": True,
                }
            ],
            "models": [
                {
                    "id": "anthropic/claude-vtx",
                    "name": "Claude on Vertex",
                    "context_length": 200000,
                    "endpoints": [
                        {
                            "provider": "google-vertex",
                            "upstream_model": "claude-sonnet-4-5@20250929",
                            "pricing": {"prompt": 3, "completion": 15},
                        }
                    ],
                }
            ],
        }
    )


def sse_events(response) -> tuple[list[dict], bytes]:
    """A streamed test-client response's Responses events (data lines, [DONE] left out), and its bytes."""
    raw = b"".join(response.streaming_content)
    events = []
    for block in raw.decode().split("\n\n"):
        data = [line[6:] for line in block.split("\n") if line.startswith("data: ")]
        if data and data[0] != "[DONE]":
            events.append(json.loads("\n".join(data)))
    return events, raw


SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


class LoopbackServer(ABC):
    """A raw HTTP/1.1 server on a loopback port for upstream tests: a thread per connection runs the subclass's
    `serve(conn)`; counts the connections it accepted."""

    def __init__(self, host: str = "127.0.0.1"):
        self.accepted = 0
        self.listener = socket.create_server((host, 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    @abstractmethod
    def serve(self, conn: socket.socket) -> None: ...

    def close(self) -> None:
        self.listener.close()


def requests_on(conn: socket.socket) -> Iterator[tuple[bytes, bytes]]:
    """Each request (head, body) a client sends on a keep-alive connection, until it closes it."""
    buffered = b""
    while (request := read_request(conn, buffered)) is not None:
        head, body, buffered = request
        yield head, body


def read_request(conn: socket.socket, buffered: bytes) -> tuple[bytes, bytes, bytes] | None:
    """The next request on a keep-alive connection: (head, body by its Content-Length, what follows it), or None
    when the client closed the connection first."""
    while b"\r\n\r\n" not in buffered:
        data = conn.recv(65536)
        if not data:
            return None
        buffered += data
    head, _, buffered = buffered.partition(b"\r\n\r\n")
    lengths = [line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
    length = int(lengths[0].split(b":", 1)[1]) if lengths else 0
    while len(buffered) < length:
        buffered += conn.recv(65536)
    return head, buffered[:length], buffered[length:]


def leave_live_stream(api: str, key: str, payload: dict, *, until: Callable[[bytes], bool]):
    """A streamed POST /responses to a live gateway that the client hangs up on once `until(what it received)`
    holds; the request's generation record, once the gateway recorded it cancelled (or after 5 s, as it is)."""
    import requests

    from gateway.billing.models import Generation

    response = requests.post(
        f"{api}/responses", json=payload, headers={"Authorization": f"Bearer {key}"}, stream=True, timeout=10
    )
    generation_id = response.headers["X-Generation-Id"]
    seen = b""
    for chunk in response.iter_content(chunk_size=None):
        seen += chunk
        if until(seen):
            break
    response.close()  # the client left
    deadline = time.monotonic() + 5
    while not Generation.objects.filter(pk=generation_id, status="cancelled").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return Generation.objects.get(pk=generation_id)
