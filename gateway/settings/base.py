"""All settings, driven by the environment (see .env.example)."""

import os
from pathlib import Path
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent.parent

env = environ.Env()
# The env file read at start (the environment's own variables win): GATEWAY_ENV_FILE, by default .env next to
# manage.py; empty: none (tests/gateway/test_secret_key.py loads the settings without a checkout's .env).
ENV_FILE = os.environ.get("GATEWAY_ENV_FILE", str(BASE_DIR / ".env"))
if ENV_FILE:
    environ.Env.read_env(ENV_FILE, overwrite=False)

DEBUG = env.bool("DEBUG", default=False)
# Sessions, CSRF tokens and end-user id hashes are keyed with it. With DEBUG off there is no default: a key anyone
# can read in the source (or a placeholder) would let them forge a staff session, so the gateway refuses to start.
DEV_SECRET_KEY = "dev-only-insecure-secret-key-change-me-0123456789"  # DEBUG on, no key set: local development only
PLACEHOLDER_SECRET_KEYS = frozenset({"", "change-me", "changeme", DEV_SECRET_KEY})
SECRET_KEY = env.str("SECRET_KEY", default="")
if SECRET_KEY.strip().lower() in PLACEHOLDER_SECRET_KEYS:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set (or is a placeholder) and DEBUG is off: set SECRET_KEY to a long random value, "
            "the same on every instance (python -c 'import secrets; print(secrets.token_urlsafe(50))'). "
            "`make run` generates one in .run/secrets.env; DEBUG=true (local development only) uses a development key."
        )
    SECRET_KEY = SECRET_KEY.strip() or DEV_SECRET_KEY
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# CORS for browser apps calling /api/v1 directly (django-cors-headers). Off unless origins are listed: each is
# scheme://host[:port] exactly as the browser sends it, or `*` for any origin (safe only because the API is
# authenticated by a header, never a cookie: CORS_ALLOW_CREDENTIALS stays off).
CORS_ALLOWED_ORIGINS = env.list("CORS_ALLOWED_ORIGINS", default=[])
CORS_ALLOW_ALL_ORIGINS = "*" in CORS_ALLOWED_ORIGINS
for _origin in CORS_ALLOWED_ORIGINS:  # refused at start, not a policy that silently matches nothing
    _parts = urlsplit(_origin)
    if _origin != "*" and (not _parts.netloc or _parts.path not in ("", "/") or _parts.query or _parts.fragment):
        raise ImproperlyConfigured(f"CORS_ALLOWED_ORIGINS: {_origin!r} is not an origin (scheme://host[:port]) or *")
# A browser's Origin never ends in "/": one pasted with it still matches.
CORS_ALLOWED_ORIGINS = [] if CORS_ALLOW_ALL_ORIGINS else [o.removesuffix("/") for o in CORS_ALLOWED_ORIGINS]
CORS_URLS_REGEX = r"^/api/v1/"  # the API only: the admin and console are same-origin pages
# What the official SDKs send from a browser (openai and anthropic: their `x-stainless-*` telemetry and options;
# anthropic: its version, beta and browser-consent headers; openrouter: app attribution), and the gateway's own.
CORS_ALLOW_HEADERS = (
    "accept",
    "authorization",
    "content-type",
    "user-agent",
    "x-api-key",
    "x-gateway-metadata",
    "x-openrouter-metadata",
    "x-openrouter-experimental-metadata",
    "x-session-id",
    "x-request-id",
    "http-referer",
    "x-title",
    "idempotency-key",
    "anthropic-version",
    "anthropic-beta",
    "anthropic-dangerous-direct-browser-access",
    "openai-organization",
    "openai-project",
    "openai-beta",
    *(
        f"x-stainless-{name}"
        for name in (
            "lang",
            "package-version",
            "os",
            "arch",
            "runtime",
            "runtime-version",
            "retry-count",
            "timeout",
            "read-timeout",
            "async",
            "raw-response",
            "helper",
            "helper-method",
            "stream-helper",
            "poll-helper",
            "custom-poll-interval",
            "custom-event-handler",
        )
    ),
)
# Answer headers a page may read: the generation id (for GET /generation) and the SDKs' retry advice.
CORS_EXPOSE_HEADERS = ("x-generation-id", "x-request-id", "retry-after", "x-should-retry")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "corsheaders",  # its system checks vet the CORS settings (`manage.py check`)
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "gateway.versions",
    "gateway.accounts",
    "gateway.billing",
    "gateway.console",
    "routing",
    "byok",
    "guardrails",
    "plugins",
    "responses_api",
]

