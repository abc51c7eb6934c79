"""Benchmark: issue 11's table in one run. This gateway against the provider called directly (and against
LiteLLM with --litellm), each target measured the same way, on loopback. Started by benchmarks/run.sh, which
prepares the shared harness (../shared/bench: the fake upstream, wrk's post.lua, stream_load.py, and
LiteLLM's config) and runs this file with the harness's Python (psutil, aiohttp, uvloop).

    benchmarks/run.sh [--quick] [--litellm] [--duration 10] [--streams 1000,200] [--held 1000] [--json FILE]

The gateway is booted the production way: a fresh PostgreSQL database, Redis, gunicorn with the project's
settings (gateway/gunicorn_conf.py: gevent, 2 workers x 1,000 connections), DEBUG off. Two fake upstreams: one
sends 20 token chunks 50 ms apart, the other is slow (60 chunks 500 ms apart) for the streams held open.

Measured per target, in this order (step 2 for all targets at once):
  1. right after start (once every target's processes are idle): a burst of --cold-burst streams (does a fresh
     worker pay for lazy imports?);
  2. non-streaming, wrk closed loop at 1, 16 and 64 connections (--rounds turns, the targets interleaved: every
     target meets the machine's changes of speed alike): requests/s, p50 (added over direct at 1),
     the target's own CPU per request (its process tree, psutil), and for this gateway PostgreSQL's CPU (the
     postmaster's auxiliary processes and the backends of the bench database) and Redis's, plus the bench
     database's transactions, rows inserted and row updates per request (pg_stat_database deltas);
  3. each --streams burst: N streams opened at once, TTFT p50/p99, completed, CPU per stream;
  4. --held slow streams held open: RSS of the tree, and the TTFT of --probes new streams one at a time;
  5. the cold burst again, later (compare with 1).
Idle RSS is taken before any load. PostgreSQL and Redis are shared with whatever else runs on the machine:
their CPU is counted only for the bench database's backends, but Redis is one process (say so in reports).
Everything is bounded in time and stopped at the end (the database is dropped)."""

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
FAST_PORT, SLOW_PORT, LITELLM_PORT = 18080, 18082, 4000  # LiteLLM's config routes to 18080
TOKEN_MARKER = b"response.output_text.delta"
LITELLM_KEY = "sk-bench-master-0000"  # general_settings.master_key in the harness's litellm/config.yaml
FULL = {"duration": 12.0, "rounds": 3, "streams": "1000,200", "held": 1000, "probes": 20, "cold_burst": 300}
QUICK = {"duration": 3.0, "rounds": 1, "streams": "200", "held": 200, "probes": 5, "cold_burst": 200}


# ---- processes -----------------------------------------------------------------------------------


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_http(url: str, timeout: float = 60) -> None:
    host, port, path = re.match(r"http://([^:/]+):(\d+)(/.*)", url).groups()  # type: ignore[union-attr]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPConnection(host, int(port), timeout=1)
            connection.request("GET", path)
            if connection.getresponse().status < 500:
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing answered {url} within {timeout} s")


class Processes:
    """What this run started, each in its own session so that it is stopped with everything it forked."""

    def __init__(self, logs: Path):
        self.logs = logs
        self.started: list[subprocess.Popen] = []

    def start(self, name: str, command: list[str], **kwargs) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "w")  # noqa: SIM115 (closed with the process)
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **kwargs)
        self.started.append(process)
        return process

    def stop(self, process: subprocess.Popen) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)

    def stop_all(self) -> None:
        for process in reversed(self.started):
            self.stop(process)


# ---- accounting ----------------------------------------------------------------------------------


def tree(pid: int) -> list[psutil.Process]:
    with contextlib.suppress(psutil.NoSuchProcess):
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    return []


