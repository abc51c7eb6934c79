"""Placeholder until the plugin is built: honours no plugin id, so a request naming it is still refused (400)."""

from routing.canonical import CanonicalResponse
from routing.stages import RequestContext


class ResponseHealingStage:
    type = "response_plugin"
    name = "healing"
    plugin_ids: tuple[str, ...] = ()

    def wants(self, ctx: RequestContext) -> bool:
        return False

    def __call__(self, response: CanonicalResponse, ctx: RequestContext) -> CanonicalResponse:
        return response
