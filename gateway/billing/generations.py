"""Generation records: opened with the request's credit hold, completed once at settlement (billing.services),
read by `GET /generation`."""

import functools
import re
import secrets
import string
from dataclasses import asdict, dataclass, field, fields
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.db.models import CharField, TextField

from gateway.billing.models import Generation
from gateway.errors import NotFound

_ALPHABET = string.ascii_letters + string.digits
MSG_GENERATION_NOT_FOUND = "Generation not found"
_SURROGATES = re.compile("[\ud800-\udfff]")


def generation_id_new() -> str:
    """28 base-62 characters from 168 random bits (a digit per divmod: a seventh of the CPU of secrets.choice)."""
    number = int.from_bytes(secrets.token_bytes(21), "big")
    digits = []
    for _ in range(28):
        number, digit = divmod(number, 62)
        digits.append(_ALPHABET[digit])
    return "gen-" + "".join(digits)


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One attempt of a request, as `provider_responses` stores it (routing.attempts records them)."""

    provider_name: str
    status: int | None
    latency_ms: int
    is_byok: bool
    endpoint_id: int | None = None
    model_permaslug: str = ""
    error_type: str | None = None


ProviderAttempt = AttemptRecord  # the former name


@dataclass(frozen=True)
class GenerationRecord:
    id: str
    account_id: UUID
    api_key_id: int | None
    workspace_id: UUID | None
    requested_model: str
    model: str = ""
    provider: str = ""
    endpoint_id: int | None = None
    upstream_id: str = ""
    status: str = "completed"
    finish_reason: str = ""
    error_type: str = ""
    tokens_input: int = 0
    tokens_cached: int = 0
    tokens_cache_write: int = 0
    tokens_output: int = 0
    tokens_reasoning: int = 0
    cost: Decimal = Decimal(0)
    upstream_cost: Decimal = Decimal(0)
    is_byok: bool = False
    streamed: bool = False
    cancelled: bool = False
    latency_ms: int | None = None
    ttft_ms: int | None = None
    generation_time_ms: int | None = None
    session_id: str = ""
    service_tier: str = ""
    provider_responses: tuple[AttemptRecord, ...] = field(default_factory=tuple)
    usage_anomaly: dict[str, Any] | None = None  # see Generation.usage_anomaly
    guardrail_flags: list[dict[str, Any]] | None = None  # see Generation.guardrail_flags
    moderation_latency: int | None = None  # see Generation.moderation_latency
    plugins: dict[str, Any] | None = None  # see Generation.plugins
    router: dict[str, Any] | None = None  # see Generation.router


# Written when the request's hold opens (billing.services.credits_reserve); settlement writes the rest, except the
# cost, which is what was charged.
OPENING_FIELDS = ("id", "account_id", "api_key_id", "workspace_id", "requested_model")
OUTCOME_FIELDS = tuple(f.name for f in fields(GenerationRecord) if f.name not in (*OPENING_FIELDS, "cost"))


def generation_outcome(*, record: GenerationRecord) -> dict[str, Any]:
    """The columns settlement writes on the request's row (OUTCOME_FIELDS), as the database takes them."""
    data = _storable({name: getattr(record, name) for name in OUTCOME_FIELDS})
    data["provider_responses"] = [asdict(attempt) for attempt in record.provider_responses]
    return data


def _storable(data: dict[str, Any]) -> dict[str, Any]:
    """Text fields as the database takes them. Some come from the upstream (its response id): a NUL, a lone
    surrogate or a value longer than the column would fail the settlement, leaving the hold open and the record
    unwritten (streams), or turning a served answer into a 500 (JSON)."""
    for name, max_length in _text_columns():
        value = data.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            value = str(value)
        if value and ("\x00" in value or _SURROGATES.search(value)):
            value = _SURROGATES.sub("\ufffd", value.replace("\x00", ""))
        data[name] = value[:max_length] if max_length and len(value) > max_length else value
    return data


@functools.cache
def _text_columns() -> tuple[tuple[str, int | None], ...]:
    return tuple(
        (model_field.name, model_field.max_length)
        for model_field in Generation._meta.concrete_fields
        if isinstance(model_field, CharField | TextField)
    )


def generation_get(*, account_id: UUID, generation_id: str) -> Generation:
    generation = Generation.objects.filter(account_id=account_id, pk=generation_id).first()
    if generation is None:
        raise NotFound(MSG_GENERATION_NOT_FOUND)
    return generation
