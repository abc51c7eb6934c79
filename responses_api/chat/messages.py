"""`messages` of a Chat Completions request, validated by plain functions (responses_api.validation.checks) and
turned into the Responses input items the canonical request is built from: every role and content part of
https://platform.openai.com/docs/api-reference/chat/create, with errors named like `messages[3].content[0].text`."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from responses_api.validation.checks import MISSING, Fields, check_count, convert_each, raise_indexed
from responses_api.validation.items import DETAILS, URL_PREFIXES
from responses_api.validation.limits import MAX_CONTENT_PARTS, MAX_INPUT_ITEMS

ROLES = ("system", "developer", "user", "assistant", "tool")
MSG_FUNCTION_ROLE = 'the deprecated "function" role is not supported: use tool_calls and "tool" messages'
MSG_NAME = "participant names are not supported: no provider this gateway routes to takes them on every message"
MSG_AUDIO = "audio content is not supported by any provider this gateway serves"
# The keys of each role's message (an answer's message sent back carries the assistant's); any other is refused.
KEYS = {
    "system": ("role", "content", "name"),
    "developer": ("role", "content", "name"),
    "user": ("role", "content", "name"),
    "assistant": (
        "role",
        "content",
        "name",
        "tool_calls",
        "refusal",
        "reasoning",
        "annotations",
        "audio",
        "function_call",
    ),
    "tool": ("role", "content", "name", "tool_call_id"),
}


def _cache_control(fields: Fields) -> dict:
    """A part's prompt-cache breakpoint ({} when it has none): kept on the part for the wires that take one."""
    cache_control = fields.object("cache_control")
    if cache_control is not None and cache_control.get("type") != "ephemeral":
        fields.errors["cache_control"] = 'type must be "ephemeral"'
    return {"cache_control": cache_control} if cache_control else {}


def _text_part(fields: Fields, out: list[dict], kind: str) -> None:
    fields.only("type", "text", "cache_control")
    text = fields.text("text", required=True, blank=True)
    cache_control = _cache_control(fields)
    if not fields.errors:
        out.append({"type": kind, "text": text, **cache_control})


def _image_part(fields: Fields, out: list[dict]) -> None:
    fields.only("type", "image_url", "cache_control")
    cache_control = _cache_control(fields)
    image = Fields(fields.object("image_url") or {})
    image.only("url", "detail")
    url = image.text("url", required=True)
    detail = image.choice("detail", DETAILS, default="auto")
    if "image_url" not in fields.source:
        fields.errors["image_url"] = "is required"
    elif image.errors:
        fields.errors["image_url"] = image.errors
    elif url and not url.startswith(URL_PREFIXES):
        fields.errors["image_url"] = {"url": "must be an http(s) URL or a data: URL"}
    elif not fields.errors:
        out.append({"type": "input_image", "image_url": url, "detail": detail, **cache_control})


def _file_part(fields: Fields, out: list[dict]) -> None:
    fields.only("type", "file", "cache_control")
    cache_control = _cache_control(fields)
    file = Fields(fields.object("file") or {})
    file.only("file_id", "file_data", "filename")
    file_id = file.text("file_id", null=True)
    data = file.text("file_data", null=True)
    name = file.text("filename", null=True, max_length=1024)
    if "file" not in fields.source:
        fields.errors["file"] = "is required"
    elif file.errors:
        fields.errors["file"] = file.errors
    elif not file_id and not data:
        fields.errors["file"] = {"file_data": "file_data (a URL or a data: URL) or file_id is required"}
    elif not fields.errors:
        part = {"type": "input_file", "filename": name, "file_id": file_id}
        # OpenRouter's chat file part takes a URL or a data: URL in file_data.
        part["file_url" if (data or "").startswith(("http://", "https://")) else "file_data"] = data
        out.append({**{key: value for key, value in part.items() if value is not None}, **cache_control})


def _parts(content: list, *, role: str) -> list[dict]:
    """Content parts of one message as Responses parts (ValidationError keyed by part index)."""
    check_count(content, MAX_CONTENT_PARTS, "content parts in one message")
    allowed = {
        "user": ("text", "image_url", "file"),
        "assistant": ("text", "refusal"),
    }.get(role, ("text",))
    text_kind = "output_text" if role == "assistant" else "input_text"
    out: list[dict] = []
    errors: dict[int, object] = {}
    for index, part in enumerate(content):
        if not isinstance(part, dict):
            errors[index] = "must be an object"
            continue
        kind = part.get("type")
        if kind == "input_audio":
            errors[index] = {"type": MSG_AUDIO}
            continue
        if kind not in allowed:
            errors[index] = {
                "type": f'"{kind}" is not a valid content part type for {role} messages; expected one '
                f"of {list(allowed)}"
            }
            continue
        fields = Fields(part)
        if kind == "text":
            _text_part(fields, out, text_kind)
        elif kind == "refusal":
            fields.only("type", "refusal")
            refusal = fields.text("refusal", required=True, blank=True)
            if refusal is not None:
                out.append({"type": "refusal", "refusal": refusal})
        elif kind == "image_url":
            _image_part(fields, out)
        else:
            _file_part(fields, out)
        if fields.errors:
            errors[index] = fields.errors
    raise_indexed(errors)
    return out


