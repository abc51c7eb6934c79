"""Validated request data -> the canonical request shape that adapters translate."""

import hashlib
import hmac
import json
from dataclasses import dataclass, field, replace
from decimal import Decimal

from django.conf import settings

from gateway.billing.services import ReservationHandle, SpendCap
from gateway.errors import GatewayError
from responses_api.validation.request import MAX_TOOL_CALLS
from responses_api.validation.tools import deferred_names, server_function_name, server_tool_kind
from routing.canonical import (
    CanonicalRequest,
    FilePart,
    FunctionCall,
    FunctionCallOutput,
    FunctionTool,
    ImagePart,
    Item,
    Message,
    Reasoning,
    ReasoningConfig,
    TextPart,
    Usage,
)
from routing.limits import RoutingLimit
from routing.providers.base import forces_tool
from routing.providers.hosted import hosted_tools
from routing.stages import server_function

IMAGE_TOKENS = 1000  # a rough per-image estimate for reservations and context checks
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Prepared:
    """What the service needs from a validated request."""

    models: list[str]  # without routing suffixes
    canonical: CanonicalRequest  # `model` is filled in per attempt
    data: dict = field(repr=False)  # the validated request, for echoing in results
    estimated_input_tokens: int = 0
    suffix: str | None = None  # ":nitro" / ":floor" of the first model
    used_params: frozenset[str] = frozenset()
    limits: tuple[RoutingLimit, ...] = ()  # where pre-stages (guardrails) let the request route
    caps: tuple[SpendCap, ...] = ()  # the budgets pre-stages (guardrails) hold it to
    stage_cost: Decimal = Decimal(0)  # what pre-stages' own model calls cost (moderation, OCR): held and charged
    stage_usage: Usage = field(default_factory=Usage)  # their tokens (a fusion panel's): added to the usage
    record: dict = field(default_factory=dict)  # pre-stages' figures for the generation record
    strategy: str = "direct"  # how the models were chosen (a router pre-stage: auto, pareto, fusion)
    server_rounds: int = 1  # the most model calls the server-tool loop may make (1: the request has no server tool)
    holds: tuple[ReservationHandle, ...] = ()  # pre-stages' holds (a fusion panel's): the request's own takes them over


MSG_REQUIRED = "tool_choice: required needs a tool to call (tools is empty)"


def server_functions(tools: list[dict]) -> tuple[FunctionTool, ...]:
    """The declared functions of the request's server tools that the gateway runs."""
    kinds = dict.fromkeys(kind for tool in tools if (kind := server_tool_kind(tool["type"])))
    return tuple(server_function(kind) for kind in kinds)


def _tool_choice(choice, deferred: frozenset[str] = frozenset()):
    """A server tool chosen by type is its declared function (in an allowed_tools list too). An allowed_tools list
    names only the tools sent: a deferred function joins it when tool_search finds it (plugins.server_tools)."""
    if isinstance(choice, dict) and server_tool_kind(str(choice.get("type"))):
        return {"type": "function", "name": server_function_name(choice["type"])}
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        sent = [ref for ref in choice["tools"] if not (ref["type"] == "function" and ref.get("name") in deferred)]
        return {**choice, "tools": [_tool_choice(reference) for reference in sent]}
    return choice


def _part(part: dict):
    kind = part["type"]
    if kind in ("input_text", "output_text"):
        annotations = tuple(part.get("annotations") or ())  # an answer's, sent back (file-parser reuses its files)
        return TextPart(text=part["text"], cache_control=part.get("cache_control"), annotations=annotations)
    if kind == "refusal":
        return TextPart(text=part["refusal"])
    if kind == "input_image":
        return ImagePart(
            url=part.get("image_url") or part["file_id"],
            detail=part.get("detail") or "auto",
            cache_control=part.get("cache_control"),
        )
    return FilePart(
        filename=part.get("filename"),
        file_data=part.get("file_data"),
        file_url=part.get("file_url"),
        file_id=part.get("file_id"),
        cache_control=part.get("cache_control"),
    )


