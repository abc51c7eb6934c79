"""The stand-in's OpenAI-compatible /embeddings: deterministic vectors (a hash of each input, unit length, not
meaning), scripted like the other paths (status, latency, key; a `<<standin {...}>>` directive in an input)."""

import hashlib
import json
import math
import struct
import time
from typing import TYPE_CHECKING, Any

from routing.standin import formats
from routing.standin.script import Script, directive

if TYPE_CHECKING:
    from routing.standin.server import StandinHandler

DEFAULT_DIMENSIONS = 8
MAX_DIMENSIONS = 4096


def vector(value: str | list[int], dimensions: int) -> list[float]:
    """A unit vector from the input's SHA-256 stream: the same input always gives the same vector."""
    seed = json.dumps(value).encode()
    raw: list[float] = []
    counter = 0
    while len(raw) < dimensions:
        digest = hashlib.sha256(seed + counter.to_bytes(4, "big")).digest()
        raw += [number / 2**31 - 1 for number in struct.unpack(">8I", digest)]
        counter += 1
    raw = raw[:dimensions]
    norm = math.sqrt(sum(x * x for x in raw)) or 1.0
    return [x / norm for x in raw]


def _inputs(value: object) -> list[Any]:
    if isinstance(value, str) or (isinstance(value, list) and value and all(isinstance(v, int) for v in value)):
        return [value]
    return value if isinstance(value, list) else []


def body(payload: dict[str, Any]) -> dict[str, Any]:
    inputs = _inputs(payload.get("input"))
    dimensions = payload.get("dimensions") or DEFAULT_DIMENSIONS
    tokens = sum(len(item) if isinstance(item, list) else max(1, len(item) // 4) for item in inputs)
    return {
        "object": "list",
        "model": payload.get("model", "standin-embed"),
        "data": [
            {"object": "embedding", "index": i, "embedding": vector(item, dimensions)} for i, item in enumerate(inputs)
        ],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def answer(handler: "StandinHandler", payload: dict[str, Any], script: Script, credential: str) -> None:
    """Answer one embeddings request on `handler` (a StandinHandler)."""
    inputs = _inputs(payload.get("input"))
    script = script.merged(directive("\n".join(item for item in inputs if isinstance(item, str))))
    if script.latency_ms:
        time.sleep(script.latency_ms / 1000)
    status = script.status
    if status == 200 and (not credential or (script.key and credential != script.key)):
        status = 401
    dimensions = payload.get("dimensions")
    if status == 200 and (not inputs or (dimensions is not None and not 0 < dimensions <= MAX_DIMENSIONS)):
        status = 400
    if status != 200:
        handler._send_error(status, formats.openai_error(status), script)
        return
    handler._send_bytes(200, json.dumps(body(payload)).encode(), "application/json")
