from typing import Any, cast
from uuid import UUID

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gateway.accounts.authentication import request_caller
from gateway.accounts.permissions import IsManagementKey
from gateway.api import error_responses
from gateway.errors import NotFound
from gateway.query import query_params
from routing import selectors
from routing.limits import RoutingLimit, limits_for
from routing.listing import (
    ListedModel,
    caller_record,
    listed_models,
    models_allowed,
    models_available,
    models_filter,
    rendered_listings,
)
from routing.preferences import account_defaults, split_model_suffix
from routing.selection import Routable, RoutingCaller
from routing.serializers import (
    AccountRoutingEnvelopeSerializer,
    AccountRoutingSettingsSerializer,
    ModelCountQuerySerializer,
    ModelCountSerializer,
    ModelEndpointsEnvelopeSerializer,
    ModelEnvelopeSerializer,
    ModelListQuerySerializer,
    ModelListSerializer,
    ModelRetrieveSerializer,
    ProviderListSerializer,
    ProviderRecordSerializer,
    architecture,
    endpoint_record,
)
from routing.services import account_routing_update
from routing.snapshot import CatalogSnapshot, current_snapshot

MSG_MODEL_NOT_FOUND = "Model not found"


class ModelListApi(APIView):
    @extend_schema(
        operation_id="listModels",
        tags=["Models"],
        parameters=[ModelListQuerySerializer],
        responses={200: ModelListSerializer, **error_responses(400, 401, 429, 500)},
    )
    def get(self, request: Request) -> HttpResponse:
        query = ModelListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        snapshot = current_snapshot()  # the catalog version this answer is rendered under
        limits = self.caller_limits(request, snapshot)
        renderer, media_type = request.accepted_renderer, request.accepted_media_type
        if not request.META.get("QUERY_STRING") and media_type == renderer.media_type:
            # The plain listing, rendered once per snapshot, caller (account and API key) and limits
            # (routing/listing.py).
            cache = rendered_listings(snapshot=snapshot)
            key = (request.path, request_caller(request).account_id, request_caller(request).key_hash, limits)
            body = cache.get(key)
            if body is None:
                listed = models_allowed(listed_models(snapshot=snapshot), limits=limits, snapshot=snapshot)
                data = self.page(request, params, *self.served(request, snapshot, listed))
                # The configured renderers are JSON ones, which render bytes.
                body = cast(bytes, renderer.render(data, media_type, self.get_renderer_context()))
                cache.put(key, body)
            return HttpResponse(body, content_type=renderer.media_type)
        models = models_filter(
            listed_models(snapshot=snapshot),
            q=params.get("q", ""),
            supported_parameters=query.as_list(params.get("supported_parameters")),
            input_modalities=query.as_list(params.get("input_modalities")),
            output_modalities=query.as_list(params.get("output_modalities")),
            providers=query.as_list(params.get("providers")),
        )
        listed = models_allowed(models, limits=limits, snapshot=snapshot)
        return Response(self.page(request, params, *self.served(request, snapshot, listed)))

    def served(
        self, request: Request, snapshot: CatalogSnapshot, models: list[ListedModel]
    ) -> tuple[list[ListedModel], dict[str, bool]]:
        """The models to list and, per model, whether this caller can be served it (routing.selection.Routable):
        /models lists them all, each with its flag (the hosted API lists its whole catalog)."""
        routable = Routable(RoutingCaller.of(request_caller(request)), snapshot=snapshot)
        return models, models_available(listed_models(snapshot=snapshot), routable=routable)

    @staticmethod
    def page(
        request: Request, params: dict[str, Any], models: list[ListedModel], available: dict[str, bool]
    ) -> dict[str, Any]:
        total = len(models)
        offset = params.get("offset", 0)
        limit = params.get("limit", total - offset if "offset" in params else total)
        page = models[offset : offset + limit] if ("limit" in params or "offset" in params) else models
        next_link = None
        if offset + len(page) < total:
            next_link = f"{request.path}?offset={offset + len(page)}&limit={limit}"
        data = [caller_record(model, available=available[model.id]) for model in page]
        return {"data": data, "total_count": total, "links": {"next": next_link}}

    def caller_limits(self, request: Request, snapshot: CatalogSnapshot) -> tuple[RoutingLimit, ...]:
        """The caller's guardrails hide the models they allow no endpoint of."""
        return limits_for(request_caller(request))


