"""`system` and `messages` of an Anthropic Messages request (https://docs.anthropic.com/en/api/messages),
validated by plain functions (responses_api.validation.checks) into the Responses input items the canonical
request is built from, with errors named like `messages[2].content[0].source.data`."""

import json

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from responses_api.validation.checks import MISSING, Fields, check_count, convert_each, raise_indexed
from responses_api.validation.limits import MAX_CONTENT_PARTS, MAX_INPUT_ITEMS

THINKING_FORMAT = "anthropic-claude-v1"  # routing.providers.anthropic.request.FORMAT: replayable there
TOOL_ERROR = "Error: "  # a failed tool result (is_error) reaches the model marked so; the canonical output is text
USER_BLOCKS = ("text", "image", "document", "tool_result")
ASSISTANT_BLOCKS = ("text", "tool_use", "thinking", "redacted_thinking")
# The keys of each block and source kind; any other is refused (a field this gateway would otherwise drop).
BLOCK_KEYS = {
    "text": ("type", "text", "cache_control", "citations"),
    "image": ("type", "source", "cache_control"),
    "document": ("type", "source", "title", "context", "citations", "cache_control"),
    "tool_result": ("type", "tool_use_id", "content", "is_error", "cache_control"),
    "tool_use": ("type", "id", "name", "input", "cache_control"),
    "thinking": ("type", "thinking", "signature"),
    "redacted_thinking": ("type", "data"),
}
SOURCE_KEYS = {
    "base64": ("type", "media_type", "data"),
    "url": ("type", "url"),
    "file": ("type", "file_id"),
    "text": ("type", "media_type", "data"),
}


def _cache_control(fields: Fields) -> dict | None:
    cache_control = fields.object("cache_control", null=True)
    if cache_control is not None and cache_control.get("type") != "ephemeral":
        fields.errors["cache_control"] = 'type must be "ephemeral"'
    return cache_control


def _text(fields: Fields, kind: str) -> dict | None:
    text = fields.text("text", required=True, blank=True)
    cache_control = _cache_control(fields)
    citations = fields.array("citations", null=True)
    if citations:
        fields.errors["citations"] = "citations in the prompt are not supported"
    if fields.errors:
        return None
    part = {"type": kind, "text": text}
    if cache_control:
        part["cache_control"] = cache_control
    return part


def _source(fields: Fields, *, kinds: tuple[str, ...]) -> dict | None:
    """A block's `source` as {"url"} or {"data_url"}: base64 data becomes a data: URL."""
    source = Fields(fields.object("source") or {})
    kind = source.choice("type", kinds, required=True)
    if kind:
        source.only(*SOURCE_KEYS[kind])
    out = None
    if kind == "base64":
        media = source.text("media_type", required=True, max_length=128)
        data = source.text("data", required=True)
        out = {"data_url": f"data:{media};base64,{data}"}
    elif kind == "url":
        url = source.text("url", required=True)
        if url and not url.startswith(("http://", "https://")):
            source.errors["url"] = "must be an http(s) URL"
        out = {"url": url}
    elif kind == "file":
        out = {"file_id": source.text("file_id", required=True, max_length=256)}
    elif kind == "text":
        out = {"text": source.text("data", required=True, blank=True)}
    if "source" not in fields.source:
        fields.errors["source"] = "is required"
    elif source.errors:
        fields.errors["source"] = source.errors
    return None if fields.errors else out


def _cached(part: dict, cache_control: dict | None) -> dict:
    """The part with the block's cache breakpoint, when it has one (the Anthropic wire puts it back)."""
    return {**part, "cache_control": cache_control} if cache_control else part


def _image(fields: Fields) -> dict | None:
    source = _source(fields, kinds=("base64", "url", "file"))
    cache_control = _cache_control(fields)
    if source is None or fields.errors:
        return None
    url = source.get("data_url") or source.get("url")
    part = {"type": "input_image", "image_url": url} if url else {"type": "input_image", "file_id": source["file_id"]}
    return _cached({**part, "detail": "auto"}, cache_control)


def _document(fields: Fields) -> dict | None:
    source = _source(fields, kinds=("base64", "url", "file", "text"))
    cache_control = _cache_control(fields)
    title = fields.text("title", null=True, max_length=1024)
    for name in ("context", "citations"):
        if fields.source.get(name) is not None:
            fields.errors[name] = f"document {name} is not supported"
    if source is None or fields.errors:
        return None
    if "text" in source:  # a plain-text document is text the model reads
        return _cached({"type": "input_text", "text": source["text"]}, cache_control)
    part = {"type": "input_file", "filename": title}
    if "data_url" in source:
        part["file_data"] = source["data_url"]
    elif "url" in source:
        part["file_url"] = source["url"]
    else:
        part["file_id"] = source["file_id"]
    return _cached({key: value for key, value in part.items() if value is not None}, cache_control)


