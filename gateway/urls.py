from django.contrib import admin
from django.urls import include, path, register_converter
from django.views.generic import TemplateView
from drf_spectacular.views import SpectacularRedocView, SpectacularSwaggerView

from byok.apis import ByokDetailApi, ByokListCreateApi
from gateway import health
from gateway.accounts.apis import ApiKeyDetailApi, ApiKeyListCreateApi, CurrentKeyApi
from gateway.billing.apis import CreditsApi, GenerationApi
from gateway.console.apis import ActivityApi
from gateway.console.metrics import metrics_view
from gateway.console.views import dashboard
from gateway.schema import CachedSchemaJSONView, CachedSchemaYAMLView
from guardrails.urls import urlpatterns as guardrail_urls
from plugins.apis import PluginDefaultsApi
from plugins.serializers import plugin_rules_install
from responses_api.apis import ResponseCreateApi
from responses_api.chat.apis import ChatCompletionCreateApi
from responses_api.embeddings.apis import EmbeddingCreateApi
from responses_api.messages.apis import (
    MessageCountTokensAliasApi,
    MessageCountTokensApi,
    MessageCreateAliasApi,
    MessageCreateApi,
)
from responses_api.stages import honoured_plugins
from responses_api.validation.plugins import PLUGIN_SERIALIZERS
from routing.apis import (
    AccountRoutingSettingsApi,
    ModelCountApi,
    ModelEndpointsApi,
    ModelGetApi,
    ModelListApi,
    ModelRetrieveApi,
    ProviderListApi,
    UserModelListApi,
)


class SegmentConverter:
    """A path segment without control characters: `/keys/a%00b` is a 404 here, never a NUL in a query."""

    regex = "[^/\x00-\x1f\x7f]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(SegmentConverter, "segment")
# Plugin defaults are validated as request entries are (plugins may not import responses_api: handed over here).
plugin_rules_install(serializers=PLUGIN_SERIALIZERS, honoured=honoured_plugins)

# The model endpoints first, and the API before the rest: the resolver tries patterns in order (no two overlap).
api_v1 = [
    path("responses", ResponseCreateApi.as_view(), name="responses"),
    path("chat/completions", ChatCompletionCreateApi.as_view(), name="chat-completions"),
    path("messages", MessageCreateApi.as_view(), name="messages"),
    path("messages/count_tokens", MessageCountTokensApi.as_view(), name="messages-count-tokens"),
    path("v1/messages", MessageCreateAliasApi.as_view(), name="messages-v1"),
    path("v1/messages/count_tokens", MessageCountTokensAliasApi.as_view(), name="messages-count-tokens-v1"),
    path("embeddings", EmbeddingCreateApi.as_view(), name="embeddings"),
    path("keys", ApiKeyListCreateApi.as_view(), name="keys"),
    path("keys/<segment:key_hash>", ApiKeyDetailApi.as_view(), name="key-detail"),
    path("key", CurrentKeyApi.as_view(), name="current-key"),
    path("credits", CreditsApi.as_view(), name="credits"),
    path("generation", GenerationApi.as_view(), name="generation"),
    path("activity", ActivityApi.as_view(), name="activity"),
    path("models", ModelListApi.as_view(), name="models"),
    path("models/user", UserModelListApi.as_view(), name="models-user"),
    path("models/<segment:author>/<segment:slug>/endpoints", ModelEndpointsApi.as_view(), name="model-endpoints"),
    path("models/count", ModelCountApi.as_view(), name="models-count"),
    path("models/<segment:author>/<segment:slug>", ModelRetrieveApi.as_view(), name="model-retrieve"),
    path("model/<segment:author>/<segment:slug>", ModelGetApi.as_view(), name="model-get"),
    path("providers", ProviderListApi.as_view(), name="providers"),
    path("byok", ByokListCreateApi.as_view(), name="byok"),
    path("byok/<uuid:byok_id>", ByokDetailApi.as_view(), name="byok-detail"),
    path("routing/settings", AccountRoutingSettingsApi.as_view(), name="routing-settings"),
    path("plugins/defaults", PluginDefaultsApi.as_view(), name="plugin-defaults"),
    *guardrail_urls,
    path("openapi.json", CachedSchemaJSONView.as_view(), name="schema"),  # generated once per process
    path("openapi.yaml", CachedSchemaYAMLView.as_view(), name="schema-yaml"),
    path("docs", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("redoc", SpectacularRedocView.as_view(url_name="schema"), name="redoc"),
]

urlpatterns = [
    path("api/v1/", include(api_v1)),
    path("", TemplateView.as_view(template_name="index.html"), name="index"),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    path("admin/dashboard/", admin.site.admin_view(dashboard), name="admin-dashboard"),
    path("admin/", admin.site.urls),
]

handler400 = "gateway.errors.handler400"
handler403 = "gateway.errors.handler403"
handler404 = "gateway.errors.handler404"
handler500 = "gateway.errors.handler500"
