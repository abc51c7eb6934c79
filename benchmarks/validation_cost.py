"""Benchmark: CPU spent parsing and validating a `POST /responses` body, per MiB, for hostile shapes.

    .venv/bin/python benchmarks/validation_cost.py [--mib 2] [--repeat 3]

For each shape it builds a body of about `--mib` MiB (or up to the shape's count limit, whichever is
smaller, and then also the oversized body, which must be refused cheaply), runs the JSON parser and the
request serializer in this process (no server, no database), and prints CPU seconds per MiB of body
(best of `--repeat`). Shapes: many small input items, many tools, many content parts in one message,
one long string, many function-call items, nesting at the depth limit, a too-deep body.
"""

import argparse
import io
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings.test")

import django  # noqa: E402

django.setup()

from rest_framework.exceptions import ParseError, ValidationError  # noqa: E402
from rest_framework.settings import api_settings  # noqa: E402

from responses_api.validation.request import ResponseCreateRequestSerializer  # noqa: E402

MIB = 1024 * 1024


def _fill(unit: dict, mib: float, cap: int | None) -> list:
    size = len(json.dumps(unit)) + 1
    count = max(1, int(mib * MIB / size))
    return [unit] * (min(count, cap) if cap else count)


def shapes(mib: float, over: bool) -> dict[str, bytes]:
    from responses_api.validation import limits

    cap = lambda n: None if over else n  # noqa: E731
    message = {"role": "user", "content": "hi"}
    tool = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}
    part = {"type": "input_text", "text": "hi"}
    call = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
    tools = _fill(tool, mib, cap(limits.MAX_TOOLS))
    for index, item in enumerate(tools):  # unique names
        tools[index] = {**item, "name": f"f{index}"}
    deep = {"type": "object"}
    for _ in range((limits.MAX_JSON_DEPTH - 8) // 2):  # two levels each
        deep = {"type": "object", "properties": {"x": deep}}
    bodies = {
        "small input items": {"model": "a/b", "input": _fill(message, mib, cap(limits.MAX_INPUT_ITEMS))},
        "tools": {"model": "a/b", "input": "hi", "tools": tools},
        "content parts": {
            "model": "a/b",
            "input": [{"role": "user", "content": _fill(part, mib, cap(limits.MAX_CONTENT_PARTS))}],
        },
        "function calls": {"model": "a/b", "input": _fill(call, mib, cap(limits.MAX_INPUT_ITEMS))},
        "one long string": {"model": "a/b", "input": "x" * int(mib * MIB)},
        "tools nested to the limit": {
            "model": "a/b",
            "input": "hi",
            "tools": [{"type": "function", "name": f"f{i}", "parameters": deep} for i in range(limits.MAX_TOOLS)],
        },
    }
    encoded = {name: json.dumps(body).encode() for name, body in bodies.items()}
    if over:
        count = int(mib * MIB / 3)
        encoded["empty arrays [[],[],...]"] = b'{"model": "a/b", "input": [' + b",".join([b"[]"] * count) + b"]}"
        encoded["metadata keys"] = json.dumps(
            {"model": "a/b", "input": "hi", "metadata": {f"k{i}": "v" for i in range(int(mib * MIB / 14))}}
        ).encode()
        encoded["too deep (100,000 levels)"] = b'{"model": "a/b", "input": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    return encoded


def validate(raw: bytes) -> str:
    parser = api_settings.DEFAULT_PARSER_CLASSES[0]()
    try:
        data = parser.parse(io.BytesIO(raw), "application/json", {})
    except ParseError as exc:
        return f"400 parse: {str(exc.detail)[:60]}"
    except Exception as exc:  # noqa: BLE001 -- a crash is an outcome worth reporting (it was a 500)
        return f"500 {type(exc).__name__}"
    serializer = ResponseCreateRequestSerializer(data=data)
    try:
        serializer.is_valid(raise_exception=True)
    except ValidationError as exc:
        return f"400 {str(exc.detail)[:60]}"
    except Exception as exc:  # noqa: BLE001
        return f"500 {type(exc).__name__}"
    return "valid"


def measure(raw: bytes, repeat: int) -> tuple[float, str]:
    best, outcome = float("inf"), ""
    for _ in range(repeat):
        start = time.process_time()
        outcome = validate(raw)
        best = min(best, time.process_time() - start)
    return best, outcome


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for over in (False, True):
        print("bodies over the count limits (refused):" if over else "bodies within the count limits:")
        for name, raw in shapes(args.mib, over).items():
            cpu, outcome = measure(raw, args.repeat)
            mib = len(raw) / MIB
            print(f"  {name:28s} {mib:7.2f} MiB  {cpu:7.3f} s CPU  {cpu / mib:7.3f} s/MiB  {outcome}")


if __name__ == "__main__":
    main()