def postgres_processes(database: str) -> list[psutil.Process]:
    """The postmaster, its auxiliary processes and the backends of `database`; other databases' backends
    (other users of a shared server) are left out."""
    postmasters = [
        p
        for p in psutil.process_iter(["name", "ppid"])
        if p.info["name"] == "postgres" and psutil.Process(p.info["ppid"]).name() != "postgres"
    ]
    kept = []
    for process in (child for master in postmasters for child in tree(master.pid)):
        with contextlib.suppress(psutil.NoSuchProcess):
            title = " ".join(process.cmdline())
            is_backend = re.search(r"\d+\.\d+\.\d+\.\d+\(\d+\)|\[local\]", title) is not None
            if not is_backend or f" {database} " in title:
                kept.append(process)
    return kept


def redis_processes(port: int) -> list[psutil.Process]:
    return [
        p
        for p in psutil.process_iter(["name", "cmdline"])
        if p.info["name"] == "redis-server" and f":{port}" in " ".join(p.info["cmdline"] or [])
    ]


class CpuMeter:
    """CPU seconds spent by a changing set of processes between start() and stop(): a process seen only at the
    end counts from zero (started during the step)."""

    def __init__(self, find):
        self.find = find
        self.before: dict[tuple[int, float], float] = {}

    @staticmethod
    def _sample(processes) -> dict[tuple[int, float], float]:
        found = {}
        for process in processes:
            with contextlib.suppress(psutil.NoSuchProcess):
                times = process.cpu_times()
                found[(process.pid, process.create_time())] = times.user + times.system
        return found

    def start(self) -> None:
        self.before = self._sample(self.find())

    def stop(self) -> float:
        after = self._sample(self.find())
        return sum(cpu - self.before.get(key, 0.0) for key, cpu in after.items())


def rss_mb(processes) -> float:
    total = 0
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += process.memory_info().rss
    return round(total / 2**20, 1)


def psql(database: str, sql: str) -> str:
    return subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", database, "-Atq", "-c", sql],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def pg_counters(database: str) -> tuple[int, int, int, int]:
    """(transactions, table scans, rows inserted, row versions updated or deleted) of `database` so far: a
    statement that reads is at least one scan, and outside a transaction block every statement is a transaction.
    Backends report their counts within a second of going idle, so callers wait that long after a step."""
    line = psql(
        database,
        "SELECT pg_stat_clear_snapshot(); SELECT xact_commit + xact_rollback, (SELECT sum(seq_scan + "
        "coalesce(idx_scan, 0)) FROM pg_stat_user_tables), tup_inserted, tup_updated + tup_deleted "
        "FROM pg_stat_database WHERE datname = current_database()",
    )
    transactions, scans, inserted, changed = line.splitlines()[-1].split("|")
    return int(transactions), int(scans or 0), int(inserted), int(changed)


def generations(database: str) -> int:
    """Requests this gateway has served so far (one generation record each, whatever became of the client)."""
    return int(psql(database, "SELECT count(*) FROM billing_generation"))


# ---- targets -------------------------------------------------------------------------------------


@dataclass
class Target:
    name: str
    url: str  # base; the path /v1/responses is appended
    key: str
    model: str
    slow_url: str
    slow_model: str
    pid: int | None = None  # root of the process tree to account (None: not measured, e.g. direct)
    database: str = ""  # set for this gateway: PostgreSQL and Redis are accounted beside it
    redis_port: int = 0
    results: dict = field(default_factory=dict)

    def processes(self) -> list[psutil.Process]:
        return tree(self.pid) if self.pid else []


def body(model: str, stream: bool, harness: Path) -> dict:
    payload = json.loads((harness / "bodies" / "responses.json").read_text())
    return {**payload, "model": model, "stream": stream}


