"""Golden-file helpers: compare against tests/fixtures/...; GOLDEN_UPDATE=1 rewrites the files (review the diff)."""

import dataclasses
import json
import os
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"


def to_jsonable(value):
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            "type": type(value).__name__,
            **{f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)},
        }
    if isinstance(value, list | tuple):
        return [to_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {key: to_jsonable(item) for key, item in value.items()}
    return value


def assert_golden(relative: str, actual) -> None:
    path = FIXTURES / relative
    actual = json.loads(json.dumps(to_jsonable(actual)))
    if os.environ.get("GOLDEN_UPDATE"):
        path.write_text(json.dumps(actual, indent=2, sort_keys=True) + "\n")
    expected = json.loads(path.read_text())
    assert actual == expected, f"{relative} differs from the golden file"


def stream_fixture(kind: str) -> bytes:
    """Recorded stream bodies: SSE text, or Bedrock's binary event stream."""
    binary = FIXTURES / f"adapters/{kind}/stream.bin"
    return binary.read_bytes() if binary.exists() else (FIXTURES / f"adapters/{kind}/stream.sse").read_bytes()
