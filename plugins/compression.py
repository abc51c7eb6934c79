"""Placeholder until the plugin is built: honours no plugin id, so a request naming it is still refused (400)."""

from routing.canonical import CanonicalRequest
from routing.stages import RequestContext, Staged


class ContextCompressionStage:
    type = "request_plugin"
    name = "compression"
    plugin_ids: tuple[str, ...] = ()

    def wants(self, ctx: RequestContext) -> bool:
        return False

    def __call__(self, request: CanonicalRequest, ctx: RequestContext) -> Staged:
        return Staged(request=request)  # no entry: the stage did not run