def catalog(fast: str, slow: str) -> dict:
    """Models bench/chat and bench/slow on the Chat Completions wire, each on its own fake upstream."""
    providers, models = [], []
    for name, url in (("chat", fast), ("slow", slow)):
        providers.append(
            {
                "slug": f"bench-{name}",
                "name": f"Bench {name}",
                "adapter": "openai_chat",
                "base_url": url,
                "api_key_env": "BENCH_UPSTREAM_KEY",
                "allow_private_network": True,
            }
        )
        endpoint = {
            "provider": f"bench-{name}",
            "upstream_model": "fake-model",
            "max_completion_tokens": 4096,
            "pricing": {"prompt": 0.1, "completion": 0.2},
        }
        models.append(
            {"id": f"bench/{name}", "name": f"Bench {name}", "context_length": 128000, "endpoints": [endpoint]}
        )
    return {"providers": providers, "models": models}


def boot_gateway(args, procs: Processes, work: Path, database: str) -> Target:
    """This gateway as production runs it (see ../shared/bench/ours/boot.sh), on a fresh database."""
    checkout = Path(args.checkout)
    psql("postgres", f"CREATE DATABASE {database}")
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{database}",
        "REDIS_URL": args.redis_url,
        "DJANGO_SETTINGS_MODULE": "gateway.settings.base",
        "DEBUG": "false",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SECRET_KEY": "bench-secret-key-" + "b" * 50,
        "GATEWAY_ENCRYPTION_KEYS": "k1:" + "B" * 43 + "=",
        "BENCH_UPSTREAM_KEY": "sk-upstream",
        "LOG_LEVEL": "WARNING",
    }
    python = str(ROOT / ".venv" / "bin" / "python")  # the checkout runs with this project's environment
    fast, slow = f"http://127.0.0.1:{FAST_PORT}/v1", f"http://127.0.0.1:{SLOW_PORT}/v1"
    (work / "catalog.json").write_text(json.dumps(catalog(fast, slow)))
    subprocess.run(
        ["redis-cli", "-u", args.redis_url, "flushdb"], check=True, capture_output=True
    )  # this run's Redis database
    manage = [python, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput"], cwd=checkout, env=env, check=True, capture_output=True)
    subprocess.run(
        [*manage, "load_catalog", str(work / "catalog.json")], cwd=checkout, env=env, check=True, capture_output=True
    )
    account = subprocess.run(
        [*manage, "create_account", "--name", "bench", "--credits", "1000000"],
        cwd=checkout,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    port = free_port()
    gunicorn = procs.start(
        "gunicorn",
        [
            python,
            "-m",
            "gunicorn",
            "-c",
            "python:gateway.gunicorn_conf",
            "gateway.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
        ],
        cwd=checkout,
        env=env,
    )
    wait_http(f"http://127.0.0.1:{port}/healthz")
    return Target(
        name="this gateway",
        url=f"http://127.0.0.1:{port}/api",
        key=json.loads(account.stdout)["api_key"],
        model="bench/chat",
        slow_url=f"http://127.0.0.1:{port}/api",
        slow_model="bench/slow",
        pid=gunicorn.pid,
        database=database,
        redis_port=int(re.search(r":(\d+)", args.redis_url.split("//", 1)[1]).group(1)),
    )


def boot_litellm(args, procs: Processes, work: Path) -> Target:
    """The harness's LiteLLM proxy (2 uvicorn workers, no database), with one more model on the slow upstream;
    model fake-gpt-cc bridges /v1/responses to upstream Chat Completions, as this gateway's bench/chat does."""
    harness = Path(args.harness)
    config = (harness / "litellm" / "config.yaml").read_text()
    slow = (
        "  - model_name: fake-slow-cc\n    litellm_params:\n      model: openai/chat_completions/fake-model\n"
        f"      api_base: http://127.0.0.1:{SLOW_PORT}/v1\n      api_key: sk-fake-upstream-key\n"
    )
    (work / "litellm.yaml").write_text(config.replace("\ngeneral_settings:", slow + "\ngeneral_settings:", 1))
    env = {
        **os.environ,
        "LITELLM_MODE": "PRODUCTION",
        "LITELLM_LOG": "ERROR",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "DISABLE_SCHEMA_UPDATE": "True",
    }
    litellm = procs.start(
        "litellm",
        [
            str(harness / ".venv-litellm" / "bin" / "litellm"),
            "--config",
            str(work / "litellm.yaml"),
            "--host",
            "127.0.0.1",
            "--port",
            str(LITELLM_PORT),
            "--num_workers",
            "2",
        ],
        env=env,
    )
    wait_http(f"http://127.0.0.1:{LITELLM_PORT}/health/liveliness", timeout=180)
    deadline = time.monotonic() + 60  # liveliness answers with the first worker up: wait for the second
    while len(tree(litellm.pid)) < 3 and time.monotonic() < deadline:
        time.sleep(1)
    time.sleep(5)
    url = f"http://127.0.0.1:{LITELLM_PORT}"
    return Target("LiteLLM", url, LITELLM_KEY, "fake-gpt-cc", url, "fake-slow-cc", pid=litellm.pid)


# ---- load ----------------------------------------------------------------------------------------


def wrk(args, target: Target, connections: int, seconds: float) -> dict:
    harness = Path(args.harness)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
        json.dump(body(target.model, False, harness), file)
    run = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{seconds:g}s",
            "--timeout",
            "10s",
            "--latency",
            "-s",
            str(harness / "post.lua"),
            target.url + "/v1/responses",
        ],
        env={**os.environ, "WRK_BODY_FILE": file.name, "WRK_API_KEY": target.key},
        capture_output=True,
        text=True,
        check=True,
    )
    os.unlink(file.name)
    found = json.loads(next(line[9:] for line in run.stdout.splitlines() if line.startswith("WRK_JSON ")))
    ok = found["requests"] - found["err_status"]
    seconds = found["duration_us"] / 1e6
    return {"ok": ok, "seconds": seconds, "rps": ok / seconds, "p50_ms": found["p50_us"] / 1000}


