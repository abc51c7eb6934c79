from rest_framework import serializers

from gateway import fields


class CreditsSerializer(serializers.Serializer):
    total_credits = serializers.FloatField(help_text="All credits ever added (USD).")
    total_usage = serializers.FloatField(help_text="All credits ever charged (USD).")


class CreditsEnvelopeSerializer(serializers.Serializer):
    data = CreditsSerializer()  # type: ignore[assignment]  # the envelope's field shadows Serializer.data


class ProviderResponseSerializer(serializers.Serializer):
    provider_name = serializers.CharField()
    status = serializers.IntegerField(allow_null=True)
    latency = serializers.IntegerField(help_text="ms")
    is_byok = serializers.BooleanField()
    endpoint_id = serializers.IntegerField(allow_null=True)
    model_permaslug = serializers.CharField()


class GenerationSerializer(serializers.Serializer):
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


class GenerationEnvelopeSerializer(serializers.Serializer):
    data = GenerationSerializer()  # type: ignore[assignment]  # the envelope's field shadows Serializer.data


class GenerationQuerySerializer(serializers.Serializer):
    id = fields.CharField(max_length=64)


def generation_data(generation) -> dict:
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
        }
    ).data
