from typing import Any
from uuid import UUID

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from byok import selectors, services
from byok.catalog import catalog_lookups
from byok.models import SharedCapacity
from byok.sdk_fields import capacity_from_flags
from byok.serializers import (
    ByokCreateRequestSerializer,
    ByokDeletedSerializer,
    ByokEnvelopeSerializer,
    ByokListQuerySerializer,
    ByokListSerializer,
    ByokUpdateRequestSerializer,
    byok_record,
)
from byok.shapes import ParsedCredential, ShapeError, parse_credential
from gateway.accounts.authentication import request_caller
from gateway.accounts.permissions import IsManagementKey
from gateway.accounts.selectors import workspace_exists
from gateway.api import error_responses
from gateway.errors import GatewayError
from gateway.query import query_params

BYOK_ID = OpenApiParameter("byok_id", str, OpenApiParameter.PATH, description="BYOK key id (UUID)")


def _provider_kind(slug: str) -> str:
    kind = catalog_lookups().provider_credential_kind(slug)
    if kind is None:
        raise GatewayError(f"provider: unknown provider {slug!r}", metadata={"fields": {"provider": "unknown"}})
    return kind


def _credential(kind: str, value: Any) -> ParsedCredential:
    try:
        return parse_credential(kind=kind, value=value)
    except ShapeError as exc:
        raise GatewayError(f"key: {exc}", metadata={"fields": {"key": str(exc)}}) from None


def _workspace(request: Request, workspace_id: UUID | None) -> UUID:
    caller = request_caller(request)
    if workspace_id is None:
        return caller.workspace_id
    if not workspace_exists(account_id=caller.account_id, workspace_id=workspace_id):
        raise GatewayError(
            "workspace_id: no such workspace in this account", metadata={"fields": {"workspace_id": "not found"}}
        )
    return workspace_id


class ByokListCreateApi(APIView):
    permission_classes = [IsManagementKey]

    @extend_schema(
        operation_id="listByokKeys",
        tags=["BYOK"],
        parameters=[ByokListQuerySerializer],
        responses={200: ByokListSerializer, **error_responses(400, 401, 403, 429, 500)},
    )
    def get(self, request: Request) -> Response:
        query = ByokListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        keys = selectors.byok_keys_list(
            account_id=request_caller(request).account_id,
            provider=params.get("provider"),
            workspace_id=params.get("workspace_id"),
        )
        page = keys[params["offset"] : params["offset"] + params["limit"]]
        return Response({"data": [byok_record(key) for key in page], "total_count": keys.count()})

    @extend_schema(
        operation_id="createByokKey",
        tags=["BYOK"],
        request=ByokCreateRequestSerializer,
        responses={201: ByokEnvelopeSerializer, **error_responses(400, 401, 403, 429, 500)},
    )
    def post(self, request: Request) -> Response:
        caller = request_caller(request)
        body = ByokCreateRequestSerializer(data=request.data, context={"account_id": caller.account_id})
        body.is_valid(raise_exception=True)
        data = capacity_from_flags(
            body.validated_data,
            current=SharedCapacity.ALWAYS,
            capacity_sent="shared_capacity" in request.data,
            is_fallback=False,
        )
        kind = _provider_kind(data["provider"])
        key = services.byok_key_create(
            account_id=caller.account_id,
            workspace_id=_workspace(request, data.get("workspace_id")),
            provider=data["provider"],
            kind=kind,
            credential=_credential(kind, data["key"]),
            name=data["name"],
            disabled=data["disabled"],
            is_fallback=data["is_fallback"],
            shared_capacity=data["shared_capacity"],
            filters={name: data.get(name) for name in services.FILTERS},
        )
        return Response({"data": byok_record(key)}, status=201)


class ByokDetailApi(APIView):
    permission_classes = [IsManagementKey]

    @extend_schema(
        operation_id="getByokKey",
        tags=["BYOK"],
        parameters=[BYOK_ID],
        responses={200: ByokEnvelopeSerializer, **error_responses(401, 403, 404, 429, 500)},
    )
    def get(self, request: Request, byok_id: UUID) -> Response:
        query_params(request)
        return Response(
            {"data": byok_record(selectors.byok_key_get(account_id=request_caller(request).account_id, key_id=byok_id))}
        )

    @extend_schema(
        operation_id="updateByokKey",
        tags=["BYOK"],
        parameters=[BYOK_ID],
        request=ByokUpdateRequestSerializer,
        responses={200: ByokEnvelopeSerializer, **error_responses(400, 401, 403, 404, 429, 500)},
    )
    def patch(self, request: Request, byok_id: UUID) -> Response:
        caller = request_caller(request)
        key = selectors.byok_key_get(account_id=caller.account_id, key_id=byok_id)
        body = ByokUpdateRequestSerializer(data=request.data, context={"account_id": caller.account_id})
        body.is_valid(raise_exception=True)
        changes = capacity_from_flags(
            body.validated_data,
            current=key.shared_capacity,
            capacity_sent="shared_capacity" in request.data,
            is_fallback=key.is_fallback,
        )
        credential = _credential(key.kind, changes.pop("key")) if "key" in changes else None
        key = services.byok_key_update(key=key, changes=changes, credential=credential)
        return Response({"data": byok_record(key)})

    @extend_schema(
        operation_id="deleteByokKey",
        tags=["BYOK"],
        parameters=[BYOK_ID],
        responses={200: ByokDeletedSerializer, **error_responses(401, 403, 404, 429, 500)},
    )
    def delete(self, request: Request, byok_id: UUID) -> Response:
        services.byok_key_delete(
            key=selectors.byok_key_get(account_id=request_caller(request).account_id, key_id=byok_id)
        )
        return Response({"deleted": True})
