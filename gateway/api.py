"""Shared pieces for API views: content negotiation and documented error responses."""

from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers
from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation


class JsonFirstContentNegotiation(DefaultContentNegotiation):
    """Answer JSON whatever the Accept header says (SDKs send `text/event-stream` for streams,
    which the view renders itself); never a 406."""

    def select_renderer(self, request, renderers, format_suffix=None):
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except NotAcceptable:
            return renderers[0], renderers[0].media_type


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.IntegerField(help_text="Equals the HTTP status.")
    message = serializers.CharField()
    metadata = serializers.DictField(required=False, help_text="Details, e.g. the fields that failed.")


class ErrorBodySerializer(serializers.Serializer):
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
