"""Workers start warm (issue 11): before a gunicorn worker accepts its first connection it has imported what a
request needs, opened its database pool and Redis client and loaded the catalog, so a burst right after a
restart does not pay for that all at once."""

import json
import os
import re
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest
import requests
from django.conf import settings

from gateway.billing.provisioning import account_provision
from tests import live
from tests.live import ROOT, LiveGateway
from tests.support import Persona

pytestmark = pytest.mark.live

# Run in a fresh interpreter: warm up as a worker does, then serve one real request and list the modules of
# the project, DRF and Django that the request still had to import.
FIRST_REQUEST = """
import json, sys
import gateway.wsgi
summary = gateway.wsgi.warm_up()
from django.test import Client
client = Client()
before = set(sys.modules)
response = client.post(
    "/api/v1/responses", {"model": "standin/echo", "input": "Hi"}, content_type="application/json",
    HTTP_AUTHORIZATION="Bearer " + sys.argv[1], HTTP_HOST="127.0.0.1",
)
prefixes = ("gateway", "routing", "responses_api", "byok", "plugins", "guardrails", "rest_framework", "django")
late = sorted(m for m in set(sys.modules) - before if m.split(".")[0] in prefixes)
body = response.content[:300].decode()
print(json.dumps({"summary": summary, "status": response.status_code, "late": late, "body": body}))
"""


def gateway_env() -> dict:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gateway.settings.base",
        "DATABASE_URL": live.test_database_url(),
        "SECRET_KEY": settings.SECRET_KEY,
        "GATEWAY_ENCRYPTION_KEYS": settings.GATEWAY_ENCRYPTION_KEYS,
        "LOG_LEVEL": "WARNING",
    }


def test_after_warm_up_the_first_request_imports_nothing(transactional_db, standin_catalog):
    key = Persona(account_provision(name="warm", plan="payg", credits=Decimal("5"))).api_key
    run = subprocess.run(
        [sys.executable, "-c", FIRST_REQUEST, key],
        cwd=ROOT,
        env=gateway_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert found["status"] == 200, found
    assert "URLconf ready (/api/v1/responses -> ResponseCreateApi)" in found["summary"]
    assert "database ok (catalog loaded)" in found["summary"]
    assert found["late"] == [], found["late"]


def test_each_gunicorn_worker_is_warm_before_it_accepts(transactional_db, standin_catalog):
    key = Persona(account_provision(name="warm-live", plan="payg", credits=Decimal("5"))).api_key
    gateway = LiveGateway(workers=2, threads=4)
    try:
        log = Path(gateway.log.name)
        deadline = time.monotonic() + 30
        while log.read_text().count(" accepting: ") < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        warm = [line for line in log.read_text().splitlines() if " warm in " in line]
        assert len(warm) == 2, log.read_text()[-2000:]  # one line per worker, written before it accepts
        for line in warm:
            assert "URLconf ready (/api/v1/responses -> ResponseCreateApi)" in line
            assert re.search(r"database ok \(catalog loaded\), \d+ connections open", line), line
            # and what the warm-up built is out of the collector's sight (gc.freeze)
            frozen = re.search(r"(\d+) objects frozen", line)
            assert frozen and int(frozen[1]) > 100_000, line
        # and neither accepts before both are warm: a burst right after the start is shared, not taken by the first
        lines = log.read_text().splitlines()
        warm_at = [i for i, line in enumerate(lines) if " warm in " in line]
        accepting_at = [i for i, line in enumerate(lines) if "accepting: 2 of 2 workers warm" in line]
        assert len(accepting_at) == 2 and min(accepting_at) > max(warm_at), "\n".join(lines[-20:])
        answer = requests.post(
            f"{gateway.api}/responses",
            json={"model": "standin/echo", "input": "Hi"},
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
    finally:
        gateway.stop()


def test_a_workers_warm_up_opens_the_whole_database_pool_and_keeps_it_open(transactional_db):
    # In a fresh interpreter, as a worker (this test process's pool may hold connections other tests' threads kept)
    script = (
        "import json\n"
        "import gateway.wsgi\n"
        "from django.db import connection\n"
        "from routing.snapshot import current_snapshot\n"
        "current_snapshot()\n"  # what warm_up does first: the pool is open
        "connection.close()\n"
        "pool = getattr(connection, 'pool', None)\n"
        "had = (pool.min_size, pool.get_stats()['pool_size']) if pool else None\n"
        "opened = gateway.wsgi._open_database_connections(None)\n"
        "print(json.dumps({'opened': opened, 'had': had, 'size': pool and pool.get_stats()['pool_size'],\n"
        "    'min': pool and pool.min_size, 'max': pool and pool.max_size}))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=gateway_env(), capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    if found["had"] is None:  # SQLite: no pool, nothing to open
        assert found["opened"] == 0, found
        return
    # A worker's warm-up with the default count (None: the whole pool) opens every connection, no more, and the
    # pool keeps those it opened while idle (its min_size rises by as many)
    (kept, had), size = found["had"], found["max"]
    assert found["opened"] == found["size"] == size, found
    assert found["min"] == kept + (size - had) > kept, found