MIDDLEWARE = [
    "gateway.console.middleware.RequestLogMiddleware",
    # CORS before anything that answers or authenticates: a browser's preflight (OPTIONS, no key) is answered
    # here, and every answer, errors included, carries the CORS headers so the page can read it.
    "corsheaders.middleware.CorsMiddleware",
    # Errors on the Anthropic Messages door in Anthropic's shape, also those made before its view
    "responses_api.messages.errors.AnthropicErrorMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "gateway.middleware.ApiBodyLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "gateway.urls"
WSGI_APPLICATION = "gateway.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# The embedded default is a SQLite file beside the project.
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'gateway.sqlite3'}")}
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DB_CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0
elif env.bool("DB_POOL", default=True):
    # A bounded pool per process: a thread holds a connection only while it uses the database (long
    # streams hand theirs back), so thousands of concurrent streams need only a few connections. With
    # CONN_HEALTH_CHECKS Django gives the pool psycopg_pool's check: a connection that died while idle (a database
    # restart) is replaced before it is handed out, for a round trip per draw.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        # Kept open even when idle (gunicorn's workers raise it to the connections they open at start, gateway/wsgi.py:
        # a burst after a quiet spell would otherwise wait for the pool to open them again, one at a time).
        "min_size": min(env.int("DB_POOL_MIN_SIZE", default=1), env.int("DB_POOL_MAX_SIZE", default=20)),
        "max_size": env.int("DB_POOL_MAX_SIZE", default=20),
        # A request waits at most this long for a connection, then is answered 503 with Retry-After.
        "timeout": env.float("DB_POOL_TIMEOUT", default=5.0),
    }
if DATABASES["default"]["ENGINE"].endswith("postgresql"):
    # A database that stops answering fails requests with 503 in seconds instead of holding them (and their
    # connections) until it answers again: connecting (TCP and the whole handshake: psycopg counts it, 2 s at
    # least) and each statement (PostgreSQL cancels it, a lock wait included) have a deadline. 0 turns one off
    # (DB_STATEMENT_TIMEOUT=0 for a long migration; compose.yaml's `migrate` does).
    _db_options = DATABASES["default"].setdefault("OPTIONS", {})
    _db_options["connect_timeout"] = env.int("DB_CONNECT_TIMEOUT", default=3)
    _statement_ms = int(env.float("DB_STATEMENT_TIMEOUT", default=5.0) * 1000)
    _db_options["options"] = f"{_db_options.get('options', '')} -c statement_timeout={_statement_ms}".strip()
    # A frozen server (a paused process, a stalled host: connections open, the kernel acknowledging, nothing
    # answered) never fires its statement_timeout. In a gevent worker psycopg waits in gateway/pgwait.py, which gives
    # up DB_STATEMENT_GRACE seconds later, closing the connection (503). Elsewhere (gthread) libpq's own wait has no
    # deadline: a dead peer is found by TCP (tcp_user_timeout: data unacknowledged this long; keepalives: an idle
    # connection), a frozen one waits for it (docs/limits-and-hardening.md).
    _grace = env.float("DB_STATEMENT_GRACE", default=2.0)
    from gateway import pgwait

    pgwait.install(statement_deadline=_statement_ms / 1000 + _grace if _statement_ms else None)
    _tcp_ms = int(env.float("DB_TCP_USER_TIMEOUT", default=10.0) * 1000)
    _db_options.update(keepalives=1, keepalives_idle=5, keepalives_interval=2, keepalives_count=3)
    if _tcp_ms:
        _db_options["tcp_user_timeout"] = _tcp_ms
