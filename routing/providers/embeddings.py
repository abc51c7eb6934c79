"""Embeddings: the canonical request and result every adapter that supports them translates, and the OpenAI
wire format (https://platform.openai.com/docs/api-reference/embeddings) that OpenAI and compatible servers speak."""

import math
from dataclasses import dataclass
from typing import Any

from routing.canonical import Usage
from routing.errors import ErrorType, UpstreamError

MSG_MALFORMED = "The provider sent malformed embeddings"


@dataclass(frozen=True)
class EmbeddingRequest:
    model: str  # the upstream model id of the endpoint being called
    input: tuple[str | tuple[int, ...], ...]  # texts, or token arrays
    dimensions: int | None = None
    user: str | None = None  # already a keyed hash, never the caller's raw value


@dataclass(frozen=True)
class EmbeddingResponse:
    vectors: tuple[tuple[float, ...], ...]  # one per input, in input order
    usage: Usage
    model: str | None = None


def openai_body(request: EmbeddingRequest) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": request.model,
        "input": [item if isinstance(item, str) else list(item) for item in request.input],
        "encoding_format": "float",  # the gateway encodes base64 itself when asked
    }
    if request.dimensions is not None:
        body["dimensions"] = request.dimensions
    if request.user:
        body["user"] = request.user
    return body


def _tokens(value: object) -> int:
    """A reported count, or 0 when it is not a finite number (billing then estimates and records it)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return 0
    return int(value)


def _vector(value: object) -> tuple[float, ...]:
    if not isinstance(value, list) or not value:
        raise ValueError("an embedding must be a non-empty array")
    vector = tuple(float(number) for number in value)
    if not all(math.isfinite(number) for number in vector) or any(isinstance(n, bool) for n in value):
        raise ValueError("an embedding must be finite numbers")
    return vector


def openai_parse(body: dict[str, Any], *, expected: int) -> EmbeddingResponse:
    """The vectors in input order (by each entry's `index`); exactly one per input, or the attempt failed."""
    data = body.get("data")
    if not isinstance(data, list) or len(data) != expected:
        raise UpstreamError(error_type=ErrorType.PROVIDER_UNAVAILABLE, message=MSG_MALFORMED, retryable=True)
    vectors: list[tuple[float, ...] | None] = [None] * expected
    try:
        for position, entry in enumerate(data):
            if not isinstance(entry, dict):
                raise ValueError("an entry must be an object")
            index = entry.get("index", position)
            if not isinstance(index, int) or not 0 <= index < expected or vectors[index] is not None:
                raise ValueError("bad index")
            vectors[index] = _vector(entry.get("embedding"))
    except (ValueError, TypeError):
        raise UpstreamError(error_type=ErrorType.PROVIDER_UNAVAILABLE, message=MSG_MALFORMED, retryable=True) from None
    usage = body.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    model = body.get("model")
    return EmbeddingResponse(
        vectors=tuple(v for v in vectors if v is not None),
        usage=Usage(input_tokens=_tokens(usage.get("prompt_tokens"))),
        model=model if isinstance(model, str) else None,
    )
