"""Benchmark: the gateway's CPU per request on each front door, side by side: POST /responses, /chat/completions,
/messages (JSON and streamed) and /embeddings, in this process against the local stand-in provider.

    .venv/bin/python benchmarks/frontdoors_cost.py [--requests 300] [--rounds 3]

A throwaway test database (the test settings), the stand-in catalog, a funded account; then for each front door
the same one-turn request through Django's test client, timed with this thread's CPU clock (the stand-in serves
from its own threads, so its work is not counted), median per round. The chat and Anthropic doors are
translations onto the /responses pipeline: their cost beside /responses is what the translation adds.
"""

import argparse
import logging
import os
import statistics
import sys
import time
from decimal import Decimal
from io import StringIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings.test")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402
from rest_framework.test import APIClient  # noqa: E402

ONLY = {"provider": {"only": ["standin-chat"]}}  # one upstream wire for every door
TURN = [{"role": "user", "content": "Say hello"}]
DOORS: dict[str, tuple[str, dict]] = {
    "/responses": ("/api/v1/responses", {"model": "standin/echo", "input": "Say hello", **ONLY}),
    "/chat/completions": ("/api/v1/chat/completions", {"model": "standin/echo", "messages": TURN, **ONLY}),
    "/messages": ("/api/v1/messages", {"model": "standin/echo", "max_tokens": 256, "messages": TURN, **ONLY}),
    "/embeddings": ("/api/v1/embeddings", {"model": "standin/embed", "input": "Say hello", **ONLY}),
}
STREAMED = ("/responses", "/chat/completions", "/messages")


def setup() -> tuple[APIClient, str]:
    from gateway.billing.provisioning import account_provision
    from routing.models import Provider
    from routing.services import provider_credential_set
    from routing.standin.server import serve_in_thread

    setup_test_environment()
    original = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True)
    standin = serve_in_thread()
    call_command("load_catalog", str(ROOT / "routing" / "catalog" / "standin.yaml"), stdout=StringIO())
    for provider in Provider.objects.filter(is_local_standin=True):
        provider.base_url = f"{standin.url}/v1"
        provider.save()
        provider_credential_set(provider=provider, plaintext="sk-standin-bench")
    account = account_provision(name="bench", plan="payg", credits=Decimal("1000"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {account.inference_key.plaintext}")
    return client, original


def cpu_ms(client: APIClient, path: str, body: dict, count: int, *, stream: bool) -> float:
    body = {**body, "stream": True} if stream else body
    samples = []
    for _ in range(count):
        started = time.thread_time()
        response = client.post(path, body, format="json")
        if stream:
            b"".join(response.streaming_content)  # type: ignore[attr-defined]  # a StreamingHttpResponse
        assert response.status_code == 200, response.content
        samples.append((time.thread_time() - started) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300, help="requests per door and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # no access log lines between the results
    client, database = setup()
    rows: dict[str, list[float]] = {}
    for _ in range(args.rounds):  # interleaved rounds: drift on a shared machine hits every door alike
        for door, (path, body) in DOORS.items():
            cpu_ms(client, path, body, 20, stream=False)  # warm-up
            rows.setdefault(door, []).append(cpu_ms(client, path, body, args.requests, stream=False))
            if door in STREAMED:
                rows.setdefault(f"{door} stream", []).append(cpu_ms(client, path, body, args.requests, stream=True))
    connection.creation.destroy_test_db(database, verbosity=0)
    base = {"": min(rows["/responses"]), " stream": min(rows["/responses stream"])}
    print(f"{'front door':<28}{'CPU ms/request (best round)':>30}{'vs /responses':>16}")
    for door, values in rows.items():
        reference = base[" stream" if door.endswith(" stream") else ""]
        print(f"{door:<28}{min(values):>30.2f}{min(values) - reference:>+15.2f}")


if __name__ == "__main__":
    main()