if DATABASES["default"]["ENGINE"].endswith("postgresql") and env.bool("DB_PREPARED_STATEMENTS", default=True):
    # psycopg prepares a statement bound on the server on its first run on each connection: the hot path's fixed
    # statements (gateway/dbpool.py prepared_cursor: a request's hold and settlement); the ORM's never are (Django
    # binds them on the client, its default: server_side_binding stays off).
    # Off behind a pooler that cannot keep prepared statements (PgBouncer in transaction mode before 1.21).
    DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = 0
# A settlement the database could not take (down, stalled) is tried again in the process for this long, in seconds
# (gateway/billing/settle_retry.py), at most this many at once; the stale-hold sweep releases what is left.
SETTLE_RETRY_SECONDS = env.float("SETTLE_RETRY_SECONDS", default=600.0)
SETTLE_RETRY_MAX_PENDING = env.int("SETTLE_RETRY_MAX_PENDING", default=10000)
# /readyz waits at most this long, in seconds, for its database check (one at a time per process), else 503.
READYZ_DATABASE_TIMEOUT = env.float("READYZ_DATABASE_TIMEOUT", default=1.0)

# The request pipeline's stages (routing.stages is their interface), as dotted paths of stage classes, in
# order: pre-stages see the canonical request before routing, post-stages the answer before settlement.
PIPELINE_PRE_STAGES = [
    "guardrails.stage.GuardrailStage",  # first: local and cheap; a block costs nothing
    "plugins.routers.stage.RouterStage",  # auto / pareto / fusion slugs: chooses the models the pipeline plans
    "plugins.common.hosted_tools.HostedToolsStage",  # tools the provider runs itself: only endpoints that run them
    "plugins.web.stage.WebStage",  # the `web` plugin: search results added to the context
    "plugins.file_parser.stage.FileParserStage",  # files become text before anything measures or moderates the input
    "guardrails.stage.AddedTextGuardrailStage",  # the parsed files' and web results' text, and files sent as they are
    "plugins.moderation.stage.ModerationStage",
    "plugins.compression.stage.ContextCompressionStage",  # last: fits the final input to the endpoints' context
]
PIPELINE_POST_STAGES = [
    "plugins.server_tools.stage.ServerToolsStage",  # first: runs the model's server-tool calls and calls it again
    "plugins.web.stage.WebCitationStage",  # the `web` plugin's url_citation annotations
    "plugins.healing.stage.ResponseHealingStage",
    "plugins.file_parser.stage.FileAnnotationStage",  # the parsed files' annotations on the answer's first text part
]

# Routing health bookkeeping (routing/health.py) is queued by requests and sent by one thread per process.
HEALTH_WRITE_BEHIND = env.bool("HEALTH_WRITE_BEHIND", default=True)

