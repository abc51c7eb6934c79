from collections.abc import Iterable
from typing import Any

from rest_framework import serializers

from gateway import fields
from gateway.query import ClosedQuerySerializer
from routing.models import Endpoint, Model, ModelKind, Provider
from routing.preferences import slug_matches
from routing.pricing import per_token
from routing.selectors import cheapest


class ModelArchitectureSerializer(serializers.Serializer[dict[str, Any]]):
    modality = serializers.CharField()
    input_modalities = serializers.ListField(child=serializers.CharField())
    output_modalities = serializers.ListField(child=serializers.CharField())
    tokenizer = serializers.CharField()
    instruct_type = serializers.CharField(allow_null=True)


class ModelPricingSerializer(serializers.Serializer[dict[str, Any]]):
    prompt = serializers.CharField(help_text="USD per input token")
    completion = serializers.CharField(help_text="USD per output token")
    request = serializers.CharField(help_text="USD per request")
    image = serializers.CharField()
    input_cache_read = serializers.CharField()
    input_cache_write = serializers.CharField()
    internal_reasoning = serializers.CharField()
    web_search = serializers.CharField(help_text="USD per web search the provider runs itself (native web search)")


class TopProviderSerializer(serializers.Serializer[dict[str, Any]]):
    context_length = serializers.IntegerField()
    max_completion_tokens = serializers.IntegerField(allow_null=True)
    is_moderated = serializers.BooleanField()


class ModelLinksSerializer(serializers.Serializer[dict[str, Any]]):
    details = serializers.CharField()


class ModelRecordSerializer(serializers.Serializer[dict[str, Any]]):
    id = serializers.CharField()
    canonical_slug = serializers.CharField()
    name = serializers.CharField()
    created = serializers.IntegerField()
    description = serializers.CharField()
    context_length = serializers.IntegerField()
    architecture = ModelArchitectureSerializer()
    pricing = ModelPricingSerializer()
    top_provider = TopProviderSerializer()
    per_request_limits = serializers.DictField(allow_null=True)
    supported_parameters = serializers.ListField(child=serializers.CharField())
    default_parameters = serializers.DictField(allow_null=True)
    supported_voices = serializers.ListField(child=serializers.CharField(), allow_null=True)
    knowledge_cutoff = serializers.CharField(allow_null=True)
    expiration_date = serializers.CharField(allow_null=True)
    links = ModelLinksSerializer()
    available = serializers.BooleanField(
        required=False,
        help_text="Whether this gateway can serve the model for the caller now: a provider of it has an operator "
        "credential, or one of the caller's BYOK keys applies to it (a router: whether any listed model is). "
        "A request for a model that is not available is refused with 404 (`error.metadata.error_type`: "
        "`provider_not_configured`). /models lists every catalog model; /models/user only the available ones.",
    )


class ModelRetrieveSerializer(ModelRecordSerializer):
    """GET /models/{author}/{slug}: the /models entry, plus the two fields the openai SDK's `models.retrieve`
    reads (`object`, `owned_by`)."""

    object = serializers.ChoiceField(choices=["model"])
    owned_by = serializers.CharField(help_text="The model's author (the id's part before the slash)")


class ModelEnvelopeSerializer(serializers.Serializer[dict[str, Any]]):
    """GET /model/{author}/{slug} (the openrouter SDK's `models.get`): the /models entry in `data`."""

    data = ModelRecordSerializer()  # type: ignore[assignment]  # the envelope's field shadows Serializer.data


class ModelCountDataSerializer(serializers.Serializer[dict[str, Any]]):
    count = serializers.IntegerField(help_text="How many models /models lists for this caller and these filters")


class ModelCountSerializer(serializers.Serializer[dict[str, Any]]):
    data = ModelCountDataSerializer()  # type: ignore[assignment]  # the envelope's field shadows Serializer.data


def _not_filtered(what: str) -> str:
    return f"not supported: this gateway does not filter or sort the model list by {what}"


# The openrouter SDK's `models.list` / `list_for_user` parameters this gateway cannot honour (its catalog has
# no categories, rankings, benchmarks or data regions, and filters only by the parameters declared below).
MODEL_FILTERS_REFUSED = {
    "category": _not_filtered("use-case category (the catalog has no categories)"),
    "sort": _not_filtered("popularity, price, context, speed or benchmark: models come in catalog order"),
    "context": _not_filtered("context length (each model's `context_length` is listed)"),
    "min_price": _not_filtered("price (each model's `pricing` is listed)"),
    "max_price": _not_filtered("price (each model's `pricing` is listed)"),
    "min_output_price": _not_filtered("price (each model's `pricing` is listed)"),
    "max_output_price": _not_filtered("price (each model's `pricing` is listed)"),
    "arch": _not_filtered("architecture family"),
    "model_authors": _not_filtered("author (a model id starts with its author; `q` searches ids)"),
    "distillable": _not_filtered("distillation capability (the catalog does not record it)"),
    "zdr": _not_filtered("zero data retention: ZDR is a routing setting (`provider.zdr`, /routing/settings)"),
    "region": _not_filtered("data region (the catalog does not record one)"),
    "min_age_days": _not_filtered("model age (each model's `created` is listed)"),
    "max_age_days": _not_filtered("model age (each model's `created` is listed)"),
    "use_rss": "not supported: this gateway answers JSON only",
    **{
        f"{bound}_{index}": _not_filtered("benchmark scores (the catalog has none)")
        for bound in ("min", "max")
        for index in ("intelligence_index", "coding_index", "agentic_index", "tool_success_rate")
    },
}