def stream_burst(args, target: Target, count: int) -> dict:
    harness = Path(args.harness)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
        json.dump(body(target.model, False, harness), file)
    run = subprocess.run(
        [
            sys.executable,
            str(harness / "stream_load.py"),
            "--url",
            target.url + "/v1/responses",
            "--key",
            target.key,
            "--body-file",
            file.name,
            "-n",
            str(count),
            "--expect-tokens",
            "20",
            "--json-only",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    os.unlink(file.name)
    return json.loads(next(line[12:] for line in run.stdout.splitlines() if line.startswith("STREAM_JSON ")))


async def open_stream(url: str, key: str, payload: bytes, started: list, *, first_token_only: bool) -> float | None:
    """One streaming request on a raw connection: seconds to its first token (None if none came)."""
    host, port, path = re.match(r"http://([^:/]+):(\d+)(/.*)", url).groups()  # type: ignore[union-attr]
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    ).encode()
    began, writer = time.perf_counter(), None
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 30)
        writer.write(head + payload)
        seen, first = b"", None
        while True:
            chunk = await asyncio.wait_for(reader.read(65536), 60)
            if not chunk:
                return first
            seen = seen[-100:] + chunk
            if first is None and TOKEN_MARKER in seen:
                first = time.perf_counter() - began
                started.append(first)
                if first_token_only:
                    return first
    except (TimeoutError, OSError):
        return None
    finally:
        if writer is not None:
            writer.close()


