"""Schemathesis hooks for tests/e2e/test_schema_fuzz.py and `make fuzz` (SCHEMATHESIS_HOOKS=tests.schema_fuzz_hooks).

- Auth: each operation gets the key kind it needs (inference for the front doors, management for the rest),
  from GW_FUZZ_INFERENCE_KEY and GW_FUZZ_MANAGEMENT_KEY.
- A check that a schema-valid request is never refused for its *shape*: a 400 on positive data must be a
  semantic refusal (an unknown model, provider or workspace), never a type, length, blank or required
  error, which would mean the schema promises something the validation refuses.
"""

import os
import re
import sys
from pathlib import Path

import schemathesis
from schemathesis import Case

INFERENCE_PATHS = ("/responses", "/chat/completions", "/messages", "/messages/count_tokens", "/embeddings")  # doors

CONFIG = str(Path(__file__).with_name("schemathesis.toml"))
SHAPE_ERRORS = re.compile(
    r"must be a JSON |must be a finite JSON number|must be an integer|must be \"true\" or \"false\"|"
    r"is required|This field is required|may not be blank|must not be empty|may not be null|must not be null|"
    r"Ensure this (field|value)|no more than|at least \d|is not a valid choice|must be one of|Not a valid|"
    r"valid UUID|must be a UUID|Datetime has wrong format|Expected a (list|dictionary)|must be an? (object|array)|"
    r"Malformed JSON|must be a string|characters|Enter a valid",
)


@schemathesis.auth()
class GatewayKeys:
    def get(self, case, ctx):
        return {"inference": os.environ["GW_FUZZ_INFERENCE_KEY"], "management": os.environ["GW_FUZZ_MANAGEMENT_KEY"]}

    def set(self, case, data, ctx):
        kind = "inference" if case.path in INFERENCE_PATHS else "management"
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data[kind]}"}


@schemathesis.check
def schema_valid_requests_pass_validation(ctx, response, case: Case):
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or response.status_code != 400:
        return None
    try:
        message = response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        raise AssertionError(f"400 without the error envelope: {response.text[:300]}") from None
    if SHAPE_ERRORS.search(message):
        raise AssertionError(f"schema-valid request refused for its shape: {message[:500]}")
    return None


SERVER_ERROR = "ST101"  # the failure code of `not_a_server_error` in the JSON run report
CHECKS = (
    "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,"
    "positive_data_acceptance,negative_data_rejection,schema_valid_requests_pass_validation"
)


def schemathesis_command(
    api: str, *, max_examples: int, phases: str = "examples,coverage,fuzzing", report: Path | None = None
) -> list[str]:
    reporting = ["--report", "json", "--report-json-path", str(report)] if report is not None else []
    return [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        CONFIG,
        "run",
        f"{api}/openapi.json",
        "--url",
        api,
        "--checks",
        CHECKS,
        "--max-examples",
        str(max_examples),
        "--generation-deterministic",
        "--generation-allow-x00",
        "false",
        "--phases",
        phases,
        "--workers",
        "1",
        "--request-timeout",
        "20",
        "--no-color",
        "--suppress-health-check",
        "all",
        "--continue-on-failure",
        "--output-truncate",
        "false",
        *reporting,
    ]
