from typing import Any, TypeVar

from rest_framework import serializers

from gateway import fields
from gateway.billing.models import Generation
from gateway.query import ClosedQuerySerializer

F = TypeVar("F", bound=serializers.Field[Any, Any, Any, Any])


class CreditsSerializer(serializers.Serializer[Any]):
    total_credits = serializers.FloatField(help_text="All credits ever added (USD).")
    total_usage = serializers.FloatField(help_text="All credits ever charged (USD).")


class CreditsEnvelopeSerializer(serializers.Serializer[Any]):
    data = CreditsSerializer()  # type: ignore[assignment]  # the envelope's field shadows Serializer.data


class ProviderResponseSerializer(serializers.Serializer[Any]):
    provider_name = serializers.CharField()
    status = serializers.IntegerField(allow_null=True)
    latency = serializers.IntegerField(help_text="ms")
    is_byok = serializers.BooleanField()
    endpoint_id = serializers.IntegerField(allow_null=True)
    model_permaslug = serializers.CharField()


def _optional(field_class: type[F], **kwargs: Any) -> F:
    return field_class(required=False, **kwargs)


class RecordedSerializer(serializers.Serializer[Any]):
    """A JSON figure the pipeline recorded: its keys grew over releases, so a key an older record lacks is left
    out of the answer (every field optional) instead of failing the read."""

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        declared = super().get_fields()
        for field in declared.values():
            field.required = False
        return declared


class RouterPanelAnswerSerializer(RecordedSerializer):
    model = serializers.CharField()
    status = serializers.CharField()
    provider = serializers.CharField(allow_null=True, allow_blank=True)
    tokens = serializers.DictField(child=serializers.IntegerField(), help_text="`input`, `output`")
    cost_usd = serializers.FloatField()
    latency_ms = serializers.IntegerField(allow_null=True)
    rounds = _optional(serializers.IntegerField)
    tool_calls = _optional(serializers.DictField, child=serializers.IntegerField())


class GenerationRouterSerializer(RecordedSerializer):
    """A router's decision; which fields are present depends on `strategy` (never prompt or answer text)."""

    strategy = serializers.ChoiceField(choices=["auto", "pareto", "fusion"])
    plugin = serializers.CharField(help_text="The router plugin that decided (auto-router, pareto-router, fusion)")
    chosen = serializers.CharField(help_text="The model routed to (fusion: the analyst that wrote the answer)")
    fallbacks = _optional(serializers.ListField, child=serializers.CharField())
    reason = _optional(serializers.CharField)
    task_type = _optional(serializers.CharField, help_text="auto: the task type the prompt was classified as")
    classifier = _optional(serializers.CharField, help_text="auto: how it was classified (a model or `heuristic`)")
    tier = _optional(serializers.CharField, help_text="pareto: the tier chosen")
    sticky = _optional(serializers.BooleanField, help_text="pareto: the session's earlier choice was kept")
    panel = _optional(RouterPanelAnswerSerializer, many=True, help_text="fusion: each panel model's answer")
    analyst = _optional(serializers.CharField, help_text="fusion: the model that compared the answers")
    analysis = _optional(serializers.CharField, help_text="fusion: the analysis's status")
    cost_usd = _optional(serializers.FloatField, help_text="The router's own calls (classifier, panel)")


class WebFiguresSerializer(RecordedSerializer):
    num_search_results = serializers.IntegerField()
    web_search_engine = serializers.CharField()


class FileParserFiguresSerializer(RecordedSerializer):
    files = serializers.IntegerField()
    pages = serializers.IntegerField()
    engine = serializers.CharField()


class ModerationFiguresSerializer(RecordedSerializer):
    engine = serializers.CharField()
    model = serializers.CharField(allow_null=True, allow_blank=True)
    provider = serializers.CharField(allow_null=True, allow_blank=True)
    latency_ms = serializers.IntegerField(allow_null=True)
    flagged = serializers.BooleanField()


class CompressionFiguresSerializer(RecordedSerializer):
    engine = serializers.CharField()
    tokenizer = serializers.CharField()
    messages_removed = serializers.IntegerField()
    messages_truncated = serializers.IntegerField()
    tokens_removed = serializers.IntegerField()
    tokens_before = serializers.IntegerField()
    tokens_after = serializers.IntegerField()
    context_length = serializers.IntegerField()
    by_default = serializers.BooleanField()


class HealingFiguresSerializer(RecordedSerializer):
    outcome = serializers.CharField()
    fixes = serializers.ListField(child=serializers.CharField())
    schema = serializers.ChoiceField(choices=["none", "valid", "invalid", "unchecked"])


class ServerToolsFiguresSerializer(RecordedSerializer):
    calls = serializers.DictField(child=serializers.IntegerField(), help_text="Calls run, by tool")
    rounds = serializers.IntegerField()
    stopped = serializers.CharField()


