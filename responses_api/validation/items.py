"""`input`: a string, or an array of input items (messages with content parts, function calls and
their outputs, reasoning, replayed assistant output). Validated by plain functions (see checks.py),
after the count limits."""

from typing import Any, cast

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from responses_api.validation.checks import MISSING, Fields, check_count, raise_indexed
from responses_api.validation.common import MSG_UNKNOWN_FIELD
from responses_api.validation.limits import MAX_CONTENT_PARTS, MAX_INPUT_ITEMS
from routing.providers.hosted import ITEM_PROGRESS

ROLES = ("user", "system", "developer", "assistant")
DETAILS = ("auto", "high", "low", "original")
UNSUPPORTED_ITEMS = {
    "item_reference": "item references need stored responses; this endpoint is stateless: send the items themselves",
}
UNSUPPORTED_PARTS = ("input_audio", "input_video")
# A server tool call the gateway ran, or a call the provider ran (web_search_call, code_interpreter_call, ...:
# routing.providers.hosted), as a previous answer's output item sent back: a record of the call (the answer that used
# its result follows it), left out of the conversation.
RAN_TOOL_ITEMS = tuple(
    f"{space}:{tool}"
    for space in ("gateway", "openrouter")
    for tool in ("datetime", "search_models", "tool_search", "web_search", "web_fetch")
) + tuple(ITEM_PROGRESS)
URL_PREFIXES = ("http://", "https://", "data:")
TEXT_PART = ("type", "text")  # the keys of a text part of a function call's output and of reasoning


def _input_text(fields: Fields) -> None:
    fields.only("type", "text", "cache_control")
    fields.text("text", required=True, blank=True)
    cache_control = fields.object("cache_control")
    if cache_control is not None:
        inner = Fields(cache_control)
        inner.only("type", "ttl")
        if cache_control.get("type") != "ephemeral":
            inner.errors["type"] = 'must be "ephemeral"'
        inner.text("ttl", max_length=16)
        if inner.errors:
            fields.errors["cache_control"] = inner.errors


def _input_image(fields: Fields) -> None:
    fields.only("type", "image_url", "file_id", "detail")
    url = fields.text("image_url", null=True)
    file_id = fields.text("file_id", null=True)
    fields.choice("detail", DETAILS, default="auto")
    if fields.errors:
        return
    if not url and not file_id:
        fields.errors["image_url"] = "image_url or file_id is required"
    elif url and not url.startswith(URL_PREFIXES):
        fields.errors["image_url"] = "must be an http(s) URL or a data: URL"


def _input_file(fields: Fields) -> None:
    fields.only("type", "file_id", "file_data", "file_url", "filename")
    fields.text("file_id", null=True)
    fields.text("file_data", null=True)
    url = fields.text("file_url", null=True)
    fields.text("filename", null=True, max_length=1024)
    if url and not url.startswith(("http://", "https://")):
        fields.errors["file_url"] = "must be an http(s) URL"
    if not fields.errors and not any(fields.out.get(name) for name in ("file_id", "file_data", "file_url")):
        fields.errors["file_data"] = "one of file_id, file_data or file_url is required"


def _output_text(fields: Fields) -> None:
    fields.only("type", "text", "annotations", "logprobs")
    fields.text("text", required=True, blank=True)
    annotations = fields.array("annotations")
    if annotations is not None and not all(isinstance(entry, dict) for entry in annotations):
        fields.errors["annotations"] = "must be an array of objects"
    fields.array("logprobs")


def _refusal(fields: Fields) -> None:
    fields.only("type", "refusal")
    fields.text("refusal", required=True, blank=True)


PART_CHECKS = {
    "input_text": _input_text,
    "input_image": _input_image,
    "input_file": _input_file,
    "output_text": _output_text,
    "refusal": _refusal,
}
ASSISTANT_ONLY_PARTS = ("output_text", "refusal")


def _part_error(part: object, role: str) -> dict[str, Any] | str | None:
    if not isinstance(part, dict):
        return "must be an object"
    kind = part.get("type")
    if kind in UNSUPPORTED_PARTS:
        return {"type": f"{kind} content is not supported by any provider this gateway serves"}
    if not isinstance(kind, str) or kind not in PART_CHECKS:
        return {"type": f'"{kind}" is not a valid content part type; expected one of {sorted(PART_CHECKS)}'}
    if role != "assistant" and kind in ASSISTANT_ONLY_PARTS:
        return {"type": f"{kind} parts belong to assistant messages"}
    return None