# Guardrails (guardrails/detectors/): the catalog model that finds person names and addresses for the
# `person-name` / `address` builtins ("" = none: guardrails using them are refused), and the region whose
# national phone number forms the `phone` builtin knows.
GUARDRAILS_ENTITY_MODEL = env.str("GUARDRAILS_ENTITY_MODEL", default="")
GUARDRAILS_PHONE_REGION = env.str("GUARDRAILS_PHONE_REGION", default="US")
# The bytes (UTF-8) of request text one guardrail's content filters scan at most, and a request's guardrails in all
# (the text's bytes times the guardrails that scan it); over either: 413, never a partial scan (guardrails/scan.py).
GUARDRAILS_SCAN_MAX_BYTES_PER_GUARDRAIL = env.int("GUARDRAILS_SCAN_MAX_BYTES_PER_GUARDRAIL", default=4 * 1024 * 1024)
GUARDRAILS_SCAN_MAX_BYTES_PER_REQUEST = env.int("GUARDRAILS_SCAN_MAX_BYTES_PER_REQUEST", default=8 * 1024 * 1024)
# The moderation plugin (plugins/moderation/): the catalog model that moderates ("" = none: a request asking
# for moderation is refused with 400) and how it is called: `openai-moderations` (POST <provider>/moderations)
# or `llama-guard` (a guard model over Chat Completions, answering safe / unsafe + categories).
MODERATION_MODEL = env.str("MODERATION_MODEL", default="")
MODERATION_ENGINE = env.str("MODERATION_ENGINE", default="openai-moderations")
# The file-parser plugin's OCR engine (plugins/file_parser/ocr.py): a catalog model with image input that reads
# scanned PDF pages ("" = none: a scan asked to be parsed is refused with 400).
FILE_PARSER_OCR_MODEL = env.str("FILE_PARSER_OCR_MODEL", default="")
# Web search (plugins/web/search.py): an engine is on when its key (SearXNG: its URL) is set; the default engine is
# needed when several are; prices are USD per search ("engine=price,...").
WEB_SEARCH_DEFAULT_ENGINE = env.str("WEB_SEARCH_DEFAULT_ENGINE", default="")
WEB_SEARCH_EXA_API_KEY = env.str("WEB_SEARCH_EXA_API_KEY", default="")
WEB_SEARCH_TAVILY_API_KEY = env.str("WEB_SEARCH_TAVILY_API_KEY", default="")
WEB_SEARCH_BRAVE_API_KEY = env.str("WEB_SEARCH_BRAVE_API_KEY", default="")
WEB_SEARCH_SEARXNG_URL = env.str("WEB_SEARCH_SEARXNG_URL", default="")
WEB_SEARCH_SEARXNG_ALLOW_PRIVATE_NETWORK = env.bool("WEB_SEARCH_SEARXNG_ALLOW_PRIVATE_NETWORK", default=False)
WEB_SEARCH_PRICES = env.str("WEB_SEARCH_PRICES", default="exa=0.007,tavily=0.008,brave=0.005,searxng=0")
# Web fetch (gateway:web_fetch): size, whole-fetch deadline and redirects followed (each re-checked).
WEB_FETCH_MAX_BYTES = env.int("WEB_FETCH_MAX_BYTES", default=5 * 1024 * 1024)
WEB_FETCH_TIMEOUT_SECONDS = env.float("WEB_FETCH_TIMEOUT_SECONDS", default=20.0)
WEB_FETCH_MAX_REDIRECTS = env.int("WEB_FETCH_MAX_REDIRECTS", default=5)
# The routers (plugins/routers/): the catalog model that classifies a gateway/auto request's task type ("" = the
# local keyword heuristic), what the auto-router ranks by (`benchmarks`: the catalog's task scores; `usage`: this
# deployment's share of successful spend per task type over 7 days), and fusion's preset panels as JSON
# ({"general-high": ["<model>", ...], ...}: the first model is the preset's analyst; unset: plugins.fusion
# .panel DEFAULT_PRESETS).
AUTO_ROUTER_CLASSIFIER_MODEL = env.str("AUTO_ROUTER_CLASSIFIER_MODEL", default="")
AUTO_ROUTER_RANKING = env.str("AUTO_ROUTER_RANKING", default="benchmarks")
FUSION_PRESETS = env.json("FUSION_PRESETS", default={})

# Each process re-reads the version counters of its in-process caches (API keys, the catalog) at most this
# often, in seconds: a key disabled or deleted, or a catalog change, is seen everywhere within it.
CACHE_VERSION_CHECK_SECONDS = env.float("CACHE_VERSION_CHECK_SECONDS", default=0.5)

