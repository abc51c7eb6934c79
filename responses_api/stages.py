"""The configured stages of the request pipeline, in order (the interface: routing.stages). Built from
settings.PIPELINE_PRE_STAGES / PIPELINE_POST_STAGES (dotted paths of stage classes), so responses_api names
no guardrail or plugin module itself; tests may replace the lists."""

from collections.abc import Iterable
from decimal import Decimal
from typing import Protocol, TypeGuard

from django.conf import settings
from django.utils.module_loading import import_string

from gateway.errors import GatewayError
from responses_api.validation.tools import tool_choice_problem
from routing.canonical import CanonicalResponse
from routing.providers.hosted import CAPABILITIES, capability, tool_problem
from routing.stages import Block, LiveStage, PostStage, PreStage, RequestContext, Restaged, StageEntry, ToolResultScan

PRE_STAGES: list[PreStage] = [import_string(path)() for path in settings.PIPELINE_PRE_STAGES]
POST_STAGES: list[PostStage] = [import_string(path)() for path in settings.PIPELINE_POST_STAGES]


# What a stage may offer beyond its PreStage/PostStage contract, each checked by its guard below (a plain attribute
# check: a runtime_checkable Protocol's isinstance costs some 50 times more, on every request).
class AddsTools(Protocol):
    """Adds tools to the request before they are checked (the web-fetch plugin's gateway:web_fetch)."""

    def plugin_tools(self, ctx: RequestContext, tools: list[dict]) -> list[dict]: ...


class RunsTools(Protocol):
    """Runs these tool types itself (the server-tool loop)."""

    tool_types: Iterable[str]


class ScansToolResults(Protocol):
    """Offers a scan of what the server-tool loop hands the model (the guardrails)."""

    def tool_results(self, ctx: RequestContext) -> ToolResultScan | None: ...


class HoldsOwnCalls(Protocol):
    """Its own calls may cost by themselves (the server tools' web searches): held with the request."""

    def hold(self, data: dict, rounds: int) -> Decimal: ...


class Notes(Protocol):
    """Says something about a request it does not run on (response-healing on a stream: not healed)."""

    def note(self, ctx: RequestContext) -> StageEntry | None: ...


def _adds_tools(stage: object) -> TypeGuard[AddsTools]:
    return hasattr(stage, "plugin_tools")


def _runs_tools(stage: object) -> TypeGuard[RunsTools]:
    return hasattr(stage, "tool_types")


def _scans_tool_results(stage: object) -> TypeGuard[ScansToolResults]:
    return hasattr(stage, "tool_results")


def _holds_own_calls(stage: object) -> TypeGuard[HoldsOwnCalls]:
    return hasattr(stage, "hold")


def _notes(stage: object) -> TypeGuard[Notes]:
    return hasattr(stage, "note")


MSG_PLUGIN_UNAVAILABLE = (
    "plugins[{index}]: the plugin '{id}' is not available on this gateway; remove it or set \"enabled\": false"
)

MSG_TOOL_UNAVAILABLE = (
    "tools[{index}]: the tool type '{type}' is not available on this gateway (it takes function tools, runs "
    "{honoured}, and passes {hosted} to the providers that run them); remove it"
)
MSG_HOSTED_REFUSED = "tools[{index}]: {why}"


def honoured_plugins() -> frozenset[str]:
    """The plugin ids some configured stage honours."""
    return frozenset(pid for stage in (*PRE_STAGES, *POST_STAGES) for pid in getattr(stage, "plugin_ids", ()))


def refuse_unhonoured_plugins(plugins: list[dict]) -> None:
    """A plugin the request turns on that no configured stage honours is a 400, not a 200 that did less."""
    honoured = honoured_plugins()
    for index, plugin in enumerate(plugins):
        if plugin.get("enabled", True) and plugin["id"] not in honoured:
            raise GatewayError(
                MSG_PLUGIN_UNAVAILABLE.format(index=index, id=plugin["id"]),
                status=400,
                metadata={"param": f"plugins[{index}].id"},
            )


def record_merge(record: dict, more: dict) -> dict:
    """Stages' figures for the generation record: `plugins` (by plugin id) merged, other fields replaced."""
    merged = {**record, **more}
    if "plugins" in record and "plugins" in more:
        merged["plugins"] = {**record["plugins"], **more["plugins"]}
    return merged


def with_plugin_tools(data: dict, ctx: RequestContext) -> dict:
    """The request with the tools its plugins add (a stage's `plugin_tools(ctx, tools)`: the web-fetch plugin's
    gateway:web_fetch), appended to its own before they are checked and normalized: a plugin that works through a
    server tool runs in the same loop as the tool named in `tools`."""
    tools = list(data.get("tools") or [])
    added = [
        tool for stage in (*PRE_STAGES, *POST_STAGES) if _adds_tools(stage) for tool in stage.plugin_tools(ctx, tools)
    ]
    return {**data, "tools": tools + added} if added else data


