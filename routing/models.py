"""The catalog: providers, models, and endpoints (a model served by a provider at a price)."""

from django.core.validators import MinValueValidator
from django.db import models

# The routers' task types live apart (routing/task_types.py) so that plugins read them without this app's models;
# named here too because the task_scores help text (and its migration) says routing.models.TASK_TYPES.
from routing.task_types import TASK_TYPES  # noqa: F401


class AdapterKind(models.TextChoices):
    OPENAI_CHAT = "openai_chat", "OpenAI Chat Completions (and compatible)"
    OPENAI_RESPONSES = "openai_responses", "OpenAI Responses"
    ANTHROPIC = "anthropic", "Anthropic Messages"
    AZURE = "azure", "Azure OpenAI (Chat Completions on Azure URLs)"
    VERTEX = "vertex", "Anthropic on Google Vertex AI (service-account OAuth)"
    BEDROCK = "bedrock", "Amazon Bedrock Converse (API key or SigV4)"


class CredentialKind(models.TextChoices):
    """The shape of a provider's credential (for BYOK keys and the operator's own)."""

    API_KEY = "api_key", "API key string"
    AZURE = "azure", "Azure: array of catalog / per-deployment configs"
    BEDROCK = "bedrock", "Bedrock: API key string or {accessKeyId, secretAccessKey, region}"
    VERTEX = "vertex", "Vertex: service-account JSON (+ region, bucket)"


class ProviderStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    DISABLED = "disabled", "Disabled"


class Provider(models.Model):
    slug = models.CharField(max_length=100, unique=True, help_text="e.g. openai, together, google-vertex/us-east5")
    name = models.CharField(max_length=200)
    adapter = models.CharField(max_length=30, choices=AdapterKind.choices)
    credential_kind = models.CharField(max_length=10, choices=CredentialKind.choices, default=CredentialKind.API_KEY)
    base_url = models.URLField(max_length=500)
    # The operator's own credential for shared capacity: sealed in the database, or read from an env var.
    api_key_env = models.CharField(max_length=100, blank=True, help_text="Environment variable with the API key")
    credential_sealed = models.BinaryField(null=True, blank=True, editable=False)
    credential_key_id = models.CharField(max_length=40, blank=True, editable=False)
    credential_label = models.CharField(max_length=40, blank=True, editable=False)
    zdr = models.BooleanField(default=False, help_text="Zero data retention")
    retains_prompts = models.BooleanField(default=True)
    trains_on_prompts = models.BooleanField(default=False)
    region = models.CharField(max_length=40, blank=True)
    status = models.CharField(max_length=10, choices=ProviderStatus.choices, default=ProviderStatus.ACTIVE)
    is_local_standin = models.BooleanField(default=False, help_text="The bundled local stand-in, not a real provider")
    allow_private_network = models.BooleanField(
        default=False, help_text="Operator's switch: allow a loopback/private base URL (self-hosted servers)"
    )
    docs_url = models.URLField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class ModelKind(models.TextChoices):
    """What a model does, and so which API routes to it: /responses, /chat/completions and /messages route to
    chat models, /embeddings to embedding models."""

    CHAT = "chat", "Chat (text generation)"
    EMBEDDING = "embedding", "Embedding"
    ROUTER = "router", "Router (chooses or combines chat models: gateway/auto, gateway/pareto-code, gateway/fusion)"


# The router model slugs (rows of kind ROUTER, no endpoints: plugins.routers chooses the models they route to).
ROUTER_MODELS = {
    "gateway/auto": "Auto router: classifies the request's task type and routes to the best-ranked model for it "
    "(plugin auto-router: allowed_models, excluded_models, cost_tier, pin_model).",
    "gateway/auto-beta": "Auto router (beta): as gateway/auto, without pin_model (plugin auto-beta-router).",
    "gateway/pareto-code": "Pareto coding router: the cheapest model of a coding-score tier, or the fastest with "
    ":nitro (plugin pareto-router: min_coding_score, max_price, price_source).",
    "gateway/fusion": "Fusion: a panel of models answers in parallel, an analyst compares the answers and writes "
    "the final one (plugin fusion: analysis_models, model, preset).",
}


