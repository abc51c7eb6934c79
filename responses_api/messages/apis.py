from typing import cast

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gateway.accounts.authentication import Caller
from gateway.accounts.permissions import IsInferenceKey
from gateway.errors import NotFound
from responses_api.doors.messages import MessagesDoor, anthropic_shaped
from responses_api.doors.views import METADATA_HEADER, SESSION_HEADER, DoorView
from responses_api.messages.count import MessageCountTokensRequestSerializer, message_tokens_count
from responses_api.messages.schema import (
    MessageResultSerializer,
    MessageStreamEventSerializer,
    MessageTokensCountSerializer,
    anthropic_error_responses,
)
from responses_api.messages.validation import MessageCreateRequestSerializer
from routing.preferences import split_model_suffix
from routing.selectors import model_get


class AnthropicDoorApi(APIView):
    """A view of the Anthropic door: an inference key, also as `x-api-key`, and every error in Anthropic's shape."""

    accepts_x_api_key = True  # Anthropic clients send the key as `x-api-key` (gateway.accounts.authentication)
    permission_classes = [IsInferenceKey]

    def handle_exception(self, exc: Exception) -> Response:
        """Every error in Anthropic's shape (same statuses), so the Anthropic SDK raises its typed errors."""
        return anthropic_shaped(super().handle_exception(exc))


@extend_schema_view(
    post=extend_schema(
        operation_id="createMessage",
        description="The Anthropic Messages request as the Responses request it means, on the same pipeline\n"
        "(responses_api.pipeline), rendered as Anthropic Messages. The key may also be sent as `x-api-key`,\n"
        "as Anthropic clients do.",
        tags=["Anthropic Messages"],
        request=MessageCreateRequestSerializer,
        parameters=[METADATA_HEADER, SESSION_HEADER],
        responses={
            (200, "application/json"): MessageResultSerializer,
            (200, "text/event-stream"): OpenApiResponse(
                MessageStreamEventSerializer,
                description="With stream: true, Anthropic's event stream (`event: <type>` + `data: <json>`).",
            ),
            **anthropic_error_responses(400, 401, 402, 403, 404, 408, 413, 422, 429, 500, 502, 503, 524, 529),
        },
    )
)
class MessageCreateApi(DoorView):
    accepts_x_api_key = True  # Anthropic clients send the key as `x-api-key` (gateway.accounts.authentication)
    door = MessagesDoor()


class MessageCountTokensApi(AnthropicDoorApi):
    @extend_schema(
        operation_id="countMessageTokens",
        tags=["Anthropic Messages"],
        request=MessageCountTokensRequestSerializer,
        responses={200: MessageTokensCountSerializer, **anthropic_error_responses(400, 401, 403, 404, 413, 429, 500)},
    )
    def post(self, request: Request):
        """Anthropic's `messages.count_tokens`: the prompt's input tokens by the gateway's estimate (the one its
        credit holds use; no tokenizer is downloaded), free of charge. An unknown model is a 404."""
        serializer = MessageCountTokensRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        message = serializer.validated_data
        if model_get(model_id=split_model_suffix(message["model"])[0]) is None:
            raise NotFound(f"model: {message['model']}")
        caller = cast(Caller, request.user)  # IsInferenceKey let only an inference key's caller through
        return Response({"input_tokens": message_tokens_count(message=message, account_id=str(caller.account_id))})


@extend_schema(exclude=True)
class MessageCreateAliasApi(MessageCreateApi):
    """`/api/v1/v1/messages`: the Anthropic SDK appends `/v1/messages` to its base_url, so a base_url of
    `<root>/api/v1` (the one the OpenAI SDKs take) works too. Documented once, under `/messages`."""


@extend_schema(exclude=True)
class MessageCountTokensAliasApi(MessageCountTokensApi):
    """`/api/v1/v1/messages/count_tokens`, for the same reason."""
