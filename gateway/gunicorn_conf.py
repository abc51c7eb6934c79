"""gunicorn settings of the gateway: `gunicorn -c python:gateway.gunicorn_conf gateway.wsgi:application`.

scripts/run.sh and the live tests (tests/live.py) both start gunicorn with this file, and ./gunicorn.conf.py
loads it when gunicorn starts without -c; command-line flags override it. Each worker warms up before it
accepts, and waits for its siblings to be warm too (post_worker_init below). Environment: WEB_CONCURRENCY
(worker processes), GUNICORN_WORKER_CLASS (gevent, the default, or gthread), GUNICORN_WORKER_CONNECTIONS
(connections per gevent worker), GUNICORN_THREADS (threads per gthread worker), GUNICORN_MAX_REQUESTS_PER_CONNECTION
(requests one connection may send before it is closed; 100; 0: no limit; a negative value is refused).

gevent serves each connection in a greenlet on one thread per worker: a stream waiting for its provider costs
no thread, and switching between requests costs no thread wake-up. In one run of benchmarks/run.sh (2 cores):
gateway CPU per request 3.9 ms (gthread 4.9-6.3), requests/s at 16 connections 328 (gthread 219-242), CPU per
20-chunk stream 6.2 ms (gthread 8.7-9.2), 1,000 streams opened at once TTFT p99 4.8 s (gthread 6.2-7.1).

Limits on what reaches the application (a reverse proxy in front should be at least as strict; see "Behind a
reverse proxy" in docs/limits-and-hardening.md): the request line (method + URL) at most 8190 bytes (414 above),
at most 100 header fields of at most 8190 bytes each (431 above). Bodies are limited and given a deadline by the
application (gateway/request_body.py: MAX_REQUEST_BODY_BYTES, REQUEST_BODY_TIMEOUT_SECONDS).
"""

from __future__ import annotations

import gc
import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gunicorn.arbiter import Arbiter
    from gunicorn.http.message import Request
    from gunicorn.workers.base import Worker

# Metrics from every worker (gateway/console/metrics.py): prometheus_client's multiprocess mode, whose files live
# in PROMETHEUS_MULTIPROC_DIR (set here, before any worker imports the client; emptied when the server starts).
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(Path(tempfile.gettempdir()) / f"gateway-metrics-{os.getpid()}"))

wsgi_app = "gateway.wsgi:application"
# Answering protocol errors (malformed requests gunicorn refuses itself) in the JSON error body.
WORKER_CLASSES = {
    "gevent": "gateway.gunicorn_worker.JsonErrorGeventWorker",
    "gthread": "gateway.gunicorn_worker.JsonErrorThreadWorker",
}
worker_class = WORKER_CLASSES[os.environ.get("GUNICORN_WORKER_CLASS", "gevent")]
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
worker_connections = int(os.environ.get("GUNICORN_WORKER_CONNECTIONS", "1000"))  # gevent: 2 x 1,000
threads = int(os.environ.get("GUNICORN_THREADS", "512"))  # gthread: 2 x 512, 1,000 streams open at once
timeout = 120
graceful_timeout = 10
keepalive = 5  # seconds a kept-alive connection may sit idle between requests

# Requests served on one connection before the worker closes it (GUNICORN_MAX_REQUESTS_PER_CONNECTION, default 100;
# 0: no limit). gunicorn (27.0) has no setting for it: `keepalive` is an idle timeout, `max_requests` restarts a
# whole worker, `worker_connections` caps simultaneous clients. A client pipelining many requests on one connection
# had them served back to back by one greenlet, holding its worker for all of them (issue 28: 20 connections x 50
# pipelined GET /models stalled everyone for 18 s). The documented pre_request hook below marks the limit's last
# request to close (gunicorn then answers it with `Connection: close` and drops what was pipelined behind it), and
# lets the worker's other connections run between a connection's requests. Behind nginx, `keepalive_requests`
# bounds the client's connection the same way (compose.yaml).


def _max_requests_per_connection() -> int:
    """GUNICORN_MAX_REQUESTS_PER_CONNECTION, a count: a negative one would close every connection after its first
    request (pre_request: req_number >= limit), so it is refused when gunicorn reads this file (it then exits with
    "Failed to read config file" and this message), like anything that is not a whole number."""
    value = os.environ.get("GUNICORN_MAX_REQUESTS_PER_CONNECTION", "100").strip()
    try:
        limit = int(value)
    except ValueError:
        limit = -1
    if limit < 0:
        raise ValueError(
            f"GUNICORN_MAX_REQUESTS_PER_CONNECTION must be a whole number >= 0 (0: no limit), not {value!r}"
        )
    return limit


MAX_REQUESTS_PER_CONNECTION = _max_requests_per_connection()

limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190


