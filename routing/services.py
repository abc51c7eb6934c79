"""Catalog writes: the declarative catalog loader and the operator's provider credentials."""

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, TypeGuard
from urllib.parse import urlsplit
from uuid import UUID

from django.db import transaction

from byok.crypto import Sealed, current_key_id, reseal, seal
from byok.shapes import MAX_URL_CHARS, ShapeError, check_text, operator_credential
from routing.models import (
    TASK_TYPES,
    AccountRoutingSettings,
    AdapterKind,
    Endpoint,
    Model,
    ModelKind,
    Provider,
    SearchEngine,
)
from routing.providers.hosted import CAPABILITIES
from routing.providers.registry import adapter_for

PROVIDER_FIELDS = (
    "name",
    "adapter",
    "credential_kind",
    "base_url",
    "api_key_env",
    "zdr",
    "retains_prompts",
    "trains_on_prompts",
    "region",
    "status",
    "is_local_standin",
    "allow_private_network",
    "docs_url",
)
MODEL_FIELDS = (
    "kind",
    "name",
    "description",
    "created",
    "context_length",
    "input_modalities",
    "output_modalities",
    "supported_parameters",
    "tokenizer",
    "task_scores",
    "coding_score",
    "quality_source",
)
PRICE_FIELDS = {
    "prompt": "price_prompt",
    "completion": "price_completion",
    "cached_input": "price_cached_input",
    "cache_write": "price_cache_write",
    "reasoning": "price_reasoning",
    "request": "price_request",
    "web_search": "price_web_search",  # USD per search the provider runs itself
}


PROVIDER_SLUG = re.compile(r"[a-z0-9][a-z0-9._:/-]{0,99}")
ENV_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
MAX_PRICE = Decimal("100000000")  # numeric(14, 6): below 10^8


class CatalogError(ValueError):
    """A catalog row the gateway would refuse; `field` names the offending field when there is one."""

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.field = field


def provider_problems(values: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, message) for every provider value the gateway could not use (admin forms and the loader)."""
    problems = []
    slug = values.get("slug")
    if slug is not None and not (isinstance(slug, str) and PROVIDER_SLUG.fullmatch(slug)):
        problems.append(("slug", "slug must be lowercase letters, digits and . _ : / - (at most 100)"))
    base_url = values.get("base_url")
    if base_url is not None:
        problem = _url_problem(base_url, "base_url")
        if problem:
            problems.append(("base_url", problem))
    env_var = values.get("api_key_env")
    if env_var and not (isinstance(env_var, str) and ENV_VAR.fullmatch(env_var)):
        problems.append(("api_key_env", "api_key_env must be an environment variable name (letters, digits, _)"))
    return problems


def model_problems(values: dict[str, Any]) -> list[tuple[str, str]]:
    problems = []
    model_id = values.get("id")
    if model_id is not None and not (
        isinstance(model_id, str)
        and model_id.count("/") == 1
        and _visible_ascii(model_id)
        and "" not in model_id.split("/")
    ):
        problems.append(("id", f"model id {model_id!r} must look like <author>/<slug> (printable, no spaces)"))
    if "context_length" in values and not _positive_int(values["context_length"]):
        problems.append(("context_length", "context_length must be a positive integer"))
    if "kind" in values and values["kind"] not in ModelKind.values:
        problems.append(("kind", f"kind must be one of {ModelKind.values}"))
    for name in ("input_modalities", "output_modalities", "supported_parameters"):
        if name in values and not _strings(values[name]):
            problems.append((name, f"{name} must be a list of strings"))
    return problems + quality_problems(values)


def _score(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1


def quality_problems(values: dict[str, Any]) -> list[tuple[str, str]]:
    """The routers' quality data: task_scores {task type: 0-1} over routing.models.TASK_TYPES, coding_score 0-1."""
    problems = []
    scores = values.get("task_scores")
    if scores is not None:
        if not isinstance(scores, dict):
            problems.append(("task_scores", "task_scores must be an object of task type -> score 0-1"))
        else:
            unknown = sorted(str(name) for name in scores if name not in TASK_TYPES)
            if unknown:
                problems.append(("task_scores", f"unknown task types {unknown}: known are {list(TASK_TYPES)}"))
            if not all(_score(value) for value in scores.values()):
                problems.append(("task_scores", "each task score must be a number from 0 to 1"))
    coding = values.get("coding_score")
    if coding is not None and not _score(coding):
        problems.append(("coding_score", "coding_score must be a number from 0 to 1"))
    return problems


