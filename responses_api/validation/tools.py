"""`tools` and `tool_choice`."""

import json
import re
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from responses_api.validation.checks import Fields, check_count, raise_indexed
from responses_api.validation.limits import MAX_TOOLS
from routing.providers.hosted import capability

FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
TOOL_SEARCH = "gateway:tool_search"
SERVER_TOOLS = tuple(
    f"gateway:{name}"
    for name in (
        "advisor",
        "subagent",
        "datetime",
        "files",
        "fusion",
        "image_generation",
        "search_models",
        "web_fetch",
        "web_search",
        "apply_patch",
        "bash",
        "shell",
        "tool_search",
    )
)
SERVER_TOOL_ALIASES = tuple(kind.replace("gateway:", "openrouter:", 1) for kind in SERVER_TOOLS)
# The server tools this gateway runs (plugins.server_tools): the parameters each accepts, and the function each is
# declared to the model as (gateway_<tool>).
RUN_TOOL_PARAMETERS = {
    "gateway:datetime": ("timezone",),
    "gateway:search_models": ("max_results",),
    "gateway:tool_search": ("max_results",),
    "gateway:web_search": ("engine", "max_results", "max_uses", "allowed_domains", "excluded_domains"),
    "gateway:web_fetch": ("max_uses", "max_content_tokens", "allowed_domains", "blocked_domains"),
    "gateway:fusion": (
        "analysis_models",
        "model",
        "preset",
        "max_tool_calls",
        "tools",
        "temperature",
        "max_completion_tokens",
    ),
}
ROUTERS = ("gateway/auto", "gateway/auto-beta", "gateway/pareto-code", "gateway/fusion")  # the router model slugs
# The server tools a fusion panel member may use (plugins.fusion.panel; never gateway:fusion itself).
PANEL_TOOLS = ("gateway:web_search", "gateway:web_fetch", "gateway:datetime", "gateway:search_models")
OTHER_TOOL_TYPES = (
    "web_search",
    "web_search_preview",
    "web_search_preview_2025_03_11",
    "web_search_2025_08_26",
    "file_search",
    "computer_use",
    "computer_use_preview",
    "code_interpreter",
    "mcp",
    "image_generation",
    "local_shell",
    "shell",
    "apply_patch",
    "custom",
    "namespace",
) + SERVER_TOOLS
OTHER_TOOL_TYPES += SERVER_TOOL_ALIASES
TOOL_CHOICE_MODES = ("auto", "none", "required")


def _function_tool(tool: dict[str, Any]) -> tuple[dict[str, Any], dict[str, object]]:
    fields = Fields(tool)
    fields.out["type"] = "function"
    name = fields.text("name", required=True, max_length=128)
    if name is not None and not FUNCTION_NAME.match(name):
        fields.errors["name"] = "may only contain letters, digits, _ . : - (at most 128)"
    fields.text("description", null=True, blank=True)
    parameters = fields.object("parameters", null=True)
    if parameters is not None and parameters.get("type", "object") != "object":
        fields.errors["parameters"] = {"type": 'must be "object" (parameters is a JSON Schema of an object)'}
    fields.boolean("strict", null=True)
    fields.boolean("defer_loading", default=False)
    fields.only("type", "name", "description", "parameters", "strict", "defer_loading")
    return fields.out, fields.errors