def _tool_result(fields: Fields) -> dict | None:
    call_id = fields.text("tool_use_id", required=True, max_length=256)
    is_error = fields.boolean("is_error", null=True)
    cache_control = _cache_control(fields)
    content = fields.source.get("content", "")
    texts: list[str] = []
    if isinstance(content, str):
        texts = [content]
    elif isinstance(content, list) and all(
        isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
        for block in content
    ):
        texts = [block["text"] for block in content]
        for index, block in enumerate(content):  # each a text block: its breakpoint is the result's
            inner = Fields(block)
            inner.only("type", "text", "cache_control")
            cache_control = _cache_control(inner) or cache_control
            if inner.errors:
                fields.errors["content"] = {index: inner.errors}
    else:
        fields.errors["content"] = (
            "must be a string or an array of text blocks (images in tool results are not supported)"
        )
    if fields.errors:
        return None
    output = "".join(texts)
    result = {"type": "function_call_output", "call_id": call_id, "output": TOOL_ERROR + output if is_error else output}
    return _cached(result, cache_control)


def _tool_use(fields: Fields) -> dict | None:
    call_id = fields.text("id", required=True, max_length=256)
    name = fields.text("name", required=True, max_length=256)
    arguments = fields.object("input")
    if "input" not in fields.source:
        fields.errors["input"] = "is required"
    cache_control = _cache_control(fields)
    if fields.errors:
        return None
    call = {"type": "function_call", "call_id": call_id, "name": name, "arguments": json.dumps(arguments)}
    return _cached(call, cache_control)


def _thinking(fields: Fields) -> dict | None:
    text = fields.text("thinking", required=True, blank=True)
    signature = fields.text("signature", required=True, blank=True)
    if fields.errors:
        return None
    return {
        "type": "reasoning",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
        "signature": signature or None,
        "format": THINKING_FORMAT if signature else None,
    }


def _redacted_thinking(fields: Fields) -> dict | None:
    data = fields.text("data", required=True)
    if fields.errors:
        return None
    return {"type": "reasoning", "summary": [], "encrypted_content": data, "format": THINKING_FORMAT}


def _block(block: dict, role: str) -> dict | None:
    """One content block as a Responses content part (a dict with `type` input_*/output_text) or item."""
    fields = Fields(block)
    kind = block.get("type")
    fields.only(*BLOCK_KEYS[str(kind)])
    if kind == "text":
        result = _text(fields, "output_text" if role == "assistant" else "input_text")
    elif kind == "image":
        result = _image(fields)
    elif kind == "document":
        result = _document(fields)
    elif kind == "tool_result":
        result = _tool_result(fields)
    elif kind == "tool_use":
        result = _tool_use(fields)
    elif kind == "thinking":
        result = _thinking(fields)
    else:
        result = _redacted_thinking(fields)
    if fields.errors:
        raise serializers.ValidationError(dict(fields.errors))  # type: ignore[arg-type]  # nested details
    return result


def _turn(message: dict) -> tuple[list[dict], dict]:
    """The Responses items of one turn: its parts gathered into messages, tool uses/results and thinking as
    items of their own, in order."""
    fields = Fields(message)
    fields.only("role", "content")
    role = fields.choice("role", ("user", "assistant"), required=True)
    content = message.get("content", MISSING)
    if role is None:
        return [], fields.errors
    if content is MISSING:
        return [], {"content": "is required"}
    if isinstance(content, str):
        kind = "output_text" if role == "assistant" else "input_text"
        return [{"type": "message", "role": role, "content": [{"type": kind, "text": content}]}], fields.errors
    if not isinstance(content, list):
        return [], {"content": "must be a string or an array of content blocks"}
    check_count(content, MAX_CONTENT_PARTS, "content blocks in one message")
    allowed = ASSISTANT_BLOCKS if role == "assistant" else USER_BLOCKS
    items: list[dict] = []
    errors: dict[int, object] = {}
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            errors[index] = "must be an object"
            continue
        if block.get("type") not in allowed:
            errors[index] = {
                "type": f'"{block.get("type")}" is not a supported {role} content block; expected one '
                f"of {list(allowed)}"
            }
            continue
        try:
            converted = _block(block, role)
        except serializers.ValidationError as exc:
            errors[index] = exc.detail
            continue
        assert converted is not None
        if converted["type"] in ("function_call", "function_call_output", "reasoning"):
            items.append(converted)
        elif items and items[-1]["type"] == "message":
            items[-1]["content"].append(converted)
        else:
            items.append({"type": "message", "role": role, "content": [converted]})
    if errors:
        return [], {"content": dict(list(errors.items())[:20])}
    return items, fields.errors


def validate_turns(messages: list) -> list[dict]:
    return convert_each(messages, _turn, limit=MAX_INPUT_ITEMS, what="messages")


def validate_system(system) -> list[dict]:
    """`system` (a string or text blocks) as system messages: cache_control on a block is kept."""
    if isinstance(system, str):
        return (
            [{"type": "message", "role": "system", "content": [{"type": "input_text", "text": system}]}]
            if system
            else []
        )
    if not isinstance(system, list):
        raise serializers.ValidationError("must be a string or an array of text blocks")
    check_count(system, MAX_CONTENT_PARTS, "system blocks")
    parts: list[dict] = []
    errors: dict[int, object] = {}
    for index, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            errors[index] = {"type": 'system blocks must be {"type": "text", "text": ...}'}
            continue
        fields = Fields(block)
        fields.only(*BLOCK_KEYS["text"])
        part = _text(fields, "input_text")
        if fields.errors:
            errors[index] = fields.errors
        elif part is not None:
            parts.append(part)
    raise_indexed(errors)
    return [{"type": "message", "role": "system", "content": parts}] if parts else []


