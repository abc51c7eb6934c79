"""A bounded, deterministic schemathesis run of the live OpenAPI schema against a live gunicorn gateway
with a provisioned account: zero server errors and zero disagreements between schema and validation.

In the suite (and so in CI): the examples, coverage and fuzzing phases, 20 examples per operation. The coverage
phase sends the boundary values of every constraint and every kind of invalid value the schema rules out (about
9,500 requests; the test takes about 75 s on an idle two-core machine, 18 s without that phase); it is what found
the 500 on `stop_server_tools_when: [{"type": []}]` that the random phases missed. `make fuzz` runs 100 examples
per operation. /responses calls reach the stand-in provider at most (the catalog is the stand-in's); generated
model ids are unknown, a cheap 404 path.

The verdict is read from schemathesis's JSON run report (`--report json`): the failures grouped by check, so a
server error (check `not_a_server_error`, code ST101) is asserted on by name, then every other check.
"""

import json
import os
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from gateway.accounts.services import api_key_create
from gateway.billing.provisioning import account_provision
from tests.schema_fuzz_hooks import SERVER_ERROR, schemathesis_command
from tests.support import Persona

pytestmark = pytest.mark.live
ROOT = Path(__file__).parents[2]
PHASES = "examples,coverage,fuzzing"
MIN_COVERAGE_CASES = 5000  # the coverage phase makes about 9,500: far fewer means it did not run its course


def run_fuzz(
    api: str, persona: Persona, *, max_examples: int, phases: str, timeout: float, report: Path
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
        schemathesis_command(api, max_examples=max_examples, phases=phases, report=report),
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


def test_live_schema_has_no_server_errors_or_disagreements(live_gateway, fuzzy, tmp_path):
    phases = os.environ.get("FUZZ_PHASES", PHASES)
    report_path = tmp_path / "schemathesis.json"
    result = run_fuzz(
        live_gateway.api,
        fuzzy,
        max_examples=int(os.environ.get("FUZZ_MAX_EXAMPLES", "20")),
        phases=phases,
        timeout=float(os.environ.get("FUZZ_TIMEOUT", "600")),
        report=report_path,
    )
    output = result.stdout[-30000:] + result.stderr[-5000:]
    assert report_path.exists(), output
    report = json.loads(report_path.read_text())
    # No request, however malformed, is answered with a 5xx.
    server_errors = [failure for failure in report["failures"] if failure["code"] == SERVER_ERROR]
    assert server_errors == [], output
    # Every phase asked for ran to its end without errors (examples skips: the schema has none), and every other
    # check passed.
    statuses = {name: phase["status"] for name, phase in report["phases"].items() if name in phases.split(",")}
    assert set(statuses.values()) <= {"success", "skip"}, f"{statuses}\n{output}"
    assert report["complete"] and report["errors"] == [] and report["failures"] == [], output
    assert result.returncode == 0, output
    if "coverage" in phases:
        assert statuses["coverage"] == "success", statuses
        assert report["test_cases"]["generated"] >= MIN_COVERAGE_CASES, report["test_cases"]
