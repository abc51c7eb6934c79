"""Tools the provider runs itself (web_search, code_interpreter, image_generation, mcp, file_search in `tools`):
passed through to the endpoints that run them, never dropped.

HostedToolsStage (pre-stage) limits the request's routing to the endpoints of its models whose catalog entry lists
every hosted tool it names (`hosted_tools`) and whose adapter can send each as given (Anthropic: web search with
allowed or blocked domains, ...); when no endpoint can, the request is a 400 naming the tool. The `web` plugin's
native search (plugins.web) routes with the same rule (`capable_endpoints`)."""

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from routing.canonical import CanonicalRequest, HostedTool
from routing.catalog import EndpointInfo
from routing.limits import RoutingLimit
from routing.providers.hosted import WEB_SEARCH, capability
from routing.providers.registry import adapter_for
from routing.selectors import endpoints_for_model
from routing.stages import Block, RequestContext, Staged, StageEntry

MSG_ONE_SEARCH = "tools: at most one web_search tool (its filters and location apply to every search)"
MSG_CHOICE = "tool_choice: the tool type '{type}' is not among the request's tools"
MSG_NOT_RUN = "{source}: the tool type '{type}' is not available on this gateway for {models}: {why}"


@dataclass(frozen=True, slots=True)
class Capable:
    """The endpoints that run a request's hosted tools, or why none does (`index`: the tool no endpoint runs, -1
    when each runs somewhere but no endpoint runs them all)."""

    endpoint_ids: frozenset[int] = frozenset()
    why: str = ""
    index: int = -1


@dataclass(frozen=True, slots=True)
class EndpointsLimit(RoutingLimit):
    """Routing limited to these endpoints (the ones that run a request's hosted tools). Its status is 400: the
    request asked for what only they can do."""

    endpoint_ids: frozenset[int] = frozenset()

    def excludes(self, endpoint: EndpointInfo) -> bool:
        return endpoint.id not in self.endpoint_ids


def tool_problem(endpoint: EndpointInfo, tool: dict[str, Any]) -> str | None:
    """Why this endpoint cannot run the hosted tool as given (None: it can)."""
    if capability(str(tool.get("type"))) not in endpoint.hosted_tools:
        return "not listed"
    judge = getattr(adapter_for(endpoint.adapter), "hosted_tool_problem", None)
    return judge(tool) if judge is not None else f"the {endpoint.adapter} adapter passes no hosted tool"


def capable_endpoints(models: Sequence[str], tools: Sequence[HostedTool]) -> Capable:
    """The endpoints of `models` that run every tool of `tools` as given, or why there is none."""
    endpoints = [endpoint for model in models for endpoint in endpoints_for_model(model_id=model)]
    able = {endpoint.id for endpoint in endpoints}
    for index, tool in enumerate(hosted.spec for hosted in tools):
        problems = {endpoint.id: tool_problem(endpoint, tool) for endpoint in endpoints}
        running = {endpoint_id for endpoint_id, problem in problems.items() if problem is None}
        if not running:
            given = next((p for p in problems.values() if p and p != "not listed"), "")
            why = f"no endpoint runs it as given ({given})" if given else "no endpoint runs it"
            return Capable(why=why, index=index)
        able &= running
    if not able:
        return Capable(why=f"no endpoint runs {', '.join(str(t.spec.get('type')) for t in tools)} together")
    return Capable(endpoint_ids=frozenset(able))


class HostedToolsStage:
    """The request's hosted tools reach only the endpoints that run them (a 400 when none does)."""

    type = "hosted_tools"
    name = "hosted-tools"
    plugin_ids: tuple[str, ...] = ()

    def __call__(self, request: CanonicalRequest, ctx: RequestContext) -> CanonicalRequest | Staged | Block:
        if not request.hosted_tools:
            return Staged(request=request)  # nothing to say: no pipeline entry
        choice = request.tool_choice
        if choice == "none" and not request.tools:  # no tool may be called: none is sent
            entry = StageEntry(type=self.type, name=self.name, outcome="not sent: tool_choice none")
            return Staged(request=replace(request, hosted_tools=()), entries=(entry,))
        searching = [t for t in request.hosted_tools if capability(str(t.spec.get("type"))) == WEB_SEARCH]
        if len(searching) > 1:  # one search tool: the searches a call may make are held and told to the provider
            return Block(MSG_ONE_SEARCH, status=400, metadata={"param": searching[1].source})
        kind = str(choice.get("type")) if isinstance(choice, dict) else ""
        if capability(kind) and not any(
            capability(str(t.spec.get("type"))) == capability(kind) for t in request.hosted_tools
        ):
            return Block(MSG_CHOICE.format(type=kind), status=400, metadata={"param": "tool_choice"})
        capable = capable_endpoints(ctx.models, request.hosted_tools)
        if not capable.endpoint_ids:
            tool = request.hosted_tools[max(capable.index, 0)]
            models = ", ".join(ctx.models)
            message = MSG_NOT_RUN.format(source=tool.source, type=tool.spec.get("type"), models=models, why=capable.why)
            if capable.index < 0:
                message = f"tools: the provider-run tools are not available together on this gateway: {capable.why}"
            return Block(message, status=400, metadata={"param": tool.source if capable.index >= 0 else "tools"})
        types = sorted({str(tool.spec.get("type")) for tool in request.hosted_tools})
        limit = EndpointsLimit(source=f"tools ({', '.join(types)})", status=400, endpoint_ids=capable.endpoint_ids)
        entry = StageEntry(
            type=self.type,
            name=self.name,
            outcome=f"passed through to the provider: {', '.join(types)}",
            data={"tools": types, "endpoints": len(capable.endpoint_ids)},
        )
        return Staged(request=request, entries=(entry,), limits=(limit,))
