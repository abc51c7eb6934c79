"""A bounded, deterministic schemathesis run of the live OpenAPI schema against a live gunicorn gateway
with a provisioned account: zero server errors and zero disagreements between schema and validation.

In the suite: the examples and fuzzing phases, 20 examples per operation (about 400 requests, under a
minute). `make fuzz` adds the coverage phase (boundary values of every constraint, about 3,000 requests)
and 100 examples per operation. /responses calls reach the stand-in provider at most (the catalog is the
stand-in's); generated model ids are unknown, a cheap 404 path.
"""

import os
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from gateway.accounts.services import api_key_create
from gateway.billing.provisioning import account_provision
from tests.schema_fuzz_hooks import schemathesis_command
from tests.support import Persona

pytestmark = pytest.mark.live
ROOT = Path(__file__).parents[2]


def run_fuzz(
    api: str, persona: Persona, *, max_examples: int, phases: str, timeout: float
) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "tests.schema_fuzz_hooks",
        "GW_FUZZ_INFERENCE_KEY": persona.api_key,
        "GW_FUZZ_MANAGEMENT_KEY": persona.management_key,
        "GW_FUZZ_KEY_HASH": api_key_create(account_id=persona.account_id, name="fuzz target").key.hash,
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.run(
        schemathesis_command(api, max_examples=max_examples, phases=phases),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def fuzzy(transactional_db, standin_catalog):
    """A funded account whose data is committed, so the gunicorn processes see it."""
    return Persona(account_provision(name="fuzzy", plan="payg", credits=Decimal("5")))


def test_live_schema_has_no_server_errors_or_disagreements(live_gateway, fuzzy):
    result = run_fuzz(
        live_gateway.api,
        fuzzy,
        max_examples=int(os.environ.get("FUZZ_MAX_EXAMPLES", "20")),
        phases=os.environ.get("FUZZ_PHASES", "examples,fuzzing"),
        timeout=float(os.environ.get("FUZZ_TIMEOUT", "300")),
    )
    report = result.stdout[-30000:] + result.stderr[-5000:]
    assert result.returncode == 0, report
    assert " generated, " in result.stdout and " passed" in result.stdout, report