def _content(fields: Fields, *, role: str, required: bool) -> list[dict]:
    content = fields.source.get("content", MISSING)
    if content is MISSING or content is None:
        if required:
            fields.errors["content"] = "is required"
        return []
    if isinstance(content, str):
        if "\x00" in content:
            fields.errors["content"] = "must not contain NUL characters"
            return []
        return [{"type": "output_text" if role == "assistant" else "input_text", "text": content}]
    if isinstance(content, list):
        try:
            return _parts(content, role=role)
        except serializers.ValidationError as exc:
            fields.errors["content"] = exc.detail
            return []
    fields.errors["content"] = "must be a string or an array of content parts"
    return []


def _tool_calls(fields: Fields) -> list[dict]:
    calls = fields.array("tool_calls", null=True) or []
    check_count(calls, MAX_CONTENT_PARTS, "tool calls in one message")
    items: list[dict] = []
    errors: dict[int, object] = {}
    for index, call in enumerate(calls):
        if not isinstance(call, dict):
            errors[index] = "must be an object"
            continue
        checked = Fields(call)
        checked.only("id", "type", "function", "index")  # a call gathered from a stream keeps its index
        call_id = checked.text("id", required=True, max_length=256)
        checked.choice("type", ("function",), required=True)
        if "index" in call and (not isinstance(call["index"], int) or isinstance(call["index"], bool)):
            checked.errors["index"] = "must be an integer"
        function = Fields(checked.object("function") or {})
        function.only("name", "arguments")
        name = function.text("name", required=True, max_length=256)
        arguments = function.text("arguments", required=True, blank=True)
        if "function" not in call:
            checked.errors["function"] = "is required"
        elif function.errors:
            checked.errors["function"] = function.errors
        if checked.errors:
            errors[index] = checked.errors
        else:
            items.append({"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments})
    if errors:
        fields.errors["tool_calls"] = {key: value for key, value in list(errors.items())[:20]}
    return items


def _assistant(fields: Fields) -> list[dict]:
    items: list[dict] = []
    reasoning = fields.text("reasoning", null=True, blank=True)
    if reasoning:
        items.append({"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": reasoning}]})
    parts = _content(fields, role="assistant", required=False)
    refusal = fields.text("refusal", null=True, blank=True)
    if refusal:
        parts.append({"type": "refusal", "refusal": refusal})
    annotations = fields.array("annotations", null=True)  # citations of an answer: nothing a model reads back
    if annotations is not None and not all(isinstance(entry, dict) for entry in annotations):
        fields.errors["annotations"] = "must be an array of objects"
    for name in ("audio", "function_call"):  # echoed by SDKs as null; a value cannot be honoured
        if fields.source.get(name) is not None:
            fields.errors[name] = f"{name} on assistant messages is not supported"
    calls = _tool_calls(fields)
    if parts:
        items.append({"type": "message", "role": "assistant", "content": parts})
    return items + calls


def _tool(fields: Fields) -> list[dict]:
    call_id = fields.text("tool_call_id", required=True, max_length=256)
    parts = _content(fields, role="tool", required=True)
    output = {"type": "function_call_output", "call_id": call_id, "output": "".join(p["text"] for p in parts)}
    cached = [part["cache_control"] for part in parts if part.get("cache_control")]
    return [{**output, "cache_control": cached[-1]} if cached else output]  # the result's breakpoint


def _message(message: dict) -> tuple[list[dict], dict]:
    fields = Fields(message)
    role = fields.choice("role", ROLES, required=True)
    if message.get("role") == "function":
        return [], {"role": MSG_FUNCTION_ROLE}
    if role is None:
        return [], fields.errors
    fields.only(*KEYS[role])
    if message.get("name") is not None:
        fields.errors["name"] = MSG_NAME
    if role == "assistant":
        items = _assistant(fields)
    elif role == "tool":
        items = _tool(fields)
    else:
        items = [{"type": "message", "role": role, "content": _content(fields, role=role, required=True)}]
    return items, fields.errors


def validate_messages(messages: list) -> list[dict]:
    """Responses input items for the chat messages, in order (an assistant turn may become several)."""
    return convert_each(messages, _message, limit=MAX_INPUT_ITEMS, what="messages")


