from datetime import UTC, datetime, time, timedelta
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gateway.accounts.authentication import request_caller
from gateway.accounts.permissions import IsManagementKey
from gateway.api import error_responses
from gateway.console import analytics
from gateway.console.serializers import ACTIVITY_DAYS, ActivityQuerySerializer, ActivitySerializer
from gateway.errors import GatewayError


def _activity_item(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "date": row["day"].date().isoformat(),
        "model": row["model_id"],
        "model_permaslug": row["model_id"],
        "endpoint_id": str(row["endpoint_id"]) if row["endpoint_id"] is not None else None,
        "provider_name": row["provider"],
        "api_key_hash": row["api_key__hash"],
        "workspace_id": row["workspace_id"],
        "usage": row["usage"],
        "byok_usage_inference": row["byok_usage_inference"],
        "requests": row["requests"],
        "byok_requests": row["byok_requests"],
        "prompt_tokens": row["prompt_tokens"],
        "completion_tokens": row["completion_tokens"],
        "reasoning_tokens": row["reasoning_tokens"],
        "cached_tokens": row["cached_tokens"],
    }


class ActivityApi(APIView):
    """The account's usage per UTC day, by model, provider, API key and workspace, for the last 30 days."""

    permission_classes = [IsManagementKey]

    @extend_schema(
        operation_id="getUserActivity",
        tags=["Analytics"],
        parameters=[ActivityQuerySerializer],
        responses={200: ActivitySerializer, **error_responses(400, 401, 403, 429, 500)},
        description="Usage of the caller's account per UTC day over the last 30 days (today included), one item per "
        "day, model, provider, API key and workspace: requests (BYOK among them), tokens, credits charged and the "
        "BYOK inference cost. Newest day first. Requests still in progress are not counted.",
    )
    def get(self, request: Request) -> Response:
        query = ActivityQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        today = timezone.now().date()
        first = today - timedelta(days=ACTIVITY_DAYS - 1)
        since = datetime.combine(first, time.min, tzinfo=UTC)
        until = datetime.combine(today + timedelta(days=1), time.min, tzinfo=UTC)
        if "date" in params:
            day = params["date"]
            if not first <= day <= today:
                raise GatewayError(
                    f"date: must be within the last {ACTIVITY_DAYS} days ({first.isoformat()} to {today.isoformat()})",
                    metadata={"fields": {"date": "out of range"}},
                )
            since = datetime.combine(day, time.min, tzinfo=UTC)
            until = since + timedelta(days=1)
        filters = {}
        if "api_key_hash" in params:
            filters["api_key__hash"] = params["api_key_hash"]
        if "workspace_id" in params:
            filters["workspace_id"] = params["workspace_id"]
        rows = analytics.activity(
            account_id=request_caller(request).account_id, since=since, until=until, filters=filters
        )
        return Response(ActivitySerializer({"data": [_activity_item(row) for row in rows]}).data)