async def held_and_probes(args, target: Target, count: int) -> dict:
    """Hold `count` slow streams open (all streaming), then the first-token time of --probes new streams one at
    a time; the tree's RSS is taken while they are all open."""
    harness = Path(args.harness)
    slow = json.dumps(body(target.slow_model, True, harness)).encode()
    fast = json.dumps(body(target.model, True, harness)).encode()
    started: list[float] = []
    held = [
        asyncio.create_task(
            open_stream(target.slow_url + "/v1/responses", target.key, slow, started, first_token_only=False)
        )
        for _ in range(count)
    ]
    deadline = time.monotonic() + 60
    while len(started) < count and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    streaming = len(started)
    rss = rss_mb(target.processes())
    ttfts = []
    for _ in range(args.probes):
        ttft = await open_stream(target.url + "/v1/responses", target.key, fast, [], first_token_only=True)
        if ttft is not None:
            ttfts.append(ttft)
        await asyncio.sleep(0.1)
    rss = max(rss, rss_mb(target.processes()))
    still_open = sum(not task.done() for task in held)
    for task in held:
        task.cancel()
    await asyncio.gather(*held, return_exceptions=True)
    return {
        "held": count,
        "streaming": streaming,
        "still_open_after_probes": still_open,
        "probe_ttft_p50_ms": round(statistics.median(ttfts) * 1000, 1) if ttfts else None,
        "probes_ok": len(ttfts),
        "rss_mb": rss,
    }


# ---- the run -------------------------------------------------------------------------------------


class Usage:
    """CPU of a target (and of PostgreSQL and Redis beside this gateway) summed over the steps it ran, and the
    database's counters over the whole phase (only this gateway uses its database)."""

    def __init__(self, target: Target, *, database_counters: bool = True):
        self.target = target
        self.counters: tuple[int, int, int, int] | None = None
        self.served = 0
        self.meters = {"own": CpuMeter(target.processes)}
        if target.database:
            self.meters["postgres"] = CpuMeter(lambda: postgres_processes(target.database))
            self.meters["redis"] = CpuMeter(lambda: redis_processes(target.redis_port))
            if database_counters:
                self.counters, self.served = pg_counters(target.database), generations(target.database)
        self.found = {f"cpu_{name}_s": 0.0 for name in self.meters}

    @contextlib.contextmanager
    def counting(self) -> Iterator[None]:
        for meter in self.meters.values():
            meter.start()
        try:
            yield
        finally:
            for name, meter in self.meters.items():
                self.found[f"cpu_{name}_s"] += meter.stop()

    def totals(self) -> dict:
        """Call once, at the end of the phase (after the database's backends reported their counts)."""
        if self.counters is not None:
            after = pg_counters(self.target.database)
            for index, name in enumerate(("pg_transactions", "pg_scans", "pg_rows_inserted", "pg_rows_updated")):
                self.found[name] = after[index] - self.counters[index]
            self.found["served"] = generations(self.target.database) - self.served
        return self.found


# What Usage found over the phase -> (per-request name, factor).
PER_REQUEST = {
    "cpu_own_s": ("cpu_own_ms", 1000),
    "cpu_postgres_s": ("cpu_postgres_ms", 1000),
    "cpu_redis_s": ("cpu_redis_ms", 1000),
    "pg_transactions": ("pg_transactions", 1),
    "pg_scans": ("pg_scans", 1),
    "pg_rows_inserted": ("pg_rows_inserted", 1),
    "pg_rows_updated": ("pg_rows_updated", 1),
}
CONNECTIONS = (1, 16, 64)


