import re
from typing import Any

from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from byok.catalog import catalog_lookups
from byok.models import ByokKey, SharedCapacity
from byok.sdk_fields import record_flags
from gateway import fields
from gateway.accounts.selectors import live_key_hashes, member_user_ids
from gateway.query import ClosedQuerySerializer

MAX_FILTER_ENTRIES = 100
KEY_HASH = re.compile(r"^[0-9a-f]{64}$")
MODEL_ID = re.compile(r"^[^/\s]+/[^/\s]+$")
DECLARED_REGIONS = ["global", "europe", "us"]


class NullableFilterField(fields.ListField):
    """An array of strings (at most 100), or null. An empty array is refused: use null to clear."""

    def __init__(self, *, pattern: re.Pattern[str] | None = None, pattern_message: str = "", **kwargs: Any) -> None:
        self.pattern, self.pattern_message = pattern, pattern_message
        validators = [RegexValidator(pattern, pattern_message)] if pattern else []  # (also the schema's pattern)
        super().__init__(
            child=fields.CharField(max_length=256, validators=validators),
            min_length=1,
            max_length=MAX_FILTER_ENTRIES,
            allow_null=True,
            required=False,
            **kwargs,
        )

    def to_internal_value(self, data: Any) -> list[str]:
        if not isinstance(data, list):
            raise serializers.ValidationError("must be an array of strings or null")
        if not data:
            raise serializers.ValidationError("must not be empty: use null to remove the restriction")
        if len(data) > MAX_FILTER_ENTRIES:  # what was sent, before repeats are dropped (150 copies are 150)
            raise serializers.ValidationError(f"at most {MAX_FILTER_ENTRIES} entries (repeated ones count)")
        if not all(isinstance(item, str) for item in data):
            raise serializers.ValidationError("must be an array of strings")
        if self.pattern and not all(self.pattern.match(item) for item in data):
            raise serializers.ValidationError(self.pattern_message)
        return list(dict.fromkeys(super().to_internal_value(data)))


class ByokRecordSerializer(serializers.Serializer[Any]):
    id = serializers.UUIDField()
    provider = serializers.CharField()
    workspace_id = serializers.UUIDField()
    label = serializers.CharField(help_text="Masked key; the full key is never returned")  # type: ignore[assignment]  # shadows Field.label
    name = serializers.CharField(allow_blank=True)
    disabled = serializers.BooleanField()
    is_fallback = serializers.BooleanField()
    allowed_models = serializers.ListField(child=serializers.CharField(), allow_null=True)
    allowed_api_key_hashes = serializers.ListField(child=serializers.CharField(), allow_null=True)
    allowed_user_ids = serializers.ListField(child=serializers.CharField(), allow_null=True)
    sort_order = serializers.IntegerField()
    shared_capacity = serializers.CharField()
    is_byok_only = serializers.BooleanField(help_text="shared_capacity is `never` (byok/sdk_fields.py)")
    is_required = serializers.BooleanField(help_text="shared_capacity is `outside_filter` or `never`")
    declared_region = serializers.ChoiceField(choices=DECLARED_REGIONS, allow_null=True, help_text="Always null")
    declared_zdr = serializers.BooleanField(allow_null=True, help_text="Always null")
    created_at = serializers.DateTimeField()


class ByokFiltersMixin(fields.ClosedSerializer):
    record = ByokRecordSerializer  # its other fields are read-only: 400 saying so (issue 29)

    allowed_models = NullableFilterField(
        pattern=MODEL_ID,
        pattern_message="each entry must be a model id author/slug",
        help_text="Model ids; null = all models",
    )
    allowed_api_key_hashes = NullableFilterField(
        pattern=KEY_HASH,
        pattern_message="each entry must be exactly 64 lowercase hexadecimal characters",
        help_text="SHA-256 hashes of this account's API keys; null = all",
    )
    allowed_user_ids = NullableFilterField(help_text="Member user ids of this account; null = all members")

    def validate_allowed_api_key_hashes(self, value: list[str] | None) -> list[str] | None:
        if value is None:
            return value
        malformed = [h for h in value if not KEY_HASH.match(h)]
        if malformed:
            raise serializers.ValidationError("each entry must be exactly 64 lowercase hexadecimal characters")
        live = live_key_hashes(account_id=self.context["account_id"], hashes=value)
        unknown = [h for h in value if h not in live]
        if unknown:
            raise serializers.ValidationError(
                f"{len(unknown)} hash(es) do not belong to a live API key of this account"
            )
        return value

    def validate_allowed_models(self, value: list[str] | None) -> list[str] | None:
        if value is None:
            return value
        model_exists = catalog_lookups().model_exists
        bad = [m for m in value if not MODEL_ID.match(m) or not model_exists(m)]
        if bad:
            raise serializers.ValidationError(f"unknown model ids: {bad[:5]}")
        return value

    def validate_allowed_user_ids(self, value: list[str] | None) -> list[str] | None:
        if value is None:
            return value
        members = member_user_ids(account_id=self.context["account_id"], user_ids=value)
        unknown = [u for u in value if u not in members]
        if unknown:
            raise serializers.ValidationError(f"not members of this account: {unknown[:5]}")
        return value


