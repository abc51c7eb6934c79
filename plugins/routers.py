"""Placeholder until the stage is built: honours no plugin id, so a request naming its plugin is still 400."""

from routing.canonical import CanonicalRequest
from routing.stages import RequestContext, Staged


class RouterStage:
    type = "request_plugin"
    name = "routers"
    plugin_ids: tuple[str, ...] = ()

    def __call__(self, request: CanonicalRequest, ctx: RequestContext) -> Staged:
        return Staged(request=request)  # no entry: the stage did not run
