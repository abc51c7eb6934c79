"""The /guardrails management API (management key): guardrails, and their assignments to keys and members.
Another account's guardrail is a 404; another account's key hash or member in an assignment is a 400."""

from collections.abc import Callable
from typing import Any, TypeVar
from uuid import UUID

from django.db.models import Model, QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gateway.accounts.authentication import request_caller
from gateway.accounts.models import Workspace
from gateway.accounts.permissions import IsManagementKey
from gateway.api import error_responses
from gateway.errors import GatewayError
from gateway.query import query_params
from guardrails import selectors, services
from guardrails.models import Guardrail
from guardrails.serializers import (
    AssignedCountSerializer,
    AssignmentListQuerySerializer,
    GuardrailCreateRequestSerializer,
    GuardrailDeletedSerializer,
    GuardrailEnvelopeSerializer,
    GuardrailListQuerySerializer,
    GuardrailListSerializer,
    GuardrailUpdateRequestSerializer,
    KeyAssignmentListSerializer,
    KeyHashesRequestSerializer,
    MemberAssignmentListSerializer,
    MemberUserIdsRequestSerializer,
    UnassignedCountSerializer,
    guardrail_record,
    key_assignment_record,
    member_assignment_record,
)

GUARDRAIL_ID = OpenApiParameter("guardrail_id", str, OpenApiParameter.PATH, description="Guardrail id (UUID)")
TAGS = ["Guardrails"]
M = TypeVar("M", bound=Model)


def _record(guardrail: Guardrail) -> dict[str, Any]:
    return guardrail_record(guardrail, selectors.guardrail_usage(guardrail=guardrail))


def _workspace(request: Request, workspace_id: UUID | None) -> UUID:
    caller = request_caller(request)
    if workspace_id is None:
        return caller.workspace_id
    if not Workspace.objects.filter(pk=workspace_id, account_id=caller.account_id).exists():
        raise GatewayError(
            "workspace_id: no such workspace in this account", metadata={"fields": {"workspace_id": "not found"}}
        )
    return workspace_id


def _page(request: Request, rows: QuerySet[M], record: Callable[[M], dict[str, Any]]) -> Response:
    query = AssignmentListQuerySerializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    offset, limit = query.validated_data["offset"], query.validated_data["limit"]
    return Response({"data": [record(row) for row in rows[offset : offset + limit]], "total_count": rows.count()})


class GuardrailListCreateApi(APIView):
    permission_classes = [IsManagementKey]

    @extend_schema(
        operation_id="listGuardrails",
        tags=TAGS,
        parameters=[GuardrailListQuerySerializer],
        responses={200: GuardrailListSerializer, **error_responses(400, 401, 403, 429, 500)},
    )
    def get(self, request: Request) -> Response:
        query = GuardrailListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        rows = selectors.guardrails_list(
            account_id=request_caller(request).account_id, workspace_id=params.get("workspace_id")
        )
        page = rows[params["offset"] : params["offset"] + params["limit"]]
        return Response({"data": [_record(row) for row in page], "total_count": rows.count()})

    @extend_schema(
        operation_id="createGuardrail",
        tags=TAGS,
        request=GuardrailCreateRequestSerializer,
        responses={201: GuardrailEnvelopeSerializer, **error_responses(400, 401, 403, 429, 500)},
    )
    def post(self, request: Request) -> Response:
        body = GuardrailCreateRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        guardrail = services.guardrail_create(
            account_id=request_caller(request).account_id,
            workspace_id=_workspace(request, data.pop("workspace_id", None)),
            fields=data,
        )
        return Response({"data": _record(guardrail)}, status=201)


class GuardrailDetailApi(APIView):
    permission_classes = [IsManagementKey]

    @extend_schema(
        operation_id="getGuardrail",
        tags=TAGS,
        parameters=[GUARDRAIL_ID],
        responses={200: GuardrailEnvelopeSerializer, **error_responses(401, 403, 404, 429, 500)},
    )
    def get(self, request: Request, guardrail_id: UUID) -> Response:
        query_params(request)
        guardrail = selectors.guardrail_get(account_id=request_caller(request).account_id, guardrail_id=guardrail_id)
        return Response({"data": _record(guardrail)})

    @extend_schema(
        operation_id="updateGuardrail",
        tags=TAGS,
        parameters=[GUARDRAIL_ID],
        request=GuardrailUpdateRequestSerializer,
        responses={200: GuardrailEnvelopeSerializer, **error_responses(400, 401, 403, 404, 429, 500)},
    )
    def patch(self, request: Request, guardrail_id: UUID) -> Response:
        guardrail = selectors.guardrail_get(account_id=request_caller(request).account_id, guardrail_id=guardrail_id)
        body = GuardrailUpdateRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        guardrail = services.guardrail_update(guardrail=guardrail, changes=dict(body.validated_data))
        return Response({"data": _record(guardrail)})

    @extend_schema(
        operation_id="deleteGuardrail",
        tags=TAGS,
        parameters=[GUARDRAIL_ID],
        responses={200: GuardrailDeletedSerializer, **error_responses(401, 403, 404, 429, 500)},
    )
    def delete(self, request: Request, guardrail_id: UUID) -> Response:
        guardrail = selectors.guardrail_get(account_id=request_caller(request).account_id, guardrail_id=guardrail_id)
        services.guardrail_delete(guardrail=guardrail)
        return Response({"deleted": True})