def non_streaming(args, targets: list[Target]) -> None:
    """wrk at each of CONNECTIONS, interleaved: every connection count runs --rounds times for each target in turn
    (the order rotates from round to round), each time for --duration / --rounds seconds (whole seconds: wrk's),
    so that a shared machine's changes of speed fall on every target alike rather than on whichever ran at the
    time. A step's requests/s is its requests over its seconds summed across rounds; its p50 the median of the
    rounds'. A target's CPU is counted over its own turns, per request wrk saw answered (the part of the requests
    in flight at a turn's end that the turn saw is counted; the rest, finished after it, is not); this gateway's
    database figures are per request it served (generation records), those cut off at a turn's end included."""
    usages = {target.name: Usage(target) for target in targets}
    runs: dict[str, dict[int, list[dict]]] = {target.name: {c: [] for c in CONNECTIONS} for target in targets}
    for turn in range(args.rounds):
        for connections in CONNECTIONS:
            for target in targets[turn % len(targets) :] + targets[: turn % len(targets)]:
                with usages[target.name].counting():
                    runs[target.name][connections].append(wrk(args, target, connections, args.turn_seconds))
                time.sleep(0.5)
    time.sleep(1.5)  # backends report their counters within a second of going idle
    for target in targets:
        steps = {}
        for connections, rounds in runs[target.name].items():
            ok, seconds = sum(one["ok"] for one in rounds), sum(one["seconds"] for one in rounds)
            steps[connections] = {
                "ok": ok,
                "rps": ok / seconds,
                "p50_ms": statistics.median(one["p50_ms"] for one in rounds),
                "rounds_rps": [round(one["rps"], 1) for one in rounds],
            }
        usage = usages[target.name].totals()
        answered = sum(step["ok"] for step in steps.values()) or 1
        # The database's counters span the phase: per request it served, those wrk cut off at a turn's end included
        served = usage.get("served") or answered
        per_request = {
            name: usage[key] * factor / (answered if key.startswith("cpu_") else served)
            for key, (name, factor) in PER_REQUEST.items()
            if key in usage
        }
        target.results["non_streaming"] = {
            "steps": steps,
            "per_request": per_request,
            "answered": answered,
            "served": usage.get("served"),
        }


def bursts(args, target: Target) -> None:
    found = {}
    for count in args.streams:
        usage = Usage(target, database_counters=False)
        with usage.counting():
            result = stream_burst(args, target, count)
        result["cpu_own_ms_per_stream"] = usage.found["cpu_own_s"] * 1000 / max(1, result["ok"])
        found[count] = result
        time.sleep(2)
    target.results["bursts"] = found