class ModelCountQuerySerializer(ClosedQuerySerializer):
    """The filters /models takes (no paging: a count has no pages)."""

    q = fields.CharField(required=False, max_length=200, help_text="Search in id, name and description")
    supported_parameters = fields.CharField(required=False, help_text="Comma list; all must be supported")
    input_modalities = fields.CharField(required=False, help_text="Comma list")
    output_modalities = fields.CharField(required=False, help_text="Comma list, or `all`")
    providers = fields.CharField(required=False, help_text="Comma list of provider slugs")

    refused = MODEL_FILTERS_REFUSED


class ListLinksSerializer(serializers.Serializer[dict[str, Any]]):
    next = serializers.CharField(allow_null=True)


class ModelListSerializer(serializers.Serializer[dict[str, Any]]):
    data = ModelRecordSerializer(many=True)  # type: ignore[assignment]  # the envelope's field shadows Serializer.data
    total_count = serializers.IntegerField()
    links = ListLinksSerializer()


class ModelListQuerySerializer(ClosedQuerySerializer):
    offset = fields.QueryIntegerField(required=False, min_value=0)
    limit = fields.QueryIntegerField(required=False, min_value=1, max_value=1000)
    q = fields.CharField(required=False, max_length=200, help_text="Search in id, name and description")
    supported_parameters = fields.CharField(required=False, help_text="Comma list; all must be supported")
    input_modalities = fields.CharField(required=False, help_text="Comma list")
    output_modalities = fields.CharField(required=False, help_text="Comma list, or `all`")
    providers = fields.CharField(required=False, help_text="Comma list of provider slugs")

    refused = MODEL_FILTERS_REFUSED

    @staticmethod
    def as_list(value: str | None) -> list[str]:
        return [part.strip() for part in (value or "").split(",") if part.strip() and part.strip() != "all"]


class EndpointPricingSerializer(serializers.Serializer[dict[str, Any]]):
    prompt = serializers.CharField()
    completion = serializers.CharField()
    request = serializers.CharField()
    input_cache_read = serializers.CharField()
    input_cache_write = serializers.CharField()
    internal_reasoning = serializers.CharField()
    web_search = serializers.CharField(help_text="USD per web search the provider runs itself (native web search)")


class EndpointRecordSerializer(serializers.Serializer[dict[str, Any]]):
    name = serializers.CharField()
    model_id = serializers.CharField()
    provider_name = serializers.CharField()
    tag = serializers.CharField(help_text="Provider slug, as used in `provider.order`")
    context_length = serializers.IntegerField()
    max_completion_tokens = serializers.IntegerField(allow_null=True)
    max_prompt_tokens = serializers.IntegerField(allow_null=True)
    pricing = EndpointPricingSerializer()
    quantization = serializers.CharField()
    supported_parameters = serializers.ListField(child=serializers.CharField())
    supported_service_tiers = serializers.ListField(child=serializers.CharField())
    status = serializers.IntegerField(help_text="0 when the endpoint is serving")
    is_zdr = serializers.BooleanField()


class ModelEndpointsSerializer(serializers.Serializer[dict[str, Any]]):
    id = serializers.CharField()
    name = serializers.CharField()
    created = serializers.IntegerField()
    description = serializers.CharField()
    architecture = ModelArchitectureSerializer()
    endpoints = EndpointRecordSerializer(many=True)


class ModelEndpointsEnvelopeSerializer(serializers.Serializer[dict[str, Any]]):
    data = ModelEndpointsSerializer()  # type: ignore[assignment]  # the envelope's field shadows Serializer.data


# Its instance: a provider, or (many=True, which DRF's stubs do not model) the providers.
class ProviderRecordSerializer(serializers.Serializer[Provider | Iterable[Provider]]):
    slug = serializers.CharField()
    name = serializers.CharField()
    region = serializers.CharField()
    zdr = serializers.BooleanField(help_text="Zero data retention")
    retains_prompts = serializers.BooleanField()
    trains_on_prompts = serializers.BooleanField()
    is_local_standin = serializers.BooleanField()
    docs_url = serializers.CharField(allow_blank=True)


