from datetime import datetime
from decimal import Decimal
from typing import Any

from django.utils import timezone
from rest_framework import serializers

from gateway import fields
from gateway.accounts.models import ApiKey, LimitReset
from gateway.accounts.usage import key_usage_readers
from gateway.query import ClosedQuerySerializer

MAX_KEY_LIMIT = Decimal("1000000000")  # USD; the column holds 12 integer digits


class KeyUsageFieldsSerializer(serializers.Serializer[Any]):
    """Limit and usage fields shared by key records and the current key's metadata (UTC windows)."""

    label = serializers.CharField(help_text="Masked key: prefix and last characters.")  # type: ignore[assignment]  # shadows Field.label
    is_management_key = serializers.BooleanField()
    limit = serializers.FloatField(allow_null=True)
    limit_remaining = serializers.FloatField(allow_null=True)
    limit_reset = serializers.CharField(allow_null=True)
    include_byok_in_limit = serializers.BooleanField()
    usage = serializers.FloatField()
    usage_daily = serializers.FloatField()
    usage_weekly = serializers.FloatField()
    usage_monthly = serializers.FloatField()
    byok_usage = serializers.FloatField()
    byok_usage_daily = serializers.FloatField()
    byok_usage_weekly = serializers.FloatField()
    byok_usage_monthly = serializers.FloatField()
    expires_at = serializers.DateTimeField(allow_null=True)
    creator_user_id = serializers.CharField(allow_null=True)


class ApiKeyRecordSerializer(KeyUsageFieldsSerializer):
    """An API key as the management API lists it: never the key itself, its hash, limit and usage."""

    hash = serializers.CharField(help_text="SHA-256 hex digest of the key; how the API refers to it.")
    name = serializers.CharField()
    disabled = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField(allow_null=True)
    last_used_at = serializers.DateTimeField(allow_null=True, help_text="When the key last made a request.")
    external_user = serializers.CharField(
        allow_null=True, help_text="Always null: keys are not provisioned for an external user here."
    )
    workspace_id = serializers.UUIDField()


def api_key_record(key: ApiKey) -> dict[str, Any]:
    readers = key_usage_readers()
    usage = readers.usage(key.pk)
    remaining = None
    if key.limit is not None:
        remaining = max(key.limit - readers.usage_in_window(key), 0)
    return ApiKeyRecordSerializer(
        {
            "hash": key.hash,
            "name": key.name,
            "label": key.label,
            "is_management_key": key.kind == "management",
            "disabled": key.disabled,
            "limit": key.limit,
            "limit_remaining": remaining,
            "limit_reset": key.limit_reset,
            "include_byok_in_limit": key.include_byok_in_limit,
            **usage.__dict__,
            "created_at": key.created_at,
            "updated_at": key.updated_at,
            "expires_at": key.expires_at,
            "creator_user_id": key.creator.user_id if key.creator else None,
            "external_user": None,
            "workspace_id": key.workspace_id,
        }
    ).data


class ApiKeyEnvelopeSerializer(serializers.Serializer[Any]):
    data = ApiKeyRecordSerializer()  # type: ignore[assignment]  # the envelope's field shadows Serializer.data


class ApiKeyListSerializer(serializers.Serializer[Any]):
    data = ApiKeyRecordSerializer(many=True)  # type: ignore[assignment]  # the envelope's field shadows Serializer.data
    total_count = serializers.IntegerField()


class ApiKeyCreatedSerializer(serializers.Serializer[Any]):
    data = ApiKeyRecordSerializer()  # type: ignore[assignment]  # the envelope's field shadows Serializer.data
    key = serializers.CharField(help_text="The plaintext key. Shown only in this response; store it now.")


class ApiKeyDeletedSerializer(serializers.Serializer[Any]):
    deleted = serializers.BooleanField()


class ApiKeyListQuerySerializer(ClosedQuerySerializer):
    workspace_id = fields.UUIDField(required=False)
    include_disabled = fields.QueryBooleanField(required=False, default=True)
    include_expired = fields.QueryBooleanField(
        required=False, default=True, help_text="false leaves out the keys whose `expires_at` has passed"
    )
    offset = fields.QueryIntegerField(required=False, default=0, min_value=0)
    limit = fields.QueryIntegerField(required=False, default=100, min_value=1, max_value=1000)


def key_limit_field() -> fields.MoneyField:
    """A key's credit limit in USD, as POST and PATCH /keys take it."""
    return fields.MoneyField(
        max_digits=24,
        decimal_places=12,
        min_value=0,
        max_value=MAX_KEY_LIMIT,
        required=False,
        allow_null=True,
        help_text="Credit limit in USD",
    )


class ApiKeyCreateRequestSerializer(fields.ClosedSerializer):
    record = ApiKeyRecordSerializer  # its other fields are read-only: 400 saying so
    name = fields.CharField(max_length=200)
    limit = key_limit_field()
    limit_reset = fields.ChoiceField(choices=LimitReset.choices, required=False, allow_null=True)
    include_byok_in_limit = fields.BooleanField(required=False, default=False)
    expires_at = fields.DateTimeField(required=False, allow_null=True)
    creator_user_id = fields.CharField(max_length=256, required=False, allow_null=True)
    workspace_id = fields.UUIDField(required=False, allow_null=True)

    def validate_expires_at(self, value: datetime | None) -> datetime | None:
        if value is not None and value <= timezone.now():
            raise serializers.ValidationError("must be in the future")
        return value


class ApiKeyUpdateRequestSerializer(fields.ClosedSerializer):
    record = ApiKeyRecordSerializer  # its other fields are read-only: 400 saying so
    name = fields.CharField(max_length=200, required=False)
    disabled = fields.BooleanField(required=False)
    limit = key_limit_field()
    limit_reset = fields.ChoiceField(choices=LimitReset.choices, required=False, allow_null=True)
    include_byok_in_limit = fields.BooleanField(required=False)


class CurrentKeySerializer(KeyUsageFieldsSerializer):
    """The key making the request: its limit, usage (UTC windows) and kind."""

    is_free_tier = serializers.BooleanField()
    is_provisioning_key = serializers.BooleanField(help_text="Legacy name of is_management_key")


class CurrentKeyEnvelopeSerializer(serializers.Serializer[Any]):
    data = CurrentKeySerializer()  # type: ignore[assignment]  # the envelope's field shadows Serializer.data