def quiet(targets: list[Target], *, busy: float = 0.05, longest: float = 60.0) -> None:
    """Wait until the started targets are idle (their process trees used under `busy` of a core over the last
    second, or `longest` seconds passed): a server answers before all of its workers are up (LiteLLM's second
    worker still importing), and the cold burst of the target measured first would otherwise share the machine
    with another's start."""
    meters = [CpuMeter(target.processes) for target in targets if target.pid]
    started = time.monotonic()
    while time.monotonic() < started + longest:
        for meter in meters:
            meter.start()
        time.sleep(1)
        if sum(meter.stop() for meter in meters) < busy:
            break
    print(f"targets quiet after {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)


def run(args) -> dict:
    harness = Path(args.harness)
    work = Path(tempfile.mkdtemp(prefix="gw-bench-"))
    procs = Processes(work)
    for port in (FAST_PORT, SLOW_PORT) + ((LITELLM_PORT,) if args.litellm else ()):
        if not port_free(port):
            raise SystemExit(f"port {port} is in use: stop what listens there (another benchmark?) first")
    upstream = [sys.executable, str(harness / "fake_upstream.py"), "--first-byte-delay-ms", "0"]
    procs.start("upstream", [*upstream, "--port", str(FAST_PORT), "--chunks", "20", "--chunk-delay-ms", "50"])
    procs.start("upstream-slow", [*upstream, "--port", str(SLOW_PORT), "--chunks", "60", "--chunk-delay-ms", "500"])
    wait_http(f"http://127.0.0.1:{FAST_PORT}/health")
    wait_http(f"http://127.0.0.1:{SLOW_PORT}/health")
    direct = Target(
        "direct",
        f"http://127.0.0.1:{FAST_PORT}",
        "sk-direct",
        "fake-model",
        f"http://127.0.0.1:{SLOW_PORT}",
        "fake-model",
    )
    targets = [direct]
    database = f"gw_bench_run_{os.getpid()}"
    try:
        targets.append(boot_gateway(args, procs, work, database))
        if args.litellm:
            targets.append(boot_litellm(args, procs, work))
        quiet(targets)
        for target in targets:
            target.results["idle_rss_mb"] = rss_mb(target.processes())
            target.results["cold_burst"] = stream_burst(args, target, args.cold_burst)
        for target in targets:  # warm-up, unrecorded
            wrk(args, target, 4, 2)
            stream_burst(args, target, 20)
        non_streaming(args, targets)
        print("non-streaming done", file=sys.stderr, flush=True)
        for target in targets:
            bursts(args, target)
            print(f"{target.name}: bursts done", file=sys.stderr, flush=True)
        for target in targets:
            target.results["held"] = asyncio.run(held_and_probes(args, target, args.held))
            time.sleep(3)
            print(f"{target.name}: held streams done", file=sys.stderr, flush=True)
        for target in targets:
            target.results["later_burst"] = stream_burst(args, target, args.cold_burst)
            target.results["end_rss_mb"] = rss_mb(target.processes())
    finally:
        procs.stop_all()
        psql("postgres", f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    return {target.name: target.results for target in targets}


# ---- the table -----------------------------------------------------------------------------------


def table(results: dict, args) -> str:
    """One markdown table, a column per target; a cell that does not apply (or was not measured) is "-"."""
    direct = results["direct"]
    largest = max(args.streams)

    def steps(found: dict) -> dict:
        return found["non_streaming"]["steps"]

    def per_request(found: dict) -> dict:
        return found["non_streaming"]["per_request"]

    def own_cpu(found: dict) -> str:
        return f"{per_request(found)['cpu_own_ms']:.2f} ms"

    def beside(found: dict) -> str:
        if "cpu_postgres_ms" not in per_request(found):
            return "none"
        return f"{per_request(found)['cpu_postgres_ms']:.2f} + {per_request(found)['cpu_redis_ms']:.2f} ms"

    def database(found: dict) -> str:
        counts = per_request(found)
        return (
            f"{counts['pg_transactions']:.2f} / {counts['pg_scans']:.2f} / {counts['pg_rows_inserted']:.2f}"
            f" / {counts['pg_rows_updated']:.2f}"
        )

    def throughput(found: dict) -> str:
        return f"{steps(found)[16]['rps']:.0f} / {steps(found)[64]['rps']:.0f}"

    def added_p50(found: dict) -> str:
        p50 = steps(found)[1]["p50_ms"]
        return f"{p50 - steps(direct)[1]['p50_ms']:.2f} ms ({p50:.2f} ms)"

    def burst(count: int):
        def cell(found: dict) -> str:
            b = found["bursts"][count]
            return f"{b['ttft_p50_ms'] / 1000:.2f} s / {b['ttft_p99_ms'] / 1000:.2f} s ({b['ok']}/{b['n']})"

        return cell

    def stream_cpu(found: dict) -> str:
        return f"{found['bursts'][largest]['cpu_own_ms_per_stream']:.1f} ms"

    def probe(found: dict) -> str:
        held, baseline = found["held"], direct["held"]["probe_ttft_p50_ms"]
        note = "" if held["streaming"] == args.held else f" [{held['streaming']} streaming]"
        return f"{held['probe_ttft_p50_ms']:.1f} ms (+{held['probe_ttft_p50_ms'] - baseline:.1f}){note}"

    def memory(found: dict) -> str:
        return f"{found['idle_rss_mb']:.0f} / {found['held']['rss_mb']:.0f} / {found['end_rss_mb']:.0f} MB"

    def restart(found: dict) -> str:
        cold, later = found["cold_burst"], found["later_burst"]
        return (
            f"{cold['ttft_p50_ms']:.0f} / {cold['ttft_p99_ms']:.0f} ms;"
            f" later {later['ttft_p50_ms']:.0f} / {later['ttft_p99_ms']:.0f} ms"
        )

    rows = [
        ("CPU per non-streaming request (own processes)", own_cpu, False),
        ("PostgreSQL + Redis CPU per request (beside it)", beside, False),
        ("PostgreSQL transactions / table scans / rows inserted / row updates per request", database, False),
        ("requests/s at 16 / 64 concurrent", throughput, True),
        ("added p50 at concurrency 1 (p50 itself)", added_p50, True),
        *((f"{n:,} streams opened at once: TTFT p50 / p99 (completed)", burst(n), True) for n in args.streams),
        (f"CPU per stream (20 chunks, {largest:,}-stream burst)", stream_cpu, False),
        (f"new request's TTFT p50 while {args.held:,} streams are held (+ vs direct)", probe, True),
        ("idle RSS / with the streams held / at the end", memory, False),
        (f"{args.cold_burst}-stream burst right after start: TTFT p50 / p99", restart, True),
    ]
    lines = ["| | " + " | ".join(results) + " |", "|---|" + "---:|" * len(results)]
    for label, cell, for_direct in rows:
        values = []
        for name, found in results.items():
            try:
                values.append(cell(found) if for_direct or name != "direct" else "-")
            except (KeyError, TypeError):
                values.append("-")
        lines.append(f"| {label} | " + " | ".join(values) + " |")
    return "\n".join(lines)


SPEED_LOOP = "a pure-Python loop of 10^7 additions"


def python_speed() -> float:
    """CPU seconds of SPEED_LOOP on the interpreter the gateway runs on: shared and virtual machines differ, and
    vary over time, by more than most changes measured here."""
    loop = "import time\nt = time.process_time()\ns = 0\nfor i in range(10**7): s += i\nprint(time.process_time() - t)"
    python = str(ROOT / ".venv" / "bin" / "python")
    return float(subprocess.run([python, "-c", loop], capture_output=True, text=True, check=True).stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--harness", required=True, help="a writable copy of ../shared/bench, set up (run.sh does it)")
    parser.add_argument("--checkout", default=str(ROOT), help="the project checkout to boot (default: this one)")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/13", help="its database is flushed")
    parser.add_argument("--litellm", action="store_true", help="also LiteLLM (the harness's .venv-litellm)")
    parser.add_argument("--quick", action="store_true", help="about 2 minutes: the QUICK sizes below")
    parser.add_argument("--duration", type=float, help="seconds per non-streaming step (12; quick: 3)")
    parser.add_argument(
        "--rounds", type=int, help="turns a step's seconds are split into, targets interleaved (3; quick: 1)"
    )
    parser.add_argument("--streams", help="sizes of the bursts of streams opened at once (1000,200; quick: 200)")
    parser.add_argument("--held", type=int, help="slow streams held open while probing (1000; quick: 200)")
    parser.add_argument("--probes", type=int, help="new streams timed while they are held (20; quick: 5)")
    parser.add_argument("--cold-burst", type=int, help="streams in the burst right after start (300; quick: 200)")
    parser.add_argument("--json", help="also write the raw results here")
    args = parser.parse_args()
    for name, value in (QUICK if args.quick else FULL).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.streams = [int(n) for n in str(args.streams).split(",")]
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    args.turn_seconds = max(1, round(args.duration / args.rounds))  # wrk takes whole seconds
    started, load = time.monotonic(), os.getloadavg()[0]
    speed = [python_speed()]
    results = run(args)
    speed.append(python_speed())
    if args.json:
        Path(args.json).write_text(json.dumps({**results, "python_loop_s": speed}, indent=2))
    print(
        f"Non-streaming: wrk closed loop, {args.duration:g} s per step in {args.rounds} turns, targets interleaved; "
        f"streams: 20 chunks 50 ms apart; held streams: 60 chunks 500 ms apart. "
        f"Run took {time.monotonic() - started:.0f} s; load average "
        f"{load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end (2 cores: above 2, others compete). "
        f"The machine's speed: {SPEED_LOOP} on the project's interpreter took {speed[0]:.2f} s of CPU at the start, "
        f"{speed[1]:.2f} s at the end (compare figures across machines, or runs, by it).\n"
    )
    print(table(results, args))


if __name__ == "__main__":
    main()