def endpoint_problems(values: dict[str, Any]) -> list[tuple[str, str]]:
    problems = []
    upstream = values.get("upstream_model")
    if upstream is not None and not (isinstance(upstream, str) and upstream and _visible_ascii(upstream)):
        problems.append(("upstream_model", "upstream_model must be printable ASCII without spaces"))
    for field in PRICE_FIELDS.values():
        price = values.get(field)
        if price is None:
            continue
        try:
            price = Decimal(str(price))
        except (InvalidOperation, ValueError):
            problems.append((field, f"{field} must be a number"))
            continue
        if not price.is_finite() or price < 0 or price >= MAX_PRICE:
            problems.append((field, f"{field} must be a price between 0 and {MAX_PRICE} (USD per million tokens)"))
    if "context_length" in values and not _positive_int(values["context_length"]):
        problems.append(("context_length", "context_length must be a positive integer"))
    limit = values.get("max_completion_tokens")
    if limit is not None and not _positive_int(limit):
        problems.append(("max_completion_tokens", "max_completion_tokens must be a positive integer or empty"))
    for name in ("supported_parameters", "service_tiers"):
        if name in values and not _strings(values[name]):
            problems.append((name, f"{name} must be a list of strings"))
    adapter = values.get("adapter") or getattr(values.get("provider"), "adapter", None)  # the loader's, the admin's
    return problems + hosted_tools_problems(values.get("hosted_tools"), adapter)


def hosted_tools_problems(hosted: object, adapter: str | None) -> list[tuple[str, str]]:
    """An endpoint's `hosted_tools`: capabilities this gateway knows (routing.providers.hosted) that the provider's
    adapter can pass through."""
    if hosted is None:
        return []
    if not _strings(hosted) or set(hosted) - set(CAPABILITIES):
        return [("hosted_tools", f"hosted_tools must be a list of {', '.join(CAPABILITIES)}")]
    if adapter not in AdapterKind.values:
        return []  # the provider's adapter is checked on its own
    passable: frozenset[str] = getattr(adapter_for(str(adapter)), "hosted_tools", frozenset())
    if refused := sorted(set(hosted) - passable):
        return [("hosted_tools", f"the {adapter} adapter cannot pass {', '.join(refused)} through")]
    return []


def _url_problem(value: object, field: str) -> str | None:
    if not isinstance(value, str) or not value:
        return f"{field} must be an http or https URL"
    try:
        check_text(value, field, cap=MAX_URL_CHARS)
        url = urlsplit(value)
        url.port  # noqa: B018 -- raises ValueError on a port out of range
    except ShapeError as exc:
        return str(exc)
    except ValueError:
        return f"{field} is not a valid URL"
    if url.scheme not in ("http", "https") or not url.hostname:
        return f"{field} must be an http or https URL"
    return None


def _visible_ascii(value: str) -> bool:
    return all(0x21 <= ord(char) <= 0x7E for char in value)


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**31


def _strings(value: object) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _raise_first(problems: list[tuple[str, str]], where: str) -> None:
    if problems:
        field, message = problems[0]
        raise CatalogError(f"{where}: {message}", field=field)


@dataclass(frozen=True)
class CatalogLoadResult:
    providers: int
    models: int
    endpoints: int
    search_engines: int = 0


def catalog_load(*, data: dict[str, Any]) -> CatalogLoadResult:
    """Upsert providers (by slug), models (by id) and endpoints (by model and provider). Idempotent."""
    providers, models, endpoints = 0, 0, 0
    with transaction.atomic():
        for row in data.get("providers") or []:
            _require(row, "slug", "name", "adapter", "base_url")
            if row["adapter"] not in AdapterKind.values:
                raise CatalogError(f"provider {row['slug']}: unknown adapter {row['adapter']!r}")
            _raise_first(provider_problems(row), f"provider {row['slug']}")
            Provider.objects.update_or_create(slug=row["slug"], defaults=_pick(row, PROVIDER_FIELDS))
            providers += 1
        for row in data.get("models") or []:
            _require(row, "id", "name", "context_length")
            if row["id"].count("/") != 1:
                raise CatalogError(f"model id {row['id']!r} must look like <author>/<slug>")
            _raise_first(model_problems(row), f"model {row['id']}")
            model, _ = Model.objects.update_or_create(id=row["id"], defaults=_pick(row, MODEL_FIELDS))
            models += 1
            for endpoint_row in row.get("endpoints") or []:
                _endpoint_upsert(model, endpoint_row)
                endpoints += 1
        for row in data.get("search_engines") or []:
            _search_engine_upsert(row)
    engines = len(data.get("search_engines") or [])
    return CatalogLoadResult(providers=providers, models=models, endpoints=endpoints, search_engines=engines)


