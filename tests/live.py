"""A real gunicorn gateway on a loopback port, sharing the test database (for SDK and HTTP tests)."""

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import redis as redis_client
import requests
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or "postgres"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{user}{password}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


class LiveGateway:
    def __init__(self, *, workers: int = 2, threads: int = 16, extra_env: dict | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "gateway.settings.base",
            "DATABASE_URL": test_database_url(),
            "SECRET_KEY": settings.SECRET_KEY,
            "GATEWAY_ENCRYPTION_KEYS": settings.GATEWAY_ENCRYPTION_KEYS,
            "STREAM_KEEPALIVE_SECONDS": "0.2",
            "DB_CONN_MAX_AGE": "0",
            "LOG_LEVEL": "WARNING",
            # Tests change keys and the catalog in this process and use them at once over HTTP: no 0.5 s window.
            "CACHE_VERSION_CHECK_SECONDS": "0",
            # Workers keep what they open at start (the whole pool by default): several live gateways at once
            # (instances sharing Redis, or one test's left while the next starts) would fill max_connections.
            "GUNICORN_WARM_DB_CONNECTIONS": "2",
            **(extra_env or {}),
        }
        self.log = open(ROOT / f".live-gateway-{self.port}.log", "w")  # noqa: SIM115
        self.process = subprocess.Popen(
            # The same gunicorn settings as scripts/run.sh (worker class, request limits), fewer workers (the
            # thread count only matters to GUNICORN_WORKER_CLASS=gthread).
            [
                sys.executable,
                "-m",
                "gunicorn",
                "-c",
                "python:gateway.gunicorn_conf",
                "gateway.wsgi:application",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                str(workers),
                "--threads",
                str(threads),
                "--timeout",
                "60",
                "--graceful-timeout",
                "2",
            ],
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("the live gateway did not start: " + (ROOT / self.log.name).read_text()[-2000:])

    @property
    def api(self) -> str:
        return f"{self.url}/api/v1"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)


REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


class PrivateRedis:
    """A redis-server of our own on a loopback port, to kill and restart mid-test."""

    def __init__(self, port: int | None = None):
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process = None
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if self.client().ping():
                    return
            except redis_client.RedisError:
                time.sleep(0.05)
        raise RuntimeError("the private redis-server did not start")

    def client(self) -> redis_client.Redis:
        return redis_client.Redis.from_url(self.url, socket_connect_timeout=1, socket_timeout=1)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)
