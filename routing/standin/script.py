"""What the stand-in does for one request: defaults, overridden per run (command-line flags), per
endpoint (a `/s/<k=v,k=v>/` path prefix in the provider's base URL) and per request (a
`<<standin {json}>>` directive anywhere in the prompt)."""

import json
import re
from dataclasses import dataclass, fields, replace
from typing import Any
from urllib.parse import unquote

DIRECTIVE = re.compile(r"<<standin (\{.*?\})>>", re.DOTALL)


@dataclass(frozen=True)
class Script:
    text: str = "Hello from the local stand-in provider."
    chunks: int = 3  # streamed text deltas
    interval_ms: int = 0  # between streamed chunks
    latency_ms: int = 0  # before the first byte (status line)
    status: int = 200  # an error status answered with the provider's real error body
    retry_after: int | None = None
    mid_stream_error: int | None = None  # an in-band error event after `cut_after` chunks
    cut_after: int | None = None  # close the connection after this many chunks (a cut stream)
    stall_ms: int = 0  # a pause after the first chunk (a stalled stream)
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int = 0
    reasoning_tokens: int | None = None
    reasoning: str = ""  # reasoning text to return before the answer
    # "<name>" or "auto" (first tool of the request): answer with a function call. "<a>,<b>,...": the n-th name
    # when the request carries n tool results and declares that tool, else the text (a model calling tools in turn)
    tool_call: str = ""
    tool_arguments: str = '{"location": "Paris"}'
    parallel: int = 1  # with tool_call: this many calls in one answer (call n's arguments gain "call": n; not Bedrock)
    finish: str = "stop"  # stop | length
    key: str = ""  # when set, any other credential gets 401
    malformed: int = 0  # 1: answer 200 with a body / stream that is not the provider's format
    sample: int = 0  # 1: the text is 8 words drawn at random, from the request's `seed` when it has one
    # A hostile upstream: ignore the request's max tokens and answer with this many bytes of `flood_field`
    # (text, reasoning or tool_arguments, streamed in deltas of about 1 KiB; `signature`: the reasoning's signature
    # or encrypted content, in one piece; `hosted`: provider-run code_interpreter_call items of at most 64 KiB of
    # logs each, after the items of the tools the request declared (the Responses wire, with a hosted tool)).
    flood: int = 0
    flood_field: str = "text"

    def merged(self, overrides: dict[str, Any]) -> "Script":
        known = {f.name: f.type for f in fields(self)}
        clean: dict[str, Any] = {}
        for name, value in overrides.items():
            if name not in known:
                continue
            default = getattr(self, name)
            if (
                isinstance(default, bool)
                or default is None
                or name
                in ("retry_after", "mid_stream_error", "cut_after", "input_tokens", "output_tokens", "reasoning_tokens")
            ):
                clean[name] = None if value in (None, "") else int(value)
            elif isinstance(default, int):
                clean[name] = int(value)
            else:
                clean[name] = str(value)
        return replace(self, **clean)


def parse_path(path: str) -> tuple[dict[str, Any], str]:
    """'/s/status=503,latency_ms=10/v1/chat/completions' -> ({'status': '503', ...}, '/v1/chat/completions')."""
    if not path.startswith("/s/"):
        return {}, path
    spec, _, rest = path[3:].partition("/")
    overrides = {}
    for pair in filter(None, unquote(spec).split(",")):
        key, _, value = pair.partition("=")
        overrides[key] = value
    return overrides, "/" + rest


def directive(prompt_text: str) -> dict[str, Any]:
    match = DIRECTIVE.search(prompt_text)
    if not match:
        return {}
    try:
        value = json.loads(match.group(1))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