def _search_engine_upsert(row: dict[str, Any]) -> None:
    """A web search engine's price per search (`{engine, price_per_search, source?}`)."""
    _require(row, "engine", "price_per_search")
    engine = row["engine"]
    if not isinstance(engine, str) or not re.fullmatch(r"[a-z0-9-]{1,40}", engine):
        raise CatalogError(f"search engine {engine!r}: the name must be lower-case letters, digits or -")
    try:
        price = Decimal(str(row["price_per_search"]))
    except ArithmeticError:
        raise CatalogError(f"search engine {engine}: price_per_search must be a number") from None
    if not price.is_finite() or price < 0 or price >= 10**8:
        raise CatalogError(f"search engine {engine}: price_per_search must be 0 or more (USD per search)")
    defaults = {"price_per_search": price, "source": str(row.get("source") or "")[:300]}
    SearchEngine.objects.update_or_create(engine=engine, defaults=defaults)


def _endpoint_upsert(model: Model, row: dict[str, Any]) -> None:
    _require(row, "provider", "upstream_model", "pricing")
    provider = Provider.objects.filter(slug=row["provider"]).first()
    if provider is None:
        raise CatalogError(f"model {model.id}: unknown provider {row['provider']!r}")
    defaults = {
        "upstream_model": row["upstream_model"],
        "context_length": row.get("context_length", model.context_length),
        "max_completion_tokens": row.get("max_completion_tokens"),
        "quantization": row.get("quantization", "unknown"),
        "supported_parameters": row.get("supported_parameters", model.supported_parameters),
        "service_tiers": row.get("service_tiers", []),
        "hosted_tools": row.get("hosted_tools", []),
        "enabled": row.get("enabled", True),
    }
    for key, field in PRICE_FIELDS.items():
        value = row["pricing"].get(key)
        if value is not None:
            defaults[field] = Decimal(str(value))
        elif field in ("price_prompt", "price_completion"):
            raise CatalogError(f"model {model.id} @ {provider.slug}: pricing.{key} is required")
    _raise_first(endpoint_problems({**defaults, "adapter": provider.adapter}), f"model {model.id} @ {provider.slug}")
    Endpoint.objects.update_or_create(model=model, provider=provider, defaults=defaults)


def provider_credential_check(*, provider: Provider, plaintext: str) -> str:
    """The operator's credential's label, or ShapeError: the same text and shape checks as a customer's key
    (printable, header-safe; a Vertex service account as its JSON), so it can always be sent."""
    return operator_credential(kind=provider.credential_kind, value=plaintext).label


def provider_credential_set(*, provider: Provider, plaintext: str | None) -> Provider:
    """Seal (or with None, remove) the operator's credential for a provider. ShapeError for a credential
    that could not be sent (control characters, NUL, non-ASCII, whitespace, absurd length)."""
    if plaintext:
        label = provider_credential_check(provider=provider, plaintext=plaintext)
        sealed = seal(plaintext, aad=f"provider:{provider.pk}")
        provider.credential_sealed, provider.credential_key_id = sealed.blob, sealed.key_id
        provider.credential_label = label
    else:
        provider.credential_sealed, provider.credential_key_id, provider.credential_label = None, "", ""
    provider.save(update_fields=["credential_sealed", "credential_key_id", "credential_label", "updated_at"])
    return provider  # saving bumped the catalog version (routing.snapshot)


def _require(row: dict[str, Any], *names: str) -> None:
    missing = [name for name in names if row.get(name) in (None, "")]
    if missing:
        raise CatalogError(f"catalog entry {row.get('slug') or row.get('id') or row!r} lacks {', '.join(missing)}")


def _pick(row: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    return {name: row[name] for name in names if name in row}


def account_routing_update(*, account_id: UUID, changes: dict[str, Any]) -> AccountRoutingSettings:
    """Create or update an account's routing defaults (only the given fields)."""
    settings_row, _ = AccountRoutingSettings.objects.get_or_create(account_id=account_id)
    for name, value in changes.items():
        setattr(settings_row, name, value)
    settings_row.save()
    return settings_row


def provider_reseal_all() -> int:
    """Re-encrypt every operator credential under the keyring's newest key; returns how many changed."""
    newest, changed = current_key_id(), 0
    for provider in Provider.objects.exclude(credential_sealed=None).exclude(credential_key_id=newest):
        sealed = reseal(
            Sealed(key_id=provider.credential_key_id, blob=bytes(provider.credential_sealed or b"")),
            aad=f"provider:{provider.pk}",
        )
        provider.credential_sealed, provider.credential_key_id = sealed.blob, sealed.key_id
        provider.save(update_fields=["credential_sealed", "credential_key_id", "updated_at"])
        changed += 1
    return changed