class UserModelListApi(ModelListApi):
    """GET /models/user: the models this caller can route to, by its guardrails and its account's routing
    settings (allowed and ignored providers, ZDR, data collection), and that can be served for it (a credential:
    routing.selection.Routable)."""

    @extend_schema(
        operation_id="listModelsUser",
        tags=["Models"],
        parameters=[ModelListQuerySerializer],
        responses={200: ModelListSerializer, **error_responses(400, 401, 429, 500)},
    )
    def get(self, request: Request) -> HttpResponse:
        return super().get(request)

    def served(
        self, request: Request, snapshot: CatalogSnapshot, models: list[ListedModel]
    ) -> tuple[list[ListedModel], dict[str, bool]]:
        """Only the models this caller can be served now."""
        models, available = super().served(request, snapshot, models)
        return [model for model in models if available[model.id]], available

    def caller_limits(self, request: Request, snapshot: CatalogSnapshot) -> tuple[RoutingLimit, ...]:
        own = limits_for(request_caller(request))
        defaults = account_defaults(account_id=request_caller(request).account_id, snapshot=snapshot)
        account = RoutingLimit(
            source="the account's routing settings",
            allowed_providers=defaults.allowed_providers or None,
            ignored_providers=defaults.ignored_providers or None,
            zdr=defaults.enforce_zdr,
            deny_data_collection=defaults.data_collection == "deny",
        )
        return own + ((account,) if account != RoutingLimit(source=account.source) else ())


MODEL_PATH = [
    OpenApiParameter("author", str, OpenApiParameter.PATH),
    OpenApiParameter("slug", str, OpenApiParameter.PATH, description="May end in a variant suffix (`:free`, `:nitro`)"),
]


def listed_model(request: Request, author: str, slug: str) -> ListedModel:
    """The /models entry of `author/slug` as this caller's /models lists it (a variant suffix names its base
    model); a model the caller's guardrails hide is as unknown here as it is there."""
    snapshot = current_snapshot()
    model_id, _suffix = split_model_suffix(f"{author}/{slug}")
    found = [model for model in listed_models(snapshot=snapshot) if model.id == model_id]
    if not models_allowed(found, limits=limits_for(request_caller(request)), snapshot=snapshot):
        raise NotFound(MSG_MODEL_NOT_FOUND)
    return found[0]


def model_available(request: Request, model: ListedModel) -> bool:
    """The entry's `available` flag, as /models has it for this caller."""
    snapshot = current_snapshot()
    routable = Routable(RoutingCaller.of(request_caller(request)), snapshot=snapshot)
    return models_available(listed_models(snapshot=snapshot), routable=routable)[model.id]


class ModelRetrieveApi(APIView):
    """GET /models/{author}/{slug}: the path the openai SDK's `models.retrieve("author/slug")` calls."""

    @extend_schema(
        operation_id="retrieveModel",
        tags=["Models"],
        parameters=MODEL_PATH,
        responses={200: ModelRetrieveSerializer, **error_responses(401, 404, 429, 500)},
    )
    def get(self, request: Request, author: str, slug: str) -> Response:
        query_params(request)
        model = listed_model(request, author, slug)
        record = caller_record(model, available=model_available(request, model))
        return Response({**record, "object": "model", "owned_by": model.id.partition("/")[0]})