FUNCTION_TOOL_SCHEMA = {
    "type": "object",
    "required": ["type", "name"],
    "properties": {
        "type": {"type": "string", "enum": ["function"]},
        "name": {"type": "string", "pattern": FUNCTION_NAME.pattern},
        "description": {"type": "string", "nullable": True},
        "parameters": {
            "type": "object",
            "nullable": True,
            "description": "JSON Schema of the arguments",
            "properties": {"type": {"type": "string", "enum": ["object"]}},
            "additionalProperties": True,
        },
        "strict": {"type": "boolean", "nullable": True},
        "defer_loading": {"type": "boolean"},
    },
    "additionalProperties": False,
}
OTHER_TOOL_SCHEMA = {
    "type": "object",
    "required": ["type"],
    "additionalProperties": True,
    "properties": {"type": {"type": "string", "enum": list(OTHER_TOOL_TYPES)}},
}
DOMAINS_SCHEMA = {"type": "array", "maxItems": 100, "items": {"type": "string", "minLength": 1, "maxLength": 300}}
PARAMETER_SCHEMAS: dict[str, dict[str, Any]] = {
    "timezone": {"type": "string", "minLength": 1, "maxLength": 64},
    "engine": {"type": "string", "minLength": 1, "maxLength": 40},
    "max_results": {"type": "integer", "minimum": 1, "maximum": 20},
    "max_uses": {"type": "integer", "minimum": 1, "maximum": 50},
    "max_content_tokens": {"type": "integer", "minimum": 1},
    "allowed_domains": DOMAINS_SCHEMA,
    "excluded_domains": DOMAINS_SCHEMA,
    "blocked_domains": DOMAINS_SCHEMA,
    "analysis_models": {
        "type": "array",
        "minItems": 1,
        "maxItems": 8,
        "items": {"type": "string", "minLength": 1, "maxLength": 300},
    },
    "model": {"type": "string", "minLength": 1, "maxLength": 300},
    "preset": {"type": "string", "enum": ["general-high", "general-budget", "general-fast"]},
    "max_tool_calls": {"type": "integer", "minimum": 1, "maximum": 16},
    "tools": {
        "type": "array",
        "maxItems": 8,
        "description": "The panel's server tools (default web search and web fetch when configured; [] none)",
        "items": {
            "type": "object",
            "required": ["type"],
            "properties": {
                "type": {
                    "type": "string",
                    "enum": [*PANEL_TOOLS, *(kind.replace("gateway:", "openrouter:", 1) for kind in PANEL_TOOLS)],
                },
                "parameters": {"type": "object"},
            },
        },
    },
    "temperature": {"type": "number", "minimum": 0, "maximum": 2},
    "max_completion_tokens": {"type": "integer", "minimum": 1},
}
RUN_TOOL_SCHEMAS = [
    {
        "type": "object",
        "required": ["type"],
        "properties": {
            "type": {"type": "string", "enum": [kind, kind.replace("gateway:", "openrouter:", 1)]},
            "parameters": {
                "type": "object",
                "additionalProperties": False,
                "properties": {name: PARAMETER_SCHEMAS[name] for name in names},
            },
        },
    }
    for kind, names in RUN_TOOL_PARAMETERS.items()
]
NOT_RUN_TOOL_SCHEMA = {
    **OTHER_TOOL_SCHEMA,
    "properties": {
        "type": {
            "type": "string",
            "enum": [
                kind
                for kind in OTHER_TOOL_TYPES
                if kind.replace("openrouter:", "gateway:", 1) not in RUN_TOOL_PARAMETERS
            ],
        }
    },
}
TOOLS_FIELD_SCHEMA = {
    "type": "array",
    "maxItems": MAX_TOOLS,
    "items": {"anyOf": [FUNCTION_TOOL_SCHEMA, *RUN_TOOL_SCHEMAS, NOT_RUN_TOOL_SCHEMA]},
    "description": "Function tools (names unique; `defer_loading` needs the gateway:tool_search tool and at least "
    "one function tool not deferred) and other tool kinds by type",
}


