"""Issue 17: one JSON log line per request (request id, also sent back as X-Request-Id; generation id, account, key
hash prefix, model, provider, status, latency, tokens, cost; never a key or prompt text), /metrics in Prometheus
text format behind its token or address rule, and its counters summed across two gunicorn workers."""

import json
import logging
import re
import time
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from gateway.billing.models import Generation
from tests.live import LiveGateway

PROMPT = "Tell me a secret about the walrus"


@pytest.fixture
def access_log(caplog):
    logger = logging.getLogger("gateway.access")
    logger.addHandler(caplog.handler)
    caplog.set_level(logging.INFO, logger="gateway.access")
    yield caplog
    logger.removeHandler(caplog.handler)


def lines(caplog) -> list[dict]:
    return [json.loads(record.getMessage()) for record in caplog.records if record.name == "gateway.access"]


def samples(text: str) -> dict:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def total(found: dict, name: str, **labels) -> float:
    return sum(
        value
        for (sample, sample_labels), value in found.items()
        if sample == name and all(dict(sample_labels).get(k) == v for k, v in labels.items())
    )


def test_one_json_line_per_request_with_its_figures_and_no_secrets(access_log, alice, standin_catalog):
    response = alice.client().post("/api/v1/responses", {"model": "standin/echo", "input": PROMPT}, format="json")
    assert response.status_code == 200
    generation = Generation.objects.get(pk=response["X-Generation-Id"])
    [line] = lines(access_log)
    assert line["request_id"] == response["X-Request-Id"] and re.fullmatch(r"[0-9a-f]{24}", line["request_id"])
    assert line["generation_id"] == generation.pk
    assert line["account_id"] == str(alice.account_id)
    assert line["key_hash_prefix"] == generation.api_key.hash[:12]
    assert (line["model"], line["provider"]) == (generation.model, generation.provider)
    assert (line["tokens_input"], line["tokens_output"]) == (generation.tokens_input, generation.tokens_output)
    assert Decimal(str(line["cost"])) == generation.cost.normalize() and generation.cost > 0
    assert line["status"] == 200 and line["route"] == "api/v1/responses" and line["latency_ms"] > 0
    raw = access_log.records[0].getMessage()
    assert PROMPT not in raw and alice.api_key not in raw and generation.api_key.hash not in raw


def test_a_stream_is_logged_when_it_ends_with_its_tokens(access_log, alice, standin_catalog):
    body = {"model": "standin/echo", "input": PROMPT, "stream": True}
    response = alice.client().post("/api/v1/responses", body, format="json")
    assert response.status_code == 200 and response.streaming
    assert lines(access_log) == []  # not before the stream ends
    b"".join(response.streaming_content)  # the test client closes the response at the stream's end
    [line] = lines(access_log)
    generation = Generation.objects.get(pk=response["X-Generation-Id"])
    assert line["stream"] is True and line["generation_id"] == generation.pk
    assert line["tokens_output"] == generation.tokens_output > 0
    assert PROMPT not in json.dumps(line)


def test_request_id_is_taken_from_the_client_when_it_is_a_short_token(access_log, client, db):
    assert client.get("/healthz", HTTP_X_REQUEST_ID="trace-abc.123")["X-Request-Id"] == "trace-abc.123"
    replaced = client.get("/healthz", HTTP_X_REQUEST_ID="bad id\nwith newline")["X-Request-Id"]
    assert re.fullmatch(r"[0-9a-f]{24}", replaced)
    assert [line["request_id"] for line in lines(access_log)] == ["trace-abc.123", replaced]
    assert all(line["route"] == "healthz" and line["status"] == 200 for line in lines(access_log))


def test_metrics_answer_loopback_or_the_token_only(client, db, settings):
    response = client.get("/metrics")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    assert "gateway_http_requests_total" in response.content.decode()
    assert "gateway_credit_holds_open" in response.content.decode()
    settings.METRICS_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    assert client.get("/metrics").status_code == 404
    settings.METRICS_TOKEN = "s3cret-metrics-token"
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-metrics-token").status_code == 200
    assert client.post("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-metrics-token").status_code == 404


