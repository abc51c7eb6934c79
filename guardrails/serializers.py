"""The /guardrails API's bodies, queries and records. Every field is checked here with a 400 naming it;
a content pattern the regex engine refuses is 400 `invalid_regex_pattern` naming the filter."""

import re
from decimal import Decimal
from typing import Any

from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from gateway import fields
from gateway.accounts.models import ApiKey, Member
from gateway.errors import GatewayError
from gateway.query import ClosedQuerySerializer
from guardrails import detectors, patterns
from guardrails.models import (
    DataCollection,
    FilterAction,
    Guardrail,
    GuardrailKeyAssignment,
    GuardrailMemberAssignment,
    ResetInterval,
)
from guardrails.selectors import GuardrailUsage
from routing.models import Provider
from routing.preferences import slug_matches
from routing.selectors import model_exists

MAX_LIST_ENTRIES = 100  # allowed/ignored models and providers
MAX_CONTENT_FILTERS = 100
MAX_ASSIGNMENTS_PER_CALL = 1000
MAX_LIMIT_USD = Decimal("1000000000")  # the column holds 12 integer digits
KEY_HASH = re.compile(r"^[0-9a-f]{64}$")
MODEL_PATTERN = re.compile(r"^[^/\s*]+/[^/\s]+$")  # author/slug; a `*` in the slug is a wildcard
LABEL = re.compile(r"^[A-Za-z0-9_ .:/-]{1,64}$")  # ASCII, so the schema's pattern means the same
MSG_MODEL_PATTERN = "each entry must be a model id author/slug, or author/<wildcard> with * in the slug"
CODE_INVALID_REGEX = "invalid_regex_pattern"
CODE_UNAVAILABLE_BUILTIN = "unavailable_builtin"


class NullableListField(fields.ListField):
    """An array of distinct non-blank strings (at most 100), or null; an empty array is refused (null
    removes the restriction)."""

    def __init__(self, *, pattern: re.Pattern[str] | None = None, pattern_message: str = "", **kwargs: Any) -> None:
        validators = [RegexValidator(pattern, pattern_message)] if pattern else []  # (also the schema's pattern)
        super().__init__(
            child=fields.CharField(max_length=256, validators=validators),
            min_length=1,
            max_length=MAX_LIST_ENTRIES,
            allow_null=True,
            required=False,
            **kwargs,
        )

    def to_internal_value(self, data: Any) -> list[str]:
        if isinstance(data, list) and not data:
            raise serializers.ValidationError("must not be empty: use null to remove the restriction")
        if isinstance(data, list) and len(data) > MAX_LIST_ENTRIES:  # as sent: repeats count (150 copies are 150)
            raise serializers.ValidationError(f"at most {MAX_LIST_ENTRIES} entries (repeated ones count)")
        return list(dict.fromkeys(super().to_internal_value(data)))


@extend_schema_field({"type": "string", "minLength": 1, "maxLength": patterns.MAX_PATTERN_CHARS})
class PatternField(fields.CharField):
    """A filter's pattern. Its length and syntax are `patterns.pattern_problem`'s to judge (400
    `invalid_regex_pattern` naming the filter); the schema states the length bound."""


class ContentFilterSerializer(fields.ClosedSerializer):
    pattern = PatternField(help_text="An RE2 regular expression (linear time: no lookarounds or backreferences)")
    action = fields.ChoiceField(choices=FilterAction.choices)
    label = fields.CharField(  # type: ignore[assignment]  # shadows Field.label
        required=False,
        allow_null=True,
        max_length=64,
        validators=[RegexValidator(LABEL, "letters, digits, spaces and . : / _ - only")],
        help_text="Shown in [REDACTED:<label>] and in `patterns`; filter-<n> (its 1-based position) when omitted",
    )


class BuiltinFilterSerializer(fields.ClosedSerializer):
    slug = fields.ChoiceField(choices=detectors.BUILTIN_SLUGS)
    action = fields.ChoiceField(choices=FilterAction.choices)


def _known_models(value: list[str] | None) -> list[str] | None:
    if value is None:
        return value
    malformed = [m for m in value if not MODEL_PATTERN.match(m)]
    if malformed:
        raise serializers.ValidationError(
            f"each entry must be author/slug or a wildcard like author/*: {malformed[:5]}"
        )
    unknown = [m for m in value if "*" not in m and not model_exists(model_id=m)]
    if unknown:
        raise serializers.ValidationError(f"unknown model ids: {unknown[:5]}")
    return value