@extend_schema_field(TOOLS_FIELD_SCHEMA)
class ToolsField(serializers.Field[Any, Any, Any, Any]):
    def to_representation(self, value: Any) -> Any:
        return value

    def to_internal_value(self, data: Any) -> list[dict[str, Any]]:
        if not isinstance(data, list):
            raise serializers.ValidationError("must be an array of tool definitions")
        check_count(data, MAX_TOOLS, "tools")
        cleaned: list[dict[str, Any]] = []
        errors: dict[int, object] = {}
        for index, tool in enumerate(data):
            if not isinstance(tool, dict):
                errors[index] = "must be an object"
                continue
            kind = tool.get("type")
            if kind == "function":
                out, error = _function_tool(tool)
                if error:
                    errors[index] = error
                else:
                    cleaned.append(out)
            elif isinstance(kind, str) and kind in OTHER_TOOL_TYPES:
                if refused := _server_tool_parameters(server_tool_kind(kind), tool.get("parameters")):
                    errors[index] = {"parameters": refused}
                cleaned.append(dict(tool))
            else:
                errors[index] = {"type": f'"{kind}" is not a known tool type'}
        raise_indexed(errors)
        self._check_deferred(cleaned)
        names = [tool["name"] for tool in cleaned if tool["type"] == "function"]
        if len(names) != len(set(names)):
            raise serializers.ValidationError("function tool names must be unique")
        declared = {server_function_name(tool["type"]) for tool in cleaned if server_tool_kind(tool["type"])}
        if clash := sorted(declared.intersection(names)):
            raise serializers.ValidationError(f"function tool name {clash[0]} is the name of a server tool in tools")
        return cleaned

    @staticmethod
    def _check_deferred(tools: list[dict[str, Any]]) -> None:
        deferred = [tool for tool in tools if tool.get("defer_loading")]
        if not deferred:
            return
        if not any(server_tool_kind(tool["type"]) == TOOL_SEARCH for tool in tools):
            raise serializers.ValidationError(f"defer_loading needs the {TOOL_SEARCH} server tool in tools")
        if all(tool.get("defer_loading") for tool in tools if tool["type"] == "function"):
            raise serializers.ValidationError("at least one function tool must not be deferred (defer_loading)")


def server_tool_kind(kind: str) -> str:
    """The server tool this gateway runs that a tool type names (`openrouter:<tool>`, the openrouter SDK's name,
    is an alias of `gateway:<tool>`: output items keep the caller's spelling); "" for any other type."""
    kind = kind.replace("openrouter:", "gateway:", 1)
    return kind if kind in RUN_TOOL_PARAMETERS else ""


def server_function_name(kind: str) -> str:
    """The function a server tool is declared to the model as: gateway:web_search -> gateway_web_search."""
    return server_tool_kind(kind).replace(":", "_", 1)


def _server_tool_parameters(kind: str, parameters: object) -> str | None:
    """A server tool's `parameters`: an object of the fields the tool takes (checked again where it runs)."""
    if parameters is None or kind not in RUN_TOOL_PARAMETERS:
        return None
    if not isinstance(parameters, dict):
        return "must be an object"
    unknown = sorted(set(parameters) - set(RUN_TOOL_PARAMETERS[kind]))
    if unknown:
        return f"{unknown[0]} is not supported for {kind}; supported: {', '.join(RUN_TOOL_PARAMETERS[kind])}"
    for name, value in parameters.items():
        if name == "tools":
            if refused := panel_tools_error(value):
                return f"tools: {refused}"
        elif not _valid(PARAMETER_SCHEMAS[name], value):
            return f"{name}: must match {json.dumps(PARAMETER_SCHEMAS[name])}"
        elif name in ("analysis_models", "model"):
            if router := next((m for m in (value if isinstance(value, list) else [value]) if m in ROUTERS), None):
                return f"{name}: {router} is a router, not a model (a fusion run cannot start another)"
    return None


def _valid(schema: dict[str, Any], value: object) -> bool:
    if schema["type"] in ("integer", "number"):
        numeric = isinstance(value, int) if schema["type"] == "integer" else isinstance(value, int | float)
        return numeric and not isinstance(value, bool) and schema["minimum"] <= value <= schema.get("maximum", value)
    if schema["type"] == "string":
        return (
            isinstance(value, str)
            and 0 < len(value) <= schema.get("maxLength", 64)
            and ("enum" not in schema or value in schema["enum"])
        )
    items = schema.get("items") or {"type": "string", "minLength": 1, "maxLength": 300}
    return (
        isinstance(value, list)
        and schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", 100)
        and all(_valid(items, item) for item in value)
    )


