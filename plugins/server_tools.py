"""Placeholder until the server-tool loop is built: runs no tool type, so a request with a server tool is 400."""

from routing.canonical import CanonicalResponse
from routing.stages import RequestContext


class ServerToolsStage:
    type = "server_tools"
    name = "server-tools"
    plugin_ids: tuple[str, ...] = ()
    tool_types: tuple[str, ...] = ()

    def wants(self, ctx: RequestContext) -> bool:
        return False

    def __call__(self, response: CanonicalResponse, ctx: RequestContext) -> CanonicalResponse:
        return response