REDIS_URL = env.str("REDIS_URL", default="")
# Redis is an optimisation: on any Redis error the cache serves from process-local memory, logs the outage
# once and tries Redis again after REDIS_RETRY_SECONDS (gateway/cache.py). Short timeouts, in seconds,
# so that a dead or hung Redis cannot stall a request.
REDIS_CONNECT_TIMEOUT = env.float("REDIS_CONNECT_TIMEOUT", default=0.25)
REDIS_TIMEOUT = env.float("REDIS_TIMEOUT", default=0.5)
REDIS_RETRY_SECONDS = env.float("REDIS_RETRY_SECONDS", default=5.0)
# Connections per process to Redis (redis-py's own default is 100): a gevent worker serves up to 1,000 requests at
# once, and one more concurrent command than this is an error (an outage as far as the cache is concerned).
REDIS_MAX_CONNECTIONS = env.int("REDIS_MAX_CONNECTIONS", default=1024)
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "gateway.cache.ResilientRedisCache",
            "LOCATION": REDIS_URL,
            "RETRY_SECONDS": REDIS_RETRY_SECONDS,
            "OPTIONS": {
                "socket_connect_timeout": REDIS_CONNECT_TIMEOUT,
                "socket_timeout": REDIS_TIMEOUT,
                "max_connections": REDIS_MAX_CONNECTIONS,
            },
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "gateway"}}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