# Connections each worker opens before its first request (a burst right after a restart would otherwise open
# them while it waits), read in the worker (where the settings have read .env): GUNICORN_WARM_DB_CONNECTIONS
# (default: the whole pool, DB_POOL_MAX_SIZE; the pool then keeps them open) and GUNICORN_WARM_REDIS_CONNECTIONS.
# The database's count per worker x workers x instances must fit its max_connections.
WARM_REDIS_CONNECTIONS = 128
GC_YOUNG_THRESHOLD = 10_000  # allocations between young-generation collections (Python's default: 700)
# Each warm worker leaves a mark here (a file named by its pid), then waits for its siblings' before it accepts, at
# most WARM_WAIT_SECONDS: the first worker warm would otherwise take a burst that comes right after a (re)start
# alone, until the others are (one worker's share of the CPU for two workers' load). A worker that starts later
# (a replaced one) finds its siblings' marks and waits for nothing. One directory per server (master process).
WARM_MARKS = Path(tempfile.gettempdir()) / f"gateway-warm-{os.getpid()}"
WARM_WAIT_SECONDS = 10.0


def _count(name: str, default: int | None) -> int | None:
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


def post_worker_init(worker: Worker) -> None:
    """Warm each worker before it accepts its first connection (gateway/wsgi.py warm_up), rather than
    preloading the application in the master: nothing is shared across the fork (no connection, client or
    thread to close in each child), and the master stays small (RSS is counted per process)."""
    from gateway.wsgi import warm_up

    summary = warm_up(
        database_connections=_count("GUNICORN_WARM_DB_CONNECTIONS", None),
        redis_connections=_count("GUNICORN_WARM_REDIS_CONNECTIONS", WARM_REDIS_CONNECTIONS) or 0,
    )
    # What the warm-up built lives as long as the worker: out of the collector's sight (gc.freeze), and fewer
    # young-generation collections per request (most request garbage is freed by reference counting anyway).
    # In-process, the benchmark's request: collector time 0.084 -> 0.041 ms per request.
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, 20, 20)
    worker.log.info("worker %s %s, %d objects frozen", worker.pid, summary, gc.get_freeze_count())
    expected = getattr(worker, "warm_expected", worker.cfg.workers)
    started = time.monotonic()
    warm = _siblings_warm(worker.pid, expected, deadline=started + WARM_WAIT_SECONDS)
    waited = (time.monotonic() - started) * 1000
    worker.log.info("worker %s accepting: %d of %d workers warm (waited %.0f ms)", worker.pid, warm, expected, waited)


def pre_request(worker: Worker, req: Request) -> None:
    """Before each request: a connection's requests after the first wait their turn behind the worker's other
    connections (time.sleep(0): a greenlet switch under gevent, whose patching makes it one; a thread switch under
    gthread), and the last one MAX_REQUESTS_PER_CONNECTION allows is answered with `Connection: close`.
    `req.req_number` is the request's number on its connection (gunicorn counts from 1); a request marked to close
    is closed after its answer, as one that asked with `Connection: close` itself."""
    if req.req_number > 1:
        time.sleep(0)
    if MAX_REQUESTS_PER_CONNECTION and req.req_number >= MAX_REQUESTS_PER_CONNECTION:
        # gunicorn has no setting for this, and drops a `Connection` header the application sets (hop-by-hop):
        # marking the request is the one way to have gunicorn close the connection after its answer.
        req.must_close = True


def _marks() -> list[Path]:
    return [path for path in WARM_MARKS.iterdir() if path.name.isdigit()] if WARM_MARKS.is_dir() else []


def _siblings_warm(pid: int, workers: int, *, deadline: float) -> int:
    """Mark this worker warm, then wait until `workers` are (or the deadline); how many are."""
    WARM_MARKS.mkdir(parents=True, exist_ok=True)
    (WARM_MARKS / str(pid)).touch()
    while (warm := len(_marks())) < workers and time.monotonic() < deadline:
        time.sleep(0.01)
    return warm


def _clear_marks() -> None:
    for mark in _marks():
        mark.unlink(missing_ok=True)


def pre_fork(server: Arbiter, worker: Worker) -> None:
    """How many workers this one waits for: the server's number now (TTIN / TTOU change it)."""
    worker.warm_expected = server.num_workers


def on_reload(server: Arbiter) -> None:
    """A reload (HUP) replaces every worker: the new ones wait for each other, not for the old ones' marks."""
    _clear_marks()


def on_starting(server: Arbiter) -> None:
    """A fresh metrics directory (counters start at zero with the server, not with a previous run's files), and no
    worker marked warm yet."""
    directory = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.db"):
        stale.unlink()
    _clear_marks()  # no worker of this server is warm yet


def child_exit(server: Arbiter, worker: Worker) -> None:
    """A worker that exits leaves its counters (summed on) but not its live gauges (open streams)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
    (WARM_MARKS / str(worker.pid)).unlink(missing_ok=True)  # its replacement waits for no one
