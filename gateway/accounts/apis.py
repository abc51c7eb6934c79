from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gateway.accounts import selectors, services
from gateway.accounts.authentication import request_caller
from gateway.accounts.models import ApiKey
from gateway.accounts.permissions import IsManagementKey
from gateway.accounts.serializers import (
    ApiKeyCreatedSerializer,
    ApiKeyCreateRequestSerializer,
    ApiKeyDeletedSerializer,
    ApiKeyEnvelopeSerializer,
    ApiKeyListQuerySerializer,
    ApiKeyListSerializer,
    ApiKeyUpdateRequestSerializer,
    CurrentKeyEnvelopeSerializer,
    CurrentKeySerializer,
    api_key_record,
)
from gateway.api import error_responses
from gateway.query import query_params

KEY_HASH_PARAM = OpenApiParameter("key_hash", str, OpenApiParameter.PATH, description="SHA-256 hex of the key")


class ApiKeyListCreateApi(APIView):
    permission_classes = [IsManagementKey]

    @extend_schema(
        operation_id="listApiKeys",
        tags=["API keys"],
        parameters=[ApiKeyListQuerySerializer],
        responses={200: ApiKeyListSerializer, **error_responses(400, 401, 403, 429, 500)},
    )
    def get(self, request: Request) -> Response:
        query = ApiKeyListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        keys = selectors.api_keys_list(
            account_id=request_caller(request).account_id,
            workspace_id=params.get("workspace_id"),
            include_disabled=params["include_disabled"],
            include_expired=params["include_expired"],
        )
        page = keys[params["offset"] : params["offset"] + params["limit"]]
        return Response({"data": [api_key_record(key) for key in page], "total_count": keys.count()})

    @extend_schema(
        operation_id="createApiKey",
        tags=["API keys"],
        request=ApiKeyCreateRequestSerializer,
        responses={201: ApiKeyCreatedSerializer, **error_responses(400, 401, 403, 429, 500)},
    )
    def post(self, request: Request) -> Response:
        body = ApiKeyCreateRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        issued = services.api_key_create(account_id=request_caller(request).account_id, **body.validated_data)
        return Response({"data": api_key_record(issued.key), "key": issued.plaintext}, status=201)


class ApiKeyDetailApi(APIView):
    permission_classes = [IsManagementKey]

    def _key(self, request: Request, key_hash: str) -> ApiKey:
        return selectors.api_key_get(account_id=request_caller(request).account_id, key_hash=key_hash)

    @extend_schema(
        operation_id="getApiKey",
        tags=["API keys"],
        parameters=[KEY_HASH_PARAM],
        responses={200: ApiKeyEnvelopeSerializer, **error_responses(401, 403, 404, 429, 500)},
    )
    def get(self, request: Request, key_hash: str) -> Response:
        query_params(request)
        return Response({"data": api_key_record(self._key(request, key_hash))})

    @extend_schema(
        operation_id="updateApiKey",
        tags=["API keys"],
        parameters=[KEY_HASH_PARAM],
        request=ApiKeyUpdateRequestSerializer,
        responses={200: ApiKeyEnvelopeSerializer, **error_responses(400, 401, 403, 404, 429, 500)},
    )
    def patch(self, request: Request, key_hash: str) -> Response:
        key = self._key(request, key_hash)
        body = ApiKeyUpdateRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        key = services.api_key_update(key=key, changes=body.validated_data)
        return Response({"data": api_key_record(key)})

    @extend_schema(
        operation_id="deleteApiKey",
        tags=["API keys"],
        parameters=[KEY_HASH_PARAM],
        responses={200: ApiKeyDeletedSerializer, **error_responses(401, 403, 404, 429, 500)},
    )
    def delete(self, request: Request, key_hash: str) -> Response:
        services.api_key_delete(key=self._key(request, key_hash))
        return Response({"deleted": True})


class CurrentKeyApi(APIView):
    """Metadata of the key making the call (any kind of key)."""

    @extend_schema(
        operation_id="getCurrentKey",
        tags=["API keys"],
        responses={200: CurrentKeyEnvelopeSerializer, **error_responses(401, 429, 500)},
    )
    def get(self, request: Request) -> Response:
        query_params(request)
        caller = request_caller(request)
        key = selectors.api_key_get(account_id=caller.account_id, key_hash=caller.key_hash)
        record = api_key_record(key)
        fields = set(CurrentKeySerializer().fields) - {"is_free_tier", "is_provisioning_key"}
        data = {name: record[name] for name in fields}
        data.update(is_free_tier=False, is_provisioning_key=record["is_management_key"])
        return Response({"data": CurrentKeySerializer(data).data})