def test_metrics_count_settled_requests(client, alice, standin_catalog):
    before = samples(client.get("/metrics").content.decode())
    for stream in (False, True):
        response = alice.client().post(
            "/api/v1/responses", {"model": "standin/echo", "input": PROMPT, "stream": stream}, format="json"
        )
        assert b"".join(response.streaming_content) if stream else response.content, response.status_code
    after = samples(client.get("/metrics").content.decode())
    generations = Generation.objects.filter(account_id=alice.account_id)

    def grew(name, **labels):
        return total(after, name, **labels) - total(before, name, **labels)

    assert grew("gateway_http_requests_total", route="api/v1/responses", status="200") == 2
    assert grew("gateway_upstream_attempts_total", outcome="ok") == 2
    assert grew("gateway_tokens_total", kind="output") == sum(g.tokens_output for g in generations)
    spent = sum(g.cost for g in generations)
    assert abs(grew("gateway_spend_usd_total", byok="false") - float(spent)) < 1e-9
    assert grew("gateway_time_to_first_token_seconds_count") >= 1
    assert grew("gateway_http_request_duration_seconds_count", route="api/v1/responses") == 2
    assert total(after, "gateway_open_streams") == 0


@pytest.mark.django_db(transaction=True)
def test_metrics_are_summed_across_two_gunicorn_workers(tmp_path, alice, standin_catalog):
    directory = tmp_path / "metrics"
    # At most 2 connections per worker at a time, so that 8 concurrent clients keep both workers busy.
    env = {"PROMETHEUS_MULTIPROC_DIR": str(directory), "GUNICORN_CMD_ARGS": "--worker-connections 2"}
    gateway = LiveGateway(workers=2, threads=4, extra_env=env)
    try:
        headers = {"Authorization": f"Bearer {alice.api_key}", "Connection": "close"}

        def call(index: int) -> int:
            if index % 2 == 0:  # model requests take long enough that one worker cannot hold them all
                body = {"model": "standin/echo", "input": PROMPT}
                return requests.post(f"{gateway.api}/responses", json=body, headers=headers, timeout=20).status_code
            return requests.get(f"{gateway.url}/healthz", headers={"Connection": "close"}, timeout=10).status_code

        # After the start-up probes: one that timed out on a busy machine is still answered (and counted) later,
        # so the counts are read until they stay the same for half a second.
        before = samples(requests.get(f"{gateway.url}/metrics", timeout=10).text)
        for _ in range(20):
            time.sleep(0.5)
            again = samples(requests.get(f"{gateway.url}/metrics", timeout=10).text)
            settled = total(again, "gateway_http_requests_total", route="healthz", status="200") == total(
                before, "gateway_http_requests_total", route="healthz", status="200"
            )
            before = again
            if settled:
                break
        with ThreadPoolExecutor(8) as pool:
            assert set(pool.map(call, range(60))) == {200}
        workers = {path.stem.rsplit("_", 1)[-1] for path in directory.glob("counter_*.db")}
        assert len(workers) == 2, workers  # both workers answered (and counted) some of them
        found = samples(requests.get(f"{gateway.url}/metrics", timeout=10).text)
        healthz = {"route": "healthz", "status": "200"}
        grown = total(found, "gateway_http_requests_total", **healthz) - total(
            before, "gateway_http_requests_total", **healthz
        )
        assert grown == 30
        assert total(found, "gateway_http_requests_total", route="api/v1/responses", status="200") == 30
        assert total(found, "gateway_upstream_attempts_total", outcome="ok") == 30
        outputs = sum(g.tokens_output for g in Generation.objects.filter(account_id=alice.account_id))
        assert total(found, "gateway_tokens_total", kind="output") == outputs > 0
    finally:
        gateway.stop()