class ModelGetApi(APIView):
    """GET /model/{author}/{slug}: the path the openrouter SDK's `models.get` calls (the entry under `data`)."""

    @extend_schema(
        operation_id="getModel",
        tags=["Models"],
        parameters=MODEL_PATH,
        responses={200: ModelEnvelopeSerializer, **error_responses(401, 404, 429, 500)},
    )
    def get(self, request: Request, author: str, slug: str) -> Response:
        query_params(request)
        model = listed_model(request, author, slug)
        return Response({"data": caller_record(model, available=model_available(request, model))})


class ModelCountApi(APIView):
    """GET /models/count: how many models /models lists for this caller with the same filters."""

    @extend_schema(
        operation_id="countModels",
        tags=["Models"],
        parameters=[ModelCountQuerySerializer],
        responses={200: ModelCountSerializer, **error_responses(400, 401, 429, 500)},
    )
    def get(self, request: Request) -> Response:
        query = ModelCountQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params, as_list = query.validated_data, ModelListQuerySerializer.as_list
        snapshot = current_snapshot()
        models = models_filter(
            listed_models(snapshot=snapshot),
            q=params.get("q", ""),
            supported_parameters=as_list(params.get("supported_parameters")),
            input_modalities=as_list(params.get("input_modalities")),
            output_modalities=as_list(params.get("output_modalities")),
            providers=as_list(params.get("providers")),
        )
        allowed = models_allowed(models, limits=limits_for(request_caller(request)), snapshot=snapshot)
        return Response({"data": {"count": len(allowed)}})


class ModelEndpointsApi(APIView):
    @extend_schema(
        operation_id="listModelEndpoints",
        tags=["Models"],
        parameters=[
            OpenApiParameter("author", str, OpenApiParameter.PATH),
            OpenApiParameter("slug", str, OpenApiParameter.PATH),
        ],
        responses={200: ModelEndpointsEnvelopeSerializer, **error_responses(401, 404, 429, 500)},
    )
    def get(self, request: Request, author: str, slug: str) -> Response:
        query_params(request)
        model = selectors.model_get(model_id=f"{author}/{slug}")
        if model is None:
            raise NotFound(MSG_MODEL_NOT_FOUND)
        return Response(
            {
                "data": {
                    "id": model.id,
                    "name": model.name,
                    "created": model.created,
                    "description": model.description,
                    "architecture": architecture(model),
                    "endpoints": [endpoint_record(endpoint) for endpoint in model.live_endpoints],
                }
            }
        )


class ProviderListApi(APIView):
    @extend_schema(
        operation_id="listProviders",
        tags=["Models"],
        responses={200: ProviderListSerializer, **error_responses(401, 429, 500)},
    )
    def get(self, request: Request) -> Response:
        query_params(request)
        return Response({"data": ProviderRecordSerializer(selectors.providers_list(), many=True).data})


class AccountRoutingSettingsApi(APIView):
    """The account's routing defaults; a request's `provider` preferences can only tighten them."""

    permission_classes = [IsManagementKey]

    def _data(self, account_id: UUID) -> dict[str, Any]:
        defaults = account_defaults(account_id=account_id)
        return {
            "allowed_providers": list(defaults.allowed_providers),
            "ignored_providers": list(defaults.ignored_providers),
            "enforce_zdr": defaults.enforce_zdr,
            "data_collection": defaults.data_collection,
        }

    @extend_schema(
        operation_id="getRoutingSettings",
        tags=["Routing"],
        responses={200: AccountRoutingEnvelopeSerializer, **error_responses(401, 403, 429, 500)},
    )
    def get(self, request: Request) -> Response:
        query_params(request)
        return Response({"data": self._data(request_caller(request).account_id)})

    @extend_schema(
        operation_id="updateRoutingSettings",
        tags=["Routing"],
        request=AccountRoutingSettingsSerializer,
        responses={200: AccountRoutingEnvelopeSerializer, **error_responses(400, 401, 403, 429, 500)},
    )
    def patch(self, request: Request) -> Response:
        body = AccountRoutingSettingsSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        account_routing_update(account_id=request_caller(request).account_id, changes=body.validated_data)
        return Response({"data": self._data(request_caller(request).account_id)})
