"""Benchmark: the gateway's own overhead against calling the stand-in provider directly, in one run.

    .venv/bin/python benchmarks/gateway_overhead.py [--requests 300] [--streams 200,1000]
                                                    [--database-url postgres://...] [--threads 600]

Measures, on loopback:
  1. non-streaming latency (sequential requests, keep-alive) direct vs through the gateway, and the
     gateway's CPU time per request (utime+stime of the gunicorn workers, from /proc);
  2. with N concurrent streams, direct vs through the gateway: (a) a burst of N streams opened at once
     (each 2 s long): time to first token of each and how many completed; (b) N long streams held open
     and streaming, then the time to first token of further requests one at a time.
Everything runs here (stand-in, gateway, clients); bounded in count and time; it cleans up after itself.
"""

import argparse
import asyncio
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_http(port: int, path: str = "/", timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", path)
            conn.getresponse().read()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing answered on port {port}")


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / CLOCK_TICKS


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def percentiles(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    ordered = sorted(values)

    def pick(q):
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)

    return {
        "n": len(values),
        "p50_ms": pick(0.5),
        "p95_ms": pick(0.95),
        "p99_ms": pick(0.99),
        "mean_ms": round(statistics.fmean(values) * 1000, 2),
    }


class Stack:
    """Stand-in provider + gateway (gunicorn) on loopback ports, with a funded account."""

    def __init__(self, args):
        self.args = args
        self.tmp = tempfile.TemporaryDirectory(prefix="gw-bench-")
        self.standin_port, self.gateway_port = free_port(), free_port()
        database_url = args.database_url or f"sqlite:///{self.tmp.name}/bench.sqlite3"
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "gateway.settings.base",
            "DATABASE_URL": database_url,
            "SECRET_KEY": "benchmark-secret-key-" + "x" * 40,
            "STANDIN_API_KEY": "standin-bench-key",
            "GATEWAY_ENCRYPTION_KEYS": "b1:" + "B" * 43 + "=",
            "LOG_LEVEL": "WARNING",
            "DB_POOL_MAX_SIZE": str(args.db_pool),
        }
        for name in ("CHAT", "RESPONSES", "ANTHROPIC"):
            self.env[f"GATEWAY_PROVIDER_STANDIN_{name}_BASE_URL"] = f"http://127.0.0.1:{self.standin_port}/v1"
        self.processes = []

    def manage(self, *command: str) -> str:
        return subprocess.run(
            [PYTHON, "manage.py", *command], cwd=ROOT, env=self.env, check=True, capture_output=True, text=True
        ).stdout

    def start(self) -> None:
        self.manage("migrate", "--noinput")
        self.manage("load_catalog", "routing/catalog/standin.yaml")
        account = json.loads(self.manage("create_account", "--name", f"bench-{os.getpid()}", "--credits", "1000000"))
        self.api_key = account["api_key"]
        self.processes.append(
            subprocess.Popen(
                [
                    PYTHON,
                    "manage.py",
                    "standin_provider",
                    "--port",
                    str(self.standin_port),
                    "--chunks",
                    "20",
                    "--interval-ms",
                    str(self.args.chunk_interval_ms),
                ],
                cwd=ROOT,
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        self.gunicorn = subprocess.Popen(
            [
                PYTHON,
                "-m",
                "gunicorn",
                "-c",
                "python:gateway.gunicorn_conf",
                "gateway.wsgi:application",
                "--bind",
                f"127.0.0.1:{self.gateway_port}",
                "--workers",
                str(self.args.workers),
                "--threads",
                str(self.args.threads),
                "--backlog",
                "4096",
                "--timeout",
                "120",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.processes.append(self.gunicorn)
        wait_http(self.standin_port)
        wait_http(self.gateway_port, "/healthz")

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
        self.tmp.cleanup()


# ---- 1. non-streaming ------------------------------------------------------------------------------


LONG = ' <<standin {"chunks": 60, "interval_ms": 500}>>'  # a 30-second stream


def direct_request(stream: bool, prompt: str = "Hello") -> tuple[str, dict, dict]:
    body = {"model": "standin-echo", "messages": [{"role": "user", "content": prompt}], "stream": stream}
    return "/v1/chat/completions", body, {"Authorization": "Bearer standin-bench-key"}


def gateway_request(stack: Stack, stream: bool, prompt: str = "Hello") -> tuple[str, dict, dict]:
    body = {"model": "standin/echo", "input": prompt, "stream": stream, "provider": {"only": ["standin-chat"]}}
    return "/api/v1/responses", body, {"Authorization": f"Bearer {stack.api_key}"}


def sequential(port: int, request: tuple, count: int) -> list[float]:
    path, body, headers = request
    payload = json.dumps(body)
    headers = {**headers, "Content-Type": "application/json"}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    latencies = []
    for _ in range(count):
        started = time.perf_counter()
        conn.request("POST", path, payload, headers)
        response = conn.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"status {response.status} from port {port}")
        latencies.append(time.perf_counter() - started)
    conn.close()
    return latencies


# ---- 2. concurrent streams -------------------------------------------------------------------------


async def one_stream(
    port: int,
    request: tuple,
    marker: bytes,
    start: asyncio.Event,
    *,
    first_token_only: bool = False,
    on_first_token=None,
) -> tuple[float | None, bool]:
    path, body, headers = request
    payload = json.dumps(body).encode()
    head = [
        f"POST {path} HTTP/1.1",
        "Host: 127.0.0.1",
        "Content-Type: application/json",
        f"Content-Length: {len(payload)}",
        "Connection: close",
    ] + [f"{k}: {v}" for k, v in headers.items()]
    await start.wait()
    started = time.perf_counter()
    ttft, writer = None, None
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 30)
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + payload)
        await writer.drain()
        seen = b""
        while True:
            chunk = await asyncio.wait_for(reader.read(65536), 60)
            if not chunk:
                return ttft, False
            seen = seen[-200:] + chunk
            if ttft is None and marker in seen:
                ttft = time.perf_counter() - started
                if on_first_token:
                    on_first_token()
                if first_token_only:
                    return ttft, True
            if b"data: [DONE]" in seen:
                return ttft, True
    except (TimeoutError, OSError):
        return ttft, False
    finally:
        if writer is not None:
            writer.close()


async def concurrent_streams(port: int, request: tuple, marker: bytes, count: int) -> dict:
    """`count` streams opened at once: time to first token of each, and how many completed."""
    start = asyncio.Event()
    tasks = [asyncio.create_task(one_stream(port, request, marker, start)) for _ in range(count)]
    await asyncio.sleep(0.2)
    began = time.perf_counter()
    start.set()
    results = await asyncio.gather(*tasks)
    ttfts = [ttft for ttft, _ in results if ttft is not None]
    return {
        **percentiles(ttfts),
        "completed": sum(ok for _, ok in results),
        "of": count,
        "wall_s": round(time.perf_counter() - began, 2),
    }


async def probes_while_held(
    port: int, held_request: tuple, probe_request: tuple, marker: bytes, count: int, probes: int
) -> dict:
    """Hold `count` long streams open (each streaming), then measure the time to first token of `probes`
    further requests, one after another: the cost of carrying that many streams."""
    start, started = asyncio.Event(), []
    held = [
        asyncio.create_task(one_stream(port, held_request, marker, start, on_first_token=lambda: started.append(1)))
        for _ in range(count)
    ]
    start.set()
    deadline = time.perf_counter() + 60
    while len(started) < count and time.perf_counter() < deadline:
        await asyncio.sleep(0.1)
    streaming = len(started)
    ttfts = []
    for _ in range(probes):
        go = asyncio.Event()
        task = asyncio.create_task(one_stream(port, probe_request, marker, go, first_token_only=True))
        go.set()
        ttft, _ = await task
        if ttft is not None:
            ttfts.append(ttft)
    still_open = sum(not task.done() for task in held)
    for task in held:
        task.cancel()
    await asyncio.gather(*held, return_exceptions=True)
    return {**percentiles(ttfts), "held_streaming": streaming, "held_open_after_probes": still_open, "held": count}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--streams", default="200,1000")
    parser.add_argument("--database-url", default="")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=600)
    parser.add_argument("--db-pool", type=int, default=20)
    parser.add_argument("--chunk-interval-ms", type=int, default=100)
    parser.add_argument("--probes", type=int, default=20)
    args = parser.parse_args()

    stack = Stack(args)
    stack.start()
    results = {
        "config": {k: v for k, v in vars(args).items() if k != "database_url"},
        "database": "postgresql" if args.database_url.startswith("postgres") else "sqlite",
    }
    try:
        # Warm up both paths (imports, pools, caches).
        sequential(stack.standin_port, direct_request(False), 20)
        sequential(stack.gateway_port, gateway_request(stack, False), 20)

        direct = sequential(stack.standin_port, direct_request(False), args.requests)
        workers = children_of(stack.gunicorn.pid)
        cpu_before = cpu_seconds(workers)
        through = sequential(stack.gateway_port, gateway_request(stack, False), args.requests)
        cpu_per_request = (cpu_seconds(workers) - cpu_before) / args.requests
        results["non_streaming"] = {
            "direct": percentiles(direct),
            "gateway": percentiles(through),
            "added_p50_ms": round((statistics.median(through) - statistics.median(direct)) * 1000, 2),
            "gateway_cpu_ms_per_request": round(cpu_per_request * 1000, 2),
        }
        results["streams"] = {}
        for count in map(int, args.streams.split(",")):
            direct_streams = asyncio.run(
                concurrent_streams(stack.standin_port, direct_request(True), b'"content":"H', count)
            )
            gateway_streams = asyncio.run(
                concurrent_streams(
                    stack.gateway_port, gateway_request(stack, True), b"response.output_text.delta", count
                )
            )
            direct_probes = asyncio.run(
                probes_while_held(
                    stack.standin_port,
                    direct_request(True, "Hello" + LONG),
                    direct_request(True),
                    b'"content":"H',
                    count,
                    args.probes,
                )
            )
            gateway_probes = asyncio.run(
                probes_while_held(
                    stack.gateway_port,
                    gateway_request(stack, True, "Hello" + LONG),
                    gateway_request(stack, True),
                    b"response.output_text.delta",
                    count,
                    args.probes,
                )
            )
            results["streams"][str(count)] = {
                "burst": {"direct": direct_streams, "gateway": gateway_streams},
                "probe_while_held": {"direct": direct_probes, "gateway": gateway_probes},
            }
    finally:
        stack.stop()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