def refuse_unhonoured_tools(tools: list[dict]) -> None:
    """A tool other than a function tool that no configured stage runs (the server-tool loop declares the types it
    runs as `tool_types`) and no provider runs (a hosted tool: routing.providers.hosted, routed to the endpoints
    that run it by plugins.common.hosted_tools) is a 400, not a tool dropped on the way to the provider."""
    honoured = frozenset(
        kind for stage in (*PRE_STAGES, *POST_STAGES) if _runs_tools(stage) for kind in stage.tool_types
    )
    for index, tool in enumerate(tools):
        if capability(tool["type"]):
            if why := tool_problem(tool):
                raise GatewayError(
                    MSG_HOSTED_REFUSED.format(index=index, why=why), status=400, metadata={"param": f"tools[{index}]"}
                )
            continue
        if tool["type"] != "function" and tool["type"] not in honoured:
            raise GatewayError(
                MSG_TOOL_UNAVAILABLE.format(
                    index=index,
                    type=tool["type"],
                    honoured=", ".join(sorted(k for k in honoured if k.startswith("gateway:"))) or "no server tool",
                    hosted=", ".join(CAPABILITIES),
                ),
                status=400,
                metadata={"param": f"tools[{index}].type"},
            )


def refuse_unknown_tool_choice(data: dict) -> None:
    """tool_choice checked against the final tools, the ones plugins added included: the request's own check
    (validation) leaves a server tool it does not declare to this one, since a plugin (the web-fetch plugin, the
    request's entry or the account's default) may add it."""
    if problem := tool_choice_problem(data.get("tool_choice"), data.get("tools") or [], complete=True):
        raise GatewayError(f"tool_choice: {problem}", status=400, metadata={"param": "tool_choice"})


def tool_result_scan(ctx: RequestContext) -> ToolResultScan | None:
    """The scan a configured pre-stage offers (`tool_results(ctx)`, optional: the guardrails') for what the
    server-tool loop hands the model in later rounds, so that no round sends the model text the caller's
    guardrails did not read; None when no stage scans for this caller."""
    for stage in PRE_STAGES:
        if _scans_tool_results(stage) and (scan := stage.tool_results(ctx)) is not None:
            return scan
    return None


def wanted_post_stages(ctx: RequestContext) -> list[PostStage]:
    """The post-stages that run on this request (a stream is buffered only for these)."""
    return [stage for stage in POST_STAGES if stage.wants(ctx)]


def live_stage(wanted: list[PostStage]) -> LiveStage | None:
    """The one post-stage that runs while its stream is relayed (the server-tool loop, a LiveStage), when it is the
    only one wanted; None when the answer must be seen whole first. A plain attribute check: a runtime_checkable
    Protocol's isinstance costs some 50 times more, on every stream."""
    if len(wanted) == 1 and _is_live(wanted[0]):
        return wanted[0]
    return None


def _is_live(stage: object) -> TypeGuard[LiveStage]:
    return hasattr(stage, "live")


def tools_hold(data: dict, rounds: int) -> Decimal:
    """What the post-stages' own calls may cost by themselves (the server tools' web searches: a stage's `hold`)."""
    return sum((stage.hold(data, rounds) for stage in POST_STAGES if _holds_own_calls(stage)), Decimal(0))


def post_stage_notes(ctx: RequestContext) -> list[StageEntry]:
    """What the post-stages that do not run on this request say about it (`note(ctx)`, optional: e.g.
    response-healing on a stream: not healed), so a plugin the caller turned on is never silently skipped."""
    noting = (stage for stage in POST_STAGES if not stage.wants(ctx) and _notes(stage))
    return [entry for stage in noting if (entry := stage.note(ctx)) is not None]


def post_stages(
    response: CanonicalResponse, ctx: RequestContext, ran: list[StageEntry], record: dict
) -> CanonicalResponse:
    """The post-stages that want the request, in order, each listed in `ran` (their figures for the generation
    record into `record`); raises StageBlocked when one refuses the response."""
    for stage in wanted_post_stages(ctx):
        result = stage(response, ctx)
        if isinstance(result, Block):
            ran += result.entries or (StageEntry(type=stage.type, name=stage.name, outcome="blocked"),)
            raise result.error()
        if isinstance(result, Restaged):
            ran += result.entries
            record.update(record_merge(record, result.record))
            response = result.response
            continue
        ran.append(StageEntry(type=stage.type, name=stage.name, outcome="passed" if result is response else "changed"))
        response = result
    return response