_NAME = {"type": "string", "minLength": 1, "maxLength": 256}
_CACHE_CONTROL = {
    "type": "object",
    "required": ["type"],
    "properties": {"type": {"type": "string", "enum": ["ephemeral"]}},
}
_TEXT_PART = {
    "type": "object",
    "required": ["type", "text"],
    "properties": {
        "type": {"type": "string", "enum": ["text"]},
        "text": {"type": "string"},
        "cache_control": _CACHE_CONTROL,
    },
    "additionalProperties": False,
}
_IMAGE_PART = {
    "type": "object",
    "required": ["type", "image_url"],
    "properties": {
        "type": {"type": "string", "enum": ["image_url"]},
        "image_url": {
            "type": "object",
            "required": ["url"],
            "properties": {
                "url": {"type": "string", "pattern": "^(https?://|data:)"},
                "detail": {"type": "string", "enum": list(DETAILS)},
            },
            "additionalProperties": False,
        },
        "cache_control": _CACHE_CONTROL,
    },
    "additionalProperties": False,
}
_FILE_ID = {"type": "string", "minLength": 1, "nullable": True}
_FILE_PART = {
    "type": "object",
    "required": ["type", "file"],
    "properties": {
        "type": {"type": "string", "enum": ["file"]},
        "file": {
            "type": "object",
            "properties": {
                "file_data": {**_FILE_ID, "description": "A URL or a data: URL"},
                "file_id": _FILE_ID,
                "filename": {"type": "string", "nullable": True, "minLength": 1, "maxLength": 1024},
            },
            "anyOf": [
                {"required": ["file_data"], "properties": {"file_data": {"type": "string", "minLength": 1}}},
                {"required": ["file_id"], "properties": {"file_id": {"type": "string", "minLength": 1}}},
            ],
            "additionalProperties": False,
        },
        "cache_control": _CACHE_CONTROL,
    },
    "additionalProperties": False,
}
_REFUSAL_PART = {
    "type": "object",
    "required": ["type", "refusal"],
    "properties": {"type": {"type": "string", "enum": ["refusal"]}, "refusal": {"type": "string"}},
    "additionalProperties": False,
}


def _content_schema(parts: list[dict], *, nullable: bool = False) -> dict:
    schema: dict = {
        "oneOf": [{"type": "string"}, {"type": "array", "maxItems": MAX_CONTENT_PARTS, "items": {"anyOf": parts}}]
    }
    return {**schema, "nullable": True} if nullable else schema


def _role(roles: list[str]) -> dict:
    return {"type": "string", "enum": roles}


_ONLY_NULL = {"type": "string", "nullable": True, "enum": [None]}
_NAME_NULL = {**_ONLY_NULL, "description": f"Only null: {MSG_NAME}"}


def _message_schema(role: dict, required: list[str], **properties) -> dict:
    """One role's message: its fields and no other."""
    return {
        "type": "object",
        "required": required,
        "properties": {"role": role, **properties, "name": _NAME_NULL},
        "additionalProperties": False,
    }


_TOOL_CALL = {
    "type": "object",
    "required": ["id", "type", "function"],
    "properties": {
        "id": _NAME,
        "type": {"type": "string", "enum": ["function"]},
        "function": {
            "type": "object",
            "required": ["name", "arguments"],
            "properties": {"name": _NAME, "arguments": {"type": "string"}},
            "additionalProperties": False,
        },
        "index": {"type": "integer", "description": "A streamed call's position (as SDKs gather it)"},
    },
    "additionalProperties": False,
}
MESSAGE_SCHEMAS = [
    _message_schema(_role(["system", "developer"]), ["role", "content"], content=_content_schema([_TEXT_PART])),
    _message_schema(
        _role(["user"]), ["role", "content"], content=_content_schema([_TEXT_PART, _IMAGE_PART, _FILE_PART])
    ),
    _message_schema(
        _role(["assistant"]),
        ["role"],
        content=_content_schema([_TEXT_PART, _REFUSAL_PART], nullable=True),
        tool_calls={"type": "array", "nullable": True, "maxItems": MAX_CONTENT_PARTS, "items": _TOOL_CALL},
        refusal={"type": "string", "nullable": True},
        reasoning={"type": "string", "nullable": True, "description": "Reasoning to replay"},
        annotations={"type": "array", "nullable": True, "items": {"type": "object"}},
        audio={**_ONLY_NULL, "description": "Only null (as SDKs send an answer back)"},
        function_call={**_ONLY_NULL, "description": "Only null (as SDKs send an answer back)"},
    ),
    _message_schema(
        _role(["tool"]), ["role", "tool_call_id", "content"], tool_call_id=_NAME, content=_content_schema([_TEXT_PART])
    ),
]
MESSAGES_SCHEMA = {
    "type": "array",
    "minItems": 1,
    "maxItems": MAX_INPUT_ITEMS,
    "items": {"anyOf": MESSAGE_SCHEMAS},
    "description": "system/developer/user/assistant/tool messages; strings must not contain NUL",
}


@extend_schema_field(MESSAGES_SCHEMA)
class MessagesField(serializers.Field):
    """The conversation: system/developer/user/assistant/tool messages, as Responses input items."""

    def to_representation(self, value):
        return value

    def to_internal_value(self, data):
        if not isinstance(data, list):
            raise serializers.ValidationError("must be an array of messages")
        if not data:
            raise serializers.ValidationError("must not be empty")
        return validate_messages(data)