# Request bodies above this are refused with 413 (docs/limits-and-hardening.md: "Request bodies").
MAX_REQUEST_BODY_BYTES = env.int("MAX_REQUEST_BODY_BYTES", default=20 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_REQUEST_BODY_BYTES
# An API request's whole body must arrive within this many seconds of its headers, or 408
# (gateway/request_body.py reads it before authentication touches the database).
REQUEST_BODY_TIMEOUT_SECONDS = env.float("REQUEST_BODY_TIMEOUT_SECONDS", default=30.0)

# Per-API-key request rate, e.g. "600/min"; empty disables the throttle.
GATEWAY_RATE_LIMIT = env.str("GATEWAY_RATE_LIMIT", default="")
# While Redis is unavailable: true counts per process (each worker admits up to the limit), false answers 503.
GATEWAY_RATE_LIMIT_FAIL_OPEN = env.bool("GATEWAY_RATE_LIMIT_FAIL_OPEN", default=True)

# Keyring for secrets stored at rest: "kid:base64-32-byte-key,..."; the first is used to encrypt.
GATEWAY_ENCRYPTION_KEYS = env.str("GATEWAY_ENCRYPTION_KEYS", default="")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["gateway.accounts.authentication.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["gateway.renderers.FastJSONRenderer"],  # DRF's JSON, encoded by orjson
    "DEFAULT_PARSER_CLASSES": ["gateway.parsers.StrictJSONParser"],  # nesting limit, finite numbers
    "DEFAULT_THROTTLE_CLASSES": ["gateway.accounts.throttling.ApiKeyRateThrottle"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "gateway.api.JsonFirstContentNegotiation",
    "EXCEPTION_HANDLER": "gateway.errors.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Model Gateway API",
    "DESCRIPTION": (
        "One OpenAI-compatible API in front of many LLM providers. SDK base URLs: the openai and openrouter SDKs "
        "take `<root>/api/v1`; the Anthropic SDK appends `/v1/messages` itself, so `<root>/api` or `<root>/api/v1`. "
        "Errors carry retry advice: `x-should-retry: false` where a retry cannot help (4xx other than 408, 409 "
        "and 429; a model no provider has credentials for, 404 `provider_not_configured`), `Retry-After` "
        "(seconds) on 429, 502, 503, 524 and 529."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_AUTHENTICATION": [],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "SERVERS": [{"url": "/api/v1"}],
    "SCHEMA_PATH_PREFIX_TRIM": True,
    "COMPONENT_SPLIT_REQUEST": False,
    "ENUM_NAME_OVERRIDES": {"TierEnum": "responses_api.validation.plugins.COST_TIERS"},  # = text.verbosity
}

# HTTPS hardening, on for deployments behind TLS (`manage.py check --deploy` passes with it).
SECURE_HTTPS = env.bool("SECURE_HTTPS", default=False)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
if SECURE_HTTPS:
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
if env.bool("BEHIND_TLS_PROXY", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {"django.request": {"level": "ERROR"}},
}

# Outbound calls to providers (routing/http.py).
UPSTREAM_CONNECT_TIMEOUT = env.float("UPSTREAM_CONNECT_TIMEOUT", default=5.0)
UPSTREAM_READ_TIMEOUT = env.float("UPSTREAM_READ_TIMEOUT", default=120.0)
# Deadlines per attempt (seconds from its start), enforced even against an upstream that trickles bytes
# under the read timeout: a streaming attempt's response head, a whole non-streaming attempt (head and
# body), and a whole stream.
UPSTREAM_FIRST_BYTE_TIMEOUT = env.float("UPSTREAM_FIRST_BYTE_TIMEOUT", default=300.0)
UPSTREAM_TOTAL_TIMEOUT = env.float("UPSTREAM_TOTAL_TIMEOUT", default=600.0)
UPSTREAM_STREAM_MAX_SECONDS = env.float("UPSTREAM_STREAM_MAX_SECONDS", default=1800.0)
# Size caps on what an upstream sends: a non-streaming body (decoded), a whole stream (decoded: its answer is
# folded in memory), and one streamed line or event (SSE line, SSE event data, AWS event-stream frame). Over a
# cap the attempt fails (the next one may serve; a stream already sent in part ends with an error, billed).
UPSTREAM_MAX_RESPONSE_BYTES = env.int("UPSTREAM_MAX_RESPONSE_BYTES", default=32 * 1024 * 1024)
UPSTREAM_MAX_STREAM_BYTES = env.int("UPSTREAM_MAX_STREAM_BYTES", default=64 * 1024 * 1024)
UPSTREAM_MAX_LINE_BYTES = env.int("UPSTREAM_MAX_LINE_BYTES", default=8 * 1024 * 1024)
# Allow loopback/private destinations for every outbound call (e.g. an all-local deployment).
# Providers can also be allowed one by one in the catalog (`allow_private_network`).
OUTBOUND_ALLOW_PRIVATE_NETWORKS = env.bool("OUTBOUND_ALLOW_PRIVATE_NETWORKS", default=False)
# Seconds between SSE keep-alive comments while waiting for the first upstream event.
STREAM_KEEPALIVE_SECONDS = env.float("STREAM_KEEPALIVE_SECONDS", default=5.0)

# Operations (gateway.console): GET /metrics is answered to `Authorization: Bearer <METRICS_TOKEN>` (when set) or
# to a client address in METRICS_ALLOWED_NETWORKS (CIDRs; loopback by default); anything else gets 404.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
METRICS_ALLOWED_NETWORKS = env.list("METRICS_ALLOWED_NETWORKS", default=["127.0.0.0/8", "::1/128"])
# One JSON line per request on the `gateway.access` logger (stdout); ACCESS_LOG=false turns it off.
# LOG_FORMAT=json makes every other log record a JSON line too.
_logging: dict = LOGGING  # its values are dicts (mypy infers object)
_logging["formatters"]["message"] = {"format": "%(message)s"}
_logging["formatters"]["json"] = {"()": "gateway.console.logs.JsonFormatter"}
_logging["handlers"]["access"] = {
    "class": "logging.StreamHandler",
    "formatter": "message",
    "stream": "ext://sys.stdout",
}
_logging["loggers"]["gateway.access"] = {
    "handlers": ["access"],
    "level": "INFO" if env.bool("ACCESS_LOG", default=True) else "WARNING",
    "propagate": False,
}
if env.str("LOG_FORMAT", default="plain") == "json":
    _logging["handlers"]["console"]["formatter"] = "json"
if SECURE_HTTPS:
    SECURE_REDIRECT_EXEMPT = [*SECURE_REDIRECT_EXEMPT, r"^metrics$"]  # scraped over the internal network
