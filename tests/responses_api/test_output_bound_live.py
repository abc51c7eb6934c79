"""Hostile streams against a real gevent worker (issue 28, item 5): six upstreams ignoring max_output_tokens at
once cost the worker little memory, because each answer is cut at the request's output bound
(routing.output_bound) and nothing past it is read, kept or repeated in `*.done` events."""

import json
import threading
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
import requests
from django.core.management import call_command

from gateway.billing.models import Generation
from gateway.billing.provisioning import account_provision
from routing.output_bound import OPAQUE_OUTPUT_BYTES
from tests.golden import FIXTURES
from tests.support import Persona, sse_events

pytestmark = pytest.mark.live

STREAMS = 6
FLOOD = 8 * 1024 * 1024  # bytes each upstream streams for an answer allowed 16 tokens
MAX_TOKENS = 16
BOUND = 256  # bytes: routing.output_bound's floor (8 bytes x 16 tokens is less)
RSS_GROWTH_LIMIT_KB = 50 * 1024


@pytest.fixture(scope="module")
def gateway(django_db_setup, django_db_blocker):
    """One gevent worker, so every stream shares its memory."""
    from tests.live import LiveGateway

    live = LiveGateway(workers=1, extra_env={"GUNICORN_WORKER_CLASS": "gevent", "LOG_LEVEL": "ERROR"})
    yield live
    live.stop()


def worker_pid(master: int) -> int:
    """The gunicorn master's one worker process."""
    children = [
        int(stat.split()[0])
        for path in Path("/proc").glob("[0-9]*/stat")
        if (stat := _read(path)) and int(stat.rsplit(")", 1)[1].split()[1]) == master
    ]
    assert len(children) == 1, children
    return children[0]


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:  # a process that ended while we looked
        return ""


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


def hostile_stream(gateway, key: str, results: list, hosted: bool = False) -> None:
    body = {
        "model": "standin/echo",
        "stream": True,
        "max_output_tokens": MAX_TOKENS,
        "input": f'Go <<standin {{"flood": {FLOOD}}}>>',
        "provider": {"only": ["standin-responses"]},
    }
    if hosted:  # the flood in provider-run code_interpreter_call items (64 KiB each) instead
        body["model"], body["tools"] = "standin/search", [{"type": "code_interpreter", "container": {"type": "auto"}}]
        body["input"] = f'Go <<standin {{"flood": {FLOOD}, "flood_field": "hosted"}}>>'
    with requests.post(
        f"{gateway.api}/responses", json=body, headers={"Authorization": f"Bearer {key}"}, stream=True, timeout=120
    ) as response:
        received = b"".join(response.iter_content(chunk_size=None))
    results.append((response.headers["X-Generation-Id"], received))


def six_at_once(gateway, key: str, hosted: bool = False) -> list:
    """Six hostile streams at once, after a first one (the worker's code paths loaded, its pools warm); the
    worker's memory grew by less than 50 MB at its peak, and holds no more afterwards."""
    pid = worker_pid(gateway.process.pid)
    hostile_stream(gateway, key, [], hosted)
    baseline = status_kb(pid, "VmRSS")
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM restarts from the current RSS
    results: list = []
    threads = [threading.Thread(target=hostile_stream, args=(gateway, key, results, hosted)) for _ in range(STREAMS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(180)
    assert len(results) == STREAMS
    peak_growth = status_kb(pid, "VmHWM") - baseline
    after_growth = status_kb(pid, "VmRSS") - baseline
    assert peak_growth < RSS_GROWTH_LIMIT_KB, f"peak RSS grew {peak_growth} kB"
    assert after_growth < RSS_GROWTH_LIMIT_KB, f"RSS grew {after_growth} kB"
    return results


def test_six_hostile_streams_leave_the_worker_small(gateway, transactional_db, standin_catalog):
    gina = Persona(account_provision(name="gina", plan="payg", credits=Decimal("5")))
    # When six upstreams stream 8 MiB each at once for answers allowed 16 tokens, the worker stays small
    results = six_at_once(gateway, gina.api_key)
    # And each answer was cut at the bound, ended incomplete and was billed as the 16 tokens allowed
    for generation_id, received in results:
        events, _ = sse_events(_Streamed(received))
        text = "".join(event["delta"] for event in events if event["type"] == "response.output_text.delta")
        assert len(text.encode()) == BOUND
        assert events[-1]["type"] == "response.incomplete"
        assert len(received) < 20 * BOUND + 8000
        record = Generation.objects.get(id=generation_id)
        assert record.status == "incomplete" and record.tokens_output == MAX_TOKENS


class _Streamed:
    """Received bytes in the shape tests.support.sse_events reads."""

    def __init__(self, received: bytes):
        self.streaming_content = [received]


def test_six_hostile_provider_run_item_floods_leave_the_worker_small(gateway, transactional_db, standin_catalog):
    call_command("load_catalog", str(Path(FIXTURES) / "web" / "hosted_catalog.yaml"), stdout=StringIO())
    hana = Persona(account_provision(name="hana", plan="payg", credits=Decimal("5")))
    # When six upstreams answer with 8 MiB of code interpreter items each, the worker stays small
    results = six_at_once(gateway, hana.api_key, hosted=True)
    # And each answer relays at most the provider-run bound of items, cut and incomplete
    for generation_id, received in results:
        events, _ = sse_events(_Streamed(received))
        items = [event["item"] for event in events if event["type"] == "response.output_item.done"]
        assert 0 < len(json.dumps(items)) <= OPAQUE_OUTPUT_BYTES
        assert events[-1]["type"] == "response.incomplete"
        assert Generation.objects.get(id=generation_id).status == "incomplete"
