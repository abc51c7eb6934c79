"""An upstream that answers with the credential it was sent as its response id, its model and its service tier
(one hostile run got the operator key back from /generation this way): the gateway stores and shows none of
them; a clean id is still recorded."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gateway.billing.models import Generation
from routing.models import Provider
from tests.support import STANDIN_KEY

REQUEST = {"model": "standin/echo", "input": "Hi", "provider": {"only": ["standin-chat"]}}


class EchoingUpstream(BaseHTTPRequestHandler):
    """Chat Completions, answered with `id`, `model` and `service_tier` set to the bearer token it received
    (or, under /clean/, a plain id)."""

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        token = self.headers.get("Authorization", "").removeprefix("Bearer ")
        echoed = "chatcmpl-clean01" if self.path.startswith("/clean/") else token
        head = {"id": echoed, "model": echoed, "service_tier": echoed, "object": "chat.completion"}
        usage = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
        if body.get("stream"):
            chunks = [
                {**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hello"}}]},
                {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                {**head, "choices": [], "usage": usage},
            ]
            payload = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
            self._send(payload.encode(), "text/event-stream")
        else:
            message = {"role": "assistant", "content": "Hello"}
            answer = {**head, "choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": usage}
            self._send(json.dumps(answer).encode(), "application/json")

    def _send(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def echoing(standin_catalog):
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoingUpstream)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def point(base_url: str) -> None:
    provider = Provider.objects.get(slug="standin-chat")
    provider.base_url = base_url
    provider.save()


@pytest.mark.parametrize("stream", [False, True])
def test_an_upstream_id_model_and_tier_carrying_the_key_are_not_stored_or_shown(alice, echoing, stream):
    point(f"{echoing}/v1")
    # When the upstream answers with the operator's key as its id, model and service tier
    response = alice.client().post("/api/v1/responses", {**REQUEST, "stream": stream}, format="json")
    assert response.status_code == 200
    shown = b"".join(response.streaming_content) if stream else response.content
    generation_id = response["X-Generation-Id"]
    # Then the answer, the generation record and /generation carry none of them
    generation = Generation.objects.get(pk=generation_id)
    assert generation.status == "completed" and generation.upstream_id == ""
    record = json.dumps(list(Generation.objects.filter(pk=generation_id).values()), default=str)
    api = alice.client().get("/api/v1/generation", {"id": generation_id}).content.decode()
    for text in (shown.decode(), record, api):
        assert STANDIN_KEY not in text and STANDIN_KEY[:12] not in text, text[:400]
    assert json.loads(api)["data"]["upstream_id"] is None


def test_a_clean_upstream_id_is_still_recorded(alice, echoing):
    point(f"{echoing}/clean/v1")
    response = alice.client().post("/api/v1/responses", REQUEST, format="json")
    assert response.status_code == 200
    assert Generation.objects.get(pk=response["X-Generation-Id"]).upstream_id == "chatcmpl-clean01"