def _block_schema(kind: str, required: list[str], properties: dict) -> dict:
    return {
        "type": "object",
        "required": ["type", *required],
        "properties": {"type": {"type": "string", "enum": [kind]}, **properties},
        "additionalProperties": False,
    }


_CACHE_CONTROL = {
    "type": "object",
    "nullable": True,
    "required": ["type"],
    "properties": {"type": {"type": "string", "enum": ["ephemeral"]}},
}
_ID = {"type": "string", "minLength": 1, "maxLength": 256}
_NO_CITATIONS = {"type": "array", "nullable": True, "maxItems": 0, "description": "Citations in the prompt: none"}
_TEXT = _block_schema(
    "text", ["text"], {"text": {"type": "string"}, "cache_control": _CACHE_CONTROL, "citations": _NO_CITATIONS}
)
_BASE64 = _block_schema(
    "base64",
    ["media_type", "data"],
    {"media_type": {"type": "string", "minLength": 1, "maxLength": 128}, "data": {"type": "string", "minLength": 1}},
)
_URL = _block_schema("url", ["url"], {"url": {"type": "string", "pattern": "^https?://."}})
_FILE = _block_schema("file", ["file_id"], {"file_id": _ID})
_PLAIN = _block_schema("text", ["data"], {"data": {"type": "string"}, "media_type": {"type": "string"}})
_IMAGE = _block_schema(
    "image", ["source"], {"source": {"oneOf": [_BASE64, _URL, _FILE]}, "cache_control": _CACHE_CONTROL}
)
_DOCUMENT = _block_schema(
    "document",
    ["source"],
    {
        "source": {"oneOf": [_BASE64, _URL, _FILE, _PLAIN]},
        "title": {"type": "string", "nullable": True, "minLength": 1, "maxLength": 1024},
        "context": {"type": "string", "nullable": True, "enum": [None], "description": "Only null (not supported)"},
        "citations": {"type": "object", "nullable": True, "enum": [None], "description": "Only null (not supported)"},
        "cache_control": _CACHE_CONTROL,
    },
)
_TOOL_RESULT = _block_schema(
    "tool_result",
    ["tool_use_id"],
    {
        "tool_use_id": _ID,
        "content": {
            "oneOf": [
                {"type": "string"},
                {
                    "type": "array",
                    "items": _block_schema(
                        "text", ["text"], {"text": {"type": "string"}, "cache_control": _CACHE_CONTROL}
                    ),
                },
            ]
        },
        "is_error": {"type": "boolean", "nullable": True},
        "cache_control": _CACHE_CONTROL,
    },
)
_TOOL_USE = _block_schema(
    "tool_use",
    ["id", "name", "input"],
    {"id": _ID, "name": _ID, "input": {"type": "object"}, "cache_control": _CACHE_CONTROL},
)
_THINKING = _block_schema(
    "thinking", ["thinking", "signature"], {"thinking": {"type": "string"}, "signature": {"type": "string"}}
)
_REDACTED = _block_schema("redacted_thinking", ["data"], {"data": {"type": "string", "minLength": 1}})


def _turn_schema(role: str, blocks: list[dict]) -> dict:
    return {
        "type": "object",
        "required": ["role", "content"],
        "properties": {
            "role": {"type": "string", "enum": [role]},
            "content": {
                "oneOf": [
                    {"type": "string"},
                    {"type": "array", "maxItems": MAX_CONTENT_PARTS, "items": {"anyOf": blocks}},
                ]
            },
        },
        "additionalProperties": False,
    }


MESSAGES_SCHEMA = {
    "type": "array",
    "minItems": 1,
    "maxItems": MAX_INPUT_ITEMS,
    "items": {
        "anyOf": [
            _turn_schema("user", [_TEXT, _IMAGE, _DOCUMENT, _TOOL_RESULT]),
            _turn_schema("assistant", [_TEXT, _TOOL_USE, _THINKING, _REDACTED]),
        ]
    },
    "description": "Anthropic's message blocks; strings must not contain NUL",
}
SYSTEM_SCHEMA = {"oneOf": [{"type": "string"}, {"type": "array", "maxItems": MAX_CONTENT_PARTS, "items": _TEXT}]}


@extend_schema_field(MESSAGES_SCHEMA)
class TurnsField(serializers.Field):
    def to_representation(self, value):
        return value

    def to_internal_value(self, data):
        if not isinstance(data, list):
            raise serializers.ValidationError("must be an array of messages")
        if not data:
            raise serializers.ValidationError("must not be empty")
        return validate_turns(data)


@extend_schema_field(SYSTEM_SCHEMA)
class SystemField(serializers.Field):
    def to_representation(self, value):
        return value

    def to_internal_value(self, data):
        return validate_system(data)