def _known_providers(value: list[str] | None) -> list[str] | None:
    if value is None:
        return value
    known = list(Provider.objects.values_list("slug", flat=True))
    unknown = [s for s in value if not any(slug_matches(s, k) for k in known)]
    if unknown:
        raise serializers.ValidationError(f"unknown provider slugs: {unknown[:5]}")
    return value


def _pattern_error(index: int, reason: str) -> GatewayError:
    name = f"content_filters[{index}].pattern"
    return GatewayError(
        f"{name}: {CODE_INVALID_REGEX}: {reason}",
        metadata={"code": CODE_INVALID_REGEX, "fields": {name: reason}},
    )


@extend_schema_field({"type": "string", "enum": ResetInterval.values, "nullable": True})
class ResetIntervalField(fields.ChoiceField):
    """Documented inline: the same three values as a key's `limit_reset` would otherwise get two enum names."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=ResetInterval.values, allow_null=True, **kwargs)


@extend_schema_field({"type": "string", "enum": DataCollection.values})
class DataCollectionField(fields.ChoiceField):
    """Documented inline, like the routing settings' `data_collection` (one enum name for both)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=DataCollection.values, **kwargs)


class GuardrailFieldsSerializer(fields.ClosedSerializer):
    """The fields POST and PATCH share; on PATCH an omitted field stays and a sent collection replaces."""

    description = fields.CharField(required=False, allow_null=True, allow_blank=True, max_length=1000)
    is_workspace_default = fields.BooleanField(
        required=False, help_text="Make it its workspace's default (the previous default stops being one)"
    )
    limit_usd = fields.MoneyField(
        max_digits=24,
        decimal_places=12,
        min_value=0,
        max_value=MAX_LIMIT_USD,
        required=False,
        allow_null=True,
        help_text="Budget in USD per assignee and period (12 decimal places kept); null = no budget",
    )
    reset_interval = ResetIntervalField(required=False, help_text="null = lifetime")
    include_byok_in_budgets = fields.BooleanField(required=False)
    allowed_models = NullableListField(
        pattern=MODEL_PATTERN,
        pattern_message=MSG_MODEL_PATTERN,
        help_text="Model ids or wildcards (author/*); null = all",
    )
    ignored_models = NullableListField(
        pattern=MODEL_PATTERN,
        pattern_message=MSG_MODEL_PATTERN,
        help_text="Model ids or wildcards (author/*); null = none",
    )
    allowed_providers = NullableListField(help_text="Provider slugs (a base slug matches its variants); null = all")
    ignored_providers = NullableListField(help_text="Provider slugs (a base slug matches its variants); null = none")
    enforce_zdr = fields.BooleanField(required=False)
    data_collection = DataCollectionField(required=False)
    content_filters = fields.ListField(child=ContentFilterSerializer(), required=False, max_length=MAX_CONTENT_FILTERS)
    content_filter_builtins = fields.ListField(
        child=BuiltinFilterSerializer(), required=False, max_length=len(detectors.BUILTIN_SLUGS)
    )

    def validate_description(self, value: str | None) -> str:
        return value or ""

    def validate_allowed_models(self, value: list[str] | None) -> list[str] | None:
        return _known_models(value)

    def validate_ignored_models(self, value: list[str] | None) -> list[str] | None:
        return _known_models(value)

    def validate_allowed_providers(self, value: list[str] | None) -> list[str] | None:
        return _known_providers(value)

    def validate_ignored_providers(self, value: list[str] | None) -> list[str] | None:
        return _known_providers(value)

    def validate_content_filters(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for index, item in enumerate(value):
            reason = patterns.pattern_problem(item["pattern"])
            if reason is not None:
                raise _pattern_error(index, reason)
        return [{"pattern": f["pattern"], "action": f["action"], "label": f.get("label")} for f in value]

    def validate_content_filter_builtins(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        slugs = [item["slug"] for item in value]
        repeated = sorted({slug for slug in slugs if slugs.count(slug) > 1})
        if repeated:
            raise serializers.ValidationError(f"each slug at most once: {repeated}")
        for index, slug in enumerate(slugs):
            reason = detectors.builtin_problem(slug)
            if reason is not None:
                name = f"content_filter_builtins[{index}].slug"
                raise GatewayError(
                    f"{name}: {reason}", metadata={"code": CODE_UNAVAILABLE_BUILTIN, "fields": {name: reason}}
                )
        return [{"slug": b["slug"], "action": b["action"]} for b in value]


class GuardrailCreateRequestSerializer(GuardrailFieldsSerializer):
    """A new guardrail: its name, limits, provider and model rules and content filters."""

    name = fields.CharField(max_length=200)
    workspace_id = fields.UUIDField(required=False, help_text="Defaults to the management key's workspace")


class GuardrailUpdateRequestSerializer(GuardrailFieldsSerializer):
    """Changes to a guardrail: an omitted field stays as it is, a sent list replaces the old one."""

    name = fields.CharField(max_length=200, required=False)


class ContentFilterRecordSerializer(serializers.Serializer[Any]):
    pattern = serializers.CharField()
    action = serializers.CharField()
    label = serializers.CharField(allow_null=True)  # type: ignore[assignment]  # shadows Field.label


class BuiltinFilterRecordSerializer(serializers.Serializer[Any]):
    slug = serializers.CharField()
    action = serializers.CharField()


class GuardrailRecordSerializer(serializers.Serializer[Any]):
    id = serializers.UUIDField()
    workspace_id = serializers.UUIDField()
    is_workspace_default = serializers.BooleanField()
    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    limit_usd = serializers.FloatField(allow_null=True)
    reset_interval = serializers.CharField(allow_null=True)
    include_byok_in_budgets = serializers.BooleanField()
    allowed_models = serializers.ListField(child=serializers.CharField(), allow_null=True)
    ignored_models = serializers.ListField(child=serializers.CharField(), allow_null=True)
    allowed_providers = serializers.ListField(child=serializers.CharField(), allow_null=True)
    ignored_providers = serializers.ListField(child=serializers.CharField(), allow_null=True)
    enforce_zdr = serializers.BooleanField()
    data_collection = serializers.CharField()
    content_filters = ContentFilterRecordSerializer(many=True)
    content_filter_builtins = BuiltinFilterRecordSerializer(many=True)
    usage = serializers.FloatField(help_text="Spend in the current period (USD) of the requests it governs")
    resets_at = serializers.DateTimeField(allow_null=True, help_text="When the period ends; null = lifetime")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


# A name the record shows that no body takes (`id`, `created_at`, `usage`...) is refused as read-only.
GuardrailFieldsSerializer.record = GuardrailRecordSerializer


class GuardrailEnvelopeSerializer(serializers.Serializer[Any]):
    data = GuardrailRecordSerializer()  # type: ignore[assignment]  # the envelope's field shadows Serializer.data


class GuardrailListSerializer(serializers.Serializer[Any]):
    data = GuardrailRecordSerializer(many=True)  # type: ignore[assignment]  # the envelope's field shadows Serializer.data
    total_count = serializers.IntegerField()


class GuardrailListQuerySerializer(ClosedQuerySerializer):
    workspace_id = fields.UUIDField(required=False)
    offset = fields.QueryIntegerField(required=False, default=0, min_value=0)
    limit = fields.QueryIntegerField(required=False, default=100, min_value=1, max_value=100)


class AssignmentListQuerySerializer(ClosedQuerySerializer):
    offset = fields.QueryIntegerField(required=False, default=0, min_value=0)
    limit = fields.QueryIntegerField(required=False, default=100, min_value=1, max_value=1000)


class GuardrailDeletedSerializer(serializers.Serializer[Any]):
    deleted = serializers.BooleanField()


class KeyHashesRequestSerializer(fields.ClosedSerializer):
    """API keys by their SHA-256 hash (as GET /keys shows it), all of this account."""

    # context: `account_id`, and `live_only` (assigning takes live keys; removing takes any of the account's)
    key_hashes = fields.ListField(
        child=fields.CharField(
            max_length=64, validators=[RegexValidator(KEY_HASH, "must be exactly 64 lowercase hexadecimal characters")]
        ),
        min_length=1,
        max_length=MAX_ASSIGNMENTS_PER_CALL,
    )

    def validate_key_hashes(self, value: list[str]) -> list[ApiKey]:
        value = list(dict.fromkeys(value))
        keys = ApiKey.objects.filter(account_id=self.context["account_id"], hash__in=value)
        if self.context.get("live_only"):
            keys = keys.filter(disabled=False)
        found = {key.hash: key for key in keys}
        unknown = [h for h in value if h not in found]
        if unknown:
            which = "a live API key" if self.context.get("live_only") else "an API key"
            raise serializers.ValidationError(f"{len(unknown)} hash(es) do not belong to {which} of this account")
        return [found[h] for h in value]


class MemberUserIdsRequestSerializer(fields.ClosedSerializer):
    """Members of this account by their user id."""

    member_user_ids = fields.ListField(
        child=fields.CharField(max_length=256), min_length=1, max_length=MAX_ASSIGNMENTS_PER_CALL
    )

    def validate_member_user_ids(self, value: list[str]) -> list[Member]:
        value = list(dict.fromkeys(value))
        found = {m.user_id: m for m in Member.objects.filter(account_id=self.context["account_id"], user_id__in=value)}
        unknown = [u for u in value if u not in found]
        if unknown:
            raise serializers.ValidationError(f"not members of this account: {unknown[:5]}")
        return [found[u] for u in value]


class AssignedCountSerializer(serializers.Serializer[Any]):
    assigned_count = serializers.IntegerField()


class UnassignedCountSerializer(serializers.Serializer[Any]):
    unassigned_count = serializers.IntegerField()


class KeyAssignmentRecordSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    guardrail_id = serializers.UUIDField()
    key_hash = serializers.CharField()
    key_name = serializers.CharField()
    key_label = serializers.CharField()
    assigned_by = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()


class MemberAssignmentRecordSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    guardrail_id = serializers.UUIDField()
    user_id = serializers.CharField()
    assigned_by = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()


class KeyAssignmentListSerializer(serializers.Serializer[Any]):
    data = KeyAssignmentRecordSerializer(many=True)  # type: ignore[assignment]  # the envelope's field shadows Serializer.data
    total_count = serializers.IntegerField()


class MemberAssignmentListSerializer(serializers.Serializer[Any]):
    data = MemberAssignmentRecordSerializer(many=True)  # type: ignore[assignment]  # the envelope's field shadows Serializer.data
    total_count = serializers.IntegerField()


def guardrail_record(guardrail: Guardrail, usage: GuardrailUsage) -> dict[str, Any]:
    """`usage`: the guardrail's GuardrailUsage (selectors.guardrail_usage)."""
    return GuardrailRecordSerializer(
        {
            "id": guardrail.id,
            "workspace_id": guardrail.workspace_id,
            "is_workspace_default": guardrail.is_workspace_default,
            "name": guardrail.name,
            "description": guardrail.description,
            "limit_usd": None if guardrail.limit_usd is None else float(guardrail.limit_usd),
            "reset_interval": guardrail.reset_interval,
            "include_byok_in_budgets": guardrail.include_byok_in_budgets,
            "allowed_models": guardrail.allowed_models,
            "ignored_models": guardrail.ignored_models,
            "allowed_providers": guardrail.allowed_providers,
            "ignored_providers": guardrail.ignored_providers,
            "enforce_zdr": guardrail.enforce_zdr,
            "data_collection": guardrail.data_collection,
            "content_filters": guardrail.content_filters,
            "content_filter_builtins": guardrail.content_filter_builtins,
            "usage": float(usage.usage),
            "resets_at": usage.resets_at,
            "created_at": guardrail.created_at,
            "updated_at": guardrail.updated_at,
        }
    ).data


def key_assignment_record(row: GuardrailKeyAssignment) -> dict[str, Any]:
    return KeyAssignmentRecordSerializer(
        {
            "id": row.id,
            "guardrail_id": row.guardrail_id,
            "key_hash": row.api_key.hash,
            "key_name": row.api_key.name,
            "key_label": row.api_key.label,
            "assigned_by": row.assigned_by or None,
            "created_at": row.created_at,
        }
    ).data


def member_assignment_record(row: GuardrailMemberAssignment) -> dict[str, Any]:
    return MemberAssignmentRecordSerializer(
        {
            "id": row.id,
            "guardrail_id": row.guardrail_id,
            "user_id": row.member.user_id,
            "assigned_by": row.assigned_by or None,
            "created_at": row.created_at,
        }
    ).data
