"""Shared pieces for API views: content negotiation and documented error responses."""

from collections.abc import Sequence
from typing import Any

from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers
from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request

# Accept headers up to this long have their choice remembered (longer ones are negotiated every time).
MEMO_MAX_ACCEPT = 256
MEMO_MAX_ENTRIES = 256
# (Accept header, the renderers' media types) -> (index of the chosen renderer, the accepted media type).
_chosen: dict[tuple[str, ...], tuple[int, str]] = {}


class JsonFirstContentNegotiation(DefaultContentNegotiation):
    """Answer JSON whatever the Accept header says (SDKs send `text/event-stream` for streams,
    which the view renders itself); never a 406.

    The choice depends only on the Accept header and the renderers' media types (a `?format=` or a format
    suffix filters the renderers first: those requests are negotiated in full), so it is remembered for
    short headers: a request does not build `request.headers` and `request.GET`, nor parse the header."""

    def select_renderer(  # type: ignore[override]  # DRF passes the view's list of renderers
        self, request: Request, renderers: Sequence[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        meta = request.META
        accept = meta.get("HTTP_ACCEPT", "*/*")
        if format_suffix or meta.get("QUERY_STRING") or len(accept) > MEMO_MAX_ACCEPT:
            return self._negotiate(request, renderers, format_suffix)
        key = (accept, *[renderer.media_type for renderer in renderers])
        chosen = _chosen.get(key)
        if chosen is None:
            renderer, media_type = self._negotiate(request, renderers, None)
            chosen = (next(i for i, r in enumerate(renderers) if r is renderer), media_type)
            if len(_chosen) >= MEMO_MAX_ENTRIES:
                _chosen.clear()
            _chosen[key] = chosen
        return renderers[chosen[0]], chosen[1]

    def _negotiate(
        self, request: Request, renderers: Sequence[BaseRenderer], format_suffix: str | None
    ) -> tuple[BaseRenderer, str]:
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except NotAcceptable:
            return renderers[0], renderers[0].media_type


class ErrorDetailSerializer(serializers.Serializer[Any]):
    code = serializers.IntegerField(help_text="Equals the HTTP status.")
    message = serializers.CharField()
    metadata = serializers.DictField(required=False, help_text="Details, e.g. the fields that failed.")


class ErrorBodySerializer(serializers.Serializer[Any]):
    error = ErrorDetailSerializer()
    user_id = serializers.CharField(allow_null=True, required=False)
    gateway_metadata = serializers.DictField(allow_null=True, required=False)


_ERROR_TEXT = {
    400: "Bad request: invalid parameters or malformed JSON",
    401: "Missing or invalid API key",
    402: "Insufficient credits",
    403: "Forbidden: wrong key kind for this operation",
    404: "Not found",
    408: "Request timeout",
    413: "Payload too large",
    422: "Unprocessable entity",
    429: "Too many requests",
    500: "Internal server error",
    502: "Upstream provider failed",
    503: "Service unavailable",
    524: "Upstream timed out",
    529: "Provider overloaded",
}


def error_responses(*codes: int) -> dict[int, OpenApiResponse]:
    """The OpenAPI error responses of an operation, all with the Error body."""
    return {code: OpenApiResponse(ErrorBodySerializer, description=_ERROR_TEXT[code]) for code in codes}
