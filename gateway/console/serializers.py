import datetime as dt
import re
from typing import Any

from django.core.validators import RegexValidator
from rest_framework import serializers

from gateway import fields
from gateway.query import ClosedQuerySerializer

KEY_HASH = re.compile(r"^[0-9a-f]{64}$")
DAY = re.compile(r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$")
ACTIVITY_DAYS = 30


class ActivityQuerySerializer(ClosedQuerySerializer):
    date = fields.CharField(
        required=False,
        max_length=10,
        validators=[RegexValidator(DAY, "must be a date YYYY-MM-DD")],
        help_text=f"One UTC day (YYYY-MM-DD) within the last {ACTIVITY_DAYS} days; all of them when omitted",
    )
    api_key_hash = fields.CharField(
        required=False,
        min_length=64,
        max_length=64,
        validators=[RegexValidator(KEY_HASH, "must be exactly 64 lowercase hexadecimal characters")],
        help_text="Only this API key's requests (its SHA-256 hash)",
    )
    workspace_id = fields.UUIDField(required=False, help_text="Only this workspace's requests")
    group_by = fields.ChoiceField(
        required=False,
        choices=["workspace"],
        help_text="`workspace` only: rows are always split per workspace, each with its `workspace_id`",
    )

    # The openrouter SDK's `get_user_activity` parameter this gateway cannot honour.
    refused = {
        "user_id": "not supported: activity is not recorded per organization member (filter by `api_key_hash`)",
    }

    def validate_date(self, value: str) -> dt.date:
        try:
            day = dt.date.fromisoformat(value) if DAY.match(value) else None
        except ValueError:
            day = None
        if day is None:
            raise serializers.ValidationError("must be a date YYYY-MM-DD")
        return day

    def validate_api_key_hash(self, value: str) -> str:
        if not KEY_HASH.match(value):
            raise serializers.ValidationError("must be exactly 64 lowercase hexadecimal characters")
        return value


class ActivityItemSerializer(serializers.Serializer[Any]):
    date = serializers.CharField(help_text="The UTC day, YYYY-MM-DD")
    model = serializers.CharField(help_text="The model that served the requests (the requested one if none did)")
    model_permaslug = serializers.CharField()
    endpoint_id = serializers.CharField(allow_null=True, help_text="The catalog endpoint that served them")
    provider_name = serializers.CharField(help_text="The provider that served them; empty if none did")
    api_key_hash = serializers.CharField(allow_null=True, help_text="The API key's hash; null if it was deleted")
    workspace_id = serializers.UUIDField(allow_null=True)
    usage = serializers.FloatField(help_text="Credits charged (USD), BYOK fees included")
    byok_usage_inference = serializers.FloatField(
        help_text="What the BYOK requests' inference cost at list price (USD), paid to the provider with the "
        "caller's own key, not in credits"
    )
    requests = serializers.IntegerField()
    byok_requests = serializers.IntegerField(help_text="Of `requests`, those served with a BYOK key")
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    reasoning_tokens = serializers.IntegerField()
    cached_tokens = serializers.IntegerField()


class ActivitySerializer(serializers.Serializer[Any]):
    data = ActivityItemSerializer(many=True)  # type: ignore[assignment]  # the envelope's field shadows Serializer.data