def validate_parts(parts: list[Any], role: str) -> list[dict[str, Any]]:
    check_count(parts, MAX_CONTENT_PARTS, "content parts in one message")
    errors, cleaned = {}, []
    for index, part in enumerate(parts):
        error = _part_error(part, role)
        if error is not None:
            errors[index] = error
            continue
        fields = Fields(part)
        fields.out["type"] = part["type"]
        PART_CHECKS[part["type"]](fields)
        if fields.errors:
            errors[index] = fields.errors
        else:
            cleaned.append(fields.out)
    raise_indexed(errors)
    return cleaned


def _message(fields: Fields) -> None:
    fields.only("type", "id", "role", "status", "phase", "content")
    fields.choice("type", ("message",))
    fields.text("id", null=True)
    role = fields.choice("role", ROLES, required=True)
    fields.text("status", null=True)
    fields.choice("phase", ("commentary", "final_answer"), null=True)
    content = fields.source.get("content", MISSING)
    if content is MISSING:
        fields.errors["content"] = "is required"
    elif role is None:
        return
    elif content is None:
        fields.out["content"] = []
    elif isinstance(content, str):
        if "\x00" in content:
            fields.errors["content"] = "must not contain NUL characters"
        fields.out["content"] = [{"type": "output_text" if role == "assistant" else "input_text", "text": content}]
    elif isinstance(content, list):
        try:
            fields.out["content"] = validate_parts(content, role)
        except serializers.ValidationError as exc:
            fields.errors["content"] = exc.detail
    else:
        fields.errors["content"] = "must be a string, an array of content parts or null"


def _function_call(fields: Fields) -> None:
    fields.only("type", "id", "call_id", "name", "arguments", "status", "namespace")
    fields.text("id", null=True)
    fields.text("call_id", required=True, max_length=256)
    fields.text("name", required=True, max_length=256)
    fields.text("arguments", required=True, blank=True)
    fields.text("status", null=True)
    fields.text("namespace", null=True)