def _item(item: dict) -> Item:
    kind = item["type"]
    if kind == "message":
        return Message(role=item["role"], content=tuple(_part(part) for part in item["content"]))
    if kind == "function_call":
        return FunctionCall(
            call_id=item["call_id"],
            name=item["name"],
            arguments=item["arguments"],
            id=item.get("id"),
            cache_control=item.get("cache_control"),
        )
    if kind == "function_call_output":
        return FunctionCallOutput(
            call_id=item["call_id"], output=item["output"], cache_control=item.get("cache_control")
        )
    return Reasoning(
        id=item.get("id"),
        summary=tuple(p["text"] for p in item.get("summary") or []),
        content=tuple(p["text"] for p in item.get("content") or []),
        signature=item.get("signature"),
        encrypted_content=item.get("encrypted_content"),
        format=item.get("format"),
    )


def estimate_tokens(items: tuple[Item, ...], instructions: str | None, tools: tuple[FunctionTool, ...]) -> int:
    chars = len(instructions or "")
    if tools:
        chars += len(json.dumps([(t.name, t.description, t.parameters) for t in tools]))
    images = 0
    for item in items:
        if isinstance(item, Message):
            for part in item.content:
                if isinstance(part, TextPart):
                    chars += len(part.text)
                elif isinstance(part, ImagePart):
                    images += 1
                else:
                    chars += len(part.file_data or "") // 3  # base64 of a document: a rough share
        elif isinstance(item, FunctionCall):
            chars += len(item.arguments) + len(item.name)
        elif isinstance(item, FunctionCallOutput):
            chars += len(item.output)
        elif isinstance(item, Reasoning):
            chars += sum(map(len, item.summary + item.content))
    return chars // CHARS_PER_TOKEN + images * IMAGE_TOKENS + 1


def safety_hash(*, account_id: str, value: str | None) -> str:
    """A stable keyed hash of the end-user identity (the account's when none is given); never the raw value."""
    subject = f"{account_id}:{value}" if value else f"{account_id}:account"
    return hmac.new(settings.SECRET_KEY.encode(), subject.encode(), hashlib.sha256).hexdigest()[:32]


def used_parameters(data: dict) -> frozenset[str]:
    """The catalog's parameter names that this request uses (for `provider.require_parameters`)."""
    used = {
        name
        for name in (
            "temperature",
            "top_p",
            "top_k",
            "frequency_penalty",
            "presence_penalty",
            "parallel_tool_calls",
            "top_logprobs",
            "seed",
        )
        if data.get(name) is not None
    }
    if data.get("stop"):
        used.add("stop")
    if data.get("logprobs") or data.get("top_logprobs") is not None:
        used.add("logprobs")
    if data.get("max_output_tokens") is not None:
        used.add("max_tokens")
    if any(tool["type"] == "function" or server_tool_kind(tool["type"]) for tool in data.get("tools") or []):
        used |= {"tools", "tool_choice"} if data.get("tool_choice") not in (None, "auto") else {"tools"}
        if data.get("parallel_tool_calls") is False:
            used.add("parallel_tool_calls_off")  # not on every wire (routing.providers.base)
        if any(tool["type"] == "function" and tool.get("strict") for tool in data["tools"]):
            used.add("strict_tools")
    text_format = (data.get("text") or {}).get("format") or {}
    if text_format.get("type") in ("json_object", "json_schema"):
        used.add("response_format")
    if text_format.get("type") == "json_schema":
        used.add("structured_outputs")
    if (data.get("text") or {}).get("verbosity"):
        used.add("verbosity")
    reasoning = data.get("reasoning")
    if reasoning and reasoning.get("enabled") is not False and reasoning.get("effort") != "none":
        used.add("reasoning")
        # a forced call of a provider-run tool too (Anthropic's web search chosen is its tool choice `tool`)
        if data.get("tools") and forces_tool(data.get("tool_choice")):
            used.add("reasoning_with_forced_tool_choice")  # not on every wire (routing.providers.base)
    return frozenset(used)