class ProviderListSerializer(serializers.Serializer[dict[str, Any]]):
    data = ProviderRecordSerializer(many=True)  # type: ignore[assignment]  # the envelope's field shadows Serializer.data


def architecture(model: Model) -> dict[str, Any]:
    inputs, outputs = list(model.input_modalities or ["text"]), list(model.output_modalities or ["text"])
    return {
        "modality": f"{'+'.join(inputs)}->{'+'.join(outputs)}",
        "input_modalities": inputs,
        "output_modalities": outputs,
        "tokenizer": model.tokenizer or "Other",
        "instruct_type": None,
    }


def endpoint_pricing(endpoint: Endpoint) -> dict[str, Any]:
    return {
        "prompt": per_token(endpoint.price_prompt),
        "completion": per_token(endpoint.price_completion),
        "request": format(endpoint.price_request.normalize(), "f"),
        "input_cache_read": per_token(endpoint.price_cached_input),
        "input_cache_write": per_token(endpoint.price_cache_write),
        "internal_reasoning": per_token(
            endpoint.price_reasoning if endpoint.price_reasoning is not None else endpoint.price_completion
        ),
        "web_search": format(endpoint.price_web_search.normalize(), "f"),
    }


def model_record(model: Model) -> dict[str, Any]:
    top = cheapest(model.live_endpoints)
    if top is None and model.kind == ModelKind.ROUTER:
        return router_record(model)
    assert top is not None, "the catalog lists only models with a live endpoint"
    pricing = {**endpoint_pricing(top), "image": "0"}
    return _record(model, pricing=pricing, context_length=top.context_length, max_tokens=top.max_completion_tokens)


def router_record(model: Model) -> dict[str, Any]:
    """A router slug (plugins.routers): priced by the model it routes to, so its prices are "-1"."""
    unknown = {name: "-1" for name in ModelPricingSerializer().fields.keys()}
    return _record(model, pricing=unknown, context_length=model.context_length, max_tokens=None)


def _record(
    model: Model, *, pricing: dict[str, Any], context_length: int | None, max_tokens: int | None
) -> dict[str, Any]:
    return ModelRecordSerializer(
        {
            "id": model.id,
            "canonical_slug": model.id,
            "name": model.name,
            "created": model.created,
            "description": model.description,
            "context_length": model.context_length,
            "architecture": architecture(model),
            "pricing": pricing,
            "top_provider": {
                "context_length": context_length,
                "max_completion_tokens": max_tokens,
                "is_moderated": False,
            },
            "per_request_limits": None,
            "supported_parameters": model.supported_parameters,
            "default_parameters": None,
            "supported_voices": None,
            "knowledge_cutoff": None,
            "expiration_date": None,
            "links": {"details": f"/api/v1/models/{model.id}/endpoints"},
        }
    ).data


def endpoint_record(endpoint: Endpoint) -> dict[str, Any]:
    return EndpointRecordSerializer(
        {
            "name": f"{endpoint.provider.name} | {endpoint.model_id}",
            "model_id": endpoint.model_id,
            "provider_name": endpoint.provider.name,
            "tag": endpoint.provider.slug,
            "context_length": endpoint.context_length,
            "max_completion_tokens": endpoint.max_completion_tokens,
            "max_prompt_tokens": None,
            "pricing": endpoint_pricing(endpoint),
            "quantization": endpoint.quantization,
            "supported_parameters": endpoint.supported_parameters,
            "supported_service_tiers": endpoint.service_tiers,
            "status": 0,
            "is_zdr": endpoint.provider.zdr,
        }
    ).data


class AccountRoutingSettingsSerializer(fields.ClosedSerializer):
    allowed_providers = fields.ListField(
        child=fields.CharField(max_length=128),
        max_length=100,
        required=False,
        help_text="Provider slugs (base slugs match variants); empty = all",
    )
    ignored_providers = fields.ListField(child=fields.CharField(max_length=128), max_length=100, required=False)
    enforce_zdr = fields.BooleanField(required=False)
    data_collection = fields.ChoiceField(choices=["allow", "deny"], required=False)

    def _known(self, slugs: list[str]) -> list[str]:
        known = list(Provider.objects.values_list("slug", flat=True))
        unknown = [s for s in slugs if not any(slug_matches(s, k) for k in known)]
        if unknown:
            raise serializers.ValidationError(f"unknown provider slugs: {unknown}")
        return slugs

    def validate_allowed_providers(self, value: list[str]) -> list[str]:
        return self._known(value)

    def validate_ignored_providers(self, value: list[str]) -> list[str]:
        return self._known(value)


class AccountRoutingEnvelopeSerializer(serializers.Serializer[dict[str, Any]]):
    data = AccountRoutingSettingsSerializer()  # type: ignore[assignment]  # the envelope's field shadows Serializer.data
