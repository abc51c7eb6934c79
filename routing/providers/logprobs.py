"""Token log probabilities in OpenAI's shape, shared by both OpenAI wire formats and our own answers:
`{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}` per token
(https://platform.openai.com/docs/api-reference/chat/object, choices[].logprobs.content; the Responses API's
output_text.logprobs). Upstream values are checked: a malformed entry is dropped, never a failed answer."""

import math
from typing import Any

from routing.canonical import TokenLogprob, TopLogprob

MAX_TOP_LOGPROBS = 20  # OpenAI's bound on top_logprobs, on both APIs


def _bytes(value: object) -> tuple[int, ...] | None:
    if isinstance(value, list) and all(isinstance(b, int) and not isinstance(b, bool) and 0 <= b < 256 for b in value):
        return tuple(value)
    return None


def _logprob(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _top(raw: object) -> TopLogprob | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("token"), str):
        return None
    logprob = _logprob(raw.get("logprob"))
    return None if logprob is None else TopLogprob(token=raw["token"], logprob=logprob, bytes=_bytes(raw.get("bytes")))


def parse_tokens(raw: object) -> tuple[TokenLogprob, ...]:
    """A wire list of token logprobs as canonical ones (empty for anything else)."""
    tokens = []
    for entry in raw if isinstance(raw, list) else ():
        head = _top(entry)
        if head is None:
            continue
        alternatives = entry.get("top_logprobs")
        tops = tuple(top for top in map(_top, alternatives if isinstance(alternatives, list) else ()) if top)
        tokens.append(TokenLogprob(head.token, head.logprob, head.bytes, tops[:MAX_TOP_LOGPROBS]))
    return tuple(tokens)


def _utf8(token: str, known: tuple[int, ...] | None) -> list[int]:
    return list(known) if known is not None else list(token.encode("utf-8", "surrogatepass"))


def token_dicts(tokens: tuple[TokenLogprob, ...]) -> list[dict[str, Any]]:
    """Canonical token logprobs in the wire shape (`bytes` always present, as OpenAI sends it)."""
    return [
        {
            "token": token.token,
            "logprob": token.logprob,
            "bytes": _utf8(token.token, token.bytes),
            "top_logprobs": [
                {"token": top.token, "logprob": top.logprob, "bytes": _utf8(top.token, top.bytes)}
                for top in token.top_logprobs
            ],
        }
        for token in tokens
    ]