class Model(models.Model):
    id = models.CharField(max_length=200, primary_key=True, help_text="<author>/<slug>")
    kind = models.CharField(max_length=20, choices=ModelKind.choices, default=ModelKind.CHAT)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    created = models.BigIntegerField(default=0, help_text="Unix timestamp")
    context_length = models.IntegerField()
    input_modalities = models.JSONField(default=list, blank=True)
    output_modalities = models.JSONField(default=list, blank=True)
    supported_parameters = models.JSONField(default=list, blank=True)
    tokenizer = models.CharField(max_length=40, blank=True)
    # Quality data the routers rank by (plugins.routers): scores 0-1 per task type (routing.models.TASK_TYPES),
    # a coding score 0-1 (pareto-router's tiers), and where the figures come from.
    task_scores = models.JSONField(
        default=dict, blank=True, help_text="Task type -> score 0-1 (types: routing.models.TASK_TYPES)"
    )
    coding_score = models.FloatField(
        null=True, blank=True, help_text="0-1; pareto-router tiers: >= 0.66 high, >= 0.33 medium, below low"
    )
    quality_source = models.TextField(blank=True, help_text="Where the scores come from (benchmark, date)")

    live_endpoints: list["Endpoint"]  # set by the selectors' Prefetch(to_attr="live_endpoints")

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.id


class Endpoint(models.Model):
    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="endpoints")
    provider = models.ForeignKey(Provider, on_delete=models.CASCADE, related_name="endpoints")
    upstream_model = models.CharField(max_length=200)
    # USD per million tokens (per request for price_request).
    price_prompt = models.DecimalField(max_digits=14, decimal_places=6)
    price_completion = models.DecimalField(max_digits=14, decimal_places=6)
    price_cached_input = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    price_cache_write = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    price_reasoning = models.DecimalField(
        max_digits=14, decimal_places=6, null=True, blank=True, help_text="Empty: billed as completion tokens"
    )
    price_request = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    price_web_search = models.DecimalField(
        max_digits=14, decimal_places=6, default=0, help_text="USD per web search the provider runs itself (native)"
    )
    context_length = models.IntegerField()
    max_completion_tokens = models.IntegerField(null=True, blank=True)
    quantization = models.CharField(max_length=20, default="unknown")
    supported_parameters = models.JSONField(default=list, blank=True)
    service_tiers = models.JSONField(default=list, blank=True)
    hosted_tools = models.JSONField(
        default=list,
        blank=True,
        help_text="Tools the provider runs itself here (web_search, code_interpreter, image_generation, mcp, "
        "file_search): a request naming one routes only to endpoints that list it",
    )
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["model_id", "provider__slug"]
        constraints = [models.UniqueConstraint(fields=["model", "provider"], name="one_endpoint_per_model_provider")]

    def __str__(self) -> str:
        return f"{self.model_id} @ {self.provider.slug}"


class DataCollection(models.TextChoices):
    ALLOW = "allow", "Allow"
    DENY = "deny", "Deny"


class AccountRoutingSettings(models.Model):
    """An account's routing defaults. A request's `provider` preferences can only tighten them."""

    account = models.OneToOneField("accounts.Account", on_delete=models.CASCADE, related_name="routing_settings")
    allowed_providers = models.JSONField(
        default=list, blank=True, help_text="Provider slugs; empty = all. A ceiling for `provider.only`."
    )
    ignored_providers = models.JSONField(default=list, blank=True, help_text="Provider slugs never used")
    enforce_zdr = models.BooleanField(default=False, help_text="Only zero-data-retention endpoints")
    data_collection = models.CharField(max_length=5, choices=DataCollection.choices, default=DataCollection.ALLOW)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "account routing settings"

    def __str__(self) -> str:
        return f"routing settings of {self.account_id}"


class SearchEngine(models.Model):
    """A web search engine's price, USD per search (the catalog's `search_engines`; staff edit it here): what the
    web plugin and gateway:web_search charge for each of its searches. An engine with no row is priced by the
    operator's WEB_SEARCH_PRICES, else its list price."""

    engine = models.SlugField(max_length=40, unique=True, help_text="exa, tavily, brave, searxng")
    price_per_search = models.DecimalField(
        max_digits=16, decimal_places=8, validators=[MinValueValidator(0)], help_text="USD per search"
    )
    source = models.CharField(max_length=300, blank=True, help_text="Where the price comes from")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["engine"]

    def __str__(self) -> str:
        return f"{self.engine}: {self.price_per_search} USD per search"
