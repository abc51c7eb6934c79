from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gateway.accounts.authentication import request_caller
from gateway.accounts.permissions import IsManagementKey
from gateway.api import error_responses
from gateway.billing.generations import generation_get
from gateway.billing.selectors import credits_summary
from gateway.billing.serializers import (
    CreditsEnvelopeSerializer,
    CreditsSerializer,
    GenerationEnvelopeSerializer,
    GenerationQuerySerializer,
    generation_data,
)
from gateway.query import query_params


class CreditsApi(APIView):
    permission_classes = [IsManagementKey]

    @extend_schema(
        operation_id="getCredits",
        tags=["Credits"],
        responses={200: CreditsEnvelopeSerializer, **error_responses(401, 403, 429, 500)},
    )
    def get(self, request: Request) -> Response:
        query_params(request)
        summary = credits_summary(account_id=request_caller(request).account_id)
        data = CreditsSerializer({"total_credits": summary.total_credits, "total_usage": summary.total_usage}).data
        return Response({"data": data})


class GenerationApi(APIView):
    """A generation record of the caller's account (any key of the account)."""

    @extend_schema(
        operation_id="getGeneration",
        tags=["Generations"],
        parameters=[GenerationQuerySerializer],
        responses={200: GenerationEnvelopeSerializer, **error_responses(400, 401, 404, 429, 500)},
    )
    def get(self, request: Request) -> Response:
        query = GenerationQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        generation = generation_get(
            account_id=request_caller(request).account_id, generation_id=query.validated_data["id"]
        )
        return Response({"data": generation_data(generation)})
