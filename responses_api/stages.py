"""The configured stages of the request pipeline, in order (the interface: routing.stages). Built from
settings.PIPELINE_PRE_STAGES / PIPELINE_POST_STAGES (dotted paths of stage classes), so responses_api names
no guardrail or plugin module itself; tests may replace the lists."""

from django.conf import settings
from django.utils.module_loading import import_string

from routing.canonical import CanonicalResponse
from routing.stages import Block, PostStage, PreStage, RequestContext, StageEntry

PRE_STAGES: list[PreStage] = [import_string(path)() for path in settings.PIPELINE_PRE_STAGES]
POST_STAGES: list[PostStage] = [import_string(path)() for path in settings.PIPELINE_POST_STAGES]


def post_stages(response: CanonicalResponse, ctx: RequestContext, ran: list[StageEntry]) -> CanonicalResponse:
    """The post-stages in order, each listed in `ran`; raises StageBlocked when one refuses the response."""
    for stage in POST_STAGES:
        result = stage(response, ctx)
        if isinstance(result, Block):
            ran.append(StageEntry(type=stage.type, name=stage.name, outcome="blocked"))
            raise result.error()
        ran.append(StageEntry(type=stage.type, name=stage.name, outcome="passed" if result is response else "changed"))
        response = result
    return response