# Keyed by plugin id (hyphenated ids are not Python names: the class is built from a dict, DRF's metaclass
# collects its fields the same way).
GenerationPluginsSerializer = type(
    "GenerationPluginsSerializer",
    (RecordedSerializer,),
    {
        "__doc__": "What each plugin that ran did, by plugin id: its figures, never request or answer text.",
        "web": _optional(WebFiguresSerializer),
        "file-parser": _optional(FileParserFiguresSerializer),
        "moderation": _optional(ModerationFiguresSerializer),
        "context-compression": _optional(CompressionFiguresSerializer),
        "response-healing": _optional(HealingFiguresSerializer),
        "server-tools": _optional(ServerToolsFiguresSerializer),
    },
)


class GuardrailFlagSerializer(RecordedSerializer):
    guardrail_id = serializers.CharField()
    name = serializers.CharField()
    patterns = serializers.ListField(child=serializers.CharField(), help_text="The filters' labels, never the text")


class GenerationSerializer(serializers.Serializer[Any]):
    id = serializers.CharField()
    upstream_id = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    model = serializers.CharField(help_text="The model that served the request")
    requested_model = serializers.CharField()
    provider_name = serializers.CharField(allow_null=True)
    status = serializers.CharField()
    total_cost = serializers.FloatField()
    upstream_inference_cost = serializers.FloatField()
    cache_discount = serializers.FloatField(allow_null=True)
    is_byok = serializers.BooleanField()
    streamed = serializers.BooleanField()
    cancelled = serializers.BooleanField()
    latency = serializers.IntegerField(allow_null=True, help_text="ms")
    time_to_first_token = serializers.IntegerField(allow_null=True, help_text="ms")
    generation_time = serializers.IntegerField(allow_null=True, help_text="ms")
    finish_reason = serializers.CharField(allow_null=True)
    error_type = serializers.CharField(allow_null=True)
    tokens_prompt = serializers.IntegerField()
    tokens_completion = serializers.IntegerField()
    native_tokens_prompt = serializers.IntegerField()
    native_tokens_completion = serializers.IntegerField()
    native_tokens_reasoning = serializers.IntegerField()
    native_tokens_cached = serializers.IntegerField()
    native_tokens_cache_write = serializers.IntegerField()
    service_tier = serializers.CharField(allow_null=True)
    session_id = serializers.CharField(allow_null=True)
    workspace_id = serializers.UUIDField(allow_null=True)
    api_type = serializers.CharField()
    provider_responses = ProviderResponseSerializer(many=True)
    router = GenerationRouterSerializer(allow_null=True, help_text="The router's decision; null when none ran")
    plugins = GenerationPluginsSerializer(allow_null=True, help_text="Null when no plugin ran")
    guardrail_flags = GuardrailFlagSerializer(
        many=True, allow_null=True, help_text="What the guardrails flagged in the input; null when nothing was"
    )
    moderation_latency = serializers.IntegerField(allow_null=True, help_text="ms; null when moderation did not run")


class GenerationEnvelopeSerializer(serializers.Serializer[Any]):
    data = GenerationSerializer()  # type: ignore[assignment]  # the envelope's field shadows Serializer.data


class GenerationQuerySerializer(ClosedQuerySerializer):
    id = fields.CharField(max_length=64)


def generation_data(generation: Generation) -> dict[str, Any]:
    return GenerationSerializer(
        {
            "id": generation.id,
            "upstream_id": generation.upstream_id or None,
            "created_at": generation.created_at,
            "model": generation.model,
            "requested_model": generation.requested_model,
            "provider_name": generation.provider or None,
            "status": generation.status,
            "total_cost": generation.cost,
            "upstream_inference_cost": generation.upstream_cost,
            "cache_discount": None,
            "is_byok": generation.is_byok,
            "streamed": generation.streamed,
            "cancelled": generation.cancelled,
            "latency": generation.latency_ms,
            "time_to_first_token": generation.ttft_ms,
            "generation_time": generation.generation_time_ms,
            "finish_reason": generation.finish_reason or None,
            "error_type": generation.error_type or None,
            "tokens_prompt": generation.tokens_input,
            "tokens_completion": generation.tokens_output,
            "native_tokens_prompt": generation.tokens_input,
            "native_tokens_completion": generation.tokens_output,
            "native_tokens_reasoning": generation.tokens_reasoning,
            "native_tokens_cached": generation.tokens_cached,
            "native_tokens_cache_write": generation.tokens_cache_write,
            "service_tier": generation.service_tier or None,
            "session_id": generation.session_id or None,
            "workspace_id": generation.workspace_id,
            "api_type": "responses",
            "provider_responses": [
                {**attempt, "latency": attempt["latency_ms"]} for attempt in generation.provider_responses
            ],
            "router": generation.router,
            "plugins": generation.plugins,
            "guardrail_flags": generation.guardrail_flags,
            "moderation_latency": generation.moderation_latency,
        }
    ).data
