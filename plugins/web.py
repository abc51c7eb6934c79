"""Placeholder until the stage is built: honours no plugin id, so a request naming its plugin is still 400."""

from routing.canonical import CanonicalRequest
from routing.stages import RequestContext, Staged


class WebStage:
    type = "request_plugin"
    name = "web"
    plugin_ids: tuple[str, ...] = ()

    def __call__(self, request: CanonicalRequest, ctx: RequestContext) -> Staged:
        return Staged(request=request)  # no entry: the stage did not run


class WebCitationStage:
    """Placeholder: the `web` plugin's citations on the answer (url_citation annotations)."""

    type = "response_plugin"
    name = "web"
    plugin_ids: tuple[str, ...] = ()

    def wants(self, ctx: RequestContext) -> bool:
        return False

    def __call__(self, response, ctx: RequestContext):  # type: ignore[no-untyped-def]
        return response