class GuardrailKeyAssignmentsApi(APIView):
    permission_classes = [IsManagementKey]

    @extend_schema(
        operation_id="listGuardrailKeyAssignments",
        tags=TAGS,
        parameters=[GUARDRAIL_ID, AssignmentListQuerySerializer],
        responses={200: KeyAssignmentListSerializer, **error_responses(400, 401, 403, 404, 429, 500)},
    )
    def get(self, request: Request, guardrail_id: UUID) -> Response:
        caller = request_caller(request)
        guardrail = selectors.guardrail_get(account_id=caller.account_id, guardrail_id=guardrail_id)
        rows = selectors.key_assignments_list(account_id=caller.account_id, guardrail_id=guardrail.id)
        return _page(request, rows, key_assignment_record)

    @extend_schema(
        operation_id="assignKeysToGuardrail",
        tags=TAGS,
        parameters=[GUARDRAIL_ID],
        request=KeyHashesRequestSerializer,
        responses={200: AssignedCountSerializer, **error_responses(400, 401, 403, 404, 429, 500)},
    )
    def post(self, request: Request, guardrail_id: UUID) -> Response:
        caller = request_caller(request)
        guardrail = selectors.guardrail_get(account_id=caller.account_id, guardrail_id=guardrail_id)
        body = KeyHashesRequestSerializer(
            data=request.data, context={"account_id": caller.account_id, "live_only": True}
        )
        body.is_valid(raise_exception=True)
        count = services.guardrail_keys_assign(
            guardrail=guardrail,
            keys=body.validated_data["key_hashes"],
            assigned_by=caller.creator_user_id or "",
        )
        return Response({"assigned_count": count})


class GuardrailKeyUnassignApi(APIView):
    permission_classes = [IsManagementKey]

    @extend_schema(
        operation_id="unassignKeysFromGuardrail",
        tags=TAGS,
        parameters=[GUARDRAIL_ID],
        request=KeyHashesRequestSerializer,
        responses={200: UnassignedCountSerializer, **error_responses(400, 401, 403, 404, 429, 500)},
    )
    def post(self, request: Request, guardrail_id: UUID) -> Response:
        caller = request_caller(request)
        guardrail = selectors.guardrail_get(account_id=caller.account_id, guardrail_id=guardrail_id)
        body = KeyHashesRequestSerializer(data=request.data, context={"account_id": caller.account_id})
        body.is_valid(raise_exception=True)
        count = services.guardrail_keys_unassign(guardrail=guardrail, keys=body.validated_data["key_hashes"])
        return Response({"unassigned_count": count})


class GuardrailMemberAssignmentsApi(APIView):
    permission_classes = [IsManagementKey]

    @extend_schema(
        operation_id="listGuardrailMemberAssignments",
        tags=TAGS,
        parameters=[GUARDRAIL_ID, AssignmentListQuerySerializer],
        responses={200: MemberAssignmentListSerializer, **error_responses(400, 401, 403, 404, 429, 500)},
    )
    def get(self, request: Request, guardrail_id: UUID) -> Response:
        caller = request_caller(request)
        guardrail = selectors.guardrail_get(account_id=caller.account_id, guardrail_id=guardrail_id)
        rows = selectors.member_assignments_list(account_id=caller.account_id, guardrail_id=guardrail.id)
        return _page(request, rows, member_assignment_record)

    @extend_schema(
        operation_id="assignMembersToGuardrail",
        tags=TAGS,
        parameters=[GUARDRAIL_ID],
        request=MemberUserIdsRequestSerializer,
        responses={200: AssignedCountSerializer, **error_responses(400, 401, 403, 404, 429, 500)},
    )
    def post(self, request: Request, guardrail_id: UUID) -> Response:
        caller = request_caller(request)
        guardrail = selectors.guardrail_get(account_id=caller.account_id, guardrail_id=guardrail_id)
        body = MemberUserIdsRequestSerializer(data=request.data, context={"account_id": caller.account_id})
        body.is_valid(raise_exception=True)
        count = services.guardrail_members_assign(
            guardrail=guardrail,
            members=body.validated_data["member_user_ids"],
            assigned_by=caller.creator_user_id or "",
        )
        return Response({"assigned_count": count})


class GuardrailMemberUnassignApi(APIView):
    permission_classes = [IsManagementKey]

    @extend_schema(
        operation_id="unassignMembersFromGuardrail",
        tags=TAGS,
        parameters=[GUARDRAIL_ID],
        request=MemberUserIdsRequestSerializer,
        responses={200: UnassignedCountSerializer, **error_responses(400, 401, 403, 404, 429, 500)},
    )
    def post(self, request: Request, guardrail_id: UUID) -> Response:
        caller = request_caller(request)
        guardrail = selectors.guardrail_get(account_id=caller.account_id, guardrail_id=guardrail_id)
        body = MemberUserIdsRequestSerializer(data=request.data, context={"account_id": caller.account_id})
        body.is_valid(raise_exception=True)
        count = services.guardrail_members_unassign(guardrail=guardrail, members=body.validated_data["member_user_ids"])
        return Response({"unassigned_count": count})


class KeyAssignmentsApi(APIView):
    permission_classes = [IsManagementKey]

    @extend_schema(
        operation_id="listKeyAssignments",
        tags=TAGS,
        parameters=[AssignmentListQuerySerializer],
        responses={200: KeyAssignmentListSerializer, **error_responses(400, 401, 403, 429, 500)},
    )
    def get(self, request: Request) -> Response:
        return _page(
            request,
            selectors.key_assignments_list(account_id=request_caller(request).account_id),
            key_assignment_record,
        )


class MemberAssignmentsApi(APIView):
    permission_classes = [IsManagementKey]

    @extend_schema(
        operation_id="listMemberAssignments",
        tags=TAGS,
        parameters=[AssignmentListQuerySerializer],
        responses={200: MemberAssignmentListSerializer, **error_responses(400, 401, 403, 429, 500)},
    )
    def get(self, request: Request) -> Response:
        rows = selectors.member_assignments_list(account_id=request_caller(request).account_id)
        return _page(request, rows, member_assignment_record)