@extend_schema_field({"oneOf": [{"type": "string", "minLength": 1}, {"type": "object"}]})
class CredentialField(fields.JSONField):
    """The credential: a string, or an object for the providers whose credential is structured."""


class ByokCreateRequestSerializer(ByokFiltersMixin):
    provider = fields.CharField(max_length=100)
    key = CredentialField(
        help_text="The credential: a string, or for Azure/Bedrock/Vertex the JSON (or its JSON string)"
    )
    name = fields.CharField(max_length=200, required=False, allow_blank=True, default="")
    disabled = fields.BooleanField(required=False, default=False)
    is_fallback = fields.BooleanField(required=False, default=False)
    workspace_id = fields.UUIDField(required=False, allow_null=True)
    shared_capacity = fields.ChoiceField(choices=SharedCapacity.choices, required=False, default="always")
    # The openrouter SDK's names for shared_capacity, and its declarations (null only): byok/sdk_fields.py
    is_byok_only = fields.BooleanField(required=False, help_text="true: shared_capacity `never`")
    is_required = fields.BooleanField(required=False, help_text="true: shared_capacity `outside_filter`")
    declared_region = fields.ChoiceField(choices=DECLARED_REGIONS, required=False, allow_null=True)
    declared_zdr = fields.BooleanField(required=False, allow_null=True)


class ByokUpdateRequestSerializer(ByokFiltersMixin):
    key = CredentialField(required=False, help_text="New credential material (rotated in place)")
    name = fields.CharField(max_length=200, required=False, allow_blank=True)
    disabled = fields.BooleanField(required=False)
    is_fallback = fields.BooleanField(required=False)
    sort_order = fields.IntegerField(
        required=False, min_value=0, help_text="New position within its section; the others shift"
    )
    shared_capacity = fields.ChoiceField(choices=SharedCapacity.choices, required=False)
    # The openrouter SDK's names for shared_capacity, and its declarations (null only): byok/sdk_fields.py
    is_byok_only = fields.BooleanField(required=False, help_text="true: shared_capacity `never`")
    is_required = fields.BooleanField(required=False, help_text="true: shared_capacity `outside_filter`")
    declared_region = fields.ChoiceField(choices=DECLARED_REGIONS, required=False, allow_null=True)
    declared_zdr = fields.BooleanField(required=False, allow_null=True)


class ByokEnvelopeSerializer(serializers.Serializer[Any]):
    data = ByokRecordSerializer()  # type: ignore[assignment]  # the envelope's field shadows Serializer.data


class ByokListSerializer(serializers.Serializer[Any]):
    data = ByokRecordSerializer(many=True)  # type: ignore[assignment]  # the envelope's field shadows Serializer.data
    total_count = serializers.IntegerField()


class ByokListQuerySerializer(ClosedQuerySerializer):
    provider = fields.CharField(required=False, max_length=100)
    workspace_id = fields.UUIDField(required=False)
    offset = fields.QueryIntegerField(required=False, default=0, min_value=0)
    limit = fields.QueryIntegerField(required=False, default=100, min_value=1, max_value=1000)


class ByokDeletedSerializer(serializers.Serializer[Any]):
    deleted = serializers.BooleanField()


def byok_record(key: ByokKey) -> dict[str, Any]:
    return ByokRecordSerializer(
        {
            "id": key.id,
            "provider": key.provider,
            "workspace_id": key.workspace_id,
            "label": key.label,
            "name": key.name,
            "disabled": key.disabled,
            "is_fallback": key.is_fallback,
            "allowed_models": key.allowed_models,
            "allowed_api_key_hashes": key.allowed_api_key_hashes,
            "allowed_user_ids": key.allowed_user_ids,
            "sort_order": key.sort_order,
            "shared_capacity": key.shared_capacity,
            **record_flags(key.shared_capacity),
            "created_at": key.created_at,
        }
    ).data