def _output_value(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = [
            part.get("text")
            for part in value
            if isinstance(part, dict) and part.get("type") in ("input_text", "output_text")
        ]
        if len(texts) == len(value) and all(isinstance(text, str) for text in texts):
            return "".join(cast(list[str], texts))
    return None


def _unknown_in_parts(parts: list[Any], names: tuple[str, ...]) -> dict[int, dict[str, str]]:
    """The keys of each object of `parts` besides `names`, by position (paths like `output[0].x`)."""
    found = {}
    for index, part in enumerate(parts):
        if isinstance(part, dict) and (unknown := [key for key in part if key not in names]):
            found[index] = {key: MSG_UNKNOWN_FIELD for key in unknown}
    return found


def _wrong_text_parts(parts: list[Any]) -> dict[int, object]:
    """What is wrong with each text part, by position, so the error names the part's field (`output[0].text`)."""
    found: dict[int, object] = {}
    for index, part in enumerate(parts):
        if not isinstance(part, dict):
            found[index] = "must be an object"
        elif part.get("type") not in ("input_text", "output_text"):
            found[index] = {"type": 'must be "input_text" or "output_text"'}
        elif not isinstance(part.get("text"), str):
            found[index] = {"text": "must be a string"}
    return found


def _function_call_output(fields: Fields) -> None:
    fields.only("type", "id", "call_id", "status", "output")
    fields.text("id", null=True)
    fields.text("call_id", required=True, max_length=256)
    fields.text("status", null=True)
    if "output" not in fields.source:
        fields.errors["output"] = "is required"
        return
    if isinstance(fields.source["output"], list) and (unknown := _unknown_in_parts(fields.source["output"], TEXT_PART)):
        fields.errors["output"] = unknown
        return
    if isinstance(fields.source["output"], list) and (wrong := _wrong_text_parts(fields.source["output"])):
        fields.errors["output"] = wrong
        return
    output = _output_value(fields.source["output"])
    if output is None:
        fields.errors["output"] = "must be a string or an array of text parts"
    else:
        fields.out["output"] = output


def _text_parts(fields: Fields, name: str, kind: str, *, null: bool) -> None:
    parts = fields.array(name, null=null)
    if not parts:
        return
    check_count(parts, MAX_CONTENT_PARTS, f"{name} parts")
    if unknown := _unknown_in_parts(parts, TEXT_PART):
        fields.errors[name] = unknown
        return
    cleaned = []
    for part in parts:
        if not isinstance(part, dict) or part.get("type") != kind or not isinstance(part.get("text"), str):
            fields.errors[name] = f'each entry must be {{"type": "{kind}", "text": <string>}}'
            return
        cleaned.append({"type": kind, "text": part["text"]})
    fields.out[name] = cleaned


def _reasoning(fields: Fields) -> None:
    fields.only("type", "id", "summary", "content", "encrypted_content", "signature", "format", "status")
    fields.text("id", null=True)
    fields.out["summary"] = []
    _text_parts(fields, "summary", "summary_text", null=False)
    _text_parts(fields, "content", "reasoning_text", null=True)
    for name in ("encrypted_content", "signature", "format", "status"):
        fields.text(name, null=True)


ITEM_CHECKS = {
    "message": _message,
    "function_call": _function_call,
    "function_call_output": _function_call_output,
    "reasoning": _reasoning,
}


def _item_kind(item: object) -> tuple[str | None, dict[str, Any] | str | None]:
    if not isinstance(item, dict):
        return None, "must be an object"
    kind = item.get("type") or ("message" if "role" in item else None)
    if not isinstance(kind, str):
        return None, {"type": "must be a string"}
    if kind in UNSUPPORTED_ITEMS:
        return None, {"type": UNSUPPORTED_ITEMS[kind]}
    if kind not in ITEM_CHECKS:
        return None, {"type": f'"{kind}" is not a supported input item type; expected one of {sorted(ITEM_CHECKS)}'}
    return kind, None


def validate_items(items: list[Any]) -> list[dict[str, Any]]:
    check_count(items, MAX_INPUT_ITEMS, "input items")
    cleaned, errors = [], {}
    for index, item in enumerate(items):
        if isinstance(item, dict) and item.get("type") in RAN_TOOL_ITEMS:
            continue
        kind, error = _item_kind(item)
        if kind is None:
            errors[index] = error
            continue
        fields = Fields(item)
        ITEM_CHECKS[kind](fields)
        if fields.errors:
            errors[index] = fields.errors
        else:
            fields.out["type"] = kind
            cleaned.append(fields.out)
    raise_indexed(errors)
    return cleaned


_ID = {"type": "string", "minLength": 1, "nullable": True}


def _obj(kind: str | None, required: list[str], properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """An item or part object: closed, as `Fields.only` refuses any key it does not list."""
    type_schema = {"type": "string", "enum": [kind]} if kind else {}
    return {
        "type": "object",
        "required": (["type"] if kind else []) + required,
        "properties": ({"type": type_schema} if kind else {}) | properties,
        "additionalProperties": False,
        **extra,
    }


def _non_empty(*names: str) -> list[dict[str, Any]]:
    return [{"required": [name], "properties": {name: {"type": "string", "minLength": 1}}} for name in names]


INPUT_PART_SCHEMAS = [
    _obj(
        "input_text",
        ["text"],
        {
            "text": {"type": "string"},
            "cache_control": {
                "type": "object",
                "required": ["type"],
                "properties": {
                    "type": {"type": "string", "enum": ["ephemeral"]},
                    "ttl": {"type": "string", "minLength": 1, "maxLength": 16},
                },
                "additionalProperties": False,
            },
        },
    ),
    _obj(
        "input_image",
        [],
        {
            "image_url": {"type": "string", "nullable": True, "pattern": "^(https?://|data:)"},
            "file_id": _ID,
            "detail": {"type": "string", "enum": list(DETAILS)},
        },
        anyOf=_non_empty("image_url", "file_id"),
    ),
    _obj(
        "input_file",
        [],
        {
            "file_id": _ID,
            "file_data": _ID,
            "file_url": {"type": "string", "nullable": True, "pattern": "^https?://."},
            "filename": {"type": "string", "nullable": True, "minLength": 1, "maxLength": 1024},
        },
        anyOf=_non_empty("file_id", "file_data", "file_url"),
    ),
]
ASSISTANT_PART_SCHEMAS = [
    _obj(
        "output_text",
        ["text"],
        {
            "text": {"type": "string"},
            "annotations": {"type": "array", "items": {"type": "object"}},
            "logprobs": {"type": "array", "items": {}},
        },
    ),
    _obj("refusal", ["refusal"], {"refusal": {"type": "string"}}),
]


def _message_schema(roles: list[str], parts: list[dict[str, Any]]) -> dict[str, Any]:
    return _obj(
        None,
        ["role", "content"],
        {
            "type": {"type": "string", "enum": ["message"]},
            "id": _ID,
            "role": {"type": "string", "enum": roles},
            "content": {
                "nullable": True,
                "oneOf": [
                    {"type": "string"},
                    {"type": "array", "maxItems": MAX_CONTENT_PARTS, "items": {"anyOf": parts}},
                ],
            },
            "status": _ID,
            "phase": {"type": "string", "enum": ["commentary", "final_answer"], "nullable": True},
        },
    )


def _text_parts_schema(kind: str, nullable: bool) -> dict[str, Any]:
    return {
        "type": "array",
        "nullable": nullable,
        "maxItems": MAX_CONTENT_PARTS,
        "items": _obj(kind, ["text"], {"text": {"type": "string"}}),
    }


_CALL_ID = {"type": "string", "minLength": 1, "maxLength": 256}
INPUT_ITEM_SCHEMAS = [
    _message_schema(["user", "system", "developer"], INPUT_PART_SCHEMAS),
    _message_schema(["assistant"], INPUT_PART_SCHEMAS + ASSISTANT_PART_SCHEMAS),
    _obj(
        "function_call",
        ["call_id", "name", "arguments"],
        {
            "id": _ID,
            "call_id": _CALL_ID,
            "name": _CALL_ID,
            "arguments": {"type": "string"},
            "status": _ID,
            "namespace": _ID,
        },
    ),
    _obj(
        "function_call_output",
        ["call_id", "output"],
        {
            "id": _ID,
            "call_id": _CALL_ID,
            "status": _ID,
            "output": {
                "oneOf": [
                    {"type": "string"},
                    {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["type", "text"],
                            "properties": {
                                "type": {"type": "string", "enum": ["input_text", "output_text"]},
                                "text": {"type": "string"},
                            },
                            "additionalProperties": False,
                        },
                    },
                ]
            },
        },
    ),
    _obj(
        "reasoning",
        [],
        {
            "id": _ID,
            "summary": _text_parts_schema("summary_text", False),
            "content": _text_parts_schema("reasoning_text", True),
            "encrypted_content": _ID,
            "signature": _ID,
            "format": _ID,
            "status": _ID,
        },
    ),
]
INPUT_FIELD_SCHEMA = {
    "description": "A string (one user message) or an array of input items: messages (content a string or "
    "parts input_text/input_image/input_file, and output_text/refusal for the assistant), "
    "function_call, function_call_output, reasoning. Strings must not contain NUL.",
    "oneOf": [
        {"type": "string", "minLength": 1},
        {"type": "array", "minItems": 1, "maxItems": MAX_INPUT_ITEMS, "items": {"anyOf": INPUT_ITEM_SCHEMAS}},
    ],
}


@extend_schema_field(INPUT_FIELD_SCHEMA)
class InputField(serializers.Field[Any, Any, Any, Any]):
    """A string (one user message) or an array of input items, each validated by its `type`."""

    default_error_messages = {"invalid": "input must be a string or an array of input items"}

    def to_representation(self, value: Any) -> Any:
        return value

    def to_internal_value(self, data: Any) -> list[dict[str, Any]]:
        if isinstance(data, str):
            if not data:
                raise serializers.ValidationError("must not be empty")
            if "\x00" in data:
                raise serializers.ValidationError("must not contain NUL characters")
            return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": data}]}]
        if not isinstance(data, list):
            self.fail("invalid")
        return validate_items(data)
