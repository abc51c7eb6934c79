"""Not a test (not collected): the gateway CPU one server-tool round adds, measured on the request's thread (the
stand-in runs on others). Run it explicitly: pytest -s tests/plugins/bench_server_tools_round.py"""

import json
import statistics
import time

TOOLS = [{"type": "gateway:datetime"}]


def cpu_of(client, script: dict, runs: int) -> list[float]:
    payload = {"model": "standin/echo", "input": f"Hi <<standin {json.dumps(script)}>>", "tools": TOOLS}
    times = []
    for _ in range(runs):
        started = time.thread_time()
        response = client.post("/api/v1/responses", payload, format="json")
        times.append((time.thread_time() - started) * 1000)
        assert response.status_code == 200
    return times


def test_cpu_of_one_round(alice, standin_catalog):
    client = alice.client()
    cpu_of(client, {}, 20)  # warm up
    one, none, two = [], [], []
    for _ in range(100):  # interleaved: the machine's load drifts
        none += cpu_of(client, {}, 2)
        one += cpu_of(client, {"tool_call": "gateway_datetime,", "tool_arguments": "{}"}, 2)
        two += cpu_of(client, {"tool_call": "gateway_datetime,gateway_datetime,", "tool_arguments": "{}"}, 2)
    print(
        f"\nmedian request thread CPU: no call {statistics.median(none):.2f} ms, 1 round more "
        f"{statistics.median(one):.2f} ms, 2 rounds more {statistics.median(two):.2f} ms"
    )