def panel_tools_error(tools: object) -> str | None:
    """A fusion panel's `tools` (the fusion plugin's, the gateway:fusion tool's): server tools a panel member may
    use, each with its own parameters; why not, else None."""
    if not isinstance(tools, list) or len(tools) > 8:
        return "must be an array of at most 8 server tools"
    for index, tool in enumerate(tools):
        kind = server_tool_kind(str(tool.get("type"))) if isinstance(tool, dict) else ""
        if kind not in PANEL_TOOLS:
            named = tool.get("type") if isinstance(tool, dict) else tool
            return (
                f"[{index}] {named!r} is not a panel tool; a panel can use {', '.join(PANEL_TOOLS)} "
                "(gateway:fusion never: a fusion run cannot start another)"
            )
        if set(tool) - {"type", "parameters"}:
            return f"[{index}] takes type and parameters only"
        if refused := _server_tool_parameters(kind, tool.get("parameters")):
            return f"[{index}].parameters: {refused}"
    return None


TOOL_CHOICE_FIELD_SCHEMA = {
    "oneOf": [
        {"type": "string", "enum": list(TOOL_CHOICE_MODES)},
        {
            "type": "object",
            "required": ["type", "name"],
            "description": "A function tool of `tools`, by name (not a deferred one: it is not sent before "
            "gateway:tool_search finds it)",
            "properties": {
                "type": {"type": "string", "enum": ["function"]},
                "name": {"type": "string", "minLength": 1},
            },
        },
        {
            "type": "object",
            "required": ["type", "tools"],
            "description": "Only these tools of `tools` may be called (auto: may; required: one must be). Sent as "
            "such to the Responses wire; elsewhere as the tool list cut to them, with auto or required. A deferred "
            "function only beside gateway:tool_search: allowed once found",
            "properties": {
                "type": {"type": "string", "enum": ["allowed_tools"]},
                "mode": {"type": "string", "enum": ["auto", "required"]},
                "tools": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_TOOLS,
                    "items": {
                        "type": "object",
                        "required": ["type"],
                        "description": "A tool of `tools`: {type: function, name}, or a tool type ({type: mcp, "
                        "server_label} for one MCP server)",
                        "properties": {"type": {"type": "string"}, "name": {"type": "string"}},
                    },
                },
            },
        },
        {
            **OTHER_TOOL_SCHEMA,
            "description": "A tool of `tools` by type, forced (a provider-run tool: only endpoints that run it)",
        },
    ]
}


@extend_schema_field(TOOL_CHOICE_FIELD_SCHEMA)
class ToolChoiceField(serializers.Field[Any, Any, Any, Any]):
    def to_representation(self, value: Any) -> Any:
        return value

    def to_internal_value(self, data: Any) -> str | dict[str, Any]:
        if isinstance(data, str):
            if data not in TOOL_CHOICE_MODES:
                raise serializers.ValidationError(f'"{data}" is not valid; expected one of {list(TOOL_CHOICE_MODES)}')
            return data
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            raise serializers.ValidationError("must be auto, none, required or an object with a type")
        if data["type"] == "function":
            if not isinstance(data.get("name"), str) or not data["name"]:
                raise serializers.ValidationError({"name": "is required for a function tool choice"})
            return {"type": "function", "name": data["name"]}
        if data["type"] == "allowed_tools":
            return _allowed_tools(data)
        if data["type"] in OTHER_TOOL_TYPES:
            return data
        raise serializers.ValidationError({"type": f'"{data["type"]}" is not a valid tool choice type'})


def _allowed_tools(data: dict[str, Any]) -> dict[str, Any]:
    """{type: allowed_tools, mode: auto|required, tools: [tool references]}: each reference an object with a type
    (a function's with its name); whether each names a tool of `tools` is checked with the request."""
    if set(data) - {"type", "mode", "tools"}:
        raise serializers.ValidationError(
            f"allowed_tools takes type, mode and tools; not {sorted(set(data) - {'type', 'mode', 'tools'})[0]}"
        )
    tools = data.get("tools")
    if (
        data.get("mode", "auto") not in ("auto", "required")
        or not isinstance(tools, list)
        or not 0 < len(tools) <= MAX_TOOLS
    ):
        raise serializers.ValidationError(
            f"allowed_tools needs mode auto|required and a tools array of 1 to {MAX_TOOLS} tool references"
        )
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise serializers.ValidationError({"tools": {str(index): "must be an object with a type"}})
        if tool["type"] == "function" and (not isinstance(tool.get("name"), str) or not tool["name"]):
            raise serializers.ValidationError({"tools": {str(index): {"name": "is required for a function tool"}}})
    return {"type": "allowed_tools", "mode": data.get("mode", "auto"), "tools": [dict(tool) for tool in tools]}


