"""The server_tools plugin's stage: the request's own server-tool loop (plugins.common.tool_loop), a post-stage.
The first round is the request's own attempt sequence; each later round is one more pass over the plan through
`ctx.tool_loop.call` (responses_api.service.ResponseRun.tool_round), billed with the request. The `web-fetch`
plugin entry declares the gateway:web_fetch tool (plugins.web_fetch runs it)."""

from collections.abc import Generator
from decimal import Decimal
from typing import Any

from gateway.errors import GatewayError
from plugins.common.config import plugin_settings
from plugins.common.tool_loop import Loop, Refused, kind_of
from plugins.common.tools import MAX_WEB_USES, RUNNERS
from routing.attempts import AttemptStream
from routing.canonical import (
    CanonicalResponse,
)
from routing.errors import ErrorType, UpstreamError
from routing.stages import (
    Block,
    LoopEvent,
    RequestContext,
    Restaged,
)


def tools_hold(data: dict[str, Any], rounds: int) -> Decimal:
    """The most the request's server tools can cost by themselves (held with the request): each gateway:web_search
    call the loop may run (`rounds` - 1 calls at most, the tool's max_uses at most) at its engine's price, the
    dearest configured engine's when it names none. gateway:fusion is checked against the balance when it runs."""
    calls = rounds - 1
    total = Decimal(0)
    search = RUNNERS.get("gateway:web_search")
    if search is None or search.price is None:
        return total
    for tool in data.get("tools") or []:
        if not isinstance(tool.get("type"), str) or kind_of(tool) != "gateway:web_search":
            continue
        parameters = tool.get("parameters") or {}
        try:
            price = search.price(parameters)
        except GatewayError:  # a price misconfigured: the search itself fails
            price = Decimal(0)
        uses = parameters.get("max_uses")
        uses = (
            uses if isinstance(uses, int) and not isinstance(uses, bool) and 0 < uses < MAX_WEB_USES else MAX_WEB_USES
        )
        total = max(total, min(calls, uses) * price)  # one gateway:web_search: the dearest of its declarations
    return total


WEB_FETCH_PLUGIN = "web-fetch"
WEB_FETCH_FIELDS = ("max_uses", "max_content_tokens", "allowed_domains", "blocked_domains")


class ServerToolsStage:
    type = "server_tools"
    name = "server-tools"
    plugin_ids: tuple[str, ...] = (WEB_FETCH_PLUGIN,)

    @staticmethod
    def plugin_tools(ctx: RequestContext, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The `web-fetch` plugin (the request's entry, else the account's default): the gateway:web_fetch tool with
        the plugin's fields as its parameters, unless the request names that tool itself (its own settings)."""
        settings = plugin_settings(ctx, WEB_FETCH_PLUGIN)
        if settings is None or any(kind_of(tool) == "gateway:web_fetch" for tool in tools):
            return []
        parameters = {name: settings[name] for name in WEB_FETCH_FIELDS if name in settings}
        return [{"type": "gateway:web_fetch", "parameters": parameters}]

    @property
    def tool_types(self) -> tuple[str, ...]:
        """The server tool types this gateway runs (gateway:web_search only with a search engine configured)."""
        kinds = tuple(kind for kind, runner in RUNNERS.items() if runner.available())
        return kinds + tuple(kind.replace("gateway:", "openrouter:", 1) for kind in kinds)

    def wants(self, ctx: RequestContext) -> bool:
        return ctx.tool_loop is not None

    @staticmethod
    def hold(data: dict[str, Any], rounds: int) -> Decimal:
        """What the request's server tools may cost by themselves (responses_api.service holds it): tools_hold."""
        return tools_hold(data, rounds) if rounds > 1 else Decimal(0)

    def __call__(self, response: CanonicalResponse, ctx: RequestContext) -> Restaged | Block:
        loop, request = ctx.tool_loop, ctx.request
        assert loop is not None and request is not None
        try:
            return Loop(loop, request, ctx).run(response)
        except Refused as refused:
            return refused.block
        except UpstreamError as error:  # a later round found no candidate: the request fails as a first would
            status = error.status if error.status and 400 <= error.status < 600 else 502
            kind = error.error_type if error.error_type in ErrorType.__members__.values() else ErrorType.SERVER
            return Block(error.message, status=status, error_type=ErrorType(kind))

    def live(self, first: AttemptStream, ctx: RequestContext) -> Generator[LoopEvent, None, Restaged]:
        """The loop while the stream is relayed (see the module); a later round's failure is raised
        (UpstreamError: the stream fails in band), and so is a guardrail's refusal of a tool's result
        (StageBlocked)."""
        loop, request = ctx.tool_loop, ctx.request
        assert loop is not None and request is not None
        try:
            return (yield from Loop(loop, request, ctx).live(first))
        except Refused as refused:  # the answer has started: it fails in band with the guardrail's words
            raise refused.block.error() from None
