"""The stand-in's OpenAI moderation endpoint (`POST .../moderations`), with scripted flags so the moderation
plugin is testable offline. Wire format: https://platform.openai.com/docs/api-reference/moderations/create
(`input`: a string, an array of strings, or an array of `{type: "text", text}` / `{type: "image_url", ...}`
parts; the answer: `{id, model, results: [{flagged, categories, category_scores, category_applied_input_types}]}`,
one result per input string, or one for all the parts).

What it flags, per input text: the categories named in a `<<standin {"flag": "violence,hate"}>>` directive in
that text (a string or a list of category names), or `harassment` for a text holding the keyword
`STANDIN-FLAG`. Everything else passes. The run's, the endpoint's (`/s/status=503/` path prefix) and the
directive's `status` / `latency_ms` / `key` apply as on the other paths."""

import json
import time
import uuid
from typing import TYPE_CHECKING, Any

from routing.standin import formats
from routing.standin.script import Script, directive

if TYPE_CHECKING:
    from routing.standin.server import StandinHandler

CATEGORIES = (
    "harassment",
    "harassment/threatening",
    "hate",
    "hate/threatening",
    "illicit",
    "illicit/violent",
    "self-harm",
    "self-harm/intent",
    "self-harm/instructions",
    "sexual",
    "sexual/minors",
    "violence",
    "violence/graphic",
)
IMAGE_CATEGORIES = {"self-harm", "self-harm/intent", "self-harm/instructions", "sexual", "violence", "violence/graphic"}
KEYWORD = "STANDIN-FLAG"


def _texts(value: object) -> list[str]:
    """One text per result: each string of an array, or all the text parts of a multimodal array together."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    if isinstance(value, list):
        return ["\n".join(part.get("text", "") for part in value if isinstance(part, dict) and part.get("text"))]
    return []


def flagged_categories(text: str) -> list[str]:
    named = directive(text).get("flag")
    if isinstance(named, str):
        named = [name.strip() for name in named.split(",")]
    found = [name for name in named or () if name in CATEGORIES]
    if KEYWORD in text and "harassment" not in found:
        found.append("harassment")
    return found


def result(text: str) -> dict[str, Any]:
    flagged = set(flagged_categories(text))
    return {
        "flagged": bool(flagged),
        "categories": {name: name in flagged for name in CATEGORIES},
        "category_scores": {name: 0.97 if name in flagged else 0.0001 for name in CATEGORIES},
        "category_applied_input_types": {
            name: ["text", "image"] if name in IMAGE_CATEGORIES else ["text"] for name in CATEGORIES
        },
    }


def body(payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"modr-{uuid.uuid4().hex[:24]}",
        "model": payload.get("model") or "omni-moderation-latest",
        "results": [result(text) for text in _texts(payload.get("input"))],
    }


def answer(handler: "StandinHandler", payload: dict[str, Any], script: Script, credential: str) -> None:
    """Answer one moderation request on `handler` (a StandinHandler)."""
    texts = _texts(payload.get("input"))
    script = script.merged(directive("\n".join(texts)))
    if script.latency_ms:
        time.sleep(script.latency_ms / 1000)
    status = script.status
    if status == 200 and (not credential or (script.key and credential != script.key)):
        status = 401
    if status == 200 and not texts:
        status = 400
    if status != 200:
        handler._send_error(status, formats.openai_error(status), script)
        return
    handler._send_bytes(200, json.dumps(body(payload)).encode(), "application/json")