def _names_tool(reference: dict[str, Any], tools: list[dict[str, Any]]) -> bool:
    """Whether a tool reference (a tool_choice object, an allowed_tools entry) names a tool of the request's `tools`:
    a function by name, a server tool by its kind (either spelling), a provider-run tool by what it runs (an MCP
    tool by its server_label when given), any other type by type."""
    kind = str(reference.get("type"))
    if kind == "function":
        return any(tool["type"] == "function" and tool["name"] == reference.get("name") for tool in tools)
    if server := server_tool_kind(kind):
        return any(server_tool_kind(tool["type"]) == server for tool in tools)
    if runs := capability(kind):
        label = reference.get("server_label")
        return any(
            capability(tool["type"]) == runs and (label is None or tool.get("server_label") == label) for tool in tools
        )
    return any(tool["type"] == kind and tool.get("name") == reference.get("name") for tool in tools)


def tool_choice_problem(choice: object, tools: list[dict[str, Any]], *, complete: bool = False) -> str | None:
    """Why a tool_choice object cannot be honoured with these tools (None: it can): it must name a tool the request
    declares (a function by name, a provider-run tool by type, ...); a choice naming none reached the provider as a
    shape it did not know (a 500 on the Anthropic wire) or was dropped. `complete`: the tools are the final list,
    the ones the request's plugins add included (the web-fetch plugin's gateway:web_fetch); before that, a server
    tool not yet among them is left to that later check."""
    if not isinstance(choice, dict):
        return None
    references = choice["tools"] if choice["type"] == "allowed_tools" else [choice]
    for index, reference in enumerate(references):
        where = f"tools[{index}]: " if choice["type"] == "allowed_tools" else ""
        if not _names_tool(reference, tools) and (complete or not server_tool_kind(str(reference.get("type")))):
            if reference is choice and choice["type"] == "function":
                return f'no function tool named "{choice["name"]}"'
            return f"{where}the {_described(reference)} is not among the request's tools"
        if why := _deferred_problem(reference, choice, tools):
            return f"{where}{why}"
    return None


def deferred_names(tools: list[dict[str, Any]]) -> frozenset[str]:
    """The function tools withheld from the model until gateway:tool_search finds them (defer_loading)."""
    return frozenset(tool["name"] for tool in tools if tool["type"] == "function" and tool.get("defer_loading"))


def _deferred_problem(reference: dict[str, Any], choice: dict[str, Any], tools: list[dict[str, Any]]) -> str | None:
    """A deferred function is not sent until tool_search finds it: it cannot be forced (the first round could not
    call it), and an allowed_tools list may name it only beside gateway:tool_search (it is allowed once found)."""
    if reference.get("type") != "function" or reference.get("name") not in deferred_names(tools):
        return None
    named = _described(reference)
    if choice["type"] != "allowed_tools":
        return f"the {named} is deferred (defer_loading): unsent until {TOOL_SEARCH} finds it, so it cannot be forced"
    if not any(server_tool_kind(str(other.get("type"))) == TOOL_SEARCH for other in choice["tools"]):
        return (
            f"the {named} is deferred (defer_loading) and {TOOL_SEARCH}, which finds it, is not among the allowed "
            "tools: it could never be called"
        )
    return None


def _described(reference: dict[str, Any]) -> str:
    if reference.get("type") == "function":
        return f'function tool "{reference.get("name")}"'
    return f"tool type '{reference.get('type')}'"