def prepare(*, data: dict, account_id: str) -> Prepared:
    from routing.preferences import split_model_suffix

    requested = ([data["model"]] if data.get("model") else []) + [
        m for m in data.get("models") or [] if m != data.get("model")
    ]
    split = [split_model_suffix(model) for model in requested]
    models = list(dict.fromkeys(base for base, _ in split))
    suffix = split[0][1]
    tools = tuple(
        FunctionTool(
            name=tool["name"],
            description=tool.get("description"),
            parameters=tool.get("parameters"),
            strict=tool.get("strict"),
            cache_control=tool.get("cache_control"),
        )
        for tool in data.get("tools") or []
        if tool["type"] == "function" and not tool.get("defer_loading")
    ) + server_functions(data.get("tools") or [])
    hosted = hosted_tools(data.get("tools") or [])  # the provider runs these (routing.providers.hosted)
    if data.get("tool_choice") == "required" and not (tools or hosted):  # plugins' tools counted: added before
        raise GatewayError(MSG_REQUIRED, status=400, metadata={"param": "tool_choice"})
    reasoning = data.get("reasoning")
    text = data.get("text") or {}
    items = tuple(_item(item) for item in data["input"])
    canonical = CanonicalRequest(
        model="",
        input=items,
        instructions=data.get("instructions") or None,
        tools=tools,
        tool_choice=_tool_choice(data.get("tool_choice"), deferred_names(data.get("tools") or []))
        if tools or hosted
        else None,
        parallel_tool_calls=data.get("parallel_tool_calls"),
        temperature=data.get("temperature"),
        top_p=data.get("top_p"),
        top_k=data.get("top_k"),
        frequency_penalty=data.get("frequency_penalty"),
        presence_penalty=data.get("presence_penalty"),
        max_output_tokens=data.get("max_output_tokens"),
        stop=tuple(data.get("stop") or ()),  # `stop`, `seed`, `logprobs`: from the chat and messages front doors
        seed=data.get("seed"),
        logprobs=bool(data.get("logprobs")) or data.get("top_logprobs") is not None,
        top_logprobs=data.get("top_logprobs"),
        text_format=dict(text["format"]) if text.get("format") else None,
        verbosity=text.get("verbosity"),
        reasoning=ReasoningConfig(**{k: reasoning.get(k) for k in ("effort", "max_tokens", "summary", "enabled")})
        if reasoning
        else None,
        stream=bool(data.get("stream")),
        safety_identifier=safety_hash(account_id=account_id, value=data.get("safety_identifier") or data.get("user")),
        prompt_cache_key=data.get("prompt_cache_key"),
        cache_control=dict(data["cache_control"]) if data.get("cache_control") else None,
        service_tier=data.get("service_tier"),
        hosted_tools=hosted,
    )
    estimated = estimate_tokens(items, canonical.instructions, tools)
    rounds = 1
    if any(server_tool_kind(tool["type"]) for tool in data.get("tools") or []):
        # every round but the last runs a call at least; stop conditions stop it sooner, never later than 30 calls
        calls = MAX_TOOL_CALLS if data.get("stop_server_tools_when") else data.get("max_tool_calls") or MAX_TOOL_CALLS
        rounds = 1 + calls
    return Prepared(
        models=models,
        canonical=canonical,
        data=data,
        estimated_input_tokens=estimated,
        suffix=suffix,
        used_params=used_parameters(data),
        server_rounds=rounds,
    )


def truncate_to_fit(prepared: Prepared, *, context_length: int) -> Prepared:
    """`truncation: auto`: drop the oldest non-system items until the input fits."""
    items = list(prepared.canonical.input)
    estimate = prepared.estimated_input_tokens
    while estimate > context_length:
        index = next(
            (
                i
                for i, item in enumerate(items[:-1])
                if not (isinstance(item, Message) and item.role in ("system", "developer"))
            ),
            None,
        )
        if index is None:
            break
        items.pop(index)
        estimate = estimate_tokens(tuple(items), prepared.canonical.instructions, prepared.canonical.tools)
    canonical = replace(prepared.canonical, input=tuple(items))
    return replace(prepared, canonical=canonical, estimated_input_tokens=estimate)


def reestimated(prepared: Prepared, canonical: CanonicalRequest) -> Prepared:
    """The prepared request with a pre-stage's version of the canonical request (its input estimated again when
    the stage changed it)."""
    if canonical is prepared.canonical:
        return prepared
    estimate = estimate_tokens(canonical.input, canonical.instructions, canonical.tools)
    return replace(prepared, canonical=canonical, estimated_input_tokens=estimate)
